// Small robust statistics used by the rules. Pure.
import type { Series, SeriesPoint } from '../trainer/run/snapshot.js';

export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function quantile(xs: readonly number[], q: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))));
  return s[i]!;
}

/** Least-squares fit y = a + b·x; r2 is the coefficient of determination. */
export function linfit(
  xs: readonly number[],
  ys: readonly number[],
): { slope: number; intercept: number; r2: number } | null {
  return linfitOf(
    Math.min(xs.length, ys.length),
    (i) => xs[i]!,
    (i) => ys[i]!,
  );
}

/** linfit over points 0..n-1 read in place (no copy of a window into two arrays each round). */
export function linfitOf(
  n: number,
  x: (i: number) => number,
  y: (i: number) => number,
): { slope: number; intercept: number; r2: number } | null {
  if (n < 2) return null;
  let sx = 0,
    sy = 0;
  for (let i = 0; i < n; i++) {
    sx += x(i);
    sy += y(i);
  }
  const mx = sx / n,
    my = sy / n;
  let sxx = 0,
    sxy = 0,
    syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = x(i) - mx,
      dy = y(i) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (sxx === 0) return null;
  const slope = sxy / sxx;
  const r2 = syy === 0 ? 1 : (sxy * sxy) / (sxx * syy);
  return { slope, intercept: my - slope * mx, r2 };
}

/** Recent full-resolution points of the newest segment of a series (resumes are not mixed). */
const segmentMemo = new WeakMap<Series, readonly SeriesPoint[]>();

/**
 * The points of the newest segment. Memoised per Series object (a snapshot's series are new
 * objects only when they changed), so the many rules asking each tick share one walk; the
 * array is frozen because it is shared.
 */
export function currentSegment(s: Series | undefined | null): readonly SeriesPoint[] {
  if (!s || s.recent.length === 0) return [];
  const known = segmentMemo.get(s);
  if (known) return known;
  const seg = s.recent[s.recent.length - 1]!.segment;
  // the usual case, one segment in the whole window: the window itself (a snapshot's arrays are
  // never edited; freezing it keeps it so)
  if (s.recent[0]!.segment === seg && Object.isFrozen(s.recent)) return s.recent;
  let i = s.recent.length - 1;
  while (i > 0 && s.recent[i - 1]!.segment === seg) i--;
  const pts = Object.freeze(s.recent.slice(i));
  segmentMemo.set(s, pts);
  return pts;
}
