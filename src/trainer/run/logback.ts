// The Log panel's scroll-back: the trainer's log read from the file on demand, backwards by byte
// ranges through the Host (local fs, or one read over the SSH connection), so thousands of lines are
// there without the collector keeping more than its 200-line tail. Memory is bounded: at most
// MAX_LINES lines (and MAX_BYTES of text) are kept, a contiguous run of the file's lines; lines after
// the kept run are only counted (how far behind live a scrolled-back view is), never held.
//
// A line is known by the byte offset it starts at: that is what a scrolled-back view anchors on, so
// the view holds still while the log grows (an offset from the end moves with every new line).
import type { Host } from '../../remote/host.js';

/** one line of the log and the byte offset where it starts */
export interface LogLine {
  at: number;
  text: string;
}

/** What is read of the log now (a new object after every change: the view keeps it as it is). */
export interface LogPage {
  path: string | null;
  /** the kept lines, oldest first, contiguous in the file */
  lines: readonly LogLine[];
  /** complete lines after the last kept one, up to the end read so far (counted, not kept) */
  after: number;
  /** the first kept line is the file's first */
  atStart: boolean;
  /** more lines lie before the first kept one than are kept (the cap): the pager has them */
  capped: boolean;
  /** a read is under way */
  loading: boolean;
  error: string | null;
}

/** Lines and bytes kept at most; a read backwards asks for CHUNK bytes at a time. */
export const MAX_LINES = 20_000;
const MAX_BYTES = 8 << 20;
const CHUNK = 128 << 10;
/** over SSH each read is a remote command: fewer, larger reads (one usually answers the first look) */
const CHUNK_SSH = 1 << 20;
/** over SSH, the lines written since are counted at most this often (a stat and a read each time) */
const REFRESH_SSH_MS = 2000;
/** a line longer than this is cut for the screen (the pager shows it whole) */
const MAX_LINE = 2000;

const EMPTY: LogPage = { path: null, lines: [], after: 0, atStart: false, capped: false, loading: false, error: null };

function cut(s: string): string {
  return s.length > MAX_LINE ? s.slice(0, MAX_LINE) + '…' : s;
}

/** Split bytes that start at a line start and end at a line end (a '\n') into lines with their offsets. */
export function splitLines(buf: Buffer, base: number): LogLine[] {
  const out: LogLine[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl < 0) break;
    let end = nl;
    if (end > start && buf[end - 1] === 13) end--;
    out.push({ at: base + start, text: cut(buf.toString('utf8', start, end)) });
    start = nl + 1;
  }
  return out;
}

function countNewlines(buf: Buffer): number {
  let n = 0;
  for (let i = buf.indexOf(10); i >= 0; i = buf.indexOf(10, i + 1)) n++;
  return n;
}

export class LogBack {
  private page: LogPage = EMPTY;
  private lines: LogLine[] = [];
  private bytes = 0;
  /** byte offset of the first kept line, and just past the last kept line */
  private from = 0;
  private to = 0;
  /** byte offset just past the last complete line read (the end of what `after` counts) */
  private end = 0;
  private after = 0;
  private ino: number | null = null;
  private busy: Promise<void> = Promise.resolve();
  private pending = 0;
  private lastRefresh = 0;
  private readonly chunk: number;

  private readonly listeners = new Set<() => void>();

  constructor(private readonly host: Host) {
    this.chunk = host.kind === 'local' ? CHUNK : CHUNK_SSH;
  }

  /** `fn` is called after every change of the page; returns the unsubscribe */
  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => {
      this.listeners.delete(fn);
    };
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  get(): LogPage {
    return this.page;
  }

  /** Forget everything (another file, or the view went back to live). */
  reset(): void {
    this.lines = [];
    this.bytes = 0;
    this.from = this.to = this.end = this.after = 0;
    this.ino = null;
    this.publish({ path: null, error: null });
  }

  private publish(p: Partial<LogPage>): void {
    this.page = {
      path: p.path !== undefined ? p.path : this.page.path,
      lines: this.lines.slice(),
      after: this.after,
      atStart: this.from === 0 && this.ino !== null,
      capped: this.from > 0 && this.lines.length >= MAX_LINES,
      loading: this.pending > 0,
      error: p.error !== undefined ? p.error : this.page.error,
    };
    this.changed();
  }

  /** Run reads one at a time, in order. */
  private queue(fn: () => Promise<void>): Promise<void> {
    this.pending++;
    const run = this.busy.then(fn).catch((e: Error) => {
      this.page = { ...this.page, error: e.message };
    });
    this.busy = run.finally(() => {
      this.pending--;
      this.publish({});
    });
    return this.busy;
  }

  /**
   * Read `path` from its end back until at least `want` lines are kept (or its start); a read of
   * the same file as before reads what it has not read yet (older lines, and the new ones at its end).
   */
  open(path: string, want: number): Promise<void> {
    return this.queue(async () => {
      const st = await this.host.stat(path);
      if (!st?.isFile) throw new Error(`${path}: not found`);
      if (this.page.path !== path || this.ino !== st.ino || st.size < this.end) {
        // another file, or this one replaced or cut short: start again from its end
        this.lines = [];
        this.bytes = 0;
        this.after = 0;
        this.ino = st.ino;
        const buf = await this.host.readRange(path, Math.max(0, st.size - this.chunk), st.size);
        const base = st.size - buf.length;
        const lastNl = buf.lastIndexOf(10);
        const firstNl = base === 0 ? -1 : buf.indexOf(10);
        // the first bytes may be the tail of a line that began before the chunk: older() reads it
        this.from = this.to = this.end = lastNl < 0 ? base : base + lastNl + 1;
        if (lastNl >= 0 && firstNl < lastNl) {
          this.lines = splitLines(buf.subarray(firstNl + 1, lastNl + 1), base + firstNl + 1);
          this.from = base + firstNl + 1;
        }
        this.bytes = this.lines.reduce((n, l) => n + l.text.length, 0);
        this.page = { ...this.page, path, error: null };
      }
      await this.olderNow(path, want - this.lines.length);
      await this.newerNow(path);
    });
  }

  /** Keep at least `n` more lines before the first kept one (reading back), as the cap allows. */
  older(n: number): Promise<void> {
    const path = this.page.path;
    if (!path) return Promise.resolve();
    return this.queue(() => this.olderNow(path, n));
  }

  /** Count (and keep, while under the cap) the lines written since the last read. */
  refresh(): Promise<void> {
    const path = this.page.path;
    if (!path || this.pending > 0) return Promise.resolve();
    if (this.host.kind !== 'local' && Date.now() - this.lastRefresh < REFRESH_SSH_MS) return Promise.resolve();
    this.lastRefresh = Date.now();
    return this.queue(() => this.newerNow(path));
  }

  private async olderNow(path: string, n: number): Promise<void> {
    let got = 0;
    while (got < n && this.from > 0 && this.lines.length < MAX_LINES && this.bytes < MAX_BYTES) {
      // read back a chunk; the bytes before its first newline belong to a line that starts earlier
      const start = Math.max(0, this.from - this.chunk);
      const buf = await this.host.readRange(path, start, this.from);
      if (buf.length === 0) break;
      const firstNl = start === 0 ? -1 : buf.indexOf(10);
      if (start > 0 && (firstNl < 0 || firstNl === buf.length - 1)) {
        // a line longer than a chunk: its last chunk stands for it (the pager shows it whole)
        this.lines.unshift({ at: start, text: '…' + cut(buf.toString('utf8').replace(/\r?\n$/, '')) });
        this.from = start;
        got++;
        continue;
      }
      const ls = splitLines(buf.subarray(firstNl + 1), start + firstNl + 1);
      this.lines.unshift(...ls);
      this.bytes += ls.reduce((k, l) => k + l.text.length, 0);
      this.from = start + firstNl + 1;
      got += ls.length;
    }
    // over the cap: the lines far below are only counted from now on
    while (this.lines.length > MAX_LINES || this.bytes > MAX_BYTES) {
      const l = this.lines.pop()!;
      this.bytes -= l.text.length;
      this.to = l.at;
      this.after++;
    }
  }

  private async newerNow(path: string): Promise<void> {
    const st = await this.host.stat(path);
    if (!st?.isFile || st.ino !== this.ino || st.size < this.end) {
      // replaced or cut short under a scrolled-back view: what it showed is gone
      this.page = { ...this.page, error: `${path} was replaced or truncated` };
      return;
    }
    while (this.end < st.size) {
      const buf = await this.host.readRange(path, this.end, Math.min(st.size, this.end + 4 * this.chunk));
      const lastNl = buf.lastIndexOf(10);
      if (lastNl < 0) break; // a line still being written
      const whole = buf.subarray(0, lastNl + 1);
      if (this.after === 0 && this.to === this.end && this.lines.length < MAX_LINES && this.bytes < MAX_BYTES) {
        const ls = splitLines(whole, this.end);
        const room = Math.min(ls.length, MAX_LINES - this.lines.length);
        const kept = ls.slice(0, room);
        this.lines.push(...kept);
        this.bytes += kept.reduce((k, l) => k + l.text.length, 0);
        this.to = kept.length < ls.length ? ls[room]!.at : this.end + whole.length;
        this.after += ls.length - kept.length;
      } else this.after += countNewlines(whole);
      this.end += whole.length;
    }
    if (this.to === 0 && this.lines.length === 0) this.to = this.end;
  }
}
