// The supervisor's published state judged by src/checks/supervisor.ts: giving up is critical,
// backoff and restart storms and restarts that never move the checkpoint forward are alerts, and a
// durable control request in force is shown to every cockpit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, evaluateOnce } from '../../src/checks/index.js';
import { requestMoot } from '../../src/checks/supervisor.js';
import { liveRun, proc, procs } from './helpers.js';
import type { SupervisorState } from '../../src/trainer/control/types.js';
import { emptySnapshot } from '../../src/trainer/run/snapshot.js';

const now = 1_800_000_000_000;
const sup = (o: Partial<SupervisorState>): SupervisorState => ({
  runDir: '/r',
  profile: 'p',
  supervisor: { pid: 1, startTime: '1' },
  child: null,
  state: 'running',
  restarts: 0,
  maxRestarts: 3,
  exitCodes: [],
  lastCommand: [],
  resumeFrom: null,
  updatedAt: now,
  ...o,
});
const alerts = (s: SupervisorState | null, requests: Parameters<typeof evaluateOnce>[0]['requests'] = []) =>
  evaluateOnce({ now, run: emptySnapshot('/r'), procs: null, gpu: null, supervisor: s, requests }).alerts.filter(
    (a) => a.rule === 'supervisor' || a.rule === 'request',
  );

test('a supervisor that gave up is a critical alert naming the cause and the budget', () => {
  const a = alerts(
    sup({
      state: 'failed',
      restarts: 3,
      note: 'trainer failed (exit 2) and all 3 restarts are used up',
      exitCodes: [{ at: now - 1000, code: 2, signal: null }],
      lastCause: 'exit 2',
    }),
  );
  const g = a.find((x) => x.id === 'supervisor:gave-up');
  assert.ok(g);
  assert.equal(g.severity, 'critical');
  assert.match(g.title, /gave up: trainer failed \(exit 2\)/);
  assert.match(g.detail, /3 of 3 restarts used; last exit: exit 2/);
});

test('backoff shows the restart count, the budget and when; a restarted run keeps an info line', () => {
  const b = alerts(
    sup({
      state: 'backoff',
      restarts: 1,
      backoffUntil: now + 30_000,
      lastCause: 'signal SIGKILL',
      exitCodes: [{ at: now - 500, code: null, signal: 'signal SIGKILL' }],
    }),
  );
  assert.match(b.find((x) => x.id === 'supervisor:backoff')!.title, /failed \(signal SIGKILL\): restart 1 of 3 in 30s/);
  const r = alerts(
    sup({
      state: 'running',
      restarts: 2,
      lastCause: 'exit 1',
      exitCodes: [{ at: now - 60_000, code: 1, signal: null }],
    }),
  );
  assert.match(r.find((x) => x.id === 'supervisor:restarted')!.title, /2 of 3 restarts used/);
  assert.deepEqual(alerts(sup({ state: 'running' })), [], 'a first start is no news');
});

test('a restart storm and restarts that never move the checkpoint forward are alerts', () => {
  const exits = [1, 2, 3].map((i) => ({ at: now - i * 60_000, code: 1, signal: null }));
  const starts = [0, 1, 2, 3].map((i) => ({
    at: now - (4 - i) * 60_000,
    path: '/o/checkpoint_step400.pt',
    mtimeMs: 123,
  }));
  const a = alerts(sup({ state: 'running', restarts: 3, maxRestarts: 5, exitCodes: exits, startCheckpoints: starts }));
  assert.match(a.find((x) => x.id === 'supervisor:storm')!.title, /failed 3 times in 10m00s/);
  assert.match(a.find((x) => x.id === 'supervisor:no-progress')!.title, /^3 restarts without the checkpoint advancing/);
  // the same checkpoint NAME rewritten by a later segment (new mtime) is progress
  const moved = starts.map((s, i) => ({ ...s, mtimeMs: 123 + i }));
  assert.equal(
    alerts(sup({ state: 'running', restarts: 3, maxRestarts: 5, startCheckpoints: moved })).find(
      (x) => x.id === 'supervisor:no-progress',
    ),
    undefined,
  );
});

test('a durable request in force is shown to every cockpit', () => {
  const who = { user: 'alice', tty: null, tmux: null, host: 'b', pid: 1 };
  const a = alerts(null, [
    {
      id: 'q1',
      kind: 'halt-after-checkpoint',
      ts: now - 5000,
      who,
      state: 'pending',
      owner: { kind: 'agent', pid: 77, startTime: '9' },
      graceS: 300,
      note: 'waiting for a complete checkpoint written after …',
      updatedAt: now,
    },
  ]);
  assert.equal(a.length, 1);
  assert.match(a[0]!.title, /halt after the next checkpoint requested by alice/);
  assert.match(a[0]!.detail, /agent pid 77/);
  assert.deepEqual(
    alerts(null, [
      {
        id: 'q1',
        kind: 'halt-after-checkpoint',
        ts: now - 5000,
        who,
        state: 'cancelled',
        owner: null,
        graceS: 300,
        note: 'cancelled',
        updatedAt: now,
      },
    ]),
    [],
  );
});

test('a request whose carrier is gone is critical (issue 24 item 5) and says who takes it over or how to drop it', () => {
  const who = { user: 'alice', tty: null, tmux: null, host: 'b', pid: 1 };
  const req = {
    id: 'q1',
    kind: 'halt-after-checkpoint' as const,
    ts: now - 5000,
    who,
    state: 'pending' as const,
    owner: { kind: 'agent' as const, pid: 77, startTime: '9' },
    graceS: 300,
    note: 'waiting',
    updatedAt: now,
  };
  const a = evaluateOnce({
    now,
    run: emptySnapshot('/r'),
    procs: null,
    gpu: null,
    requests: [req],
    requestOwnerAlive: false,
  }).alerts.filter((x) => x.rule === 'request');
  assert.equal(a.length, 1);
  assert.equal(a[0]!.severity, 'critical');
  assert.match(a[0]!.title, /lost its carrier \(agent pid 77 is gone\): nothing will write \.HALT/);
  assert.match(a[0]!.detail, /a live cockpit or watchdog on the training box hands it to a new agent within a round/);
  assert.match(a[0]!.detail, /nsa-top halt RUN --cancel/);
});

test('an orphaned request is moot once the run has ended and nothing runs: closed with why, the critical to the timeline; never while a rank runs', () => {
  const who = { user: 'alice', tty: null, tmux: null, host: 'b', pid: 1 };
  const req = {
    id: 'q2',
    kind: 'halt-after-checkpoint' as const,
    ts: now - 60_000,
    who,
    state: 'pending' as const,
    owner: { kind: 'supervisor' as const, pid: 77, startTime: '9' },
    graceS: 300,
    note: 'waiting for the next checkpoint',
    updatedAt: now - 60_000,
  };
  const running = emptySnapshot('/r');
  const ended = emptySnapshot('/r');
  ended.ended = true;
  const c = new Checker();
  const look = (t: number, run: typeof ended, p: ReturnType<typeof procs> | null) =>
    c.evaluate({ now: t, run, procs: p, gpu: null, requests: [req], requestOwnerAlive: false });
  // while ranks run, the request is in force and its carrier is gone: critical
  const live = look(now, running, procs([proc(0, 'S'), proc(1, 'S')]));
  assert.ok(live.alerts.some((a) => a.id === 'request-orphan:q2' && a.severity === 'critical'));
  // metrics.json written but a rank still runs: still in force, still critical (never dropped silently)
  const tail = look(now + 1000, ended, procs([proc(1, 'S')]));
  assert.ok(tail.alerts.some((a) => a.id === 'request-orphan:q2' && a.severity === 'critical' && !a.clearing));
  assert.ok(!tail.alerts.some((a) => a.id === 'request-moot:q2'));
  // ended, nothing runs: moot, saying why; the critical is in the timeline, not on screen
  const over = look(now + 2000, ended, procs([]));
  const moot = over.alerts.find((a) => a.id === 'request-moot:q2');
  assert.equal(moot?.severity, 'info');
  assert.match(moot!.title, /halt request of alice is moot: the run ended before it fired \(nothing left to halt\)/);
  assert.match(moot!.detail, /carrier \(supervisor pid 77\) is gone.*no rank or launcher process runs.*--cancel/);
  assert.ok(!over.alerts.some((a) => a.id.startsWith('request-orphan:')), 'no critical left on screen');
  assert.ok(
    over.history.some((h) => h.id === 'request-orphan:q2'),
    'the critical is in the timeline',
  );
  // a one-shot look (status) agrees; without a process table, the files alone decide
  const once = evaluateOnce({ now, run: ended, procs: null, gpu: null, requests: [req], requestOwnerAlive: false });
  assert.deepEqual(
    once.alerts.filter((a) => a.rule === 'request').map((a) => [a.id, a.severity]),
    [['request-moot:q2', 'info']],
  );
});

test('requestMoot, which also keeps an observer from handing a moot request to a new carrier', () => {
  const over = { ended: true, procsKnown: true, ranksAlive: 0, launcherAlive: false };
  assert.equal(requestMoot(over), true);
  assert.equal(requestMoot({ ...over, ranksAlive: 1 }), false, 'a rank runs: in force');
  assert.equal(requestMoot({ ...over, launcherAlive: true }), false, 'the launcher runs: in force');
  assert.equal(requestMoot({ ...over, ended: false }), false, 'not ended: in force');
  assert.equal(requestMoot({ ...over, procsKnown: false, ranksAlive: 0 }), true, 'the files alone say it ended');
});

test('a dead supervisor (its file still says running) is critical: crashes will not be restarted; a warning once the run ended', () => {
  const dead = sup({
    state: 'failed',
    supervisorGone: true,
    supervisor: { pid: 4321, startTime: '7' },
    restarts: 1,
    maxRestarts: 2,
    note: 'the supervisor (pid 4321) is gone (it said running); its trainer (pid 99) still runs unsupervised',
    exitCodes: [{ at: now - 60_000, code: null, signal: 'SIGKILL' }],
    lastCause: 'signal SIGKILL',
    updatedAt: now - 600_000,
  });
  const a = alerts(dead);
  const d = a.find((x) => x.id === 'supervisor:dead');
  assert.ok(d, JSON.stringify(a));
  assert.equal(d.severity, 'critical');
  assert.equal(d.title, 'supervisor dead (pid 4321 gone): crashes will not be restarted');
  assert.match(d.detail, /1 of 2 restarts used; last exit: signal SIGKILL/);
  // its file was written when it last changed state, long before it died: the alert runs from the
  // look that found it gone (live: "dead … 51s ago" 7 s after the SIGKILL), the file's time is told
  assert.equal(d.since, now);
  assert.match(d.detail, /its state file was last written at \d\d:\d\d:\d\d/);
  // not also "gave up": it did not give up, it was killed
  assert.ok(!a.some((x) => x.id === 'supervisor:gave-up'));
  const ended = emptySnapshot('/r');
  ended.ended = true;
  const e = evaluateOnce({ now, run: ended, procs: null, gpu: null, supervisor: dead }).alerts.find(
    (x) => x.id === 'supervisor:dead',
  );
  assert.equal(e?.severity, 'warning');
});

test("one halt grace: the run's grace (CheckInput.haltGraceS) is what the .HALT rule counts, and the default is the profile default", async () => {
  const { DEFAULT_THRESHOLDS } = await import('../../src/checks/index.js');
  const { DEFAULT_HALT_GRACE_S } = await import('../../src/trainer/control/types.js');
  assert.equal(DEFAULT_THRESHOLDS.haltGraceS, DEFAULT_HALT_GRACE_S);
});

test('a pending halt after the next checkpoint in a hung run cannot fire: a warning saying so and what to do instead', () => {
  const who = { user: 'alice', tty: null, tmux: null, host: 'b', pid: 1 };
  const t = now;
  const req = {
    id: 'q3',
    kind: 'halt-after-checkpoint' as const,
    ts: t - 20_000,
    who,
    state: 'pending' as const,
    owner: { kind: 'supervisor' as const, pid: 77, startTime: '9' },
    graceS: 300,
    note: 'waiting for a complete checkpoint written after …',
    updatedAt: t - 20_000,
  };
  const look = (state: 'S' | 'T', supervisor: SupervisorState | null = null) =>
    evaluateOnce({
      now: t + 1000,
      run: liveRun({ step: 40, t }),
      procs: procs([proc(0, 'S'), proc(1, state)]),
      gpu: null,
      requests: [req],
      requestOwnerAlive: true,
      supervisor,
    });
  const calm = look('S').alerts.find((a) => a.id === 'request:q3');
  assert.equal(calm?.severity, 'info');
  const hung = look('T');
  assert.equal(hung.runState, 'STALLED');
  const a = hung.alerts.find((x) => x.id === 'request:q3');
  assert.equal(a?.severity, 'warning');
  assert.match(a!.title, /requested by alice at .* cannot fire: the run is stalled and writes no checkpoint/);
  // no supervisor: the cockpit's halt window escalates; `nsa-top halt` would only write .HALT
  assert.match(
    a!.detail,
    /Halt now instead \(h → n: its halt window offers SIGINT, then SIGKILL, after the grace; nsa-top halt RUN writes \.HALT only\).*--cancel/,
  );
  // a live supervisor: `nsa-top stop` is the command that escalates (`nsa-top halt RUN` was advised
  // here, and it never escalates)
  const sv = look('T', sup({ state: 'running', supervisor: { pid: 77, startTime: '9' } })).alerts.find(
    (x) => x.id === 'request:q3',
  );
  assert.match(
    sv!.detail,
    /Halt now instead \(h → n, or nsa-top stop RUN: the supervisor writes \.HALT, then SIGINT, then SIGKILL/,
  );
  assert.doesNotMatch(sv!.detail, /nsa-top halt RUN\)/);
});

test("a request whose carrier died, left by the run's live supervisor (an earlier run's): a warning that it will not fire, not the orphan critical", () => {
  const who = { user: 'alice', tty: null, tmux: null, host: 'b', pid: 1 };
  const req = {
    id: 'q4',
    kind: 'halt-after-checkpoint' as const,
    ts: now - 600_000,
    who,
    state: 'pending' as const,
    owner: { kind: 'supervisor' as const, pid: 77, startTime: '9' },
    graceS: 300,
    note: 'waiting',
    updatedAt: now - 600_000,
  };
  const look = (s: SupervisorState | null) =>
    evaluateOnce({
      now,
      run: emptySnapshot('/r'),
      procs: null,
      gpu: null,
      supervisor: s,
      requests: [req],
      requestOwnerAlive: false,
    }).alerts.filter((x) => x.rule === 'request');
  const live = look(sup({ supervisor: { pid: 88, startTime: '12' } }));
  assert.deepEqual(
    live.map((a) => [a.id, a.severity]),
    [['request-unclaimed:q4', 'warning']],
  );
  assert.match(
    live[0]!.title,
    /will not fire: its carrier \(supervisor pid 77\) is gone and the run's supervisor \(pid 88\) does not carry it/,
  );
  assert.match(live[0]!.detail, /--carry-requests.*--cancel/);
  // no live supervisor (none, or the dead one itself): the orphan critical, taken over by an agent
  assert.deepEqual(
    look(null).map((a) => [a.id, a.severity]),
    [['request-orphan:q4', 'critical']],
  );
  assert.deepEqual(
    look(sup({ supervisor: { pid: 88, startTime: '12' }, supervisorGone: true, state: 'failed' })).map((a) => a.id),
    ['request-orphan:q4'],
  );
});
