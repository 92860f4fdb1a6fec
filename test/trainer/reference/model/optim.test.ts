// AdamW, the warmup+cosine schedule and global-norm clipping as the trainer uses them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdamW, clipGradNorm, lrAt } from '../../../../src/trainer/reference/model/index.js';

test('lrAt: linear warmup from step 1, cosine to minLr at totalSteps, minLr after', () => {
  const s = { lr: 1e-3, warmupSteps: 10, totalSteps: 110, minLr: 1e-4 };
  assert.ok(Math.abs(lrAt(1, s) - 1e-4) < 1e-15);
  assert.ok(Math.abs(lrAt(5, s) - 5e-4) < 1e-15);
  assert.ok(Math.abs(lrAt(10, s) - 1e-3) < 1e-15);
  assert.ok(Math.abs(lrAt(60, s) - (1e-4 + 0.9e-3 * 0.5)) < 1e-12, 'half-way through the cosine');
  assert.ok(Math.abs(lrAt(110, s) - 1e-4) < 1e-15);
  assert.ok(Math.abs(lrAt(500, s) - 1e-4) < 1e-15);
  for (let i = 11; i < 110; i++) assert.ok(lrAt(i + 1, s) <= lrAt(i, s), 'monotone after warmup');
  assert.equal(lrAt(0, { lr: 1, warmupSteps: 0, totalSteps: 10 }), 1);
});

test('clipGradNorm returns the pre-clip global norm and scales only when above maxNorm', () => {
  const g = Float32Array.from([3, 4, 0, 0]);
  assert.equal(clipGradNorm(g, 10), 5);
  assert.deepEqual(Array.from(g), [3, 4, 0, 0]);
  assert.equal(clipGradNorm(g, 1), 5);
  assert.ok(Math.abs(Math.hypot(...g) - 1) < 1e-5);
  const n = Float32Array.from([NaN, 1]);
  assert.ok(Number.isNaN(clipGradNorm(n, 1)), 'a NaN gradient shows in the norm');
});

test('AdamW: first step moves by ≈lr against the gradient, decays only masked entries, resumes exactly', () => {
  const mask = Uint8Array.from([1, 0, 1, 0]);
  const a = new AdamW(4, { weightDecay: 0.5, decayMask: mask });
  const p = Float32Array.from([1, 1, -2, 0.5]);
  a.step(p, Float32Array.from([0.3, -0.2, 0, 0]), 0.01);
  assert.ok(Math.abs(p[0]! - (1 - 0.01 * 0.5 - 0.01)) < 1e-6, `decayed and stepped: ${p[0]}`);
  assert.ok(Math.abs(p[1]! - (1 + 0.01)) < 1e-6);
  assert.ok(Math.abs(p[2]! - (-2 + 0.01 * 0.5 * 2)) < 1e-6, 'zero gradient: decay only');
  assert.equal(p[3], 0.5, 'no gradient, no decay');
  // export → import into a fresh optimizer continues identically
  const g2 = Float32Array.from([0.1, 0.1, -0.3, 0.2]);
  const st = a.exportState();
  assert.equal(st.t, 1);
  const b = new AdamW(4, { weightDecay: 0.5, decayMask: mask });
  b.importState(st);
  const pa = p.slice(),
    pb = p.slice();
  a.step(pa, g2, 0.01);
  b.step(pb, g2, 0.01);
  assert.deepEqual(pa, pb);
  assert.throws(() => b.importState({ t: 1, m: new Float32Array(3), v: new Float32Array(4) }), /expected 4/);
});
