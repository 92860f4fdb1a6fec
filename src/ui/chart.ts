// Line charts (asciichart's plot, drawn by ./plot.ts) over a step axis: points are placed by step
// (not by index), so a resumed run (steps repeating from a checkpoint) keeps one continuous axis
// and its resume points are marked under the chart. The one chart of nsa-top: the cockpit's panels draw `chart` and
// `nsa-top report` prints `chartText`, the same rows without styling.
import type { Series } from '../trainer/run/snapshot.js';
import { si } from './format.js';
import { plotRows } from './plot.js';
import { cut, type Line, plain, t } from './text.js';

export interface XY {
  step: number;
  value: number;
  segment: number;
}

const pointsMemo = { recent: new WeakMap<Series, readonly XY[]>(), all: new WeakMap<Series, readonly XY[]>() };

/**
 * Series → step-ordered points; for a step seen in several segments the newest segment wins.
 * Memoised per Series object (new only when the series changed): panels ask every frame.
 */
export function seriesPoints(s: Series, range: 'recent' | 'all'): readonly XY[] {
  const known = pointsMemo[range].get(s);
  if (known) return known;
  const pts = computePoints(s, range);
  pointsMemo[range].set(s, pts);
  return pts;
}

/** true when the points are finite with strictly increasing steps: already in chart order */
function ordered(recent: readonly XY[]): boolean {
  for (let i = 0; i < recent.length; i++) {
    if (!Number.isFinite(recent[i]!.value)) return false;
    if (i > 0 && recent[i]!.step <= recent[i - 1]!.step) return false;
  }
  return true;
}

function computePoints(s: Series, range: 'recent' | 'all'): readonly XY[] {
  // the usual case (one run, no resume inside the window): the snapshot's own window, no copy —
  // only when it is frozen (snapshots freeze theirs), so sharing it cannot let anyone edit it
  if ((range === 'recent' || s.history.length === 0) && Object.isFrozen(s.recent) && ordered(s.recent)) return s.recent;
  const pts: XY[] = [];
  if (range === 'all') for (const b of s.history) pts.push({ step: b.stepTo, value: b.last, segment: b.segment });
  for (const p of s.recent)
    if (Number.isFinite(p.value)) pts.push({ step: p.step, value: p.value, segment: p.segment });
  const byStep = new Map<number, XY>();
  for (const p of pts) {
    const prev = byStep.get(p.step);
    if (!prev || p.segment >= prev.segment) byStep.set(p.step, p);
  }
  return Object.freeze([...byStep.values()].sort((a, b) => a.step - b.step));
}

const emaCache = new WeakMap<readonly XY[], { alpha: number; out: XY[] }>();

/** Exponential moving average; the same input array gives the same output array (the chart caches by identity). */
export function ema(pts: readonly XY[], alpha = 0.1): XY[] {
  const hit = emaCache.get(pts);
  if (hit && hit.alpha === alpha) return hit.out;
  let m: number | null = null;
  const out = pts.map((p) => {
    m = m == null ? p.value : alpha * p.value + (1 - alpha) * m;
    return { ...p, value: m };
  });
  emaCache.set(pts, { alpha, out });
  return out;
}

const LABEL_W = 7;
const fmtLabel = (x: number) => {
  const s = Math.abs(x) >= 1000 ? si(x, 1) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3);
  return s.padStart(LABEL_W).slice(-LABEL_W);
};

/** Bin points into `n` columns by step; empty columns carry the previous value. */
function bin(pts: readonly XY[], n: number): { values: number[]; from: number; to: number; resumes: number[] } {
  const from = pts[0]!.step;
  const to = pts[pts.length - 1]!.step;
  const span = Math.max(1, to - from);
  const cols = Math.max(1, Math.min(n, pts.length === 1 ? 1 : n));
  const sums = new Array<number>(cols).fill(0);
  const counts = new Array<number>(cols).fill(0);
  const resumes: number[] = [];
  let seg = pts[0]!.segment;
  for (let i = 0; i < pts.length; i++) {
    const p = pts[i]!;
    const c = Math.min(cols - 1, Math.floor(((p.step - from) / span) * (cols - 1) + 0.5));
    sums[c]! += p.value;
    counts[c]!++;
    if (p.segment !== seg) {
      resumes.push(c);
      seg = p.segment;
    }
  }
  const values: number[] = [];
  let last = pts[0]!.value;
  for (let i = 0; i < cols; i++) {
    if (counts[i]) last = sums[i]! / counts[i]!;
    values.push(last);
  }
  return { values, from, to, resumes };
}

export interface ChartOpts {
  w: number;
  /** rows for the plot itself (the step axis adds one more) */
  h: number;
  /** a horizontal threshold drawn as a second series */
  threshold?: number;
  role?: 'info' | 'ok' | 'accent';
}

const chartMemo = new WeakMap<readonly XY[], { key: string; lines: Line[] }>();

/**
 * Chart rows (h + 1 including the step axis). Empty array when there is nothing to plot.
 * Memoised on the points array and the options: an unchanged series is not plotted again.
 */
export function chart(pts: readonly XY[], o: ChartOpts): Line[] {
  const key = `${o.w}:${o.h}:${o.threshold}:${o.role}`;
  const known = chartMemo.get(pts);
  if (known?.key === key) return known.lines;
  const lines = plotChart(pts, o);
  chartMemo.set(pts, { key, lines });
  return lines;
}

function plotChart(pts: readonly XY[], o: ChartOpts): Line[] {
  if (pts.length === 0 || o.h < 2 || o.w < LABEL_W + 6) return [];
  const plotW = o.w - LABEL_W - 2;
  const { values, from, to, resumes } = bin(pts, plotW);
  let min = values[0]!;
  let max = values[0]!;
  for (let i = 1; i < values.length; i++) {
    if (values[i]! < min) min = values[i]!;
    if (values[i]! > max) max = values[i]!;
  }
  if (o.threshold != null) {
    min = Math.min(min, o.threshold);
    max = Math.max(max, o.threshold);
  }
  if (max - min < 1e-9) {
    max += Math.abs(max) * 0.01 + 1e-6;
    min -= Math.abs(min) * 0.01 + 1e-6;
  }
  // the threshold first, so the data line is drawn over it where they meet
  const series: number[][] = o.threshold != null ? [values.map(() => o.threshold!), values] : [values];
  const rows = plotRows(series, { height: o.h - 1, min, max, format: fmtLabel, offset: 2 }).slice(0, o.h);
  const role = o.role ?? 'info';
  // the chart's own text (formatted numbers, box drawing): segments made directly, nothing to sanitise
  const out: Line[] = rows.map((r) => [
    { text: r.slice(0, LABEL_W + 1), role: 'dim' },
    { text: cut(r.slice(LABEL_W + 1), o.w - LABEL_W - 1), role },
  ]);
  // step axis: first and last step, resume marks (R) where a new segment starts
  let axisStr = '─'.repeat(plotW);
  for (const c of resumes) if (c < plotW) axisStr = `${axisStr.slice(0, c)}R${axisStr.slice(c + 1)}`;
  const left = `${from}`;
  const right = `${to}`;
  const mid = axisStr.slice(left.length + 1, Math.max(left.length + 1, plotW - right.length - 1));
  const line = `${left} ${mid} ${right}`;
  out.push([t(' '.repeat(LABEL_W - 3) + 'step ', 'dim'), t(cut(line, plotW + 2), 'dim')]);
  return out;
}

/**
 * A whole series (older buckets, then the recent window) as plain text: the cockpit's chart with
 * `plotW` columns of plot (the value labels come on top) and `h` plot rows plus the step axis. null
 * when there are fewer than two points.
 */
export function chartText(s: Series, o: { plotW: number; h: number }): string | null {
  const pts = seriesPoints(s, 'all');
  if (pts.length < 2) return null;
  const lines = chart(pts, { w: o.plotW + LABEL_W + 2, h: o.h });
  return lines.length ? lines.map(plain).join('\n') : null;
}
