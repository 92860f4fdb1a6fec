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
