// Styled lines: the UI composes the whole screen as rows of segments of known width, so layout
// invariants (nothing spills, nothing overlaps) hold by construction and are easy to test.
import type { Role } from './palette.js';

export interface Seg {
  text: string;
  role?: Role;
  bold?: boolean;
  inverse?: boolean;
}
export type Line = Seg[];

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)|\x1b[@-Z\\-_]/g;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/** Text from files or processes: escape sequences and control characters removed, tabs expanded. */
export function clean(s: string): string {
  return s.replace(ANSI, '').replace(/\t/g, '  ').replace(/\r?\n/g, ' ').replace(CONTROL, '');
}

function cpWidth(cp: number): number {
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

export function strWidth(s: string): number {
  let w = 0;
  for (const ch of s) w += cpWidth(ch.codePointAt(0)!);
  return w;
}

/** Cut `s` to at most `width` columns. */
export function cut(s: string, width: number): string {
  if (width <= 0) return '';
  let w = 0;
  let out = '';
  for (const ch of s) {
    const cw = cpWidth(ch.codePointAt(0)!);
    if (w + cw > width) break;
    out += ch;
    w += cw;
  }
  return out;
}

/** Cut with an ellipsis when something was dropped. */
export function ellipsize(s: string, width: number): string {
  if (strWidth(s) <= width) return s;
  if (width <= 1) return cut(s, width);
  return cut(s, width - 1) + '…';
}

export function lineWidth(line: Line): number {
  let w = 0;
  for (const s of line) w += strWidth(s.text);
  return w;
}

/** Exactly `width` columns: truncated (with … when `mark`) or padded with spaces. */
export function fit(line: Line, width: number, mark = true): Line {
  const out: Line = [];
  let w = 0;
  const total = lineWidth(line);
  const limit = total > width && mark && width > 1 ? width - 1 : width;
  for (const s of line) {
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
  if (w < width) out.push({ text: ' '.repeat(width - w) });
  return out;
}

export function plain(line: Line): string {
  return line.map((s) => s.text).join('');
}

export const t = (text: string, role?: Role, extra?: Omit<Seg, 'text' | 'role'>): Seg => ({ text, role, ...extra });

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
