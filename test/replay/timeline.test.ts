// The replay's pure parts: the cursor (step, play, speed, markers), `--at` read into a moment, the
// dating of line files (a line is never shown before its time), the footer's timeline and the
// refusal of every action key in a replay.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  advance,
  markerFrom,
  nextSpeed,
  parseAt,
  stepBy,
  stepMs,
  toggle,
  type Cursor,
} from '../../src/replay/timeline.js';
import {
  dateJsonLines,
  dateLog,
  dateStepCsv,
  dumpTime,
  lineTs,
  mtimeBelievable,
  sizeAt,
} from '../../src/replay/dated.js';
import type { ReplayMarker } from '../../src/replay/source.js';
import type { CockpitState, ReplayView } from '../../src/cockpit/state.js';
import { timelineLine } from '../../src/ui/panels/timeline.js';
import { KEYMAP } from '../../src/ui/keymap.js';
import { replayBindingFor } from '../../src/ui/replaykeys.js';
import { plain } from '../../src/ui/text.js';
import { compose } from '../../src/ui/compose.js';
import { initialView } from '../../src/ui/view.js';
import { baseState } from '../ui/helpers.js';

const span = { start: 1_000_000, end: 1_100_000 };
const cur = (at: number, playing = false, speed = 1): Cursor => ({ at, playing, speed });

test('a step moves a hundredth of the span (at least 1 s), pauses, and stops at the ends', () => {
  assert.equal(stepMs(span), 1000);
  assert.equal(stepMs({ start: 0, end: 3_600_000 }), 36_000);
  assert.deepEqual(stepBy(cur(1_050_000, true), span, 1), cur(1_051_000, false));
  assert.equal(stepBy(cur(span.start), span, -1).at, span.start);
  assert.equal(stepBy(cur(span.end), span, 1).at, span.end);
});

test('playback advances by wall time × speed and stops at the end; play at the end starts over', () => {
  assert.equal(advance(cur(1_000_000, true, 10), span, 500).at, 1_005_000);
  assert.equal(advance(cur(1_000_000, false, 10), span, 500).at, 1_000_000, 'paused: still');
  const last = advance(cur(1_099_000, true, 10), span, 500);
  assert.deepEqual(last, cur(span.end, false, 10));
  assert.deepEqual(toggle(last, span), cur(span.start, true, 10));
  assert.equal(toggle(cur(1_050_000, true), span).playing, false);
  assert.equal(nextSpeed(1, 1), 2);
  assert.equal(nextSpeed(1, -1), 0.5);
  assert.equal(nextSpeed(0.25, -1), 0.25);
  assert.equal(nextSpeed(600, 1), 600);
  assert.equal(nextSpeed(3, 1), 10, 'an odd --speed joins the ladder above it');
});

test('the next and previous marker are strictly after / before the cursor', () => {
  const ms: ReplayMarker[] = [
    { at: 1_010_000, kind: 'dump', label: 'a' },
    { at: 1_020_000, kind: 'alert', label: 'b' },
    { at: 1_030_000, kind: 'action', label: 'c' },
  ];
  assert.equal(markerFrom(ms, 1_020_000, 1)?.label, 'c');
  assert.equal(markerFrom(ms, 1_020_000, -1)?.label, 'a');
  assert.equal(markerFrom(ms, 1_000_000, -1), null);
  assert.equal(markerFrom(ms, 1_030_000, 1), null);
});

test('--at: ISO, HH:MM[:SS] in local time on the span, step=N or a bare number; bad input says why', () => {
  const start = new Date(2026, 10, 21, 23, 54, 44).getTime();
  const s = { start, end: start + 3 * 3600_000 };
  assert.deepEqual(parseAt('step=31', s), { step: 31 });
  assert.deepEqual(parseAt('31', s), { step: 31 });
  assert.deepEqual(parseAt('23:54:50', s), { at: new Date(2026, 10, 21, 23, 54, 50).getTime() });
  // past midnight: the next day the span reaches
  assert.deepEqual(parseAt('01:30', s), { at: new Date(2026, 10, 22, 1, 30, 0).getTime() });
  assert.deepEqual(parseAt('2026-11-21T23:54:50Z', s), { at: Date.parse('2026-11-21T23:54:50Z') });
  assert.throws(() => parseAt('12:00', s), /--at 12:00: the recording has no such moment/);
  assert.throws(() => parseAt('25:00', s), /not a clock time/);
  assert.throws(() => parseAt('yesterday', s), /not a time or a step/);
});

test('line files are dated by their records; an undated line never shows before its time', () => {
  const B = 1_795_305_000; // seconds: a run's heartbeats are stamped in 2026
  const hb = Buffer.from(
    `{"ts": ${B + 100}.0, "msg": "boot", "step": 0}\n{"ts": ${B + 101.5}, "msg": "progress", "step": 1}\ntorn\n{"ts": ${B + 103}, "step": 2}\n`,
  );
  const cuts = dateJsonLines(hb, 0);
  const ms = (s: number) => (B + s) * 1000;
  assert.deepEqual(
    cuts.map((c) => c.at),
    [ms(100), ms(101.5), ms(103), ms(103)],
    'a torn line goes with the next record',
  );
  assert.equal(sizeAt(cuts, ms(99)), 0);
  assert.equal(sizeAt(cuts, ms(101.5)), cuts[1]!.end);
  const steps = [
    { step: 1, at: 101_000 },
    { step: 2, at: 102_000 },
    { step: 3, at: 103_000 },
    // a relaunch resumes at 2: rows are matched in order
    { step: 2, at: 110_000 },
    { step: 3, at: 111_000 },
  ];
  const csv = dateStepCsv(Buffer.from('step,loss\n1,5\n2,5\n3,5\n2,5\n3,5\n'), steps, 120_000);
  assert.deepEqual(
    csv.map((c) => c.at),
    [101_000, 101_000, 102_000, 103_000, 110_000, 111_000],
  );
  const log = dateLog(
    Buffer.from(
      '[boot] loading config x\nstep 0001 | loss 5\nstep 0002 | loss 5\nTraceback: crash\n[train] resumed from ckpt\nstep 0002 | loss 5\n[train] HALT file detected — stopping gracefully.\n',
    ),
    steps,
    120_000,
    100_000,
  );
  assert.deepEqual(
    log.map((c) => c.at),
    [100_000, 101_000, 102_000, 110_000, 110_000, 110_000, 120_000],
    'boot lines at the boot; the crash and resume banner with the resumed step; the tail at the end of the records',
  );
});

test('a stack dump is timed by its own first line, else its name; an mtime long after the records is not believed', () => {
  assert.equal(
    dumpTime('stackdump_1795305288.txt', 'Signal 10 at 2026-11-21T23:54:48.469765Z\n'),
    Date.parse('2026-11-21T23:54:48.469Z'),
  );
  assert.equal(dumpTime('stackdump_1795305288.txt', 'garbage'), 1795305288_000);
  assert.equal(dumpTime('notes.txt', null), null);
  // a garbage time is no date (it would put the span in the year 10^290)
  assert.equal(lineTs('{"ts": 1e300, "step": 5}'), null);
  assert.equal(lineTs('{"ts": "yesterday"}'), null);
  assert.equal(lineTs('{"ts": 1795305284.6, "step": 5}'), 1795305284600);
  assert.equal(dumpTime('stackdump_99999999999999.txt', null), null);
  const rec = { start: 1_000_000, end: 2_000_000 };
  assert.equal(mtimeBelievable(2_000_000 + 60_000, rec), true);
  assert.equal(mtimeBelievable(2_000_000 + 3600_000, rec), false);
  assert.equal(mtimeBelievable(5, null), true, 'no records: the mtime is all there is');
});

function view(at: number, markers: ReplayMarker[], playing = false): ReplayView {
  return { at, span, markers, playing, speed: 2, origin: 'trainer files only', run: '/runs/a' };
}

test('the footer timeline: markers by glyph on the span, the cursor, what it sits on', () => {
  const markers: ReplayMarker[] = [
    { at: 1_000_000, kind: 'state', label: 'STARTING → RUNNING' },
    { at: 1_050_000, kind: 'dump', label: 'stack dump stackdump_1.txt' },
    { at: 1_100_000, kind: 'alert', label: 'critical step frozen' },
  ];
  const mid = plain(timelineLine(view(1_050_000, markers), 120));
  assert.equal([...mid].length, 120);
  assert.match(mid, /^‖ 2× │S━+●─+!│ D stack dump stackdump_1\.txt/);
  const before = plain(timelineLine(view(1_020_000, markers, true), 120));
  assert.match(before, /^▶ 2× │S━+●─+D─+!│ space play/, 'between markers: the keys');
  // two markers at one moment: the most telling is named, the other counted
  const both = plain(
    timelineLine(
      view(1_070_000, [
        { at: 1_070_000, kind: 'state', label: 'STALLED → STARTING' },
        { at: 1_070_000, kind: 'restart', label: 'relaunch: rank 0 booted again' },
      ]),
      120,
    ),
  );
  assert.match(both, /│ R relaunch: rank 0 booted again \(\+1\) *$/);
});

test('in a replay every action key is refused with the reason, and the timeline keys are its own', () => {
  const s: CockpitState = { ...baseState(), replay: view(1_050_000, []) };
  for (const b of KEYMAP.filter((x) => ['dump', 'halt', 'relaunch', 'ack'].includes(x.command))) {
    const off = b.disabled?.(s);
    assert.ok(off, `${b.command} refused`);
    assert.equal(off.short, 'replay');
    assert.match(off.why, /^replay: this is a recording of \/runs\/a at \d\d:\d\d:\d\d, not the run now/);
  }
  // the keys that only look still work
  assert.equal(KEYMAP.find((b) => b.command === 'zoom')?.disabled?.(s) ?? null, null);
  assert.equal(replayBindingFor(' ', {})?.command, 'play');
  assert.equal(replayBindingFor(']', {})?.command, 'next-marker');
  assert.equal(replayBindingFor('h', {}), null, 'h stays the main keymap’s (and is refused there)');
  // no timeline key shadows a main-screen key
  for (const k of [' ', ',', '.', '[', ']', '-', '+', '=', '<', '>'])
    assert.equal(
      KEYMAP.some((b) => b.keys.includes(k)),
      false,
      k,
    );
});

test('a notice lasts its time on this machine’s clock even when the moment shown is days ago (replay) or a host’s clock is off', () => {
  const at = Date.parse('2026-11-21T23:54:50Z');
  const s: CockpitState = { ...baseState(), at, clockOffsetMs: at - Date.now(), replay: view(at, []) };
  const v = initialView();
  const footer = (until: number) =>
    plain(
      compose(s, { ...v, notice: { text: 'no action on x', until } }, 120, 40, Date.now() + s.clockOffsetMs!).lines.at(
        -1,
      )!,
    );
  assert.match(footer(Date.now() + 5000), /^no action on x/);
  const gone = footer(Date.now() - 1);
  assert.match(gone, /^‖ 2× │/, `gone once its time is up: the timeline again (${gone})`);
});
