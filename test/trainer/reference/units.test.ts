// Pure pieces of the reference trainer: checkpoint integrity, dump naming, injection specs, data lanes,
// CSV/heartbeat formats, config reading.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { ActivityStack, writeStackDump } from '../../../src/trainer/reference/activity.js';
import { EARLY_SIGUSR1_NODE_ARGS } from '../../../src/trainer/reference/dumps.js';
import {
  newestCompleteCheckpoint,
  verifyCheckpoint,
  writeCheckpoint,
  readCheckpoint,
  crc32,
} from '../../../src/trainer/reference/checkpoint.js';
import { defaultRunConfig, parseConfigObject } from '../../../src/trainer/reference/config.js';
import { LaneSampler, shareOf } from '../../../src/trainer/reference/data.js';
import { formatInjection, parseInjection } from '../../../src/trainer/reference/inject.js';
import { fmtExp, isoMicros, pyJson, trainingCsvRow } from '../../../src/trainer/reference/writers.js';

function ckpt(step: number, n = 1000) {
  const params = Float32Array.from({ length: n }, (_, i) => Math.sin(i));
  return {
    header: {
      format: 'nsa-top-reference-checkpoint' as const,
      version: 1,
      step,
      time: 'now',
      config: defaultRunConfig(),
      world_size: 1,
      data: { cursor: 17, epoch: 0, lanes: 8, train_bytes: 100, source: 'x' },
      rng: { seed: 1 },
      optimizer: { kind: 'adamw' as const, t: step },
      n_params: n,
      layout: [],
      sections: ['params', 'adam_m', 'adam_v'],
      loss_last: 2.5,
    },
    params,
    m: new Float32Array(n).fill(0.5),
    v: new Float32Array(n).fill(0.25),
  };
}

test('checkpoints round-trip; truncated, torn or corrupted files are refused and the newest complete one is chosen', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-ck-'));
  try {
    writeCheckpoint(dir, ckpt(10));
    writeCheckpoint(dir, ckpt(20));
    writeCheckpoint(dir, ckpt(30));
    assert.deepEqual(
      readdirSync(dir).sort(),
      ['checkpoint_step10.pt', 'checkpoint_step20.pt', 'checkpoint_step30.pt'],
      'no temp files left',
    );
    const back = await readCheckpoint(join(dir, 'checkpoint_step20.pt'));
    assert.equal(back.header.step, 20);
    assert.deepEqual(back.params, ckpt(20).params);
    assert.equal(back.v[999], 0.25);
    assert.equal(readFileSync(join(dir, 'checkpoint_step20.pt')).subarray(-8).toString(), 'NSACKEND');

    const p30 = join(dir, 'checkpoint_step30.pt');
    truncateSync(p30, statSync(p30).size - 5);
    assert.deepEqual(await verifyCheckpoint(p30), { ok: false, why: 'no end trailer (incomplete write)' });
    const p20 = join(dir, 'checkpoint_step20.pt');
    const buf = readFileSync(p20);
    buf[buf.length - 100] ^= 0xff;
    writeFileSync(p20, buf);
    assert.equal((await verifyCheckpoint(p20)).why, 'CRC mismatch (corrupt)');
    const best = await newestCompleteCheckpoint(dir);
    assert.equal(best.path, join(dir, 'checkpoint_step10.pt'));
    assert.equal(best.skipped.length, 2);
    writeFileSync(join(dir, 'x.pt'), 'PK\x03\x04 a torch zip');
    assert.match((await verifyCheckpoint(join(dir, 'x.pt'))).why!, /bad magic|too short/);
    assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('stack dumps in the same second never overwrite each other', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-dump-'));
  try {
    const act = new ActivityStack();
    act.step = 5;
    act.enter('allreduce-wait');
    const now = 1795305288.25;
    const a = writeStackDump(dir, 1, act, 10, now);
    const b = writeStackDump(dir, 1, act, 10, now + 0.5);
    assert.notEqual(a, b);
    assert.equal(a, join(dir, `stackdump_1795305288_rank1_${process.pid}.txt`));
    assert.equal(b, join(dir, `stackdump_1795305288_rank1_${process.pid}_1.txt`));
    const text = readFileSync(a, 'utf8').split('\n');
    assert.equal(text[1], `# nsa-top-reference rank=1 pid=${process.pid} step=5 phase=allreduce-wait`);
    assert.ok(
      text.some((l) => /^ {2}File ".*units\.test\.ts", line \d+, in /.test(l)),
      text.join('\n'),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('injection specs: every form parses; bad specs say what is wrong', () => {
  assert.deepEqual(parseInjection('hang@step=5,rank=1'), { kind: 'hang', step: 5, rank: 1 });
  assert.deepEqual(parseInjection('slow-data@ms=250'), { kind: 'slow-data', ms: 250, rank: null });
  assert.deepEqual(parseInjection('leak@mb=64'), { kind: 'leak', mb: 64, rank: null });
  assert.deepEqual(parseInjection('gate-collapse@step=100'), { kind: 'gate-collapse', step: 100, rank: null });
  assert.deepEqual(parseInjection('slow@rank=1,x=1.5'), { kind: 'slow', x: 1.5, rank: 1 });
  assert.equal(formatInjection(parseInjection('slow@rank=1,x=1.5')), 'slow@x=1.5,rank=1');
  for (const [bad, why] of [
    ['hang', /KIND@key=value/],
    ['hang@ms=3', /'ms' does not apply to hang/],
    ['nan@step=0', /step must be an integer >= 1/],
    ['crash@step=2,step=3', /given twice/],
    ['leak@mb=-1', /cannot read/],
    ['boom@step=1', /unknown kind/],
    ['slow@rank=1', /slow needs x=/],
    ['slow@x=1', /x must be > 1 and <= 100/],
    ['slow@x=500,rank=0', /x must be > 1 and <= 100/],
    ['slow@x=2,step=3', /'step' does not apply to slow/],
    ['slow@x=2,rank=0.5', /rank must be an integer/],
  ] as [string, RegExp][])
    assert.throws(() => parseInjection(bad), why);
});

test('data lanes: ranks read disjoint sequences; the position wraps into a new epoch', () => {
  const text = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);
  assert.deepEqual(shareOf(5, 2, 0), { start: 0, count: 3 });
  assert.deepEqual(shareOf(5, 2, 1), { start: 3, count: 2 });
  const a = new LaneSampler(text, 4, 16, 15, 0, 2);
  const b = new LaneSampler(text, 4, 16, 15, 2, 2);
  const whole = new LaneSampler(text, 4, 16, 15, 0, 4);
  const ba = a.next();
  const bb = b.next();
  const bw = whole.next();
  assert.deepEqual([...ba, ...bb], [...bw]);
  assert.deepEqual(a.pos, whole.pos);
  for (let i = 0; i < 20; i++) a.next();
  assert.ok(a.pos.epoch >= 1);
  assert.throws(() => new LaneSampler(text.subarray(0, 50), 8, 16, 15, 0, 8), /training data too small/);
});

test('formats: CSV row, %.6e, microsecond ISO, Python-style JSON', () => {
  assert.equal(trainingCsvRow(1580, 1.3701234, 2.992615e-4, 411.6), '1580,1.370123,2.992615e-04,412\n');
  assert.equal(fmtExp(0, 2), '0.00e+00');
  assert.equal(isoMicros(1795305284.613665), '2026-11-21T23:54:44.613665Z');
  assert.equal(pyJson({ a: 1, b: [1, 2], c: 'x' }), '{"a": 1, "b": [1, 2], "c": "x"}');
});

test("config: the real trainer's YAML keys are read, its ignored keys pass quietly, unknown keys warn, bad values fail", () => {
  const r = parseConfigObject(
    {
      model: { dim: 128, n_heads: 8, n_kv_groups: 2, d_k: 16, d_v: 16 },
      nsa: { l: 16, phi: 'avg' },
      runtime: { use_flash: true },
      train: { steps: 5, lr_schedule: 'cosine', typo_key: 1 },
    },
    'x.yaml',
  );
  assert.equal(r.overrides.model?.dim, 128);
  assert.deepEqual(r.warnings, ['[config] ignoring unknown key train.typo_key in x.yaml']);
  assert.throws(() => parseConfigObject({ train: { steps: 'many' } }, 'y.yaml'), /train\.steps/);
});

test('the early SIGUSR1 listener for rank processes keeps Node from opening its debugger port', async () => {
  const child = spawn(process.execPath, [...EARLY_SIGUSR1_NODE_ARGS, '-e', 'setTimeout(() => {}, 1500)'], {
    env: { ...process.env, NSA_TOP_EARLY_SIGUSR1_MARK: '1' },
  });
  let err = '';
  child.stderr.on('data', (b) => (err += b));
  const done = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  const t0 = Date.now();
  while (!err.includes('early SIGUSR1 listener installed') && Date.now() - t0 < 20_000)
    await new Promise((r) => setTimeout(r, 10));
  child.kill('SIGUSR1');
  assert.equal(await done, 0);
  assert.match(err, /SIGUSR1 while starting: no dump yet/);
  assert.doesNotMatch(err, /Debugger listening/);
});
