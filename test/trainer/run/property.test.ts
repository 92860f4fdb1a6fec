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
      const pts = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
      const chunks: Uint8Array[] = [];
      let prev = 0;
      for (const p of pts) {
        chunks.push(bytes.subarray(prev, p));
        prev = p;
      }
      chunks.push(bytes.subarray(prev));
      const whole = splitAll(new LineSplitter(64), [bytes]);
      const pieces = splitAll(new LineSplitter(64), chunks);
      assert.deepEqual(pieces, whole);
    }),
    { numRuns: 300 },
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
