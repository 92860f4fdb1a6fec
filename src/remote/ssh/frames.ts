// The byte stream of the watch loop (watch-script.ts) cut into its parts: text lines, the raw
// bytes that follow an `s … LEN` or `Y BID TOT` header, and raw blocks up to a terminator (the process table).
/** Parses the byte stream of the watch loop: lines, raw data after `s` headers, raw blocks up to a terminator (exported for tests). */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);
  private need = 0;
  private dataParts: Buffer[] = [];
  private dataHeader: string[] | null = null;
  private raw: { term: Buffer; done(b: Buffer): void } | null = null;
  constructor(
    private readonly onLine: (line: string) => void,
    private readonly onData: (header: string[], data: Buffer) => void,
  ) {}
  /** the bytes up to `term` are one raw block (the process table) */
  expectRaw(term: Buffer, done: (b: Buffer) => void): void {
    this.raw = { term, done };
  }
  push(b: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, b]) : b;
    for (;;) {
      if (this.raw) {
        const at = this.buf.indexOf(this.raw.term);
        if (at < 0) return;
        const r = this.raw;
        this.raw = null;
        const block = this.buf.subarray(0, at);
        this.buf = this.buf.subarray(at + r.term.length);
        r.done(block);
        continue;
      }
      if (this.need > 0) {
        if (this.buf.length === 0) return;
        const take = Math.min(this.need, this.buf.length);
        this.dataParts.push(this.buf.subarray(0, take));
        this.buf = this.buf.subarray(take);
        this.need -= take;
        if (this.need === 0) {
          const h = this.dataHeader!;
          const d = Buffer.concat(this.dataParts);
          this.dataParts = [];
          this.dataHeader = null;
          this.onData(h, d);
        }
        continue;
      }
      const nl = this.buf.indexOf(10);
      if (nl < 0) return;
      const line = this.buf.subarray(0, nl).toString('utf8');
      this.buf = this.buf.subarray(nl + 1);
      if (line.startsWith('s ') || line.startsWith('Y ')) {
        // `s … LEN` (one file's bytes) and `Y BID TOT` (a bulk read's bytes) carry raw data
        const f = line.split(' ');
        const len = Number(f[0] === 'Y' ? f[2] : f[10]);
        if (Number.isFinite(len) && len > 0) {
          this.need = len;
          this.dataHeader = f;
          continue;
        }
        this.onData(f, Buffer.alloc(0));
        continue;
      }
      this.onLine(line);
    }
  }
}
