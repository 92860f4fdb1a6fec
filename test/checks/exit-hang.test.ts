// A hung exit: the trainer wrote metrics.json (it left its loop) and a rank lives on. Seen live on the
// real trainer (2 ranks, gloo): a .HALT written while rank 0 saved its step-40 checkpoint; rank 1 had
// begun step 41 and waited in its all-reduce, rank 0 saw .HALT, wrote metrics.json and waited for
// rank 1. The header said HALTING with one info alert until rank 1's own watchdog wrote 3 min later.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Checker, healthExit } from '../../src/checks/index.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { RunModel } from '../../src/trainer/run/model.js';
import { hbLine, progressLine, tempDir } from '../trainer/run/helpers.js';
import { liveRun, proc, procs, series } from './helpers.js';

const T0 = 1_700_000_000_000;

const critical = (ev: { alerts: { severity: string; id: string }[] }) =>
  ev.alerts.filter((a) => a.severity === 'critical').map((a) => a.id);

test('metrics.json written and ranks alive a minute later: STALLED "the exit is hung", critical, exit 1 — HALTING before, HALTED once gone', () => {
  const run = liveRun({ step: 40, t: T0 - 2000 });
  run.ended = true;
  run.metricsMtimeMs = T0;
  run.metrics = { steps: 400 };
  run.control.halt = { present: true, content: 'halt: manual_stop root', mtimeMs: T0 - 3000 };
  const at = (s: number, alive = true) =>
    new Checker().evaluate({ now: T0 + s * 1000, run, procs: procs(alive ? [proc(0), proc(1)] : []), gpu: null });
  const soon = at(30);
  assert.equal(soon.runState, 'HALTING');
  assert.deepEqual(critical(soon), []);
  const late = at(61);
  assert.equal(late.runState, 'STALLED');
  assert.match(
    late.runStateWhy,
    /^stopped at step 40 of 1000, metrics\.json written 1m01s ago; rank\(s\) 0,1 still alive: the exit is hung$/,
  );
  assert.deepEqual(critical(late), ['exit:hung']);
  const alert = late.alerts.find((a) => a.id === 'exit:hung')!;
  assert.match(alert.title, /wrote metrics\.json at step 40 1m01s ago but rank\(s\) 0,1 still alive/);
  assert.match(alert.detail, /nsa-top stop/);
  assert.equal(healthExit(late), 1);
  // a finished run's exit hangs the same way
  run.control.halt = { present: false, content: null, mtimeMs: null };
  run.step = 1000;
  assert.equal(at(61).runState, 'STALLED');
  assert.equal(at(61, false).runState, 'FINISHED');
  assert.deepEqual(critical(at(61, false)), []);
});

test('a run whose checkpoints take 40 s to save: its final weights may take as long, so the exit is allowed 3 × 40 s', () => {
  // after metrics.json rank 0 saves the final weights (--save), the same state a checkpoint holds
  const t = T0 - 5000;
  const run = liveRun({ step: 2000, t, total: 50000, stepTimeS: 1, logEvery: 1 });
  run.identity.train = { ...run.identity.train!, saveEvery: 500 };
  const s = series(
    Array.from({ length: 2000 }, () => 1.05),
    { step0: 1, t0: t - 1999 * 1000 - 120_000 },
  );
  let shift = 0;
  for (const p of s.recent) {
    if (p.step - 1 > 0 && (p.step - 1) % 500 === 0) shift += 40_000;
    p.t! += shift;
  }
  run.series.gateEntropy = s;
  run.ended = true;
  run.metricsMtimeMs = T0;
  run.metrics = { steps: 50000 };
  const at = (sec: number) =>
    new Checker().evaluate({ now: T0 + sec * 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(at(90).runState, 'HALTING', 'within 3 × the 40 s saves');
  const late = at(121);
  assert.equal(late.runState, 'STALLED');
  assert.match(
    late.alerts.find((a) => a.id === 'exit:hung')!.detail,
    /allowed 2m00s after metrics\.json \(the final weights' save: 3 × the longest checkpoint save here, at least 1m00s\)/,
  );
});

test("the trainer's own watchdog writing after metrics.json does not make the run look unended", async () => {
  const t = tempDir();
  try {
    const now = Date.now() / 1000;
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    writeFileSync(
      hb,
      hbLine({ ts: now - 300, msg: 'boot', phase: 'start', pid: 100 }) +
        Array.from({ length: 40 }, (_, i) => progressLine(i + 1, now - 290 + i)).join(''),
    );
    writeFileSync(join(t.dir, 'metrics.json'), JSON.stringify({ steps: 400, loss_last: 5.7 }));
    const m = new RunModel(new LocalHost(), t.dir);
    assert.equal((await m.poll()).ended, true);
    // 3 minutes on, the trainer's in-process watchdog (a thread) writes its dump record
    appendFileSync(
      hb,
      hbLine({ ts: now + 180, msg: 'watchdog_dump', step: 0, pid: 100, path: join(t.dir, 'watchdog_stackdump_1.txt') }),
    );
    const s = await m.poll();
    assert.equal(s.ended, true, 'a watchdog record is not the loop running again');
    assert.ok(s.metricsMtimeMs !== null && Math.abs(s.metricsMtimeMs - now * 1000) < 5000);
    // a step record after it is: the loop runs (a relaunch into the same dir)
    appendFileSync(hb, progressLine(1, now + 181, {}, 200));
    assert.equal((await m.poll()).ended, false);
  } finally {
    t.done();
  }
});
