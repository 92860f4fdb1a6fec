// What find and ls print about files on the remote box, parsed: `find -printf '%i %y %s %T@ …'`
// lines where GNU find exists, `ls -lnai` lines elsewhere (used by the file operations and the
// watch loop alike).
import type { DirEntry, FileStat } from '../host.js';

export function modeOf(type: string, perm: string): number {
  const p = parseInt(perm, 8) || 0;
  return (type === 'd' ? 0o040000 : type === 'f' ? 0o100000 : type === 'l' ? 0o120000 : 0) | p;
}

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

/** `ls -lnai` line → entry (the fallback without GNU find; mtime has minute resolution). */
export function parseLsLine(line: string, nowMs: number): DirEntry | null {
  const m = /^\s*(\d+)\s+([-dlcbps])\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(\w{3})\s+(\d+)\s+(\d+:\d+|\d{4})\s(.*)$/.exec(
    line,
  );
  if (!m) return null;
  const name = m[7]!;
  if (name === '.' || name === '..') return null;
  const mon = MONTHS[m[4]!] ?? 0;
  const day = Number(m[5]);
  let mtimeMs: number;
  if (m[6]!.includes(':')) {
    const [hh, mm] = m[6]!.split(':').map(Number);
    const y = new Date(nowMs).getUTCFullYear();
    mtimeMs = Date.UTC(y, mon, day, hh, mm);
    if (mtimeMs > nowMs + 86400000) mtimeMs = Date.UTC(y - 1, mon, day, hh, mm);
  } else mtimeMs = Date.UTC(Number(m[6]), mon, day);
  return { name, isDir: m[2] === 'd', isFile: m[2] === '-', size: Number(m[3]), mtimeMs, ino: Number(m[1]) };
}

/** GNU find's %T@ (`sec.nanoseconds`) → ms exactly as Node computes Stats.mtimeMs. */
export function findTimeMs(t: string): number {
  const [sec, frac = ''] = t.split('.');
  const ns = Number(`${frac}000000000`.slice(0, 9));
  return Number(sec) * 1e3 + ns / 1e6;
}

export function parseFindEntry(rest: string): DirEntry | null {
  // INO TYPE SIZE MTIME NAME
  const m = /^(\d+) (\S) (\d+) ([\d.]+) (.*)$/.exec(rest);
  if (!m) return null;
  return {
    name: m[5]!,
    isDir: m[2] === 'd',
    isFile: m[2] === 'f',
    size: Number(m[3]),
    mtimeMs: findTimeMs(m[4]!),
    ino: Number(m[1]),
  };
}

/** find's %y (or the ls fallback's d/f/o) of something that is not a regular file → the error naming it */
export function notRegularType(type: string | undefined): string | undefined {
  if (type === 'f') return undefined;
  // the watch loop's `u`: a regular file this user may not read (never read as zeros)
  if (type === 'u') return 'EACCES: permission denied';
  const what =
    type === 'd'
      ? 'a directory'
      : type === 'p'
        ? 'a FIFO'
        : type === 's'
          ? 'a socket'
          : type === 'c'
            ? 'a character device'
            : type === 'b'
              ? 'a block device'
              : type === 'l' || type === 'L'
                ? 'a dangling or looping link'
                : 'not a regular file';
  return `not a regular file (${what}): not read`;
}

/** A FileStat from find's fields (inode, %y type, size, %T@ mtime, %m permissions). */
export function statOf(
  ino: string | undefined,
  type: string | undefined,
  size: string | undefined,
  mtime: string | undefined,
  perm: string | undefined,
): FileStat {
  return {
    ino: Number(ino),
    size: Number(size),
    mtimeMs: findTimeMs(mtime ?? '0'),
    isDir: type === 'd',
    isFile: type === 'f',
    mode: modeOf(type ?? '', perm ?? '0'),
  };
}

/** Entries in name order (byte order, as LocalHost lists them). */
export function sortByName(entries: DirEntry[]): DirEntry[] {
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
