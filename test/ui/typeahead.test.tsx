// No dangerous choice from type-ahead (src/ui/typeahead.ts): `hn` in one write opens the halt
// question and does not answer it; the dropped n is named; once the question has been on screen a
// moment, n halts. The App on a fake TTY (no process); bursts of harmless keys: burst.test.tsx.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dialogView } from '../../src/ui/dialogs/index.js';
import { plain } from '../../src/ui/text.js';
import { dropsKey, GUARD_MS, guardedOpening, ignoredText } from '../../src/ui/typeahead.js';
import { proc, procs } from '../checks/helpers.js';
import { appOnTty, baseState, recordingActions } from './helpers.js';

test('type-ahead guard: which dialogs and keys it holds, and what it says', () => {
  const choose = { kind: 'halt-choose' as const, startedAt: 5 };
  assert.equal(guardedOpening(choose), 'halt-choose@5');
  assert.equal(guardedOpening({ kind: 'help' }), null, 'help signals nothing');
  assert.equal(dropsKey(choose, 'halt-now'), true, 'not yet armed: n is dropped');
  assert.equal(dropsKey(choose, 'halt-after-checkpoint'), true);
  assert.equal(dropsKey(choose, 'close'), false, 'esc always acts');
  assert.equal(dropsKey(choose, undefined), false);
  assert.equal(dropsKey({ ...choose, armed: true }, 'halt-now'), false);
  const track = {
    kind: 'halt-track' as const,
    mode: 'now' as const,
    startedAt: 9,
    startStep: 1,
    result: null,
    escalation: null,
    killArmed: false,
  };
  for (const c of ['sigint', 'sigkill', 'cancel-request'] as const) assert.equal(dropsKey(track, c), true, c);
  assert.equal(dropsKey({ kind: 'relaunch', stage: 'confirm' } as never, 'submit'), false);
  assert.equal(ignoredText(0), null);
  assert.match(ignoredText(1)!, /^ignored 1 key typed before the dialog opened/);
  assert.match(ignoredText(3)!, /^ignored 3 keys typed/);
  assert.ok(GUARD_MS >= 100 && GUARD_MS <= 400, 'a moment: under reading time, over a burst');
  // the question does not offer its keys until armed, and names what it dropped
  const s = baseState();
  const v = (d: typeof choose & { armed?: boolean; ignored?: number }) =>
    dialogView(d, s, 0, 100).lines.map(plain).join('\n');
  assert.doesNotMatch(v(choose), /n halt now/);
  assert.match(v(choose), /keys typed before this was on screen are ignored/);
  assert.match(v({ ...choose, ignored: 1 }), /ignored 1 key typed before the dialog opened/);
  assert.match(v({ ...choose, armed: true }), /n halt now \(\.HALT\) {3}c halt after the next checkpoint/);
});

test('hn in one write opens the halt question but does not halt; n once it is on screen does', async () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R')]);
  const actions = recordingActions(false);
  const app = await appOnTty(s, actions, 100, 30);
  try {
    await app.press('hn');
    await app.until(() => /ignored 1 key typed before the dialog opened/.test(app.screen()));
    assert.match(app.screen(), /ignored 1 key typed before the dialog opened/);
    assert.deepEqual(actions.calls, [], 'n from the burst halted nothing');
    // armed: the keys are offered, and n acts
    await app.until(() => /n halt now \(\.HALT\) {3}c/.test(app.screen()));
    await app.press('n');
    await app.until(() => actions.calls.length > 0);
    assert.deepEqual(actions.calls, ['halt now']);
  } finally {
    app.unmount();
  }
});
