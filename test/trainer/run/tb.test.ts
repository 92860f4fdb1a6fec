// TensorBoard event files: written here with a tiny encoder (CRCs included), decoded by tb.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import {
  crc32c,
  decodeEvent,
  encodeFileVersionEvent,
  encodeScalarEvent,
  frameRecord,
  maskedCrc32c,
  TfRecordReader,
  type TbEvent,
} from '../../../src/trainer/run/readers/tb.js';
import { hbLine, RefusingHost, tempDir } from './helpers.js';

const T0 = 1_800_000_000;

test('crc32c matches the published check value', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(Buffer.alloc(32)), 0x8a9136aa);
  // masking is a rotation plus a constant
  const c = crc32c(Buffer.from('abc'));
  assert.equal(maskedCrc32c(Buffer.from('abc')), ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0);
});

// An encoder written here independently of src/trainer/run/readers/tb.ts, so a symmetric bug in the module's
// own encoder/decoder pair cannot hide: protobuf by hand, CRC32C bit by bit.
function crcBitwise(buf: Buffer): number {
  let c = 0xffffffff;
  for (const byte of buf) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}
function masked(buf: Buffer): number {
  const c = crcBitwise(buf);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

// crc32c checks a record's data in WebAssembly (16 B .. 1 MiB) and anything else in JavaScript: both
// agree with the bit-by-bit CRC, at every length, at any offset into a buffer, after the module's
// memory has grown, and where the engine has no WebAssembly (node --jitless).
test('crc32c: the WebAssembly and JavaScript paths agree with a bitwise CRC', async () => {
  const { randomBytes } = await import('node:crypto');
  const big = randomBytes(1024 * 1024 + 64);
  for (const n of [0, 1, 7, 15, 16, 17, 100, 1000, 65_000, 200_000, 1024 * 1024, 1024 * 1024 + 1]) {
    const at = n % 13;
    assert.equal(crc32c(big, at, at + n), crcBitwise(big.subarray(at, at + n)), `length ${n} at ${at}`);
  }
  // and back to a small one after the memory grew: the table is still there
  assert.equal(crc32c(Buffer.from('123456789abcdefgh')), crcBitwise(Buffer.from('123456789abcdefgh')));
  const { execFileSync } = await import('node:child_process');
  const src = new URL('../../../src/trainer/run/readers/tb.ts', import.meta.url).href;
  const out = execFileSync(
    process.execPath,
    [
      '--jitless',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import { crc32c } from ${JSON.stringify(src)}; console.log(typeof WebAssembly, crc32c(Buffer.from('123456789').subarray(0), 0, 9), crc32c(Buffer.alloc(64, 7)))`,
    ],
    { encoding: 'utf8' },
  ).trim();
  assert.equal(out, `undefined ${0xe3069283} ${crcBitwise(Buffer.alloc(64, 7))}`);
});

function vint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
function ld(field: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([...vint((field << 3) | 2), ...vint(body.length)]), body]);
}
/** Event{wall_time, step, summary{value{tag, tensor{dtype=DT_FLOAT, float_val}}}} — the newer writers' form */
function tensorEvent(wall: number, step: number, tag: string, v: number): Buffer {
  const wt = Buffer.alloc(8);
  wt.writeDoubleLE(wall);
  const f = Buffer.alloc(4);
  f.writeFloatLE(v);
  const tensor = Buffer.concat([Buffer.from([(1 << 3) | 0, 1]), Buffer.from([(5 << 3) | 5]), f]);
  const value = Buffer.concat([ld(1, Buffer.from(tag)), ld(8, tensor)]);
  return Buffer.concat([
    Buffer.from([(1 << 3) | 1]),
    wt,
    Buffer.from([(2 << 3) | 0, ...vint(step)]),
    ld(5, ld(1, value)),
  ]);
}
function frame(data: Buffer): Buffer {
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(data.length));
  const c1 = Buffer.alloc(4);
  c1.writeUInt32LE(masked(len));
  const c2 = Buffer.alloc(4);
  c2.writeUInt32LE(masked(data));
  return Buffer.concat([len, c1, data, c2]);
}

test('records from an independent encoder (tensor-valued scalars, bitwise CRC) decode', () => {
  const bytes = Buffer.concat([
    frame(tensorEvent(T0 + 1, 7, 'train/loss', 3.25)),
    frame(tensorEvent(T0 + 2, 300, 'train/lr', 0.5)),
  ]);
  const r = new TfRecordReader();
  const got: TbEvent[] = [];
  r.push(bytes, (e) => got.push(e));
  assert.equal(r.errors, 0, r.lastError ?? '');
  assert.deepEqual(
    got.map((e) => [e.step, e.wallTime, e.scalars[0]?.tag, e.scalars[0]?.value]),
    [
      [7, T0 + 1, 'train/loss', 3.25],
      [300, T0 + 2, 'train/lr', 0.5],
    ],
  );
  // and the module's own framing agrees byte for byte with this one
  assert.deepEqual(frameRecord(Buffer.from('abc')), frame(Buffer.from('abc')));
});

test('an Event with scalars round-trips through the framing and the decoder', () => {
  const ev = encodeScalarEvent(T0 + 0.5, 1234567, [
    { tag: 'train/loss', value: 2.5 },
    { tag: 'train/lr', value: 0.000125 },
  ]);
  const d = decodeEvent(ev);
  assert.equal(d.wallTime, T0 + 0.5);
  assert.equal(d.step, 1234567);
  assert.deepEqual(
    d.scalars.map((s) => s.tag),
    ['train/loss', 'train/lr'],
  );
  assert.equal(d.scalars[0]!.value, 2.5);
  assert.ok(Math.abs(d.scalars[1]!.value - 0.000125) < 1e-9);
});

test('records split across reads are held back; a corrupted record is counted and skipped, not fatal', () => {
  const frames = [frameRecord(encodeFileVersionEvent(T0))];
  for (let i = 1; i <= 5; i++)
    frames.push(frameRecord(encodeScalarEvent(T0 + i, i, [{ tag: 'train/loss', value: 10 - i }])));
  // corrupt one data byte of record 3 (its data CRC fails) and the length CRC of record 5
  const bad3 = Buffer.from(frames[3]!);
  bad3[14] = bad3[14]! ^ 0xff;
  frames[3] = bad3;
  const bad5 = Buffer.from(frames[5]!);
  bad5[9] = bad5[9]! ^ 0x55;
  frames[5] = bad5;
  const all = Buffer.concat([...frames, frameRecord(encodeScalarEvent(T0 + 6, 6, [{ tag: 'train/loss', value: 4 }]))]);
  const r = new TfRecordReader();
  const got: TbEvent[] = [];
  // feed in awkward pieces
  for (let i = 0; i < all.length; i += 7) r.push(all.subarray(i, Math.min(all.length, i + 7)), (e) => got.push(e));
  assert.deepEqual(
    got.filter((e) => e.scalars.length).map((e) => e.step),
    [1, 2, 4, 6],
    'records 3 (bad data CRC) and 5 (bad length CRC) skipped; 6 found again after resync',
  );
  assert.equal(r.errors, 2);
  assert.equal(r.held, 0);
});

test('a run with CSV off: loss, tok/s and lr series come from tb/ and the heartbeat', async () => {
  const t = tempDir();
  try {
    mkdirSync(join(t.dir, 'tb'));
    const ev = join(t.dir, 'tb', 'events.out.tfevents.1800000000.box.123.0');
    let hb = hbLine({ ts: T0, msg: 'boot' });
    const frames = [frameRecord(encodeFileVersionEvent(T0))];
    for (let i = 1; i <= 10; i++) {
      frames.push(
        frameRecord(
          encodeScalarEvent(T0 + i, i, [
            { tag: 'train/loss', value: 6 - i / 10 },
            { tag: 'train/toks_per_s', value: 1000 + i },
            { tag: 'train/lr', value: 1e-4 * i },
          ]),
        ),
      );
      hb +=
        hbLine({ ts: T0 + i, step: i, msg: 'progress', loss: 6 - i / 10, toks_per_s: 1000 + i }) +
        hbLine({ ts: T0 + i, step: i, msg: 'step_end' });
    }
    const bytes = Buffer.concat(frames);
    const cut = bytes.length - 10; // the last record arrives later
    writeFileSync(ev, bytes.subarray(0, cut));
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hb);
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.seriesSource.loss, 'tb');
    assert.equal(s.seriesSource.lr, 'tb');
    assert.equal(s.series.loss.recent.length, 9);
    assert.equal(s.tb.files, 1);
    assert.equal(s.tb.lastStep, 9);
    appendFileSync(ev, bytes.subarray(cut));
    s = await m.poll();
    assert.equal(s.series.loss.recent.length, 10);
    assert.equal(s.series.lr.recent.length, 10);
    assert.ok(Math.abs(s.lr! - 1e-3) < 1e-9, `lr ${s.lr}`);
    assert.equal(s.step, 10);
    assert.ok(Math.abs(s.loss! - 5) < 1e-9);
    assert.equal(s.files['tb/events.out.tfevents.1800000000.box.123.0']!.parseErrors, 0);
    assert.equal(s.files['tb/events.out.tfevents.1800000000.box.123.0']!.records, 11);

    // garbage appended to the event file is counted, never fatal
    appendFileSync(ev, Buffer.from('garbage garbage garbage garbage'));
    appendFileSync(ev, frameRecord(encodeScalarEvent(T0 + 11, 11, [{ tag: 'train/loss', value: 4.8 }])));
    s = await m.poll();
    assert.equal(s.files['tb/events.out.tfevents.1800000000.box.123.0']!.parseErrors, 1);
    assert.equal(s.tb.lastStep, 11);
  } finally {
    t.done();
  }
});

test("a long run's TB events, read 4 MiB a poll from their start, stand for nothing until read to the end: the heartbeat's series and values are shown, backfill says TB is left", async () => {
  const t = tempDir();
  try {
    mkdirSync(join(t.dir, 'tb'));
    const N = 70_000;
    const frames = [frameRecord(encodeFileVersionEvent(T0))];
    for (let i = 1; i <= N; i++)
      frames.push(
        frameRecord(
          encodeScalarEvent(T0 + i, i, [
            { tag: 'train/loss', value: 6 - i / 100_000 },
            { tag: 'train/toks_per_s', value: 1000 },
            { tag: 'train/lr', value: 2e-4 },
          ]),
        ),
      );
    const bytes = Buffer.concat(frames);
    assert.ok(bytes.length > 4 * 1024 * 1024 + 1024 * 1024, `${bytes.length} bytes: more than a poll reads`);
    writeFileSync(join(t.dir, 'tb', 'events.out.tfevents.1800000000.box.123.0'), bytes);
    let hb = hbLine({ ts: T0, msg: 'boot' });
    for (let i = N - 20; i <= N; i++)
      hb += hbLine({ ts: T0 + i, step: i, msg: 'progress', loss: 6 - i / 100_000, toks_per_s: 1000 });
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hb);
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.step, N);
    assert.equal(s.seriesSource.loss, 'heartbeat', 'not the first 4 MiB of TB (steps from the run start)');
    assert.equal(s.series.loss.recent.at(-1)!.step, N);
    assert.equal(s.lr, null, 'no lr from hours ago');
    assert.equal(s.backfill.pending, true);
    assert.ok(s.backfill.bytesLeft > 0 && s.backfill.bytesLeft < bytes.length);
    for (let i = 0; i < 5 && s.backfill.pending; i++) s = await m.poll();
    assert.equal(s.backfill.pending, false);
    assert.equal(s.seriesSource.loss, 'tb');
    assert.equal(s.series.loss.recent.at(-1)!.step, N);
    assert.equal(s.series.loss.total, N);
    assert.ok(Math.abs(s.lr! - 2e-4) < 1e-9);
  } finally {
    t.done();
  }
});

test('an event file that cannot be read is not waited for: no backfill pending, the heartbeat stands in', async () => {
  const t = tempDir();
  try {
    mkdirSync(join(t.dir, 'tb'));
    writeFileSync(
      join(t.dir, 'tb', 'events.out.tfevents.1800000000.box.123.0'),
      Buffer.concat([
        frameRecord(encodeFileVersionEvent(T0)),
        frameRecord(encodeScalarEvent(T0 + 1, 1, [{ tag: 'train/loss', value: 5 }])),
      ]),
    );
    writeFileSync(
      join(t.dir, 'heartbeat_rank0.jsonl'),
      hbLine({ ts: T0, msg: 'boot' }) + hbLine({ ts: T0 + 1, step: 1, msg: 'progress', loss: 5 }),
    );
    const s = await new RunModel(new RefusingHost((p) => p.includes('tfevents')), t.dir).poll();
    assert.equal(s.files['tb/events.out.tfevents.1800000000.box.123.0']!.lastError, 'EACCES: permission denied');
    assert.equal(s.backfill.pending, false);
    assert.equal(s.seriesSource.loss, 'heartbeat');
  } finally {
    t.done();
  }
});

test('several event files (a resumed run) are read in order, one segment each, never interleaved', async () => {
  const t = tempDir();
  try {
    mkdirSync(join(t.dir, 'tb'));
    // the older file is bigger than one poll's read, the newer one small
    const old: Buffer[] = [frameRecord(encodeFileVersionEvent(T0))];
    for (let i = 1; i <= 60_000; i++)
      old.push(
        frameRecord(
          encodeScalarEvent(T0 + i, i, [
            { tag: 'train/loss', value: 6 },
            { tag: 'train/toks_per_s', value: 100 },
            { tag: 'train/lr', value: 1e-4 },
          ]),
        ),
      );
    writeFileSync(join(t.dir, 'tb', 'events.out.tfevents.1800000000.box.1.0'), Buffer.concat(old));
    const young: Buffer[] = [frameRecord(encodeFileVersionEvent(T0 + 90_000))];
    for (let i = 1; i <= 5; i++)
      young.push(frameRecord(encodeScalarEvent(T0 + 90_000 + i, i, [{ tag: 'train/loss', value: 3 }])));
    writeFileSync(join(t.dir, 'tb', 'events.out.tfevents.1800090000.box.2.0'), Buffer.concat(young));
    const m = new RunModel(new LocalHost(), t.dir, { recentWindow: 100 });
    let s = await m.poll();
    for (let i = 0; i < 10; i++) s = await m.poll();
    assert.ok(Buffer.concat(old).length > 4 * 1024 * 1024, 'the old file needs more than one read');
    assert.equal(s.series.loss.total, 60_005);
    assert.deepEqual(
      s.series.loss.recent.slice(-7).map((p) => [p.step, p.value, p.segment]),
      [
        [59_999, 6, 0],
        [60_000, 6, 0],
        [1, 3, 1],
        [2, 3, 1],
        [3, 3, 1],
        [4, 3, 1],
        [5, 3, 1],
      ],
    );
    assert.ok(
      s.series.loss.history.every((b) => b.segment === 0 && b.max === 6),
      'older history is the old file only',
    );
    assert.equal(s.tb.lastStep, 5);
    assert.equal(s.loss, 3);
  } finally {
    t.done();
  }
});
