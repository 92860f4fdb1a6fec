// Every key of a burst, in order: Ink hands a run of plain characters over as one string ("jjjjj",
// five Tabs, a paste, keys a laggy link flushed together); KeyReader splits it into the keys a
// terminal sent one by one, keeps mouse reports out of the key tables, and the App acts on each.
// Also: number keys, the spatial tab order, the footer's word on a key that does nothing, a click
// on a rank row, and `d` on the selected rank.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compose } from '../../src/ui/compose.js';
import { charKey, KeyReader, parseMouse } from '../../src/ui/input.js';
import { commandFor, PANEL_NUMBERS } from '../../src/ui/keymap.js';
import { layout, type Layout } from '../../src/ui/layout.js';
import { hitTest } from '../../src/ui/pointer.js';
import { visiblePanels } from '../../src/ui/compose.js';
import { initialView } from '../../src/ui/view.js';
import { keyWord } from '../../src/ui/useKeys.js';
import { createActions } from '../../src/cockpit/actions.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { dumpAll } from '../../src/trainer/control/actions.js';
import { dumpsPanel } from '../../src/ui/panels/lists.js';
import { emptySnapshot, type StackDump } from '../../src/trainer/run/snapshot.js';
import { proc, procs } from '../checks/helpers.js';
import { appOnTty, baseState, recordingActions } from './helpers.js';

const keys = (r: KeyReader, input: string, key = {}) =>
  r.read(input, key).map((e) => (e.kind === 'key' ? (commandFor(e.input, e.key)?.command ?? `?${e.input}`) : e.kind));

test('KeyReader: a run of characters is one key each, with the flags Ink gives it alone; mouse reports are not keys', () => {
  const r = new KeyReader();
  assert.deepEqual(keys(r, 'jjjjj'), Array(5).fill('scroll-down'));
  assert.deepEqual(keys(r, '\t\t\t\t\t'), Array(5).fill('focus-next'));
  assert.deepEqual(keys(r, 'gG'), ['top', 'bottom'], 'G carries shift, as Ink marks it');
  assert.deepEqual(keys(r, 'kkk'), Array(3).fill('scroll-up'));
  assert.deepEqual(keys(r, 'j\x0cq'), ['scroll-down', 'redraw', 'quit'], 'a control character inside a chunk');
  // a key Ink already named passes as it came
  assert.deepEqual(keys(r, '', { upArrow: true }), ['scroll-up']);
  assert.deepEqual(keys(r, 'd'), ['dump']);
  // the relaunch question's typed answer, with its Enter
  assert.deepEqual(
    r.read('621\r', {}).map((e) => (e.kind === 'key' ? [e.input, !!e.key.return] : null)),
    [
      ['6', false],
      ['2', false],
      ['1', false],
      ['', true],
    ],
  );
  // Esc and a key that is not a letter or digit in one chunk, which Ink hands over as the bare key
  // (no meta), a space with no character, or one Esc: the raw sequence says an Esc came first
  const ev = (input: string, key: object, raw: string) =>
    r
      .read(input, key, raw)
      .map((e) => (e.kind === 'key' ? (e.key.escape ? 'esc' : e.key.return ? 'enter' : e.input) : e.kind));
  assert.deepEqual(ev('?', {}, '\x1b?'), ['esc', '?']);
  assert.deepEqual(ev('/', {}, '\x1b/'), ['esc', '/']);
  assert.deepEqual(ev('', { meta: true }, '\x1b '), ['esc', ' ']);
  assert.deepEqual(ev('', { escape: true, meta: true }, '\x1b\x1b'), ['esc', 'esc']);
  assert.deepEqual(ev('', { return: true, meta: true }, '\x1b\r'), ['esc', 'enter']);
  assert.deepEqual(ev('?', {}, '?'), ['?'], 'a plain ? stays one key');
  assert.deepEqual(ev('', { escape: true, meta: true }, '\x1b'), ['esc'], 'a lone Esc stays one key');
  assert.deepEqual(ev('', { upArrow: true }, '\x1b[A'), [''], 'a sequence is not an Esc');
  assert.deepEqual(charKey('\x7f'), { input: '', key: { delete: true } });
  assert.deepEqual(charKey('\x03'), { input: 'c', key: { ctrl: true } });
  // SGR mouse, as Ink passes it on (its escape stripped) or whole
  assert.deepEqual(keys(r, '[<0;12;7M'), ['mouse']);
  const m = parseMouse('\x1b[<0;12;7M')!;
  assert.deepEqual([m.kind, m.button, m.x, m.y], ['press', 0, 12, 7]);
  assert.equal(parseMouse('[<0;12;7m')!.kind, 'release');
  assert.equal(parseMouse('[<64;1;1M')!.kind, 'wheel-up');
  assert.equal(parseMouse('[<65;1;1M')!.kind, 'wheel-down');
  assert.equal(parseMouse('[<16;1;1M')!.ctrl, true);
  assert.equal(parseMouse('[<0;1;1'), null);
  // a legacy X10 report: its three bytes are a place, not keys (column 68 would type d)
  assert.deepEqual(keys(r, '[M'), []);
  assert.deepEqual(keys(r, ' dd'), []);
  assert.deepEqual(keys(r, 'j'), ['scroll-down']);
  assert.equal(keyWord('/', {}), '/');
  assert.equal(keyWord('', { leftArrow: true }), '←');
  assert.equal(keyWord('x', { ctrl: true }), 'ctrl-x');
  assert.equal(keyWord('j', { meta: true }), 'alt-j');
  assert.equal(keyWord('', { escape: true, meta: true }), 'esc');
});

test('tab order follows the screen (columns left to right, each top to bottom); number keys name every panel', () => {
  const order = (cols: number, rows: number) =>
    visiblePanels(layout({ cols, rows, focus: 'training', zoom: null, gpuRows: 2, rankRows: 2 }));
  assert.deepEqual(order(120, 40), ['training', 'gates', 'log', 'gpus', 'ranks', 'alerts', 'dumps', 'actions']);
  assert.deepEqual(order(80, 24), ['training', 'ranks', 'gates', 'gpus', 'alerts', 'log', 'dumps', 'actions']);
  assert.deepEqual(order(200, 60), ['training', 'log', 'gpus', 'gates', 'ranks', 'alerts', 'dumps', 'actions']);
  assert.equal(PANEL_NUMBERS.length, 8);
  for (const [i, p] of PANEL_NUMBERS.entries()) {
    assert.equal(commandFor(String(i + 1), {})?.command, 'focus-panel', `${i + 1} → ${p}`);
  }
  assert.equal(commandFor('9', {})?.command, 'focus-panel', '9 answers (no panel 9 yet: it says so)');
});

function twoRanks() {
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R')]);
  return s;
}

test('hitTest: a title bar tab, a body line, a border', () => {
  const s = twoRanks();
  const f = compose(s, initialView(), 80, 24, Date.now());
  const L = f.layout as Extract<Layout, { kind: 'ok' }>;
  const group = L.slots.find((sl) => sl.panels.includes('log'))!;
  // "┌ Alerts⁵ │log⁶│dumps⁷│actions⁸ ..." — the "log" tab
  const row = f.lines[group.y]!.map((x) => x.text).join('');
  const at = row.indexOf('log', group.x);
  assert.equal(hitTest(L, s, at, group.y)?.panel, 'log', row);
  assert.equal(hitTest(L, s, at, group.y)?.title, true);
  const ranks = L.slots.find((sl) => sl.active === 'ranks')!;
  assert.deepEqual(
    [hitTest(L, s, ranks.x + 3, ranks.y + 2)?.panel, hitTest(L, s, ranks.x + 3, ranks.y + 2)?.line],
    ['ranks', 1],
  );
  assert.equal(hitTest(L, s, ranks.x, ranks.y + 2)?.line, null, 'the left border');
  assert.equal(hitTest(L, s, 5, 0), null, 'the header is no panel');
});

test('in the App: a burst in one write (tabs, j, mixed escapes), number keys, a word on an unbound key, a click on a rank, d on it', async () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R'), proc(2, 'R'), proc(3, 'R')]);
  const asked: (number[] | null)[] = [];
  const actions = recordingActions(false, {
    dump: async (_p, only) => {
      asked.push(only?.ranks ?? null);
      return { results: [{ rank: only?.ranks[0] ?? 0, pid: 1001, outcome: 'dumped', file: '/tmp/x' }], pySpy: false };
    },
  });
  const app = await appOnTty(s, actions, 120, 40);
  /** the newest frame Ink drew (it draws whole frames, the header's RUNNING on its first row) */
  const tail = () => {
    const all = app.screen();
    return all.slice(all.lastIndexOf(' RUNNING '));
  };
  const expect = async (re: RegExp, what: string, not = false) => {
    await app.until(() => re.test(tail()) !== not);
    assert.equal(re.test(tail()), !not, `${what}\n${tail()}`);
  };
  try {
    // wide layout: training → gates → log → gpus → ranks (four tabs), then two j's: rank 1 selected
    await app.press('\t\t\t\tjj');
    await expect(/r1 selected: d dumps it alone/, 'four tabs and two j in one write');
    // arrows and letters in one chunk, each in turn: ↓ r2, j r3, k r2, ↓ r3 (one lost would end on r2)
    await app.press('\x1b[Bjk\x1b[B');
    await expect(/r3 selected/, 'mixed escapes and letters');
    // a key that does nothing says so in the footer
    await app.press('x');
    await expect(/no action on 'x' — \? for help/, 'the word on an unbound key');
    // 1 focuses Training: j there scrolls it and leaves the selection; esc drops it
    await app.press('1j');
    await expect(/r3 selected/, 'j in Training does not move the selection');
    await app.press('\x1b');
    await new Promise((r) => setTimeout(r, 80)); // a lone esc is told from a sequence by a pause
    await expect(/selected: d dumps/, 'esc drops the selection', true);
    // a click on rank 2's row (ranks slot: its border, its column header, rows 0, 1, 2)
    const f = compose(s, initialView(), 120, 40, Date.now());
    const L = f.layout as Extract<Layout, { kind: 'ok' }>;
    const rk = L.slots.find((sl) => sl.active === 'ranks')!;
    await app.press(`\x1b[<0;${rk.x + 4};${rk.y + 5}M\x1b[<0;${rk.x + 4};${rk.y + 5}m`);
    await expect(/r2 selected/, 'a click on the row of rank 2');
    await app.press('d');
    await expect(/Stack dump of rank 2/, 'the dump dialog names the rank');
    assert.match(tail(), /rank 2 only — selected in the Ranks panel/);
    await app.until(() => asked.length > 0);
    assert.deepEqual(asked, [[2]], 'the action was asked for rank 2 alone');
    // while the dialog is open a mouse report types nothing and does nothing; enter closes it once done
    await app.press('\x1b[<0;5;5M', '\r');
    await expect(/Stack dump of rank 2/, 'the dialog closed', true);
    // esc and a key read in one chunk (a busy cockpit, a laggy link), which Ink hands over as an
    // alt-key: the two keys in order — the dialog closes, and the key acts (j: rank 3 selected)
    await app.press('d');
    await expect(/Stack dump of rank 2/, 'the dump dialog again');
    await app.press('\x1bj');
    await expect(/Stack dump of rank 2/, 'esc in the chunk closed the dialog', true);
    await expect(/r3 selected/, 'and j after it moved the selection');
    // the same with a key that is not a letter, which Ink hands over as the bare key: ? opens the help
    await app.press('d');
    await expect(/Stack dump of rank 3/, 'the dump dialog, for rank 3');
    await app.press('\x1b?');
    await expect(/Stack dump of rank 3/, 'esc before ? closed the dialog', true);
    await expect(/zoom the focused panel to the whole screen/, 'and ? opened the help');
  } finally {
    app.unmount();
  }
});

/** A signal dump of one rank whose main thread is at `func` (the place the groups compare). */
function dumpAt(rank: number, func: string, depth: number): StackDump {
  const frames = Array.from({ length: depth }, (_, i) => ({
    file: 'train.py',
    line: 100 + i,
    func: `f${i}`,
    code: null,
  }));
  frames.push({ file: 'train.py', line: 900, func, code: null });
  return {
    name: `stackdump_1795305288_rank${rank}_${4000 + rank}.txt`,
    path: `/x/stackdump_1795305288_rank${rank}_${4000 + rank}.txt`,
    kind: 'signal',
    fsdp: false,
    epoch: 1795305288,
    mtimeMs: 1795305288000,
    header: `Stack dump rank ${rank}`,
    signal: 10,
    rank,
    pid: 4000 + rank,
    step: 12,
    phase: null,
    threads: [{ name: 'MainThread', ident: String(rank), frames }],
    parseErrors: 0,
  };
}

test('the Dumps panel opens on the odd rank: its stack first, not the healthy majority’s long one', () => {
  // ranks 0, 2, 3 wait in the collective with a deep stack; rank 1 is elsewhere
  const run = { ...emptySnapshot('/tmp/run') };
  run.dumps = [
    dumpAt(0, 'all_reduce', 8),
    dumpAt(1, 'data_next', 2),
    dumpAt(2, 'all_reduce', 8),
    dumpAt(3, 'all_reduce', 8),
  ];
  const text = (over: Partial<CockpitState>) =>
    dumpsPanel({
      s: { ...baseState(run), ...over },
      v: initialView(),
      w: 100,
      h: 40,
      now: Date.now(),
      focused: true,
      zoomed: false,
    })
      .lines.map((l) => l.map((x) => x.text).join(''))
      .filter((l) => /^[◆●]/.test(l));
  // the odd-rank rule's answer
  assert.deepEqual(text({ dumpOdd: { rank: 1, where: 'data_next', others: 'all_reduce' } }), [
    '◆ ODD: r1  step 12',
    '● r0,r2,r3 (3 identical)  step 12',
  ]);
  // no odd-rank answer, but the state names rank 1 as the culprit
  assert.deepEqual(text({ culprit: { rank: 1, why: 'rank 1 is behind the others' } }), [
    '◆ ODD: r1  step 12',
    '● r0,r2,r3 (3 identical)  step 12',
  ]);
  // nobody named: the biggest group first, as before
  assert.deepEqual(text({}), ['● r0,r2,r3 (3 identical)  step 12', '● r1  step 12']);
});

test('a dump of a chosen rank that no proven process has: refused before anything is signalled or logged', async () => {
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R')]);
  const host = new LocalHost();
  const actions = createActions({ host, runDir: '/nonexistent/run', readOnly: false, state: () => s });
  await assert.rejects(
    actions.dump(() => {}, { ranks: [3] }),
    /rank 3 has no process proven: nothing signalled/,
  );
  // the control layer refuses the same, before its audited record
  const actor = { user: 't', tty: null, tmux: null, host: 'h', pid: 1 };
  await assert.rejects(
    dumpAll(host, '/nonexistent/run', [{ rank: 0, pid: 1000, startTime: '5000' }], actor, { ranks: [3] }),
    /rank 3: no proven process of this run has that rank: nothing signalled/,
  );
});
