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

/** 10^0 … 10^22: every one exact in a double */
const POW10 = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`));

/**
 * parseNumCell(text.slice(from, to)) without the slice and the string-to-number call when the
 * cell is a plain decimal ([-]digits[.digits][e[±]digits], at most 15 digits, no spaces): what
 * the trainers write, one to four cells per CSV row. Such a value is exact as m · 10^p with an
 * integer m < 2^53 and |p| <= 22, where one multiplication or division by the exact power of ten
 * rounds correctly (Clinger's fast path): the double Number() gives. Anything else goes to
 * parseNumCell.
 */
export function parseNumSpan(text: string, from: number, to: number): number | null {
  let i = from;
  let c = text.charCodeAt(i);
  const neg = c === 45;
  if (neg) c = text.charCodeAt(++i);
  let m = 0;
  let digits = 0;
  while (i < to && c >= 48 && c <= 57) {
    m = m * 10 + (c - 48);
    digits++;
    c = text.charCodeAt(++i);
  }
  if (digits === 0) return parseNumCell(text.slice(from, to));
  let p = 0;
  if (i < to && c === 46) {
    c = text.charCodeAt(++i);
    const at = i;
    while (i < to && c >= 48 && c <= 57) {
      m = m * 10 + (c - 48);
      c = text.charCodeAt(++i);
    }
    if (i === at) return parseNumCell(text.slice(from, to));
    digits += i - at;
    p = at - i;
  }
  if (i < to && (c === 101 || c === 69)) {
    c = text.charCodeAt(++i);
    const eneg = c === 45;
    if (eneg || c === 43) c = text.charCodeAt(++i);
    const at = i;
    let e = 0;
    while (i < to && c >= 48 && c <= 57 && i - at < 3) {
      e = e * 10 + (c - 48);
      c = text.charCodeAt(++i);
    }
    if (i === at) return parseNumCell(text.slice(from, to));
    p += eneg ? -e : e;
  }
  if (i !== to || digits > 15 || p > 22 || p < -22) return parseNumCell(text.slice(from, to));
  const v = p === 0 ? m : p > 0 ? m * POW10[p]! : m / POW10[-p]!;
  return neg ? -v : v;
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
