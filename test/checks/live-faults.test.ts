// nan and crash injections on live reference runs under the real watchdog binary.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { has, start, watched } from './live-helpers.js';

test("nan@step=20: loss non-finite is critical; the trainer's nan_loss is kept, never overwritten by a stall", async () => {
  const r = await watched(200, ['nan@step=20'], ['--stall', '3', '--halt'], {
    train: ['--ranks', '1', '--log-every', '5'],
  });
  assert.ok(has(r.alerts, 'loss:nonfinite', 'critical'));
  assert.equal(readFileSync(join(r.dir, '.anomaly_type'), 'utf8').trim(), 'nan_loss');
  const an = r.ls.find((l) => l.event === 'anomaly');
  if (an) assert.equal(an['wrote'], null, 'an existing anomaly is kept');
  assert.equal(r.ls.at(-1)?.state, 'HALTED');
  assert.equal(r.code, 1);
});

test('crash@step=20,rank=1: the dead rank is critical, the run ends EXITED; report says NO-GO even for phase 0', async () => {
  const r = await watched(200, ['crash@step=20,rank=1'], ['--stall', '10']);
  assert.ok(
    r.alerts.some((a) => (a.id === 'rank-died:1' || a.id === 'exited') && a.severity === 'critical'),
    JSON.stringify(r.alerts.map((a) => a.id)),
  );
  assert.equal(r.ls.at(-1)?.state, 'EXITED');
  assert.equal(r.code, 1);
  // the first anomaly is reported once, whatever follows (a stall, the exit); without --halt the
  // watchdog only observes: nothing is written into the run
  const an = r.ls.filter((l) => l.event === 'anomaly');
  assert.equal(an.length, 1);
  assert.equal(an[0]!['wrote'], null);
  assert.ok(!existsSync(join(r.dir, '.anomaly_type')), 'observe-only: no .anomaly_type without --halt');
  const rep = start(['report', r.dir, '--phase', '0']);
  assert.equal(await rep.done, 1, 'a critical alert makes every phase NO-GO');
});
