// TensorBoard scalars like the real trainer's (contract §1.15): <out>/tb/events.out.tfevents.*, tags
// train/loss, train/toks_per_s, train/lr on log steps, rank 0, unless NSA_TB_DISABLE=1. TFRecord
// framing (u64 length, masked CRC-32C of it, data, masked CRC-32C of data) around tensorflow.Event
// protobufs, hand-encoded: wall_time (1, double), step (2, varint), file_version (3), summary (5) →
// value (1) → tag (1), simple_value (2, float).
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { appendLog } from './writers.js';

const CRC32C = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

function maskedCrc(b: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC32C[(c ^ b[i]!) & 0xff]! ^ (c >>> 8);
  c = (c ^ 0xffffffff) >>> 0;
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

function varint(n: number): number[] {
  const out: number[] = [];
  let v = Math.max(0, Math.floor(n));
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

function field(num: number, wire: number): number[] {
  return varint(num * 8 + wire);
}

function bytesField(num: number, data: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([...field(num, 2), ...varint(data.length)]), data]);
}

function eventHead(wallTimeS: number): Buffer {
  const b = Buffer.alloc(9);
  b[0] = 0x09; // field 1, 64-bit
  b.writeDoubleLE(wallTimeS, 1);
  return b;
}

export function frame(data: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt32LE(data.length >>> 0, 0);
  head.writeUInt32LE(Math.floor(data.length / 2 ** 32), 4);
  head.writeUInt32LE(maskedCrc(head.subarray(0, 8)), 8);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(maskedCrc(data), 0);
  return Buffer.concat([head, data, tail]);
}

export function scalarEvent(wallTimeS: number, step: number, scalars: { tag: string; value: number }[]): Buffer {
  const values = scalars.map((s) => {
    const f = Buffer.alloc(5);
    f[0] = 0x15; // field 2, 32-bit
    f.writeFloatLE(s.value, 1);
    return bytesField(1, Buffer.concat([bytesField(1, Buffer.from(s.tag, 'utf8')), f]));
  });
  return Buffer.concat([
    eventHead(wallTimeS),
    Buffer.from([...field(2, 0), ...varint(step)]),
    bytesField(5, Buffer.concat(values)),
  ]);
}

export class TbWriter {
  readonly path: string;
  constructor(outDir: string) {
    const dir = join(outDir, 'tb');
    mkdirSync(dir, { recursive: true });
    const now = Date.now() / 1000;
    this.path = join(dir, `events.out.tfevents.${Math.floor(now)}.${hostname()}.${process.pid}.0`);
    appendLog(this.path, frame(Buffer.concat([eventHead(now), bytesField(3, Buffer.from('brain.Event:2', 'utf8'))])));
  }
  scalars(step: number, values: { tag: string; value: number }[]): void {
    appendLog(this.path, frame(scalarEvent(Date.now() / 1000, step, values)));
  }
}
