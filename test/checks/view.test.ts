// A gap in our view is STALE, not a stall (src/checks/view.ts): the judge is told how old its data
// is; past the stale limit it judges the data as of when it was read, says STALE with the age, gives
// the watchdog nothing to act on and keeps nothing of the gap in its alerts or history. The same
// run seen without the view's age (as a local look would at that wall time) is STALLED: the test is
// not vacuous.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, blindView } from '../../src/checks/index.js';
import { liveFixture, proc, procs } from './helpers.js';

test('a 200 s gap in a remote view: STALE with its age, never STALLED, no critical kept; then RUNNING', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const alive = procs([proc(0, 'S'), proc(1, 'S')]);
  const c = new Checker();
  const view = (ageMs: number) => ({ ageMs, staleAfterMs: 5000, cause: 'host reconnecting, try 3' });
  // fresh data: RUNNING
  const ok = c.evaluate({ now: lastTs + 1000, run, procs: alive, gpu: null, view: view(200) });
  assert.equal(ok.runState, 'RUNNING');
  // the gap: the clock runs on, the data does not (it was read 200 s ago)
  for (const [s, age] of [
    [10, '10s'],
    [60, '1m00s'],
    [200, '3m20s'],
  ] as const) {
    const ev = c.evaluate({ now: lastTs + s * 1000, run, procs: alive, gpu: null, view: view(s * 1000) });
    assert.equal(ev.runState, 'STALE', `${s}s into the gap`);
    assert.match(
      ev.runStateWhy,
      new RegExp(`no fresh data for ${age} \\(host reconnecting, try 3\\); last seen RUNNING`),
    );
    assert.deepEqual(ev.actOn, [], 'the watchdog acts on nothing judged blind');
    assert.ok(
      !ev.alerts.some((a) => a.severity === 'critical'),
      `no critical from the gap: ${ev.alerts.map((a) => a.id)}`,
    );
    assert.equal(ev.culprit, null);
    assert.equal(ev.noStepSinceMs, null);
  }
  // back: the new data shows the run went on (a heartbeat just before now), judged afresh
  const later = {
    ...run,
    ranks: run.ranks.map((r) => ({ ...r, lastTs: lastTs + 200_000, stepAdvancedTs: lastTs + 200_000 })),
  };
  later.stepAdvancedTs = lastTs + 200_000;
  const back = c.evaluate({ now: lastTs + 200_500, run: later, procs: alive, gpu: null, view: view(300) });
  assert.equal(back.runState, 'RUNNING');
  assert.ok(!back.history.some((h) => h.severity === 'critical'), 'nothing of the gap in the history');
  assert.ok(!back.alerts.some((a) => a.severity === 'critical'));

  // not vacuous: the same 200 s without the view's age is a stall, critical, acted on
  const blind = new Checker().evaluate({ now: lastTs + 200_000, run, procs: alive, gpu: null });
  assert.equal(blind.runState, 'STALLED');
  assert.ok(blind.actOn.some((a) => a.id === 'stall:run'));
});

test('blindView: only past the stale limit, with a cause', () => {
  const base = { now: 0, run: null as never, procs: null, gpu: null };
  assert.equal(blindView(base), null, 'no view: a local look');
  assert.equal(blindView({ ...base, view: { ageMs: 4000, staleAfterMs: 5000 } }), null);
  assert.deepEqual(blindView({ ...base, view: { ageMs: 7000, staleAfterMs: 5000 } }), {
    ageS: 7,
    cause: 'the host sent nothing newer',
  });
});
