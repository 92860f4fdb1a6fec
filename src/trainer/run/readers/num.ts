// Number coercion shared by the readers. The real trainer writes Python floats: JSON heartbeats
// may carry bare NaN/Infinity tokens (json.dumps default) and older runs wrote "nan" strings;
// CSV cells may read "nan", "inf", "-inf". Everything non-numeric becomes null; non-finite numbers
// are kept as NaN/±Infinity so callers can count them, never store them in a series.

/** number | numeric string → number (NaN/±Infinity kept); anything else → null */
export function toNum(v: unknown): number | null {
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return parseNumCell(v);
  if (typeof v === 'boolean') return null;
  return null;
}

/** A finite number or null. */
export function finiteOrNull(v: unknown): number | null {
  const n = toNum(v);
  return n !== null && Number.isFinite(n) ? n : null;
}

const NAN_WORDS = new Set(['nan', '+nan', '-nan']);
const INF_WORDS = new Set(['inf', '+inf', 'infinity', '+infinity']);
const NINF_WORDS = new Set(['-inf', '-infinity']);

/** One CSV/text cell → number (NaN/±Infinity for the usual spellings), null when not a number. */
export function parseNumCell(raw: string): number | null {
  const s = raw.trim();
  if (s === '') return null;
  const c0 = s.charCodeAt(0);
  // fast path: decimal / exponent forms (what the trainer writes)
  if ((c0 >= 48 && c0 <= 57) || c0 === 45 || c0 === 43 || c0 === 46) {
    const n = Number(s);
    if (!Number.isNaN(n)) {
      // Number() also takes 0x10 / 0b1 / 0o7 and "-Infinity": only plain decimals are numbers here,
      // except the infinity spellings handled below
      const c1 = s.charCodeAt(1);
      if (c0 === 48 && s.length > 1 && ((c1 >= 65 && c1 <= 90) || (c1 >= 97 && c1 <= 122)) && c1 !== 69 && c1 !== 101)
        return null;
      if (Number.isFinite(n)) return n;
    }
  }
  const lower = s.toLowerCase();
  if (NAN_WORDS.has(lower)) return NaN;
  if (INF_WORDS.has(lower)) return Infinity;
  if (NINF_WORDS.has(lower)) return -Infinity;
  return null;
}

/** An integer cell (step numbers): finite, integral, ≥ 0. */
export function parseIntCell(raw: string): number | null {
  const n = parseNumCell(raw);
  return n !== null && Number.isInteger(n) && n >= 0 ? n : null;
}

export function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
