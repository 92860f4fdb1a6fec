import assert from 'node:assert/strict';
import { appendFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { crc32 } from 'node:zlib';
import { LocalHost } from '../../src/remote/local.js';
import { newestCompleteCheckpoint, scanCheckpoints } from '../../src/trainer/checkpoints.js';
import { tempDir } from './helpers.js';

const host = new LocalHost();

function ref(step: number): Buffer {
  const body = Buffer.concat([Buffer.from('NSATOPCK'), Buffer.from(JSON.stringify({ step })), Buffer.alloc(2000, step & 0xff)]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(body) >>> 0);
  return Buffer.concat([body, crc, Buffer.from('NSACKEND')]);
}

/** A minimal torch-like zip: local header bytes, then (when complete) an end-of-central-directory record. */
function zip(complete: boolean): Buffer {
  const parts = [Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(100_000, 7)];
  if (complete) parts.push(Buffer.from([0x50, 0x4b, 0x05, 0x06]), Buffer.alloc(18));
  return Buffer.concat(parts);
}

function age(path: string, s: number): void {
  const t = Date.now() / 1000 - s;
  utimesSync(path, t, t);
}

test('newest by step number, not by mtime', async () => {
  const dir = tempDir('ck-order');
  writeFileSync(join(dir, 'checkpoint_step100.pt'), ref(100));
  age(join(dir, 'checkpoint_step100.pt'), 60);
  writeFileSync(join(dir, 'checkpoint_step20.pt'), ref(20));
  age(join(dir, 'checkpoint_step20.pt'), 10);
  writeFileSync(join(dir, 'checkpoint_step9.pt.tmp'), ref(9));
  const c = await newestCompleteCheckpoint(host, dir);
  assert.equal(c?.step, 100);
  assert.deepEqual(c?.why, []);
});

test('a half-written newest file is skipped and the reason said: torch zip, reference trailer, CRC', async () => {
  const dir = tempDir('ck-half');
  writeFileSync(join(dir, 'checkpoint_step10.pt'), zip(true));
  writeFileSync(join(dir, 'checkpoint_step20.pt'), zip(false));
  writeFileSync(join(dir, 'checkpoint_step30.pt'), ref(30).subarray(0, 1500));
  const bad = ref(40);
  bad[20] ^= 0xff;
  writeFileSync(join(dir, 'checkpoint_step40.pt'), bad);
  for (const s of [10, 20, 30, 40]) age(join(dir, `checkpoint_step${s}.pt`), 30);
  const r = await scanCheckpoints(host, dir);
  assert.equal(r.found?.step, 10);
  assert.equal(r.why.length, 3);
  assert.match(r.why[0]!, /checkpoint_step40\.pt: skipped, CRC mismatch/);
  assert.match(r.why[1]!, /checkpoint_step30\.pt: skipped, no NSACKEND trailer/);
  assert.match(r.why[2]!, /checkpoint_step20\.pt: skipped, zip without its end-of-central-directory/);
});

test('a file still growing is not complete, even with a valid-looking tail so far', async () => {
  const dir = tempDir('ck-grow');
  writeFileSync(join(dir, 'checkpoint_step5.pt'), ref(5));
  age(join(dir, 'checkpoint_step5.pt'), 30);
  const growing = join(dir, 'checkpoint_step10.pt');
  writeFileSync(growing, zip(true));
  const t = setInterval(() => appendFileSync(growing, Buffer.alloc(4096)), 100);
  try {
    const r = await scanCheckpoints(host, dir, { stableWaitMs: 500 });
    assert.equal(r.found?.step, 5);
    assert.match(r.why[0]!, /checkpoint_step10\.pt: still being written/);
  } finally {
    clearInterval(t);
  }
});

test('no checkpoints, or an empty dir: null', async () => {
  assert.equal(await newestCompleteCheckpoint(host, tempDir('ck-none')), null);
  assert.equal(await newestCompleteCheckpoint(host, join(tempDir('ck-none'), 'missing')), null);
});
