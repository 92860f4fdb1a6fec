// `status` says when checkpoint saves failed (issue 24 item 10): the reference trainer's
// "[train] checkpoint at step N FAILED …" log line, and — for the real trainer, which swallows a
// failed save — a checkpoint_step{N}.pt that save_every says should be there and is not.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { missingCheckpoints } from '../../src/checks/saves.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-status-saves-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function copy(name: string): string {
  const d = join(tmp, name);
  cpSync(FIXTURE, d, { recursive: true });
  return d;
}
const status = (d: string, ...extra: string[]) =>
  spawnSync(process.execPath, [bin, 'status', d, ...extra], { encoding: 'utf8', timeout: 60_000 });

test('missingCheckpoints: every save_every step below the last step without a file', () => {
  assert.deepEqual(missingCheckpoints(20, [20, 40], 40), []);
  assert.deepEqual(missingCheckpoints(20, [40], 41), [20]);
  assert.deepEqual(missingCheckpoints(20, [], 20), [], 'step 20 itself may still be saving');
  assert.deepEqual(missingCheckpoints(0, [], 100), []);
  assert.deepEqual(missingCheckpoints(null, [], 100), []);
  assert.equal(missingCheckpoints(1, [], 1e9).length, 20, 'bounded');
});

test('status: silent on a run whose saves all landed (save_every 20, steps 20 and 40 there)', () => {
  const r = status(copy('clean'));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^ckpts\s+step 20 .* step 40/m);
  assert.doesNotMatch(r.stdout, /FAILED|MISSING/);
});

test('status: a checkpoint save_every says should be there and is not is named', () => {
  const d = copy('missing');
  rmSync(join(d, 'checkpoint_step20.pt'));
  const r = status(d);
  assert.match(r.stdout, /^ {2}MISSING +save_every 20 but no checkpoint_step\{20\}\.pt/m, r.stdout);
});

test('status: a failed save in the log is named, in the table and in --json', () => {
  const d = copy('failed');
  rmSync(join(d, 'checkpoint_step20.pt'));
  const line = '[train] checkpoint at step 20 FAILED (periodic): ENOSPC: no space left on device, write';
  appendFileSync(join(d, 'train.log'), `${line}\n`);
  const r = status(d);
  assert.match(
    r.stdout,
    /^ {2}FAILED +1 checkpoint save\(s\) failed: step 20 — \[train\] checkpoint at step 20 FAILED/m,
    r.stdout,
  );
  assert.doesNotMatch(r.stdout, /MISSING/, 'the failed one is not also listed as missing');
  const j = JSON.parse(status(d, '--json').stdout) as { log: { checkpointFailed: { step: number; text: string }[] } };
  assert.deepEqual(j.log.checkpointFailed, [{ step: 20, text: line }]);
});
