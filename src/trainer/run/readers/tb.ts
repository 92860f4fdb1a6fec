// TensorBoard event files (tb/events.out.tfevents.*): TFRecord framing
//   uint64 length (LE) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// and a minimal protobuf decoder for tensorflow.Event → Summary → Value (simple_value, or a
// float/double TensorProto as newer writers emit). CRCs are checked; a corrupt record is counted
// and skipped (resynchronising on the next valid header), never fatal.

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

export function crc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  const n = end - start;
  const w = n >= WASM_CRC_MIN && n <= WASM_CRC_MAX ? wasmCrc() : null;
  if (w) {
    if (w.u8.length < TABLE_BYTES + n) {
      w.mem.grow(Math.ceil((TABLE_BYTES + n - w.u8.length) / 65536));
      w.u8 = new Uint8Array(w.mem.buffer);
    }
    w.u8.set(buf.subarray(start, end), TABLE_BYTES);
    return w.crc(TABLE_BYTES, TABLE_BYTES + n) >>> 0;
  }
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// The same loop in WebAssembly, for the records' data. A one-shot `status` runs its JavaScript in
// V8's interpreter and baseline tier (bin/nsa-top.js: no TurboFan), where the loop above costs
// 30-70 ns a byte: ~10 ms for a 150 KB event file. WebAssembly is compiled before it runs (~10 ns a
// byte with the copy in, ~0.7 ms to compile the first time). The module, 104 bytes, is assembled below:
//   (memory (export "m") 1)            ;; the table at 0..1023, the bytes to check from 1024
//   (func (export "crc") (param $p i32) (param $e i32) (result i32) (local $c i32)
//     c = -1; while (p < e) { c = table[(c ^ mem[p]) & 255] ^ (c >>> 8); p++ }; return ~c)
// Where WebAssembly is off (node --jitless), the loop above does it.
const TABLE_BYTES = 1024;
/** from 16 bytes the call and the copy beat the loop (no TurboFan: 0.3-0.6 µs against 0.8-1.6 µs);
 *  the 8-byte length CRCs stay in the loop; above the maximum the module's memory would stay large */
const WASM_CRC_MIN = 16;
const WASM_CRC_MAX = 1024 * 1024;

// lib "ES2023" without DOM carries no WebAssembly typings: the little used here (the reference
// trainer's kernels declare their own: it imports nothing outside itself)
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (mod: object) => { exports: unknown };
}
const WA = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;

interface WasmCrc {
  crc: (p: number, e: number) => number;
  mem: WasmMemory;
  u8: Uint8Array;
}
let wasmCrcState: WasmCrc | null | undefined;

function wasmCrc(): WasmCrc | null {
  if (wasmCrcState !== undefined) return wasmCrcState;
  wasmCrcState = null;
  if (!WA) return null;
  try {
    const { exports } = new WA.Instance(new WA.Module(crcModule()));
    const { m: mem, crc } = exports as { m: WasmMemory; crc: WasmCrc['crc'] };
    const dv = new DataView(mem.buffer);
    for (let i = 0; i < 256; i++) dv.setUint32(i * 4, CRC_TABLE[i]!, true);
    wasmCrcState = { crc, mem, u8: new Uint8Array(mem.buffer) };
  } catch {
    /* no WebAssembly here: the JavaScript loop */
  }
  return wasmCrcState;
}

function crcModule(): Uint8Array {
  // prettier-ignore
  const [block, loop, br, brIf, end, get, set, load, load8u, i32, geU, and, xor, shl, shrU, add, empty] =
    [0x02, 0x03, 0x0c, 0x0d, 0x0b, 0x20, 0x21, 0x28, 0x2d, 0x41, 0x4f, 0x71, 0x73, 0x74, 0x76, 0x6a, 0x40];
  const I32 = 0x7f;
  // prettier-ignore
  const body = [
    1, 1, I32, // one local, $c (locals 0 and 1 are $p and $e)
    i32, 0x7f, set, 2, // c = -1
    block, empty, loop, empty,
    get, 0, get, 1, geU, brIf, 1, // p >= e: out
    get, 2, get, 0, load8u, 0, 0, xor, i32, 0xff, 0x01, and, i32, 2, shl, load, 2, 0, // table[(c ^ mem[p]) & 255]
    get, 2, i32, 8, shrU, xor, set, 2, // ... ^ (c >>> 8)
    get, 0, i32, 1, add, set, 0, br, 0, // p++
    end, end,
    get, 2, i32, 0x7f, xor, end, // ~c
  ];
  const section = (id: number, bytes: number[]) => [id, bytes.length, ...bytes];
  // prettier-ignore
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0, // "\0asm", version 1
    ...section(1, [1, 0x60, 2, I32, I32, 1, I32]), // type 0: (i32, i32) -> i32
    ...section(3, [1, 0]), // function 0 has type 0
    ...section(5, [1, 0, 1]), // one memory, one page to start
    ...section(7, [2, 1, 0x6d, 2, 0, 3, 0x63, 0x72, 0x63, 0, 0]), // exports "m" (memory 0), "crc" (function 0)
    ...section(10, [1, body.length, ...body]),
  ]);
}

export function maskedCrc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  const c = crc32c(buf, start, end);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

export interface TbScalar {
  tag: string;
  step: number;
  /** ms epoch */
  wallTime: number;
  value: number;
}

export interface TbEvent {
  wallTime: number;
  step: number;
  fileVersion: string | null;
  scalars: { tag: string; value: number }[];
}

/** A TFRecord payload larger than this is treated as corrupt framing. */
export const MAX_RECORD = 16 * 1024 * 1024;

// ---- protobuf wire decoding (just what Event/Summary need) ----

class Pb {
  pos: number;
  constructor(
    readonly b: Buffer,
    start = 0,
    readonly end = b.length,
  ) {
    this.pos = start;
  }
  eof(): boolean {
    return this.pos >= this.end;
  }
  varint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const byte = this.b[this.pos++]!;
      result += (byte & 0x7f) * mul;
      if ((byte & 0x80) === 0) return result;
      mul *= 128;
    }
    throw new Error('varint too long');
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.need(8);
    else if (wire === 5) this.need(4);
    else if (wire === 2) this.need(this.varint());
    else throw new Error(`unsupported wire type ${wire}`);
  }
  need(n: number): number {
    const at = this.pos;
    if (n < 0 || at + n > this.end) throw new Error('truncated field');
    this.pos += n;
    return at;
  }
}

function decodeTensorFloat(b: Buffer, start: number, end: number): number | null {
  // TensorProto: dtype=1 (DT_FLOAT=1, DT_DOUBLE=2), tensor_content=4, float_val=5, double_val=6
  const p = new Pb(b, start, end);
  let dtype = 0;
  let value: number | null = null;
  let content: [number, number] | null = null;
  while (!p.eof()) {
    const key = p.varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (field === 1 && wire === 0) dtype = p.varint();
    else if (field === 4 && wire === 2) {
      const len = p.varint();
      content = [p.need(len), len];
    } else if (field === 5 && wire === 5) value = b.readFloatLE(p.need(4));
    else if (field === 5 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      if (len >= 4) value = b.readFloatLE(at);
    } else if (field === 6 && wire === 1) value = b.readDoubleLE(p.need(8));
    else if (field === 6 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      if (len >= 8) value = b.readDoubleLE(at);
    } else p.skip(wire);
  }
  if (value === null && content) {
    if (dtype === 1 && content[1] >= 4) value = b.readFloatLE(content[0]);
    else if (dtype === 2 && content[1] >= 8) value = b.readDoubleLE(content[0]);
  }
  return value;
}

function decodeValue(b: Buffer, start: number, end: number): { tag: string; value: number } | null {
  // Summary.Value: tag=1 (string), simple_value=2 (float), tensor=8 (TensorProto)
  const p = new Pb(b, start, end);
  let tag: string | null = null;
  let value: number | null = null;
  while (!p.eof()) {
    const key = p.varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (field === 1 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      tag = b.toString('utf8', at, at + len);
    } else if (field === 2 && wire === 5) value = b.readFloatLE(p.need(4));
    else if (field === 8 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      const v = decodeTensorFloat(b, at, at + len);
      if (v !== null) value = v;
    } else p.skip(wire);
  }
  return tag !== null && value !== null ? { tag, value } : null;
}

/** Decode one Event message. Throws on malformed protobuf. */
export function decodeEvent(b: Buffer, start = 0, end = b.length): TbEvent {
  const p = new Pb(b, start, end);
  const ev: TbEvent = { wallTime: 0, step: 0, fileVersion: null, scalars: [] };
  while (!p.eof()) {
    const key = p.varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (field === 1 && wire === 1) ev.wallTime = b.readDoubleLE(p.need(8));
    else if (field === 2 && wire === 0) ev.step = p.varint();
    else if (field === 3 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      ev.fileVersion = b.toString('utf8', at, at + len);
    } else if (field === 5 && wire === 2) {
      const len = p.varint();
      const at = p.need(len);
      // Summary: repeated Value value = 1
      const s = new Pb(b, at, at + len);
      while (!s.eof()) {
        const k = s.varint();
        if (Math.floor(k / 8) === 1 && (k & 7) === 2) {
          const l = s.varint();
          const a = s.need(l);
          const v = decodeValue(b, a, a + l);
          if (v) ev.scalars.push(v);
        } else s.skip(k & 7);
      }
    } else p.skip(wire);
  }
  return ev;
}

/**
 * Incremental TFRecord reader: feed bytes as they arrive; complete records are decoded, a partial
 * record at the end is held back. Corrupt framing is skipped byte by byte until a header whose
 * length CRC matches.
 */
export class TfRecordReader {
  private buf: Buffer = Buffer.alloc(0);
  records = 0;
  errors = 0;
  lastError: string | null = null;
  /** bytes consumed from the file (offset just past the last whole record handled) */
  consumed = 0;
  /** inside corrupt bytes, looking for the next valid header (one error per corrupt stretch) */
  private resyncing = false;

  get held(): number {
    return this.buf.length;
  }

  reset(): void {
    this.buf = Buffer.alloc(0);
    this.consumed = 0;
    this.resyncing = false;
  }

  push(data: Buffer, onEvent: (e: TbEvent) => void): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, data]) : data;
    let pos = 0;
    const b = this.buf;
    while (b.length - pos >= 12) {
      const lenLo = b.readUInt32LE(pos);
      const lenHi = b.readUInt32LE(pos + 4);
      const lenOk = maskedCrc32c(b, pos, pos + 8) === b.readUInt32LE(pos + 8);
      const len = lenHi * 0x100000000 + lenLo;
      if (!lenOk || len > MAX_RECORD) {
        if (!this.resyncing) {
          this.errors++;
          this.lastError = lenOk ? `record length ${len} too large` : 'bad length CRC';
          this.resyncing = true;
        }
        pos++;
        continue;
      }
      if (b.length - pos < 12 + len + 4) break; // wait for the rest
      this.resyncing = false;
      const dStart = pos + 12;
      const dEnd = dStart + len;
      if (maskedCrc32c(b, dStart, dEnd) !== b.readUInt32LE(dEnd)) {
        this.errors++;
        this.lastError = 'bad data CRC';
      } else {
        try {
          const ev = decodeEvent(b, dStart, dEnd);
          this.records++;
          onEvent(ev);
        } catch (e) {
          this.errors++;
          this.lastError = `bad event: ${(e as Error).message}`;
        }
      }
      pos = dEnd + 4;
    }
    this.consumed += pos;
    this.buf = pos >= b.length ? Buffer.alloc(0) : Buffer.from(b.subarray(pos));
  }
}

/** Encode one TFRecord frame (used by tests and the reference trainer). */
export function frameRecord(data: Buffer): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt32LE(data.length >>> 0, 0);
  head.writeUInt32LE(Math.floor(data.length / 0x100000000), 4);
  head.writeUInt32LE(maskedCrc32c(head, 0, 8), 8);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(maskedCrc32c(data), 0);
  return Buffer.concat([head, data, tail]);
}

// ---- a tiny Event encoder (scalars only): tests and the reference trainer write TB with it ----

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 128) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

function lenField(field: number, data: Buffer): Buffer {
  return Buffer.concat([varint(field * 8 + 2), varint(data.length), data]);
}

export function encodeScalarEvent(wallTimeS: number, step: number, scalars: { tag: string; value: number }[]): Buffer {
  const wt = Buffer.alloc(9);
  wt[0] = (1 << 3) | 1;
  wt.writeDoubleLE(wallTimeS, 1);
  const values = scalars.map((s) => {
    const f = Buffer.alloc(5);
    f[0] = (2 << 3) | 5;
    f.writeFloatLE(s.value, 1);
    return lenField(1, Buffer.concat([lenField(1, Buffer.from(s.tag, 'utf8')), f]));
  });
  return Buffer.concat([wt, varint((2 << 3) | 0), varint(step), lenField(5, Buffer.concat(values))]);
}

export function encodeFileVersionEvent(wallTimeS: number): Buffer {
  const wt = Buffer.alloc(9);
  wt[0] = (1 << 3) | 1;
  wt.writeDoubleLE(wallTimeS, 1);
  return Buffer.concat([wt, lenField(3, Buffer.from('brain.Event:2', 'utf8'))]);
}
