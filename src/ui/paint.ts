// The frame painter: writes a composed frame to the terminal row by row, only the rows that
// changed, each at an absolute position, inside a synchronized-update bracket. Within a changed
// row it writes from the first changed segment, and stops after the last one when the columns
// after it did not move (an age going from "8s" to "9s" is a few bytes, not a row): writing to
// a pty costs per byte, and was the largest single item of a frame. Ink still runs the
// app (state, keys, lifecycle); this replaces its whole-frame output path, which re-tokenises
// every character of every row on each frame (measured ~20 ms CPU per 120x40 frame on the shared
// 2-core box, against ~1 ms here) — the difference between nsa-top costing percent of a core or not.
import { lineToAnsi } from './ansi.js';
import { type Line, type Seg, strWidth } from './text.js';

function sameSeg(x: Seg, y: Seg): boolean {
  return x.text === y.text && x.role === y.role && !x.bold === !y.bold && !x.inverse === !y.inverse;
}

function widthOf(l: Line, from: number, to: number): number {
  let w = 0;
  for (let i = from; i < to; i++) w += strWidth(l[i]!.text);
  return w;
}

/**
 * What to write for row `next` over row `prev`: null when they are the same; else the column to
 * start at and the segments to write from there.
 */
export function rowDelta(prev: Line, next: Line): { col: number; segs: Line } | null {
  if (prev === next) return null;
  let i = 0;
  while (i < prev.length && i < next.length && sameSeg(prev[i]!, next[i]!)) i++;
  if (i === prev.length && i === next.length) return null;
  let a = prev.length;
  let b = next.length;
  while (a > i && b > i && sameSeg(prev[a - 1]!, next[b - 1]!)) {
    a--;
    b--;
  }
  // the unchanged tail may stay only if it has not moved (always so for rows of the same width,
  // which frames are; kept for any caller that is not)
  const end = widthOf(prev, i, a) === widthOf(next, i, b) ? b : next.length;
  return { col: widthOf(next, 0, i), segs: next.slice(i, end) };
}

export class FramePainter {
  private prev: Line[] = [];
  private cols = 0;
  private rows = 0;
  /** bytes written so far (for the bench and the tests) */
  bytes = 0;
  frames = 0;

  constructor(
    private readonly write: (s: string) => void,
    private readonly noColor: boolean,
  ) {}

  /** Forget what is on screen: the next paint clears and redraws everything (resize, external output). */
  invalidate(): void {
    this.prev = [];
    this.cols = 0;
  }

  paint(lines: Line[], cols: number, rows: number): void {
    const full = cols !== this.cols || rows !== this.rows || this.prev.length === 0;
    let out = '';
    if (full) out += '\x1b[H\x1b[2J';
    for (let y = 0; y < lines.length; y++) {
      // rows are compared as segments, never as escape strings: most rows of a frame are unchanged
      if (full || y >= this.prev.length) {
        out += `\x1b[${y + 1};1H${lineToAnsi(lines[y]!, this.noColor)}`;
        continue;
      }
      const d = rowDelta(this.prev[y]!, lines[y]!);
      if (d) out += `\x1b[${y + 1};${d.col + 1}H${lineToAnsi(d.segs, this.noColor)}`;
    }
    // rows the previous frame had and this one does not (smaller terminal): blank them
    for (let y = lines.length; y < this.prev.length && !full; y++) out += `\x1b[${y + 1};1H\x1b[2K`;
    this.prev = lines;
    this.cols = cols;
    this.rows = rows;
    if (!out) return;
    const s = `\x1b[?2026h${out}\x1b[${Math.max(1, rows)};1H\x1b[?2026l`;
    this.bytes += s.length;
    this.frames++;
    this.write(s);
  }
}
