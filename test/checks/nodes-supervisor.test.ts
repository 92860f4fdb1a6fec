// A run launched on several nodes has one supervisor per node: the judge weighs the one that needs
// the operator most, named by its node — a dead supervisor on node B is the critical it is on one host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
import { causeRank } from '../../src/checks/boot.js';
import { nodesSupervisor } from '../../src/checks/supervisor.js';
import { supervisorState } from '../helpers/supervisor.js';
import { liveRun, proc, procs } from './helpers.js';

const SUP = { pid: 7, startTime: '99' };

test("several nodes' supervisors: the gone one, then the one that gave up, then a restart, speaks for the run, named by its node", () => {
  const running = supervisorState('/r', SUP, { state: 'running' });
  const gone = {
    ...supervisorState('/r', SUP, { state: 'running' }),
    state: 'failed' as const,
    supervisorGone: true,
    note: 'the supervisor (pid 7) is gone',
  };
  const backoff = supervisorState('/r', SUP, { state: 'backoff', note: 'restart 1 of 2 in 3s' });
  assert.equal(nodesSupervisor([]), null);
  assert.equal(nodesSupervisor([{ label: 'b', state: null }]), null);
  // one node with a state: as it is
  assert.equal(
    nodesSupervisor([
      { label: 'local', state: running },
      { label: 'b', state: null },
    ]),
    running,
  );
  const two = nodesSupervisor([
    { label: 'local', state: running },
    { label: 'root@10.9.0.2:2222', state: gone },
  ])!;
  assert.equal(two.supervisorGone, true);
  assert.match(two.note!, /^node root@10\.9\.0\.2:2222: the supervisor \(pid 7\) is gone/);
  assert.equal(
    nodesSupervisor([
      { label: 'local', state: backoff },
      { label: 'b', state: running },
    ])!.state,
    'backoff',
  );
  // the judge: critical "supervisor dead", whichever node it was on
  const T0 = 1_700_000_000_000;
  const ev = new Checker().evaluate({
    now: T0 + 1000,
    run: liveRun({ step: 40, t: T0 }),
    procs: procs([proc(0, 'S')]),
    gpu: null,
    supervisor: two,
  });
  const dead = ev.alerts.find((a) => a.id === 'supervisor:dead');
  assert.equal(dead?.severity, 'critical');
  assert.match(dead.detail, /node root@10\.9\.0\.2:2222/);
});

test('the rank that went first over the nodes: each supervisor saw only its own ranks; the hard end, else the earliest, named by its node', () => {
  const exited = (firstGone: { rank: number; pid: number; at: number; how: string | null }, exitAt: number) =>
    supervisorState('/r', SUP, {
      state: 'backoff',
      restarts: 1,
      exitCodes: [{ at: exitAt, code: 1, signal: null }],
      firstGone,
      startCheckpoints: [{ at: 1000, path: null, mtimeMs: null }],
    });
  // kill -9 of rank 1 on node B; node A's rank 0 then failed its collective (exit 1), a little later
  const a = exited({ rank: 0, pid: 8, at: 9300, how: 'exit 1' }, 9500);
  const b = exited({ rank: 1, pid: 8, at: 9200, how: 'SIGKILL' }, 9400);
  const merged = nodesSupervisor([
    { label: 'local', state: a },
    { label: 'root@b', state: b },
  ])!;
  assert.deepEqual(merged.firstGone, { rank: 1, pid: 8, at: 9200, how: 'SIGKILL', node: 'root@b' });
  assert.equal(causeRank(merged, 9500, null)?.text, 'rank 1 on node root@b went first (SIGKILL)');
  // neither a hard end: the earliest; an earlier trainer's record is not this exit's
  const c = exited({ rank: 1, pid: 8, at: 9250, how: null }, 9400);
  assert.equal(
    nodesSupervisor([
      { label: 'local', state: a },
      { label: 'root@b', state: c },
    ])!.firstGone?.node,
    'root@b',
  );
  const old = exited({ rank: 1, pid: 8, at: 500, how: 'SIGKILL' }, 9400);
  assert.equal(
    nodesSupervisor([
      { label: 'local', state: a },
      { label: 'root@b', state: old },
    ])!.firstGone?.node,
    'local',
  );
});

test("status --node: each node's row names its last exit and the rank its supervisor saw go first", async () => {
  const { formatNodeSupervisors, nodeSupervisorsJson } = await import('../../src/commands/status-nodes.js');
  const b = supervisorState('/r', SUP, {
    state: 'backoff',
    restarts: 1,
    exitCodes: [{ at: 9400, code: null, signal: 'SIGTERM' }],
    lastCause: 'rank gone',
    firstGone: { rank: 1, pid: 4242, at: 9200, how: 'SIGKILL' },
    startCheckpoints: [{ at: 1000, path: null, mtimeMs: null }],
  });
  const rows = [
    { label: 'local', nodeRank: 0, dir: '/r/nodes/0', state: supervisorState('/r', SUP), error: null },
    { label: 'root@b', nodeRank: 1, dir: '/r/nodes/1', state: b, error: null },
  ];
  const json = nodeSupervisorsJson(rows);
  assert.equal(json[0]!.lastExit, null);
  assert.deepEqual(json[1]!.lastExit, {
    at: 9400,
    code: null,
    signal: 'SIGTERM',
    cause: 'rank gone',
    firstGone: { rank: 1, pid: 4242, at: 9200, how: 'SIGKILL', node: null },
  });
  assert.match(
    formatNodeSupervisors(rows),
    /root@b \(node_rank 1\): backoff \(supervisor pid 7, restarts 1\/2\); last exit rank gone \(rank 1, pid 4242, went first: SIGKILL\)$/m,
  );
});
