// "Halt now" during a checkpoint save waits for the save. The real trainer's rank 0 saves after step
// N while the other ranks have passed step N+1's .HALT check and wait in its all-reduce; a .HALT
// written during the save reaches rank 0 a step before them and splits the group — seen live on 2
// ranks: rank 0 wrote metrics.json and waited in its barrier, rank 1 in the all-reduce, 7 minutes on.
import assert from 'node:assert/strict';
import { appendFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { currentActor, requestHalt } from '../../../src/trainer/control/actions.js';
import { tempDir } from './helpers.js';

const host = new LocalHost();

test('halt now while a checkpoint is being written: .HALT only once the file has been quiet, and it says why', async () => {
  const dir = tempDir('halt-save');
  const ck = join(dir, 'checkpoint_step40.pt');
  writeFileSync(ck, Buffer.alloc(1000, 1));
  // the save goes on for 1.2 s
  let last = Date.now();
  const t0 = Date.now();
  const saving = setInterval(() => {
    if (Date.now() - t0 > 1200) return clearInterval(saving);
    appendFileSync(ck, Buffer.alloc(1000, 2));
    last = Date.now();
  }, 100);
  const rec = await requestHalt(host, dir, 'now', await currentActor(host));
  clearInterval(saving);
  assert.equal(rec.result, 'ok', rec.detail);
  assert.match(
    rec.detail,
    /^\.HALT written \(halt: manual_stop\) once checkpoint_step40\.pt was saved \(waited [\d.]+s: a \.HALT during a save reaches the saving rank a step after the others and can split the group\)$/,
  );
  const haltAt = statSync(join(dir, '.HALT')).mtimeMs;
  assert.ok(haltAt >= last + 200, `.HALT ${haltAt - last} ms after the save's last write`);
});

test('halt now with every checkpoint quiet: .HALT at once', async () => {
  const dir = tempDir('halt-quiet');
  const ck = join(dir, 'checkpoint_step40.pt');
  writeFileSync(ck, Buffer.alloc(1000, 1));
  const old = Date.now() / 1000 - 60;
  utimesSync(ck, old, old);
  const t0 = Date.now();
  const rec = await requestHalt(host, dir, 'now', await currentActor(host));
  assert.equal(rec.detail, '.HALT written (halt: manual_stop)');
  assert.ok(Date.now() - t0 < 1000, `${Date.now() - t0} ms`);
});

test('halt now on a run that saves every 400 ms (each save done at once): .HALT in the first quiet moment, not after a long wait', async () => {
  const dir = tempDir('halt-often');
  let k = 0;
  const save = () => writeFileSync(join(dir, `checkpoint_step${++k * 10}.pt`), Buffer.alloc(1000, 1));
  save();
  const saving = setInterval(save, 400);
  const t0 = Date.now();
  const rec = await requestHalt(host, dir, 'now', await currentActor(host));
  clearInterval(saving);
  assert.equal(rec.result, 'ok', rec.detail);
  assert.ok(Date.now() - t0 < 1500, `${Date.now() - t0} ms`);
});
