// Followers: the byte-offset bookkeeping of a file read forward across polls. One place tracks the
// offset, inode and size, judges truncation and replacement (rotation), and hands the new bytes to
// a parser: lines to a line sink (heartbeat jsonl, csv, logs), TFRecord events to a callback (TB
// event files). No I/O here: RunModel plans the reads (`request`) and feeds the answers back.
import type { ReadRequest, ReadResult } from '../../remote/host.js';
import type { FileHealth } from './snapshot.js';
import type { FileKind } from './readers/names.js';
import { DEFAULT_MAX_LINE, LineSplitter } from '../../lines.js';
import { TfRecordReader, type TbEvent } from './readers/tb.js';

export type ResetCause = 'file-replaced' | 'file-truncated';

/** Parses one line; returns an error to count on the file, or null. */
export type LineSinkFn = (text: string, mtimeMs: number | null) => string | null;

export function newHealth(): FileHealth {
  return { offset: 0, size: 0, records: 0, parseErrors: 0, lastError: null, resets: 0 };
}

/** A file read forward by byte offset: where the next read starts, and what the file was. */
export class FollowedFile {
  offset = 0;
  /** inode of the file as last read (null before the first read) */
  ino: number | null = null;
  mtimeMs: number | null;
  readonly health = newHealth();
  /** the last read answered an error (unreadable): what is left of it is not waited for */
  readFailed = false;

  constructor(
    readonly name: string,
    readonly path: string,
    mtimeMs: number | null = null,
  ) {
    this.mtimeMs = mtimeMs;
  }

  /**
   * Judges a forward read: the bytes to parse (they start at `offset`), or null when there is
   * nothing to parse now. Replacement and truncation are judged from our own inode/offset record,
   * not only from the host's `reset` (a host shared by several readers may have seen the new inode
   * first); on either, `onReset` runs and the file is followed again from 0.
   */
  protected accept(r: ReadResult, onReset: (cause: ResetCause) => void): Buffer | null {
    this.readFailed = !!r.error;
    if (r.error) {
      this.health.lastError = r.error;
      return null;
    }
    if (!r.stat) return null; // vanished: keep what we have
    const replaced = this.ino !== null && r.stat.ino !== this.ino;
    const truncated = !replaced && r.stat.size < this.offset;
    this.ino = r.stat.ino;
    this.health.size = r.stat.size;
    this.mtimeMs = r.stat.mtimeMs;
    if (replaced || truncated) {
      this.health.resets++;
      onReset(replaced ? 'file-replaced' : 'file-truncated');
      this.offset = 0;
      this.health.offset = 0;
      if (r.offset !== 0) return null; // data from elsewhere: read from 0 next poll
    } else if (r.offset !== this.offset) return null; // answered from another offset: ask again next poll
    return r.data;
  }

  /** the forward read of this poll */
  request(maxBytes: number): ReadRequest {
    return { path: this.path, offset: this.offset, maxBytes };
  }

  protected advance(n: number): void {
    this.offset += n;
    this.health.offset = this.offset;
  }
}

/** What a line file's parser offers: its sink, what a reset does, and (tail-first files) a history builder. */
export interface LineParser {
  sink: LineSinkFn;
  onReset(cause: ResetCause): void;
  history?: () => { sink: LineSinkFn; finish: () => void };
}

interface Backfill {
  pos: number;
  /** exclusive; set once the tail read found its first newline */
  end: number | null;
  splitter: LineSplitter;
  sink: LineSinkFn;
  /** merge the history into the live state once everything before the tail has been read */
  finish(): void;
}

const BACKFILL_PIECE = 512 * 1024;

/**
 * A line-oriented file. A partial last line waits for its newline. A file larger than the tail
 * threshold is read from its end first (skipping to the first newline); its older history is read
 * in bounded pieces (`backfill`) and merged in front once complete.
 */
export class LineFollower extends FollowedFile {
  private readonly splitter = new LineSplitter(DEFAULT_MAX_LINE);
  /** skip bytes up to the first newline of the next forward read (started mid-file) */
  private tailStart = false;
  private backfill: Backfill | null = null;

  constructor(
    name: string,
    path: string,
    readonly kind: FileKind,
    private readonly parser: LineParser,
    start: { size: number; mtimeMs: number; tailThreshold: number; tailBytes: number },
  ) {
    super(name, path, start.mtimeMs);
    if (start.size > start.tailThreshold && parser.history) {
      this.offset = start.size - start.tailBytes;
      this.tailStart = true;
      const h = parser.history();
      this.backfill = {
        pos: 0,
        end: null,
        splitter: new LineSplitter(DEFAULT_MAX_LINE),
        sink: h.sink,
        finish: h.finish,
      };
    }
  }

  /** backfill reads within `budget` bytes (several modest pieces: each buffer dies young in the GC); returns the bytes planned */
  planBackfill(budget: number, reads: ReadRequest[], owners: ((r: ReadResult) => void)[]): number {
    const bf = this.backfill;
    if (!bf || bf.end === null) return 0;
    let pos = bf.pos;
    let planned = 0;
    while (budget - planned > 0 && pos < bf.end) {
      const n = Math.min(budget - planned, bf.end - pos, BACKFILL_PIECE);
      reads.push({ path: this.path, offset: pos, maxBytes: n });
      owners.push((r) => this.onBackfillRead(r));
      pos += n;
      planned += n;
    }
    return planned;
  }

  /** history still to read: null when none is pending */
  backfillLeft(): number | null {
    return this.backfill ? (this.backfill.end ?? this.offset) - this.backfill.pos : null;
  }

  onRead(r: ReadResult): void {
    let data = this.accept(r, (cause) => {
      this.splitter.reset();
      this.tailStart = false;
      this.backfill = null;
      this.parser.onReset(cause);
    });
    if (!data || !r.stat) return;
    if (this.tailStart && data.length) {
      const nl = data.indexOf(10);
      if (nl === -1) {
        this.advance(data.length);
        return;
      }
      this.tailStart = false;
      if (this.backfill) this.backfill.end = r.offset + nl + 1;
      this.advance(nl + 1);
      data = data.subarray(nl + 1);
    }
    this.feed(this.splitter, data, this.parser.sink, r.stat.mtimeMs);
    this.advance(data.length);
  }

  private onBackfillRead(r: ReadResult): void {
    const bf = this.backfill;
    if (!bf || r.error || !r.stat || r.offset !== bf.pos || bf.end === null || r.stat.ino !== this.ino) return;
    const data = r.data.subarray(0, Math.max(0, bf.end - bf.pos));
    this.feed(bf.splitter, data, bf.sink, r.stat.mtimeMs);
    bf.pos += data.length;
    if (bf.pos >= bf.end || data.length === 0) {
      bf.splitter.flushPartial({ line: (t) => void bf.sink(t, null), error: () => {} });
      this.backfill = null;
      bf.finish();
    }
  }

  private feed(sp: LineSplitter, data: Buffer, sink: LineSinkFn, mtimeMs: number | null): void {
    const h = this.health;
    sp.push(data, {
      line: (text) => {
        let err: string | null;
        try {
          err = sink(text, mtimeMs);
        } catch (e) {
          err = `internal: ${(e as Error).message}`;
        }
        if (err) {
          h.parseErrors++;
          h.lastError = err;
        } else h.records++;
      },
      error: (reason) => {
        h.parseErrors++;
        h.lastError = reason;
      },
    });
  }
}

/** A TensorBoard event file: TFRecord framing, events handed to `onEvent`. */
export class TbFollower extends FollowedFile {
  private readonly reader = new TfRecordReader();
  /** size in the latest listing of tb/ */
  listedSize: number;

  constructor(
    name: string,
    path: string,
    /** the order files were first seen (= name order): they are read one after another */
    readonly order: number,
    listedSize: number,
  ) {
    super(name, path);
    this.listedSize = listedSize;
  }

  onRead(r: ReadResult, onReset: (cause: ResetCause) => void, onEvent: (ev: TbEvent) => void): void {
    const data = this.accept(r, (cause) => {
      this.reader.reset();
      onReset(cause);
    });
    if (!data) return;
    const before = { rec: this.reader.records, err: this.reader.errors };
    this.reader.push(data, onEvent);
    this.advance(data.length);
    this.health.records += this.reader.records - before.rec;
    this.health.parseErrors += this.reader.errors - before.err;
    if (this.reader.errors > before.err) this.health.lastError = this.reader.lastError;
  }
}
