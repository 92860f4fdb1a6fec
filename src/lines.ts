// Incremental line splitting over byte chunks that arrive by offset. A partial last line is held
// back until its newline arrives; a line longer than the cap is dropped (counted as an error) and
// reading resumes at the next newline, so one monster line never costs more than the cap in memory.

export const DEFAULT_MAX_LINE = 1024 * 1024;

/** bytes decoded at once by the whole-lines path */
const WINDOW = 16 * 1024;

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
    // bytes up to here are read line by line (a window wholeLines left to this path)
    let slowTo = -1;
    while (start < data.length) {
      if (start > slowTo && this.pendingLen === 0 && !this.skipping) {
        const done = this.wholeLines(data, start, cb);
        if (done > start) {
          start = done;
          continue;
        }
        // left to the line-by-line path below: a window it declined, or a line longer than one
        if (done < 0) slowTo = -done - 1;
      }
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
      emit(buf.toString('utf8'), cb);
    }
  }

  /**
   * The complete lines of a window of `data` from `start` (nothing held back, not skipping),
   * decoded as one string and split there: a line's own Buffer view and decode cost more than its
   * parse (a training.csv row is ~30 bytes). Only when every byte of the window decodes to one
   * UTF-16 unit (units equal bytes: each unit comes from at least one byte, so no line hides a
   * multi-byte character), so a line's length is its byte count for the cap. Newline (0x0a) never
   * occurs inside a UTF-8 sequence and ends an invalid one, so one decode split at newlines is
   * each line's own decode. A line cut from the window is V8's sliced string, which keeps the
   * whole window alive: each is given its own copy (own()) before a reader can keep it.
   * Returns where the bytes not taken start; `-(end + 1)` when the window up to `end` is left to
   * the line-by-line path (a multi-byte character, or a line over the cap); `start` when the
   * window holds no newline.
   */
  private wholeLines(data: Buffer, start: number, cb: LineCallbacks): number {
    const last = data.lastIndexOf(10, Math.min(data.length, start + WINDOW) - 1);
    if (last < start) return start;
    const text = data.toString('utf8', start, last);
    if (text.length !== last - start) return -(last + 1);
    let from = 0;
    if (last - start > this.maxLine) {
      // a line over the cap is dropped by the line-by-line path: leave the window to it
      for (let nl = text.indexOf('\n'); from <= text.length; nl = text.indexOf('\n', from)) {
        const end = nl === -1 ? text.length : nl;
        if (end - from > this.maxLine) return -(last + 1);
        from = end + 1;
      }
      from = 0;
    }
    for (;;) {
      const nl = text.indexOf('\n', from);
      const end = nl === -1 ? text.length : nl;
      emit(from === 0 && end === text.length ? text : own(text.slice(from, end)), cb);
      if (nl === -1) break;
      from = nl + 1;
    }
    return last + 1;
  }

  /** The held-back partial line, for files known to be complete (e.g. a final line without newline). */
  flushPartial(cb: LineCallbacks): void {
    if (this.pendingLen === 0 || this.skipping) return;
    const text = Buffer.concat(this.pending, this.pendingLen).toString('utf8').replace(/\r$/, '');
    this.reset();
    if (text.trim() !== '') cb.line(text);
  }
}

/**
 * A string that holds only its own characters: a slice (V8 makes one of 13 or more characters a
 * view into its parent) is copied, so a line a reader keeps does not keep the 16 KiB decode window
 * it was cut from (measured: 100 000 kept 63-char lines of 2 000 000 held 126 MiB as slices, 11.6
 * MiB as copies — bench/line-retain.ts). Joining forces V8 to flatten into a new string; the
 * slice of that is the copy plus one character.
 */
function own(s: string): string {
  return s.length < 13 ? s : (' ' + s).slice(1);
}

/** one complete line: without its \r and a BOM; a blank line is skipped */
function emit(line: string, cb: LineCallbacks): void {
  let text = line;
  if (text.endsWith('\r')) text = text.slice(0, -1);
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a BOM (files written on Windows)
  if (text.trim() === '') return;
  cb.line(text);
}
