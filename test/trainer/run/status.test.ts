// `nsa-top status` through the built binary: exit codes, the human table, the --json shape, and
// the default RUN_DIR (newest run under ./artifacts/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { resolveRunDir } from '../../../src/trainer/run/rundir.js';
import { FIXTURES, tempDir } from './helpers.js';

const bin = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));

function status(args: string[], cwd?: string) {
  return spawnSync(process.execPath, [bin, 'status', ...args], { encoding: 'utf8', cwd, timeout: 30_000 });
}

test('status prints the table for the ddp2 fixture and exits 0', () => {
  const r = status([join(FIXTURES, 'ddp2-dumps-halt')]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^step\s+31 \/ 400/m);
  assert.match(r.stdout, /loss 5\.7044/);
  assert.match(r.stdout, /\.HALT present/);
  assert.match(r.stdout, /HALT file detected/);
  assert.match(r.stdout, /^\s+0\s+32202\s/m);
  assert.match(r.stdout, /^\s+1\s+32203\s/m);
  assert.match(r.stdout, /2 stack dumps/);
  assert.match(r.stdout, /main at distributed_c10d\.py:1541 all_reduce/);
  assert.match(r.stdout, /no dt_fetch_s/);
  assert.equal(r.stderr, '');
});

test('status --json is the RunSnapshot', () => {
  const r = status([join(FIXTURES, 'single'), '--json']);
  assert.equal(r.status, 0, r.stderr);
  const s = JSON.parse(r.stdout);
  assert.equal(s.schema, 1);
  assert.equal(s.step, 40);
  assert.equal(s.totalSteps, 40);
  assert.equal(s.identity.name, 'single');
  assert.deepEqual(
    s.checkpoints.map((c: { step: number }) => c.step),
    [20, 40],
  );
  for (const k of [
    'loss',
    'toksPerS',
    'lr',
    'valLoss',
    'gateEntropy',
    'gateMax',
    'collapseFrac',
    'dtFetchS',
    'memReservedMiB',
  ]) {
    assert.ok(Array.isArray(s.series[k].recent), `series.${k}`);
  }
  assert.equal(s.series.loss.recent.length, 40);
  assert.equal(typeof s.files['heartbeat_rank0.jsonl'].parseErrors, 'number');
  assert.equal(s.ranks[0].rank, 0);
});

test('a missing run dir: one line on stderr, exit 2; a bad option: exit 2', () => {
  const r = status(['/nonexistent/nsa-top-run']);
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr.trim().split('\n').length, 1);
  assert.match(r.stderr, /run dir not found: \/nonexistent\/nsa-top-run/);
  const o = status(['--frobnicate']);
  assert.equal(o.status, 2);
  assert.match(o.stderr, /unknown option --frobnicate/);
});

test('no RUN_DIR: the newest run under ./artifacts/ (up to 3 levels deep); none → exit 2', async () => {
  const t = tempDir();
  try {
    const none = status([], t.dir);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /artifacts/);

    const older = join(t.dir, 'artifacts', 'train_runs', 'm7c_20260101-000000');
    const newer = join(t.dir, 'artifacts', 'train_runs', 'm7c_20260102-000000');
    mkdirSync(join(t.dir, 'artifacts', 'empty', 'deeper'), { recursive: true });
    cpSync(join(FIXTURES, 'single'), older, { recursive: true });
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), newer, { recursive: true });
    const then = Date.now() / 1000;
    utimesSync(join(older, 'heartbeat_rank0.jsonl'), then - 100, then - 100);
    utimesSync(join(older, 'training.csv'), then - 100, then - 100);
    for (const f of ['heartbeat_rank0.jsonl', 'heartbeat_rank1.jsonl', 'training.csv'])
      utimesSync(join(newer, f), then - 200, then - 200);
    assert.equal(await resolveRunDir(new LocalHost(), undefined, t.dir), older, 'most recent activity wins');
    writeFileSync(join(newer, 'heartbeat_rank1.jsonl'), '{}\n');
    assert.equal(await resolveRunDir(new LocalHost(), undefined, t.dir), newer);

    const r = status(['--json'], t.dir);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).runDir, newer);
    assert.equal(
      await resolveRunDir(new LocalHost(), 'artifacts/train_runs/m7c_20260101-000000', t.dir),
      older,
      'relative to cwd',
    );
  } finally {
    t.done();
  }
});

test('a launcher dir (run.info names out_dir, train.log beside it): status reads the artifacts and that log', () => {
  const t = tempDir();
  try {
    const launcher = join(t.dir, 'artifacts', 'train_runs', 'm7c_20260101-000000');
    const out = join(t.dir, 'artifacts', 'm7c_125m');
    mkdirSync(launcher, { recursive: true });
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), out, { recursive: true });
    cpSync(join(out, 'train.log'), join(launcher, 'train.log'));
    rmSync(join(out, 'train.log'));
    writeFileSync(
      join(launcher, 'run.info'),
      `run_dir: ${launcher}\nconfig: configs/m7c_125m_80g.yaml\nout_dir: ${out}\n`,
    );
    const r = status([launcher, '--json']);
    assert.equal(r.status, 0, r.stderr);
    const s = JSON.parse(r.stdout);
    assert.equal(s.runDir, out);
    assert.equal(s.step, 31);
    assert.equal(s.log.haltSeen, true, 'train.log read from the launcher dir');
    assert.equal(s.log.effectiveConfig, 'S=256 B=2 accum=1 gc=off');
  } finally {
    t.done();
  }
});

test('parse errors are shown per file in the table', () => {
  const t = tempDir();
  try {
    const dir = join(t.dir, 'run');
    cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
    writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), 'garbage line\n', { flag: 'a' });
    writeFileSync(join(dir, 'env.json'), '{"env": ');
    const r = status([dir]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^parse$/m);
    assert.match(r.stdout, /heartbeat_rank0\.jsonl: 1 bad of 82 — last: not JSON/);
    assert.match(r.stdout, /env\.json: 1 bad/);
    assert.match(r.stdout, /^step\s+40 \/ 40/m, 'the good records are all still there');
  } finally {
    t.done();
  }
});

test('a training.csv over 1 MiB: status answers from its end and says how much it left; --full reads it all', () => {
  const t = tempDir();
  try {
    const dir = join(t.dir, 'run');
    cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
    // 60k rows, ~2 MiB
    let csv = '';
    for (let step = 1; step <= 60_000; step++) csv += `${step},5.500000,2.000000e-04,9000\n`;
    writeFileSync(join(dir, 'training.csv'), csv);
    const tail = status([dir]);
    assert.ok(tail.status === 0 || tail.status === 1, tail.stderr);
    // the observation's second look must not read the older history the answer leaves out
    assert.match(
      tail.stdout,
      /answered from the end of the files: 1\.\d MiB of older history not read \(--full reads it\)/,
    );
    const full = JSON.parse(status([dir, '--json', '--full']).stdout);
    assert.equal(full.backfill.pending, false);
    assert.equal(full.files['training.csv'].records, 60_000, 'every row of the csv');
  } finally {
    t.done();
  }
});
