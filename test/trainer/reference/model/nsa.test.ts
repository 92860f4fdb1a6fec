// Behaviour of the reference NSA model that a user of its numbers relies on: strict causality, the
// selection rules of true NSA (forced block 0 and local blocks, top-n over past blocks scored by the
// group-summed Eq. 9 mapping of the causal compressed probabilities), gate statistics as contract
// §6 defines them, and agreement of the WebAssembly kernels with the plain-JS ones.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createModel,
  defaultModelConfig,
  numCmp,
  Rng,
  type ModelConfig,
} from '../../../../src/trainer/reference/model/model.js';

function randomTokens(n: number, vocab: number, seed: number): Uint8Array {
  const rng = new Rng(seed);
  const t = new Uint8Array(n);
  for (let i = 0; i < n; i++) t[i] = Math.floor(rng.next() * vocab);
  return t;
}

const small: ModelConfig = {
  vocab: 64,
  dim: 32,
  nLayers: 2,
  nHeads: 4,
  nKvGroups: 2,
  dK: 8,
  dV: 8,
  l: 8,
  d: 4,
  lSel: 8,
  nSel: 4,
  w: 16,
  seqLen: 64,
};

test('changing tokens after position t never changes the predictions at positions ≤ t', async () => {
  for (const kernels of ['js', 'wasm'] as const) {
    const m = await createModel(small, { seed: 3, kernels });
    const S = small.seqLen,
      V = small.vocab;
    const base = randomTokens(2 * S, V, 1);
    m.forward(base, 2);
    const before = m.lastProbs();
    for (const t of [0, 5, 17, 40, 62]) {
      const changed = base.slice();
      for (let b = 0; b < 2; b++)
        for (let u = t + 1; u < S; u++) changed[b * S + u] = (changed[b * S + u]! + 1 + u) % V;
      m.forward(changed, 2);
      const after = m.lastProbs();
      for (let b = 0; b < 2; b++) {
        const lo = b * S * V,
          hi = (b * S + t + 1) * V;
        assert.deepEqual(
          after.subarray(lo, hi),
          before.subarray(lo, hi),
          `${kernels}: row ${b}, positions ≤ ${t} changed`,
        );
        // and the test is not vacuous: later positions do change
        const later = after.subarray(hi, (b + 1) * S * V),
          laterBefore = before.subarray(hi, (b + 1) * S * V);
        if (t < S - 2)
          assert.notDeepEqual(later, laterBefore, `${kernels}: positions after ${t} should see the change`);
      }
    }
  }
});

test('selection keeps block 0 and the local blocks, never a future token, and picks the group top-n', async () => {
  const cfg = small;
  const m = await createModel(cfg, { seed: 11, kernels: 'wasm' });
  const B = 2,
    S = cfg.seqLen,
    hpg = cfg.nHeads / cfg.nKvGroups;
  m.forward(randomTokens(B * S, cfg.vocab, 5), B);
  let rowsWithChoice = 0;
  for (let layer = 0; layer < cfg.nLayers; layer++)
    for (let b = 0; b < B; b++)
      for (let t = 0; t < S; t++)
        for (let g = 0; g < cfg.nKvGroups; g++) {
          const ranges = m.selectedRanges(layer, b, t, g);
          const covered = new Set<number>();
          let prevEnd = -1;
          for (const [s, e] of ranges) {
            assert.ok(
              s < e && s > prevEnd && e <= t + 1,
              `ranges must be sorted, disjoint and causal: ${JSON.stringify(ranges)} at t=${t}`,
            );
            prevEnd = e;
            for (let u = s; u < e; u++) covered.add(u);
          }
          const blocks = new Set([...covered].map((u) => Math.floor(u / cfg.lSel)));
          const cur = Math.floor(t / cfg.lSel);
          const forced = new Set([0, cur, Math.max(0, cur - 1)]);
          for (const j of forced)
            assert.ok(blocks.has(j), `t=${t}: forced block ${j} missing from ${JSON.stringify(ranges)}`);
          // the current block is selected up to and including t (the partial block is kept)
          for (let u = cur * cfg.lSel; u <= t; u++)
            assert.ok(covered.has(u), `t=${t}: token ${u} of the current block missing`);
          // every selected block is fully covered (clamped to t+1)
          for (const j of blocks)
            for (let u = j * cfg.lSel; u < Math.min((j + 1) * cfg.lSel, t + 1); u++) assert.ok(covered.has(u));
          // independent top-n: Eq. 9 overlap mapping of the causal compressed probabilities, summed over the group's heads (Eq. 10)
          const nBlocks = Math.ceil(S / cfg.lSel);
          const score = new Array<number>(nBlocks).fill(0);
          for (let hh = 0; hh < hpg; hh++) {
            const p = m.cmpProbs(layer, b, t, g * hpg + hh);
            assert.equal(p.length, numCmp(t, cfg.l, cfg.d));
            if (p.length > 0) assert.ok(Math.abs(p.reduce((a, x) => a + x, 0) - 1) < 1e-5);
            p.forEach((pi, i) => {
              for (let j = 0; j < nBlocks; j++) {
                const ov = Math.min(i * cfg.d + cfg.l, (j + 1) * cfg.lSel) - Math.max(i * cfg.d, j * cfg.lSel);
                if (ov > 0) score[j]! += (pi * ov) / cfg.l;
              }
            });
          }
          const candidates: number[] = [];
          for (let j = 0; (j + 1) * cfg.lSel <= t + 1; j++) if (!forced.has(j)) candidates.push(j);
          candidates.sort((x, y) => score[y]! - score[x]! || x - y);
          const kRest = Math.max(0, cfg.nSel - forced.size);
          const want = new Set([...forced, ...candidates.slice(0, kRest)]);
          if (candidates.length > kRest && kRest > 0) {
            rowsWithChoice++;
            // skip near-ties, where float32 summation order may legitimately decide
            if (Math.abs(score[candidates[kRest - 1]!]! - score[candidates[kRest]!]!) < 1e-6) continue;
          }
          assert.deepEqual(
            [...blocks].sort((x, y) => x - y),
            [...want].sort((x, y) => x - y),
            `layer ${layer} b=${b} t=${t} g=${g}`,
          );
        }
  assert.ok(rowsWithChoice > 100, 'the config must make top-n choose among past blocks');
});

test('a uniform gate override reports ln 3 entropy and 1/3 shares; a collapse override reports collapse 1', async () => {
  const m = await createModel(small, { seed: 2, kernels: 'wasm' });
  const tok = randomTokens(small.seqLen, small.vocab, 9);
  const fresh = m.forward(tok, 1).gate;
  assert.ok(
    fresh.entropyMean > 1.05 && fresh.entropyMean < Math.log(3) + 1e-12,
    `fresh gates start near uniform: ${fresh.entropyMean}`,
  );
  assert.ok(fresh.maxGate > 1 / 3 && fresh.maxGate < 0.5);
  m.setGateOverride('uniform');
  const u = m.forwardBackward(tok, 1).gate;
  assert.ok(Math.abs(u.entropyMean - Math.log(3)) < 1e-12 && Math.abs(u.entropyMin - Math.log(3)) < 1e-12);
  assert.ok(Math.abs(u.maxGate - 1 / 3) < 1e-12);
  assert.equal(u.collapseFrac, 0);
  for (const s of u.branchShares) assert.ok(Math.abs(s - 1 / 3) < 1e-12);
  m.setGateOverride('collapse');
  const c = m.forwardBackward(tok, 1).gate;
  assert.equal(c.collapseFrac, 1);
  assert.equal(c.entropyMean, 0);
  assert.equal(c.maxGate, 1);
  assert.deepEqual(c.branchShares, [0, 0, 1]);
  m.setGateOverride(null);
  assert.deepEqual(m.forward(tok, 1).gate, fresh);
});

test('selection statistics count the selected tokens per (row, group) of layer 0', async () => {
  const cfg = defaultModelConfig();
  const m = await createModel(cfg, { seed: 1, kernels: 'wasm' });
  const s = m.forward(randomTokens(2 * cfg.seqLen, 256, 4), 2).sel;
  assert.equal(s.rows, 2 * cfg.seqLen * cfg.nKvGroups);
  assert.equal(s.kMax, cfg.nSel * cfg.lSel); // late rows select n_sel full blocks
  let sum = 0,
    atMax = 0;
  for (let b = 0; b < 2; b++)
    for (let t = 0; t < cfg.seqLen; t++) {
      const k = m.selectedRanges(0, b, t, 0).reduce((a, [x, y]) => a + y - x, 0);
      sum += k;
      if (k === s.kMax) atMax++;
    }
  assert.ok(Math.abs(s.kMean - sum / s.rows) < 1e-12);
  assert.ok(Math.abs(s.pctAtMax - atMax / s.rows) < 1e-12);
});

test('WebAssembly and JS kernels agree on loss, gradients and statistics', async () => {
  const cfg = { ...defaultModelConfig(), nKvGroups: 2, seqLen: 96 };
  const tok = randomTokens(3 * cfg.seqLen, 256, 8);
  const js = await createModel(cfg, { seed: 5, kernels: 'js' });
  const wa = await createModel(cfg, { seed: 5, kernels: 'wasm' });
  assert.equal(wa.kernels, 'wasm');
  assert.equal(js.kernels, 'js');
  assert.deepEqual(wa.params, js.params, 'same seed, same parameters');
  const a = js.forwardBackward(tok, 3),
    b = wa.forwardBackward(tok, 3);
  assert.ok(Math.abs(a.loss - b.loss) < 1e-5 * a.loss, `loss ${a.loss} vs ${b.loss}`);
  assert.ok(Math.abs(a.gate.entropyMean - b.gate.entropyMean) < 1e-5);
  assert.deepEqual(a.sel, b.sel);
  for (const e of js.layout) {
    let num = 0,
      den = 0;
    for (let i = e.offset; i < e.offset + e.size; i++) {
      num += (js.grads[i]! - wa.grads[i]!) ** 2;
      den += js.grads[i]! ** 2;
    }
    assert.ok(den > 0, `${e.name}: zero gradient`);
    assert.ok(Math.sqrt(num / den) < 1e-4, `${e.name}: relative gradient difference ${Math.sqrt(num / den)}`);
  }
});

test('the same seed gives the same parameters and losses; bad input is refused', async () => {
  const cfg = defaultModelConfig();
  const a = await createModel(cfg, { seed: 42 });
  const b = await createModel(cfg, { seed: 42 });
  const c = await createModel(cfg, { seed: 43 });
  assert.deepEqual(a.params, b.params);
  assert.notDeepEqual(a.params, c.params);
  const tok = randomTokens(2 * cfg.seqLen, 256, 1);
  assert.equal(a.forwardBackward(tok, 2).loss, b.forwardBackward(tok, 2).loss);
  assert.throws(() => a.forward(tok, 3), /expected batch×seqLen/);
  await assert.rejects(createModel({ ...cfg, nHeads: 3, nKvGroups: 2 }, { seed: 1 }), /multiple of nKvGroups/);
});

test('NaN weights show as a NaN loss and NaN gate statistics, not as plausible numbers', async () => {
  const m = await createModel(small, { seed: 2, kernels: 'wasm' });
  const e = m.layout.find((x) => x.name === 'layers.0.attn.wq')!;
  m.params[e.offset + 3] = NaN;
  const st = m.forwardBackward(randomTokens(small.seqLen, small.vocab, 9), 1);
  assert.ok(Number.isNaN(st.loss));
  assert.ok(Number.isNaN(st.gate.entropyMean) && Number.isNaN(st.gate.entropyMin) && Number.isNaN(st.gate.maxGate));
  assert.ok(m.grads.some((g) => Number.isNaN(g)));
});
