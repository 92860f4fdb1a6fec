// The reference trainer's checkpoint format (named checkpoint_step{N}.pt like the real trainer's,
// but not a torch file):
//
//   "NSATOPCK" | u32 LE header length | header JSON (UTF-8, space-padded so tensors start 4-aligned)
//   | params f32 LE | AdamW m f32 LE | AdamW v f32 LE | u32 LE CRC32 of all bytes before it | "NSACKEND"
//
// Written to a temporary name in the same directory, fsynced, then renamed: a checkpoint never
// exists half-written under its final name. verifyCheckpoint() checks magic, trailer, length and CRC.
import { closeSync, fsyncSync, openSync, readdirSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunConfig } from './config.js';

export const CKPT_MAGIC = 'NSATOPCK';
export const CKPT_TRAILER = 'NSACKEND';
export const CKPT_FORMAT_VERSION = 1;

export interface CheckpointHeader {
  format: 'nsa-top-reference-checkpoint';
  version: number;
  step: number;
  time: string;
  config: RunConfig;
  world_size: number;
  /** data position after `step` steps */
  data: { cursor: number; epoch: number; lanes: number; train_bytes: number; source: string };
  rng: { seed: number };
  optimizer: { kind: 'adamw'; t: number };
  n_params: number;
  layout: { name: string; offset: number; size: number; shape: number[]; decay: boolean }[];
  sections: string[];
  /** loss of the last step, for information */
  loss_last: number | null;
}

export interface CheckpointData {
  header: CheckpointHeader;
  params: Float32Array;
  m: Float32Array;
  v: Float32Array;
}

let CRC_TABLE: Uint32Array | null = null;
function crcTable(): Uint32Array {
  if (CRC_TABLE) return CRC_TABLE;
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return (CRC_TABLE = t);
}

/** CRC-32 (IEEE), incremental: pass the previous value to continue. */
export function crc32(buf: Uint8Array, prev = 0): number {
  const t = crcTable();
  let c = (prev ^ 0xffffffff) >>> 0;
  for (let i = 0; i < buf.length; i++) c = t[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function f32bytes(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

export function checkpointName(step: number): string {
  return `checkpoint_step${step}.pt`;
}

/** Writes the checkpoint atomically (temp file, fsync, rename, fsync dir). Returns its path. */
export function writeCheckpoint(dir: string, data: CheckpointData): string {
  const finalPath = join(dir, checkpointName(data.header.step));
  const tmpPath = join(dir, `.${checkpointName(data.header.step)}.tmp-${process.pid}`);
  let json = JSON.stringify(data.header);
  const pre = 8 + 4;
  const jsonBytes0 = Buffer.byteLength(json, 'utf8');
  const pad = (4 - ((pre + jsonBytes0) % 4)) % 4;
  json += ' '.repeat(pad);
  const headerBytes = Buffer.from(json, 'utf8');
  const prefix = Buffer.alloc(pre);
  prefix.write(CKPT_MAGIC, 0, 'latin1');
  prefix.writeUInt32LE(headerBytes.length, 8);
  const parts = [prefix, headerBytes, f32bytes(data.params), f32bytes(data.m), f32bytes(data.v)];
  let crc = 0;
  for (const p of parts) crc = crc32(p, crc);
  const tail = Buffer.alloc(12);
  tail.writeUInt32LE(crc, 0);
  tail.write(CKPT_TRAILER, 4, 'latin1');
  parts.push(tail);
  const fd = openSync(tmpPath, 'w');
  let open = true;
  try {
    for (const p of parts) {
      let off = 0;
      while (off < p.length) off += writeSync(fd, p, off, p.length - off);
    }
    fsyncSync(fd);
    closeSync(fd);
    open = false;
    renameSync(tmpPath, finalPath);
  } catch (err) {
    if (open) closeSync(fd);
    try {
      unlinkSync(tmpPath);
    } catch {
      /* already gone */
    }
    throw err;
  }
  try {
    const dfd = openSync(dir, 'r');
    fsyncSync(dfd);
    closeSync(dfd);
  } catch {
    /* directory fsync is best effort */
  }
  return finalPath;
}

function parseBuffer(buf: Buffer): { ok: true; data: CheckpointData } | { ok: false; why: string; step?: number } {
  if (buf.length < 8 + 4 + 12) return { ok: false, why: `too short (${buf.length} bytes)` };
  if (buf.toString('latin1', 0, 8) !== CKPT_MAGIC)
    return { ok: false, why: 'not an nsa-top reference checkpoint (bad magic)' };
  const hlen = buf.readUInt32LE(8);
  if (12 + hlen > buf.length - 12) return { ok: false, why: 'truncated header' };
  let header: CheckpointHeader;
  try {
    header = JSON.parse(buf.toString('utf8', 12, 12 + hlen)) as CheckpointHeader;
  } catch {
    return { ok: false, why: 'header is not valid JSON' };
  }
  const step = typeof header.step === 'number' ? header.step : undefined;
  if (buf.toString('latin1', buf.length - 8) !== CKPT_TRAILER)
    return { ok: false, why: 'no end trailer (incomplete write)', step };
  const n = header.n_params;
  const expected = 12 + hlen + 3 * 4 * n + 12;
  if (!Number.isInteger(n) || expected !== buf.length)
    return { ok: false, why: `size ${buf.length} does not match header (expected ${expected})`, step };
  const crcStored = buf.readUInt32LE(buf.length - 12);
  const crc = crc32(buf.subarray(0, buf.length - 12));
  if (crc !== crcStored) return { ok: false, why: 'CRC mismatch (corrupt)', step };
  const base = 12 + hlen;
  const copy = (i: number): Float32Array => {
    const out = new Float32Array(n);
    new Uint8Array(out.buffer).set(buf.subarray(base + i * 4 * n, base + (i + 1) * 4 * n));
    return out;
  };
  return { ok: true, data: { header, params: copy(0), m: copy(1), v: copy(2) } };
}

export async function readCheckpoint(path: string): Promise<CheckpointData> {
  const buf = await readFile(path);
  const r = parseBuffer(buf);
  if (!r.ok) throw new Error(`checkpoint ${path}: ${r.why}`);
  return r.data;
}

/** Complete and intact? (magic, header, size, CRC, trailer). Never throws. */
export async function verifyCheckpoint(path: string): Promise<{ ok: boolean; step?: number; why?: string }> {
  let buf: Buffer;
  try {
    // Cheap pre-check of the trailer before reading everything.
    const fh = await open(path, 'r');
    try {
      const st = await fh.stat();
      if (st.size < 24) return { ok: false, why: `too short (${st.size} bytes)` };
      const tail = Buffer.alloc(8);
      await fh.read(tail, 0, 8, st.size - 8);
      if (tail.toString('latin1') !== CKPT_TRAILER) {
        const head = Buffer.alloc(8);
        await fh.read(head, 0, 8, 0);
        return {
          ok: false,
          why:
            head.toString('latin1') === CKPT_MAGIC
              ? 'no end trailer (incomplete write)'
              : 'not an nsa-top reference checkpoint (bad magic)',
        };
      }
    } finally {
      await fh.close();
    }
    buf = await readFile(path);
  } catch (err) {
    return { ok: false, why: (err as Error).message };
  }
  const r = parseBuffer(buf);
  if (!r.ok) return { ok: false, why: r.why, ...(r.step !== undefined ? { step: r.step } : {}) };
  return { ok: true, step: r.data.header.step };
}

/** checkpoint_step{N}.pt files in dir, highest step first. */
export function listCheckpoints(dir: string): { step: number; path: string }[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: { step: number; path: string }[] = [];
  for (const n of names) {
    const m = /^checkpoint_step(\d+)\.pt$/.exec(n);
    if (m) out.push({ step: Number(m[1]), path: join(dir, n) });
  }
  return out.sort((a, b) => b.step - a.step);
}

/** The newest checkpoint in dir that verifies; skipped ones are reported. */
export async function newestCompleteCheckpoint(
  dir: string,
): Promise<{ path: string | null; skipped: { path: string; why: string }[] }> {
  const skipped: { path: string; why: string }[] = [];
  for (const c of listCheckpoints(dir)) {
    const v = await verifyCheckpoint(c.path);
    if (v.ok) return { path: c.path, skipped };
    skipped.push({ path: c.path, why: v.why ?? 'invalid' });
  }
  return { path: null, skipped };
}
