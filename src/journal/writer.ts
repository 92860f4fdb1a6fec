// The journal's writer: what a cockpit or a watchdog observed and judged, appended to
// <out_dir>/.nsa-top/journal.jsonl through the one own-file path (src/trainer/control/ownfiles.ts:
// never a trainer file, never through a link, 0600), rotated by size into journal.1.jsonl …
// journal.<parts-1>.jsonl (the oldest removed). One writer per run: the first cockpit or watchdog
// takes .nsa-top/journal.lock (its pid and start time); the others say "recording by pid N" and
// take the lock over when its owner is gone. Written on the run's host only: over --host it does
// not record (and says so). The lines themselves are ./codec.ts.
import { hostname } from 'node:os';
import type { CockpitState } from '../cockpit/state.js';
import type { Host } from '../remote/host.js';
import { readProc } from '../remote/procs.js';
import {
  appendOwn,
  createOwn,
  OwnWriteError,
  readOnlyMode,
  removeOwn,
  renameOwn,
} from '../trainer/control/ownfiles.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import { diffState, encodeRecord, eventsOf, plainState, throttleSamples, type RecordKind } from './codec.js';

export const JOURNAL_FILE = 'journal.jsonl';
export const JOURNAL_LOCK = 'journal.lock';
/** the default cap of one run's journal, all parts together */
export const DEFAULT_JOURNAL_MAX_MB = 32;
export const JOURNAL_PARTS = 4;
/**
 * The most the keyframes write, on average, bytes a second. A long run's state is ~1.2 MB (every
 * series' 2000 recent points and its history): a key of it every 60 s would be 72 MB an hour, and
 * the default 32 MB journal would keep the last 25 minutes; at this rate it is one every ~20 minutes.
 */
export const KEY_BYTES_PER_S = 1024;

/** the name of part i (0: the one being written) */
export function journalPart(i: number): string {
  return i === 0 ? JOURNAL_FILE : `journal.${i}.jsonl`;
}

export interface RecorderOptions {
  host: Host;
  dirs: RunDirs;
  /** who records: 'cockpit' or 'watchdog' (said in the lock and the open line) */
  as: string;
  /** the cap of the whole journal in MB (parts × part size); default 32 */
  maxMb?: number;
  readOnly?: boolean;
  /** --no-record */
  noRecord?: boolean;
  /** a full state at least this often (default 60 s), or — a state larger than 60 KB — as often as
   *  writes keys at KEY_BYTES_PER_S */
  keyEveryMs?: number;
  /** appends are batched this long (default 5 s: each append is a guarded open, fstat and write, ~0.7 ms of CPU) */
  flushEveryMs?: number;
  /** how often a recorder that does not hold the lock looks whether its owner is gone (default 10 s) */
  retryEveryMs?: number;
  /** nsa-top's version, in the open line */
  version?: string;
}

interface LockBody {
  pid: number;
  startTime: string;
  host: string;
  as: string;
  since: number;
}

/**
 * Records CockpitStates into the run's journal. `status` says, in one line, whether this process
 * records, and if not why ("recording by pid N (cockpit)", "not recording: --no-record").
 */
export class JournalRecorder {
  status = 'not recording yet';
  /** bytes appended by this recorder */
  bytes = 0;
  records = 0;
  private holding = false;
  private me: LockBody | null = null;
  private pending: string[] = [];
  private pendingBytes = 0;
  private partBytes = 0;
  private readonly partMax: number;
  private lastState: CockpitState | null = null;
  /** the newest state the file holds (the pending lines lead on from it) */
  private flushedState: CockpitState | null = null;
  private sampledAt = 0;
  private keyAt = 0;
  /** the last keyframe's size, and the deltas written since it (what a reader applies past it) */
  private keyBytes = 0;
  private sinceKeyBytes = 0;
  private needKey = true;
  private flushTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;
  private latest: CockpitState | null = null;
  private readonly root: string;

  constructor(private readonly o: RecorderOptions) {
    this.root = o.dirs.outDir;
    const mb = o.maxMb ?? DEFAULT_JOURNAL_MAX_MB;
    this.partMax = Math.max(64 * 1024, Math.floor((mb * 1024 * 1024) / JOURNAL_PARTS));
  }

  get recording(): boolean {
    return this.holding && !this.closed;
  }

  /** Takes the lock (or says who holds it). Never throws: a recorder that cannot write says why. */
  async start(): Promise<string> {
    const o = this.o;
    if (o.noRecord) return (this.status = 'not recording: --no-record');
    if (readOnlyMode({ readOnly: o.readOnly })) return (this.status = 'not recording: read-only');
    if (o.host.kind !== 'local')
      return (this.status = `not recording: the run is on ${o.host.label} (the journal is written on the run's host, by a cockpit or watchdog there)`);
    try {
      const self = await readProc(o.host, process.pid);
      this.me = { pid: process.pid, startTime: self?.startTime ?? '', host: hostname(), as: o.as, since: o.host.now() };
    } catch (e) {
      return (this.status = `not recording: ${(e as Error).message}`);
    }
    await this.tryLock();
    if (!this.holding && !this.closed) this.scheduleRetry();
    return this.status;
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.tryLock().then(() => {
        if (!this.holding) this.scheduleRetry();
      });
    }, this.o.retryEveryMs ?? 10_000);
    this.retryTimer.unref();
  }

  private lockRel = `${NSA_DIR}/${JOURNAL_LOCK}`;

  /** the lock's holder, or null when there is none or it is gone (its pid dead or reused) */
  private async holder(): Promise<LockBody | 'unreadable' | null> {
    const { host } = this.o;
    let body: LockBody;
    try {
      body = JSON.parse((await host.readFile(`${this.root}/${this.lockRel}`, 4096)).toString('utf8')) as LockBody;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'ENOENT' ? null : 'unreadable';
    }
    if (!body || typeof body.pid !== 'number') return 'unreadable';
    // another machine's process cannot be proven gone from here: its lock holds
    if (body.host !== hostname()) return body;
    const p = await readProc(host, body.pid).catch(() => null);
    if (!p || String(p.startTime) !== String(body.startTime)) return null;
    return body;
  }

  private async tryLock(): Promise<void> {
    if (this.closed || this.holding || !this.me) return;
    const { host } = this.o;
    const mine = JSON.stringify(this.me) + '\n';
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await createOwn(host, this.root, this.lockRel, mine, { readOnly: this.o.readOnly, private: true });
        this.holding = true;
        break;
      } catch (e) {
        if (!(e instanceof OwnWriteError && e.code === 'EEXIST')) {
          this.status = `not recording: ${e instanceof Error ? e.message : String(e)}`;
          return;
        }
      }
      const h = await this.holder();
      if (h === 'unreadable') {
        this.status = `not recording: ${NSA_DIR}/${JOURNAL_LOCK} is not a lock nsa-top can read (remove it to record)`;
        return;
      }
      if (h) {
        this.status = `recording by pid ${h.pid} (${h.as}${h.host !== hostname() ? ` on ${h.host}` : ''})`;
        return;
      }
      // its owner is gone: the stale lock is taken over
      await removeOwn(host, this.root, this.lockRel, { readOnly: this.o.readOnly }).catch(() => {});
    }
    if (!this.holding) return;
    const st = await host.stat(`${this.root}/${NSA_DIR}/${JOURNAL_FILE}`).catch(() => null);
    this.partBytes = st?.size ?? 0;
    this.needKey = true;
    this.lastState = null;
    this.flushedState = null;
    this.status = `recording to ${this.root}/${NSA_DIR}/${JOURNAL_FILE}`;
    this.push('open', {
      as: this.o.as,
      pid: process.pid,
      host: hostname(),
      version: this.o.version ?? null,
      maxMb: (this.partMax * JOURNAL_PARTS) / 1048576,
    });
    // the state in hand when the lock came (a follower that took over) is recorded at once
    if (this.latest) this.record(this.latest);
  }

  private push(k: RecordKind, fields: Record<string, unknown>, t = this.o.host.now()): void {
    const line = encodeRecord(t, k, fields) + '\n';
    this.pending.push(line);
    this.pendingBytes += Buffer.byteLength(line);
    this.records++;
    if (!this.flushTimer && !this.closed) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = null;
        void this.flush();
      }, this.o.flushEveryMs ?? 5000);
      this.flushTimer.unref();
    }
  }

  /** Records one state (the collector's emit, the watchdog's round). Cheap when nothing changed. */
  record(s: CockpitState): void {
    this.latest = s;
    if (!this.recording) return;
    const th = throttleSamples(this.lastState, s, this.sampledAt);
    if (th.sampled) this.sampledAt = s.at;
    // the live state is diffed and encoded as it is, no JSON copy: a state is never changed after
    // the collector (or the watchdog's look) hands it over, and the members it shares with the last
    // one (the samples kept, the action log, the requests) compare by reference at no cost
    const live = th.state as unknown as Record<string, unknown>;
    const events = eventsOf(this.lastState, th.state);
    // a key every keyEveryMs, or rarer for a large state (KEY_BYTES_PER_S), and once the deltas since
    // the last one reach an eighth of a part. Only deltas count there: a key larger than that (a long
    // run's state) once made every look a key, ~1.2 MB a second written and ~8 % of a core
    const keyEvery = Math.max(this.o.keyEveryMs ?? 60_000, (this.keyBytes / KEY_BYTES_PER_S) * 1000);
    if (
      this.needKey ||
      !this.lastState ||
      s.at - this.keyAt >= keyEvery ||
      this.sinceKeyBytes >= Math.max(256 * 1024, this.partMax / 8)
    ) {
      const before = this.pendingBytes;
      this.push('key', { s: { ...live, at: undefined } }, s.at);
      this.needKey = false;
      this.keyAt = s.at;
      this.keyBytes = this.pendingBytes - before;
      this.sinceKeyBytes = 0;
    } else {
      const d = diffState(this.lastState as unknown as Record<string, unknown>, live, 'at');
      if (d) {
        const before = this.pendingBytes;
        this.push('delta', { d }, s.at);
        this.sinceKeyBytes += this.pendingBytes - before;
      }
    }
    for (const e of events) {
      const { k, ...rest } = e;
      this.push(k as RecordKind, rest, s.at);
    }
    this.lastState = th.state;
  }

  /** Appends what is pending (one write), rotating first when the part would pass its size. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushNow());
    return this.flushing;
  }

  private async flushNow(): Promise<void> {
    if (!this.holding || this.pending.length === 0) return;
    const { host } = this.o;
    let lines = this.pending;
    let size = this.pendingBytes;
    // the pending lines lead from the state of the last flush to the newest one
    const upTo = this.lastState;
    const from = this.flushedState;
    this.pending = [];
    this.pendingBytes = 0;
    try {
      if (this.partBytes > 0 && this.partBytes + size > this.partMax) {
        await this.rotate();
        // a new part begins with an open line and the whole state the pending deltas start from:
        // a reader can start in it
        if (from) {
          const body = plainState(from);
          delete body.at;
          const head = [
            encodeRecord(host.now(), 'open', { as: this.o.as, pid: process.pid, host: hostname(), rotated: true }),
            encodeRecord(from.at, 'key', { s: body }),
          ].map((l) => l + '\n');
          lines = [...head, ...lines];
          size += head.reduce((n, l) => n + Buffer.byteLength(l), 0);
        }
      }
      const data = lines.join('');
      await appendOwn(host, this.root, `${NSA_DIR}/${JOURNAL_FILE}`, data, {
        readOnly: this.o.readOnly,
        private: true,
      });
      this.partBytes += size;
      this.bytes += size;
      this.flushedState = upTo;
    } catch (e) {
      this.status = `not recording: ${e instanceof Error ? e.message : String(e)}`;
      this.holding = false;
      await this.release();
    }
  }

  private async rotate(): Promise<void> {
    const { host } = this.o;
    const o = { readOnly: this.o.readOnly };
    await removeOwn(host, this.root, `${NSA_DIR}/${journalPart(JOURNAL_PARTS - 1)}`, o).catch(() => {});
    for (let i = JOURNAL_PARTS - 2; i >= 0; i--)
      await renameOwn(host, this.root, `${NSA_DIR}/${journalPart(i)}`, `${NSA_DIR}/${journalPart(i + 1)}`, o).catch(
        (e: unknown) => {
          if (!(e instanceof OwnWriteError && e.code === 'ENOENT')) throw e;
        },
      );
    this.partBytes = 0;
  }

  private async release(): Promise<void> {
    if (!this.me) return;
    const h = await this.holder().catch(() => null);
    if (h && h !== 'unreadable' && h.pid === this.me.pid && h.startTime === this.me.startTime)
      await removeOwn(this.o.host, this.root, this.lockRel, { readOnly: this.o.readOnly }).catch(() => {});
  }

  /** Writes what is pending and gives the lock back. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.flush();
    this.closed = true;
    if (this.holding) {
      this.holding = false;
      await this.release();
    }
  }
}
