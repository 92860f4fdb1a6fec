// The straggler score (src/checks/straggler.ts) through the one judge, Checker.evaluate: per-rank CPU,
// state and wait channel over a window of process-table looks. No process: unit tier.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Checker } from '../../src/checks/index.js';
import { activityOf, lookScores, windowScores } from '../../src/checks/straggler.js';
import type { ProcState } from '../../src/remote/types.js';
import { liveRun, proc, procs } from './helpers.js';
import { supervisorState } from '../helpers/supervisor.js';

const T0 = 1_700_000_000_000;

/** one evaluation at look `i`: rank → [cpu %, state, wchan] */
function look(ch: Checker, i: number, ranks: [number, ProcState, string | null][]) {
  const t = T0 + i * 1000;
  const run = liveRun({ step: 100 + i, t, stepTimeS: 0.2 });
  run.ranks.push({ ...run.ranks[0]!, rank: 1, pid: 1001, file: 'heartbeat_rank1.jsonl', lastMsg: 'beat' });
  const p = procs(
    ranks.map(([cpu, st, w], r) => {
      const x = proc(r, st, { cpuPct: cpu });
      x.proc.wchan = w;
      return x;
    }),
  );
  p.at = t;
  return ch.evaluate({ now: t, run, procs: p, gpu: null });
}

test('scores: min cpu / cpu per look, a stopped rank 0, nothing when no rank is busy', () => {
  const s = lookScores(
    new Map([
      [0, 60],
      [1, 90],
    ]),
    new Set(),
    10,
  )!;
  assert.equal(s.get(0), 1);
  assert.ok(Math.abs(s.get(1)! - 2 / 3) < 1e-9);
  assert.equal(
    lookScores(
      new Map([
        [0, 2],
        [1, 3],
      ]),
      new Set(),
      10,
    ),
    null,
    'idle or hung: no pace',
  );
  const stopped = lookScores(
    new Map([
      [0, 0],
      [1, 0],
    ]),
    new Set([1]),
    10,
  )!;
  assert.equal(stopped.get(1), 0);
  assert.equal(stopped.get(0), 1);
  assert.equal(
    lookScores(
      new Map([
        [0, 0],
        [1, 0],
      ]),
      new Set([0, 1]),
      10,
    ),
    null,
    'all stopped holds nobody',
  );
  // window scores are ratios of sums: two equal ranks whose looks jitter both score 1
  const w = windowScores([
    {
      cpu: new Map([
        [0, 70],
        [1, 60],
      ]),
      stopped: new Set<number>(),
    },
    {
      cpu: new Map([
        [0, 60],
        [1, 70],
      ]),
      stopped: new Set<number>(),
    },
    {
      cpu: new Map([
        [0, 0],
        [1, 0],
      ]),
      stopped: new Set([1]),
    },
  ]);
  assert.equal(w.get(0), 1);
  assert.ok(Math.abs(w.get(1)! - 2 / 3) < 1e-9, 'stopped in 1 of 3 looks');
  // a stopped look's lost CPU does not make its waiting peer look slow once it runs again (live: a
  // kill -STOP pulse on rank 1 of the real trainer scored rank 0 at 0.65 before this)
  const after = windowScores([
    {
      cpu: new Map([
        [0, 14],
        [1, 13],
      ]),
      stopped: new Set([1]),
    },
    {
      cpu: new Map([
        [0, 12],
        [1, 12],
      ]),
      stopped: new Set<number>(),
    },
    {
      cpu: new Map([
        [0, 13],
        [1, 13],
      ]),
      stopped: new Set<number>(),
    },
  ]);
  assert.equal(after.get(0), 1);
  assert.equal(activityOf('R', null), 'busy');
  assert.equal(activityOf('S', 'futex_wait_queue'), 'waiting');
  assert.equal(activityOf('T', 'do_signal_stop'), 'stopped');
});

test('a rank computing 1.5× while its peer waits is named after 5 looks; a clean run never', () => {
  const slow = new Checker();
  let ev = look(slow, 0, [
    [62, 'S', 'futex_wait_queue'],
    [95, 'R', null],
  ]);
  assert.equal(ev.straggler.straggler, null, 'one look is not a window');
  assert.equal(ev.straggler.ranks[1]!.activity, 'busy');
  for (let i = 1; i < 4; i++) {
    ev = look(slow, i, [
      [60, 'S', 'futex_wait_queue'],
      [92, 'R', null],
    ]);
    assert.equal(ev.straggler.straggler, null, `look ${i} of 5`);
  }
  ev = look(slow, 4, [
    [65, 'S', 'futex_wait_queue'],
    [96, 'R', null],
  ]);
  assert.equal(ev.straggler.straggler?.rank, 1, ev.straggler.basis);
  assert.deepEqual(ev.straggler.max?.rank, 0);
  assert.equal(ev.straggler.min?.rank, 1);
  assert.ok(ev.straggler.min!.score < 0.7 && ev.straggler.min!.score > 0.6, String(ev.straggler.min!.score));
  const al = ev.alerts.find((a) => a.rule === 'straggler');
  assert.ok(al, 'a warning names the rank');
  assert.equal(al.rank, 1);
  assert.equal(al.severity, 'warning');
  assert.match(al.title, /rank 1 is the straggler/);
  assert.match(al.detail, /rank 0 waiting in futex_wait_queue/);
  assert.equal(ev.ranks.find((r) => r.rank === 1)?.health, 'warning');

  // a clean run's jitter (±10 %) stays quiet, look after look
  const clean = new Checker();
  const jitter = [
    [70, 64],
    [62, 69],
    [66, 71],
    [73, 66],
    [68, 63],
    [61, 67],
  ];
  // … and so are the states: mostly both running, now and then one waits for the other
  const states: [ProcState, ProcState][] = [
    ['R', 'R'],
    ['S', 'R'],
    ['R', 'R'],
    ['R', 'S'],
    ['R', 'R'],
    ['R', 'R'],
  ];
  for (const [i, [a, b]] of jitter.entries()) {
    const [sa, sb] = states[i]!;
    ev = look(clean, i, [
      [a!, sa, sa === 'S' ? 'futex_wait_queue' : null],
      [b!, sb, sb === 'S' ? 'futex_wait_queue' : null],
    ]);
    assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.min)}`);
    assert.ok(!ev.alerts.some((x) => x.rule === 'straggler'));
  }
  assert.ok(ev.straggler.min!.score > 0.85);

  // a clean 100-step reference run beside the test suite on a 2-core box, as sampled from /proc
  // every 0.5 s (rank 0 also logs every 5 steps, evaluates and saves): looks swing ±30 %, and the
  // first eight sum to a score of 0.82 for rank 0 — which is as fast as its peer
  const busy = new Checker();
  const sampled: [number, number, string][] = [
    [68, 94, 'SS'],
    [78, 54, 'RR'],
    [94, 60, 'SS'],
    [72, 66, 'RR'],
    [70, 80, 'RR'],
    [92, 64, 'RS'],
    [86, 52, 'RS'],
    [92, 66, 'RR'],
    [60, 90, 'RR'],
    [58, 90, 'SR'],
  ];
  const wait = (st: string) => (st === 'S' ? 'futex_wait_queue' : null);
  let lowest = 1;
  for (const [i, [a, b, st]] of sampled.entries()) {
    ev = look(busy, i, [
      [a, st[0] as ProcState, wait(st[0]!)],
      [b, st[1] as ProcState, wait(st[1]!)],
    ]);
    lowest = Math.min(lowest, ev.straggler.ranks[0]!.score ?? 1);
    assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks[0])}`);
    assert.ok(!ev.alerts.some((x) => x.rule === 'straggler'));
  }
  assert.ok(lowest < 0.85, `the sum alone would have named rank 0 (${lowest})`);
  assert.ok(ev.straggler.ranks[0]!.scoreHigh! > 0.85, JSON.stringify(ev.straggler.ranks[0]));
});

test('rank 0 writes the progress: its logging is not a straggler, falling well under its usual score is', () => {
  // live on the real trainer (rank 0 logs every step), a clean run's rank 0 scored 0.79-0.83 over
  // full windows, its bound 0.84: named until it was judged against its own best window too
  const ch = new Checker();
  const jitter = [64, 60, 66, 61, 63, 65, 59, 62];
  let ev;
  for (let i = 0; i < 40; i++) {
    ev = look(ch, i, [
      [jitter[i % jitter.length]!, 'R', null],
      [50, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
    assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks[0])}`);
  }
  const r0 = ev!.straggler.ranks[0]!;
  assert.ok(r0.score! < 0.85 && r0.scoreHigh! < 0.85, JSON.stringify(r0));
  assert.ok(Math.abs(r0.usualScore! - r0.score!) < 0.05, JSON.stringify(r0));
  // rank 1 straggles for a window (rank 0 scores 1 meanwhile) and recovers: rank 0's logging is
  // still its usual, not a fall
  for (let i = 40; i < 100; i++) {
    const slow1 = i < 60;
    ev = look(ch, i, [
      [jitter[i % jitter.length]!, slow1 ? 'S' : 'R', slow1 ? 'futex_wait_queue' : null],
      [slow1 ? 110 : 50, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
    if (i === 59) assert.equal(ev.straggler.straggler?.rank, 1, JSON.stringify(ev.straggler.ranks));
    if (i >= 80) assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks[0])}`);
  }
  // then rank 0 slows down (a throttled core): 0.55 against its usual ~0.8
  let at = -1;
  for (let i = 100; i < 130 && at < 0; i++) {
    ev = look(ch, i, [
      [90, 'R', null],
      [50, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
    if (ev.straggler.straggler) at = i;
  }
  assert.ok(at > 0, JSON.stringify(ev!.straggler.ranks[0]));
  assert.equal(ev!.straggler.straggler!.rank, 0);
  assert.equal(ev!.straggler.straggler!.evidence, 'cpu');
  // and back to its logging pace: cleared
  for (let i = 130; i < 160; i++)
    ev = look(ch, i, [
      [jitter[i % jitter.length]!, 'R', null],
      [50, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
  assert.equal(ev!.straggler.straggler, null, JSON.stringify(ev!.straggler.ranks[0]));
});

test("rank 0's usual score is not its boot window, nor windows in which a peer was named (both named it live for its logging)", () => {
  const jitter = [64, 60, 66, 61, 63, 65, 59, 62];
  const clean = (ch: Checker, i: number) =>
    look(ch, i, [
      [jitter[i % jitter.length]!, 'R', null],
      [50, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
  // a run's first window: booting, both ranks equally busy (rank 0 does not log yet), then its logging
  const boot = new Checker();
  for (let i = 0; i < 20; i++)
    look(boot, i, [
      [90, 'R', null],
      [88, 'R', null],
    ]);
  for (let i = 20; i < 60; i++) {
    const ev = clean(boot, i);
    assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks[0])}`);
  }
  // clean logging (two windows), rank 1 straggles for three (named; rank 0 scores 1 meanwhile), recovers
  const peer = new Checker();
  for (let i = 0; i < 40; i++) clean(peer, i);
  let named1 = false;
  for (let i = 40; i < 100; i++) {
    const ev = look(peer, i, [
      [jitter[i % jitter.length]!, 'S', 'futex_wait_queue'],
      [110, i % 3 ? 'R' : 'S', i % 3 ? null : 'futex_wait_queue'],
    ]);
    named1 ||= ev.straggler.straggler?.rank === 1;
  }
  assert.ok(named1, 'rank 1 was named');
  for (let i = 100; i < 160; i++) {
    const ev = clean(peer, i);
    if (i >= 120) assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks[0])}`);
  }
});

test('hysteresis: a named straggler stays named between the thresholds and clears above the clear score', () => {
  const ch = new Checker({ stragglerWindowS: 3.5, stragglerSamples: 3 });
  for (let i = 0; i < 5; i++)
    look(ch, i, [
      [50, 'S', 'futex_wait_queue'],
      [100, 'R', null],
    ]);
  // the window slides onto looks scoring ~0.88 (both ranks busy): between 0.85 and 0.92, still named
  let ev;
  for (let i = 5; i < 10; i++)
    ev = look(ch, i, [
      [88, 'R', null],
      [100, 'R', null],
    ]);
  assert.equal(ev!.straggler.straggler?.rank, 1, JSON.stringify(ev!.straggler.min));
  for (let i = 10; i < 15; i++)
    ev = look(ch, i, [
      [99, 'R', null],
      [100, 'R', null],
    ]);
  assert.equal(ev!.straggler.straggler, null);
  assert.ok(!ev!.alerts.some((x) => x.rule === 'straggler' && x.clearing === undefined), 'the alert is clearing');
});

test('a stopped rank (kill -STOP) scores 0 while its peer sleeps; a hung run (all asleep) names nobody', () => {
  const ch = new Checker();
  let ev;
  for (let i = 0; i < 5; i++)
    ev = look(ch, i, [
      [0, 'S', 'futex_wait_queue'],
      [0, 'T', 'do_signal_stop'],
    ]);
  assert.equal(ev!.straggler.straggler?.rank, 1);
  assert.equal(ev!.straggler.ranks[1]!.score, 0);
  assert.match(ev!.straggler.straggler!.why, /stopped \(state T\) in 5/);
  const hung = new Checker();
  for (let i = 0; i < 6; i++)
    ev = look(hung, i, [
      [1, 'S', 'futex_wait_queue'],
      [0, 'S', 'futex_wait_queue'],
    ]);
  assert.equal(ev!.straggler.straggler, null);
  assert.match(ev!.straggler.basis, /no rank busy/);
});

test('one look (status) gives no score and says why; one rank has nothing to compare', () => {
  const run = liveRun({ step: 5, t: T0 });
  const p = procs([proc(0, 'R', { cpuPct: 0 }), proc(1, 'S')]);
  p.ranks[0]!.proc.cpuPct = null;
  p.ranks[1]!.proc.cpuPct = null;
  let ev = new Checker().evaluate({ now: T0, run, procs: p, gpu: null });
  assert.equal(ev.straggler.ranks.length, 2);
  assert.equal(ev.straggler.ranks[0]!.score, null);
  assert.match(ev.straggler.basis, /CPU needs two/);
  // … with the ranks' CPU since they started: a score from that one long look, never a name
  Object.assign(p.ranks[0]!.proc, { cpuTotalS: 60, ageS: 100 });
  Object.assign(p.ranks[1]!.proc, { cpuTotalS: 90, ageS: 100 });
  ev = new Checker().evaluate({ now: T0, run, procs: p, gpu: null });
  assert.match(ev.straggler.basis, /CPU share since each rank started/);
  assert.equal(ev.straggler.ranks[0]!.score, 1);
  assert.ok(Math.abs(ev.straggler.ranks[1]!.score! - 2 / 3) < 1e-9);
  assert.deepEqual(ev.straggler.min?.rank, 1);
  assert.equal(ev.straggler.straggler, null, 'one look never names');
  ev = new Checker().evaluate({ now: T0, run, procs: procs([proc(0, 'R')]), gpu: null });
  assert.match(ev.straggler.basis, /fewer than 2 live ranks/);
});

test('state evidence: a rank starved of CPU (same CPU per step, runnable while its peer sleeps) is named; a rank whose peer holds it up is not', () => {
  // live on the real trainer, rank 1 niced to 19 and pinned to one core: 21 of 39 looks found it
  // running while rank 0 slept in futex_do_wait, 3 the other way; CPU shares equal
  const starved = new Checker();
  let ev;
  const pattern: [ProcState, ProcState][] = [
    ['S', 'R'],
    ['R', 'R'],
    ['S', 'R'],
    ['S', 'R'],
    ['R', 'R'],
    ['S', 'R'],
    ['S', 'R'],
    ['R', 'R'],
    ['S', 'R'],
    ['S', 'R'],
  ];
  for (const [i, [a, b]] of pattern.entries()) {
    ev = look(starved, i, [
      [10, a, a === 'S' ? 'futex_do_wait' : null],
      [10, b, null],
    ]);
    if (i < 9) assert.equal(ev.straggler.straggler, null, `the states alone need 10 looks (look ${i + 1})`);
  }
  assert.equal(ev!.straggler.straggler?.rank, 1, JSON.stringify(ev!.straggler.ranks));
  assert.ok(ev!.straggler.ranks[1]!.score! > 0.95, 'its CPU score alone would not see it');
  assert.match(ev!.straggler.straggler!.why, /working while every peer waited in 70 % of 10 looks/);
  assert.equal(ev!.straggler.straggler!.evidence, 'state');
  assert.match(
    ev!.alerts.find((a) => a.rule === 'straggler')!.title,
    /rank 1 is the straggler: it runs while the other ranks wait \(70 % of looks\)/,
  );
  // a clean run beside a CPU hog, its ranks taking turns on the two cores: rank 0 found running
  // while rank 1 slept in 5 of 10 looks, never the other way — a coin does that 3 % of the time
  const turns = new Checker();
  for (let i = 0; i < 10; i++)
    ev = look(turns, i, [
      [33, 'R', null],
      [33, i % 2 ? 'S' : 'R', i % 2 ? 'do_epoll_wait' : null],
    ]);
  assert.equal(ev!.straggler.ranks[0]!.holdPct, 50);
  assert.equal(ev!.straggler.straggler, null, JSON.stringify(ev!.straggler.ranks));
  // the false alarm seen live: rank 0 (it logs every step) at CPU score ~0.8 for a few looks while
  // rank 1 is the one found running as rank 0 waits — not named: the looks scatter too much
  const guard = new Checker();
  const cpu0 = [15, 11, 14, 12, 15, 13];
  for (let i = 0; i < 6; i++)
    ev = look(guard, i, [
      [cpu0[i]!, i === 2 ? 'S' : 'R', i === 2 ? 'futex_do_wait' : null],
      [10, 'R', null],
    ]);
  assert.ok(ev!.straggler.min!.score < 0.85 && ev!.straggler.min!.rank === 0);
  assert.equal(ev!.straggler.straggler, null, JSON.stringify(ev!.straggler.ranks));
  // a rank that spends more CPU every look but is found waiting while its peer works, look after
  // look, waits for that peer (a polling collective burns CPU): not named by its CPU …
  const waiter = (held: boolean) => {
    const ch = new Checker();
    let e;
    for (let i = 0; i < 6; i++)
      e = look(ch, i, [
        [10, 'R', null],
        [13, held ? 'S' : 'R', held ? 'futex_do_wait' : null],
      ]);
    return e!;
  };
  ev = waiter(true);
  assert.ok(ev.straggler.ranks[1]!.scoreHigh! < 0.85, JSON.stringify(ev.straggler.ranks[1]));
  assert.equal(ev.straggler.straggler, null, JSON.stringify(ev.straggler.ranks));
  // … while the same CPU with nobody found waiting names it
  assert.equal(waiter(false).straggler.straggler?.rank, 1);
});

test('a restarting, booting or broken group names no straggler: the survivors of a kill -9 wait on a peer that is gone', () => {
  // live (the real trainer under the supervisor): after kill -9 of rank 0 the header said RESTARTING
  // (torchrun ending the group) while the straggler rule said "rank 1 is the straggler". Here 3 ranks:
  // rank 0 gone, rank 1 busy and rank 2 asleep in the collective — the pattern that names a rank on
  // a stepping run (the test above), for 8 looks within the teardown window
  const survivors = (ch: Checker, i: number, o: { dead: boolean; supervised: boolean }) => {
    const t = T0 + i * 1000;
    const run = liveRun({ step: 100, t: T0, stepTimeS: 0.2 });
    for (const r of [1, 2])
      run.ranks.push({ ...run.ranks[0]!, rank: r, pid: 1000 + r, file: `heartbeat_rank${r}.jsonl`, lastMsg: 'beat' });
    const ranks = [proc(1, 'R', { cpuPct: 95 }), proc(2, 'S', { cpuPct: 60 })];
    ranks[1]!.proc.wchan = 'futex_wait_queue';
    if (!o.dead) ranks.unshift(proc(0, 'S', { cpuPct: 60 }));
    const torchrun = { ...proc(9, 'S', { pid: 99 }).proc, argv: ['torchrun', '--nproc_per_node=3', 'train.py'] };
    const p = { ...procs(ranks), launcher: torchrun, at: t };
    const supervisor = o.supervised
      ? supervisorState('/tmp/run', { pid: 50, startTime: '1' }, { child: { pid: 98, startTime: '8' } })
      : null;
    return ch.evaluate({ now: t + 500, run, procs: p, gpu: null, supervisor });
  };
  const restarting = new Checker();
  let ev;
  for (let i = 0; i < 8; i++) {
    ev = survivors(restarting, i, { dead: true, supervised: true });
    assert.equal(ev.runState, 'RESTARTING', ev.runStateWhy);
    assert.equal(ev.straggler.straggler, null, `look ${i}: ${JSON.stringify(ev.straggler.ranks)}`);
    assert.ok(!ev.alerts.some((a) => a.rule === 'straggler'), `look ${i}: no straggler alert`);
  }
  assert.match(ev!.straggler.basis, /^the run is RESTARTING: no straggler/);
  assert.equal(ev!.straggler.ranks.length, 2, 'the rows are still shown');
  // no supervisor: the dead rank is the fault (STALLED, the stall rules name rank 0), still no straggler
  const broken = new Checker();
  for (let i = 0; i < 8; i++) ev = survivors(broken, i, { dead: true, supervised: false });
  assert.equal(ev!.runState, 'STALLED');
  assert.equal(ev!.straggler.straggler, null);
  assert.match(ev!.straggler.basis, /^rank 0 process gone/);

  // a launch booting (no step since rank 0's boot): STARTING, rank 1 loading while rank 0 waits —
  // boot work differs by rank, nobody is named; the same pattern once the run steps is named
  const boot = (ch: Checker, i: number, stepping: boolean) => {
    const t = T0 + i * 1000;
    const run = liveRun({ step: stepping ? 10 + i : 0, t, stepTimeS: 0.2 });
    Object.assign(run.ranks[0]!, { bootTs: T0 - 2000 });
    if (!stepping) {
      Object.assign(run.ranks[0]!, { lastMsg: 'boot', lastStep: null, stepAdvancedTs: null });
      run.step = null;
      run.stepAdvancedTs = null;
    }
    run.ranks.push({ ...run.ranks[0]!, rank: 1, pid: 1001, file: 'heartbeat_rank1.jsonl', lastMsg: 'boot' });
    const ranks = [proc(0, 'S', { cpuPct: 60 }), proc(1, 'R', { cpuPct: 95 })];
    ranks[0]!.proc.wchan = 'futex_wait_queue';
    return ch.evaluate({ now: t, run, procs: { ...procs(ranks), at: t }, gpu: null });
  };
  const starting = new Checker();
  for (let i = 0; i < 8; i++) {
    ev = boot(starting, i, false);
    assert.equal(ev.runState, 'STARTING', ev.runStateWhy);
    assert.equal(ev.straggler.straggler, null, `boot look ${i}`);
  }
  // it steps: a fresh window (the boot's looks do not count), named once it holds 5 stepping looks
  for (let i = 8; i < 12; i++) assert.equal(boot(starting, i, true).straggler.straggler, null, `step look ${i}`);
  ev = boot(starting, 12, true);
  assert.equal(ev.runState, 'RUNNING');
  assert.equal(ev.straggler.straggler?.rank, 1, ev.straggler.basis);
});
