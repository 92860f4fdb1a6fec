// The one reader of nsa-top's pointer files: <out_dir>/.nsa-top/run.json (out_dir → launcher dir),
// <launcher>/.nsa-top/launch.json (the plan a relaunch runs; in an out_dir the same name holds an
// adoption record) and <launcher>/.nsa-top/supervisor.json. Each is believed only when nsa-top
// wrote it for this very directory:
//  - the file is a regular file owned by the current user (locally and over SSH), not group- or
//    world-writable, with one link (a hard link from another run is not ours to follow);
//  - the directory it names as its own is this one: by the device and inode recorded when it was
//    written (`dirId`), or, for a file written before that was recorded, by the path it names;
//  - run.json's target points back: the launcher dir's run.info names this out_dir.
// A copied or moved run keeps the original's files: they are named ("this is a copy of …") and not
// followed, so `stop COPY` can never reach the original run's supervisor. Locally the file is
// opened O_NOFOLLOW and checked by fstat on the descriptor that is read (no swap between the check
// and the read); over SSH it is stat'ed, then read.
import { toStat } from '../../remote/local/host.js';
import { closeSync, constants as fsc, fstatSync, openSync, readSync, statSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { isAbsolute, join, normalize, resolve } from 'node:path';
import { hostOf, type FileStat, type Host } from '../../remote/host.js';
import { UID_ARGV } from '../../remote/firstasks.js';
import { NSA_DIR } from './readers/names.js';

/** A directory's identity: a copy has another, a move keeps it. */
export interface DirId {
  dev: number | null;
  ino: number;
}

export type PointerName = 'run.json' | 'launch.json' | 'supervisor.json' | 'nodes.json';

export interface PointerRead {
  path: string;
  /** the parsed file when it is there and believed */
  json: Record<string, unknown> | null;
  /** why a file that is there is not believed (null: believed, or absent) */
  problem: string | null;
}

const uidCache = new WeakMap<Host, Promise<number | null>>();

/** The uid nsa-top runs as on `host` (null when the remote box does not say). */
export function currentUid(host: Host): Promise<number | null> {
  if (host.kind === 'local') return Promise.resolve(process.getuid?.() ?? null);
  let p = uidCache.get(hostOf(host));
  if (!p) {
    p = host
      .exec([...UID_ARGV], { timeoutMs: 10_000, quick: true })
      .then((r) => (r.code === 0 && /^\d+$/.test(r.stdout.trim()) ? Number(r.stdout.trim()) : null))
      .catch(() => null);
    uidCache.set(hostOf(host), p);
  }
  return p;
}

function idOf(st: Pick<FileStat, 'ino' | 'dev'>): DirId {
  return { dev: st.dev ?? null, ino: st.ino };
}

/** This machine's identity of `dir` (for the writers, which run where the run is). */
export function dirIdSync(dir: string): DirId {
  const st = statSync(dir);
  return { dev: st.dev, ino: st.ino };
}

export async function dirIdOf(host: Host, dir: string): Promise<DirId | null> {
  const st = await host.stat(dir).catch(() => null);
  return st?.isDir ? idOf(st) : null;
}

/** Same directory: inode and, where both sides know it, device. */
export function sameDir(a: DirId, b: DirId): boolean {
  return a.ino === b.ino && (a.dev === null || b.dev === null || a.dev === b.dev);
}

function parseDirId(v: unknown): DirId | null {
  if (!v || typeof v !== 'object') return null;
  const o = v as { dev?: unknown; ino?: unknown };
  if (typeof o.ino !== 'number' || !Number.isFinite(o.ino)) return null;
  return { ino: o.ino, dev: typeof o.dev === 'number' && Number.isFinite(o.dev) ? o.dev : null };
}

/** Why a file with this stat cannot be nsa-top's own, or null. */
export function ownershipProblem(st: FileStat, me: number | null): string | null {
  if (!st.isFile) return 'not a regular file';
  if (me !== null && st.uid !== undefined && st.uid !== me)
    return `owned by uid ${st.uid}, not by you (uid ${me}): nsa-top did not write it`;
  if ((st.mode & 0o022) !== 0)
    return `${(st.mode & 0o020) !== 0 ? 'group' : 'world'}-writable (mode ${(st.mode & 0o777).toString(8).padStart(3, '0')}): anyone could have written it`;
  if (st.nlink !== undefined && st.nlink > 1) return `has ${st.nlink} hard links: another file's content`;
  return null;
}

const MAX_POINTER = 4 * 1024 * 1024;

const POINTER_FLAGS = fsc.O_RDONLY | (fsc.O_NOFOLLOW ?? 0) | (fsc.O_NONBLOCK ?? 0);

/** an open pointer file: read and closed in place, or through the thread pool */
interface Opened {
  fd: number;
  read(buf: Buffer): number | Promise<number>;
  close(): void | Promise<void>;
}

function openInPlace(path: string): Opened {
  const fd = openSync(path, POINTER_FLAGS);
  return { fd, read: (b) => readSync(fd, b, 0, b.length, 0), close: () => closeSync(fd) };
}

async function openPooled(path: string): Promise<Opened> {
  const fh = await fs.open(path, POINTER_FLAGS);
  return { fd: fh.fd, read: async (b) => (await fh.read(b, 0, b.length, 0)).bytesRead, close: () => fh.close() };
}

/**
 * Local read: O_NOFOLLOW (O_NONBLOCK: a FIFO planted there never blocks the open), checked by fstat
 * on the descriptor that is read. In place where the host has judged the directory's file system
 * local (Host.pollIoMode), else through the thread pool (a hung mount must not block).
 */
async function readLocal(path: string, inPlace: boolean): Promise<{ st: FileStat; text: string } | null> {
  let f: Opened;
  try {
    f = inPlace ? openInPlace(path) : await openPooled(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    if (code === 'ELOOP') throw new Error('is a symbolic link: not followed');
    throw new Error(code ?? (e as Error).message);
  }
  try {
    const st: FileStat = toStat(fstatSync(f.fd));
    if (!st.isFile || st.size > MAX_POINTER) return { st, text: '' };
    // one read of the size fstat gave (a pointer is small; a longer file is cut and fails to parse)
    const buf = Buffer.allocUnsafe(Math.max(1, st.size));
    const n = await f.read(buf);
    return { st, text: buf.subarray(0, n).toString('utf8') };
  } finally {
    try {
      await f.close();
    } catch {
      /* closed or not, the read is done */
    }
  }
}

/**
 * <dir>/.nsa-top/<name>, parsed, when it passes the file checks (owner, mode, links, JSON object).
 * Whether it was written for this very dir is the caller's check (see forThisDir).
 */
export async function readPointerFile(host: Host, dir: string, name: PointerName): Promise<PointerRead> {
  const path = join(dir, NSA_DIR, name);
  const out: PointerRead = { path, json: null, problem: null };
  let got: { st: FileStat; text: string } | null;
  try {
    // the directory's file system judged once per host (one statfs): nsa-top's small files in a
    // local one are read in place, not in three thread-pool round trips (status read five before
    // its first poll)
    if (host.kind === 'local') got = await readLocal(path, (await host.pollIoMode?.(dir)) === 'sync');
    else {
      const st = await host.stat(path);
      got = st ? { st, text: st.isFile ? (await host.readFile(path, MAX_POINTER)).toString('utf8') : '' } : null;
    }
  } catch (e) {
    out.problem = `${path}: ${(e as Error).message}`;
    return out;
  }
  if (!got) return out;
  const why = ownershipProblem(got.st, await currentUid(host));
  if (why) {
    out.problem = `${path}: ${why}; not followed`;
    return out;
  }
  try {
    const j = JSON.parse(got.text) as unknown;
    if (!j || typeof j !== 'object' || Array.isArray(j)) throw new Error('not an object');
    out.json = j as Record<string, unknown>;
  } catch {
    out.problem = `${path}: not valid JSON; not followed`;
  }
  return out;
}

/**
 * Whether a file that names `recordedPath` (and `recordedId`, when written with one) as its own
 * directory was written for `dir`: null when it was, else the one line that says whose it is.
 */
export async function forThisDir(
  host: Host,
  dir: string,
  file: string,
  recordedPath: unknown,
  recordedId: unknown,
  what: string,
  /** `dir`'s identity when the caller has it already */
  known?: DirId | null,
): Promise<string | null> {
  const here = known !== undefined ? known : await dirIdOf(host, dir);
  const orig = typeof recordedPath === 'string' && recordedPath.length > 0 ? recordedPath : null;
  const id = parseDirId(recordedId);
  let same: boolean;
  if (id && here) same = sameDir(id, here);
  else if (orig && isAbsolute(orig)) {
    const there = await dirIdOf(host, orig);
    same = there && here ? sameDir(there, here) : normalize(orig) === normalize(dir);
  } else same = false;
  if (same) return null;
  if (orig && normalize(orig) !== normalize(dir))
    return `${dir} is a copy of ${orig}: its ${file} ${what}; not followed`;
  return `${dir}: its ${file} was written for another directory (${orig ? 'moved or replaced since' : 'it names none'}); not followed`;
}

/** The parsed file when it is believed for `dir`, else null and the problem (null when absent). */
export async function readOwnPointer(
  host: Host,
  dir: string,
  name: 'launch.json' | 'supervisor.json' | 'nodes.json',
  dirKey: 'runDir' | 'outDir',
): Promise<PointerRead> {
  const r = await readPointerFile(host, dir, name);
  if (!r.json) return r;
  const why = await forThisDir(
    host,
    dir,
    `${NSA_DIR}/${name}`,
    r.json[dirKey],
    r.json.dirId,
    name === 'supervisor.json' ? "belongs to another run's supervisor" : 'was written for another run',
  );
  return why ? { ...r, json: null, problem: why } : r;
}

/** Parses `key: value` lines of run.info (the real launcher's shape, which we extend). */
export function parseRunInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_][\w.-]*):\s?(.*)$/.exec(line);
    if (m && !(m[1]! in out)) out[m[1]!] = m[2]!.trimEnd();
  }
  return out;
}

/** run.info's `out_dir:`, resolved against the launcher dir (null when none). */
export function runInfoOutDir(runDir: string, info: string): string | null {
  const declared = parseRunInfo(info).out_dir?.trim() ?? '';
  if (!declared) return null;
  return normalize(isAbsolute(declared) ? declared : resolve(runDir, declared));
}

/**
 * <out_dir>/.nsa-top/run.json: the launcher dir it names, when believed — written for this out_dir
 * (dirId / outDir) and named back by that launcher dir's run.info `out_dir:`.
 */
export async function readRunPointer(
  host: Host,
  outDir: string,
): Promise<{ runDir: string | null; problem: string | null }> {
  const r = await readPointerFile(host, outDir, 'run.json');
  if (!r.json) return { runDir: null, problem: r.problem };
  const runDir = r.json.runDir;
  if (typeof runDir !== 'string' || !isAbsolute(runDir))
    return { runDir: null, problem: `${r.path}: names no launcher dir; not followed` };
  const info = await host
    .readFile(join(runDir, 'run.info'), 256 * 1024)
    .then((b) => b.toString('utf8'))
    .catch(() => null);
  const back = info === null ? null : runInfoOutDir(runDir, info);
  // a pointer written before the out_dir was recorded in it: run.info's out_dir is where it was written
  const recorded = typeof r.json.outDir === 'string' ? r.json.outDir : back;
  const here = await dirIdOf(host, outDir);
  const why = await forThisDir(
    host,
    outDir,
    `${NSA_DIR}/run.json`,
    recorded,
    r.json.outDirId,
    'points to another run',
    here,
  );
  if (why) return { runDir: null, problem: why };
  if (back === null)
    return {
      runDir: null,
      problem: `${r.path}: ${runDir}/run.info ${info === null ? 'is not there' : 'names no out_dir'}; not followed`,
    };
  // the same path is the same directory (its identity was checked just above)
  const backId = normalize(back) === normalize(outDir) ? here : await dirIdOf(host, back);
  if (!(backId && here ? sameDir(backId, here) : normalize(back) === normalize(outDir)))
    return {
      runDir: null,
      problem: `${outDir} is a copy of ${back}: its ${NSA_DIR}/run.json points to another run (${runDir} writes into ${back}); not followed`,
    };
  return { runDir, problem: null };
}
