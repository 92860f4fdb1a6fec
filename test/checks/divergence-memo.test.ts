// The divergence rule's fast path and memo (src/checks/divergence.ts): on random loss series —
// healthy, diverging, recovering; history buckets and recent points; up to three segments (a resume's
// steps counted from 1 again, or going on); non-finite
// values; with and without a vocab and warmup — ruleDivergence (its fast test, then its memo) gives
// exactly what the rule's full path gives (`diverged`, which builds every point), and a memoised verdict
// equals a fresh one when an input changes (a new series, another vocab or warmup).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Ctx } from '../../src/checks/context.js';
import { divergenceBars, diverged, ruleDivergence } from '../../src/checks/divergence.js';
import { emptySnapshot, type RunSnapshot, type Series, type SeriesBucket } from '../../src/trainer/run/snapshot.js';
import { rng } from '../helpers/rng.js';

const reference = diverged;

// ---- random series ----
function randomSeries(r: () => number): Series {
  const kind = Math.floor(r() * 4); // 0 healthy, 1 diverging, 2 diverged then recovering, 3 short
  const n = kind === 3 ? Math.floor(r() * 9) : 8 + Math.floor(r() * 120);
  const segments = r() < 0.3 ? 2 + Math.floor(r() * 2) : 1;
  const base = 2 + r() * 8;
  const values: { step: number; value: number; segment: number }[] = [];
  let step = 1 + Math.floor(r() * 50);
  // steps 10 apart: the early tenth's bound falls on a record's step
  const regular = r() < 0.3;
  for (let i = 0; i < n; i++) {
    // later segments start at a lower step (a resume restarts the count) or go on
    const seg = Math.min(segments - 1, Math.floor((i / n) * segments * 1.5));
    if (i > 0 && seg !== values[i - 1]!.segment && r() < 0.5) step = 1 + Math.floor(r() * 20);
    const x = i / Math.max(1, n - 1);
    let v =
      kind === 1
        ? base * (1 + x * x * (2 + r() * 40))
        : kind === 2
          ? base * (x < 0.7 ? 1 + x * 20 : 1 + (1 - x) * 2)
          : base * (1 - 0.5 * x) + r() * 0.1;
    if (r() < 0.03) v = r() < 0.5 ? NaN : Infinity;
    values.push({ step, value: v, segment: seg });
    step += regular ? 10 : 1 + Math.floor(r() * 10);
  }
  // the older part folded into buckets (min and last of each), the newer part recent points
  // sometimes all of it folded (no recent point at all)
  const cut = r() < 0.15 ? values.length : Math.floor(values.length * r() * 0.8);
  const history: SeriesBucket[] = [];
  for (let i = 0; i < cut;) {
    const w = 1 + Math.floor(r() * 4);
    const part = values.slice(i, i + w).filter((p) => p.segment === values[i]!.segment);
    const finite = part.filter((p) => Number.isFinite(p.value));
    if (finite.length)
      history.push({
        stepFrom: part[0]!.step,
        stepTo: part.at(-1)!.step,
        tFrom: null,
        tTo: null,
        min: Math.min(...finite.map((p) => p.value)),
        max: Math.max(...finite.map((p) => p.value)),
        last: r() < 0.05 ? NaN : finite.at(-1)!.value,
        count: finite.length,
        segment: part[0]!.segment,
      });
    i += part.length;
  }
  return {
    recent: values.slice(cut).map((p) => ({ ...p, t: null })),
    history,
    total: values.length,
    nonFinite: 0,
  };
}

function ctxOf(loss: Series, vocab: number | null, warmup: number): Ctx {
  const run: RunSnapshot = emptySnapshot('/tmp/run', 'local');
  run.series.loss = loss;
  run.identity.model = vocab === null ? null : ({ vocab } as NonNullable<RunSnapshot['identity']['model']>);
  run.identity.train = { warmupSteps: warmup } as NonNullable<RunSnapshot['identity']['train']>;
  return { run } as unknown as Ctx;
}

test('the divergence rule without building its points gives what the rule gave with them', () => {
  const r = rng(19);
  let fired = 0;
  for (let i = 0; i < 1500; i++) {
    const s = randomSeries(r);
    const vocab = r() < 0.3 ? null : [2, 16, 256, 50257][Math.floor(r() * 4)]!;
    const warmup = Math.floor(r() * 40);
    const want = reference(ctxOf(s, vocab, warmup));
    // the fast test reads a prefix and the last few points: the same two bars as over every point
    assert.equal(
      divergenceBars.fast(ctxOf(s, vocab, warmup)),
      divergenceBars.full(ctxOf(s, vocab, warmup)),
      `case ${i}, bars`,
    );
    assert.deepEqual(ruleDivergence(ctxOf(s, vocab, warmup)), want, `case ${i}`);
    // asked again on the same series (the memo): the same verdict
    assert.deepEqual(ruleDivergence(ctxOf(s, vocab, warmup)), want, `case ${i}, again`);
    if (want.length) fired++;
  }
  assert.ok(fired > 100, `the cases include divergences (${fired})`);
});

test("a memoised verdict follows a changed input: a new series, another vocab or warmup; a caller's edit does not stick", () => {
  const healthy: Series = {
    recent: Array.from({ length: 20 }, (_, i) => ({ step: 10 * i + 10, t: null, value: 6 - i * 0.1, segment: 0 })),
    history: [],
    total: 20,
    nonFinite: 0,
  };
  assert.deepEqual(ruleDivergence(ctxOf(healthy, 256, 0)), []);
  // a new snapshot's series (appended records climbing far above the start)
  const climbed: Series = {
    ...healthy,
    recent: [
      ...healthy.recent,
      ...Array.from({ length: 6 }, (_, i) => ({ step: 210 + 10 * i, t: null, value: 40 + i, segment: 0 })),
    ],
  };
  const d = ruleDivergence(ctxOf(climbed, 256, 0));
  assert.equal(d.length, 1);
  assert.equal(d[0]!.id, 'loss:diverged');
  assert.deepEqual(d, reference(ctxOf(climbed, 256, 0)));
  // a caller that edits what it was handed does not edit the memo
  d[0]!.title = 'edited';
  assert.notEqual(ruleDivergence(ctxOf(climbed, 256, 0))[0]!.title, 'edited');
  // the same series, another vocab and warmup: judged afresh
  const lowVocab: Series = {
    recent: Array.from({ length: 12 }, (_, i) => ({ step: i + 1, t: null, value: 3.8 + i * 0.15, segment: 0 })),
    history: [],
    total: 12,
    nonFinite: 0,
  };
  for (const [vocab, warmup] of [
    [16, 0],
    [50257, 0],
    [16, 100],
    [16, 0],
  ] as const)
    assert.deepEqual(
      ruleDivergence(ctxOf(lowVocab, vocab, warmup)),
      reference(ctxOf(lowVocab, vocab, warmup)),
      `vocab ${vocab}, warmup ${warmup}`,
    );
  assert.equal(
    ruleDivergence(ctxOf(lowVocab, 16, 0)).length,
    1,
    'ln(16) + 1 and 1.2 × the early minimum passed: named',
  );
  assert.equal(ruleDivergence(ctxOf(lowVocab, 16, 100)).length, 0, 'within warmup: not');
});
