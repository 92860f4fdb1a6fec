// A loss that diverged without going NaN (lr far too high: 5.7 → 18,480): far above the run's own
// early level, or above ln(vocab) — the loss of uniform guessing — by a margin after warmup, on
// every one of the last k records. The rolling-median spike rule misses it once the window itself
// has climbed. Reads the current segment's whole loss series (history buckets and recent points).
// Pure.
import { grouped, sig } from '../format.js';
import type { Ctx } from './context.js';
import type { Draft } from './rules/index.js';
import type { Series, SeriesBucket, SeriesPoint } from '../trainer/run/snapshot.js';

/** loss above this × the minimum of the segment's first 10 % of records … */
export const DIVERGE_FACTOR = 3;
/** … or above ln(vocab) + this (nats) past warmup … */
export const DIVERGE_LNV_MARGIN = 1;
/** (with the ln(vocab) bar, the loss must also be this × above the early minimum) */
export const VOCAB_AND_EARLY = 1.2;
/** … on each of this many latest records */
export const DIVERGE_K = 5;

interface P {
  step: number;
  value: number;
  min: number;
}

/** the current segment of a loss series */
function segmentOf(s: Series): number {
  return s.recent.length ? s.recent[s.recent.length - 1]!.segment : (s.history.at(-1)?.segment ?? 0);
}

/** the current segment's loss: history buckets (min and last per bucket) then the recent points */
function segmentLoss(ctx: Ctx): P[] {
  const s = ctx.run.series.loss;
  const seg = segmentOf(s);
  const out: P[] = [];
  for (const b of s.history)
    if (b.segment === seg && Number.isFinite(b.last)) out.push({ step: b.stepTo, value: b.last, min: b.min });
  const lastHist = out.at(-1)?.step ?? -Infinity;
  for (const p of s.recent)
    if (p.segment === seg && p.step > lastHist && Number.isFinite(p.value))
      out.push({ step: p.step, value: p.value, min: p.value });
  return out;
}

/** the first index of `xs` in segment `seg` or a later one: a series' segments never go down along it */
function segmentStart(xs: readonly { segment: number }[], seg: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]!.segment < seg) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Whether the divergence rule can fire at all (its two bars, over the last DIVERGE_K records),
 * decided without building a point per record (segmentLoss's points) and without walking the whole
 * series: the rule runs every round over up to ~2,500 records, and a healthy run — the usual case —
 * never needs them. It reads the current segment's first points up to the end of its early tenth,
 * and its last few: a segment's steps never go down (a step lower than the last one starts a new
 * segment: csv.ts, heartbeat.ts), so the early points are a prefix. Exactly ruleDivergence's own
 * test: false means it returns [].
 */
function mayDiverge(s: Series, vocab: number | null, warmup: number): boolean {
  const seg = segmentOf(s);
  const h = s.history;
  const r = s.recent;
  const h0 = segmentStart(h, seg);
  const r0 = segmentStart(r, seg);
  const counts = (b: SeriesBucket) => b.segment === seg && Number.isFinite(b.last);
  // the last history bucket that counts: recent points count only past its step
  let lastHist = -Infinity;
  for (let i = h.length - 1; i >= h0; i--)
    if (counts(h[i]!)) {
      lastHist = h[i]!.stepTo;
      break;
    }
  const countsP = (p: SeriesPoint) => p.segment === seg && p.step > lastHist && Number.isFinite(p.value);
  // enough points (DIVERGE_K + 2), counted from the end; the newest one's step
  let n = 0;
  let lastStep: number | null = null;
  for (let i = r.length - 1; i >= r0 && n < DIVERGE_K + 2; i--)
    if (countsP(r[i]!)) {
      if (n++ === 0) lastStep = r[i]!.step;
    }
  for (let i = h.length - 1; i >= h0 && n < DIVERGE_K + 2; i--) if (counts(h[i]!)) n++;
  if (n < DIVERGE_K + 2) return false;
  if (lastStep === null) lastStep = lastHist;
  // the first point's step
  let first: number | null = null;
  for (let i = h0; i < h.length && first === null; i++) if (counts(h[i]!)) first = h[i]!.stepTo;
  for (let i = r0; i < r.length && first === null; i++) if (countsP(r[i]!)) first = r[i]!.step;
  // the early minimum: over the points in the first 10 % of the span, else over the first two
  const bound = first! + Math.max(1, lastStep - first!) * 0.1;
  let early = 0;
  let earlyMin = Infinity;
  let firstTwoMin = Infinity;
  let k = 0;
  // the walk ends at the first point past the bound: none after it is early (steps never go down),
  // and the first two are read by then (the segment's first point is never past it)
  let past = false;
  for (let i = h0; i < h.length && !past; i++) {
    const b = h[i]!;
    if (!counts(b)) continue;
    if (k++ < 2 && b.min < firstTwoMin) firstTwoMin = b.min;
    if (b.stepTo <= bound) {
      early++;
      if (b.min < earlyMin) earlyMin = b.min;
    } else past = true;
  }
  for (let i = r0; i < r.length && !past; i++) {
    const p = r[i]!;
    if (!countsP(p)) continue;
    if (k++ < 2 && p.value < firstTwoMin) firstTwoMin = p.value;
    if (p.step <= bound) {
      early++;
      if (p.value < earlyMin) earlyMin = p.value;
    } else past = true;
  }
  const minEarly = early >= 2 ? earlyMin : firstTwoMin;
  const lnV = vocab && vocab > 1 ? Math.log(vocab) : null;
  const overEarly = minEarly > 0 ? DIVERGE_FACTOR * minEarly : null;
  const overVocab = lnV !== null ? lnV + DIVERGE_LNV_MARGIN : null;
  // the last DIVERGE_K points, newest first: the recent points, then the history buckets
  let aboveEarly = overEarly !== null;
  let aboveVocab = overVocab !== null;
  let left = DIVERGE_K;
  for (let i = r.length - 1; i >= r0 && left > 0; i--) {
    const p = r[i]!;
    if (!countsP(p)) continue;
    left--;
    if (aboveEarly && !(p.value > overEarly!)) aboveEarly = false;
    if (aboveVocab && !(p.step > warmup && p.value > overVocab! && p.value > VOCAB_AND_EARLY * minEarly))
      aboveVocab = false;
  }
  for (let i = h.length - 1; i >= h0 && left > 0; i--) {
    const b = h[i]!;
    if (!counts(b)) continue;
    left--;
    if (aboveEarly && !(b.last > overEarly!)) aboveEarly = false;
    if (aboveVocab && !(b.stepTo > warmup && b.last > overVocab! && b.last > VOCAB_AND_EARLY * minEarly))
      aboveVocab = false;
  }
  return aboveEarly || aboveVocab;
}

/** the last verdict per loss series (a snapshot's series is never edited: same object, same points) */
const memo = new WeakMap<Series, { vocab: number | null; warmup: number; out: readonly Draft[] }>();

export function ruleDivergence(ctx: Ctx): Draft[] {
  const s = ctx.run.series.loss;
  const vocab = ctx.run.identity.model?.vocab ?? null;
  const warmup = ctx.run.identity.train?.warmupSteps ?? 0;
  const known = memo.get(s);
  if (known && known.vocab === vocab && known.warmup === warmup) return known.out.map((d) => ({ ...d }));
  const out = mayDiverge(s, vocab, warmup) ? diverged(ctx) : [];
  memo.set(s, { vocab, warmup, out: out.map((d) => ({ ...d })) });
  return out;
}

/** the rule's two bars over every point built (segmentLoss's); null: too few points */
function barsOf(ctx: Ctx) {
  const pts = segmentLoss(ctx);
  if (pts.length < DIVERGE_K + 2) return null;
  const first = pts[0]!.step;
  const lastP = pts[pts.length - 1]!;
  const span = Math.max(1, lastP.step - first);
  const early = pts.filter((p) => p.step <= first + span * 0.1);
  const earlyPts = early.length >= 2 ? early : pts.slice(0, 2);
  let earlyMin = earlyPts[0]!;
  for (const p of earlyPts) if (p.min < earlyMin.min) earlyMin = p;
  const vocab = ctx.run.identity.model?.vocab ?? null;
  const warmup = ctx.run.identity.train?.warmupSteps ?? 0;
  const lnV = vocab && vocab > 1 ? Math.log(vocab) : null;
  const tail = pts.slice(-DIVERGE_K);
  const overEarly = earlyMin.min > 0 ? DIVERGE_FACTOR * earlyMin.min : null;
  const overVocab = lnV !== null ? lnV + DIVERGE_LNV_MARGIN : null;
  const aboveEarly = overEarly !== null && tail.every((p) => p.value > overEarly);
  // ln(vocab) alone is not enough: a wrong vocab (a GPT-2 run whose tokenizer was not read is taken
  // as byte-level, 256) would flag a healthy loss of 7 — it must also be above where the run began
  const aboveVocab =
    overVocab !== null &&
    tail.every((p) => p.step > warmup && p.value > overVocab && p.value > VOCAB_AND_EARLY * earlyMin.min);
  return { pts, lastP, earlyMin, vocab, warmup, tail, overEarly, overVocab, aboveEarly, aboveVocab };
}

/** the tests' two references for the fast path: its verdict, and the bars over every point built */
export const divergenceBars = {
  fast: (ctx: Ctx): boolean =>
    mayDiverge(ctx.run.series.loss, ctx.run.identity.model?.vocab ?? null, ctx.run.identity.train?.warmupSteps ?? 0),
  full: (ctx: Ctx): boolean => {
    const b = barsOf(ctx);
    return b !== null && (b.aboveEarly || b.aboveVocab);
  },
};

/** the rule in full, on every point built (here only once mayDiverge said it may fire; exported as
 *  the tests' reference for that fast path and the memo) */
export function diverged(ctx: Ctx): Draft[] {
  const b = barsOf(ctx);
  if (b === null) return [];
  const { pts, lastP, earlyMin, vocab, warmup, tail, overEarly, overVocab, aboveEarly, aboveVocab } = b;
  if (!aboveEarly && !aboveVocab) return [];
  // rising (or stuck high), not a recovery on its way down: the newest is no lower than half the tail's peak
  const peak = Math.max(...tail.map((p) => p.value));
  if (lastP.value < peak / 2 && !aboveVocab) return [];
  let top = pts[0]!;
  for (const p of pts) if (p.value > top.value) top = p;
  const bar = Math.min(...[overEarly, overVocab].filter((x): x is number => x !== null));
  // since: the first record of the current run of records above the bar
  let i = pts.length - 1;
  while (i > 0 && pts[i - 1]!.value > bar) i--;
  const since = pts[i]!;
  const start = pts[0]!;
  const grouping = (v: number) => (Math.abs(v) >= 1000 ? grouped(v) : sig(v, 3));
  const why = [
    aboveEarly ? `above ${DIVERGE_FACTOR} × the early minimum ${sig(earlyMin.min, 4)} (step ${earlyMin.step})` : null,
    aboveVocab
      ? `above ln(${vocab}) + ${DIVERGE_LNV_MARGIN} = ${sig(overVocab!, 4)} past warmup (${warmup} steps)`
      : null,
  ]
    .filter(Boolean)
    .join(' and ');
  return [
    {
      id: 'loss:diverged',
      rule: 'loss-divergence',
      severity: 'critical',
      title: `loss diverged: ${grouping(start.value)} → ${grouping(lastP.value)} since step ${since.step}`,
      detail: `the last ${tail.length} losses (steps ${tail[0]!.step}–${lastP.step}) are all ${why}; peak ${grouping(top.value)} at step ${top.step}. The learning rate is likely far too high: stop, lower it, resume from a checkpoint before step ${since.step}`,
      step: lastP.step,
      anomaly: 'loss_spike',
    },
  ];
}
