// Honest states around restarts and launches, on synthetic snapshots: a supervised restart is
// RESTARTING (the supervisor's words, how long it has waited), a launch booting is STARTING — neither
// raises "step frozen" or "run ended" — until the boot outlasts what the run's own history says a
// boot takes; alerts that need env.json wait for it; actions refuse what the state makes pointless.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crashedRank } from '../../src/checks/boot.js';
import { actionVerdicts, Checker, type CheckInput } from '../../src/checks/index.js';
import { healthExit } from '../../src/checks/index.js';
import type { SupervisorState } from '../../src/trainer/control/types.js';
import type { RunSnapshot } from '../../src/trainer/run/snapshot.js';
import { liveRun, proc, procs } from './helpers.js';

const T0 = 1_700_000_000_000;
const EXIT = T0 + 1000; // the supervisor saw the trainer die 1 s after its last step

/** A run that stepped to 40 (its segment booted 20 s before its first step), then was killed. */
function killedRun(bootTookS = 20): RunSnapshot {
  const run = liveRun({ step: 40, t: T0 });
  run.segments = [
    {
      index: 0,
      firstStep: 1,
      lastStep: 40,
      startTs: T0 - 100_000,
      bootTs: T0 - 100_000,
      firstStepTs: T0 - 100_000 + bootTookS * 1000,
      pid: 100,
      cause: 'start',
    },
  ];
  return run;
}

/** The same run once its restarted rank 0 wrote its boot record (no step yet). */
function rebooted(bootAt: number, bootTookS = 20): RunSnapshot {
  const run = killedRun(bootTookS);
  run.segments.push({
    index: 1,
    firstStep: 0,
    lastStep: 0,
    startTs: bootAt,
    bootTs: bootAt,
    firstStepTs: null,
    pid: 200,
    cause: 'boot',
  });
  Object.assign(run.ranks[0]!, { pid: 200, bootTs: bootAt, lastTs: bootAt, lastMsg: 'boot', lastStep: null });
  return run;
}

function sup(o: Partial<SupervisorState> = {}): SupervisorState {
  return {
    runDir: '/tmp/run',
    profile: 'ref',
    supervisor: { pid: 50, startTime: '1' },
    child: null,
    state: 'backoff',
    restarts: 1,
    maxRestarts: 3,
    exitCodes: [{ at: EXIT, code: null, signal: 'SIGKILL' }],
    lastCommand: [],
    resumeFrom: null,
    updatedAt: EXIT,
    note: 'trainer failed (SIGKILL); restart 1 of 3 in 2s',
    backoffUntil: EXIT + 2000,
    lastCause: 'SIGKILL',
    startCheckpoints: [{ at: T0 - 101_000, path: null, mtimeMs: null }],
    ...o,
  };
}

/** the supervisor started its new trainer at `at` */
const running = (at: number, o: Partial<SupervisorState> = {}) =>
  sup({
    state: 'running',
    note: 'restart 1 of 3',
    backoffUntil: null,
    child: { pid: 199, startTime: '9' },
    startCheckpoints: [
      { at: T0 - 101_000, path: null, mtimeMs: null },
      { at, path: '/tmp/run/checkpoint_step40.pt', mtimeMs: T0 },
    ],
    ...o,
  });

const critical = (ev: { alerts: { severity: string; id: string }[] }) =>
  ev.alerts.filter((a) => a.severity === 'critical').map((a) => a.id);

test('supervisor backing off after a SIGKILL: RESTARTING in its own words, no critical, exit 0 — without it, EXITED', () => {
  const input: CheckInput = { now: EXIT + 1500, run: killedRun(), procs: procs([]), gpu: null, supervisor: sup() };
  const ev = new Checker().evaluate(input);
  assert.equal(ev.runState, 'RESTARTING');
  assert.match(
    ev.runStateWhy,
    /^supervisor: trainer failed \(SIGKILL\); restart 1 of 3 in 2s \(due in 0\.5s\); waiting 1\.5s$/,
  );
  assert.equal(ev.stateHealth, 'info');
  assert.deepEqual(critical(ev), []);
  assert.equal(healthExit(ev), 0, 'a restart in progress is not an anomaly');
  assert.ok(ev.ranks.every((r) => r.health !== 'warning' && r.health !== 'critical'));
  // the same files with no supervisor (or a dead one) are a run that ended without finishing
  for (const s of [null, sup({ state: 'failed', supervisorGone: true })]) {
    const bare = new Checker().evaluate({ ...input, supervisor: s });
    assert.equal(bare.runState, 'EXITED');
    assert.ok(critical(bare).includes('exited'));
    assert.equal(healthExit(bare), 1);
  }
});

test('a rank killed under a supervisor with restarts left: RESTARTING while torchrun ends the group, no critical — STALLED if it never does', () => {
  // seen on an H100 (the real trainer, torch 2.11, 2 ranks supervised): SIGKILL of rank 0 showed 2 s
  // of STALLED with a critical "rank 0 process is gone" before torchrun exited and the supervisor said so
  const run = killedRun();
  run.ranks.push({
    ...run.ranks[0]!,
    rank: 1,
    pid: 101,
    file: 'heartbeat_rank1.jsonl',
    lastMsg: 'boot',
    lastStep: null,
  });
  const torchrun = { ...proc(9, 'S', { pid: 99 }).proc, argv: ['torchrun', '--nproc_per_node=2', 'train.py'] };
  const table = { ...procs([proc(1, 'S', { pid: 101 })]), launcher: torchrun };
  // the supervisor has seen no exit of this trainer yet: 0 of 2 restarts used
  const calm = sup({
    state: 'running',
    restarts: 0,
    maxRestarts: 2,
    exitCodes: [],
    note: null,
    backoffUntil: null,
    lastCause: null,
    child: { pid: 98, startTime: '8' },
  });
  const at = (ms: number, s: SupervisorState | null = calm) =>
    new Checker().evaluate({ now: T0 + ms, run, procs: table, gpu: null, supervisor: s });
  const ev = at(1500);
  assert.equal(ev.runState, 'RESTARTING');
  assert.match(
    ev.runStateWhy,
    /^rank 0 process gone: the launcher \(pid 99\) ends the group and the supervisor \(pid 50\) restarts it \(0 of 2 restarts used\)/,
  );
  assert.deepEqual(critical(ev), []);
  assert.equal(healthExit(ev), 0);
  // a launcher that has not ended the group 30 s after the death will not: the hang it looks like
  const late = at(31_000);
  assert.equal(late.runState, 'STALLED');
  assert.ok(critical(late).includes('rank-died:0'));
  // no supervisor, or none with a restart left: nobody restarts it — the fault, at once
  for (const s of [null, { ...calm, restarts: 2 }]) {
    const bare = at(1500, s);
    assert.equal(bare.runState, 'STALLED');
    assert.ok(critical(bare).includes('rank-died:0'));
  }
  // a moment later torchrun has ended the rest of the group and not yet exited: no rank lives, the
  // launcher does (seen on the CPU real trainer as one round of "RUNNING, rank processes not
  // identified") — the same teardown, naming every rank that goes
  // (rank 1 of the real trainer wrote only its boot record, long before: the group's newest beat counts)
  const bootOnly = { ...run, ranks: run.ranks.map((r) => (r.rank === 1 ? { ...r, lastTs: T0 - 100_000 } : r)) };
  const emptied = { ...procs([]), launcher: torchrun };
  const gone = new Checker().evaluate({ now: T0 + 2500, run: bootOnly, procs: emptied, gpu: null, supervisor: calm });
  assert.equal(gone.runState, 'RESTARTING');
  assert.match(gone.runStateWhy, /^rank 0,1 process gone: the launcher \(pid 99\) ends the group/);
  assert.deepEqual(critical(gone), []);
  // …but a trainer-like process nsa-top could not prove may be the ranks, alive: not a teardown
  const unproven = { ...emptied, unknown: [{ ...proc(1, 'R', { pid: 101 }).proc, env: {} }] };
  const maybe = new Checker().evaluate({ now: T0 + 2500, run: bootOnly, procs: unproven, gpu: null, supervisor: calm });
  assert.notEqual(maybe.runState, 'RESTARTING');
});

test('the new trainer booting: RESTARTING "restart 1 of 3 after SIGKILL; booting for …", no stall, until it steps', () => {
  const started = EXIT + 2100;
  const bootAt = started + 4000;
  const now = bootAt + 30_000; // 34 s after the start: past the run's 15 s lateness, within its boot budget
  const input: CheckInput = {
    now,
    run: rebooted(bootAt),
    procs: procs([proc(0, 'R', { pid: 200 }), proc(1, 'R', { pid: 201 })]),
    gpu: null,
    supervisor: running(started),
  };
  const ev = new Checker().evaluate(input);
  assert.equal(ev.runState, 'RESTARTING');
  assert.equal(ev.runStateWhy, 'restart 1 of 3 after SIGKILL; booting for 34s');
  assert.deepEqual(critical(ev), []);
  assert.ok(!ev.alerts.some((a) => a.id.startsWith('stall:')), 'no "step frozen"');
  assert.ok(
    ev.alerts.some((a) => a.id === 'supervisor:restarted'),
    'the supervisor still says it restarted',
  );
  assert.equal(ev.stallDeadline, started + 120_000, 'the boot budget: max(2m, 3 × 20 s)');
  // rank 1's replacement not up (or not proven) yet: its old heartbeat is the old trainer's, not a death
  const run2 = rebooted(bootAt);
  run2.ranks.push({
    ...run2.ranks[0]!,
    rank: 1,
    pid: 101,
    file: 'heartbeat_rank1.jsonl',
    bootTs: T0 - 100_000,
    lastTs: T0,
    lastMsg: 'beat',
    lastStep: 40,
    stepAdvancedTs: T0,
  });
  const half = new Checker().evaluate({ ...input, run: run2, procs: procs([proc(0, 'R', { pid: 200 })]) });
  assert.equal(half.runState, 'RESTARTING');
  assert.deepEqual(critical(half), []);
  // … but a rank of the new trainer that wrote after the restart and is gone died: a fault, said so
  run2.ranks[1]!.lastTs = bootAt + 1000;
  const died = new Checker().evaluate({ ...input, run: run2, procs: procs([proc(0, 'R', { pid: 200 })]) });
  assert.equal(died.runState, 'STALLED');
  assert.ok(critical(died).includes('rank-died:1'));
  // the same snapshot judged without the supervisor: the first-launch allowance, still not a stall
  const hand = new Checker().evaluate({ ...input, supervisor: null });
  assert.equal(hand.runState, 'STARTING');
  // the new ranks step: RUNNING
  const stepped = rebooted(bootAt);
  Object.assign(stepped.ranks[0]!, { lastStep: 1, stepAdvancedTs: now, lastTs: now, lastMsg: 'step_end' });
  stepped.step = 1;
  stepped.stepAdvancedTs = now;
  stepped.segments[1]!.firstStepTs = now;
  const after = new Checker().evaluate({ ...input, now: now + 500, run: stepped });
  assert.equal(after.runState, 'RUNNING');
});

test('a boot longer than the run says a boot takes is STALLED, critical, and acted on; a longer history allows more', () => {
  const started = EXIT + 2100;
  const bootAt = started + 4000;
  const at = (s: number, bootTookS = 20) =>
    new Checker().evaluate({
      now: started + s * 1000,
      run: rebooted(bootAt, bootTookS),
      procs: procs([proc(0, 'R', { pid: 200 }), proc(1, 'R', { pid: 201 })]),
      gpu: null,
      supervisor: running(started),
    });
  assert.equal(at(119).runState, 'RESTARTING');
  const over = at(125);
  assert.equal(over.runState, 'STALLED');
  assert.match(
    over.runStateWhy,
    /booting for 2m05s — longer than a boot takes here \(allowed 2m00s = max\(2m00s, 3 × the 20s/,
  );
  assert.deepEqual(critical(over), ['boot:overdue']);
  assert.ok(
    over.actOn.some((a) => a.id === 'boot:overdue'),
    'the watchdog acts on a boot that never steps',
  );
  // an earlier boot of 60 s: 3 × 60 s = 3 min allowed
  assert.equal(at(125, 60).runState, 'RESTARTING');
  assert.equal(at(181, 60).runState, 'STALLED');
});

test('first launch: STARTING with the generous first-boot allowance (10 min), then STALLED', () => {
  const boot = T0;
  const run = liveRun({ step: 0, t: boot });
  run.step = null;
  run.stepAdvancedTs = null;
  Object.assign(run.ranks[0]!, { bootTs: boot, lastTs: boot, lastMsg: 'boot', lastStep: null, stepAdvancedTs: null });
  run.segments = [
    { index: 0, firstStep: 0, lastStep: 0, startTs: boot, bootTs: boot, firstStepTs: null, pid: 100, cause: 'start' },
  ];
  const at = (s: number) =>
    new Checker().evaluate({ now: boot + s * 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  const five = at(300); // past the 180 s stall floor that used to call it STALLED
  assert.equal(five.runState, 'STARTING');
  assert.match(five.runStateWhy, /^rank\(s\) 0,1 alive, no step yet; booting for 5m00s$/);
  assert.deepEqual(critical(five), []);
  const late = at(601);
  assert.equal(late.runState, 'STALLED');
  assert.match(late.runStateWhy, /no earlier boot measured: a first boot may take 10m00s/);
  assert.deepEqual(critical(late), ['boot:overdue']);
});

test('a stall raised before the restart goes to the timeline when the restart begins, not on screen as clearing', () => {
  const c = new Checker();
  const hung = killedRun();
  const ps = procs([proc(0), proc(1)]);
  const before = c.evaluate({
    now: T0 + 40_000,
    run: hung,
    procs: ps,
    gpu: null,
    supervisor: running(T0 - 101_000, { restarts: 0, exitCodes: [] }),
  });
  assert.equal(before.runState, 'STALLED');
  assert.ok(critical(before).includes('stall:run'));
  const exitAt = T0 + 41_000;
  const back = c.evaluate({
    now: exitAt + 500,
    run: hung,
    procs: procs([]),
    gpu: null,
    supervisor: sup({ exitCodes: [{ at: exitAt, code: null, signal: 'SIGKILL' }], backoffUntil: exitAt + 2000 }),
  });
  assert.equal(back.runState, 'RESTARTING');
  assert.deepEqual(critical(back), []);
  assert.ok(
    back.history.some((h) => h.id === 'stall:run'),
    'the stall is kept in the timeline',
  );
});

test('identity: "launched with config X but the run used the toy default" waits for env.json', () => {
  const run = rebooted(EXIT + 5000);
  run.identity.config = null; // env.json not written yet: no CONFIG known
  delete run.files['env.json'];
  const input: CheckInput = {
    now: EXIT + 6000,
    run,
    procs: procs([proc(0, 'R', { pid: 200 })]),
    gpu: null,
    launched: { config: 'configs/m125.yaml' },
  };
  assert.ok(!new Checker().evaluate(input).alerts.some((a) => a.id === 'identity:config'));
  run.files['env.json'] = { offset: 10, size: 10, records: 1, parseErrors: 0, lastError: null, resets: 0 };
  const written = new Checker().evaluate(input).alerts.find((a) => a.id === 'identity:config');
  assert.equal(written?.severity, 'critical', 'once env.json says no CONFIG, the toy default is real');
});

test('actions that fit the state: no halt-after-checkpoint while STALLED; nothing to halt once over; no relaunch while restarting', () => {
  const base = { ranksAlive: 2, haltPresent: false, requestActive: false, supervisor: null };
  const stalled = actionVerdicts({ ...base, runState: 'STALLED', runStateWhy: 'step frozen' });
  assert.equal(stalled.haltNow.ok, true);
  assert.equal(stalled.haltAfterCheckpoint.ok, false);
  assert.match(stalled.haltAfterCheckpoint.why, /writes no checkpoint.*halt now, then SIGINT\/SIGKILL/);
  assert.equal(actionVerdicts({ ...base, runState: 'RUNNING', runStateWhy: 'step 5' }).haltAfterCheckpoint.ok, true);
  const fin = actionVerdicts({ ...base, ranksAlive: 0, runState: 'FINISHED', runStateWhy: 'reached step 100 of 100' });
  for (const v of [fin.haltNow, fin.haltAfterCheckpoint, fin.stop, fin.dump]) assert.equal(v.ok, false);
  assert.equal(fin.haltNow.why, 'the run is FINISHED (reached step 100 of 100): nothing to halt');
  // a FINISHED run is relaunched only with more steps than it trained (it would stop at once)
  assert.equal(fin.relaunch.ok, false);
  assert.match(fin.relaunch.why, /it trained all its steps .*nsa-top relaunch RUN_DIR --steps N/);
  const more = actionVerdicts({ ...base, ranksAlive: 0, runState: 'FINISHED', runStateWhy: 'x', stepsReached: 100 });
  assert.equal(
    actionVerdicts({
      ...base,
      ranksAlive: 0,
      runState: 'FINISHED',
      runStateWhy: 'x',
      stepsReached: 100,
      relaunchSteps: 200,
    }).relaunch.ok,
    true,
  );
  assert.match(more.relaunch.why, /\(N > 100\)$/);
  // a .HALT the ranks have not obeyed: h tracks it (escalation), but no checkpoint is coming
  const halting = actionVerdicts({ ...base, haltPresent: true, runState: 'HALTING', runStateWhy: '.HALT requested' });
  assert.equal(halting.haltNow.ok, true);
  assert.equal(halting.haltAfterCheckpoint.ok, false);
  const restarting = actionVerdicts({
    ...base,
    ranksAlive: 0,
    runState: 'RESTARTING',
    runStateWhy: 'supervisor: restart 1 of 3',
    supervisor: { state: 'backoff', supervisor: { pid: 50, startTime: '1' } },
  });
  assert.equal(restarting.relaunch.ok, false);
  assert.equal(restarting.haltNow.ok, true, 'a .HALT now keeps the supervisor from restarting');
  assert.equal(restarting.dump.ok, false);
  // a trainer whose supervisor died runs on: relaunch re-adopts it
  const orphan = actionVerdicts({
    ...base,
    runState: 'RUNNING',
    runStateWhy: 'step 9',
    supervisor: { state: 'failed', supervisor: { pid: 50, startTime: '1' }, supervisorGone: true },
  });
  assert.equal(orphan.relaunch.ok, true);
  assert.equal(actionVerdicts({ ...base, runState: 'RUNNING', runStateWhy: 'step 9' }).relaunch.ok, false);
});

test("between the trainer's exit and the supervisor saying so: RESTARTING while restarts are left, EXITED when none", () => {
  const input: CheckInput = {
    now: T0 + 800,
    run: killedRun(),
    procs: procs([]),
    gpu: null,
    supervisor: running(T0 - 101_000, { restarts: 0, exitCodes: [], note: null, lastCause: null }),
  };
  const ev = new Checker().evaluate(input);
  assert.equal(ev.runState, 'RESTARTING');
  assert.match(ev.runStateWhy, /^the trainer is gone; its supervisor \(pid 50\) restarts it \(0 of 3 restarts used\)/);
  assert.deepEqual(critical(ev), []);
  const spent = new Checker().evaluate({
    ...input,
    supervisor: running(T0 - 101_000, { restarts: 3, exitCodes: [{ at: T0 - 50_000, code: 1, signal: null }] }),
  });
  assert.equal(spent.runState, 'EXITED', 'no restart left: the supervisor is about to give up');
});

test("the rank whose death ended the trainer, from its launcher's words before the newest start", () => {
  const ref = [
    '[nsa-top supervisor] 2026-01-01T00:00:00.000Z start: nsa-top train --procs 2',
    '[launcher] rank 1 (pid 4242) exited with signal SIGKILL — tearing down the other ranks',
    '[nsa-top supervisor] 2026-01-01T00:01:00.000Z trainer exited: code 1',
    '[nsa-top supervisor] 2026-01-01T00:01:00.000Z trainer failed (exit 1); restart 1 of 2 in 1s',
    '[nsa-top supervisor] 2026-01-01T00:01:01.000Z start: nsa-top train --procs 2 --resume x.pt',
    '[train] boot rank 0',
  ];
  assert.deepEqual(crashedRank(ref), { rank: 1, how: 'SIGKILL' });
  const torchrun = [
    '[nsa-top supervisor] 2026-01-01T00:00:00.000Z start: torchrun --nproc_per_node 2 train.py',
    'Failures:',
    '  <NO_OTHER_FAILURES>',
    'Root Cause (first observed failure):',
    '[0]:',
    '  rank      : 1 (local_rank: 1)',
    '  exitcode  : -9 (pid: 5151)',
    '[nsa-top supervisor] 2026-01-01T00:01:00.000Z trainer exited: code 1',
  ];
  assert.deepEqual(crashedRank(torchrun), { rank: 1, how: 'SIGKILL' });
  // a rank line of an older trainer (before its supervisor start) is not this exit's
  assert.equal(crashedRank([ref[1]!, ...ref.slice(0, 1), ...ref.slice(2)]), null);
});

test('a relaunch whose ranks have written nothing yet is STARTING, not the old run HALTING — and accepts halt-after-checkpoint', () => {
  // seen live on the real trainer (torchrun, 2 ranks, CPU): halted at step 35 (metrics.json
  // written), relaunched; for the seconds the new ranks import torch, before their boot record, the
  // old metrics.json made the run "HALTING: stopped at step 35, metrics.json written; rank(s) 0,1
  // still alive", and `halt --after-checkpoint` was refused (2 of 6 tries)
  const run = killedRun();
  run.ended = true;
  run.metrics = { steps: 35 };
  const started = (ms: number | null) =>
    procs(
      [proc(0, 'S', { pid: 300 }), proc(1, 'S', { pid: 301 })].map((r) => ({
        ...r,
        proc: { ...r.proc, startedAtMs: ms, startedAtSlackMs: 500 },
      })),
    );
  const at = (startAt: number | null, nowS: number) =>
    new Checker().evaluate({ now: T0 + nowS * 1000, run, procs: started(startAt), gpu: null });
  const fresh = at(T0 + 10_000, 12);
  assert.equal(fresh.runState, 'STARTING');
  assert.match(fresh.runStateWhy, /^rank\(s\) 0,1 alive, no step yet \(no boot record yet\); booting for 2s$/);
  assert.deepEqual(critical(fresh), []);
  const v = actionVerdicts({
    ranksAlive: 2,
    haltPresent: false,
    requestActive: false,
    supervisor: null,
    runState: fresh.runState,
    runStateWhy: fresh.runStateWhy,
  });
  assert.equal(v.haltAfterCheckpoint.ok, true);
  // relaunched under a new supervisor, before torchrun has spawned its ranks: the old ranks are gone
  // because they stopped, not because a group is being torn down (seen live: "RESTARTING — rank 0,1
  // process gone: the launcher ends the group and the supervisor restarts it (0 of 3 restarts used)")
  const launcher = { ...proc(9).proc, pid: 299, startedAtMs: T0 + 9000, startedAtSlackMs: 500 };
  const relaunched = new Checker().evaluate({
    now: T0 + 12_000,
    run,
    procs: { ...procs([]), launcher },
    gpu: null,
    supervisor: sup({ state: 'running', restarts: 0, exitCodes: [], note: null, backoffUntil: null, lastCause: null }),
  });
  assert.equal(relaunched.runState, 'STARTING');
  assert.match(relaunched.runStateWhy, /^launcher pid 299 alive, no step yet \(no boot record yet\); booting for 3s$/);
  assert.deepEqual(critical(relaunched), []);
  // a boot past what a boot takes here (20 s measured, 2m00s allowed) is a stall
  assert.equal(at(T0 + 10_000, 10 + 121).runState, 'STALLED');
  assert.equal(at(T0 + 10_000, 10 + 119).runState, 'STARTING');
  // the same processes started before the newest record (or with no start time known) are the old
  // run's: they wrote it, and are stopping
  for (const s of [T0 - 30_000, T0 + 400, null]) {
    const old = at(s, 12);
    assert.equal(old.runState, 'HALTING', `start ${s}`);
    assert.match(old.runStateWhy, /^stopped at step 40 of 1000, metrics\.json written; rank\(s\) 0,1 still alive$/);
  }
});
