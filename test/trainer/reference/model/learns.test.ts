// The model learns English: a short run on Pride and Prejudice (the shipped corpus) at the default
// config takes the loss from ≈ln 256 to below 2.7 nats, and the held-out tail agrees. This is the
// issue's bar in steps, not seconds (timing targets live in bench/trainer.bench.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  AdamW,
  clipGradNorm,
  createModel,
  defaultModelConfig,
  lrAt,
} from '../../../../src/trainer/reference/model/index.js';

test('loss falls from ≈5.5 to below 2.7 nats within 120 steps of batch 8 on real text', async () => {
  const text = readFileSync(new URL('../../../../data/pride-and-prejudice.txt', import.meta.url));
  const cfg = defaultModelConfig();
  const m = await createModel(cfg, { seed: 1 });
  const mask = new Uint8Array(m.params.length);
  for (const e of m.layout) if (e.decay) mask.fill(1, e.offset, e.offset + e.size);
  const opt = new AdamW(m.params.length, { weightDecay: 0.1, decayMask: mask });
  const B = 8,
    S = cfg.seqLen,
    steps = 120;
  const trainEnd = Math.floor(text.length * 0.95);
  const tok = new Uint8Array(B * S);
  let pos = 0;
  const losses: number[] = [];
  for (let step = 1; step <= steps; step++) {
    for (let b = 0; b < B; b++) {
      if (pos + S > trainEnd) pos = 0;
      tok.set(text.subarray(pos, pos + S), b * S);
      pos += S;
    }
    const st = m.forwardBackward(tok, B);
    assert.ok(Number.isFinite(st.loss));
    losses.push(st.loss);
    clipGradNorm(m.grads, 1);
    opt.step(m.params, m.grads, lrAt(step, { lr: 3e-3, warmupSteps: 20, totalSteps: steps, minLr: 3e-4 }));
  }
  assert.ok(Math.abs(losses[0]! - Math.log(256)) < 0.1, `initial loss ${losses[0]} should be ≈ln 256`);
  const tail = losses.slice(-10).reduce((a, b) => a + b, 0) / 10;
  assert.ok(tail < 2.7, `mean loss of the last 10 steps is ${tail.toFixed(3)}`);
  for (let b = 0; b < B; b++) tok.set(text.subarray(trainEnd + b * S, trainEnd + (b + 1) * S), b * S);
  const val = m.forward(tok, B).loss;
  assert.ok(val < 2.8, `held-out loss ${val.toFixed(3)}`);
});
