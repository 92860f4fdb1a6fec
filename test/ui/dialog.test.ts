import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dialogView } from '../../src/ui/dialog.js';
import { plain } from '../../src/ui/text.js';
import { baseState } from './helpers.js';

const text = (lines: Parameters<typeof plain>[0][]) => lines.map((l) => plain(l)).join('\n');

test('halt dialog: the steps at risk are told per trainer — the reference trainer saves on HALT, nsa-vibe does not', () => {
  const s = baseState();
  s.run.step = 202;
  s.stepsAtRisk = { steps: 27, lastCheckpointStep: 175, savesOnHalt: false };
  const real = text(dialogView({ kind: 'halt-choose', startedAt: Date.now() }, s, Date.now(), 100).lines);
  assert.match(real, /newest complete checkpoint: step 175/);
  assert.match(real, /halting now loses 27 steps \(the nsa-vibe trainer writes no checkpoint on HALT\)/);
  s.stepsAtRisk = { steps: 0, lastCheckpointStep: 175, savesOnHalt: true };
  const ref = text(dialogView({ kind: 'halt-choose', startedAt: Date.now() }, s, Date.now(), 100).lines);
  assert.match(ref, /loses nothing: this trainer saves a checkpoint when it sees \.HALT/);
  assert.doesNotMatch(ref, /writes no checkpoint/);
});

test('relaunch dialog: names the file the trainer layer chose and why — a later segment\'s lower step — and the hand-launched command', () => {
  const s = baseState();
  s.run.checkpoints = [
    { name: 'checkpoint_step60.pt', path: '/o/checkpoint_step60.pt', step: 60, size: 1, mtimeMs: 1000, fsdp: false, complete: true },
    { name: 'checkpoint_step20.pt', path: '/o/checkpoint_step20.pt', step: 20, size: 1, mtimeMs: 2000, fsdp: false, complete: true },
  ];
  const info = {
    refusal: null,
    resume: { name: 'checkpoint_step20.pt', path: '/o/checkpoint_step20.pt', step: 20, segment: 1, why: 'newest complete weights: written 05:25:00 by segment #1; checkpoint_step60.pt has a higher step but segment #0 wrote it earlier' },
    fresh: false,
    warnings: ['checkpoint names repeat across segments: checkpoint_step60.pt (segment #0) will be overwritten'],
    skipped: [],
    adopted: '(cd /repo && python -m torch.distributed.run --nproc_per_node=2 train.py) with CONFIG=c.yaml',
  };
  const v = text(dialogView({ kind: 'relaunch', stage: 'confirm', input: '', haltInput: '', removeHalt: false, result: null, error: null, info }, s, Date.now(), 200).lines);
  assert.match(v, /resumes from checkpoint_step20\.pt \(step 20\)/);
  assert.doesNotMatch(v, /resumes from checkpoint_step60/);
  assert.match(v, /segment #0 wrote it earlier/);
  assert.match(v, /will be overwritten/);
  assert.match(v, /started by hand; runs again under the supervisor: \(cd \/repo && python -m torch\.distributed\.run/);
  assert.match(v, /type the run name/);
  const checking = text(dialogView({ kind: 'relaunch', stage: 'checking', input: '', haltInput: '', removeHalt: false, result: null, error: null, info: null }, s, Date.now(), 200).lines);
  assert.match(checking, /checking what a relaunch would do/);
  assert.doesNotMatch(checking, /type the run name/);
});

test('a refusal is wrapped to the dialog, not cut at its edge', () => {
  const why = 'the run was not started by nsa-top and never seen running, so its launch command is unknown: start it with a profile — nsa-top launch --profile NAME -- --resume /very/long/path/checkpoint_step40.pt';
  const v = dialogView({ kind: 'refused', what: 'relaunch', why }, baseState(), Date.now(), 60);
  assert.ok(v.lines.length > 3);
  assert.match(text(v.lines).replace(/\n/g, ' '), /checkpoint_step40\.pt/);
});
