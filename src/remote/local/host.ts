// LocalHost: the Host interface on this machine, with plain Node APIs.
//
// The poll path (pollDir: a listing plus incremental reads, every second) does its file system
// calls synchronously when the directory sits on a local file system (ext4, xfs, tmpfs, overlay…):
// measured on the shared 2-core box, a promise-based open/fstat/read/close costs ~115 µs of CPU and
// a stat ~15–30 µs, against ~5 µs and ~2 µs synchronously — the difference between the cockpit's
// refresh costing a percent of a core or a fraction of it. On anything else (NFS, Lustre, CIFS,
// FUSE, an unrecognised type) the calls stay asynchronous, so a hung mount stalls the poll but
// never freezes the keys.
import type { ChildProcessByStdio } from 'node:child_process';
import { childProcess } from '../../builtins.js';
import type { Readable, Writable } from 'node:stream';
import * as fsSync from 'node:fs';
import { constants as fsc } from 'node:fs';
import * as fs from 'node:fs/promises';
import { join, normalize } from 'node:path';
import { ownRemoveLocal, ownWriteLocal } from './ownfiles.js';
import { procTableLocal } from './procs.js';
import { StreamLines } from '../streamlines.js';
import type {
  ConnState,
  DirEntry,
  DirPoll,
  ExecOptions,
  ExecResult,
  FileStat,
  Host,
  OwnWriteDone,
  OwnWriteMode,
  ProcTable,
  ProcTableRequest,
  ReadRequest,
  ReadResult,
  SettledNames,
  SignalExpect,
  SignalName,
  StreamHandle,
  StreamOptions,
} from '../host.js';
import { CATCHABLE_SIGNALS, noHandlerError, sigCaught } from '../host.js';

/** dirs a listing's names are joined to, and whether each is already normal (most are: resolved at
 *  the edge) */
const normalDirs = new Map<string, boolean>();
/**
 * `join(dir, name)` for a name readdir gave (never a `/`, never `.` or `..`): a plain concatenation
 * where `dir` is already normal. path.join normalizes the whole string every call, and the listings
 * of a watchdog's every round joined ~70 names: its normalize was the largest part of the node
 * internals in the watchdog's profile (~6 % of its CPU).
 */
function childPath(dir: string, name: string): string {
  let ok = normalDirs.get(dir);
  if (ok === undefined) {
    ok = dir.length > 1 && !dir.endsWith('/') && normalize(dir) === dir;
    if (normalDirs.size > 256) normalDirs.clear();
    normalDirs.set(dir, ok);
  }
  return ok ? `${dir}/${name}` : join(dir, name);
}

const DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024;
/** a stopped stream that ignores SIGTERM gets SIGKILL this much later */
export const STREAM_KILL_GRACE_MS = 300;

/** process groups of the commands started here and not yet seen to exit */
const liveGroups = new Set<number>();

function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* already gone */
    }
  }
}

// Whatever way nsa-top ends (q, an error, process.exit), no command it started is left behind:
// every group still running gets SIGKILL synchronously on the way out.
process.on('exit', () => {
  for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
  liveGroups.clear();
});

/** Starts argv in a process group of its own (a timeout or stop() ends all of it), tracked until it exits. */
function spawnGroup(
  what: 'exec' | 'stream',
  argv: string[],
  opts: { cwd?: string; env?: Record<string, string> },
  stdin: 'pipe' | 'ignore',
): ChildProcessByStdio<Writable | null, Readable, Readable> {
  const [cmd, ...args] = argv;
  if (!cmd) throw new Error(`${what}: empty argv`);
  const child = childProcess().spawn(cmd, args, {
    cwd: opts.cwd,
    env: opts.env ? { ...process.env, ...opts.env } : process.env,
    stdio: [stdin, 'pipe', 'pipe'],
    detached: true,
  }) as ChildProcessByStdio<Writable | null, Readable, Readable>;
  if (child.pid) liveGroups.add(child.pid);
  return child;
}

/** A node Stats as the Host's FileStat (exported for readers that fstat an fd they opened themselves). */
export function toStat(s: import('node:fs').Stats): FileStat {
  return {
    size: s.size,
    mtimeMs: s.mtimeMs,
    ino: s.ino,
    isDir: s.isDirectory(),
    isFile: s.isFile(),
    mode: s.mode,
    uid: s.uid,
    dev: s.dev,
    nlink: s.nlink,
  };
}

type Maybe<T> = T | Promise<T>;

/** The file system calls of the poll path, either all synchronous or all asynchronous. */
interface PollIo {
  readdir(dir: string): Maybe<string[]>;
  stat(path: string): Maybe<fsSync.Stats>;
  open(path: string): Maybe<number>;
  fstat(fd: number): Maybe<fsSync.Stats>;
  read(fd: number, buf: Buffer, off: number, len: number, pos: number): Maybe<number>;
  close(fd: number): Maybe<void>;
}

/**
 * Artifacts are opened read-only, non-blocking and without taking a controlling terminal: a FIFO
 * or a device named like an artifact must never block the poll (open(2) of a FIFO for reading
 * waits for a writer in the kernel, where no signal handler and no `q` can reach it). What is not
 * a regular file is then reported by name and never read (see notRegular).
 */
export const READ_FLAGS = fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY;

/** What a non-regular file is, for the error that names it (null: a regular file). */
export function notRegular(st: import('node:fs').Stats): string | null {
  if (st.isFile()) return null;
  const what = st.isDirectory()
    ? 'a directory'
    : st.isFIFO()
      ? 'a FIFO'
      : st.isSocket()
        ? 'a socket'
        : st.isCharacterDevice()
          ? 'a character device'
          : st.isBlockDevice()
            ? 'a block device'
            : 'not a regular file';
  return `not a regular file (${what}): not read`;
}

/** The error thrown for a path that is not a regular file (code ENOTREG, never retried as a read). */
export function notRegularError(path: string, why: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${path}: ${why}`), { code: 'ENOTREG' });
}

/**
 * a settled name is listed from its last stat once it is this old (mtime) and was unchanged then.
 * Ten seconds, not a minute: the reference trainer saves every ~1.5 s, and a minute's worth of its
 * checkpoints (~40) were stat'ed every poll; a save still being written changes between two polls
 * (or is re-stat'ed within SETTLED_RECHECK polls if it paused for longer than this)
 */
const SETTLED_QUIET_MS = 10_000;
/** …and is stat'ed again every this many polls of its directory (each poll a tenth of them) */
const SETTLED_RECHECK = 10;

/** a polled directory's last listing (LocalHost.listWith with `settled`) */
interface ListMemo {
  polls: number;
  /** each name's last stat, whether it was the same as the one before it, and the last poll that listed it */
  byName: Map<string, { e: DirEntry; unchanged: boolean; seen: number }>;
}

const SYNC_IO: PollIo = {
  readdir: (d) => fsSync.readdirSync(d),
  stat: (p) => fsSync.statSync(p),
  open: (p) => fsSync.openSync(p, READ_FLAGS),
  fstat: (fd) => fsSync.fstatSync(fd),
  read: (fd, b, o, l, p) => fsSync.readSync(fd, b, o, l, p),
  close: (fd) => fsSync.closeSync(fd),
};

/** callback fs wrapped once: cheaper than FileHandle objects, same thread-pool behaviour */
function cb<T>(f: (done: (e: NodeJS.ErrnoException | null, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => f((e, v) => (e ? reject(e) : resolve(v))));
}

const ASYNC_IO: PollIo = {
  readdir: (d) => fs.readdir(d),
  stat: (p) => cb((d) => fsSync.stat(p, d)),
  open: (p) => cb((d) => fsSync.open(p, READ_FLAGS, d)),
  fstat: (fd) => cb((d) => fsSync.fstat(fd, d)),
  read: (fd, b, o, l, p) => cb((d) => fsSync.read(fd, b, o, l, p, d)),
  close: (fd) => cb<void>((d) => fsSync.close(fd, (e) => d(e, undefined))),
};

/**
 * statfs f_type of file systems whose metadata and page-cached reads answer in microseconds and
 * cannot hang on a network: ext2/3/4, xfs, btrfs, tmpfs, ramfs, overlayfs, zfs, f2fs, bcachefs,
 * reiserfs, jfs.
 */
const LOCAL_FS_TYPES = new Set([
  0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x858458f6, 0x794c7630, 0x2fc12fc1, 0xf2f52010, 0xca451a4e, 0x52654973,
  0x3153464a,
]);

/**
 * Whether a directory sits on one of those local file systems (statfs, asked asynchronously: a hung
 * mount must not block the asking); null when it cannot be told (no such directory).
 */
export async function onLocalFs(dir: string): Promise<boolean | null> {
  try {
    return LOCAL_FS_TYPES.has(Number((await fs.statfs(dir)).type));
  } catch {
    return null;
  }
}

export interface LocalHostOptions {
  /**
   * How the poll path touches files: 'auto' (default) synchronously on local file systems and
   * asynchronously elsewhere; 'sync' / 'async' force one (tests cover both).
   */
  pollIo?: 'auto' | 'sync' | 'async';
}

/** How much of a file that reports size 0 (procfs, sysfs) is read at the most. */
const ZERO_SIZE_READ_CAP = 16 * 2 ** 20;

/** A file that says size 0 (procfs, sysfs), read to its end in chunks, capped at `end`. */
async function readToEof(io: PollIo, fd: number, start: number, end: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let pos = start;
  while (pos < end) {
    const buf = Buffer.allocUnsafe(Math.min(64 * 1024, end - pos));
    const n = await io.read(fd, buf, 0, buf.length, pos);
    if (n === 0) break;
    parts.push(buf.subarray(0, n));
    pos += n;
  }
  return Buffer.concat(parts);
}

export class LocalHost implements Host {
  readonly kind = 'local' as const;
  readonly label = 'local';
  /** inode last seen per path, to report replacement in pollDir */
  private readonly lastIno = new Map<string, number>();
  /** the stat of each path's last read (a read the listing shows nothing new for is skipped) */
  private readonly lastStat = new Map<string, FileStat>();
  /** per polled directory: can its calls be synchronous (decided once, by statfs) */
  private readonly ioFor = new Map<string, PollIo>();
  /** per polled directory: its last listing, for the names the caller says settle (pollDir's `settled`) */
  private readonly listMemo = new Map<string, ListMemo>();

  constructor(private readonly opts: LocalHostOptions = {}) {}

  /** The I/O mode of the poll path for `dir` (exported for the tests and the bench). */
  async pollIoMode(dir: string): Promise<'sync' | 'async'> {
    return (await this.pollIo(dir)) === SYNC_IO ? 'sync' : 'async';
  }

  /** a path inside a directory already polled on a local file system */
  private syncFor(path: string): boolean {
    for (const [d, io] of this.ioFor) if (io === SYNC_IO && path.startsWith(d.endsWith('/') ? d : `${d}/`)) return true;
    return this.opts.pollIo === 'sync';
  }

  private async pollIo(dir: string): Promise<PollIo> {
    const mode = this.opts.pollIo ?? 'auto';
    if (mode !== 'auto') return mode === 'sync' ? SYNC_IO : ASYNC_IO;
    const known = this.ioFor.get(dir);
    if (known) return known;
    let io = ASYNC_IO;
    try {
      // asynchronous on purpose: statfs of a hung mount must not block
      const st = await fs.statfs(dir);
      if (LOCAL_FS_TYPES.has(Number(st.type))) io = SYNC_IO;
    } catch {
      return ASYNC_IO; // missing dir: decide when it exists
    }
    this.ioFor.set(dir, io);
    return io;
  }

  connState(): ConnState {
    return { state: 'local' };
  }

  async stat(path: string): Promise<FileStat | null> {
    if (this.syncFor(path)) {
      // no exception for a missing file (an Error with its stack costs more than the stat)
      try {
        const st = fsSync.statSync(path, { throwIfNoEntry: false });
        return st ? toStat(st) : null;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
        throw e;
      }
    }
    try {
      return toStat(await fs.stat(path));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR')
        return null;
      throw e;
    }
  }

  /**
   * A directory's entries with their stats: synchronous calls where the directory is on a local file
   * system (decided once per directory, as the poll does), else through the thread pool. A run that
   * keeps every checkpoint lists ~200 entries for the resume pick; each stat through the pool cost
   * ~0.1 ms of CPU (status on a run of 170 checkpoints: ~45 ms more than without them).
   */
  async list(dir: string): Promise<DirEntry[]> {
    return this.listWith(await this.pollIo(dir), dir);
  }

  private async listWith(io: PollIo, dir: string, settled?: SettledNames): Promise<DirEntry[]> {
    const memo = settled && io === SYNC_IO ? this.memoFor(dir) : null;
    const names = await io.readdir(dir);
    const out: DirEntry[] = [];
    let denied: NodeJS.ErrnoException | null = null;
    const now = Date.now();
    let i = 0;
    // a name listed from its last stat (true), else the stat to take
    const remembered = (name: string): boolean => {
      i++;
      const m = memo?.byName.get(name);
      // a settled name, listed at the last poll too, quiet for 10 s and unchanged when last
      // looked at: its last stat, but looked at again every SETTLED_RECHECK polls (a resumed run
      // rewrites an old checkpoint in place, or by a rename; the directory's mtime, which would tell
      // a rename, moves with every new checkpoint — every few seconds on a fast run)
      if (
        m &&
        m.unchanged &&
        m.seen === memo!.polls - 1 &&
        now - m.e.mtimeMs > SETTLED_QUIET_MS &&
        (i + memo!.polls) % SETTLED_RECHECK !== 0 &&
        settled!(name)
      ) {
        m.seen = memo!.polls;
        out.push(m.e);
        return true;
      }
      return false;
    };
    const took = (name: string, s: fsSync.Stats) => {
      const e = { name, isDir: s.isDirectory(), isFile: s.isFile(), size: s.size, mtimeMs: s.mtimeMs, ino: s.ino };
      out.push(e);
      if (memo) {
        const m = memo.byName.get(name);
        memo.byName.set(name, {
          e,
          unchanged: !!m && m.e.size === e.size && m.e.mtimeMs === e.mtimeMs && m.e.ino === e.ino,
          seen: memo.polls,
        });
      }
    };
    const failed = (e: unknown) => {
      // EACCES on stat: the directory can be listed but not searched (mode 444) — nothing in it
      // can be read, so the listing is an error, not an empty run
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') denied = e as NodeJS.ErrnoException;
      /* else vanished between readdir and stat, or a link loop / dangling link (ELOOP, ENOENT) */
    };
    if (io === SYNC_IO) {
      // one synchronous pass: no promise or microtask per name (a long run lists hundreds a second)
      for (const name of names) {
        if (remembered(name)) continue;
        try {
          took(name, io.stat(childPath(dir, name)) as fsSync.Stats);
        } catch (e) {
          failed(e);
        }
      }
    } else
      await Promise.all(
        names.map(async (name) => {
          if (remembered(name)) return;
          try {
            took(name, await io.stat(childPath(dir, name)));
          } catch (e) {
            failed(e);
          }
        }),
      );
    // the names gone are dropped now and then (a name back after a poll without it is stat'ed anew)
    if (memo && memo.polls % SETTLED_RECHECK === 0)
      for (const [name, m] of memo.byName) if (m.seen !== memo.polls) memo.byName.delete(name);
    if (denied && out.length === 0) {
      const code = (denied as NodeJS.ErrnoException).code;
      throw Object.assign(
        new Error(`${code}: ${dir}: the directory can be listed but its entries cannot be read (no search permission)`),
        { code },
      );
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async readRange(path: string, start: number, end?: number): Promise<Buffer> {
    // under a directory known to be on a local file system (the run's, its .nsa-top) in place, as
    // the poll reads: the thread pool's four round trips (open, fstat, read, close) each woke the
    // caller again, and on a 2-core VM each wake costs more than the read (the stop facts, every 10 s)
    const io = this.syncFor(path) ? SYNC_IO : ASYNC_IO;
    const fd = await io.open(path);
    try {
      const st = await io.fstat(fd);
      const why = notRegular(st);
      if (why) throw notRegularError(path, why);
      const size = st.size;
      // procfs and sysfs files (/proc/net/tcp, /proc/PID/status) are regular but say size 0: read to EOF, capped
      if (size === 0) return await readToEof(io, fd, start, end ?? ZERO_SIZE_READ_CAP);
      const stop = Math.min(end ?? size, size);
      if (stop <= start) return Buffer.alloc(0);
      const buf = Buffer.allocUnsafe(stop - start);
      let got = 0;
      while (got < buf.length) {
        const n = await io.read(fd, buf, got, buf.length - got, start + got);
        if (n === 0) break;
        got += n;
      }
      return got === buf.length ? buf : buf.subarray(0, got);
    } finally {
      await io.close(fd);
    }
  }

  async readFile(path: string, maxBytes?: number): Promise<Buffer> {
    return this.readRange(path, 0, maxBytes);
  }

  /** The answer to `req` without touching the file, when the listing shows nothing new in it; else null. */
  private unchanged(req: ReadRequest, e: DirEntry | undefined): ReadResult | null {
    const last = this.lastStat.get(req.path);
    if (!e || !last || !e.isFile || e.size !== req.offset) return null;
    if (e.ino !== last.ino || e.size !== last.size || e.mtimeMs !== last.mtimeMs) return null;
    if (this.lastIno.get(req.path) !== e.ino) return null;
    return { path: req.path, stat: last, offset: req.offset, data: Buffer.alloc(0) };
  }

  private async readOne(io: PollIo, req: ReadRequest): Promise<ReadResult> {
    let fd: number;
    try {
      fd = await io.open(req.path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      this.lastIno.delete(req.path);
      this.lastStat.delete(req.path);
      if (code === 'ENOENT') return { path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0) };
      return {
        path: req.path,
        stat: null,
        offset: req.offset,
        data: Buffer.alloc(0),
        error: `${code ?? 'error'}: ${(e as Error).message}`,
      };
    }
    try {
      const raw = await io.fstat(fd);
      const st = toStat(raw);
      const why = notRegular(raw);
      if (why) {
        // reported by name with its stat (the run model shows it), never read
        this.lastIno.delete(req.path);
        this.lastStat.delete(req.path);
        return { path: req.path, stat: st, offset: req.offset, data: Buffer.alloc(0), error: why };
      }
      let offset = req.offset;
      let reset: ReadResult['reset'];
      const prevIno = this.lastIno.get(req.path);
      this.lastIno.set(req.path, st.ino);
      if (prevIno !== undefined && prevIno !== st.ino) {
        reset = 'replaced';
        offset = 0;
      } else if (st.size < offset) {
        reset = 'truncated';
        offset = 0;
      }
      const want = Math.max(0, Math.min(st.size - offset, req.maxBytes ?? Number.MAX_SAFE_INTEGER));
      const data = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const n = await io.read(fd, data, got, want - got, offset + got);
        if (n === 0) break;
        got += n;
      }
      // only a read to the end the stat saw may be skipped later
      if (got === want && offset + got === st.size) this.lastStat.set(req.path, st);
      else this.lastStat.delete(req.path);
      return { path: req.path, stat: st, offset, data: got === want ? data : data.subarray(0, got), reset };
    } catch (e) {
      return { path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0), error: (e as Error).message };
    } finally {
      try {
        await io.close(fd);
      } catch {
        /* nothing to lose: read-only */
      }
    }
  }

  /** the listing memo of a polled dir */
  private memoFor(dir: string): ListMemo {
    let memo = this.listMemo.get(dir);
    if (!memo) this.listMemo.set(dir, (memo = { polls: 0, byName: new Map() }));
    memo.polls++;
    return memo;
  }

  async pollDir(dir: string, reads: ReadRequest[], subdirs: string[] = [], settled?: SettledNames): Promise<DirPoll> {
    const hostNowMs = Date.now();
    const io = await this.pollIo(dir);
    let entries: DirEntry[] | null = null;
    let error: string | undefined;
    try {
      entries = await this.listWith(io, dir, settled);
    } catch (e) {
      error = `${(e as NodeJS.ErrnoException).code ?? 'error'}: ${(e as Error).message}`;
    }
    const sub: Record<string, DirEntry[] | null> = {};
    const subErr: Record<string, string> = {};
    const listSub = async (name: string) => {
      try {
        sub[name] = await this.listWith(io, join(dir, name));
      } catch (e) {
        sub[name] = null;
        const code = (e as NodeJS.ErrnoException).code;
        const msg = (e as Error).message;
        if (code !== 'ENOENT') subErr[name] = code && msg.startsWith(code) ? msg : `${code ?? 'error'}: ${msg}`;
      }
    };
    // a followed file the listing shows unchanged since its last read, and read to its end, needs no
    // open/fstat/close: a run dir of thousands of heartbeat files cost a fifth of a core otherwise
    const listed = new Map<string, DirEntry>();
    for (const e of entries ?? []) listed.set(childPath(dir, e.name), e);
    const read = (r: ReadRequest) => this.unchanged(r, listed.get(r.path)) ?? this.readOne(io, r);
    let results: ReadResult[];
    if (io === SYNC_IO) {
      for (const name of subdirs) await listSub(name);
      results = [];
      for (const r of reads) results.push(await read(r));
    } else {
      await Promise.all(subdirs.map(listSub));
      results = await Promise.all(reads.map(read));
    }
    return {
      dir,
      entries,
      subdirs: sub,
      ...(Object.keys(subErr).length ? { subdirErrors: subErr } : {}),
      reads: results,
      error,
      hostNowMs,
    };
  }

  /**
   * The process table without a child process (see local/procs.ts). Null past the time limit: the
   * caller then runs the script, whose own time limit kills it.
   */
  async readProcTable(req: ProcTableRequest, timeoutMs: number): Promise<ProcTable | null> {
    if (process.platform !== 'linux') return null;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((r) => (timer = setTimeout(() => r(null), timeoutMs)));
    try {
      return await Promise.race([procTableLocal(req), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  exec(argv: string[], opts: ExecOptions): Promise<ExecResult> {
    const started = Date.now();
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    return new Promise((resolve) => {
      const child = spawnGroup('exec', argv, opts, 'pipe');
      const gpid = child.pid;
      const stdin = child.stdin!;
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outLen = 0;
      let errLen = 0;
      let timedOut = false;
      let settled = false;
      child.stdout.on('data', (b: Buffer) => {
        if (outLen < max) out.push(b);
        outLen += b.length;
      });
      child.stderr.on('data', (b: Buffer) => {
        if (errLen < max) err.push(b);
        errLen += b.length;
      });
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      }, opts.timeoutMs);
      const finish = (code: number | null, signal: string | null, spawnError?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (gpid) liveGroups.delete(gpid);
        resolve({
          code: spawnError ? 127 : code,
          signal,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: spawnError ? `${spawnError.message}` : Buffer.concat(err).toString('utf8'),
          timedOut,
          durationMs: Date.now() - started,
        });
      };
      child.on('error', (e) => finish(null, null, e));
      child.on('close', (code, signal) => finish(code, signal));
      stdin.on('error', () => {});
      if (opts.input !== undefined) stdin.end(opts.input);
      else stdin.end();
    });
  }

  stream(argv: string[], opts: StreamOptions): StreamHandle {
    const child = spawnGroup('stream', argv, opts, 'ignore');
    const pid = child.pid;
    // bounded line splitting (a command that never prints a newline costs at most the cap)
    const out = new StreamLines(
      (l) => opts.onLine(l),
      (n) => opts.onOverflow?.(n),
    );
    const err = new StreamLines((l) => opts.onStderr?.(l));
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    let exited = false;
    let killTimer: NodeJS.Timeout | null = null;
    const done = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.on('error', () => {
        exited = true;
        if (pid) liveGroups.delete(pid);
        resolve({ code: 127, signal: null });
      });
      // 'exit', not 'close': a grandchild holding the pipe open must not keep `done` pending
      child.on('exit', (code, signal) => {
        exited = true;
        if (killTimer) clearTimeout(killTimer);
        out.end();
        err.end();
        resolve({ code, signal });
        // the group may outlive its leader (a grandchild): make sure nothing of it is left
        if (pid) {
          killGroup(pid, 'SIGKILL');
          liveGroups.delete(pid);
        }
        child.stdout.destroy();
        child.stderr.destroy();
      });
    });
    return {
      done,
      stop() {
        if (exited || !pid) return;
        killGroup(pid, 'SIGTERM');
        if (!killTimer) {
          killTimer = setTimeout(() => killGroup(pid, 'SIGKILL'), STREAM_KILL_GRACE_MS);
          killTimer.unref();
        }
      },
    };
  }

  async signal(pid: number, sig: SignalName, expect?: SignalExpect): Promise<void> {
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`refusing to signal pid ${pid}`);
    const sigNo = expect?.requireHandler ? CATCHABLE_SIGNALS[sig] : undefined;
    if (expect?.requireHandler && sigNo === undefined)
      throw new Error(`${sig} cannot be caught: no handler to require`);
    if (expect) {
      let stat: string;
      try {
        stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
      } catch {
        throw Object.assign(new Error(`pid ${pid} is gone`), { code: 'ESRCH' });
      }
      const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      if (start !== String(expect.startTime)) {
        throw Object.assign(new Error(`pid ${pid} is another process now (start time changed): not signalled`), {
          code: 'ESRCH',
        });
      }
      if (sigNo !== undefined) {
        let status: string;
        try {
          status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
        } catch {
          throw Object.assign(new Error(`pid ${pid} is gone`), { code: 'ESRCH' });
        }
        const mask = /^SigCgt:\s*([0-9a-fA-F]+)\s*$/m.exec(status)?.[1] ?? '';
        if (!sigCaught(mask, sigNo)) throw noHandlerError(pid, sig);
      }
    }
    process.kill(pid, sig === 'SIG0' ? 0 : sig);
  }

  // writeFile/appendFile never follow a link at the file either (nsa-top's own writes into a run
  // go through src/trainer/control/ownfiles.ts and writeOwn, which also guard .nsa-top and the run dir)
  async writeFile(
    path: string,
    data: string | Buffer,
    opts: { exclusive?: boolean; mode?: number } = {},
  ): Promise<void> {
    const flags = fsc.O_WRONLY | fsc.O_CREAT | (fsc.O_NOFOLLOW ?? 0) | (opts.exclusive ? fsc.O_EXCL : fsc.O_TRUNC);
    await fs.writeFile(path, data, { flag: flags as unknown as string, mode: opts.mode });
  }

  async appendFile(path: string, data: string | Buffer): Promise<void> {
    // O_APPEND: concurrent appenders (two cockpits) never interleave within one short write
    const fh = await fs.open(path, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT | (fsc.O_NOFOLLOW ?? 0), 0o644);
    try {
      await fh.write(typeof data === 'string' ? Buffer.from(data) : data);
    } finally {
      await fh.close();
    }
  }

  async mkdirp(path: string): Promise<void> {
    await fs.mkdir(path, { recursive: true });
  }

  async remove(path: string): Promise<void> {
    await fs.unlink(path);
  }

  writeOwn(
    root: string,
    rel: string,
    data: string | Buffer,
    mode: OwnWriteMode,
    fileMode?: number,
  ): Promise<OwnWriteDone | undefined> {
    return ownWriteLocal(root, rel, data, mode, fileMode);
  }

  removeOwn(root: string, rel: string): Promise<void> {
    return ownRemoveLocal(root, rel);
  }

  now(): number {
    return Date.now();
  }

  async close(): Promise<void> {}
}
