// `--at TIME|step=N` read against a journal's span (src/journal/at.ts), pure: ISO with and without a
// zone, HH:MM[:SS] local on the newest day at or before the journal's end (a night's run crosses
// midnight), step=N, and one-line errors for what it cannot read or what lies outside.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { outsideSpan, parseAt } from '../../src/journal/at.js';

const local = (y: number, mo: number, d: number, h: number, mi: number, s = 0) =>
  new Date(y, mo - 1, d, h, mi, s).getTime();

test('--at: ISO, HH:MM[:SS] local on the right day, step=N', () => {
  // a journal from 23:50 to 00:20 the next night
  const span = { start: local(2026, 11, 25, 23, 50), end: local(2026, 11, 26, 0, 20) };
  assert.deepEqual(parseAt('2026-11-26T03:12:00Z', span), { time: Date.UTC(2026, 10, 26, 3, 12) });
  assert.deepEqual(parseAt('2026-11-26T00:05:00', span), { time: local(2026, 11, 26, 0, 5) });
  assert.deepEqual(parseAt('00:05', span), { time: local(2026, 11, 26, 0, 5) });
  assert.deepEqual(
    parseAt('23:55:30', span),
    { time: local(2026, 11, 25, 23, 55, 30) },
    'before midnight: the day before',
  );
  assert.deepEqual(parseAt(' step=1200 ', span), { step: 1200 });
  // a minute that began before the journal and ends inside it names the journal's start
  const s2 = { start: local(2026, 11, 26, 3, 12, 40), end: local(2026, 11, 26, 4, 0) };
  assert.deepEqual(parseAt('03:12', s2), { time: s2.start });
  for (const bad of ['yesterday', '25:00', '3pm', 'step=', 'step=-1', '2026-13-45T99:00'])
    assert.match((parseAt(bad, span) as { error: string }).error, /^--at .*: (neither a time|not a time of day)/, bad);
});

test('outside the journal: one line naming both ends; inside: null', () => {
  const span = { start: local(2026, 11, 26, 3, 0), end: local(2026, 11, 26, 4, 0) };
  assert.equal(outsideSpan(local(2026, 11, 26, 3, 30), span), null);
  assert.equal(outsideSpan(span.end, span), null);
  assert.equal(
    outsideSpan(local(2026, 11, 26, 2, 0), span),
    '2026-11-26 02:00:00 is outside the journal (2026-11-26 03:00:00 – 2026-11-26 04:00:00)',
  );
});
