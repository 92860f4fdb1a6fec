// The watch loop: one long-lived channel running watch-script.ts, ticked every `intervalMs`. It
// lists the watched directories and sends the new bytes of followed files with each frame, answers
// one-shot reads, runs the process-table reader (PROC_SCRIPT) and sends kills, all without a
// channel or a login shell per request. Frames are parsed by FrameParser; registrations survive a
// reconnect (follows resume from the byte after the last one received).
import { randomBytes } from 'node:crypto';
import type { ClientChannel } from 'ssh2';
import type { DirEntry, FileStat, ProcTable, ProcTableRequest } from '../host.js';
import { parseProcScriptOutput } from '../procs.js';
import type { BoxFacts, SshConnection } from './connection.js';
import type { ChannelLimiter } from './channels.js';
import { commandLine } from './exec.js';
import { notRegularType, parseFindEntry, parseLsLine, sortByName, statOf } from './listing.js';
import { FrameParser } from './frames.js';
import { WATCH_SCRIPT } from './watch-script.js';
import { sshTrace, sshTraceSpan, sshTracing } from './trace.js';

export const FOLLOW_CHUNK = 4 * 1024 * 1024;
export const FOLLOW_BUFFER_CAP = 64 * 1024 * 1024;
const LEASE_MS = 60_000;
export const FRAME_WAIT_MS = 20_000;
/** a bulk read takes files up to this size whole (the script's `cap`) */
export const BULK_FILE_MAX = 262_144;
/** fewer first reads than this in one turn go out one by one */
const BULK_MIN = 8;

export interface Follow {
  id: number;
  path: string;
  /** file offset of buf[0] */
  base: number;
  chunks: Buffer[];
  len: number;
  /** inode last seen (0 unknown, -1 gone) */
  ino: number;
  stat: FileStat | null;
  error?: string;
  pendingReset?: 'truncated' | 'replaced';
  /** offset up to which data was handed to the caller */
  delivered: number;
  lastUsed: number;
  paused: boolean;
  /** the tick seq after which this follow's data is valid (set on (re)registration) */
  validFromSeq: number;
}

export interface WatchedDir {
  id: number;
  path: string;
  entries: DirEntry[] | null;
  /** the look-ahead (LookPoll.token) whose listing `entries` is, until a frame lists the dir */
  lookedBy?: object;
  lastUsed: number;
  validFromSeq: number;
}

/** The answer to a one-shot read. */
export interface OneShotAnswer {
  stat: FileStat | null;
  reset?: 'truncated' | 'replaced';
  offset: number;
  data: Buffer;
  error?: string;
}

/** What the loop's hello said of the box (watch-script.ts `H`): `-` where it could not tell. */
export interface HelloFacts {
  uid: string;
  cpus: string;
  gpu: boolean;
  /** `date +%s%N` and `date +%s`, a line each (clockOffsetOf reads them) */
  clock: string;
  /** when (our clock) the hello arrived */
  at: number;
}

/** What a script run in the loop (`x`) answered: its exit code, stdout, last stderr line. */
export interface ScriptAnswer {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  durationMs: number;
}

/** a script's arguments travel as lines: one with a line break (or a NUL) goes by exec instead */
const LINE_SAFE = /^[^\n\r\0]*$/;
/** a write's script goes as lines: no CR (a `read` may keep or drop it) and no NUL */
const MULTILINE_SAFE = /^[^\r\0]*$/;
/** a write with more data than this goes by exec (the loop's shell reads it a byte at a time) */
export const LOOP_INPUT_MAX = 256 * 1024;

/** the lines a write's data travels as (the last one has no line break after it, maybe empty) */
function dataLines(data: Buffer): number {
  let n = 1;
  for (let i = data.indexOf(10); i >= 0; i = data.indexOf(10, i + 1)) n++;
  return n;
}
/** the loop's `timeout 20` ran out */
const TIMEOUT_EXIT = 124;

interface OneShot {
  path: string;
  resolve(r: OneShotAnswer): void;
}

/** Absolute or ./-relative: a path starting with `-` never reaches find/tail as an option. */
export function safePath(p: string): string {
  return p.startsWith('/') ? p : `./${p}`;
}

/** A bulk read sent with `b` and its answer as it arrives (see watch-script.ts). */
interface Bulk {
  id: number;
  items: Map<string, { id: number; path: string; maxBytes: number }>;
  ys: { r: string; ino: string; size: string; mtime: string; type: string; mode: string; path: string }[];
  /** path → `INO SIZE MTIME` read after the bytes */
  ws: Map<string, string>;
  data: Buffer | null;
  /** cat could not read one of the files (or its exit did not come): nothing is taken from `data` */
  catFailed?: boolean;
}

export class WatchLoop {
  private watch: { chan: ClientChannel; pid: number | null; nonce: string; parser: FrameParser } | null = null;
  private readonly lightWaiters = new Map<number, (b: Buffer | null) => void>();
  private watchStarting: Promise<void> | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  private nextId = 1;
  /** the last tick sent, and the last one the loop answered */
  tickSeq = 0;
  doneSeq = 0;
  private inFlight = 0;
  /** when the oldest unanswered tick was sent (null: none outstanding) */
  private waitingSince: number | null = null;
  readonly dirs = new Map<string, WatchedDir>();
  readonly follows = new Map<string, Follow>();
  private readonly followById = new Map<number, Follow>();
  private readonly dirById = new Map<number, WatchedDir>();
  private readonly oneShots = new Map<number, OneShot>();
  /** the loop can read many files in one go (`b`): it said `H 1 1` */
  private bulkOk = false;
  /** a J is due after this turn's asks run aside (joinSoon) */
  private joinDue = false;
  /** first reads asked for in this turn of the event loop, sent together */
  private bulkQueue: { id: number; path: string; maxBytes: number }[] = [];
  private bulkTimer: NodeJS.Immediate | null = null;
  /** bulk reads sent and not yet answered, oldest first (the loop answers them in order) */
  private readonly bulks: Bulk[] = [];
  /** inode last seen per path (a read of a replaced file starts over) */
  readonly lastIno = new Map<string, number>();
  private readonly seqWaiters: { seq: number; resolve(): void }[] = [];
  /** scripts (`x`) sent and not yet answered: their stdout once it arrived */
  private readonly scripts = new Map<number, { out: Buffer | null; done(r: ScriptAnswer | null): void }>();
  /** the box's constant facts and its clock as the loop's hello said them (null: no hello yet) */
  helloFacts: HelloFacts | null = null;
  /** the loop said hello (`H`): what the box can do is known */
  private hello: Promise<void> | null = null;
  private helloSeen = false;
  private helloDone: (() => void) | null = null;
  private frameDir: WatchedDir | null = null;
  private frameEntries: DirEntry[] = [];
  /** frames received (stats) */
  frames = 0;
  /** scripts sent (`x`, `w`; stats) */
  scriptsSent = 0;
  /** one-shot reads asked (SshStats.reads) */
  readsAsked = 0;
  /** NSA_TOP_SSH_TRACE: each tick's span */
  private readonly tickTraces = new Map<number, () => void>();
  /** when (our clock) the last frame arrived that covered every registration: the data's age */
  private fullFrameAt: number | null = null;

  constructor(
    private readonly conn: SshConnection,
    private readonly channels: ChannelLimiter,
    private readonly box: BoxFacts,
    private readonly intervalMs: number,
  ) {}

  /** whether the loop runs now */
  get up(): boolean {
    return this.watch !== null;
  }

  /** whether nothing is registered (no dir watched, no file followed) */
  get idle(): boolean {
    return this.dirs.size === 0 && this.follows.size === 0;
  }

  /** Sends a kill through the loop (a shell already running: no channel); false when it is not up. */
  kill(pid: number, sig: 'TERM' | 'KILL'): boolean {
    if (!this.watch) return false;
    this.send(`k ${sig} ${pid}`);
    return true;
  }

  // ---------------------------------------------------------------- registrations (see poll.ts)

  /** The watch script's registration lines; every path goes through safePath (a leading `-` is a name). */
  private sendDir(d: WatchedDir): void {
    this.send(`d ${d.id} ${safePath(d.path)}|`);
  }

  private sendFollow(f: Follow, from: number, ino: number): void {
    this.send(`f ${f.id} ${from} ${ino} ${FOLLOW_CHUNK} ${safePath(f.path)}|`);
  }

  /** Watches a directory (its listing arrives with each frame); true when newly registered. */
  watchDir(path: string, now: number): { dir: WatchedDir; fresh: boolean } {
    let d = this.dirs.get(path);
    const fresh = !d;
    if (!d) {
      d = { id: this.nextId++, path, entries: null, lastUsed: now, validFromSeq: this.tickSeq + 1 };
      this.dirs.set(path, d);
      this.dirById.set(d.id, d);
      this.sendDir(d);
    }
    d.lastUsed = now;
    return { dir: d, fresh };
  }

  /** Starts following `path` from `offset` (its new bytes arrive with each frame). */
  startFollow(path: string, offset: number, now: number): Follow {
    const f: Follow = {
      id: this.nextId++,
      path,
      base: offset,
      chunks: [],
      len: 0,
      ino: this.lastIno.get(path) ?? 0,
      stat: null,
      delivered: offset,
      lastUsed: now,
      paused: false,
      validFromSeq: this.tickSeq + 1,
    };
    this.follows.set(path, f);
    this.followById.set(f.id, f);
    this.sendFollow(f, offset, f.ino);
    return f;
  }

  /** Follows again from another offset (the caller went back, or jumped): the buffer starts over. */
  refollow(f: Follow, offset: number, now: number): void {
    f.chunks = [];
    f.len = 0;
    f.base = offset;
    f.delivered = offset;
    f.lastUsed = now;
    f.paused = false;
    f.validFromSeq = this.tickSeq + 1;
    this.sendFollow(f, offset, this.lastIno.get(f.path) ?? f.ino);
  }

  /** A follow paused for a full buffer goes on once the caller consumed half of it. */
  resumeIfDrained(f: Follow, offset: number): void {
    if (f.paused && f.len - (offset - f.base) < FOLLOW_BUFFER_CAP / 2) {
      f.paused = false;
      f.validFromSeq = this.tickSeq + 1;
      this.sendFollow(f, f.base + f.len, f.ino);
    }
  }

  /** Leases: stops following, and watching, what nobody asked for in a while. */
  expireLeases(now: number): void {
    for (const [p, f] of this.follows) {
      if (now - f.lastUsed > LEASE_MS) {
        this.send(`g ${f.id}`);
        this.follows.delete(p);
        this.followById.delete(f.id);
      }
    }
    for (const [p, d] of this.dirs) {
      if (now - d.lastUsed > LEASE_MS) {
        this.send(`u ${d.id}`);
        this.dirs.delete(p);
        this.dirById.delete(d.id);
      }
    }
  }

  /** Drops what the caller has consumed: the buffer starts at `from`. */
  dropBefore(f: Follow, from: number): void {
    const skip = from - f.base;
    if (skip <= 0) return;
    const all = Buffer.concat(f.chunks);
    const rest = all.subarray(Math.min(skip, all.length));
    f.chunks = rest.length ? [rest] : [];
    f.len = rest.length;
    f.base = from;
  }

  // ---------------------------------------------------------------- the loop

  /** Starts the loop (once; concurrent callers share the start) and (re)registers everything. */
  async ensure(): Promise<void> {
    if (this.watch) return;
    if (this.watchStarting) return this.watchStarting;
    this.watchStarting = (async () => {
      const client = await this.conn.waitConnected(Date.now() + FRAME_WAIT_MS);
      const gen = await this.channels.acquire(Date.now() + FRAME_WAIT_MS);
      const nonce = randomBytes(16).toString('hex');
      let ch: ClientChannel;
      sshTrace('watch loop: opening its channel');
      try {
        ch = await this.conn.openExec(
          client,
          commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch', this.box.gnuFind ? 'auto' : 'posix', nonce]),
        );
      } catch (e) {
        this.channels.release(gen);
        throw e;
      }
      sshTrace('watch loop: channel open');
      let sawPid = false;
      this.helloSeen = false;
      this.helloFacts = null;
      this.hello = new Promise<void>((r) => (this.helloDone = r));
      const parser: FrameParser = new FrameParser(
        (line) => {
          if (!sawPid && /^\d+$/.test(line)) {
            sawPid = true;
            w.pid = Number(line);
            return;
          }
          if (line.startsWith('P ')) {
            const id = Number(line.slice(2));
            parser.expectRaw(Buffer.from(`\n@@P ${id} ${nonce}@@\n`), (b) => {
              const waiter = this.lightWaiters.get(id);
              this.lightWaiters.delete(id);
              waiter?.(b);
            });
            return;
          }
          if (line.startsWith('Q ')) {
            const id = Number(line.slice(2));
            parser.expectRaw(Buffer.from(`\n@@Q ${id} ${nonce}@@\n`), (b) => {
              const s = this.scripts.get(id);
              if (s) s.out = b;
            });
            return;
          }
          this.onWatchLine(line);
        },
        (h, d) => this.onWatchData(h, d),
      );
      const w = { chan: ch, pid: null as number | null, nonce, parser };
      this.watch = w;
      this.inFlight = 0;
      ch.on('data', (b: Buffer) => parser.push(b));
      ch.stderr.on('data', () => {});
      ch.on('close', () => {
        this.channels.release(gen);
        if (this.watch === w) this.stopLocal();
      });
      // (re)register everything: dirs, and follows from the byte after the last one received
      for (const d of this.dirs.values()) {
        d.validFromSeq = this.tickSeq + 1;
        this.sendDir(d);
      }
      for (const f of this.follows.values()) {
        if (f.paused) continue;
        f.validFromSeq = this.tickSeq + 1;
        this.sendFollow(f, f.base + f.len, f.ino);
      }
      this.tick();
      const iv = this.intervalMs;
      this.watchTimer = setInterval(() => {
        if (this.inFlight === 0) this.tick();
      }, iv);
      this.watchTimer.unref?.();
    })();
    try {
      await this.watchStarting;
    } finally {
      this.watchStarting = null;
    }
  }

  /** Forgets the loop on this side (its channel closed): pending answers fail, registrations stay. */
  stopLocal(): void {
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = null;
    const w = this.watch;
    this.watch = null;
    this.frameDir = null;
    this.inFlight = 0;
    this.waitingSince = null;
    try {
      w?.chan.close();
    } catch {
      /* ignore */
    }
    // pending one-shot reads fail; pollDir retries them after reconnect
    this.bulks.length = 0;
    this.bulkQueue = [];
    for (const [id, o] of this.oneShots) {
      o.resolve({ stat: null, offset: 0, data: Buffer.alloc(0), error: 'connection lost' });
      this.oneShots.delete(id);
    }
    for (const s of this.seqWaiters.splice(0)) s.resolve();
    for (const [id, waiter] of this.lightWaiters) {
      this.lightWaiters.delete(id);
      waiter(null);
    }
    // scripts in flight go by exec instead (it waits for the reconnect)
    for (const [id, s] of this.scripts) {
      this.scripts.delete(id);
      s.done(null);
    }
    this.helloDone?.();
    this.hello = null;
  }

  /** Waits (at most `ms`) for the loop's hello; false when the loop went away or it did not come. */
  async waitHello(ms: number): Promise<boolean> {
    if (this.hello && !this.helloSeen) {
      let t: NodeJS.Timeout | undefined;
      await Promise.race([this.hello, new Promise((r) => (t = setTimeout(r, ms)))]);
      clearTimeout(t);
    }
    return this.watch !== null && this.helloSeen;
  }

  send(line: string): void {
    this.watch?.chan.write(`${line}\n`);
  }

  /** pid of the remote watch loop (diagnostics and tests) */
  watchPid(): number | null {
    return this.watch?.pid ?? null;
  }

  /** ms since the last frame that covered every registration (null: none yet) */
  viewAgeMs(): number | null {
    return this.fullFrameAt === null ? null : Date.now() - this.fullFrameAt;
  }

  /** ms the watch loop has owed an answer (a hung remote file system shows here), else 0 */
  watchStallMs(): number {
    return this.waitingSince === null ? 0 : Date.now() - this.waitingSince;
  }

  tick(): number {
    // first reads queued in this turn go out before the frame that answers them
    if (this.bulkTimer) {
      clearImmediate(this.bulkTimer);
      this.flushBulk();
    }
    const seq = ++this.tickSeq;
    if (sshTracing) this.tickTraces.set(seq, sshTraceSpan(`loop frame ${seq}`));
    if (this.inFlight === 0) this.waitingSince = Date.now();
    this.inFlight++;
    this.send(`t ${seq}`);
    return seq;
  }

  waitSeq(seq: number, ms: number): Promise<boolean> {
    if (this.doneSeq >= seq) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        const i = this.seqWaiters.indexOf(w);
        if (i >= 0) this.seqWaiters.splice(i, 1);
        resolve(false);
      }, ms);
      const w = {
        seq,
        resolve: () => {
          clearTimeout(t);
          resolve(this.doneSeq >= seq);
        },
      };
      this.seqWaiters.push(w);
    });
  }

  private onWatchLine(line: string): void {
    const tag = line.slice(0, 2);
    const rest = line.slice(2);
    if (tag === 'B ') return;
    if (tag === 'H ') {
      const [g, bulk, uid, cpus, gpu, ns, secs] = rest.split(' ');
      this.bulkOk = bulk === '1';
      this.helloFacts = {
        uid: uid ?? '-',
        cpus: cpus ?? '-',
        gpu: gpu === 'g',
        clock: `${ns}\n${secs}`,
        at: Date.now(),
      };
      // the loop tried GNU find itself (told 'posix', it does not): the file scripts follow it
      this.box.gnuFind = g === '1';
      sshTrace('watch loop: hello');
      this.helloSeen = true;
      this.helloDone?.();
      return;
    }
    if (tag === 'q ') {
      // q ID RC LAST-STDERR-LINE
      const m = /^(\d+) (\d+) ?(.*)$/.exec(rest);
      if (!m) return;
      const s = this.scripts.get(Number(m[1]));
      if (!s) return;
      this.scripts.delete(Number(m[1]));
      const code = Number(m[2]);
      s.done({
        code: code === TIMEOUT_EXIT ? null : code,
        signal: code === TIMEOUT_EXIT ? 'SIGKILL' : null,
        stdout: s.out ?? Buffer.alloc(0),
        stderr: Buffer.from(code === TIMEOUT_EXIT ? 'timed out in the watch loop' : m[3]!),
        timedOut: code === TIMEOUT_EXIT,
        durationMs: 0,
      });
      return;
    }
    if (tag === 'y ' || tag === 'w ' || tag === 'X ') {
      this.onBulkLine(tag, rest);
      return;
    }
    if (tag === 'Z ') {
      const seq = Number(rest);
      this.tickTraces.get(seq)?.();
      this.tickTraces.delete(seq);
      this.doneSeq = Math.max(this.doneSeq, seq);
      this.inFlight = Math.max(0, this.inFlight - 1);
      this.waitingSince = this.inFlight > 0 ? Date.now() : null;
      this.frames++;
      // a frame answers for the files registered before its tick: a follow re-registered after a
      // reconnect is not seen until a later frame covers it
      if (![...this.follows.values(), ...this.dirs.values()].some((x) => x.validFromSeq > seq))
        this.fullFrameAt = Date.now();
      for (const w of [...this.seqWaiters]) {
        if (w.seq <= this.doneSeq) {
          this.seqWaiters.splice(this.seqWaiters.indexOf(w), 1);
          w.resolve();
        }
      }
      return;
    }
    if (tag === 'L ') {
      this.frameDir = this.dirById.get(Number(rest)) ?? null;
      this.frameEntries = [];
      return;
    }
    if (tag === 'e ' || tag === 'l ') {
      if (!this.frameDir) return;
      const e = tag === 'e ' ? parseFindEntry(rest) : parseLsLine(rest, Date.now() + this.box.clockOffsetMs);
      if (e) this.frameEntries.push(e);
      return;
    }
    if (tag === 'E ') {
      const d = this.frameDir;
      if (d && d.id === Number(rest)) {
        d.entries = sortByName(this.frameEntries);
        d.lookedBy = undefined;
      }
      this.frameDir = null;
      return;
    }
    if (tag === 'N ') {
      const d = this.dirById.get(Number(rest));
      if (d) {
        d.entries = null;
        d.lookedBy = undefined;
      }
      return;
    }
    if (tag === 'm ') {
      const [k, id] = rest.split(' ');
      if (k === 'o') {
        const o = this.oneShots.get(Number(id));
        if (o) {
          this.oneShots.delete(Number(id));
          this.lastIno.delete(o.path);
          o.resolve({ stat: null, offset: 0, data: Buffer.alloc(0) });
        }
      } else {
        const f = this.followById.get(Number(id));
        if (f) {
          f.stat = null;
          f.ino = -1;
        }
      }
    }
  }

  private onWatchData(h: string[], data: Buffer): void {
    if (h[0] === 'Y') {
      const b = this.bulks[0];
      if (b && b.id === Number(h[1])) b.data = data;
      return;
    }
    // s K ID INO SIZE MTIME TYPE MODE RESET OFF LEN
    const [, k, idS, inoS, sizeS, mtS, type, perm, rs, offS] = h;
    const id = Number(idS);
    const ino = Number(inoS);
    const stat = statOf(inoS, type, sizeS, mtS, perm);
    const off = Number(offS);
    const reset = rs === 'r' ? 'replaced' : rs === 'x' ? 'truncated' : undefined;
    if (k === 'o') {
      const o = this.oneShots.get(id);
      if (!o) return;
      this.oneShots.delete(id);
      this.lastIno.set(o.path, ino);
      o.resolve({ stat, reset, offset: off, data, error: notRegularType(type) });
      return;
    }
    const f = this.followById.get(id);
    if (!f) return;
    f.stat = stat;
    f.ino = ino;
    f.error = notRegularType(type);
    if (reset) {
      f.chunks = [];
      f.len = 0;
      f.base = 0;
      f.delivered = 0;
      f.pendingReset = reset;
    }
    if (data.length) {
      if (off !== f.base + f.len) {
        // a re-follow at another offset: start the buffer there
        f.chunks = [];
        f.len = 0;
        f.base = off;
      }
      f.chunks.push(data);
      f.len += data.length;
      if (f.len > FOLLOW_BUFFER_CAP && !f.paused) {
        f.paused = true;
        this.send(`g ${f.id}`);
      }
    }
  }

  oneShot(path: string, offset: number, maxBytes: number): Promise<OneShotAnswer> {
    const id = this.nextId++;
    this.readsAsked++;
    const traced = sshTraceSpan(`loop o ${id}: ${path}`);
    return new Promise((resolve) => {
      this.oneShots.set(id, {
        path,
        resolve: (r) => {
          traced();
          resolve(r);
        },
      });
      // a first read of a whole file waits for this turn's others: many go out as one bulk read
      if (this.bulkOk && offset === 0 && maxBytes >= BULK_FILE_MAX && !this.lastIno.has(path)) {
        this.bulkQueue.push({ id, path, maxBytes });
        this.bulkTimer ??= setImmediate(() => this.flushBulk());
        return;
      }
      this.send(`o ${id} ${offset} ${this.lastIno.get(path) ?? 0} ${maxBytes} ${path}|`);
    });
  }

  /**
   * The first reads queued in this turn: one `b` command when there are many (over SSH each `o` is
   * a find and a tail in the remote shell, and thousands of files took a minute), else one `o` each.
   */
  private flushBulk(): void {
    this.bulkTimer = null;
    const q = this.bulkQueue.splice(0);
    const live = q.filter((x) => this.oneShots.has(x.id));
    if (!this.watch || live.length < BULK_MIN) {
      for (const x of live) this.send(`o ${x.id} 0 0 ${x.maxBytes} ${x.path}|`);
      return;
    }
    const b: Bulk = { id: this.nextId++, items: new Map(), ys: [], ws: new Map(), data: null };
    for (const x of live) if (!b.items.has(x.path)) b.items.set(x.path, x);
    this.bulks.push(b);
    this.send([`b ${b.id} ${b.items.size}`, ...[...b.items.keys()].map((p) => `${p}|`)].join('\n'));
    // a path asked twice in one turn: the duplicate reads alone
    for (const x of live) if (b.items.get(x.path) !== x) this.send(`o ${x.id} 0 0 ${x.maxBytes} ${x.path}|`);
  }

  /** `y`, `w` and `X` lines of the bulk read in progress (the oldest one sent). */
  private onBulkLine(tag: string, rest: string): void {
    const b = this.bulks[0];
    if (!b) return;
    if (tag === 'y ') {
      // R INO SIZE MTIME TYPE MODE PATH
      const f = rest.split(' ');
      if (f.length < 7) return;
      b.ys.push({
        r: f[0]!,
        ino: f[1]!,
        size: f[2]!,
        mtime: f[3]!,
        type: f[4]!,
        mode: f[5]!,
        path: f.slice(6).join(' '),
      });
      return;
    }
    if (tag === 'w ') {
      // INO SIZE MTIME PATH
      const f = rest.split(' ');
      if (f.length >= 4) b.ws.set(f.slice(3).join(' '), `${f[0]} ${f[1]} ${f[2]}`);
      return;
    }
    // X BID RC: RC is cat's exit — not 0, a file came short and every file after it shifted
    const [idS, rc] = rest.split(' ');
    if (Number(idS) !== b.id) return;
    if (rc !== '0') b.catFailed = true;
    this.bulks.shift();
    this.settleBulk(b);
  }

  /**
   * Answers a bulk read's one-shots: a file in the block whose stat is the same after the bytes were
   * read (and every file before it too) gets its slice; one that changed, and those after it, are
   * read again one by one — all of them when cat could not read one; a path with no `y` line is
   * missing.
   */
  private settleBulk(b: Bulk): void {
    let at = 0;
    // a file cat could not read shifted the bytes of those after it: the block is dropped, its
    // files read one by one (as the look-ahead does, src/remote/ssh/look.ts)
    let intact = b.data !== null && !b.catFailed;
    const again: { id: number; path: string; maxBytes: number }[] = [];
    const seen = new Set<string>();
    for (const y of b.ys) {
      const x = b.items.get(y.path);
      if (!x || seen.has(y.path)) continue;
      seen.add(y.path);
      const o = this.oneShots.get(x.id);
      if (!o) continue;
      const size = Number(y.size);
      if (y.r === 'c') {
        const slice = b.data?.subarray(at, at + size);
        at += size;
        intact &&= b.ws.get(y.path) === `${y.ino} ${y.size} ${y.mtime}` && slice?.length === size;
        if (!intact) {
          again.push(x);
          continue;
        }
        this.oneShots.delete(x.id);
        this.lastIno.set(o.path, Number(y.ino));
        o.resolve({ stat: statOf(y.ino, y.type, y.size, y.mtime, y.mode), offset: 0, data: Buffer.from(slice!) });
      } else if (y.r === 'u' || y.type !== 'f') {
        // a file this user may not read (type u), or not a regular file: said so, never read
        const type = y.r === 'u' && y.type === 'f' ? 'u' : y.type;
        this.oneShots.delete(x.id);
        this.lastIno.set(o.path, Number(y.ino));
        o.resolve({
          stat: statOf(y.ino, type, y.size, y.mtime, y.mode),
          offset: 0,
          data: Buffer.alloc(0),
          error: notRegularType(type),
        });
      } else again.push(x); // large or still being written: read on its own, within its cap
    }
    for (const x of b.items.values()) {
      if (seen.has(x.path)) continue;
      const o = this.oneShots.get(x.id);
      if (!o) continue;
      if (b.data === null) {
        again.push(x); // the loop could not do bulk reads after all
        continue;
      }
      this.oneShots.delete(x.id);
      this.lastIno.delete(o.path);
      o.resolve({ stat: null, offset: 0, data: Buffer.alloc(0) });
    }
    for (const x of again) this.send(`o ${x.id} 0 0 ${x.maxBytes} ${x.path}|`);
  }

  /**
   * Runs a one-line sh script (`sh -c SCRIPT sh ARGS…`, stdin /dev/null) inside the loop: a look at
   * a file costs a fork in the shell already running, not an SSH session (each one a login on the
   * box: 0.1–0.3 s under load, and `status` made two dozen). `build` makes the script once the loop
   * has said what the box can do (GNU find or not). Null when the loop cannot take it (not
   * connected, a line break in an argument, the connection dropped meanwhile): the caller execs.
   */
  async runScript(build: () => string, args: string[], timeoutMs: number, aside = false): Promise<ScriptAnswer | null> {
    if (!args.every((a) => LINE_SAFE.test(a))) return null;
    return this.runInLoop(build, args, null, timeoutMs, false, aside);
  }

  /**
   * Asks sent with `aside` (runScript, readProcTable) in one turn of the event loop run side by side
   * in the loop's shell, as background jobs (`a`, `p`), and are answered together, in the order
   * asked, once the last has ended: the `J` sent here, after every ask of the turn (setImmediate
   * runs after the turn's I/O callbacks and promise continuations, before any later timer's tick).
   */
  private joinSoon(): void {
    if (this.joinDue) return;
    this.joinDue = true;
    setImmediate(() => {
      this.joinDue = false;
      this.send('J');
    });
  }

  /**
   * A script of any number of lines, with `input` on its stdin (null: /dev/null), run inside the
   * loop (`w`): the writes of files.ts — an audit append, nsa-top's own files, mkdir — without an
   * SSH session each (each one a login on the box, whose shell start-up files can take most of a
   * second). Null when the loop cannot take it (not connected, a NUL or CR in a line, input over
   * LOOP_INPUT_MAX): the caller execs. Once sent, a write is never retried elsewhere: if the loop
   * goes away before it answers, the answer is a failure that says so (it may or may not have run).
   */
  async runWrite(
    script: string,
    args: string[],
    input: string | Buffer | null,
    timeoutMs: number,
  ): Promise<ScriptAnswer | null> {
    const data = input === null ? null : Buffer.isBuffer(input) ? input : Buffer.from(input);
    if (data && (data.length > LOOP_INPUT_MAX || data.includes(0) || data.includes(13))) return null;
    if (!args.every((a) => LINE_SAFE.test(a)) || !MULTILINE_SAFE.test(script)) return null;
    return this.runInLoop(() => script, args, data, timeoutMs, true);
  }

  private async runInLoop(
    build: () => string,
    args: string[],
    data: Buffer | null,
    timeoutMs: number,
    write: boolean,
    aside = false,
  ): Promise<ScriptAnswer | null> {
    if (this.conn.closing) return null;
    const started = Date.now();
    try {
      await this.ensure();
      await this.waitHello(timeoutMs);
    } catch {
      return null;
    }
    if (!this.watch) return null;
    const script = build();
    if (!(write ? MULTILINE_SAFE : LINE_SAFE).test(script)) return null;
    const id = this.nextId++;
    const left = Math.max(1, timeoutMs - (Date.now() - started));
    const kind = write ? 'w' : aside ? 'a' : 'x';
    const traced = sshTraceSpan(`loop ${kind} ${id}: ${script.slice(0, 50)} ${args.join(' ').slice(0, 60)}`);
    const failed = (why: string, timedOut: boolean): ScriptAnswer => ({
      code: null,
      signal: timedOut ? 'SIGKILL' : null,
      stdout: Buffer.alloc(0),
      stderr: Buffer.from(why),
      timedOut,
      durationMs: Date.now() - started,
    });
    const answer = new Promise<ScriptAnswer | null>((resolve) => {
      const t = setTimeout(() => {
        this.scripts.delete(id);
        resolve(failed('timed out (the watch loop did not answer)', true));
      }, left);
      this.scripts.set(id, {
        out: null,
        done: (r) => {
          clearTimeout(t);
          traced();
          // a look the loop could not finish is asked again by exec; a write is not (it may have run)
          if (!r && write)
            return resolve(failed('connection lost during the write (it may or may not have happened)', false));
          resolve(r && { ...r, durationMs: Date.now() - started });
        },
      });
    });
    this.scriptsSent++;
    if (!write) {
      this.send([`${kind} ${id} ${args.length + 1}`, `${script}|`, ...args.map((a) => `${a}|`)].join('\n'));
      if (aside) this.joinSoon();
    } else {
      const lines = script.split('\n');
      const cmd = `w ${id} ${lines.length} ${args.length} ${data ? dataLines(data) : 0}\n`;
      const parts: Uint8Array[] = [Buffer.from(cmd + [...lines, ...args].map((l) => `${l}|\n`).join(''))];
      if (data) {
        // each line of the data ends in the `|` sentinel (trailing blanks survive `read -r`)
        let at = 0;
        for (;;) {
          const nl = data.indexOf(10, at);
          parts.push(data.subarray(at, nl < 0 ? data.length : nl), Buffer.from('|\n'));
          if (nl < 0) break;
          at = nl + 1;
        }
      }
      this.watch.chan.write(Buffer.concat(parts));
    }
    return answer;
  }

  /**
   * The process table read inside the watch loop: no channel and no login-shell start-up per
   * refresh; the loop runs PROC_SCRIPT and its output is parsed here. Null when the loop is not up
   * (the caller falls back to exec).
   */
  async readProcTable(req: ProcTableRequest, timeoutMs: number, aside = false): Promise<ProcTable | null> {
    // not connected yet (a one-shot look's first read): ensure() below connects and starts the
    // loop, rather than a session of its own for the table
    if (this.conn.closing) return null;
    const rd = req.runDir;
    if (rd.includes('\n') || rd.includes('\0')) return null;
    if ([...req.known, ...req.pids].some((p) => !Number.isInteger(p) || p <= 0)) return null;
    try {
      await this.ensure();
      // (aside, it goes out with the turn's other asks, which wait for the hello)
      if (aside) await this.waitHello(timeoutMs);
    } catch {
      return null;
    }
    if (!this.watch) return null;
    const id = this.nextId++;
    const kind = aside ? 'p' : 'P';
    // (stamped as its bytes are parsed, in stream order with the frames around it)
    const traced = sshTraceSpan(`loop ${kind} ${id}: process table`);
    const answer = new Promise<Buffer | null>((resolve) => {
      const t = setTimeout(() => {
        this.lightWaiters.delete(id);
        traced();
        resolve(null);
      }, timeoutMs);
      this.lightWaiters.set(id, (b) => {
        clearTimeout(t);
        traced();
        resolve(b);
      });
    });
    const list = (l: number[]) => l.join(',') || '-';
    this.send(
      `${kind} ${id} ${req.sysconf ? '1' : '-'} ${req.mode} ${list(req.known)} ${list(req.pids)} ${rd ? safePath(rd) : ''}|`,
    );
    if (aside) this.joinSoon();
    const b = await answer;
    return b ? parseProcScriptOutput(b.toString('utf8')) : null;
  }
}
