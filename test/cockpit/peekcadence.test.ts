// The looping watchdog's process-table cadence (src/cockpit/peekcadence.ts), pure: with the ranks
// refreshed every round, the table every 15 s while the run is RUNNING with nothing in view, the
// step moving or not; without, ProcsCadence's rules (every round the step stands still); and at
// once, whatever the cadence, the round a proven rank's own stat says it stopped, died or runs again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CALM_TABLE_MS, PeekedCadence } from '../../src/cockpit/peekcadence.js';
import { emptySnapshot, type RunSnapshot } from '../../src/trainer/run/snapshot.js';

const run = (step: number | null, beat: number, o: Partial<RunSnapshot> = {}): RunSnapshot => ({
  ...emptySnapshot('/r'),
  step,
  ranks: [{ rank: 0, lastTs: beat } as RunSnapshot['ranks'][number]],
  ...o,
});
const calm = { runState: 'RUNNING' as const, alerts: [] };

/** the rounds (1 s apart, after a first read) that read the table */
function reads(c: PeekedCadence, rounds: number, stepOf: (i: number) => number, refreshed: boolean): number[] {
  let t = 1_000_000;
  c.due(run(stepOf(0), stepOf(0)), null, false, refreshed, t);
  const out: number[] = [];
  for (let i = 1; i <= rounds; i++)
    if (c.due(run(stepOf(i), stepOf(i)), calm, false, refreshed, (t += 1000))) out.push(i);
  return out;
}

test('ranks refreshed every round: the table every 15 s, whether the step moves every round or stands still between logs', () => {
  assert.equal(CALM_TABLE_MS, 15_000);
  assert.deepEqual(
    reads(new PeekedCadence(), 31, (i) => i * 5, true),
    [15, 30],
    'stepping every round',
  );
  assert.deepEqual(
    reads(new PeekedCadence(), 31, (i) => Math.floor(i / 10) * 50, true),
    [15, 30],
    'a log every 10 s',
  );
});

test("not refreshed (another host): ProcsCadence's rules, every round the step stands still", () => {
  assert.deepEqual(
    reads(new PeekedCadence(), 31, (i) => i * 5, false),
    [15, 30],
    'stepping every round',
  );
  const slow = reads(new PeekedCadence(), 12, (i) => Math.floor(i / 4) * 20, false);
  // a log every 4 s: the rounds in between read (the step stood still), the rounds it moved do not
  assert.deepEqual(slow, [1, 2, 3, 5, 6, 7, 9, 10, 11]);
});

test('a rank whose stat says it stopped (or died, or runs again) reads the table that round, and the cadence counts from it', () => {
  const c = new PeekedCadence();
  let t = 1_000_000;
  let step = 0;
  c.due(run(step, step), null, false, true, t);
  assert.equal(c.due(run((step += 5), step), calm, false, true, (t += 1000)), false, 'calm: not due');
  assert.equal(c.due(run((step += 5), step), calm, true, false, (t += 1000)), true, 'the look saw a change: due now');
  for (let i = 0; i < 14; i++)
    assert.equal(c.due(run((step += 5), step), calm, false, true, (t += 1000)), false, `${i + 1} s after the read`);
  assert.equal(c.due(run((step += 5), step), calm, false, true, (t += 1000)), true, '15 s after the read');
});

test('anything in view reads the table every round: not RUNNING, an alert, the run ended, no step, no judgement yet', () => {
  const warm = () => {
    const c = new PeekedCadence();
    assert.equal(c.due(run(1, 1), null, false, true, 10_000), true);
    assert.equal(c.due(run(2, 2), calm, false, true, 11_000), false);
    return c;
  };
  assert.equal(warm().due(run(4, 4), { runState: 'STALLED', alerts: [] }, false, true, 12_000), true);
  assert.equal(warm().due(run(4, 4), { runState: 'RUNNING', alerts: [{} as never] }, false, true, 12_000), true);
  assert.equal(warm().due(run(4, 4, { ended: true }), calm, false, true, 12_000), true);
  assert.equal(warm().due(run(null, 4), calm, false, true, 12_000), true);
  assert.equal(warm().due(run(4, 4), null, false, true, 12_000), true);
  assert.equal(warm().due(run(4, 4), calm, false, true, 12_000), false, 'the same, calm: not due');
  // a clock that went back: read
  assert.equal(warm().due(run(4, 4), calm, false, true, 9_000), true);
});
