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
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
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
