// SeriesAcc keeps the points pushed since it was last read as columns and makes point objects
// only for what is still in the window when read (readers/series.ts). Whatever the pushes, reads,
// merges and segment shifts, it must say exactly what the series did when every point was an
// object from its push: the oracle is that older class, verbatim (series-reference.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SeriesAcc } from '../../../src/trainer/run/readers/series.js';
import { ReferenceSeriesAcc } from './series-reference.js';

type Op =
  | { op: 'push'; n: number; back: boolean; nan: number; withT: boolean }
  | { op: 'read' }
  | { op: 'prepend'; n: number; shift: number }
  | { op: 'shift'; by: number };

const ops: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('push' as const),
      // runs of pushes long enough to fold many times over (a tail of thousands of rows)
      n: fc.oneof(fc.nat({ max: 5 }), fc.nat({ max: 300 })),
      back: fc.boolean(),
      nan: fc.nat({ max: 4 }),
      withT: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('read' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('prepend' as const), n: fc.nat({ max: 200 }), shift: fc.nat({ max: 3 }) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('shift' as const), by: fc.nat({ max: 3 }) }) },
);

/** what a reader of the series sees (toJSON twice: the cached answer too) */
function seen(s: SeriesAcc | ReferenceSeriesAcc) {
  return { size: s.size, last: s.last(), json: s.toJSON(), again: s.toJSON(), total: s.total, nonFinite: s.nonFinite };
}

test('SeriesAcc: any pushes, reads, merges and shifts read exactly as the every-point-an-object series', () => {
  fc.assert(
    fc.property(
      fc.record({
        recentWindow: fc.oneof(fc.constant(0), fc.nat({ max: 60 })),
        historyBuckets: fc.integer({ min: 1, max: 24 }),
      }),
      fc.array(ops, { maxLength: 40 }),
      (opts, script) => {
        const mine = new SeriesAcc(opts);
        const ref = new ReferenceSeriesAcc(opts);
        let step = 0;
        let seg = 0;
        let v = 0;
        const pushInto = (ss: (SeriesAcc | ReferenceSeriesAcc)[], n: number, nan: number, withT: boolean) => {
          for (let i = 0; i < n; i++) {
            step++;
            v = (v * 7 + 3) % 101;
            // non-finite values are counted, never kept: they must not take a place in the window
            const value = nan > 0 && i % (nan + 1) === nan ? (i % 2 ? NaN : Infinity) : v / 10 - 3;
            for (const s of ss) s.push(step, withT ? 1e12 + step * 1000.5 : null, value, seg);
          }
        };
        for (const o of script) {
          if (o.op === 'push') {
            if (o.back) {
              seg++;
              step = Math.max(0, step - 50);
            }
            pushInto([mine, ref], o.n, o.nan, o.withT);
          } else if (o.op === 'read') assert.deepEqual(seen(mine), seen(ref));
          else if (o.op === 'shift') {
            mine.shiftSegments(o.by);
            ref.shiftSegments(o.by);
            seg += o.by;
          } else {
            // older history read later (a huge file's backfill): a series of its own, merged in front
            const olderMine = new SeriesAcc(opts);
            const olderRef = new ReferenceSeriesAcc(opts);
            const [s0, seg0] = [step, seg];
            step = -1_000_000;
            seg = 0;
            pushInto([olderMine, olderRef], o.n, 0, false);
            [step, seg] = [s0, seg0 + o.shift];
            mine.prependHistory(olderMine, o.shift);
            ref.prependHistory(olderRef, o.shift);
          }
        }
        assert.deepEqual(seen(mine), seen(ref));
        assert.ok(mine.size <= Math.max(0, opts.recentWindow), 'the window stays bounded');
      },
    ),
    { numRuns: 400 },
  );
});

test('SeriesAcc: a tail of thousands of rows read at once keeps its window and buckets, and memory stays bounded', () => {
  const opts = { recentWindow: 2000, historyBuckets: 512 };
  const mine = new SeriesAcc(opts);
  const ref = new ReferenceSeriesAcc(opts);
  for (let i = 1; i <= 15_900; i++) {
    const value = i % 997 === 0 ? NaN : Math.sin(i / 50);
    mine.push(i, null, value, i > 9000 ? 1 : 0);
    ref.push(i, null, value, i > 9000 ? 1 : 0);
    // the pending columns never hold more than the window
    if (i % 1000 === 0) assert.ok(mine.size <= 2000);
  }
  const j = mine.toJSON();
  assert.equal(j.recent.length, 2000);
  assert.equal(j.recent[1999]!.step, 15_900);
  assert.deepEqual(j, ref.toJSON());
  // the cockpit's next poll: a few more rows, then the snapshot again (shares the old point objects)
  for (let i = 15_901; i <= 15_905; i++) {
    mine.push(i, null, i, 1);
    ref.push(i, null, i, 1);
  }
  const k = mine.toJSON();
  assert.deepEqual(k, ref.toJSON());
  assert.equal(k.recent[0], j.recent[5], 'points already handed out are shared, not copied');
});
