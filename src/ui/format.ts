// Number and time formatting shared by panels. null means "unknown" and prints as "–".

export const NA = '–';

export function num(v: number | null | undefined, digits = 2): string {
  if (v == null || !Number.isFinite(v)) return v == null ? NA : String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(digits);
  return v.toFixed(digits);
}

/** 1234 → 1.2k, 12345678 → 12.3M */
export function si(v: number | null | undefined, digits = 1): string {
  if (v == null || !Number.isFinite(v)) return NA;
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(digits) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(digits) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(digits) + 'k';
  if (a >= 100) return v.toFixed(0);
  return v.toFixed(digits);
}

/** seconds → "45s", "12m03s", "3h12m", "2d04h" */
export function dur(s: number | null | undefined): string {
  if (s == null || !Number.isFinite(s)) return NA;
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

/** age of an ms-epoch timestamp relative to now: "12s ago" */
export function ago(ts: number | null | undefined, now: number): string {
  if (ts == null) return NA;
  return `${dur((now - ts) / 1000)} ago`;
}

export function clock(ts: number | null | undefined): string {
  if (ts == null) return NA;
  const d = new Date(ts);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}:${String(d.getSeconds()).padStart(2, '0')}`;
}

export function mib(v: number | null | undefined): string {
  if (v == null) return NA;
  if (v >= 1024) return `${(v / 1024).toFixed(1)}G`;
  return `${Math.round(v)}M`;
}

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

export function pct(v: number | null | undefined, digits = 0): string {
  if (v == null || !Number.isFinite(v)) return NA;
  return `${v.toFixed(digits)}%`;
}
