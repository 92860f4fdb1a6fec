// One style for what a person reads (src/format.ts): durations are compact and unit-suffixed
// everywhere — the cockpit, the judge's alerts, `nsa-top status`/`report` and the trainer's messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ago, byCodeUnit, bytes, clock, dur, grouped, mib, NA, num, pct, si, sig } from '../src/format.js';

test('durations: "45s", "3m32s", "2h05m", "2d04h" — never "212 s" or "3 m 32 s"', () => {
  const cases: [number, string][] = [
    [0, '0s'],
    [45, '45s'],
    [59.4, '59s'],
    [59.6, '1m00s'],
    [212, '3m32s'],
    [300, '5m00s'],
    [2001, '33m21s'],
    [7500, '2h05m'],
    [86400 + 4 * 3600 + 59, '1d04h'],
  ];
  for (const [s, want] of cases) assert.equal(dur(s), want, String(s));
  assert.equal(dur(-3), '0s', 'a clock skew is not a negative duration');
  assert.equal(dur(null), NA);
  assert.equal(dur(NaN), NA);
  assert.equal(dur(Infinity), '∞');
});

test('precise durations keep two significant digits below 10 s, the same style above', () => {
  assert.equal(dur(0.44, 'precise'), '0.44s');
  assert.equal(dur(0.0123, 'precise'), '0.012s');
  assert.equal(dur(2.54, 'precise'), '2.5s');
  assert.equal(dur(3, 'precise'), '3s');
  assert.equal(dur(9.96, 'precise'), '10s');
  assert.equal(dur(212.4, 'precise'), '3m32s');
  assert.equal(dur(2.54), '3s', 'whole seconds by default (the cockpit ticks once a second)');
});

test('ages and clock times', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);
  assert.equal(ago(now - 12_400, now), '12s ago');
  assert.equal(ago(now - 1_500, now, 'precise'), '1.5s ago');
  assert.equal(ago(null, now), NA);
  assert.match(clock(now), /^\d\d:\d\d:\d\d$/);
});

test('numbers: fixed decimals, significant digits, SI, percent; extremes in exponent form', () => {
  assert.equal(num(2.34567, 4), '2.3457');
  assert.equal(num(3e-4, 4), '3.00e-4');
  assert.equal(num(null), NA);
  assert.equal(num(undefined, 4, '—'), '—', 'the CLI tables print unknown as an em dash');
  assert.equal(num(NaN), 'NaN', 'a non-finite value is shown, not hidden');
  assert.equal(sig(0.012345), '0.0123');
  assert.equal(sig(2001), '2000');
  assert.equal(sig(1.5), '1.5');
  assert.equal(sig(1e-5), '1.00e-5');
  assert.equal(si(1234), '1234');
  assert.equal(si(12_345), '12.3k');
  assert.equal(si(12_345_678), '12.3M');
  assert.equal(pct(12.345, 1), '12.3%');
  assert.equal(pct(null), NA);
});

test('sizes: MiB in a column, bytes in binary units', () => {
  assert.equal(mib(812.4), '812M');
  assert.equal(mib(40530), '39.6G');
  assert.equal(bytes(512), '512 B');
  assert.equal(bytes(1536), '1.5 KiB');
  assert.equal(bytes(12 * 2 ** 20), '12.0 MiB');
  assert.equal(bytes(1.25 * 2 ** 30), '1.25 GiB');
});

test('counts grouped by thousands as en-US writes them; ids sorted the same on every machine', () => {
  for (const n of [0, 7, 999, 1000, 12_345, 999_999.6, 1_234_567, -1234, 12_345_678_901])
    assert.equal(grouped(n), Math.round(n).toLocaleString('en-US'), String(n));
  assert.equal(grouped(NaN), 'NaN');
  assert.deepEqual(['rank1:b', 'Z', 'a', 'rank10', 'rank1'].sort(byCodeUnit), ['Z', 'a', 'rank1', 'rank10', 'rank1:b']);
});
