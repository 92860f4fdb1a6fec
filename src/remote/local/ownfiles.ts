// nsa-top's own files on this machine, never through a link (Host.writeOwn / removeOwn of
// LocalHost, and the supervisor's synchronous writes). The directory is opened once and every later
// name is resolved against that open directory (/proc/self/fd/N/name: the kernel's openat, reached
// from Node), so a link planted at `.nsa-top` or at the file itself is refused with ELOOP instead of
// being followed, and a directory swapped after the check cannot redirect the write. Where
// /proc/self/fd is missing (not Linux) the same checks run on paths (lstat + O_NOFOLLOW).
// An append opens the name and then checks the opened file itself (fstat, so no race with the name):
// O_NOFOLLOW does not see a hard link, and `ln training.csv .nsa-top/actions.jsonl` would otherwise
// send the next record into training.csv. A file that is not plainly nsa-top's own (another link
// to it, another owner, another file system) is renamed aside to `<name>.suspect-<ts>` — never
// written, never deleted — and a fresh file made with O_EXCL takes the data (appendSuspect).
import * as fsSync from 'node:fs';
import { constants as fsc, existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { join } from 'node:path';
import type { OwnWriteDone, OwnWriteMode } from '../host.js';

const PROC_FD = process.platform === 'linux' && existsSync('/proc/self/fd');
const O_DIRECTORY = fsc.O_DIRECTORY ?? 0;
const O_NOFOLLOW = fsc.O_NOFOLLOW ?? 0;
const O_NONBLOCK = fsc.O_NONBLOCK ?? 0;

export interface OwnError extends NodeJS.ErrnoException {
  /** the file was created (or partly appended to) but its content was not all written */
  partial?: boolean;
  path?: string;
}

/** `name` or `sub/name`; every part a plain name (no '', '.', '..', NUL). */
export function splitOwnRel(rel: string): [string | null, string] {
  const parts = rel.split('/');
  const bad = (p: string) => p === '' || p === '.' || p === '..' || p.includes('\0');
  if (parts.length < 1 || parts.length > 2 || parts.some(bad))
    throw ownError('EINVAL', rel, 'not a plain name inside the run dir');
  return parts.length === 2 ? [parts[0]!, parts[1]!] : [null, parts[0]!];
}

export function ownError(code: string, path: string, why: string, partial = false): OwnError {
  const e = new Error(`${path}: ${why}`) as OwnError;
  e.code = code;
  e.path = path;
  if (partial) e.partial = true;
  return e;
}

/** The errno of a refused open, said as what it means for nsa-top's own file. */
function explain(e: unknown, path: string, what: 'dir' | 'file'): OwnError {
  const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
  switch (code) {
    case 'ELOOP':
      return ownError('ELOOP', path, 'is a symbolic link: refused (nsa-top never writes through a link)');
    case 'ENOTDIR':
      return ownError(
        'ENOTDIR',
        path,
        what === 'dir' ? 'is not a directory: refused' : 'a path component is not a directory',
      );
    case 'EISDIR':
      return ownError('EISDIR', path, 'is a directory, not a file: refused');
    case 'ENXIO':
      return ownError('ENXIO', path, 'is a FIFO or socket, not a regular file: refused');
    case 'EEXIST':
      return ownError('EEXIST', path, 'already exists');
    default:
      return ownError(code, path, (e as Error).message.replace(/^[A-Z]+: /, ''));
  }
}

/**
 * Why an opened file is not nsa-top's own to append to, or null: it must have exactly one link
 * (else it is also another file — a training artifact, a file outside the run), belong to the
 * current user, and sit on its directory's file system (not a file bind-mounted over the name).
 */
export function appendSuspect(st: { nlink: number; uid: number; dev: number }, dirDev: number): string | null {
  if (st.nlink !== 1) return `has ${st.nlink} hard links (it is also another file)`;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return `is owned by uid ${st.uid}, not by this user (uid ${uid})`;
  if (st.dev !== dirDev) return 'is on another file system than its directory (mounted over the name)';
  return null;
}

/** `<name>.suspect-<UTC time>`, with `-N` added while that name is taken */
function suspectName(name: string, taken: (n: string) => boolean): string {
  const base = `${name}.suspect-${new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}`;
  let n = base;
  for (let i = 1; taken(n); i++) n = `${base}-${i}`;
  return n;
}

const existsAt = (p: string) => {
  try {
    fsSync.lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

/**
 * Renames the suspect `name` aside (in the same directory; the rename never touches its content),
 * only while the name still holds the file that was opened and checked (`opened`): another writer
 * may have set it aside already and started a fresh one, which is not to be moved.
 */
function setAsideSync(
  at: (n: string) => string,
  name: string,
  shown: string,
  why: string,
  opened: { ino: number; dev: number },
): OwnWriteDone {
  let now: fsSync.Stats | null = null;
  try {
    now = fsSync.lstatSync(at(name));
  } catch {
    /* gone: nothing to set aside */
  }
  if (now && (now.ino !== opened.ino || now.dev !== opened.dev))
    return { setAside: '', why: `${why}; another writer set it aside first` };
  if (!now) return { setAside: '', why: `${why}; it was gone when it was to be set aside` };
  const aside = suspectName(name, (n) => existsAt(at(n)));
  try {
    fsSync.renameSync(at(name), at(aside));
  } catch (e) {
    throw ownError(
      'ESUSPECT',
      shown,
      `${why}: refused, and it could not be set aside (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  return { setAside: aside, why };
}

/** What a set-aside says, one line (the first line of a fresh text log, a record's note). */
export function setAsideText(shown: string, done: OwnWriteDone): string {
  const moved = done.setAside ? `renamed to ${done.setAside} (kept, not deleted) and ` : '';
  return `${shown} ${done.why}: not appended to; ${moved}a fresh file started`;
}

const APPEND_FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_APPEND | O_NOFOLLOW | O_NONBLOCK;
const APPEND_FRESH = APPEND_FLAGS | fsc.O_EXCL;

function tmpName(name: string): string {
  return `.${name}.${process.pid}.${Math.random().toString(36).slice(2, 8)}.tmp`;
}

async function writeAll(fh: fs.FileHandle, buf: Buffer): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const { bytesWritten } = await fh.write(buf, off, buf.length - off);
    if (bytesWritten <= 0) throw Object.assign(new Error('short write'), { code: 'EIO' });
    off += bytesWritten;
  }
}

function writeAllSync(fd: number, buf: Buffer): void {
  let off = 0;
  while (off < buf.length) {
    const n = fsSync.writeSync(fd, buf, off, buf.length - off);
    if (n <= 0) throw Object.assign(new Error('short write'), { code: 'EIO' });
    off += n;
  }
}

/** Opened directories of one write: the root as given, the sub dir never through a link. */
interface Dirs<H> {
  root: H;
  dir: H;
  /** a name inside the final directory, for open/rename/unlink */
  at(name: string): string;
}

async function openDirs(root: string, sub: string | null, create: boolean): Promise<Dirs<fs.FileHandle>> {
  let rootH: fs.FileHandle;
  try {
    rootH = await fs.open(root, fsc.O_RDONLY | O_DIRECTORY);
  } catch (e) {
    throw explain(e, root, 'dir');
  }
  if (!sub) return { root: rootH, dir: rootH, at: (n) => (PROC_FD ? `/proc/self/fd/${rootH.fd}/${n}` : join(root, n)) };
  const subShown = join(root, sub);
  const subPath = PROC_FD ? `/proc/self/fd/${rootH.fd}/${sub}` : subShown;
  try {
    if (create) {
      try {
        await fs.mkdir(subPath, { mode: 0o755 });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    }
    let dirH: fs.FileHandle;
    try {
      dirH = await fs.open(subPath, fsc.O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (e) {
      // O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR: tell a link from a file
      const link = await fs
        .lstat(subPath)
        .then((st) => st.isSymbolicLink())
        .catch(() => false);
      throw explain(link ? Object.assign(new Error('link'), { code: 'ELOOP' }) : e, subShown, 'dir');
    }
    return { root: rootH, dir: dirH, at: (n) => (PROC_FD ? `/proc/self/fd/${dirH.fd}/${n}` : join(subShown, n)) };
  } catch (e) {
    await rootH.close().catch(() => {});
    throw e;
  }
}

export async function ownWriteLocal(
  root: string,
  rel: string,
  data: string | Buffer,
  mode: OwnWriteMode,
  fileMode = 0o644,
): Promise<OwnWriteDone | undefined> {
  const [sub, name] = splitOwnRel(rel);
  const shown = join(root, rel);
  const buf = typeof data === 'string' ? Buffer.from(data) : data;
  const d = await openDirs(root, sub, true);
  try {
    if (mode === 'replace') {
      const tmp = tmpName(name);
      let fh: fs.FileHandle;
      try {
        fh = await fs.open(d.at(tmp), fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | O_NOFOLLOW, fileMode);
      } catch (e) {
        throw explain(e, join(root, sub ?? '', tmp), 'file');
      }
      try {
        await writeAll(fh, buf);
        await fh.close();
      } catch (e) {
        await fh.close().catch(() => {});
        await fs.unlink(d.at(tmp)).catch(() => {});
        throw explain(e, shown, 'file'); // the old file is untouched: not partial
      }
      try {
        await fs.rename(d.at(tmp), d.at(name));
      } catch (e) {
        await fs.unlink(d.at(tmp)).catch(() => {});
        throw explain(e, shown, 'file');
      }
      return undefined;
    }
    const flags =
      fsc.O_WRONLY | fsc.O_CREAT | O_NOFOLLOW | O_NONBLOCK | (mode === 'append' ? fsc.O_APPEND : fsc.O_EXCL);
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(d.at(name), flags, fileMode);
    } catch (e) {
      throw explain(e, shown, 'file');
    }
    let done: OwnWriteDone | undefined;
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw ownError('EFTYPE', shown, 'is not a regular file: refused');
      const why = mode === 'append' ? appendSuspect(st, (await d.dir.stat()).dev) : null;
      if (why) {
        await fh.close();
        done = setAsideSync(d.at, name, shown, why, st);
        try {
          fh = await fs.open(d.at(name), APPEND_FRESH, fileMode);
        } catch (e) {
          // another writer made the fresh file first: append to it, checked like any other
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw explain(e, shown, 'file');
          try {
            fh = await fs.open(d.at(name), flags, fileMode);
          } catch (e2) {
            throw explain(e2, shown, 'file');
          }
        }
        const again = appendSuspect(await fh.stat(), (await d.dir.stat()).dev);
        if (again) throw ownError('ESUSPECT', shown, `the fresh file ${again}: refused`);
      }
      try {
        await writeAll(fh, buf);
      } catch (e) {
        const x = explain(e, shown, 'file');
        x.partial = true;
        x.message = `${shown}: ${mode === 'exclusive' ? 'created, but its content could not be written' : 'could not append'} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
        throw x;
      }
    } finally {
      await fh.close().catch(() => {});
    }
    return done;
  } finally {
    if (d.dir !== d.root) await d.dir.close().catch(() => {});
    await d.root.close().catch(() => {});
  }
}

export async function ownRemoveLocal(root: string, rel: string): Promise<void> {
  const [sub, name] = splitOwnRel(rel);
  const d = await openDirs(root, sub, false);
  try {
    // unlink never follows a link: a planted link is removed, not what it points at
    await fs.unlink(d.at(name));
  } catch (e) {
    throw explain(e, join(root, rel), 'file');
  } finally {
    if (d.dir !== d.root) await d.dir.close().catch(() => {});
    await d.root.close().catch(() => {});
  }
}

/** Renames `from` to `to`, both names in the same directory below `root` (a journal rotated); a link at
 * either name is renamed or replaced itself, never followed; anything but a regular file at `from` is refused. */
export async function ownRenameLocal(root: string, from: string, to: string): Promise<void> {
  const [sub, name] = splitOwnRel(from);
  const [sub2, name2] = splitOwnRel(to);
  if (sub !== sub2) throw ownError('EINVAL', join(root, to), 'a rename stays in its directory');
  const d = await openDirs(root, sub, false);
  try {
    const st = await fs.lstat(d.at(name));
    if (!st.isFile()) throw ownError('EPERM', join(root, from), 'is not a regular file: refused');
    await fs.rename(d.at(name), d.at(name2));
  } catch (e) {
    if ((e as OwnError).path) throw e;
    throw explain(e, join(root, from), 'file');
  } finally {
    if (d.dir !== d.root) await d.dir.close().catch(() => {});
    await d.root.close().catch(() => {});
  }
}

// ------------------------------------------------------------------ synchronous (the supervisor)

function openDirsSync(root: string, sub: string | null, create = true): Dirs<number> {
  let rootFd: number;
  try {
    rootFd = fsSync.openSync(root, fsc.O_RDONLY | O_DIRECTORY);
  } catch (e) {
    throw explain(e, root, 'dir');
  }
  if (!sub) return { root: rootFd, dir: rootFd, at: (n) => (PROC_FD ? `/proc/self/fd/${rootFd}/${n}` : join(root, n)) };
  const subShown = join(root, sub);
  const subPath = PROC_FD ? `/proc/self/fd/${rootFd}/${sub}` : subShown;
  try {
    if (create) {
      try {
        fsSync.mkdirSync(subPath, { mode: 0o755 });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw explain(e, subShown, 'dir');
      }
    }
    let dirFd: number;
    try {
      dirFd = fsSync.openSync(subPath, fsc.O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (e) {
      let link = false;
      try {
        link = fsSync.lstatSync(subPath).isSymbolicLink();
      } catch {
        /* gone */
      }
      throw explain(link ? Object.assign(new Error('link'), { code: 'ELOOP' }) : e, subShown, 'dir');
    }
    return { root: rootFd, dir: dirFd, at: (n) => (PROC_FD ? `/proc/self/fd/${dirFd}/${n}` : join(subShown, n)) };
  } catch (e) {
    fsSync.closeSync(rootFd);
    throw e;
  }
}

/**
 * Synchronous writeOwn for the supervisor's state files. mode 'open-append' returns an open fd for
 * appending (the caller closes it): the supervisor keeps its log open for the whole run.
 */
export function ownWriteLocalSync(root: string, rel: string, data: string | Buffer, mode: OwnWriteMode): void {
  const fd = ownOpenLocalSync(root, rel, mode === 'replace' ? 'replace' : mode, data);
  if (fd !== null) fsSync.closeSync(fd);
}

/** Opens nsa-top's own file for appending and returns the fd (kept open by the caller). */
export function ownOpenAppendLocalSync(root: string, rel: string): number {
  return ownOpenLocalSync(root, rel, 'append', null)!;
}

function ownOpenLocalSync(root: string, rel: string, mode: OwnWriteMode, data: string | Buffer | null): number | null {
  const [sub, name] = splitOwnRel(rel);
  const shown = join(root, rel);
  const buf = data === null ? null : typeof data === 'string' ? Buffer.from(data) : data;
  const d = openDirsSync(root, sub);
  try {
    if (mode === 'replace') {
      const tmp = tmpName(name);
      let fd: number;
      try {
        fd = fsSync.openSync(d.at(tmp), fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | O_NOFOLLOW, 0o644);
      } catch (e) {
        throw explain(e, join(root, sub ?? '', tmp), 'file');
      }
      try {
        if (buf) writeAllSync(fd, buf);
        fsSync.closeSync(fd);
        fsSync.renameSync(d.at(tmp), d.at(name));
      } catch (e) {
        try {
          fsSync.closeSync(fd);
        } catch {
          /* closed already */
        }
        try {
          fsSync.unlinkSync(d.at(tmp));
        } catch {
          /* not there */
        }
        throw explain(e, shown, 'file');
      }
      return null;
    }
    let fd: number;
    try {
      fd = fsSync.openSync(
        d.at(name),
        fsc.O_WRONLY | fsc.O_CREAT | O_NOFOLLOW | O_NONBLOCK | (mode === 'append' ? fsc.O_APPEND : fsc.O_EXCL),
        0o644,
      );
    } catch (e) {
      throw explain(e, shown, 'file');
    }
    try {
      const st = fsSync.fstatSync(fd);
      if (!st.isFile()) throw ownError('EFTYPE', shown, 'is not a regular file: refused');
      const why = mode === 'append' ? appendSuspect(st, fsSync.fstatSync(d.dir).dev) : null;
      if (why) {
        fsSync.closeSync(fd);
        fd = -1;
        const done = setAsideSync(d.at, name, shown, why, st);
        try {
          fd = fsSync.openSync(d.at(name), APPEND_FRESH, 0o644);
        } catch (e) {
          // another writer made the fresh file first: append to it, checked like any other
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw explain(e, shown, 'file');
          try {
            fd = fsSync.openSync(d.at(name), APPEND_FLAGS, 0o644);
          } catch (e2) {
            throw explain(e2, shown, 'file');
          }
        }
        const again = appendSuspect(fsSync.fstatSync(fd), fsSync.fstatSync(d.dir).dev);
        if (again) throw ownError('ESUSPECT', shown, `the fresh file ${again}: refused`);
        // these are text logs (the supervisor's, the agent's, a launch's train.log): the fresh one
        // says first why it is fresh, so whoever reads it finds the old one
        writeAllSync(fd, Buffer.from(`nsa-top: ${setAsideText(shown, done)}\n`));
      }
      if (buf) {
        try {
          writeAllSync(fd, buf);
        } catch (e) {
          throw Object.assign(explain(e, shown, 'file'), { partial: true });
        }
      }
    } catch (e) {
      if (fd >= 0) fsSync.closeSync(fd);
      throw e;
    }
    if (data === null) return fd;
    fsSync.closeSync(fd);
    return null;
  } finally {
    if (d.dir !== d.root) fsSync.closeSync(d.dir);
    fsSync.closeSync(d.root);
  }
}

export function ownRemoveLocalSync(root: string, rel: string): void {
  const [sub, name] = splitOwnRel(rel);
  const d = openDirsSync(root, sub, false);
  try {
    fsSync.unlinkSync(d.at(name));
  } catch (e) {
    throw explain(e, join(root, rel), 'file');
  } finally {
    if (d.dir !== d.root) fsSync.closeSync(d.dir);
    fsSync.closeSync(d.root);
  }
}
