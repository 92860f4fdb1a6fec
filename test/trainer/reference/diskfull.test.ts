// The reference trainer on a full disk (issue 24 item 10): a log write that fails with ENOSPC skips
// the line instead of killing the run; the skips are counted, said once on stderr when they start
// and as a count when the rank ends. A real tmpfs (mount needs root: skipped, saying so, without).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readLines, tmp, train, waitFor } from './helpers.js';

function fill(path: string): number {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let n = 0;
  try {
    for (;;) n += writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd);
  }
  return n;
}

test('a full disk (tmpfs) skips log lines, counted and said once; training goes on and ends cleanly', async (t) => {
  const T = tmp();
  const mnt = join(T.dir, 'mnt');
  mkdirSync(mnt);
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt], { encoding: 'utf8' });
  if (m.status !== 0) {
    T.cleanup();
    t.skip(`cannot mount a tmpfs here (${(m.stderr || m.error?.message || '').trim()}): the full disk is not tested`);
    return;
  }
  const out = join(mnt, 'run');
  const p = train(['--config', T.cfg, '--out', out, '--steps', '100000', '--log-every', '1', '--heartbeat-every']);
  try {
    const csv = join(out, 'training.csv');
    await waitFor('three training.csv rows', () => readLines(csv).length >= 3, 60_000);
    const filled = fill(join(mnt, 'filler'));
    assert.ok(filled > 0, 'the filler took the free space');
    await waitFor('the one "disk is full" line on stderr', () => /the disk is full/.test(p.stderr()), 60_000);
    // the rank trains on: its stdout (a pipe, not the full disk) keeps printing steps
    const stepNow = () => Math.max(0, ...[...p.stdout().matchAll(/^step (\d+) \|/gm)].map((x) => Number(x[1])));
    const s0 = stepNow();
    await waitFor('ten more steps on the full disk', () => stepNow() >= s0 + 10, 60_000);
    assert.equal(p.child.exitCode, null, `the rank is alive on the full disk: ${p.stderr()}`);
    const rowsFull = readLines(csv).length;
    // space again: the lines come back, and a .HALT ends the run as usual
    rmSync(join(mnt, 'filler'));
    await waitFor('training.csv rows again', () => readLines(csv).length > rowsFull + 2, 60_000);
    writeFileSync(join(out, '.HALT'), 'test\n');
    const end = await Promise.race([
      p.exit,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error('no exit 60 s after .HALT')), 60_000).unref()),
    ]);
    assert.deepEqual(end, { code: 0, signal: null }, p.stderr());
    const err = p.stderr();
    assert.equal(err.match(/the disk is full/g)?.length, 1, `said once: ${err}`);
    const skipped = Number(/(\d+) log line\(s\) skipped on a full disk/.exec(err)?.[1] ?? 0);
    assert.ok(skipped >= 10, `the skips are counted (${skipped}): ${err}`);
    // every training.csv line is a whole row: a row cut short by the full disk is ended, not glued
    const rows = readLines(csv);
    const whole = rows.filter((l) => /^\d+,[-\d.einf]+,[-\d.e+]+,\d+$/.test(l));
    assert.ok(whole.length >= rows.length - 1, `at most one torn row: ${rows.filter((l) => !whole.includes(l))}`);
    const steps = whole.map((l) => Number(l.split(',')[0]));
    assert.ok(
      steps.every((s, i) => i === 0 || s > steps[i - 1]!),
      'the rows go forward (tmpfs may keep taking short appends into a file page it already holds)',
    );
    assert.ok(JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')).ended, 'metrics.json written at the end');
  } finally {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exit;
    spawnSync('umount', [mnt]);
    T.cleanup();
  }
});
