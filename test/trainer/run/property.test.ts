// Property tests over the parsers: arbitrary bytes never throw, chunking never changes what is
// read, and good records around garbage are all kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { LineSplitter } from '../../../src/lines.js';
import { parseHeartbeatLine } from '../../../src/trainer/run/readers/heartbeat.js';
import { HeartbeatRecordSchema } from './zod-schemas.js';
import { parseCsvLine } from '../../../src/trainer/run/readers/csv.js';
import { parseIntCell, parseNumCell, parseNumSpan } from '../../../src/trainer/run/readers/num.js';
import { parseStackDump } from '../../../src/trainer/run/readers/stackdump.js';
import { parseTrainerConfig } from '../../../src/trainer/run/readers/config.js';
import { parseEnvJson, parseMetricsJson } from '../../../src/trainer/run/readers/jsonfiles.js';
import { TfRecordReader } from '../../../src/trainer/run/readers/tb.js';
import { tempDir } from './helpers.js';

function splitAll(sp: LineSplitter, chunks: Uint8Array[]): { lines: string[]; errors: number } {
  const lines: string[] = [];
  let errors = 0;
  for (const c of chunks) sp.push(Buffer.from(c), { line: (l) => lines.push(l), error: () => errors++ });
  return { lines, errors };
}

test('line splitting: any bytes, any chunking, same lines as reading in one piece', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 600 }), fc.array(fc.nat({ max: 600 }), { maxLength: 8 }), (bytes, cuts) => {
      const chunks = cutAt(bytes, cuts);
      const whole = splitAll(new LineSplitter(64), [bytes]);
      const pieces = splitAll(new LineSplitter(64), chunks);
      assert.deepEqual(pieces, whole);
    }),
    { numRuns: 300 },
  );
});

/** The splitter as it was before its whole-lines path (a line's own view and decode): the reference. */
class LineByLine {
  private pending: Buffer[] = [];
  private pendingLen = 0;
  private skipping = false;
  constructor(readonly maxLine: number) {}
  private reset(): void {
    this.pending = [];
    this.pendingLen = 0;
    this.skipping = false;
  }
  push(data: Buffer, cb: { line(t: string): void; error(r: string): void }): void {
    let start = 0;
    while (start < data.length) {
      const nl = data.indexOf(10, start);
      if (nl === -1) {
        if (this.skipping) return;
        if (this.pendingLen + data.length - start > this.maxLine) {
          this.reset();
          this.skipping = true;
          cb.error(`line longer than ${this.maxLine} bytes dropped`);
          return;
        }
        this.pending.push(Buffer.from(data.subarray(start)));
        this.pendingLen += data.length - start;
        return;
      }
      if (this.skipping) {
        this.skipping = false;
        start = nl + 1;
        continue;
      }
      const piece = data.subarray(start, nl);
      start = nl + 1;
      if (this.pendingLen + piece.length > this.maxLine) {
        this.reset();
        cb.error(`line longer than ${this.maxLine} bytes dropped`);
        continue;
      }
      const buf = this.pendingLen ? Buffer.concat([...this.pending, piece]) : piece;
      this.pending = [];
      this.pendingLen = 0;
      let text = buf.toString('utf8');
      if (text.endsWith('\r')) text = text.slice(0, -1);
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      if (text.trim() !== '') cb.line(text);
    }
  }
}

function cutAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const pts = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let prev = 0;
  for (const p of pts) {
    chunks.push(bytes.subarray(prev, p));
    prev = p;
  }
  chunks.push(bytes.subarray(prev));
  return chunks;
}

function events(
  sp: { push(b: Buffer, cb: { line(t: string): void; error(r: string): void }): void },
  chunks: Uint8Array[],
) {
  const out: string[] = [];
  for (const c of chunks)
    sp.push(Buffer.from(c), { line: (l) => out.push(`line ${l}`), error: (r) => out.push(`error ${r}`) });
  return out;
}

test('line splitting: the whole-lines path gives what a line-by-line decode gives (CR, BOM, blank, caps, UTF-8 good and bad)', () => {
  const byte = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(10, 13, 32, 44, 48, 97) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) },
    { weight: 1, arbitrary: fc.constantFrom(0xef, 0xbb, 0xbf, 0xe2, 0x80, 0x91, 0xc3, 0xa9) },
  );
  const small = fc.array(byte, { maxLength: 2000 }).map((a) => Uint8Array.from(a));
  fc.assert(
    fc.property(
      small,
      fc.array(fc.nat({ max: 2000 }), { maxLength: 8 }),
      fc.constantFrom(8, 64, 1 << 20),
      (b, cuts, max) => {
        const chunks = cutAt(b, cuts);
        assert.deepEqual(events(new LineSplitter(max), chunks), events(new LineByLine(max), chunks));
      },
    ),
    { numRuns: 1500 },
  );
  // lines across the 16 KiB decode windows, longer than one, and multi-byte characters among plain
  // rows (more bytes than UTF-16 units: a cap of 8 must drop 'ééééé')
  const big = fc
    .array(
      fc.oneof(
        fc.constantFrom('1,5.1,2e-4,9000', 'x'.repeat(17_000), 'é‑ü', 'ééééé', '😀😀😀', '', '\r', '\ufeffa'),
        fc.string({ maxLength: 40 }),
      ),
      {
        maxLength: 300,
      },
    )
    .map((a) => Buffer.from(a.join('\n')));
  fc.assert(
    fc.property(
      big,
      fc.array(fc.nat({ max: 200_000 }), { maxLength: 4 }),
      fc.constantFrom(8, 64, 16_384, 20_000, 1 << 20),
      (b, cuts, max) => {
        const chunks = cutAt(b, cuts);
        assert.deepEqual(events(new LineSplitter(max), chunks), events(new LineByLine(max), chunks));
      },
    ),
    { numRuns: 150 },
  );
});

/** parseCsvLine as it was (split, trim, parseNumCell per cell): the reference */
function csvBySplit(text: string, n: number) {
  const cells = text.split(',');
  const first = cells[0]!.trim();
  if (/^["']?[A-Za-z_]/.test(first) && parseNumCell(first) === null) return { header: true };
  const step = parseIntCell(first);
  if (step === null) return { error: `bad step ${JSON.stringify(first.slice(0, 40))}` };
  if (cells.length < n + 1) return { error: `expected ${n + 1} columns, got ${cells.length}` };
  const values: (number | null)[] = [];
  for (let i = 1; i <= n; i++) {
    const v = parseNumCell(cells[i]!);
    if (v === null) return { error: `column ${i + 1} not a number: ${JSON.stringify(cells[i]!.trim().slice(0, 40))}` };
    values.push(v);
  }
  return { row: { step, values } };
}

test('numbers read in place (parseNumSpan, CSV rows) are exactly what parseNumCell reads from the cell', () => {
  const cell = fc.oneof(
    fc.double().map(String),
    fc.double().map((d) => d.toExponential(6)),
    fc.double({ min: -1e15, max: 1e15, noNaN: true }).map((d) => d.toFixed(6)),
    fc.integer().map(String),
    fc.string({
      unit: fc.constantFrom('0', '1', '9', '.', '-', '+', 'e', 'E', ' ', 'x', 'n', 'a', 'i', 'f'),
      maxLength: 12,
    }),
    fc.constantFrom(
      'nan',
      '-inf',
      '1e999',
      '-0',
      '5.',
      '.5',
      '00.5',
      '1e-22',
      '1e23',
      '123456789012345',
      '1234567890123456',
      '0x10',
      '-',
      '',
      ' 3 ',
      '1e+05',
      '2.000000e-4',
    ),
    fc.string({ maxLength: 8 }),
  );
  fc.assert(
    fc.property(cell, fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), (c, pre, post) => {
      assert.ok(Object.is(parseNumSpan(pre + c + post, pre.length, pre.length + c.length), parseNumCell(c)), c);
    }),
    { numRuns: 5000 },
  );
  const row = fc.array(cell, { maxLength: 6 }).map((a) => a.join(','));
  fc.assert(
    fc.property(row, fc.integer({ min: 1, max: 4 }), (text, n) =>
      assert.deepEqual(parseCsvLine(text, n), csvBySplit(text, n)),
    ),
    { numRuns: 5000 },
  );
});

test('parsers never throw on arbitrary input', () => {
  const text = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('utf8')),
    fc.json(),
  );
  fc.assert(
    fc.property(text, (s) => {
      parseHeartbeatLine(s);
      parseCsvLine(s, 3);
      parseStackDump(s);
      parseTrainerConfig(s);
      parseEnvJson(s);
      parseMetricsJson(s);
    }),
    { numRuns: 400 },
  );
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 200 }), { maxLength: 6 }), (chunks) => {
      const r = new TfRecordReader();
      for (const c of chunks) r.push(Buffer.from(c), () => {});
      assert.ok(r.held <= chunks.reduce((n, c) => n + c.length, 0));
    }),
    { numRuns: 300 },
  );
});

test('the hand-written heartbeat validation agrees with HeartbeatRecordSchema (zod)', () => {
  const field = fc.oneof(
    fc.integer({ min: -5, max: 5 }),
    fc.double(),
    fc.string({ maxLength: 5 }),
    fc.constant(null),
    fc.boolean(),
    fc.constant(undefined),
  );
  // mostly-valid records, so each rule gets exercised on its own
  const ts = fc.oneof(
    { weight: 5, arbitrary: fc.double({ min: 0, max: 2e9, noNaN: true }) },
    { weight: 1, arbitrary: field },
  );
  const msg = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom('progress', 'boot', 'x') },
    { weight: 1, arbitrary: field },
  );
  const int = fc.oneof({ weight: 3, arbitrary: fc.nat({ max: 1000 }) }, { weight: 2, arbitrary: field });
  fc.assert(
    fc.property(
      fc.record(
        { ts, msg, step: int, rank: int, pid: int, iso: fc.oneof(fc.string(), field), loss: field },
        { requiredKeys: ['ts', 'msg'] },
      ),
      (o) => {
        const text = JSON.stringify(o);
        const mine = parseHeartbeatLine(text).ok;
        const zod = HeartbeatRecordSchema.safeParse(JSON.parse(text)).success;
        assert.equal(mine, zod, text);
      },
    ),
    { numRuns: 1000 },
  );
});

// a garbage line: never valid JSON (starts with '#'), never contains a newline
const garbage = fc.string({ maxLength: 80 }).map((s) => '#' + s.replace(/[\r\n]/g, ' '));

test('heartbeat: every good record around garbage is kept, whatever the chunking across polls', async () => {
  const t = tempDir();
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.constant<'good'>('good'), garbage), { minLength: 1, maxLength: 40 }),
        fc.array(fc.nat({ max: 10_000 }), { maxLength: 5 }),
        async (items, cuts) => {
          const dir = join(t.dir, `r${n++}`);
          const { mkdirSync } = await import('node:fs');
          mkdirSync(dir);
          let step = 0;
          let good = 0;
          let bad = 0;
          const text = items
            .map((it) => {
              if (it === 'good') {
                good++;
                step++;
                return (
                  JSON.stringify({
                    ts: 1_800_000_000 + step,
                    iso: 'x',
                    pid: 1,
                    rank: 0,
                    step,
                    msg: 'progress',
                    loss: 1 / step,
                    toks_per_s: 10,
                  }) + '\n'
                );
              }
              bad++; // starts with '#': never blank, never JSON
              return it + '\n';
            })
            .join('');
          const bytes = Buffer.from(text);
          const pts = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const file = join(dir, 'heartbeat_rank0.jsonl');
          const m = new RunModel(new LocalHost(), dir);
          writeFileSync(file, '');
          let prev = 0;
          for (const p of [...pts, bytes.length]) {
            appendFileSync(file, bytes.subarray(prev, p));
            prev = p;
            await m.poll();
          }
          const s = await m.poll();
          assert.equal(s.ranks[0]?.events.progress ?? 0, good);
          assert.equal(s.files['heartbeat_rank0.jsonl']!.parseErrors, bad);
          assert.equal(s.series.loss.total, good);
          assert.equal(s.step, good ? step : null);
        },
      ),
      { numRuns: 40 },
    );
  } finally {
    t.done();
  }
});

test('training.csv: good rows around garbage are all kept', async () => {
  const t = tempDir();
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc.record({
              loss: fc.double({ min: 0, max: 20, noNaN: true }),
              lr: fc.double({ min: 0, max: 1, noNaN: true }),
              toks: fc.nat(),
            }),
            garbage,
          ),
          { maxLength: 40 },
        ),
        async (items) => {
          const dir = join(t.dir, `c${n++}`);
          const { mkdirSync } = await import('node:fs');
          mkdirSync(dir);
          let step = 0;
          const want: number[] = [];
          let bad = 0;
          const text = items
            .map((it) => {
              if (typeof it === 'string') {
                bad++; // starts with '#': never blank, never a number
                return it + '\n';
              }
              step++;
              want.push(step);
              return `${step},${it.loss.toFixed(6)},${it.lr.toExponential(6)},${it.toks}\n`;
            })
            .join('');
          writeFileSync(join(dir, 'training.csv'), text);
          const s = await new RunModel(new LocalHost(), dir).poll();
          assert.deepEqual(
            s.series.loss.recent.map((p) => p.step),
            want,
          );
          assert.equal(s.files['training.csv']?.parseErrors ?? 0, bad);
        },
      ),
      { numRuns: 40 },
    );
  } finally {
    t.done();
  }
});

test('a run dir full of random bytes under every artifact name never makes poll() throw', async () => {
  const t = tempDir();
  let n = 0;
  const names = [
    'heartbeat_rank0.jsonl',
    'heartbeat_rank1.jsonl',
    'heartbeat.jsonl',
    'training.csv',
    'val.csv',
    'k_stats.csv',
    'fallback_counters.csv',
    'env.json',
    'metrics.json',
    'opt_state_mb.txt',
    '.HALT',
    '.anomaly_type',
    'gate_collapse_details.json',
    'config.yaml',
    'stackdump_1.txt',
    'watchdog_stackdump_2.txt',
    'train.log',
    'checkpoint_step5.pt',
  ];
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uint8Array({ maxLength: 400 }), { minLength: names.length, maxLength: names.length }),
        async (blobs) => {
          const dir = join(t.dir, `d${n++}`);
          const { mkdirSync } = await import('node:fs');
          mkdirSync(dir);
          names.forEach((name, i) => writeFileSync(join(dir, name), blobs[i]!));
          const m = new RunModel(new LocalHost(), dir);
          const s = await m.poll();
          assert.equal(s.exists, true);
          JSON.stringify(s);
          await m.poll();
        },
      ),
      { numRuns: 25 },
    );
  } finally {
    t.done();
  }
});
