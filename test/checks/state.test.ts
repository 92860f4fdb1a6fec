// The run state is honest within seconds: liveness before metrics.json, a stopped or dead rank named
// at once, the watchdog's action threshold kept apart from what the operator sees, and one reading of
// a stack dump's main-thread frame for the odd-rank rule and the Dumps panel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, staleVerdict } from '../../src/checks/index.js';
import { newestDumpSet } from '../../src/ui/dumps.js';
import { fixture, liveFixture, liveRun, proc, procs, series } from './helpers.js';

test('metrics.json written while a rank still lives is HALTING; HALTED / FINISHED only once none lives', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  run.ended = true; // the real trainer writes metrics.json on .HALT, then its ranks take a while to exit
  const both = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(both.runState, 'HALTING');
  assert.match(both.runStateWhy, /stopped at step 31 of 400, metrics\.json written; rank\(s\) 0,1 still alive/);
  assert.equal(both.advancing, false);
  const one = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(1)]), gpu: null });
  assert.equal(one.runState, 'HALTING', 'one rank left is still a live run');
  assert.equal(new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([]), gpu: null }).runState, 'HALTED');
  const fin = await fixture('single');
  const lastF = Math.max(...fin.ranks.map((r) => r.lastTs ?? 0));
  assert.equal(
    new Checker().evaluate({ now: lastF + 1000, run: fin, procs: procs([proc(0)]), gpu: null }).runState,
    'HALTING',
  );
  assert.equal(
    new Checker().evaluate({ now: lastF + 1000, run: fin, procs: procs([]), gpu: null }).runState,
    'FINISHED',
  );
});

test('a stopped rank: STALLED at once and named; the watchdog acts only past its own threshold', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0, 'S'), proc(1, 'T')]), gpu: null });
  assert.equal(ev.runState, 'STALLED', '1 s after the last step, with rank 1 stopped');
  assert.match(ev.runStateWhy, /^rank 1 \(pid 1001\) is stopped \(T\)/);
  assert.deepEqual(ev.culprit && { rank: ev.culprit.rank }, { rank: 1 });
  assert.equal(ev.stateHealth, 'critical');
  assert.equal(ev.advancing, false);
  assert.equal(ev.ranks.find((r) => r.rank === 1)?.health, 'critical');
  assert.equal(ev.ranks.find((r) => r.rank === 0)?.health, 'ok');
  assert.deepEqual(ev.actOn, [], 'nothing for the watchdog to act on yet');
  // resumed (SIGCONT): running again
  assert.equal(
    new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null }).runState,
    'RUNNING',
  );
  // a dead rank is named too
  const dead = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(dead.runState, 'STALLED');
  assert.equal(dead.culprit?.rank, 1);
  assert.ok(
    dead.actOn.some((a) => a.id === 'rank-died:1'),
    'a death is acted on at once, as before',
  );
});

test('ddp2 dumps were taken while steps advanced: no odd rank for the rule, nor for the Dumps panel', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  for (const d of run.dumps) d.rank = d.epoch === 1795305288 ? 0 : 1;
  const ev = new Checker().evaluate({ now: lastTs + 60_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(ev.runState, 'STALLED');
  assert.equal(ev.dumpOdd, null);
  assert.equal(ev.culprit, null);
  assert.match(ev.runStateWhy, /^all ranks silent since \d\d:\d\d:\d\d \(/);
  const set = newestDumpSet(run.dumps, new Map(), null); // the evaluation's dumpOdd, null above
  assert.ok(set && set.groups.length === 2);
  assert.ok(set!.groups.every((g) => !g.odd));
});

test('the same dumps taken after the step froze: the main-thread frame (not the dump handler) names rank 1, and the panel marks the same rank', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  for (const d of run.dumps) {
    d.rank = d.epoch === 1795305288 ? 0 : 1;
    d.mtimeMs = lastTs + 30_000;
    d.epoch = Math.floor((lastTs + 30_000) / 1000);
  }
  const ev = new Checker().evaluate({ now: lastTs + 60_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(ev.runState, 'STALLED');
  // rank 0 waits in all_reduce, rank 1 is in backward: the innermost frames under the handler
  assert.equal(ev.dumpOdd?.rank, 1);
  assert.match(ev.dumpOdd!.where, /^backward \(__init__\.py:197\)/);
  assert.match(ev.dumpOdd!.others, /^all_reduce \(distributed_c10d\.py:1541\)/);
  assert.equal(ev.culprit?.rank, 1);
  assert.match(ev.runStateWhy, /^rank 1's stack dump shows backward/);
  const set = newestDumpSet(run.dumps, new Map(), ev.dumpOdd!.rank);
  assert.deepEqual(
    set!.groups.filter((g) => g.odd).map((g) => g.members.map((m) => m.rank)),
    [[1]],
  );
});

test('STALE says the age and what was last seen', () => {
  const v = staleVerdict({ state: 'RUNNING', why: 'step 5' }, 17, 'host reconnecting, try 3');
  assert.equal(v.state, 'STALE');
  assert.match(v.why, /^no fresh data for 17s \(host reconnecting, try 3\); last seen RUNNING$/);
});

// The real trainer saves checkpoint_step{N}.pt on rank 0 when N % save_every == 0, after step N's
// progress/step_end heartbeat (contract §1.14): the heartbeat is silent for the whole save. 1 s steps,
// log_every 1, save_every 2000 of 50000 steps.
function atSave(step: number, t: number, o: { earlierSaveS?: number } = {}) {
  const run = liveRun({ step, t, total: 50000, stepTimeS: 1, logEvery: 1 });
  run.identity.train = { ...run.identity.train!, saveEvery: 2000 };
  if (o.earlierSaveS !== undefined) {
    // one point a second up to step `step` (at t), with the previous save's gap: the loss from
    // training.csv carries no time; the heartbeat's gate stats do
    const from = step - 2100,
      gapMs = o.earlierSaveS * 1000;
    const s = series(
      Array.from({ length: 2101 }, () => 1.05),
      { step0: from, t0: t - 2100 * 1000 - gapMs },
    );
    for (const p of s.recent) if (p.step > step - 2000) p.t! += gapMs;
    run.series.gateEntropy = s;
    run.series.loss = { ...s, recent: s.recent.map((p) => ({ ...p, t: null, value: 3 })) };
  }
  return run;
}

test('a pause at a save step: RUNNING and saying so, where the same pause at any other step is STALLED', () => {
  const t = 1_700_000_000_000;
  const ev = new Checker().evaluate({ now: t + 40_000, run: atSave(2000, t), procs: procs([proc(0)]), gpu: null });
  assert.equal(ev.runState, 'RUNNING', '40 s without a step at step 2000 (save_every 2000) is the save');
  assert.equal(
    ev.runStateWhy,
    'step 2000 of 50000; saving checkpoint_step2000.pt (save_every 2000) for 40s (overdue after 3m00s)',
  );
  assert.equal(ev.advancing, true);
  assert.equal(ev.noStepSinceMs, null, 'the header shows no "no step for"');
  assert.ok(!ev.alerts.some((a) => a.id === 'stall:run'), 'no critical stall alert for a save');
  // the checkpoint file appearing, still growing: the same, naming what is written
  const run = atSave(2000, t);
  run.checkpoints = [
    {
      name: 'checkpoint_step2000.pt',
      path: '/tmp/run/checkpoint_step2000.pt',
      step: 2000,
      size: 512 * 2 ** 20,
      mtimeMs: t + 39_000,
      fsdp: false,
      complete: false,
    },
  ];
  const w = new Checker().evaluate({ now: t + 40_000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(w.runState, 'RUNNING');
  assert.match(w.runStateWhy, /writing checkpoint_step2000\.pt \(512 MiB so far\) for 40s/);
  // an eval step (eval_every 500, after step 1500's heartbeat, contract §1.14): the same
  const ev1500 = atSave(1500, t);
  ev1500.identity.train = { ...ev1500.identity.train!, evalEvery: 500 };
  const e = new Checker().evaluate({ now: t + 40_000, run: ev1500, procs: procs([proc(0)]), gpu: null });
  assert.equal(e.runState, 'RUNNING');
  assert.match(e.runStateWhy, /^step 1500 of 50000; evaluating \(eval_every 500\) for 40s/);
  // the same 40 s at step 1999: overdue by the run's 1 s cadence
  const off = new Checker().evaluate({ now: t + 40_000, run: atSave(1999, t), procs: procs([proc(0)]), gpu: null });
  assert.equal(off.runState, 'STALLED');
  assert.ok(off.alerts.some((a) => a.id === 'stall:run' && a.severity === 'critical'));
});

test('a save step past its allowance is STALLED and says it was at a save; the watchdog threshold is unchanged', () => {
  const t = 1_700_000_000_000;
  // no earlier save measured: allowed up to the stall threshold (180 s), where the watchdog acts as before
  const late = new Checker().evaluate({ now: t + 200_000, run: atSave(2000, t), procs: procs([proc(0)]), gpu: null });
  assert.equal(late.runState, 'STALLED');
  assert.match(
    late.runStateWhy,
    /no step advance for 3m20s at step 2000.*at a save\/eval step \(saving checkpoint_step2000\.pt \(save_every 2000\)\), past the 3m00s allowed for it/,
  );
  assert.deepEqual(
    late.actOn.map((a) => a.id),
    ['stall:run'],
  );
  assert.match(late.alerts.find((a) => a.id === 'stall:run')!.title, /at a save\/eval step/);
  // the step-2000 save took 10 s: this one is allowed lateness 15 s + 3 × 10 s = 45 s
  const ok = new Checker().evaluate({
    now: t + 40_000,
    run: atSave(4000, t, { earlierSaveS: 10 }),
    procs: procs([proc(0)]),
    gpu: null,
  });
  assert.equal(ok.runState, 'RUNNING');
  assert.match(ok.runStateWhy, /for 40s \(overdue after 45s\)/);
  const over = new Checker().evaluate({
    now: t + 60_000,
    run: atSave(4000, t, { earlierSaveS: 10 }),
    procs: procs([proc(0)]),
    gpu: null,
  });
  assert.equal(over.runState, 'STALLED');
  assert.match(over.runStateWhy, /past the 45s allowed for it/);
  assert.deepEqual(over.actOn, [], 'the watchdog still waits for its own threshold');
});

test("a save step's allowance follows the newest three earlier saves, not the run's first ones", () => {
  const t = 1_700_000_000_000;
  // save_every 500, at step 2500 now; the saves at steps 500, 1000, 1500 and 2000 took 30, 5, 5 and
  // 10 s (a slow first save: a cold file system): allowed 15 s + 3 × 10 s, not 3 × 30 s
  const run = liveRun({ step: 2500, t, total: 50000, stepTimeS: 1, logEvery: 1 });
  run.identity.train = { ...run.identity.train!, saveEvery: 500 };
  const s = series(
    Array.from({ length: 2500 }, () => 1.05),
    { step0: 1, t0: t - 2499 * 1000 - 50_000 },
  );
  const gaps = new Map([
    [500, 30_000],
    [1000, 5000],
    [1500, 5000],
    [2000, 10_000],
  ]);
  let shift = 0;
  for (const p of s.recent) {
    shift += gaps.get(p.step - 1) ?? 0;
    p.t! += shift;
  }
  run.series.gateEntropy = s;
  run.series.loss = { ...s, recent: s.recent.map((p) => ({ ...p, t: null, value: 3 })) };
  const ok = new Checker().evaluate({ now: t + 40_000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(ok.runState, 'RUNNING');
  assert.match(ok.runStateWhy, /for 40s \(overdue after 45s\)/);
  const over = new Checker().evaluate({ now: t + 60_000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(over.runState, 'STALLED');
  assert.match(over.runStateWhy, /past the 45s allowed for it/);
});

test('a stopped rank at a save step is STALLED at once: a pause does not hide a stopped process', () => {
  const t = 1_700_000_000_000;
  const ev = new Checker().evaluate({ now: t + 2_000, run: atSave(2000, t), procs: procs([proc(0, 'T')]), gpu: null });
  assert.equal(ev.runState, 'STALLED');
  assert.match(ev.runStateWhy, /^rank 0 \(pid 1000\) is stopped \(T\)/);
});
