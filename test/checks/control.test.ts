// The control verdicts of src/checks/control.ts: the two "supervisor" predicates differ on purpose
// ('stopping' is in charge but restarts nothing), and the escalation gate waits the grace.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  activeRequest,
  alertAcks,
  escalationBlocked,
  procRunning,
  supervisorInCharge,
  supervisorRestarts,
} from '../../src/checks/control.js';
import type { ActionRecord, ControlRequest, SupervisorState } from '../../src/trainer/control/types.js';

const PHASES: SupervisorState['state'][] = ['starting', 'running', 'backoff', 'stopping', 'halted', 'exited', 'failed'];

test('a stopping supervisor is in charge of the run but restarts nothing; an ended one is neither', () => {
  assert.deepEqual(PHASES.filter(supervisorInCharge), ['starting', 'running', 'backoff', 'stopping']);
  assert.deepEqual(PHASES.filter(supervisorRestarts), ['starting', 'running', 'backoff']);
  assert.equal(supervisorInCharge(null), false);
  assert.equal(supervisorRestarts(undefined), false);
});

test('SIGINT/SIGKILL wait for a .HALT and its grace; a zombie is not a running rank', () => {
  const base = { haltPresent: true, haltSinceMs: 1_000_000, graceS: 60, ranksAlive: 2, now: 1_000_000 + 30_000 };
  assert.match(escalationBlocked(base)!, /30s of their 1m00s grace left/);
  assert.equal(escalationBlocked({ ...base, now: 1_000_000 + 60_000 }), null);
  assert.match(escalationBlocked({ ...base, haltPresent: false })!, /no \.HALT yet/);
  assert.equal(escalationBlocked({ ...base, ranksAlive: 0 }), 'no rank is running');
  assert.equal(procRunning({ state: 'Z' }), false);
  assert.equal(procRunning({ state: 'S' }), true);
});

test('the request in force is the newest pending one; acks are the ok ones, oldest first', () => {
  const req = (id: string, state: ControlRequest['state']) => ({ id, state }) as ControlRequest;
  assert.equal(activeRequest([req('a', 'pending'), req('b', 'halt-written'), req('c', 'done')])?.id, 'b');
  assert.equal(activeRequest([req('a', 'cancelled')]), null);
  const ack = (ts: number, alert: string, result: ActionRecord['result']) =>
    ({ ts, action: 'ack', result, target: { alert } }) as unknown as ActionRecord;
  assert.deepEqual(
    alertAcks([ack(3, 'x', 'ok'), ack(1, 'y', 'ok'), ack(2, 'z', 'refused')]).map((a) => a.id),
    ['y', 'x'],
  );
});
