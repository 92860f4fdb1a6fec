// Finite-difference gradient checks of the hand-written backward, for every parameter tensor of the
// reference NSA model. Runs the JS kernels on a float64 heap and freezes the top-n selection during
// the perturbed forwards, so the loss is smooth in every parameter.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createModel,
  Rng,
  type GateOverride,
  type ModelConfig,
} from '../../../../src/trainer/reference/model/model.js';

const B = 2;
const cases: { cfg: ModelConfig; override: GateOverride }[] = [
  {
    cfg: {
      vocab: 32,
      dim: 16,
      nLayers: 2,
      nHeads: 4,
      nKvGroups: 2,
      dK: 8,
      dV: 8,
      l: 4,
      d: 2,
      lSel: 4,
      nSel: 4,
      w: 6,
      seqLen: 24,
    },
    override: null,
  },
  {
    cfg: {
      vocab: 32,
      dim: 12,
      nLayers: 1,
      nHeads: 2,
      nKvGroups: 1,
      dK: 6,
      dV: 4,
      l: 5,
      d: 3,
      lSel: 6,
      nSel: 5,
      w: 4,
      seqLen: 27,
    },
    override: null,
  },
  {
    cfg: {
      vocab: 32,
      dim: 16,
      nLayers: 1,
      nHeads: 2,
      nKvGroups: 2,
      dK: 8,
      dV: 8,
      l: 4,
      d: 4,
      lSel: 8,
      nSel: 3,
      w: 5,
      seqLen: 24,
    },
    override: 'uniform',
  },
];

for (const { cfg, override } of cases)
  test(`analytic gradients match central finite differences for every parameter tensor (l=${cfg.l} d=${cfg.d} l_sel=${cfg.lSel} G=${cfg.nKvGroups} gates=${override ?? 'learned'})`, async () => {
    const m = await createModel(cfg, { seed: 7, kernels: 'js', f64: true });
    m.setGateOverride(override);
    // break the init's symmetries (uniform pooling, near-zero gate logits) so every path matters
    const rng = new Rng(99);
    for (let i = 0; i < m.params.length; i++) m.params[i] = m.params[i]! + 0.15 * rng.normal();
    const tokens = new Uint8Array(B * cfg.seqLen);
    for (let i = 0; i < tokens.length; i++) tokens[i] = Math.floor(rng.next() * cfg.vocab);
    m.forwardBackward(tokens, B);
    const grads = Float64Array.from(m.grads);
    m.setSelectionFrozen(true);
    const eps = 1e-3;
    const lossAt = (i: number, v: number) => {
      const old = m.params[i]!;
      m.params[i] = v;
      const l = m.forward(tokens, B).loss;
      m.params[i] = old;
      return l;
    };
    const failures: string[] = [];
    let checked = 0;
    for (const e of m.layout) {
      if (override !== null && e.name.includes('.gate.')) {
        // pinned gates: the gate MLP gets no gradient at all
        assert.ok(
          grads.subarray(e.offset, e.offset + e.size).every((g) => g === 0),
          `${e.name} must have zero gradient under '${override}'`,
        );
        continue;
      }
      const picks = new Set<number>();
      for (let n = 0; n < Math.min(4, e.size); n++) picks.add(Math.floor(rng.next() * e.size));
      let sawNonZero = false;
      for (const j of picks) {
        const i = e.offset + j;
        const p = m.params[i]!;
        const up = Math.fround(p + eps),
          dn = Math.fround(p - eps);
        const num = (lossAt(i, up) - lossAt(i, dn)) / (up - dn);
        const ana = grads[i]!;
        const err = Math.abs(num - ana);
        if (err > 1e-8 + 1e-4 * Math.max(Math.abs(num), Math.abs(ana)))
          failures.push(`${e.name}[${j}]: analytic ${ana} vs numeric ${num}`);
        if (Math.abs(ana) > 1e-7) sawNonZero = true;
        checked++;
      }
      // a tensor whose sampled gradients are all zero would make the check vacuous
      if (!sawNonZero) failures.push(`${e.name}: every sampled gradient is zero`);
    }
    assert.deepEqual(failures, [], `${failures.length} of ${checked} gradient entries disagree`);
  });
