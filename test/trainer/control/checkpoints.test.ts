import assert from 'node:assert/strict';
import { appendFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { crc32 } from 'node:zlib';
import { LocalHost } from '../../../src/remote/local/host.js';
import {
  newestCompleteCheckpoint,
  pickResumeCheckpoint,
  readRunSegments,
  scanCheckpoints,
} from '../../../src/trainer/run/checkpoints.js';
import { tempDir } from './helpers.js';

const host = new LocalHost();

function ref(step: number): Buffer {
  const body = Buffer.concat([
    Buffer.from('NSATOPCK'),
    Buffer.from(JSON.stringify({ step })),
    Buffer.alloc(2000, step & 0xff),
  ]);
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

test('without a run history: the newest weights by mtime, not the highest step', async () => {
  const dir = tempDir('ck-order');
  writeFileSync(join(dir, 'checkpoint_step100.pt'), ref(100));
  age(join(dir, 'checkpoint_step100.pt'), 60);
  writeFileSync(join(dir, 'checkpoint_step20.pt'), ref(20));
  age(join(dir, 'checkpoint_step20.pt'), 10);
  writeFileSync(join(dir, 'checkpoint_step9.pt.tmp'), ref(9));
  const c = await newestCompleteCheckpoint(host, dir);
  assert.equal(c?.step, 20);
  assert.deepEqual(c?.why, []);
  const p = await pickResumeCheckpoint(host, dir);
  assert.equal(p.found?.segment, null);
  assert.match(p.found!.why, /checkpoint_step100\.pt has a higher step but was written earlier/);
  assert.match(p.found!.why, /no heartbeat history: ordered by mtime/);
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

test('recently written files share one settle wait, each still judged on its own stats', async () => {
  // a freshly copied run dir, FSDP shards, a run saving every few seconds: each of these fresh files
  // waited stableWaitMs in turn (status on a copied fixture with two took 1.4 s)
  const dir = tempDir('ck-fresh');
  const growing = join(dir, 'checkpoint_step30.pt');
  writeFileSync(growing, zip(true));
  const bad = ref(20);
  bad[20] ^= 0xff;
  writeFileSync(join(dir, 'checkpoint_step20.pt'), bad);
  age(join(dir, 'checkpoint_step20.pt'), 1);
  writeFileSync(join(dir, 'checkpoint_step10.pt'), ref(10));
  age(join(dir, 'checkpoint_step10.pt'), 2);
  const t = setInterval(() => appendFileSync(growing, Buffer.alloc(4096)), 100);
  const wait = 1200;
  try {
    const t0 = Date.now();
    const r = await scanCheckpoints(host, dir, { stableWaitMs: wait });
    const took = Date.now() - t0;
    assert.equal(r.found?.step, 10);
    assert.match(r.why[0]!, /checkpoint_step30\.pt: still being written/);
    assert.match(r.why[1]!, /checkpoint_step20\.pt: skipped, CRC mismatch/);
    // three waits in turn take at least 3 x 1.2 s; one shared wait, 1.2 s and the reads
    assert.ok(took >= wait && took < 2 * wait, `the pick took ${took} ms for three fresh files`);
  } finally {
    clearInterval(t);
  }
});

// status passes the checkpoints its run model already saw complete (build.ts: the saving rank
// stepped past it): on the real trainer saving every 20 steps, half the statuses in a row waited
test('a fresh file another look saw complete at this size and time needs no settle wait; one that changed since still does', async () => {
  const { statSync } = await import('node:fs');
  const seen = (p: string) => ({ path: p, size: statSync(p).size, mtimeMs: statSync(p).mtimeMs });
  const dir = tempDir('ck-seen');
  const done = join(dir, 'checkpoint_step10.pt');
  writeFileSync(done, ref(10));
  const wait = 3000;
  // just written: without the other look's word it waits, with it it is picked at once
  let t0 = Date.now();
  assert.equal((await scanCheckpoints(host, dir, { stableWaitMs: wait })).found?.step, 10);
  const alone = Date.now() - t0;
  assert.ok(alone >= wait, `a fresh file no look vouched for was picked without its wait (${alone} ms)`);
  t0 = Date.now();
  assert.equal((await scanCheckpoints(host, dir, { stableWaitMs: wait, settled: [seen(done)] })).found?.step, 10);
  const vouched = Date.now() - t0;
  assert.ok(vouched < wait, `the pick waited ${vouched} ms for a file seen complete at this size and time`);
  // seen settled at a size it no longer has: written since, so it waits and is judged again
  const dir2 = tempDir('ck-seen-grow');
  writeFileSync(join(dir2, 'checkpoint_step5.pt'), ref(5));
  age(join(dir2, 'checkpoint_step5.pt'), 30);
  const growing = join(dir2, 'checkpoint_step20.pt');
  writeFileSync(growing, zip(true));
  const stale = seen(growing);
  const tg = setInterval(() => appendFileSync(growing, Buffer.alloc(4096)), 100);
  try {
    await new Promise((r) => setTimeout(r, 250));
    const g = await scanCheckpoints(host, dir2, { stableWaitMs: 500, settled: [stale] });
    assert.equal(g.found?.step, 5);
    assert.match(g.why[0]!, /checkpoint_step20\.pt: still being written/);
  } finally {
    clearInterval(tg);
  }
});

test('no checkpoints, or an empty dir: null', async () => {
  assert.equal(await newestCompleteCheckpoint(host, tempDir('ck-none')), null);
  assert.equal(await newestCompleteCheckpoint(host, join(tempDir('ck-none'), 'missing')), null);
});

// ---- multi-segment runs, built from the real trainer's rules (contract §1.16, §1.5): each start
// writes a `boot` heartbeat with its pid; --resume loads weights only and the step count restarts
// at 1; rank 0 saves checkpoint_step{N}.pt on N % save_every == 0 (same name across segments);
// torch.save writes a zip whose end-of-central-directory record ends the file.

interface SegSpec {
  pid: number;
  /** seconds before now that this segment booted */
  bootAgo: number;
  steps: number;
  saveEvery: number;
  /** the segment stops writing checkpoints after this many seconds (a crash mid-save: null) */
  halfWrittenAt?: number;
}

/** Lays out an out_dir as the real trainer leaves it after these segments (one step per second). */
function realTrainerRun(tag: string, segs: SegSpec[], log?: string[]): string {
  const dir = tempDir(tag);
  const hb: string[] = [];
  for (const g of segs) {
    const boot = Date.now() / 1000 - g.bootAgo;
    hb.push(
      JSON.stringify({
        ts: boot,
        iso: new Date(boot * 1000).toISOString().replace('Z', 'Z'),
        pid: g.pid,
        rank: 0,
        step: 0,
        msg: 'boot',
        phase: 'start',
      }),
    );
    for (let s = 1; s <= g.steps; s++) {
      const t = boot + 2 + s;
      hb.push(
        JSON.stringify({ ts: t, pid: g.pid, rank: 0, step: s, msg: 'progress', loss: 5 - s / 100, toks_per_s: 900 }),
      );
      hb.push(JSON.stringify({ ts: t, pid: g.pid, rank: 0, step: s, msg: 'step_end', phase: 'end' }));
      if (s % g.saveEvery === 0) {
        const f = join(dir, `checkpoint_step${s}.pt`);
        writeFileSync(f, zip(g.halfWrittenAt !== s));
        utimesSync(f, t + 0.5, t + 0.5);
      }
    }
  }
  writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), hb.join('\n') + '\n');
  if (log) writeFileSync(join(dir, 'train.log'), log.join('\n') + '\n');
  return dir;
}

test("resumed once: the later segment's checkpoint_step20.pt beats the earlier segment's checkpoint_step60.pt", async () => {
  const dir = realTrainerRun('ck-seg', [
    { pid: 4101, bootAgo: 400, steps: 60, saveEvery: 20 },
    { pid: 4202, bootAgo: 200, steps: 25, saveEvery: 20 },
  ]);
  const segs = await readRunSegments(host, dir);
  assert.deepEqual(
    segs.map((g) => [g.index, g.pid, g.lastStep]),
    [
      [0, 4101, 60],
      [1, 4202, 25],
    ],
  );
  const p = await pickResumeCheckpoint(host, dir, { logFiles: [] });
  assert.equal(p.found?.name, 'checkpoint_step20.pt');
  assert.equal(p.found?.segment, 1);
  assert.match(p.found!.why, /by segment #1 \(pid 4202, the newest\)/);
  assert.match(p.found!.why, /checkpoint_step60\.pt has a higher step but segment #0 wrote it earlier/);
  // segment 2 already replaced segment 1's step-20 file; steps 40 and 60 are next
  assert.match(
    p.warnings.join('\n'),
    /checkpoint_step40\.pt, checkpoint_step60\.pt \(segment #0\) will be overwritten/,
  );
  // the older API callers (supervisor restarts, halt-after-checkpoint) get the same file
  assert.equal((await newestCompleteCheckpoint(host, dir))?.path, join(dir, 'checkpoint_step20.pt'));
});

test('resumed twice, the newest segment crashed mid-save: the newest COMPLETE weights, from the segment before', async () => {
  const dir = realTrainerRun('ck-seg3', [
    { pid: 5101, bootAgo: 600, steps: 60, saveEvery: 20 },
    { pid: 5202, bootAgo: 400, steps: 40, saveEvery: 20 },
    { pid: 5303, bootAgo: 200, steps: 20, saveEvery: 20, halfWrittenAt: 20 },
  ]);
  const p = await pickResumeCheckpoint(host, dir);
  // step 20 is segment 3's torn file, step 40 is segment 2's, step 60 segment 1's
  assert.equal(p.found?.name, 'checkpoint_step40.pt');
  assert.equal(p.found?.segment, 1);
  assert.match(p.skipped[0]!, /checkpoint_step20\.pt: skipped, zip without its end-of-central-directory/);
});

test('the trainer log is cross-checked: a failed resume means the newest segment trained from scratch', async () => {
  const dir = realTrainerRun(
    'ck-log',
    [
      { pid: 6101, bootAgo: 400, steps: 60, saveEvery: 20 },
      { pid: 6202, bootAgo: 200, steps: 20, saveEvery: 20 },
    ],
    [
      '[boot] loading config x.yaml',
      "[train] resume failed: [Errno 2] No such file or directory: 'artifacts/m7c_125m/checkpoint_step60.pt'",
      'step 0001 | loss 5.6914',
    ],
  );
  const p = await pickResumeCheckpoint(host, dir, { logFiles: [join(dir, 'train.log')] });
  assert.equal(p.found?.name, 'checkpoint_step20.pt');
  assert.match(
    p.warnings[0]!,
    /resume failed .* trained from scratch, so checkpoint_step20\.pt holds from-scratch weights/,
  );
  writeFileSync(join(dir, 'train.log'), `[train] resumed from ${join(dir, 'checkpoint_step60.pt')}\n`);
  const q = await pickResumeCheckpoint(host, dir, { logFiles: [join(dir, 'train.log')] });
  assert.match(q.found!.why, /log: the last start resumed from checkpoint_step60\.pt/);
  assert.ok(!q.warnings.some((w) => /from scratch/.test(w)));
});

test('a history too large to scan (status answers from the tail): the same file by write time, and it says what it skipped', async () => {
  const dir = realTrainerRun('ck-unscanned', [
    { pid: 4101, bootAgo: 400, steps: 60, saveEvery: 20 },
    { pid: 4202, bootAgo: 200, steps: 25, saveEvery: 20 },
  ]);
  const p = await pickResumeCheckpoint(host, dir, { logFiles: [], segmentScanMaxBytes: 1024 });
  assert.equal(
    p.found?.name,
    'checkpoint_step20.pt',
    'the lower-numbered file of the later segment, not the highest step',
  );
  assert.equal(p.found?.segment, null);
  assert.match(
    p.warnings.join('\n'),
    /heartbeat_rank0\.jsonl \(0 MiB\) not scanned for segments: ordered by write time/,
  );
  const all = await pickResumeCheckpoint(host, dir, { logFiles: [], segmentScanMaxBytes: 64 * 2 ** 20 });
  assert.equal(all.found?.segment, 1, 'under the bound the history is scanned as before');
});
