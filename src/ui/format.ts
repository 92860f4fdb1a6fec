// The panels' formatters: the shared ones (src/format.ts, one style for everything a person reads)
// and the cockpit's own bar glyphs.
export { ago, clock, dur, mib, NA, num, pct, si } from '../format.js';

/** A horizontal bar of `width` cells for a fraction in [0,1]. */
export function bar(frac: number | null, width: number): string {
  if (width <= 0) return '';
  if (frac == null || !Number.isFinite(frac)) return '·'.repeat(width);
  const f = Math.min(1, Math.max(0, frac));
  const eighths = Math.round(f * width * 8);
  const full = Math.floor(eighths / 8);
  const rest = eighths % 8;
  const parts = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
  let s = '█'.repeat(full);
  if (full < width) s += parts[rest] ?? '';
  return s + ' '.repeat(Math.max(0, width - [...s].length));
}
