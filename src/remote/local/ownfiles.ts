// nsa-top's own files on this machine, never through a link (Host.writeOwn / removeOwn of
// LocalHost, and the supervisor's synchronous writes). The directory is opened once and every later
// name is resolved against that open directory (/proc/self/fd/N/name: the kernel's openat, reached
// from Node), so a link planted at `.nsa-top` or at the file itself is refused with ELOOP instead of
// being followed, and a directory swapped after the check cannot redirect the write. Where
// /proc/self/fd is missing (not Linux) the same checks run on paths (lstat + O_NOFOLLOW).
import * as fsSync from 'node:fs';
import { constants as fsc, existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { join } from 'node:path';
import type { OwnWriteMode } from '../host.js';

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
): Promise<void> {
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
      return;
    }
    const flags =
      fsc.O_WRONLY | fsc.O_CREAT | O_NOFOLLOW | O_NONBLOCK | (mode === 'append' ? fsc.O_APPEND : fsc.O_EXCL);
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(d.at(name), flags, fileMode);
    } catch (e) {
      throw explain(e, shown, 'file');
    }
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw ownError('EFTYPE', shown, 'is not a regular file: refused');
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
      if (!fsSync.fstatSync(fd).isFile()) throw ownError('EFTYPE', shown, 'is not a regular file: refused');
      if (buf) {
        try {
          writeAllSync(fd, buf);
        } catch (e) {
          throw Object.assign(explain(e, shown, 'file'), { partial: true });
        }
      }
    } catch (e) {
      fsSync.closeSync(fd);
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
