// Reading long text in the Log and Dumps panels: the search the operator typed (`/`, n/N, esc), its
// matches highlighted, and long lines scrolled sideways (←/→). Pure functions of a line.
import { type Line, type Seg, strWidth } from './text.js';

/** The panels that read text this way. */
export type TextPanel = 'log' | 'dumps';

export interface Search {
  panel: TextPanel;
  query: string;
  /** the query is being typed (keys are text until enter or esc) */
  typing: boolean;
  /** the current match: the Log's line by its byte offset, the Dumps panel's line by its index */
  at: number | null;
  /** what the last n/N found or did not ("no older match"), for the title */
  said?: string;
}

/** Whether a line of text matches the query (case-insensitive; an empty query matches nothing). */
export function matches(text: string, query: string): boolean {
  return query !== '' && text.toLowerCase().includes(query.toLowerCase());
}

/** The line with every occurrence of the query drawn inverse. */
export function highlight(line: Line, query: string): Line {
  if (!query) return line;
  const q = query.toLowerCase();
  const out: Line = [];
  // matches may span segments: find them in the whole text, then cut the segments at them
  const text = line.map((s) => s.text).join('');
  const low = text.toLowerCase();
  if (low.length !== text.length || !low.includes(q)) return line;
  const hit = new Uint8Array(text.length);
  for (let i = low.indexOf(q); i >= 0; i = low.indexOf(q, i + q.length)) hit.fill(1, i, i + q.length);
  let pos = 0;
  for (const s of line) {
    let i = 0;
    while (i < s.text.length) {
      const on = hit[pos + i]!;
      let j = i;
      while (j < s.text.length && hit[pos + j] === on) j++;
      const piece: Seg = { ...s, text: s.text.slice(i, j) };
      out.push(on ? { ...piece, role: 'accent', bold: true, inverse: true } : piece);
      i = j;
    }
    pos += s.text.length;
  }
  return out;
}

/** The line without its first `x` columns (a wide character cut in half becomes a space). */
export function shiftLine(line: Line, x: number): Line {
  if (x <= 0) return line;
  const out: Line = [];
  let col = 0;
  for (const s of line) {
    const w = strWidth(s.text);
    if (col + w <= x) {
      col += w;
      continue;
    }
    if (col >= x) {
      out.push(s);
      continue;
    }
    let text = '';
    for (const ch of s.text) {
      const cw = strWidth(ch);
      if (col >= x) text += ch;
      else if (col + cw > x) text += ' '.repeat(col + cw - x);
      col += cw;
    }
    out.push({ ...s, text });
    col = x; // everything after is counted from here on
    continue;
  }
  return out;
}

/** The title's word on the search: "/nccl 12 matches" while reading, "/nccl▏" while typing. */
export function searchNote(s: Search, count: number | null): string {
  if (s.typing) return `/${s.query}▏`;
  const found = count === null ? '' : count === 0 ? ' no match' : ` ${count} match${count === 1 ? '' : 'es'}`;
  return `/${s.query}${found}${s.said ? ` (${s.said})` : ''}`;
}
