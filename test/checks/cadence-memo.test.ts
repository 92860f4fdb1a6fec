// The stall cadence's reading of the series (src/checks/context.ts cadenceOf), memoised per series
// object: on random loss and toks/s series — gaps, several segments, missing times — with and
// without a known log interval and step time, cadenceOf gives exactly what it gave when it read the
// series every call (the reference below is that code, kept verbatim), and asked again on the same
// series after the run's own figures changed (a memo hit), it still does.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cadenceOf } from '../../src/checks/context.js';
import { currentSegment, median } from '../../src/checks/stats.js';
import { DEFAULT_THRESHOLDS, type Thresholds } from '../../src/checks/thresholds.js';
import { emptySnapshot, type RunSnapshot, type Series } from '../../src/trainer/run/snapshot.js';
import { rng } from '../helpers/rng.js';

type Cadence = ReturnType<typeof cadenceOf>;

// ---- cadenceOf as it was: the reference ----
function beatOn(run: RunSnapshot): boolean {
  if (run.identity.flags['NSA_HEARTBEAT_EVERY'] === '1') return true;
  return run.ranks.some(
    (r) => (r.events?.['beat'] ?? 0) > 0 || r.lastMsg === 'beat' || (r.rank > 0 && (r.lastStep ?? 0) > 0),
  );
}

function reference(run: RunSnapshot, t: Thresholds): Cadence {
  let stepTimeS = run.stepTimeS && run.stepTimeS > 0 ? run.stepTimeS : null;
  const lossPts = currentSegment(run.series.loss);
  const pts = (lossPts.length >= 2 ? lossPts : currentSegment(run.series.toksPerS)).slice(-200);
  let logEvery = run.identity.train?.logEvery ?? null;
  if (pts.length >= 2) {
    const dSteps: number[] = [];
    const perStep: number[] = [];
    for (let i = 1; i < pts.length; i++) {
      const a = pts[i - 1]!,
        b = pts[i]!;
      const ds = b.step - a.step;
      if (ds <= 0) continue;
      dSteps.push(ds);
      if (a.t !== null && b.t !== null && b.t > a.t) perStep.push((b.t - a.t) / 1000 / ds);
    }
    if (logEvery === null && dSteps.length) logEvery = median(dSteps.slice(1).length ? dSteps.slice(1) : dSteps);
    if (stepTimeS === null && perStep.length) stepTimeS = median(perStep);
  }
  const beat = beatOn(run);
  const expectedS = stepTimeS === null ? null : beat ? stepTimeS : stepTimeS * Math.max(1, logEvery ?? 1);
  const thresholdS = Math.max(t.stallFloorS, expectedS === null ? 0 : t.stallCadenceFactor * expectedS);
  return { stepTimeS, logEvery, beat, expectedS, thresholdS };
}

// ---- random runs ----
function randomSeries(r: () => number): Series {
  const n = Math.floor(r() * (r() < 0.2 ? 3 : 300));
  const recent: Series['recent'] = [];
  let step = Math.floor(r() * 100);
  let t = 1_700_000_000_000;
  const every = 1 + Math.floor(r() * 20);
  for (let i = 0; i < n; i++) {
    const seg = r() < 0.3 && i > n / 2 ? 1 : 0;
    step += r() < 0.05 ? 0 : every * (r() < 0.1 ? 2 : 1);
    t += Math.floor(r() * 3000);
    recent.push({ step, t: r() < 0.1 ? null : t, value: r(), segment: seg });
  }
  // segments in order: a second segment only after the first
  recent.sort((a, b) => a.segment - b.segment);
  return { recent, history: [], total: n, nonFinite: 0 };
}

function randomRun(r: () => number): RunSnapshot {
  const run = emptySnapshot('/tmp/run', 'local');
  run.series.loss = r() < 0.2 ? { recent: [], history: [], total: 0, nonFinite: 0 } : randomSeries(r);
  run.series.toksPerS = randomSeries(r);
  return run;
}

/** the run's own figures, changed in place (the series objects stay: the memo's key) */
function figures(r: () => number, run: RunSnapshot): void {
  run.stepTimeS = r() < 0.5 ? null : r() < 0.1 ? 0 : r() * 3;
  run.identity.train = r() < 0.5 ? null : ({ logEvery: r() < 0.2 ? null : 1 + Math.floor(r() * 50) } as never);
  run.identity.flags = r() < 0.2 ? { NSA_HEARTBEAT_EVERY: '1' } : {};
}

test('the stall cadence read from memoised series equals the cadence read afresh', () => {
  const r = rng(21);
  const t: Thresholds = { ...DEFAULT_THRESHOLDS };
  for (let i = 0; i < 1500; i++) {
    const run = randomRun(r);
    for (let k = 0; k < 3; k++) {
      figures(r, run);
      assert.deepEqual(cadenceOf(run, t), reference(run, t), `case ${i}.${k}`);
    }
    // a new toks/s series beside the same loss series: read afresh
    run.series.toksPerS = randomSeries(r);
    run.stepTimeS = null;
    run.identity.train = null;
    assert.deepEqual(cadenceOf(run, t), reference(run, t), `case ${i}, new toks/s`);
  }
});
