// The one interface through which nsa-top touches a machine. Two implementations:
// LocalHost (plain Node APIs) and SshHost (one OpenSSH connection, agentless).
// Everything else (readers, telemetry, process discovery, control actions) goes through it,
// so the remote cockpit works by construction.

export interface FileStat {
  size: number;
  mtimeMs: number;
  /** inode number; a change at the same path means the file was replaced */
  ino: number;
  isDir: boolean;
  isFile: boolean;
  mode: number;
  /**
   * owner, device and hard-link count where the host can tell (LocalHost always; SshHost with GNU
   * find, owner and links with the `ls` fallback): what a pointer file must show to be believed
   * (src/trainer/run/pointers.ts)
   */
  uid?: number;
  dev?: number;
  nlink?: number;
}

export interface DirEntry {
  name: string;
  isDir: boolean;
  isFile: boolean;
  size: number;
  mtimeMs: number;
  ino: number;
}

export interface ExecOptions {
  /** hard limit; the command is killed and `timedOut` set when it passes */
  timeoutMs: number;
  cwd?: string;
  env?: Record<string, string>;
  input?: string | Buffer;
  /** stop collecting output past this many bytes (default 8 MiB) */
  maxOutputBytes?: number;
  /**
   * A look that answers at once (`command -v`, `getconf`): over SSH it may run in the watch loop's
   * shell instead of an SSH session of its own. Never for a command that can hang (nvidia-smi,
   * py-spy dump): it would hold up the loop's frames.
   */
  quick?: boolean;
}

export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  durationMs: number;
}

/**
 * A long-lived command whose stdout arrives line by line (nvidia-smi -lms, remote watch loops).
 * stop() ends it: SIGTERM to its process group, SIGKILL if it is still there a moment later (a
 * command that ignores SIGTERM must not outlive the cockpit, nor pile up on restarts).
 */
export interface StreamHandle {
  stop(): void;
  readonly done: Promise<{ code: number | null; signal: string | null }>;
}

export interface StreamOptions {
  cwd?: string;
  env?: Record<string, string>;
  onLine(line: string): void;
  onStderr?(line: string): void;
  /** a line longer than the host's cap (64 KiB) was dropped: the command prints garbage */
  onOverflow?(bytes: number): void;
}

/** A request to read a file from `offset`, at most `maxBytes` bytes (default: to its end). */
export interface ReadRequest {
  path: string;
  offset: number;
  maxBytes?: number;
}

export interface ReadResult {
  path: string;
  /** null when the file does not exist (or vanished) */
  stat: FileStat | null;
  /** offset the data starts at (== request offset unless the file shrank; then 0 and `reset`) */
  offset: number;
  data: Buffer;
  /** 'truncated': size < offset; 'replaced': inode changed since the previous poll of this path */
  reset?: 'truncated' | 'replaced';
  error?: string;
}

/**
 * Names in a polled directory whose files, once quiet, may be listed from an earlier stat (a run's
 * old checkpoints: hundreds on a long run, each stat'ed every second otherwise). The names are always
 * the directory's own (an entry added or removed shows at once); LocalHost stats such a file at every
 * poll while it is younger than 10 s or changed at its last stat, else at least every
 * SETTLED_RECHECK (10) polls; a host whose listing costs nothing per entry (SSH: one find in the
 * watch loop) ignores it.
 */
export type SettledNames = (name: string) => boolean;

export interface DirPoll {
  dir: string;
  /** null when the directory is missing or unreadable (error says why) */
  entries: DirEntry[] | null;
  /** listings of subdirectories asked for (e.g. `tb`, `.nsa-top`), keyed by name */
  subdirs: Record<string, DirEntry[] | null>;
  /** why a subdirectory asked for could not be listed (`EACCES: …`), keyed by name; absent when it was */
  subdirErrors?: Record<string, string>;
  reads: ReadResult[];
  error?: string;
  /** wall time on the host (ms epoch) when the poll was taken, for staleness on remote clocks */
  hostNowMs: number;
}

/**
 * What one look at a run will ask of a host (Host.look): over SSH these are asked together, in one
 * round trip, instead of one round trip each as the look's parts come to them.
 */
export interface LookAhead {
  /** files whose stat the look will want (absolute paths; a missing one is answered as missing) */
  files?: string[];
  /** directories the look will list */
  dirs?: string[];
  /** also bring the bytes of the small files among `files` (a first look; a look again wants stats
   * only: its parts read a file only when its stat changed) */
  contents?: boolean;
  /** directories (listed like `dirs`) whose small regular files are brought whole too, as if named
   * in `files` (with `contents`): a first look's pollDir of such a dir takes its listing and first
   * reads from the look instead of a frame and a read round of its own */
  readDirs?: string[];
  /** quick execs (probes that change nothing: the host's resources) the look will run: sent right
   * behind the look-ahead, and an exec of the same argv in the look takes that answer */
  execs?: string[][];
  /** the run dir whose processes the look will find (its process table, 'run' mode): over SSH read
   * right behind the look-ahead, and the look's first read of that table takes it where it covers
   * the pids the run's records name (src/remote/procs.ts tableCovers) — not asked when the look
   * found `unlessFile` (among `files`): the look will go on elsewhere */
  procs?: { runDir: string; unlessFile?: string };
}

/** A view of a host for one look (Host.look); end() ends the look, never the connection. */
export interface Look extends Host {
  /** the host looked through: what a cache kept per host (the process table's CPU samples) is kept by */
  readonly base: Host;
  end(): void;
}

/** The host itself of a look (Look.base), else the host: the key of anything kept per host. */
export function hostOf(h: Host): Host {
  return (h as Partial<Look>).base ?? h;
}

export type ConnState =
  | { state: 'local' }
  | { state: 'connected'; since: number }
  | { state: 'reconnecting'; since: number; attempt: number; lastError: string }
  | { state: 'closed' };

export type OwnWriteMode = 'append' | 'exclusive' | 'replace';

/**
 * What an own write did beyond the write itself: an append target that was not nsa-top's own file
 * (another hard link to it, another owner, another file system) was renamed aside — never deleted,
 * never written — and a fresh file made with O_EXCL took the data.
 */
export interface OwnWriteDone {
  /** the name inside the same directory the suspect file was renamed to ('' when another writer did it first) */
  setAside: string;
  /** why it was not appended to ("has 2 hard links …") */
  why: string;
}

export type SignalName = 'SIGUSR1' | 'SIGINT' | 'SIGTERM' | 'SIGKILL' | 'SIGCONT' | 'SIGSTOP' | 'SIG0';

/** Linux signal numbers of the signals a handler can catch (SigCgt bit = number - 1). */
export const CATCHABLE_SIGNALS: Partial<Record<SignalName, number>> = { SIGINT: 2, SIGUSR1: 10, SIGTERM: 15 };

/** What Host.signal checks in the same step as the kill. */
export interface SignalExpect {
  /** /proc/PID/stat field 22: the process must still be the one verified (a recycled pid is never signalled) */
  startTime: string;
  /** the process must have a handler installed for the signal (/proc/PID/status SigCgt): a signal
   * whose default action kills (SIGUSR1) is never sent to a process still starting */
  requireHandler?: boolean;
}

/** Host.signal refused: the process has no handler for the signal (code ENOHANDLER). */
export function noHandlerError(pid: number, sig: SignalName): NodeJS.ErrnoException {
  return Object.assign(new Error(`pid ${pid} has no ${sig} handler installed (yet): not signalled`), {
    code: 'ENOHANDLER',
  });
}

/** Whether a SigCgt hex mask (/proc/PID/status) has the bit of signal number `n`. */
export function sigCaught(mask: string, n: number): boolean {
  if (!/^[0-9a-fA-F]{1,32}$/.test(mask)) return false;
  const digit = parseInt(mask[mask.length - 1 - Math.floor((n - 1) / 4)] ?? '0', 16);
  return ((digit >> ((n - 1) % 4)) & 1) === 1;
}

/** What src/remote/procs.ts asks of the process table (the modes are PROC_SCRIPT's, see there). */
export interface ProcTableRequest {
  /** the run dir whose physical path and env.json are wanted ('' none) */
  runDir: string;
  /** report CLK_TCK and the page size (first contact) */
  sysconf: boolean;
  mode: 'all' | 'run' | 'list';
  /** pids already looked at closely: their environ and cwd are not read again */
  known: number[];
  /** pids to look at closely (environ, cwd) */
  pids: number[];
}

/** The process table as read, before src/remote/procs.ts makes ProcInfo of it. */
export interface ProcTable {
  /** physical path of the run dir when it exists */
  runDirPhysical: string | null;
  /** the run dir's env.json on one line, when it exists */
  envJson: string | null;
  uptimeS: number | null;
  /** the host's wall clock (ms epoch) read right beside /proc/uptime: the boot time it gives is
   * exact in the frame the run's records are written in (null: not read; host.now() is used) */
  uptimeAtMs?: number | null;
  /** only when asked for (ProcTableRequest.sysconf) */
  sysconf: { clkTck: number; pageSize: number } | null;
  /** /proc/PID/stat line and /proc/PID/wchan of each process, as the kernel wrote them */
  procs: { stat: string; wchan: string }[];
  /** physical working directory per closely looked-at pid */
  cwd: Map<number, string>;
  /** NSpid (outer first) of closely looked-at pids in a nested pid namespace */
  nsPid: Map<number, number[]>;
  /** /proc/PID/cmdline and /proc/PID/environ as read (NULs kept); null: read but not trustworthy */
  cmdline: Map<number, string | null>;
  environ: Map<number, string | null>;
  /** the table cannot be read at all (no /proc) */
  error?: string;
}

export interface Host {
  readonly kind: 'local' | 'ssh';
  /** "local" or "user@box:port" — shown in the header and in the action log */
  readonly label: string;
  connState(): ConnState;
  /**
   * How old the data pollDir serves is, ms: over SSH the time since the watch loop's last frame
   * that covered every registered file (a gap in our view — an outage, a hung loop — grows it while
   * the run's own files show none). Absent (LocalHost): every read is of the file as it is now.
   */
  viewAgeMs?(): number | null;

  /**
   * LocalHost: whether reads under `dir` can be in place ('sync': its file system is local, judged
   * once per directory by an asynchronous statfs) or go through the thread pool ('async')
   */
  pollIoMode?(dir: string): Promise<'sync' | 'async'>;
  stat(path: string): Promise<FileStat | null>;
  list(dir: string): Promise<DirEntry[]>;
  /** bytes [start, end) — end defaults to the end of the file */
  readRange(path: string, start: number, end?: number): Promise<Buffer>;
  readFile(path: string, maxBytes?: number): Promise<Buffer>;
  /**
   * One round of a directory poll: listing of `dir`, listings of `subdirs`, and for each read
   * request the bytes from its offset. LocalHost does it with fs calls. SshHost serves it from a
   * long-lived remote watch loop: the listing and followed bytes are those of its last tick (at
   * most `watchIntervalMs` old) and cost no round trip; a path read for the first time, or re-read
   * from an earlier offset (a rewritten whole file), is answered within one round trip on the same
   * channel; reading a path again from where the last read ended makes it a follow.
   */
  pollDir(dir: string, reads: ReadRequest[], subdirs?: string[], settled?: SettledNames): Promise<DirPoll>;

  /** argv is an array: never a shell string. SshHost quotes every element. */
  exec(argv: string[], opts: ExecOptions): Promise<ExecResult>;
  stream(argv: string[], opts: StreamOptions): StreamHandle;

  /**
   * Send a signal to a pid. Callers must have verified pid + start time (see src/remote/procs).
   * With `expect.startTime` the host re-checks /proc/PID/stat field 22 right before `kill` (in the
   * same remote command over SSH) and throws instead of signalling a recycled pid; with
   * `expect.requireHandler` it also checks /proc/PID/status SigCgt in that step and throws
   * noHandlerError (code ENOHANDLER) instead of signalling a process with no handler for `sig`.
   */
  signal(pid: number, sig: SignalName, expect?: SignalExpect): Promise<void>;

  writeFile(path: string, data: string | Buffer, opts?: { exclusive?: boolean; mode?: number }): Promise<void>;
  appendFile(path: string, data: string | Buffer): Promise<void>;
  mkdirp(path: string): Promise<void>;
  /** Removes one file (never a directory tree). */
  remove(path: string): Promise<void>;

  /**
   * nsa-top's own files — only src/trainer/control/ownfiles.ts calls these. `rel` is `name` or
   * `sub/name` inside `root`. The links in `root`'s own path are the operator's choice and are
   * followed once; `sub` must be a real directory (made when missing) and `name` a regular file or
   * absent: a link at either is refused (never followed), and so is a FIFO, device or directory.
   * 'exclusive' fails with EEXIST when the name exists; 'replace' writes a temporary file and
   * renames it over the name. A write that failed after the file was created throws an error with
   * `partial: true` (e.g. ENOSPC: the file is there, its content is not). 'append' appends only to
   * a regular file with one link, owned by the current user, on its directory's file system: any
   * other is renamed aside to `<name>.suspect-<ts>` and a fresh file takes the data (OwnWriteDone).
   * `fileMode` (0600 for a private record) is the mode a created or replacing file gets; else 0644
   * (less the umask).
   */
  writeOwn(
    root: string,
    rel: string,
    data: string | Buffer,
    mode: OwnWriteMode,
    fileMode?: number,
  ): Promise<OwnWriteDone | undefined>;
  /** Removes `rel` (a file, or a link itself — never what it points at) below `root`. */
  removeOwn(root: string, rel: string): Promise<void>;

  /**
   * Optional: the process table as data, read without starting a command — LocalHost reads /proc
   * in-process, SshHost runs the reader inside its watch loop (no channel). Resolves null when that
   * is not possible right now; src/remote/procs.ts then runs its script through exec().
   */
  readProcTable?(req: ProcTableRequest, timeoutMs: number): Promise<ProcTable | null>;

  /**
   * Optional (SshHost): a view of this host for one look at a run (one observation, one `status`),
   * in which each stat, listing and read of a path is asked once — asked again, it is answered from
   * the first answer, without a round trip — and `ahead` is asked at once, together. Any write,
   * signal or non-quick exec through the host starts every look afresh (a change made before a call
   * is seen by it). A look never serves a part that watches a file change over time (a stat, a
   * wait, a stat again): such a part is handed the host itself. A look's look shares its answers.
   * Once ended, the view is the host itself. Without it (LocalHost), a look is the host.
   */
  look?(ahead?: LookAhead): Look;

  /** Host wall clock now (ms); SshHost corrects for clock offset measured at connect. */
  now(): number;
  close(): Promise<void>;
}

/** Runs `fn` with a look at `host` (Host.look; the host itself where it has none), ended after. */
export async function withLook<T>(host: Host, ahead: LookAhead | undefined, fn: (h: Host) => Promise<T>): Promise<T> {
  const look = host.look?.(ahead);
  if (!look) return fn(host);
  try {
    return await fn(look);
  } finally {
    look.end();
  }
}
