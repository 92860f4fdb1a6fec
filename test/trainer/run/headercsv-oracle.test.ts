// k_stats.csv and fallback_counters.csv rows are read in place (HeaderCsv's fast path for rows that
// start with a digit): the same verdict, error text and last row as the general split-and-trim
// reading, which is kept below as it was (the oracle), on generated rows full of what trips a parser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { HeaderCsv, K_STATS_COLUMNS } from '../../../src/trainer/run/readers/csv.js';
import { parseNumCell } from '../../../src/trainer/run/readers/num.js';

/** HeaderCsv as it read every row before the fast path */
class Oracle {
  columns: string[] | null = null;
  last: Record<string, number> | null = null;
  rows = 0;
  line(text: string): string | null {
    const cells = text.split(',').map((c) => c.trim());
    if (/^["']?[A-Za-z_]/.test(cells[0]!)) {
      this.columns = cells.map((c) => c.replace(/^["']|["']$/g, ''));
      return null;
    }
    const cols = this.columns ?? K_STATS_COLUMNS;
    if (cells.length < cols.length) return `expected ${cols.length} columns, got ${cells.length}`;
    const row: Record<string, number> = {};
    for (let i = 0; i < cols.length; i++) {
      const v = parseNumCell(cells[i]!);
      if (v === null) return `column ${cols[i]} not a number`;
      row[cols[i]!] = v;
    }
    this.last = row;
    this.rows++;
    return null;
  }
}

const cell = fc.oneof(
  fc.integer({ min: -5, max: 100_000 }).map(String),
  fc.double({ noNaN: false }).map(String),
  fc.constantFrom(
    '',
    ' 1',
    '2 ',
    '1e5',
    '1E-3',
    '0x10',
    '.5',
    '5.',
    '-0',
    'nan',
    'inf',
    '-Infinity',
    '1\r',
    '"3"',
    'k_mean',
    '1e400',
    '12345678901234567890',
  ),
);
const row = fc.array(cell, { minLength: 1, maxLength: 7 }).map((cs) => cs.join(','));

test('HeaderCsv reads rows as the split-and-trim oracle does: verdicts, errors, the last row, columns', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(row, fc.constant('step,k_mean,k_max'), fc.constant('1,2,3,4,5')), { maxLength: 30 }),
      (lines) => {
        const a = new HeaderCsv(K_STATS_COLUMNS);
        const o = new Oracle();
        for (const l of lines) assert.equal(a.line(l), o.line(l), JSON.stringify(l));
        assert.deepEqual(a.last, o.last);
        assert.equal(a.rows, o.rows);
        assert.deepEqual(a.columns, o.columns);
      },
    ),
    { numRuns: 2000 },
  );
  // a bad row after a good one leaves the good one as the last
  const a = new HeaderCsv(K_STATS_COLUMNS);
  a.line('5,44.5,64,512,0.0391');
  assert.equal(a.line('6,44.5,x,512,0.1'), 'column k_max not a number');
  assert.deepEqual(a.last, { step: 5, k_mean: 44.5, k_max: 64, rows: 512, pct_at_max: 0.0391 });
});
