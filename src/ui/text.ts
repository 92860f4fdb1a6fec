// Styled lines: the UI composes the whole screen as rows of segments of known width, so layout
// invariants (nothing spills, nothing overlaps) hold by construction and are easy to test.
import { sanitize } from '../sanitize.js';
import type { Role } from './palette.js';

export interface Seg {
  text: string;
  role?: Role;
  bold?: boolean;
  inverse?: boolean;
}
export type Line = Seg[];

/**
 * Text from files or processes: escape sequences and control characters removed, tabs expanded
 * (the one sanitiser, src/sanitize.ts; every segment made with t() goes through it too).
 */
export const clean = sanitize;

/** The columns one code point takes: the definition the fast paths below must agree with. */
export function cpWidth(cp: number): number {
  if (cp < 0x300) return 1;
  // combining marks, zero width joiners, variation selectors
  if ((cp >= 0x300 && cp <= 0x36f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0;
  if (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1faff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  )
    return 2;
  return 1;
}

// strWidth and cut walk UTF-16 code units by index: a frame measures every segment of every row,
// and iterating with for…of allocates a string per character (most of what a frame cost the GC).

/** The code point at `i` and how many code units it takes (a lone surrogate counts as itself). */
function codePointAt(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return (c - 0xd800) * 0x400 + (d - 0xdc00) + 0x10000;
  }
  return c;
}

// The code units whose column is not exactly one: combining marks, zero-width characters and
// variation selectors (0), the wide ranges (2), and surrogates (an astral code point, wide or not,
// or a lone surrogate: the per-code-point walk decides). Text without them, nearly all a frame
// holds (ASCII, box drawing, blocks, arrows), is one column per code unit: the native regexp
// answers that without a JavaScript loop over every character of every row of every frame.
const NOT_ONE_COLUMN =
  // ranges of code units, not combined characters (the rule reads U+0300 after a range's start as one)
  // eslint-disable-next-line no-misleading-character-class
  /[\u0300-\u036f\u1100-\u115f\u200b-\u200f\u2e80-\ua4cf\uac00-\ud7a3\ud800-\udfff\uf900-\ufaff\ufe00-\ufe0f\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/;

export function strWidth(s: string): number {
  if (!NOT_ONE_COLUMN.test(s)) return s.length;
  let w = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x300) {
      w++;
      continue;
    }
    const cp = codePointAt(s, i);
    if (cp > 0xffff) i++;
    w += cpWidth(cp);
  }
  return w;
}

/** Cut `s` to at most `width` columns. */
export function cut(s: string, width: number): string {
  if (width <= 0) return '';
  if (!NOT_ONE_COLUMN.test(s)) return s.length <= width ? s : s.slice(0, width);
  let w = 0;
  for (let i = 0; i < s.length; i++) {
    const cp = codePointAt(s, i);
    const cw = cp < 0x300 ? 1 : cpWidth(cp);
    if (w + cw > width) return s.slice(0, i);
    w += cw;
    if (cp > 0xffff) i++;
  }
  return s;
}

/** Cut with an ellipsis when something was dropped. */
export function ellipsize(s: string, width: number): string {
  if (strWidth(s) <= width) return s;
  if (width <= 1) return cut(s, width);
  return cut(s, width - 1) + '…';
}

export function lineWidth(line: Line): number {
  let w = 0;
  // an index, not for…of: the code that runs once a second stays in V8's lower tiers, where an
  // iterator allocates a result object per item
  for (let i = 0; i < line.length; i++) w += strWidth(line[i]!.text);
  return w;
}

const SPACES: string[] = [];

/** `n` spaces: the padding of a frame's rows is the same few lengths every frame, kept */
export function spaces(n: number): string {
  if (n > 512) return ' '.repeat(n);
  return (SPACES[n] ??= ' '.repeat(n));
}

/** Exactly `width` columns: truncated (with … when `mark`) or padded with spaces. */
export function fit(line: Line, width: number, mark = true): Line {
  const total = lineWidth(line);
  // the common case, a line that already fits: no copy (callers never mutate what fit returns)
  if (total === width) return line;
  // (one array of the final length: a copy grown by a push is allocated twice)
  if (total < width) return line.concat({ text: spaces(width - total) });
  const out: Line = [];
  let w = 0;
  const limit = total > width && mark && width > 1 ? width - 1 : width;
  for (let i = 0; i < line.length; i++) {
    const s = line[i]!;
    if (w >= limit) break;
    const sw = strWidth(s.text);
    if (w + sw <= limit) {
      out.push(s);
      w += sw;
    } else {
      const t = cut(s.text, limit - w);
      out.push({ ...s, text: t });
      w += strWidth(t);
      break;
    }
  }
  if (total > width && mark && width > 1) {
    out.push({ text: '…', role: 'dim' });
    w += 1;
  }
  if (w < width) out.push({ text: spaces(width - w) });
  return out;
}

export function plain(line: Line): string {
  return line.map((s) => s.text).join('');
}

/**
 * A segment. Its text is sanitised here, where data becomes screen text: a panel may hand it a
 * CONFIG value, a dump frame or a file name as read, and no ESC or control character reaches the
 * terminal (the cockpit's own styling is added later, by ansi.ts).
 */
export const t = (text: string, role?: Role, extra?: Omit<Seg, 'text' | 'role'>): Seg => ({
  text: sanitize(text),
  role,
  ...extra,
});

/** Join segment groups with a separator, dropping empty groups. */
export function join(parts: (Seg[] | null | undefined | false)[], sep = '  '): Line {
  const out: Line = [];
  for (const p of parts) {
    if (!p || p.length === 0) continue;
    if (out.length) out.push({ text: sep });
    out.push(...p);
  }
  return out;
}

/** Word-wrap plain text into lines of at most `width` columns. */
export function wrap(s: string, width: number): string[] {
  if (width <= 0) return [];
  const out: string[] = [];
  let cur = '';
  for (const word of s.split(/\s+/).filter(Boolean)) {
    let w = word;
    while (strWidth(w) > width) {
      if (cur) {
        out.push(cur);
        cur = '';
      }
      out.push(cut(w, width));
      w = w.slice(cut(w, width).length);
    }
    if (!cur) cur = w;
    else if (strWidth(cur) + 1 + strWidth(w) <= width) cur += ' ' + w;
    else {
      out.push(cur);
      cur = w;
    }
  }
  if (cur) out.push(cur);
  return out;
}
