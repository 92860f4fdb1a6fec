// Incremental line splitting over byte chunks that arrive by offset. A partial last line is held
// back until its newline arrives; a line longer than the cap is dropped (counted as an error) and
// reading resumes at the next newline, so one monster line never costs more than the cap in memory.

export const DEFAULT_MAX_LINE = 1024 * 1024;

export interface LineCallbacks {
  line(text: string): void;
  /** a line was dropped; `reason` is shown in status */
  error(reason: string): void;
}

export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingLen = 0;
  /** inside an over-long line: drop bytes until the next newline */
  private skipping = false;

  constructor(readonly maxLine = DEFAULT_MAX_LINE) {}

  /** bytes held back (a partial last line) */
  get held(): number {
    return this.pendingLen;
  }

  reset(): void {
    this.pending = [];
    this.pendingLen = 0;
    this.skipping = false;
  }

  /** Start mid-file: drop everything up to and including the first newline. */
  skipToNextLine(): void {
    this.reset();
    this.skipping = true;
  }

  push(data: Buffer, cb: LineCallbacks): void {
    let start = 0;
    while (start < data.length) {
      const nl = data.indexOf(10, start);
      if (nl === -1) {
        if (this.skipping) return;
        const rest = data.length - start;
        if (this.pendingLen + rest > this.maxLine) {
          this.reset();
          this.skipping = true;
          cb.error(`line longer than ${this.maxLine} bytes dropped`);
          return;
        }
        // a copy: a view would keep the whole (possibly multi-MiB) read buffer alive
        this.pending.push(Buffer.from(data.subarray(start)));
        this.pendingLen += rest;
        return;
      }
      if (this.skipping) {
        this.skipping = false;
        start = nl + 1;
        continue;
      }
      const piece = data.subarray(start, nl);
      start = nl + 1;
      if (this.pendingLen + piece.length > this.maxLine) {
        this.reset();
        cb.error(`line longer than ${this.maxLine} bytes dropped`);
        continue;
      }
      let buf: Buffer;
      if (this.pendingLen) {
        this.pending.push(piece);
        buf = Buffer.concat(this.pending, this.pendingLen + piece.length);
        this.pending = [];
        this.pendingLen = 0;
      } else buf = piece;
      let text = buf.toString('utf8');
      if (text.endsWith('\r')) text = text.slice(0, -1);
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a BOM (files written on Windows)
      if (text.trim() === '') continue;
      cb.line(text);
    }
  }

  /** The held-back partial line, for files known to be complete (e.g. a final line without newline). */
  flushPartial(cb: LineCallbacks): void {
    if (this.pendingLen === 0 || this.skipping) return;
    const text = Buffer.concat(this.pending, this.pendingLen).toString('utf8').replace(/\r$/, '');
    this.reset();
    if (text.trim() !== '') cb.line(text);
  }
}
