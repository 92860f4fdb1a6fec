// Line splitting for the stdout/stderr of a long-lived command (nvidia-smi -lms, remote loops),
// bounded: a command that never prints a newline must cost at most `maxLine` bytes of memory
// (one such nvidia-smi grew a readline buffer to ~1.2 GB and crashed the cockpit with
// "RangeError: Invalid string length"). An over-long line is dropped up to its newline and
// reported once through onOverflow.

export const STREAM_MAX_LINE = 64 * 1024;

export class StreamLines {
  private parts: Buffer[] = [];
  private len = 0;
  private skipping = false;

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: (bytes: number) => void = () => {},
    private readonly maxLine = STREAM_MAX_LINE,
  ) {}

  push(b: Buffer): void {
    let start = 0;
    while (start < b.length) {
      const nl = b.indexOf(10, start);
      if (nl === -1) {
        if (this.skipping) return;
        if (this.len + (b.length - start) > this.maxLine) {
          this.parts = [];
          this.len = 0;
          this.skipping = true;
          this.onOverflow(this.maxLine);
          return;
        }
        this.parts.push(Buffer.from(b.subarray(start)));
        this.len += b.length - start;
        return;
      }
      if (this.skipping) {
        this.skipping = false;
        start = nl + 1;
        continue;
      }
      const piece = b.subarray(start, nl);
      start = nl + 1;
      if (this.len + piece.length > this.maxLine) {
        this.parts = [];
        this.len = 0;
        this.onOverflow(this.maxLine);
        continue;
      }
      const whole = this.len ? Buffer.concat([...this.parts, piece]) : piece;
      this.parts = [];
      this.len = 0;
      let line = whole.toString('utf8');
      if (line.endsWith('\r')) line = line.slice(0, -1);
      this.onLine(line);
    }
  }

  /** the stream ended: a last line without newline still counts */
  end(): void {
    if (this.len && !this.skipping) {
      const line = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      this.len = 0;
      this.onLine(line);
    }
  }
}
