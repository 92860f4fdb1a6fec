// Keys as data: one matcher from Ink's (input, key) to a binding, the text on screen derived from the
// same key names, a reason for every key that does nothing (read-only said one way everywhere), and
// the dialogs' keys doing what their dialogs show.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { READ_ONLY_WHY } from '../../src/checks/control.js';
import { DIALOG_KEYS, dialogBindingFor, type DialogBinding, dialogView } from '../../src/ui/dialogs/index.js';
import { bindingFor, isKey, keysText, keyText } from '../../src/ui/keys.js';
import { commandFor, KEYMAP } from '../../src/ui/keymap.js';
import { footerLine } from '../../src/ui/panels/footer.js';
import { plain } from '../../src/ui/text.js';
import { proc, procs } from '../checks/helpers.js';
import { appOnTty, baseState, recordingActions } from './helpers.js';

const text = (lines: Parameters<typeof plain>[0][]) => lines.map(plain).join('\n');

test('one matcher: characters, ctrl, shift-tab, arrows, esc (which Ink also marks meta), DEL as backspace', () => {
  assert.ok(isKey('d', 'd', {}));
  assert.ok(!isKey('d', 'd', { ctrl: true }), 'ctrl-d is not d');
  assert.ok(!isKey('d', 'd', { meta: true }));
  assert.ok(isKey('ctrl+l', 'l', { ctrl: true }));
  assert.ok(!isKey('ctrl+l', 'l', {}));
  assert.ok(isKey('G', 'G', { shift: true }), 'Ink marks an upper-case letter shifted');
  assert.ok(isKey('tab', '', { tab: true }));
  assert.ok(!isKey('tab', '', { tab: true, shift: true }));
  assert.ok(isKey('shift+tab', '', { tab: true, shift: true }));
  assert.ok(isKey('up', '', { upArrow: true }));
  assert.ok(isKey('esc', '', { escape: true, meta: true }));
  assert.ok(isKey('backspace', '', { delete: true }));
  assert.ok(isKey('enter', '', { return: true }));
  assert.throws(() => isKey('ctrl+nope', 'n', {}), /unknown key name/);
  assert.equal(keyText('ctrl+l'), 'ctrl-l');
  assert.equal(keyText('shift+tab'), 'shift-tab');
  assert.equal(keysText({ keys: ['up', 'k'] }), '↑ / k');
  assert.equal(commandFor('l', { ctrl: true })?.command, 'redraw');
  assert.equal(commandFor('c', { ctrl: true })?.command, 'quit');
  assert.equal(commandFor('', { tab: true, shift: true })?.command, 'focus-prev');
  assert.equal(commandFor('k', {})?.command, 'scroll-up');
  assert.equal(commandFor('x', {}), null);
});

test('every key of the main screen reaches its own binding, and no two bindings of a table share a key', () => {
  const press = (name: string): [string, Record<string, boolean>] => {
    const [mods, base] = name.includes('+') ? [name.split('+').slice(0, -1), name.split('+').pop()!] : [[], name];
    const flags: Record<string, boolean> = { ctrl: mods.includes('ctrl'), shift: mods.includes('shift') };
    const named: Record<string, string> = {
      up: 'upArrow',
      down: 'downArrow',
      left: 'leftArrow',
      right: 'rightArrow',
      pgup: 'pageUp',
      pgdn: 'pageDown',
      home: 'home',
      end: 'end',
      enter: 'return',
      esc: 'escape',
      tab: 'tab',
      backspace: 'backspace',
    };
    if (named[base]) return ['', { ...flags, [named[base]]: true }];
    return [base, { ...flags, shift: flags.shift || /^[A-Z]$/.test(base) }];
  };
  for (const b of KEYMAP)
    for (const k of b.keys) assert.equal(bindingFor(KEYMAP, ...press(k))?.command, b.command, `${k} → ${b.command}`);
  const seen = new Map<string, string>();
  for (const b of KEYMAP)
    for (const k of b.keys) {
      assert.ok(!seen.has(k), `${k} is bound twice: ${seen.get(k)} and ${b.command}`);
      seen.set(k, b.command);
    }
  // a dialog's key never hides behind an earlier binding of that dialog that is always on
  for (const [kind, list] of Object.entries(DIALOG_KEYS) as [string, readonly DialogBinding[]][]) {
    const always = new Set<string>();
    for (const b of list) {
      for (const k of b.keys) assert.ok(!always.has(k), `${kind}: ${k} of ${b.command} is shadowed`);
      if (!b.disabled) for (const k of b.keys) always.add(k);
    }
  }
});

test('read-only: the footer, ? and a refused key all give the one reason (READ_ONLY_WHY), once in ?', async () => {
  const s = { ...baseState(), readOnly: true };
  const foot = plain(footerLine(s, 200, null));
  for (const h of ['dump', 'halt', 'relaunch', 'ack']) assert.match(foot, new RegExp(`${h}:read-only`));
  assert.match(foot, /e EMA /, 'keys that write nothing stay on');
  const help = text(dialogView({ kind: 'help' }, s, Date.now(), 120).lines);
  assert.equal(help.split(`disabled now: ${READ_ONLY_WHY}`).length - 1, 1, help);
  assert.match(help, /ctrl-l {6}redraw the whole screen/);
  for (const b of KEYMAP.filter((b) => ['dump', 'halt', 'relaunch', 'ack'].includes(b.command)))
    assert.equal(b.disabled?.(s)?.why, READ_ONLY_WHY);

  const actions = recordingActions(true);
  const app = await appOnTty(s, actions);
  try {
    await app.press('d');
    await app.until(() => /dump: refused/.test(app.screen()));
    assert.match(app.screen(), /dump: refused[\s\S]*--read-only/);
    assert.deepEqual(actions.calls, [], 'nothing was asked of the action layer');
  } finally {
    app.unmount();
  }
});

test('dialog keys: the halt-track window offers x, i and K only when they can act, and shows them as they are bound', () => {
  const now = Date.now();
  const s = baseState();
  s.procs = procs([proc(0, 'R')]);
  const d = {
    kind: 'halt-track' as const,
    mode: 'now' as const,
    startedAt: now - 1000,
    startStep: 1,
    result: null,
    escalation: null,
    killArmed: false,
    armed: true, // on screen past the type-ahead guard (typeahead.ts)
  };
  // no .HALT yet: i does nothing, x has no request to cancel; esc closes
  assert.equal(dialogBindingFor({ s, d, now }, 'i', {}), null);
  assert.equal(dialogBindingFor({ s, d, now }, 'x', {}), null);
  assert.equal(dialogBindingFor({ s, d, now }, '', { escape: true, meta: true })?.command, 'close');
  assert.equal(dialogBindingFor({ s, d, now }, 'c', { ctrl: true })?.command, 'quit');
  // .HALT long past its grace: both signals are offered, drawn with their bound keys
  s.run.control.halt = { present: true, content: 'halt', mtimeMs: now - 3_600_000 };
  assert.equal(dialogBindingFor({ s, d, now }, 'i', {})?.command, 'sigint');
  assert.equal(dialogBindingFor({ s, d, now }, 'K', { shift: true })?.command, 'sigkill');
  const v = text(dialogView(d, s, now, 120).lines);
  assert.match(v, /i SIGINT {2}K SIGKILL/);
  assert.match(v, /esc closes this window/);
  assert.match(text(dialogView({ ...d, killArmed: true }, s, now, 120).lines), /K press K again to SIGKILL/);
  // the footer, while the dialog takes the keys, lists the dialog's keys that act now, not the main screen's
  const foot = plain(footerLine(s, 200, null, d, now));
  assert.match(foot, /^dialog: i SIGINT K SIGKILL esc closes this window /);
  assert.doesNotMatch(foot, /d dump|x cancel/);
  assert.match(plain(footerLine(s, 200, null, { kind: 'help' }, now)), /^dialog: esc closes /);
});

test('keys in the App: halt question (ctrl-c answers no, c asks after the checkpoint), relaunch typing a name with q in it', async () => {
  const s = baseState();
  s.runState = 'EXITED';
  s.runStateWhy = 'no trainer process';
  s.procs = procs([proc(0, 'R')]);
  s.run = { ...s.run, identity: { ...s.run.identity, name: 'quiq' } };
  const actions = recordingActions(false);
  const app = await appOnTty(s, actions, 100, 30);
  try {
    s.runState = 'RUNNING'; // h is on for a running run
    await app.press('h');
    // its keys are offered (and act) once the question has been on screen a moment (typeahead.ts)
    await app.until(() => /n halt now \(\.HALT\) {3}c halt after the next checkpoint {3}esc cancel/.test(app.screen()));
    assert.match(app.screen(), /n halt now \(\.HALT\) {3}c halt after the next checkpoint {3}esc cancel/);
    let mark = app.mark();
    await app.press('\x03'); // ctrl-c at the question: no halt, the question closes, nsa-top stays
    await app.until(() => app.since(mark).length > 0);
    assert.doesNotMatch(app.since(mark), /Halt the run\?/);
    mark = app.mark();
    await app.press('h');
    await app.until(() => /n halt now \(\.HALT\) {3}c/.test(app.since(mark)));
    await app.press('c');
    await app.until(() => actions.calls.length > 0);
    assert.deepEqual(actions.calls, ['halt after-checkpoint']);
    await app.press('\x1b');
    await new Promise((r) => setTimeout(r, 60)); // a lone esc is told from a sequence by a pause
    s.runState = 'EXITED';
    await app.press('r');
    await app.until(() => /type the run name/.test(app.screen()));
    // q is typed into the name (it closes only once the relaunch is done); backspace erases
    await app.press('q', 'u', 'x', '\x7f', 'i', 'q', '\r');
    await app.until(() => actions.calls.length > 1);
    assert.deepEqual(actions.calls, ['halt after-checkpoint', 'relaunch']);
    await app.until(() => /relaunch done/.test(app.screen()));
    mark = app.mark();
    await app.press('q'); // done: q closes the dialog
    await app.until(() => !/Relaunch/.test(app.since(mark)) && app.since(mark).length > 0);
    assert.doesNotMatch(app.since(mark), /Relaunch/);
  } finally {
    app.unmount();
  }
});

test("a STALLED run: h does not offer c, and says why in the judge's words (a stalled run writes no checkpoint); c is refused, nothing requested", async () => {
  const s = baseState();
  s.runState = 'STALLED';
  s.runStateWhy = 'rank 1 (pid 1001) is stopped (T)';
  s.procs = procs([proc(0, 'S'), proc(1, 'T')]);
  const actions = recordingActions(false);
  const app = await appOnTty(s, actions, 120, 30);
  try {
    await app.press('h');
    // armed (its keys offered), c among them no more: the question says why instead
    await app.until(() => /n halt now \(\.HALT\) {3}esc cancel/.test(app.screen()));
    assert.doesNotMatch(app.screen(), /c halt after the next checkpoint/);
    assert.match(app.screen(), /c \(halt after the next checkpoint\) is not offered: the run is STALLED/);
    assert.match(app.screen(), /writes no checkpoint/);
    await app.press('c');
    await app.until(() => /halt after the next checkpoint: refused/.test(app.screen()));
    assert.match(app.screen(), /halt after the next checkpoint: refused/);
    assert.match(app.screen(), /the run is STALLED \(rank 1 \(pid 1001\) is stopped \(T\)\)/);
    assert.deepEqual(actions.calls, [], 'no request was made');
  } finally {
    app.unmount();
  }
});
