// A gzip'd ustar archive built in memory, for `nsa-top bundle`. Written here (about 50 lines) rather
// than taken from npm: `tar` and `tar-stream` read and write file systems and streams (and bring
// 5–6 packages), while the bundle needs the opposite — entries it has already read through a Host
// (never a path tar could follow), counted against a size cap before a byte is written. Only what
// the bundle makes: regular files, names of at most 100 bytes, mode 0600, no links, no directories
// (every tar creates the folders of a name on extraction).
import { gzipSync } from 'node:zlib';

export interface TarEntry {
  /** a relative path of [A-Za-z0-9._/-] (see `safeName`), at most 100 bytes */
  name: string;
  data: Buffer;
  mtimeMs: number;
}

/** A name an archive may hold: no leading slash, no `..`, nothing but [A-Za-z0-9._/-], ≤ 100 bytes. */
export function safeName(name: string): string {
  const parts = name
    .split('/')
    .map((p) => p.replace(/[^A-Za-z0-9._-]/g, '_'))
    .filter((p) => p !== '' && p !== '.' && p !== '..');
  let out = parts.join('/') || 'unnamed';
  if (out.length > 100) out = out.slice(0, 50) + '~' + out.slice(-49);
  return out;
}

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(e: TarEntry): Buffer {
  const h = Buffer.alloc(512, 0);
  h.write(e.name, 0, 100, 'utf8');
  h.write(octal(0o600, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid
  h.write(octal(0, 8), 116, 'ascii'); // gid
  h.write(octal(e.data.length, 12), 124, 'ascii');
  h.write(octal(Math.max(0, Math.floor(e.mtimeMs / 1000)), 12), 136, 'ascii');
  h.write('        ', 148, 'ascii'); // the checksum counts itself as spaces
  h.write('0', 156, 'ascii'); // a regular file
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + ' ', 148, 'ascii');
  return h;
}

/** The uncompressed size of an archive of entries with these data lengths. */
export function tarSize(lengths: readonly number[]): number {
  return lengths.reduce((n, l) => n + 512 + Math.ceil(l / 512) * 512, 0) + 1024;
}

/** The archive, gzip'd. */
export function tarGz(entries: readonly TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    if (Buffer.byteLength(e.name) > 100) throw new Error(`tar: name over 100 bytes: ${e.name}`);
    parts.push(header(e), e.data);
    const pad = (512 - (e.data.length % 512)) % 512;
    if (pad) parts.push(Buffer.alloc(pad, 0));
  }
  parts.push(Buffer.alloc(1024, 0));
  return gzipSync(Buffer.concat(parts), { level: 6 });
}
