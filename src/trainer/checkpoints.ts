// Which checkpoint can a run resume from? The newest COMPLETE one, by step number (not mtime —
// the real launcher's `ls -t` picks a half-written file as happily as a good one):
//  - its size is stable across two stats about a second apart (or it is a few seconds old), and
//  - it is readable: a torch zip (.pt) has its end-of-central-directory record (PK\x05\x06) in the
//    last 64 KiB; nsa-top's reference trainer ends every checkpoint with a u32 CRC and the ASCII
//    trailer "NSACKEND".
// A skipped file is named with the reason in `why`.
import { basename, join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { Host } from '../remote/host.js';

export interface CompleteCheckpoint {
  path: string;
  step: number;
  /** files newer by step that were skipped, and why */
  why: string[];
}

export const CKPT_RE = /^checkpoint_(fsdp_)?step(\d+)(\.[A-Za-z0-9]+)?$/;
const TRAILER = Buffer.from('NSACKEND', 'ascii');
const EOCD = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const TAIL = 64 * 1024 + 22;
const REF_MAGIC = Buffer.from('NSATOPCK', 'ascii');
const CRC_CHECK_MAX = 64 * 1024 * 1024;

export interface CheckpointCheckOptions {
  /** a file not modified for this long counts as settled without a second stat (default 5000) */
  settledMs?: number;
  /** wait between the two stats otherwise (default 1000) */
  stableWaitMs?: number;
}

/** A real end-of-central-directory record ends the file exactly (22 bytes + its comment). */
function hasEocd(tail: Buffer): boolean {
  for (let i = tail.lastIndexOf(EOCD); i >= 0; i = i > 0 ? tail.lastIndexOf(EOCD, i - 1) : -1) {
    if (i + 22 <= tail.length && i + 22 + tail.readUInt16LE(i + 20) === tail.length) return true;
  }
  return false;
}

/** Reads the tail and says whether the file is structurally complete; null = fine. */
export async function checkpointTailProblem(host: Host, path: string, size: number): Promise<string | null> {
  if (size === 0) return 'empty file';
  const start = Math.max(0, size - TAIL);
  const tail = await host.readRange(path, start, size);
  if (tail.length < Math.min(size, TAIL)) return `short read (${tail.length} of ${Math.min(size, TAIL)} bytes)`;
  if (tail.length >= TRAILER.length + 4 && tail.subarray(tail.length - TRAILER.length).equals(TRAILER)) {
    // nsa-top reference format: u32 LE CRC-32 of every byte before it, then the trailer.
    // Checked in full when small enough to read cheaply (the reference trainer's are ~1 MB).
    if (size > CRC_CHECK_MAX) return null;
    const all = size <= tail.length && start === 0 ? tail : await host.readRange(path, 0, size);
    if (all.length !== size) return `short read (${all.length} of ${size} bytes)`;
    const body = all.subarray(0, size - TRAILER.length - 4);
    const want = all.readUInt32LE(size - TRAILER.length - 4);
    return (crc32(body) >>> 0) === want ? null : 'CRC mismatch (corrupt or overwritten in place)';
  }
  if (hasEocd(tail)) return null;
  const head = await host.readRange(path, 0, Math.min(size, 8));
  if (head.subarray(0, 2).equals(Buffer.from('PK'))) return 'zip without its end-of-central-directory record in the last 64 KiB (still being written?)';
  if (head.subarray(0, 8).equals(REF_MAGIC)) return 'no NSACKEND trailer (still being written?)';
  // Legacy (non-zip) torch pickles cannot be checked structurally; size stability must do.
  if (head[0] === 0x80) return null;
  return 'neither a torch zip nor an nsa-top checkpoint (no end record, no NSACKEND trailer)';
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Every checkpoint_step*.* file in `dir`, newest step first. */
export async function listCheckpoints(host: Host, dir: string): Promise<{ name: string; path: string; step: number; size: number; mtimeMs: number }[]> {
  let entries;
  try {
    entries = await host.list(dir);
  } catch {
    return [];
  }
  const out = [];
  for (const e of entries) {
    if (!e.isFile) continue;
    const m = CKPT_RE.exec(e.name);
    if (!m) continue;
    out.push({ name: e.name, path: join(dir, e.name), step: Number(m[2]), size: e.size, mtimeMs: e.mtimeMs });
  }
  // newest step first; among equal steps (fsdp and plain) the newer file first
  return out.sort((a, b) => b.step - a.step || b.mtimeMs - a.mtimeMs);
}

export async function newestCompleteCheckpoint(host: Host, dir: string, opts: CheckpointCheckOptions = {}): Promise<CompleteCheckpoint | null> {
  return (await scanCheckpoints(host, dir, opts)).found;
}

/** Like newestCompleteCheckpoint, but also says why when none qualifies. */
export async function scanCheckpoints(host: Host, dir: string, opts: CheckpointCheckOptions = {}): Promise<{ found: CompleteCheckpoint | null; why: string[] }> {
  const settledMs = opts.settledMs ?? 5000;
  const stableWaitMs = opts.stableWaitMs ?? 1000;
  const why: string[] = [];
  const all = await listCheckpoints(host, dir);
  for (const c of all) {
    const name = basename(c.path);
    let st = await host.stat(c.path).catch(() => null);
    if (!st) {
      why.push(`${name}: vanished`);
      continue;
    }
    if (host.now() - st.mtimeMs < settledMs) {
      await sleep(stableWaitMs);
      const again = await host.stat(c.path).catch(() => null);
      if (!again) {
        why.push(`${name}: vanished`);
        continue;
      }
      if (again.size !== st.size || again.mtimeMs !== st.mtimeMs) {
        why.push(`${name}: still being written (size ${st.size} → ${again.size} bytes within ${(stableWaitMs / 1000).toFixed(1)} s)`);
        continue;
      }
      st = again;
    }
    let problem: string | null;
    try {
      problem = await checkpointTailProblem(host, c.path, st.size);
    } catch (e) {
      problem = `unreadable: ${(e as Error).message}`;
    }
    if (problem) {
      why.push(`${name}: skipped, ${problem}`);
      continue;
    }
    return { found: { path: c.path, step: c.step, why }, why };
  }
  return { found: null, why };
}
