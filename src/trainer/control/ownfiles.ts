// nsa-top's own writes into a run — the one module every writer goes through (the action log,
// .HALT, .anomaly_type, watchdog.jsonl, the supervisor's files, launch). Three rules hold here, so
// no command can forget them:
//  - read-only (`--read-only`, NSA_TOP_READ_ONLY=1/true/yes/on) refuses every write, whoever asks;
//  - only nsa-top's own names are written: `.nsa-top/<file>`, `.HALT`, `.anomaly_type`,
//    `gate_collapse_details.json` and `pyspy_*.txt`, directly inside the run's directory;
//  - that directory must be a real directory holding a run (a heartbeat, training.csv, env.json,
//    a checkpoint, run.info, train.log or launch's .nsa-top/run.json), and neither `.nsa-top` nor the
//    file is ever followed when it is a link (Host.writeOwn: O_NOFOLLOW locally, guarded sh over SSH).
// A refused or failed write throws an OwnWriteError: one line that names the path and why.
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { lstat, open, readdir, rename, stat, unlink } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join } from 'node:path';
import type { Host, OwnWriteDone, OwnWriteMode } from '../../remote/host.js';
import {
  ownOpenAppendLocalSync,
  ownRemoveLocalSync,
  ownRenameLocal,
  ownWriteLocalSync,
} from '../../remote/local/ownfiles.js';
import { onLocalFs } from '../../remote/local/host.js';
import { LOG_NAMES, NSA_DIR } from '../run/readers/names.js';
import { holdsRun, runRootProblem } from '../run/rundirs.js';

export { runRootProblem };

export { NSA_DIR };

export class OwnWriteError extends Error {
  readonly code: string;
  readonly path: string;
  /** the file was created but its content not (all) written: a 0-byte .HALT on a full disk */
  readonly partial: boolean;
  constructor(path: string, why: string, code = 'EIO', partial = false) {
    super(why.startsWith(path) ? why : `${path}: ${why}`);
    this.code = code;
    this.path = path;
    this.partial = partial;
  }
}

/** read-only mode refused the write */
export class ReadOnlyError extends OwnWriteError {
  constructor(path: string) {
    super(path, 'read-only mode: nothing written', 'EROFS');
  }
}

export interface EffectOptions {
  /** a read-only cockpit passes true; NSA_TOP_READ_ONLY=1 and `--read-only` do the same */
  readOnly?: boolean;
  /** a launcher dir's run.info and train.log may be written too */
  launcher?: boolean;
}

const READ_ONLY_ON = new Set(['1', 'true', 'yes', 'on']);
const READ_ONLY_OFF = new Set(['', '0', 'false', 'no', 'off']);

/**
 * The one reading of NSA_TOP_READ_ONLY: `1`, `true`, `yes`, `on` (any case) mean read-only; unset,
 * empty, `0`, `false`, `no`, `off` mean not; anything else is bad input (the CLI checks it first
 * and exits 2, src/cli.ts). Returns the one-line error for a bad value, else whether it is on.
 */
export function readOnlyEnv(env: NodeJS.ProcessEnv = process.env): boolean | { error: string } {
  const raw = env.NSA_TOP_READ_ONLY;
  if (raw === undefined) return false;
  const v = raw.trim().toLowerCase();
  if (READ_ONLY_ON.has(v)) return true;
  if (READ_ONLY_OFF.has(v)) return false;
  return {
    error: `NSA_TOP_READ_ONLY=${JSON.stringify(raw)} is neither on (1, true, yes, on) nor off (0, false, no, off, empty)`,
  };
}

/**
 * Read-only for the whole process: `--read-only` on any command, or NSA_TOP_READ_ONLY on (any
 * spelling readOnlyEnv accepts). A value it cannot read counts as read-only here, so a path that
 * runs before or without the CLI's check fails closed.
 */
export function readOnlyMode(opts?: EffectOptions): boolean {
  return opts?.readOnly === true || readOnlyEnv() !== false;
}

const TOP_NAMES = new Set(['.HALT', '.anomaly_type', 'gate_collapse_details.json']);
/** a launcher dir's own files (launch writes run.info, the supervisor tees the trainer to its log) */
const LAUNCHER_NAMES = new Set(['run.info', ...LOG_NAMES]);
const PYSPY_RE = /^pyspy_\d+_rank\d+_\d+\.txt$/;
const OWN_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

/** `rel` is one of nsa-top's own names inside a run dir, or the reason it is not. */
export function ownNameProblem(rel: string, launcher = false): string | null {
  if (launcher && LAUNCHER_NAMES.has(rel)) return null;
  const parts = rel.split('/');
  if (parts.length === 2 && parts[0] === NSA_DIR && OWN_NAME_RE.test(parts[1]!)) return null;
  if (parts.length === 1 && (TOP_NAMES.has(rel) || PYSPY_RE.test(rel))) return null;
  return `${rel} is not one of nsa-top's own files (.nsa-top/*, .HALT, .anomaly_type, gate_collapse_details.json, pyspy_*.txt)`;
}

export interface OwnWriteOptions extends EffectOptions {
  /** a directory nsa-top has just made for a launch (it holds nothing yet) */
  fresh?: boolean;
  /** readable by the user only (0600): a record that may name more than it should */
  private?: boolean;
}

async function guard(host: Host, root: string, rel: string, opts: OwnWriteOptions): Promise<string> {
  const path = join(root, rel);
  if (readOnlyMode(opts)) throw new ReadOnlyError(path);
  const bad = ownNameProblem(rel, opts.launcher);
  if (bad) throw new OwnWriteError(path, bad, 'EPERM');
  if (!opts.fresh) {
    const why = await runRootProblem(host, root);
    if (why) throw new OwnWriteError(path, `${why}: refused to write into it`, 'EPERM');
  } else if (!isAbsolute(root)) throw new OwnWriteError(path, `${root} is not an absolute path`, 'EPERM');
  return path;
}

function rethrow(path: string, e: unknown): never {
  if (e instanceof OwnWriteError) throw e;
  const x = e as NodeJS.ErrnoException & { partial?: boolean };
  throw new OwnWriteError(path, x.message, x.code ?? 'EIO', x.partial === true);
}

async function write(
  host: Host,
  root: string,
  rel: string,
  data: string | Buffer,
  mode: OwnWriteMode,
  opts: OwnWriteOptions,
): Promise<OwnWriteDone | undefined> {
  const path = await guard(host, root, rel, opts);
  try {
    return await host.writeOwn(root, rel, data, mode, opts.private ? 0o600 : undefined);
  } catch (e) {
    rethrow(path, e);
  }
}

/** Resolves to what was done beyond the write: an append target set aside (see Host.writeOwn). */
type OwnWrite = (
  host: Host,
  root: string,
  rel: string,
  data: string | Buffer,
  opts?: OwnWriteOptions,
) => Promise<OwnWriteDone | undefined>;
const writer =
  (mode: OwnWriteMode): OwnWrite =>
  (host, root, rel, data, opts = {}) =>
    write(host, root, rel, data, mode, opts);

/**
 * Appends to nsa-top's own file (one O_APPEND write: short records never interleave). Only to a
 * regular file with one link, owned by the user: another (a hard link planted at the name) is set
 * aside to `<name>.suspect-<ts>` and a fresh file takes the data; the result then says so.
 */
export const appendOwn = writer('append');

/** Creates the file; EEXIST when it is there (its content is then kept). */
export const createOwn = writer('exclusive');

/** Writes a temporary file and renames it over the name: readers never see half of it. */
export const writeOwnAtomic = writer('replace');

/** Removes one of nsa-top's own names (a stale .HALT, a stop request); a link is removed, never followed. */
export async function removeOwn(host: Host, root: string, rel: string, opts: OwnWriteOptions = {}): Promise<void> {
  const path = await guard(host, root, rel, { ...opts, fresh: true });
  try {
    await host.removeOwn(root, rel);
  } catch (e) {
    rethrow(path, e);
  }
}

/**
 * Renames one of nsa-top's own files to another own name in the same directory (a journal part
 * rotated): both names guarded, a link never followed. On this machine only (the journal is written
 * on the run's host).
 */
export async function renameOwn(
  host: Host,
  root: string,
  from: string,
  to: string,
  opts: OwnWriteOptions = {},
): Promise<void> {
  await guard(host, root, to, opts);
  const path = await guard(host, root, from, opts);
  if (host.kind !== 'local') throw new OwnWriteError(path, 'renamed on this machine only', 'ENOTSUP');
  try {
    await ownRenameLocal(root, from, to);
  } catch (e) {
    rethrow(path, e);
  }
}

// ------------------------------------------------------------------ synchronous, this machine

function guardSync(root: string, rel: string, opts: EffectOptions): string {
  const path = join(root, rel);
  if (readOnlyMode(opts)) throw new ReadOnlyError(path);
  const bad = ownNameProblem(rel, opts.launcher);
  if (bad) throw new OwnWriteError(path, bad, 'EPERM');
  if (!isAbsolute(root)) throw new OwnWriteError(path, `${root} is not an absolute path`, 'EPERM');
  return path;
}

/** Runs a synchronous write of `root/rel` once its guard passed; a failure is one OwnWriteError. */
function guardedSync<T>(root: string, rel: string, opts: EffectOptions, fn: () => T): T {
  const path = guardSync(root, rel, opts);
  try {
    return fn();
  } catch (e) {
    rethrow(path, e);
  }
}

/** writeOwnAtomic for the supervisor's state (its run dir is the one launch made). */
export function writeOwnAtomicSync(root: string, rel: string, data: string | Buffer, opts: EffectOptions = {}): void {
  guardedSync(root, rel, opts, () => ownWriteLocalSync(root, rel, data, 'replace'));
}

export function createOwnSync(root: string, rel: string, data: string | Buffer, opts: EffectOptions = {}): void {
  guardedSync(root, rel, opts, () => ownWriteLocalSync(root, rel, data, 'exclusive'));
}

/** An fd open for appending to nsa-top's own file (the supervisor's log). */
export function openOwnAppendSync(root: string, rel: string, opts: EffectOptions = {}): number {
  return guardedSync(root, rel, opts, () => ownOpenAppendLocalSync(root, rel));
}

/**
 * Makes (or finds) `rel`'s directories below `root` on this machine, each a real directory: a link
 * or a file at any of them is refused. Returns the absolute path. Read-only refuses it too.
 */
export function ensureOwnDirsSync(root: string, rel: string, opts: EffectOptions = {}): string {
  let path = root;
  if (readOnlyMode(opts)) throw new ReadOnlyError(join(root, rel));
  if (!isAbsolute(root)) throw new OwnWriteError(join(root, rel), `${root} is not an absolute path`, 'EPERM');
  for (const part of rel.split('/')) {
    if (!OWN_NAME_RE.test(part) && part !== NSA_DIR)
      throw new OwnWriteError(join(root, rel), `${part}: not a plain name`, 'EINVAL');
    path = join(path, part);
    try {
      mkdirSync(path, { mode: 0o755 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new OwnWriteError(path, (e as Error).message, (e as NodeJS.ErrnoException).code ?? 'EIO');
    }
    const st = lstatSync(path);
    if (st.isSymbolicLink())
      throw new OwnWriteError(path, 'is a symbolic link: refused (nsa-top never writes through a link)', 'ELOOP');
    if (!st.isDirectory()) throw new OwnWriteError(path, 'is not a directory: refused', 'ENOTDIR');
  }
  return path;
}

export function removeOwnSync(root: string, rel: string, opts: EffectOptions = {}): void {
  guardedSync(root, rel, opts, () => ownRemoveLocalSync(root, rel));
}

// ------------------------------------------------------------------ a textfile for node_exporter

/** the first line of every textfile nsa-top writes: what proves an existing file at the path is its own */
export const TEXTFILE_MARK = '# nsa-top watchdog metrics (node_exporter textfile; replaced whole, never edited)';

/**
 * Why `path` cannot take the watchdog's metrics textfile (`--metrics-file`), or null. On this machine
 * (node_exporter reads its textfile directory locally), an absolute `*.prom` path (the only names the
 * textfile collector reads) in an existing directory that holds no run (a run dir takes only nsa-top's
 * own names), and no file there but one nsa-top wrote (its first line is TEXTFILE_MARK): never a link,
 * never another exporter's file, never a training artifact.
 */
export async function textfileProblem(path: string, opts: EffectOptions = {}): Promise<string | null> {
  if (readOnlyMode(opts)) return `${path}: read-only mode: nothing written`;
  if (!isAbsolute(path)) return `${path} is not an absolute path`;
  if (!path.endsWith('.prom') || basename(path) === '.prom')
    return `${path}: a node_exporter textfile is named *.prom (the collector reads nothing else)`;
  const dir = dirname(path);
  let names: string[];
  try {
    if (!(await stat(dir)).isDirectory()) return `${dir} is not a directory`;
    names = await readdir(dir);
  } catch (e) {
    return `${dir}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such directory' : (e as Error).message}`;
  }
  if (holdsRun(names)) return `${dir} holds a run: nsa-top writes only its own names there (use another directory)`;
  let st;
  try {
    st = await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return `${path}: ${(e as Error).message}`;
  }
  if (!st.isFile()) return `${path} is ${st.isSymbolicLink() ? 'a link' : 'not a regular file'}: refused`;
  let first = '';
  try {
    const h = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const b = Buffer.alloc(TEXTFILE_MARK.length);
      const { bytesRead } = await h.read(b, 0, b.length, 0);
      first = b.subarray(0, bytesRead).toString('utf8');
    } finally {
      await h.close();
    }
  } catch (e) {
    return `${path}: ${(e as Error).message}`;
  }
  if (first !== TEXTFILE_MARK) return `${path} exists and nsa-top did not write it: refused to replace it`;
  return null;
}

/** the textfile's first line, as bytes */
export const TEXTFILE_MARK_LINE = Buffer.from(TEXTFILE_MARK + '\n', 'utf8');

/** per textfile directory: whether it is on a local file system (asked once; unknown is asked again) */
const textfileLocal = new Map<string, boolean>();

/**
 * Writes the metrics textfile whole: a temporary file beside it (exclusive, never through a link),
 * renamed over the name, so node_exporter never reads half of it. The content must begin with
 * TEXTFILE_MARK; the path must have passed textfileProblem (checked again when the name changed hands).
 * On a local file system the writer's own round (the name still the file it put there) is done in
 * place, without the thread pool: the watchdog replaces the file every round, and six promise round
 * trips cost it more CPU than the writing (bench/watchdog-metrics.bench.ts). `io` forces one way (tests).
 */
export async function writeTextfileAtomic(
  path: string,
  data: string | Buffer,
  opts: EffectOptions & { ours?: number | null; io?: 'sync' | 'async' } = {},
): Promise<number> {
  if (readOnlyMode(opts)) throw new ReadOnlyError(path);
  // (bytes: the watchdog hands the round's encoded exposition, the bytes its scrapes are sent)
  if (
    typeof data === 'string'
      ? !data.startsWith(TEXTFILE_MARK + '\n')
      : !data.subarray(0, TEXTFILE_MARK_LINE.length).equals(TEXTFILE_MARK_LINE)
  )
    throw new OwnWriteError(path, 'a textfile without the nsa-top mark', 'EINVAL');
  const dir = dirname(path);
  let local = opts.io === undefined ? textfileLocal.get(dir) : opts.io === 'sync';
  if (local === undefined) {
    const l = await onLocalFs(dir);
    if (l !== null) textfileLocal.set(dir, l);
    local = l === true;
  }
  if (local) {
    const ino = writeOursInPlace(path, data, opts.ours ?? null);
    if (ino !== null) return ino;
  }
  const st = await lstat(path).catch(() => null);
  // not the file this writer put there last (`ours`: its inode): proven nsa-top's again, or refused
  if (st && (!st.isFile() || st.nlink !== 1 || st.ino !== opts.ours)) {
    const why =
      st.isFile() && st.nlink !== 1 ? 'a file with more than one link: refused' : await textfileProblem(path, opts);
    if (why) throw new OwnWriteError(path, why, 'EPERM');
  }
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    const h = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      await h.writeFile(data);
    } finally {
      await h.close();
    }
    await rename(tmp, path);
    return (await lstat(path)).ino;
  } catch (e) {
    await unlink(tmp).catch(() => {});
    rethrow(path, e);
  }
}

/**
 * writeTextfileAtomic's round in place: the same temporary file, exclusive and never through a link,
 * renamed over the name — when the name is absent or still the regular file of one link this writer
 * put there (`ours`). null: it is something else now, to be proven again (the asynchronous way).
 * Returns the inode written (the temporary file's, which the rename put at the name).
 */
function writeOursInPlace(path: string, data: string | Buffer, ours: number | null): number | null {
  let st;
  try {
    st = lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return null;
  }
  if (st && (!st.isFile() || st.nlink !== 1 || st.ino !== ours)) return null;
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  let fd = -1;
  try {
    fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    writeFileSync(fd, data);
    const ino = fstatSync(fd).ino;
    closeSync(fd);
    fd = -1;
    renameSync(tmp, path);
    return ino;
  } catch (e) {
    try {
      if (fd >= 0) closeSync(fd);
      unlinkSync(tmp);
    } catch {
      /* not created, or gone */
    }
    rethrow(path, e);
  }
}
