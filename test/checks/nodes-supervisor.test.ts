// A run launched on several nodes has one supervisor per node: the judge weighs the one that needs
// the operator most, named by its node — a dead supervisor on node B is the critical it is on one host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
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
