// Charts sit on a step axis: a resumed run (steps repeating from a checkpoint) keeps one axis, the
// newest segment wins where steps overlap, and the resume point is marked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chart, chartText, ema, seriesPoints } from '../../src/ui/chart.js';
import { chart as reportChart } from '../../src/commands/report.js';
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
  assert.equal(
    ema(pts, 0.5),
    e,
    'the same points give the same array: the chart, cached by identity, is not re-plotted each frame',
  );
  assert.notEqual(ema(pts, 0.2), e, 'another alpha is another curve');
});

test('the report plots a resumed run on the same step axis as the cockpit, row for row', () => {
  const s = series();
  const report = reportChart(s, 8)!;
  const cockpit = chart(seriesPoints(s, 'all'), { w: 64 + 9, h: 9 }).map(plain);
  assert.deepEqual(report.split('\n'), cockpit, "one chart: the cockpit's rows, unstyled");
  const rows = report.split('\n');
  assert.equal(rows.length, 10, '9 plot rows and the step axis');
  assert.match(rows.at(-1)!, /step 1 ─+R─+ 80$/, 'by step (1 … 80), not by index (1 … 100), the resume marked');
  // plotted by step, the resumed run looks like the same run never interrupted: no saw-tooth where
  // steps 31-50 were trained twice (by index, the old segment's 31-50 would be drawn after its 50)
  const straight: Series = {
    recent: [
      ...series().recent.filter((p) => p.segment === 0 && p.step <= 30),
      ...series().recent.filter((p) => p.segment === 1),
    ].map((p) => ({ ...p, segment: 0 })),
    history: [],
    total: 80,
    nonFinite: 0,
  };
  const plainRun = reportChart(straight, 8)!.split('\n');
  assert.deepEqual(rows.slice(0, -1), plainRun.slice(0, -1));
  assert.equal(rows.at(-1)!.replace('R', '─'), plainRun.at(-1));
});

test('report: older history buckets come first on the same axis; fewer than two points draw nothing', () => {
  const s = series();
  const withHistory: Series = {
    ...s,
    recent: s.recent.filter((p) => p.step > 40),
    history: [{ stepFrom: 1, stepTo: 40, tFrom: null, tTo: null, min: 6, max: 10, last: 9, count: 40, segment: 0 }],
  };
  assert.match(reportChart(withHistory)!.split('\n').at(-1)!, /step 40 .* 80$/);
  const one: Series = { recent: [{ step: 5, t: null, value: 1, segment: 0 }], history: [], total: 1, nonFinite: 0 };
  assert.equal(reportChart(one), null);
  assert.equal(chartText(one, { plotW: 64, h: 9 }), null);
});
