// The charts' plot (src/ui/plot.ts) draws what asciichart.plot printed, character for character:
// asciichart is the reference here (a devDependency), on any series the charts can hand it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import asciichart from 'asciichart';
import fc from 'fast-check';
import { plotRows } from '../../src/ui/plot.js';

const label7 = (x: number) => {
  const s = Math.abs(x) >= 1000 ? x.toExponential(1) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3);
  return s.padStart(7).slice(-7);
};

function same(
  series: number[][],
  o: { height: number; min: number; max: number; offset: number; format: (x: number, i: number) => string },
) {
  const want = asciichart.plot(series.length === 1 ? series[0]! : series, o).split('\n');
  assert.deepEqual(plotRows(series, o), want);
}

test('the plot is asciichart.plot, row for row: rises, falls, flats, a threshold under the data, the zero crossing', () => {
  const o = { height: 7, min: -2, max: 9, offset: 2, format: label7 };
  same([[0, 1, 2, 5, 9, 9, 3, -2, -2, 4]], o);
  same([[3, 3, 3, 3]], { ...o, min: 2.9, max: 3.1 });
  same([[5]], { ...o, min: 4, max: 6 });
  same(
    [
      [4, 4, 4, 4, 4, 4],
      [1, 7, 2, 8, 3, 9],
    ],
    { ...o, min: 1, max: 9 },
  );
  // an offset past the label's width, and asciichart's default label format
  same([[0.5, -0.25, 1]], {
    height: 4,
    min: -0.25,
    max: 1,
    offset: 9,
    format: (x) => `           ${x.toFixed(2)}`.slice(-11),
  });
});

test('the plot is asciichart.plot on arbitrary series, heights, bounds and thresholds', () => {
  const value = fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true });
  fc.assert(
    fc.property(
      fc.array(value, { minLength: 1, maxLength: 80 }),
      fc.option(value, { nil: undefined }),
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 1, max: 10 }),
      (values, threshold, height, offset) => {
        let min = Math.min(...values, threshold ?? Infinity);
        let max = Math.max(...values, threshold ?? -Infinity);
        if (max - min < 1e-9) {
          max += Math.abs(max) * 0.01 + 1e-6;
          min -= Math.abs(min) * 0.01 + 1e-6;
        }
        const series = threshold === undefined ? [values] : [values.map(() => threshold), values];
        same(series, { height, min, max, offset, format: label7 });
      },
    ),
    { numRuns: 1500 },
  );
});
