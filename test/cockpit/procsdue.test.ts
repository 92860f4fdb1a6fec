// The watchdog's process-table cadence (src/cockpit/procsdue.ts), pure: every round until the run
// visibly steps while RUNNING without alerts, then every 5 s — and again the round the step or the
// heartbeats stand still, anything is in view, or the run ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProcsCadence } from '../../src/cockpit/procsdue.js';
import { emptySnapshot, type RunSnapshot } from '../../src/trainer/run/snapshot.js';

const run = (step: number | null, beat: number | null, o: Partial<RunSnapshot> = {}): RunSnapshot => ({
  ...emptySnapshot('/r'),
  step,
  ranks: beat === null ? [] : [{ rank: 0, lastTs: beat } as RunSnapshot['ranks'][number]],
  ...o,
});
const calm = { runState: 'RUNNING' as const, alerts: [] };

test('the table every round until the run steps calmly, then every 5 s; at once when the step stands still', () => {
  const c = new ProcsCadence(5000);
  let t = 1_000_000;
  assert.equal(c.due(run(10, 1), null, t), true, 'first round');
  assert.equal(c.due(run(15, 2), null, (t += 1000)), true, 'no judgement yet');
  assert.equal(c.due(run(20, 3), calm, (t += 1000)), false, 'stepping, RUNNING, no alert: not due');
  assert.equal(c.due(run(25, 4), calm, (t += 1000)), false);
  assert.equal(c.due(run(30, 5), calm, (t += 1000)), false);
  assert.equal(c.due(run(35, 6), calm, (t += 1000)), false);
  assert.equal(c.due(run(40, 7), calm, (t += 1000)), true, '5 s since the last read');
  assert.equal(c.due(run(45, 8), calm, (t += 1000)), false);
  // a rank stops: the step and the heartbeats stand still — the very next round reads the table
  assert.equal(c.due(run(45, 8), calm, (t += 1000)), true, 'the step froze');
  assert.equal(c.due(run(45, 8), calm, (t += 1000)), true, 'still frozen: every round');
  // a new heartbeat record alone (the step unchanged) is movement too
  assert.equal(c.due(run(45, 9), calm, (t += 1000)), false);
});

test('anything in view reads the table every round: not RUNNING, an alert, the run ended, no step yet', () => {
  const warm = () => {
    const c = new ProcsCadence(5000);
    assert.equal(c.due(run(1, 1), null, 10_000), true);
    assert.equal(c.due(run(2, 2), calm, 11_000), false);
    return c;
  };
  assert.equal(warm().due(run(4, 4), { runState: 'STALLED', alerts: [] }, 12_000), true);
  assert.equal(warm().due(run(4, 4), { runState: 'RUNNING', alerts: [{} as never] }, 12_000), true);
  assert.equal(warm().due(run(4, 4, { ended: true }), calm, 12_000), true);
  assert.equal(warm().due(run(null, 4), calm, 12_000), true);
  assert.equal(warm().due(run(4, 4), calm, 12_000), false, 'the same, calm: not due');
  // a clock that went back: read
  assert.equal(warm().due(run(4, 4), calm, 9_000), true);
});
