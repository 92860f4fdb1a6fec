// train.log lines that matter, with the trainer's exact characters (U+2014 em dash, U+2011 in
// "FineWeb‑Edu"), and the reset a new `[boot] loading config` brings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TrainLog } from '../../../src/trainer/run/readers/trainlog.js';

function feed(lines: string[]): TrainLog {
  const l = new TrainLog('train.log', 5);
  for (const x of lines) l.line(x);
  return l;
}

test('FATAL non-finite, OOM, loader fallback, resume and overrides are recognised', () => {
  const l = feed([
    '[boot] loading config configs/m7c_125m_2xa100_production.yaml',
    '[boot] effective config: S=2048 B=2 accum=2 gc=on',
    '[ddp] process group ready | backend=nccl world_size=2 timeout_min=15',
    '[trace] overriding steps to 1200',
    '[train] dataset=fineweb_edu tokenizer=byte',
    '[error] FineWeb\u2011Edu loader failed: timeout after 60s',
    '[warn] Falling back to synthetic dataset due to loader failure',
    '[train] resumed from artifacts/m7c_125m/checkpoint_step5000.pt',
    'torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB',
    '[train][FATAL] non-finite loss detected \u2014 aborting run.',
  ]);
  assert.equal(l.tail.effectiveConfig, 'S=2048 B=2 accum=2 gc=on');
  assert.equal(l.worldSize, 2);
  assert.equal(l.stepsOverride, 1200);
  assert.equal(l.dataset, 'fineweb_edu');
  assert.equal(l.loaderFailed, 'timeout after 60s');
  assert.equal(l.syntheticFallback, true);
  assert.equal(l.tail.resumedFrom, 'artifacts/m7c_125m/checkpoint_step5000.pt');
  assert.equal(l.tail.oom, true);
  assert.equal(l.tail.fatalNonFinite, true);
  assert.equal(l.tail.lines.length, 5, 'the tail is bounded');
  assert.equal(l.tail.lines.at(-1), '[train][FATAL] non-finite loss detected \u2014 aborting run.');
});

test("a new boot in the same log clears the previous process's halt/fatal/oom flags", () => {
  const l = feed([
    '[boot] loading config a.yaml',
    '[train] HALT file detected \u2014 stopping gracefully.',
    '[boot] loading config a.yaml',
    'step 0001 | loss 5.6914 | lr 1.00e-05 | toks/s 20',
  ]);
  assert.equal(l.tail.haltSeen, false);
  const h = feed(['[boot] loading config a.yaml', '[train] HALT file detected \u2014 stopping gracefully.']);
  assert.equal(h.tail.haltSeen, true);
});
