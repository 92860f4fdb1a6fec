// The numbers an operator asks for (src/checks/numbers.ts) through the one judge: MFU with its
// arithmetic and peak, "unknown peak" said (never guessed), restarts and a storm, the newest
// checkpoint's age. No process: unit tier.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { evaluateOnce } from '../../src/checks/index.js';
import type { SupervisorState } from '../../src/trainer/control/types.js';
import { gpu, liveRun, proc, procs, series } from './helpers.js';

const T0 = 1_700_000_000_000;

function run() {
  const r = liveRun({ step: 300, t: T0 });
  r.identity.model = { dim: 768, nLayers: 12, nHeads: 12, nKvGroups: 2, dK: 64, dV: 64, vocab: 256 };
  r.identity.worldSize = 2;
  r.identity.dtype = 'bfloat16';
  r.series.toksPerS = series([40_000, 41_000, 40_500, 40_000, 40_200], { step0: 200, every: 20 });
  return r;
}

test('MFU: the arithmetic and the peak it assumed, on a GPU in the peak table', () => {
  const ev = evaluateOnce({ now: T0, run: run(), procs: null, gpu: gpu([{}, {}]) });
  const m = ev.numbers.mfu!;
  assert.ok(m.value !== null && m.value > 0 && m.value < 1, String(m.value));
  assert.deepEqual(m.peak, { devices: 2, perDeviceFlops: 312e12, label: 'A100 bf16' });
  assert.equal(m.unknownPeak, null);
  assert.match(m.arithmetic, /40\.2k? ?tok\/s|40200 tok\/s|4\.02e\+4 tok\/s/);
  assert.match(m.arithmetic, /vs 2 × A100 bf16 peak 312 TFLOP\/s → MFU [\d.]+ %/);
  assert.ok(Math.abs(m.value! - m.achievedFlops / (2 * 312e12)) < 1e-12);
});

test('MFU: a GPU not in the table is "unknown peak", never guessed, and no plausibility alert from it', () => {
  const ev = evaluateOnce({ now: T0, run: run(), procs: null, gpu: gpu([{ name: 'NVIDIA B300 SXM6' }]) });
  const m = ev.numbers.mfu!;
  assert.equal(m.value, null);
  assert.equal(m.peak, null);
  assert.match(m.unknownPeak!, /'NVIDIA B300 SXM6' is not in the peak table/);
  assert.match(m.arithmetic, /TFLOP\/s; unknown peak:/);
  assert.ok(!ev.alerts.some((a) => a.rule === 'throughput-plausibility'));
  // no model dims: no MFU at all (nothing to multiply)
  const r = run();
  r.identity.model = null;
  r.identity.config = 'configs/unknown.yaml';
  assert.equal(evaluateOnce({ now: T0, run: r, procs: null, gpu: gpu([{}]) }).numbers.mfu, null);
});

test('MFU: two ranks sharing one H200 (seen live) count one GPU, not one per rank', () => {
  // the real nsa-vibe trainer, 2 ranks under torchrun on one H200: env.json says each rank saw 1
  // CUDA device; the cockpit's telemetry maps both ranks to the one GPU
  const shared = () => {
    const r = run();
    r.identity.gpuName = 'NVIDIA H200';
    r.identity.cudaDeviceCount = 1;
    r.identity.dtype = 'torch.float32';
    return r;
  };
  const both = procs([proc(0, 'R', { pid: 649 }), proc(1, 'R', { pid: 650 })]);
  // telemetry: the one device the ranks use
  const tele = evaluateOnce({ now: T0, run: shared(), procs: both, gpu: gpu([{ name: 'NVIDIA H200' }]) }).numbers.mfu!;
  assert.match(tele.arithmetic, /vs 1 × H200 tf32 peak 495 TFLOP\/s → MFU/);
  // `status`: no telemetry, but both ranks are on this host and each saw one device: the same answer
  const local = evaluateOnce({ now: T0, run: shared(), procs: both, gpu: null }).numbers.mfu!;
  assert.equal(local.value, tele.value);
  assert.deepEqual(local.peak, { devices: 1, perDeviceFlops: 495e12, label: 'H200 tf32' });
  // an ended run (no processes to look at): one GPU per rank is assumed, and said
  const ended = evaluateOnce({ now: T0, run: shared(), procs: null, gpu: null }).numbers.mfu!;
  assert.equal(ended.peak!.devices, 2);
  assert.match(
    ended.arithmetic,
    /2 × H200 tf32 peak 495 TFLOP\/s \(one GPU per rank assumed: each rank saw 1 CUDA device\) → MFU/,
  );
});

test('restarts: the supervisor count, a storm when 3 failures fall within 10 min; checkpoint age', () => {
  const sup = (exits: number[]): SupervisorState => ({
    runDir: '/tmp/run',
    profile: null,
    supervisor: { pid: 1, startTime: '1' },
    child: null,
    state: 'running',
    restarts: exits.length,
    maxRestarts: 5,
    exitCodes: exits.map((ago) => ({ at: T0 - ago * 1000, code: 1, signal: null })),
    lastCommand: [],
    resumeFrom: null,
    updatedAt: T0,
  });
  let ev = evaluateOnce({ now: T0, run: run(), procs: null, gpu: null, supervisor: sup([30, 200, 500]) });
  assert.deepEqual(
    { ...ev.numbers.restarts, windowS: undefined },
    { count: 3, max: 5, recent: 3, windowS: undefined, storm: true, source: 'supervisor' },
  );
  assert.ok(
    ev.alerts.some((a) => a.id === 'supervisor:storm'),
    'the storm alert says it too',
  );
  ev = evaluateOnce({ now: T0, run: run(), procs: null, gpu: null, supervisor: sup([30, 2000, 5000]) });
  assert.equal(ev.numbers.restarts!.storm, false);
  assert.equal(ev.numbers.restarts!.recent, 1);
  // no supervisor: relaunches are the run's segments begun by a new process (boot, or a resume that
  // restarted the step count); 3 within 10 min is a storm of its own alert
  const r = run();
  const seg = (index: number, cause: 'start' | 'boot' | 'step-backwards', agoS: number) => ({
    index,
    firstStep: 1,
    lastStep: 10,
    startTs: T0 - agoS * 1000,
    bootTs: T0 - agoS * 1000,
    pid: 100 + index,
    cause,
  });
  r.segments = [seg(0, 'start', 3000), seg(1, 'boot', 2000)];
  r.checkpoints = [
    {
      name: 'checkpoint_step100.pt',
      path: '/tmp/run/checkpoint_step100.pt',
      step: 100,
      size: 1,
      mtimeMs: T0 - 600_000,
      fsdp: false,
      complete: true,
    },
    {
      name: 'checkpoint_step200.pt',
      path: '/tmp/run/checkpoint_step200.pt',
      step: 200,
      size: 1,
      mtimeMs: T0 - 90_000,
      fsdp: false,
      complete: true,
    },
    {
      name: 'checkpoint_step300.pt',
      path: '/tmp/run/checkpoint_step300.pt',
      step: 300,
      size: 1,
      mtimeMs: T0 - 1_000,
      fsdp: false,
      complete: false,
    },
  ];
  ev = evaluateOnce({ now: T0, run: r, procs: null, gpu: null });
  assert.equal(ev.numbers.restarts!.count, 1);
  assert.equal(ev.numbers.restarts!.source, 'heartbeat boots');
  assert.ok(!ev.alerts.some((a) => a.id === 'restarts:storm'));
  r.segments.push(seg(2, 'step-backwards', 400), seg(3, 'boot', 200), seg(4, 'boot', 60));
  const storm = evaluateOnce({ now: T0, run: r, procs: null, gpu: null });
  assert.deepEqual(
    [storm.numbers.restarts!.count, storm.numbers.restarts!.recent, storm.numbers.restarts!.storm],
    [4, 3, true],
  );
  const al = storm.alerts.find((a) => a.id === 'restarts:storm');
  assert.equal(al?.severity, 'warning');
  assert.match(al!.title, /restart storm: the trainer started 3 times in 10m/);
  assert.deepEqual(ev.numbers.lastCheckpoint, { name: 'checkpoint_step200.pt', step: 200, ageS: 90 });
});
