// The frame painter: writes a composed frame to the terminal row by row, only the rows that
// changed, each at an absolute position, inside a synchronized-update bracket. Ink still runs the
// app (state, keys, lifecycle); this replaces its whole-frame output path, which re-tokenises
// every character of every row on each frame (measured ~20 ms CPU per 120x40 frame on the shared
// 2-core box, against ~1 ms here) — the difference between nsa-top costing percent of a core or not.
import { lineToAnsi } from './ansi.js';
import type { Line } from './text.js';

function sameLine(a: Line, b: Line): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.text !== y.text || x.role !== y.role || !x.bold !== !y.bold || !x.inverse !== !y.inverse) return false;
  }
  return true;
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
      // rows are compared as segments first: most rows of a frame are unchanged, and turning them
      // into escape strings only to find that out was most of this function's cost
      if (!full && y < this.prev.length && sameLine(lines[y]!, this.prev[y]!)) continue;
      out += `\x1b[${y + 1};1H${lineToAnsi(lines[y]!, this.noColor)}`;
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
