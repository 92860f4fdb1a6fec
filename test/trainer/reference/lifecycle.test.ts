// The reference trainer's run lifecycle: refusing to clobber an earlier run or start under a stale
// .HALT, resuming exactly where a checkpoint left off, SIGTERM/SIGINT, one trainer per run dir.
// Runs the built binary (npm run build first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyCheckpoint } from '../../../src/trainer/reference/checkpoint.js';
import { csvRows, readLines, tmp, train, trainToEnd, waitFor } from './helpers.js';

test('a stale .HALT and an out dir with an earlier run are refused, not overwritten', async () => {
  const t = tmp();
  try {
    const first = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '4', '--save-every', '2']);
    assert.equal(first.code, 0, first.stderr);
    const before = readFileSync(join(t.out, 'checkpoint_step2.pt'));
    const again = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '4', '--save-every', '2']);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already holds checkpoints.*--resume/);
    assert.deepEqual(readFileSync(join(t.out, 'checkpoint_step2.pt')), before);
    writeFileSync(join(t.out, '.HALT'), 'halt: manual_stop\n');
    const halted = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '8', '--resume']);
    assert.equal(halted.code, 2);
    assert.match(halted.stderr, /stale \.HALT/);

    // An attempt that died before its first checkpoint can simply be started again (a supervisor's restart).
    const early = join(t.dir, 'early');
    const c = await trainToEnd(['--out', early, '--config', t.cfg, '--steps', '4', '--inject', 'crash@step=3']);
    assert.equal(c.code, 1);
    const again2 = await trainToEnd(['--out', early, '--config', t.cfg, '--steps', '4']);
    assert.equal(again2.code, 0, again2.stderr);
    assert.match(again2.stdout, /has training\.csv of an earlier attempt without a complete checkpoint/);
    assert.deepEqual(
      csvRows(join(early, 'training.csv')).map((x) => Number(x[0])),
      [1, 2, 1, 2, 3, 4],
    );
  } finally {
    t.cleanup();
  }
});

test('resume continues the step count, schedule, optimizer and data: identical to an uninterrupted run', async () => {
  const a = tmp();
  const b = tmp();
  try {
    const full = await trainToEnd(['--out', a.out, '--config', a.cfg, '--steps', '10']);
    assert.equal(full.code, 0, full.stderr);
    // Same run, crashing after the step-5 checkpoint, then resumed without naming the checkpoint.
    const crashed = await trainToEnd([
      '--out',
      b.out,
      '--config',
      b.cfg,
      '--steps',
      '10',
      '--save-every',
      '5',
      '--inject',
      'crash@step=8',
    ]);
    assert.notEqual(crashed.code, 0);
    assert.match(crashed.stderr, /injected crash at step 8/);
    // The same argv again plus --resume, as a supervisor's restart does: the crash has fired once already.
    const resumed = await trainToEnd([
      '--out',
      b.out,
      '--config',
      b.cfg,
      '--steps',
      '10',
      '--save-every',
      '5',
      '--inject',
      'crash@step=8',
      '--resume',
    ]);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.ok(resumed.stdout.includes(`[train] resumed from ${join(b.out, 'checkpoint_step5.pt')}`), resumed.stdout);
    assert.match(resumed.stderr, /crash@step=8 already fired on rank 0 in this run dir; skipped/);
    const steps = csvRows(join(b.out, 'training.csv')).map((r) => Number(r[0]));
    assert.deepEqual(steps, [1, 2, 3, 4, 5, 6, 7, 6, 7, 8, 9, 10], 'steps continue from 6, never restart at 1');
    const fullRows = csvRows(join(a.out, 'training.csv'));
    const resRows = csvRows(join(b.out, 'training.csv')).slice(7);
    assert.deepEqual(
      resRows.map((r) => [r[0], r[1], r[2]]),
      fullRows.slice(5).map((r) => [r[0], r[1], r[2]]),
      'loss and lr after resume equal the uninterrupted run',
    );
  } finally {
    a.cleanup();
    b.cleanup();
  }
});

test('SIGTERM checkpoints the current step, writes metrics.json and exits; a second signal exits at once', async () => {
  const t = tmp();
  try {
    const p = train(['--out', t.out, '--config', t.cfg, '--steps', '100000']);
    await waitFor('a few steps', () => readLines(join(t.out, 'training.csv')).length >= 3);
    p.child.kill('SIGTERM');
    const r = await p.exit;
    assert.equal(r.code, 143, p.stderr());
    const last = Number(csvRows(join(t.out, 'training.csv')).at(-1)![0]);
    assert.deepEqual(await verifyCheckpoint(join(t.out, `checkpoint_step${last}.pt`)), { ok: true, step: last });
    assert.equal(JSON.parse(readFileSync(join(t.out, 'metrics.json'), 'utf8')).last_step, last);

    const t2 = tmp();
    try {
      const q = train(['--out', t2.out, '--config', t2.cfg, '--steps', '100000', '--inject', 'slow-data@ms=400']);
      await waitFor('a step', () => readLines(join(t2.out, 'training.csv')).length >= 1);
      q.child.kill('SIGINT');
      await waitFor('the first signal noticed', () => q.stdout().includes('SIGINT received'));
      q.child.kill('SIGINT');
      const r2 = await q.exit;
      assert.equal(r2.code, 130);
      assert.match(q.stderr(), /second SIGINT — exiting at once/);
    } finally {
      t2.cleanup();
    }
  } finally {
    t.cleanup();
  }
});

test("one trainer per run dir: a second start is refused while the first runs; a killed one's lock is taken over", async () => {
  const t = tmp();
  try {
    const first = train(['--out', t.out, '--config', t.cfg, '--steps', '100000', '--save-every', '2']);
    await waitFor('a checkpoint', () => existsSync(join(t.out, 'checkpoint_step2.pt')));
    const second = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '100000', '--resume']);
    assert.equal(second.code, 2);
    assert.match(second.stderr, new RegExp(`another nsa-top train \\(pid ${first.child.pid}\\) is writing`));
    first.child.kill('SIGKILL');
    await first.exit;
    assert.ok(existsSync(join(t.out, '.train.lock')), 'SIGKILL leaves the lock behind');
    const newest = Math.max(...readdirSync(t.out).map((n) => Number(/^checkpoint_step(\d+)\.pt$/.exec(n)?.[1] ?? 0)));
    const third = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', String(newest + 2), '--resume']);
    assert.equal(third.code, 0, third.stderr);
    assert.equal(existsSync(join(t.out, '.train.lock')), false, 'released at exit');
  } finally {
    t.cleanup();
  }
});

test('a checkpoint that cannot be written is reported loudly and training goes on (no temp file left)', async () => {
  const t = tmp();
  try {
    mkdirSync(join(t.out, 'checkpoint_step2.pt'), { recursive: true }); // rename onto a directory fails
    const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '4', '--save-every', '2']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /\[train\] checkpoint at step 2 FAILED \(periodic\)/);
    assert.deepEqual(await verifyCheckpoint(join(t.out, 'checkpoint_step4.pt')), { ok: true, step: 4 });
    assert.deepEqual(
      readdirSync(t.out).filter((n) => n.includes('.tmp-')),
      [],
    );
  } finally {
    t.cleanup();
  }
});
