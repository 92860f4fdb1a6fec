// Charts sit on a step axis: a resumed run (steps repeating from a checkpoint) keeps one axis, the
// newest segment wins where steps overlap, and the resume point is marked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chart, ema, seriesPoints } from '../../src/ui/chart.js';
import { lineWidth, plain } from '../../src/ui/text.js';
import type { Series } from '../../src/trainer/run/snapshot.js';

function series(): Series {
  const recent = [];
  for (let s = 1; s <= 50; s++) recent.push({ step: s, t: null, value: 10 - s * 0.1, segment: 0 });
  // resumed from the step-30 checkpoint: steps 31..80 again, now in segment 1
  for (let s = 31; s <= 80; s++) recent.push({ step: s, t: null, value: 3, segment: 1 });
  return { recent, history: [], total: recent.length, nonFinite: 0 };
}

test('resume: one step axis, newest segment wins on overlap, resume point marked', () => {
  const pts = seriesPoints(series(), 'recent');
  assert.equal(pts.length, 80, 'one point per step');
  assert.deepEqual(
    pts.map((p) => p.step),
    Array.from({ length: 80 }, (_, i) => i + 1),
  );
  assert.equal(pts.find((p) => p.step === 40)!.value, 3, 'the resumed segment replaces the lost steps');
  const lines = chart(pts, { w: 60, h: 8 });
  assert.equal(lines.length, 9, 'h plot rows + the step axis');
  for (const l of lines) assert.ok(lineWidth(l) <= 60);
  const axis = plain(lines.at(-1)!);
  assert.match(axis, /step 1 .*R.* 80/, axis);
});

test('EMA smooths but starts at the first value', () => {
  const pts = [0, 10, 0, 10].map((v, i) => ({ step: i + 1, value: v, segment: 0 }));
  const e = ema(pts, 0.5);
  assert.equal(e[0]!.value, 0);
  assert.equal(e[1]!.value, 5);
  assert.ok(e[3]!.value < 10 && e[3]!.value > 0);
});
