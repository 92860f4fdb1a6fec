// The real trainer's output (made on a CPU, copied from ../shared/fixtures) read by RunModel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { utimesSync } from 'node:fs';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { mainThreadTop } from '../../../src/checks/dumplabels.js';
import { copyFixture, FIXTURES } from './helpers.js';

test('ddp2-dumps-halt: step, loss, both ranks, halt, dumps with threads and frames, metrics', async () => {
  const s = await new RunModel(new LocalHost(), join(FIXTURES, 'ddp2-dumps-halt')).poll();
  assert.equal(s.exists, true);
  assert.equal(s.step, 31);
  assert.equal(s.totalSteps, 400);
  assert.equal(s.loss, 5.7043561935424805, 'loss comes from the last progress record');
  assert.equal(s.lastProgress?.step, 31);
  assert.equal(s.ranks.length, 2);
  assert.deepEqual(
    s.ranks.map((r) => [r.rank, r.pid, r.lastMsg, r.lastStep]),
    [
      [0, 32202, 'step_end', 31],
      [1, 32203, 'boot', null],
    ],
  );
  assert.equal(Math.round(s.ranks[0]!.lastTs!), 1795305297360, 'heartbeat ts is seconds, stored as ms');
  assert.equal(s.identity.worldSize, 2);
  assert.equal(s.identity.backend, 'DDP');
  assert.equal(s.identity.config, 'configs/ddp2-dumps-halt.yaml');
  assert.equal(s.identity.flags.NSA_PREFILL_BATCHED, '1');
  assert.equal(s.identity.dataset, 'synthetic');
  assert.deepEqual(
    s.identity.model && [s.identity.model.dim, s.identity.model.nLayers, s.identity.model.vocab],
    [64, 2, 256],
  );
  assert.equal(s.control.halt.present, true);
  assert.equal(s.control.halt.content, '', 'the fixture .HALT is empty (touch)');
  assert.equal(s.log.haltSeen, true, 'HALT line with its em dash matched');
  assert.equal(s.ended, true);
  assert.equal(s.metrics?.loss_last, 5.7043561935424805);
  assert.equal(s.optStateMb, 1.04);
  assert.equal(s.data.dtFetchAbsent, true, 'synthetic data: no dt_fetch_s');
  assert.equal(s.gates?.entropyMean, 1.0984745025634766);
  assert.deepEqual(s.gates?.branchShares, [0.3301040530204773, 0.3384459912776947, 0.3314499258995056]);
  assert.equal(s.fallbacks?.total_fallbacks, 0);
  assert.equal(s.series.loss.recent.length, 31);
  assert.equal(s.seriesSource.loss, 'csv');
  assert.equal(s.checkpoints.length, 0);

  assert.equal(s.dumps.length, 2);
  assert.equal(s.dumpsTotal, 2);
  const [d1, d2] = s.dumps as [(typeof s.dumps)[0], (typeof s.dumps)[0]];
  assert.equal(d1.name, 'stackdump_1795305288.txt');
  assert.equal(d1.kind, 'signal');
  assert.equal(d1.signal, 10);
  assert.equal(d1.epoch, 1795305288);
  assert.deepEqual(
    d1.threads.map((t) => [t.name, t.ident, t.frames.length]),
    [
      ['MainThread', '139712319275712', 5],
      ['Thread-1 (_watchdog)', '139711705446080', 4],
    ],
  );
  assert.deepEqual(d1.threads[0]!.frames[1], {
    file: '/home/ubuntu/nsa-vibe/scripts/train_showcase.py',
    line: 1270,
    func: 'main',
    code: 'torch.distributed.all_reduce(_flag, op=torch.distributed.ReduceOp.SUM)',
  });
  assert.equal(mainThreadTop(d1)?.func, 'all_reduce');
  assert.equal(mainThreadTop(d2)?.func, 'backward');
  assert.equal(d1.parseErrors + d2.parseErrors, 0);
  for (const [name, h] of Object.entries(s.files)) assert.equal(h.parseErrors, 0, `${name}: ${h.lastError}`);
});

test('ddp2-h200-gpu (real trainer, 2 ranks on one H200): the GPU, the shared device, whose watchdog dump', async () => {
  const s = await new RunModel(new LocalHost(), join(FIXTURES, 'ddp2-h200-gpu')).poll();
  assert.equal(s.step, 6);
  assert.equal(s.identity.worldSize, 2);
  assert.equal(s.identity.gpuName, 'NVIDIA H200');
  assert.equal(s.identity.cudaDeviceCount, 1, 'each rank saw one CUDA device: the two ranks share it');
  assert.deepEqual(
    s.ranks.map((r) => [r.rank, r.pid, r.lastMsg, r.memAllocMiB, r.memReservedMiB]),
    [
      [0, 649, 'step_end', 346, 7642],
      [1, 650, 'watchdog_dump', 1499, 7642],
    ],
  );
  // the trainer's own watchdog writes no rank into its file; rank 1's heartbeat record names it
  assert.deepEqual(
    s.dumps.map((d) => [d.name, d.kind, d.rank]),
    [
      ['stackdump_1795702208.txt', 'signal', null],
      ['stackdump_1795702209.txt', 'signal', null],
      ['watchdog_stackdump_1795702217.txt', 'watchdog', 1],
    ],
  );
});

test('single: 40 steps, checkpoints 20 and 40, ended, one segment', async () => {
  const f = copyFixture('single');
  try {
    // checkpoints last written a minute ago: settled
    const old = (Date.now() - 60_000) / 1000;
    for (const n of ['checkpoint_step20.pt', 'checkpoint_step40.pt']) utimesSync(join(f.dir, n), old, old);
    const s = await new RunModel(new LocalHost(), f.dir).poll();
    assert.equal(s.step, 40);
    assert.equal(s.totalSteps, 40);
    assert.equal(s.loss, 5.702354431152344);
    assert.equal(s.lr, 0);
    assert.equal(s.ranks.length, 1);
    assert.equal(s.identity.backend, 'single');
    assert.deepEqual(
      s.checkpoints.map((c) => [c.step, c.complete, c.fsdp]),
      [
        [20, true, false],
        [40, true, false],
      ],
    );
    assert.equal(s.ended, true);
    assert.equal(s.etaS, null, 'no ETA for an ended run');
    assert.equal(s.segments.length, 1);
    assert.equal(s.control.halt.present, false);
    assert.equal(s.dumps.length, 0);
    assert.ok(s.stepTimeS !== null && s.stepTimeS > 0.3 && s.stepTimeS < 1.5, `step time ${s.stepTimeS}`);
    assert.equal(s.series.loss.recent.length, 40);
    assert.equal(s.series.gateEntropy.recent.length, 40);
  } finally {
    f.done();
  }
});

test('a checkpoint still growing is not complete; settled after an unchanged poll', async () => {
  const f = copyFixture('single');
  try {
    const { appendFileSync } = await import('node:fs');
    const p = join(f.dir, 'checkpoint_step60.pt');
    appendFileSync(p, 'partial');
    const m = new RunModel(new LocalHost(), f.dir);
    let s = await m.poll();
    assert.equal(s.checkpoints.find((c) => c.step === 60)?.complete, false, 'just written');
    const old = (Date.now() - 5000) / 1000;
    utimesSync(p, old, old);
    s = await m.poll();
    assert.equal(s.checkpoints.find((c) => c.step === 60)?.complete, true, 'same size across two polls and 5 s old');
    appendFileSync(p, 'more');
    s = await m.poll();
    assert.equal(s.checkpoints.find((c) => c.step === 60)?.complete, false, 'grew again');
  } finally {
    f.done();
  }
});

test('env.json with one odd field (torch: null) still yields CONFIG, flags and world size', async () => {
  const { dir, done } = copyFixture('ddp2-dumps-halt');
  try {
    const { writeFileSync, readFileSync } = await import('node:fs');
    const env = JSON.parse(readFileSync(join(dir, 'env.json'), 'utf8'));
    env.torch = null;
    env.cuda_device_count = 'unknown';
    writeFileSync(join(dir, 'env.json'), JSON.stringify(env));
    const snap = await new RunModel(new LocalHost(), dir).poll();
    assert.equal(snap.identity.config, 'configs/ddp2-dumps-halt.yaml');
    assert.equal(snap.identity.flags.NSA_PREFILL_BATCHED, '1');
    assert.equal(snap.identity.worldSize, 2);
    assert.equal(snap.files['env.json']?.parseErrors ?? 0, 0);
  } finally {
    done();
  }
});
