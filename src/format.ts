// How nsa-top writes what a person reads: durations, ages, numbers and sizes, in one style for the
// cockpit, the judge's alerts, the commands and the trainer's messages. Pure: no I/O, no imports.
//
// Durations are compact and unit-suffixed: "45s", "3m32s", "2h05m", "2d04h" (never "212 s" or
// "3 m 32 s"). The cockpit shows whole seconds (its ages tick once a second); measurements and
// thresholds below 10 s keep two significant digits ("0.44s", "2.5s") with `dur(x, 'precise')`.

/** what an unknown value prints as */
export const NA = '–';

/** seconds → "45s", "3m32s", "2h05m", "2d04h"; unknown → "–", negative → "0s" */
export function dur(s: number | null | undefined, precision: 'whole' | 'precise' = 'whole'): string {
  if (s == null || Number.isNaN(s)) return NA;
  if (s === Infinity) return '∞';
  s = Math.max(0, s);
  if (precision === 'precise' && s < 9.95) return `${sig(s, 2)}s`;
  s = Math.round(s);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

/** the age of an ms-epoch timestamp at `now`: "12s ago" */
export function ago(ts: number | null | undefined, now: number, precision: 'whole' | 'precise' = 'whole'): string {
  if (ts == null) return NA;
  return `${dur((now - ts) / 1000, precision)} ago`;
}

/** local wall-clock time of an ms-epoch timestamp: "14:03:59" */
export function clock(ts: number | null | undefined): string {
  if (ts == null) return NA;
  const d = new Date(ts);
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}:${String(d.getSeconds()).padStart(2, '0')}`;
}

/** fixed decimals ("2.3456"); very small or large magnitudes in exponent form ("3.00e-4") */
export function num(v: number | null | undefined, digits = 2, na = NA): string {
  if (v == null) return na;
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toFixed(digits);
}

/** significant digits without trailing zeros ("0.0123", "1.5", "2000" for 2001.99); exponent form outside 1e-3..1e6 */
export function sig(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toString();
}

/** 1234 → "1234", 12345 → "12.3k", 12345678 → "12.3M" */
export function si(v: number | null | undefined, digits = 1): string {
  if (v == null || !Number.isFinite(v)) return NA;
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(digits) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(digits) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(digits) + 'k';
  if (a >= 100) return v.toFixed(0);
  return v.toFixed(digits);
}

export function pct(v: number | null | undefined, digits = 0): string {
  if (v == null || !Number.isFinite(v)) return NA;
  return `${v.toFixed(digits)}%`;
}

/** MiB in a narrow column: "812M", "39.6G" */
export function mib(v: number | null | undefined): string {
  if (v == null) return NA;
  if (v >= 1024) return `${(v / 1024).toFixed(1)}G`;
  return `${Math.round(v)}M`;
}

/** a byte count: "512 B", "1.5 KiB", "12.0 MiB", "1.25 GiB" */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** a whole number with thousands grouped: 1234567 → "1,234,567" (as toLocaleString('en-US') writes
 *  it, without loading ICU's number formatter: its first use costs a one-shot command ~15 ms) */
export function grouped(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const s = String(Math.round(Math.abs(n)));
  return (n < 0 && Math.round(n) !== 0 ? '-' : '') + s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** strings in code-unit order (for a stable, locale-free sort: ICU's collator, which
 *  localeCompare loads on first use, costs a one-shot command ~8 ms) */
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
