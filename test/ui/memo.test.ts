// What a frame keeps from the last one (src/ui: rank rows, the keys' verdicts, borders, padding,
// styles) must never show an old value: each memo is worked out again when its input changes, and
// is reused only while the input is the same. And a frame that did not change writes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lineToAnsi } from '../../src/ui/ansi.js';
import { compose } from '../../src/ui/compose.js';
import { dumpDisabled, haltDisabled, stateVerdicts } from '../../src/ui/keymap.js';
import { keyText } from '../../src/ui/keys.js';
import { footerLine } from '../../src/ui/panels/footer.js';
import { FramePainter } from '../../src/ui/paint.js';
import { rankRows } from '../../src/ui/panels/ranks.js';
import { plain, spaces } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { proc, procs } from '../checks/helpers.js';
import { baseState } from './helpers.js';

test('rank rows: the same members give the same rows without working them out again; a new member gives new rows', () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R')]);
  const a = rankRows(s);
  assert.equal(rankRows(s), a, 'asked twice for one frame (layout and panel): worked out once');
  assert.equal(rankRows({ ...s }), a, 'a new state object with the same members: the same rows');
  // a rank stops: the next process table is a new object, and the rows say so at once
  s.procs = procs([proc(0, 'R'), proc(1, 'T')]);
  const b = rankRows(s);
  assert.notEqual(b, a);
  assert.deepEqual(
    b.map((r) => r.proc?.proc.state),
    ['R', 'T'],
  );
  // each member it is made of counts: the evaluation's health too
  s.rankHealth = [{ rank: 1, health: 'critical', why: 'stopped (T)' }] as never;
  const c = rankRows(s);
  assert.notEqual(c, b);
  assert.equal(c[1]!.why, 'stopped (T)');
  assert.equal(c[1]!.role, 'crit');
});

test('the Ranks panel redraws a changed rank in the next frame, and an unchanged frame is not written again', () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R')]);
  const now = Date.now();
  const v = initialView();
  const writes: string[] = [];
  const p = new FramePainter((x) => writes.push(x), true);
  const f1 = compose(s, v, 120, 40, now);
  p.paint(f1.lines, 120, 40);
  assert.equal(writes.length, 1);
  // the same state and clock: the same frame, nothing written
  p.paint(compose({ ...s }, v, 120, 40, now).lines, 120, 40);
  assert.equal(writes.length, 1, 'an unchanged frame writes nothing');
  // rank 1 stops: its row changes in the very next frame
  const s2 = { ...s, procs: procs([proc(0, 'R'), proc(1, 'T')]) };
  const f2 = compose(s2, v, 120, 40, now);
  const row = (f: typeof f1, pid: number) => f.lines.map(plain).find((l) => l.includes(` ${pid} `)) ?? '';
  assert.match(row(f1, 1001), / 1001 +R /);
  assert.match(row(f2, 1001), / 1001 +T /);
  p.paint(f2.lines, 120, 40);
  assert.equal(writes.length, 2);
  assert.match(writes[1]!, /1001 +T /);
});

test("the keys' verdicts: judged once per input, judged again when any part of it changes (in place too)", () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R')]);
  const a = stateVerdicts(s);
  assert.equal(stateVerdicts(s), a, 'the footer asks once per key: one judgement');
  assert.equal(dumpDisabled(s), null);
  // the same state object, changed in place (the tests' states are): never the old verdict
  s.runState = 'FINISHED';
  s.runStateWhy = 'metrics.json written';
  s.procs = procs([]);
  const b = stateVerdicts(s);
  assert.notEqual(b, a);
  assert.match(haltDisabled(s)?.why ?? '', /FINISHED/);
  assert.notEqual(dumpDisabled(s), null);
  // a relaunch's step count is part of the input
  assert.notEqual(stateVerdicts(s, 400), b);
  assert.equal(stateVerdicts(s), stateVerdicts(s));
});

test('padding and styles made once are the same text as made each time', () => {
  for (const n of [0, 1, 7, 60, 511, 600]) assert.equal(spaces(n), ' '.repeat(n));
  assert.equal(spaces(60), spaces(60));
  const roles = [undefined, 'ok', 'warn', 'crit', 'info', 'dim', 'accent', 'title', 'focus', 'bar', 'muted'] as const;
  const sgr = { ok: 32, warn: 33, crit: 31, info: 36, dim: 90, accent: 35, title: 37, focus: 36, bar: 34 } as const;
  for (const nc of [false, true])
    for (const role of roles)
      for (const bold of [false, true])
        for (const inverse of [false, true]) {
          const codes: number[] = [];
          if (!nc && role && role !== 'muted') codes.push(sgr[role]);
          if (bold || role === 'crit' || role === 'title') codes.push(1);
          if (role === 'dim' && nc) codes.push(2);
          if (inverse) codes.push(7);
          const want = codes.length ? `\x1b[${codes.join(';')}mx\x1b[0m` : 'x';
          // twice: the second comes from the cache
          for (let i = 0; i < 2; i++)
            assert.equal(
              lineToAnsi([{ text: 'x', role, bold, inverse }], nc),
              want,
              `${role} ${bold} ${inverse} ${nc}`,
            );
        }
});

test("the footer's key hints: the same line while the keys' verdicts are the same, a new one the frame a verdict changes", () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R')]);
  s.runState = 'RUNNING';
  const hints = (x: typeof s) => plain(footerLine(x, 200, null)).trim();
  const a = hints(s);
  assert.match(a, /^d dump h halt r relaunch:off\(RUNNING\)/);
  assert.equal(hints({ ...s }), a, 'a new state with the same verdicts');
  // the same state object changed in place: the hints follow at once
  s.runState = 'FINISHED';
  s.runStateWhy = 'metrics.json written';
  s.procs = procs([]);
  const b = hints(s);
  assert.notEqual(b, a);
  assert.match(b, /h halt:off\(FINISHED\)/);
  assert.doesNotMatch(b, /r relaunch:off/);
  s.runState = 'RUNNING';
  s.procs = procs([proc(0, 'R')]);
  assert.equal(hints(s), a, 'back to the first verdicts: the first hints');
  // a key's name, worked out once, is the same text each time
  for (const k of ['ctrl+l', 'up', 'shift+tab', 'q'] as const) assert.equal(keyText(k), keyText(k));
  assert.equal(keyText('ctrl+l'), 'ctrl-l');
  assert.equal(keyText('up'), '↑');
});
