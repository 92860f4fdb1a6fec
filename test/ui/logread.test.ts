// A log you can read (issue 20), the parts that need no terminal: the scroll-back read backwards from
// a real file through LocalHost (bounded, byte offsets exact, lines written since counted), a view
// anchored on a line that holds still while the log grows, search highlight and sideways scroll, and
// the help fitted to 80×24 with its close key always on screen.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalHost } from '../../src/remote/local/host.js';
import { LogBack, MAX_LINES } from '../../src/trainer/run/logback.js';
import { compose } from '../../src/ui/compose.js';
import { dialogBindings, helpMaxScroll } from '../../src/ui/dialogs/index.js';
import { keysText } from '../../src/ui/keys.js';
import { KEYMAP } from '../../src/ui/keymap.js';
import { logPanel, logWindow } from '../../src/ui/panels/log.js';
import { highlight, shiftLine } from '../../src/ui/search.js';
import { logKeys } from '../../src/ui/logkeys.js';
import { plain, t } from '../../src/ui/text.js';
import { initialView, type ViewState } from '../../src/ui/view.js';
import { baseState, fixtureSnapshot } from './helpers.js';
import { dumpsBody, dumpsPanel } from '../../src/ui/panels/lists.js';

const dir = mkdtempSync(join(tmpdir(), 'nsa-top-logread-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const host = new LocalHost();
after(() => host.close());

const line = (i: number) => `[train] step ${i} loss ${(3 + i / 1e5).toFixed(5)} ${'x'.repeat(i % 50)}`;

test('the scroll-back reads the log backwards by byte ranges: offsets exact, older lines on demand, bounded', async () => {
  const f = join(dir, 'train.log');
  const n = MAX_LINES + 5000;
  writeFileSync(f, Array.from({ length: n }, (_, i) => line(i) + '\n').join('') + 'half a line');
  const bytes = readFileSync(f);
  const lb = new LogBack(host);
  let changes = 0;
  lb.subscribe(() => changes++);
  await lb.open(f, 3000);
  let p = lb.get();
  assert.ok(p.lines.length >= 3000 && p.lines.length < 6000, `read about what was asked (${p.lines.length})`);
  assert.equal(p.lines[p.lines.length - 1]!.text, line(n - 1), 'the last complete line; the half line is not one');
  for (const l of [p.lines[0]!, p.lines[p.lines.length - 1]!])
    assert.equal(bytes.toString('utf8', l.at, l.at + l.text.length), l.text, 'each line is where its offset says');
  assert.ok(changes > 0);
  assert.equal(p.atStart, false);
  // older lines, as the view asks for them, up to the cap
  await lb.older(1e9);
  p = lb.get();
  assert.equal(p.lines.length, MAX_LINES, 'never more than the cap is kept');
  assert.ok(p.capped, 'says more lies before (the pager has it)');
  // the newest lines a read back pushed over the cap are counted, not kept: still contiguous
  assert.equal(p.lines[0]!.text, line(n - MAX_LINES - p.after));
  assert.equal(p.lines[p.lines.length - 1]!.text, line(n - 1 - p.after));
  const after0 = p.after;
  // the log grows: the new lines are counted (the view says how far behind live it is)
  appendFileSync(f, ' done\n' + Array.from({ length: 7 }, (_, i) => line(n + i) + '\n').join(''));
  await lb.refresh();
  assert.equal(lb.get().after, after0 + 8, 'the finished half line and 7 new ones, counted not kept');
  assert.equal(lb.get().lines.length, MAX_LINES);

  // a small log is read to its start
  const g = join(dir, 'small.log');
  writeFileSync(g, 'a\r\nb\n\nc\n');
  const sb = new LogBack(host);
  await sb.open(g, 100);
  assert.deepEqual(
    sb.get().lines.map((l) => [l.at, l.text]),
    [
      [0, 'a'],
      [3, 'b'],
      [5, ''],
      [6, 'c'],
    ],
  );
  assert.ok(sb.get().atStart);
  appendFileSync(g, 'd\ne\n');
  await sb.refresh();
  assert.deepEqual(
    sb.get().lines.map((l) => l.text),
    ['a', 'b', '', 'c', 'd', 'e'],
    'under the cap, new lines are kept',
  );
});

test('a scrolled-back Log holds its line while the log grows, and the title says how far behind live', async () => {
  const f = join(dir, 'grow.log');
  writeFileSync(f, Array.from({ length: 500 }, (_, i) => line(i) + '\n').join(''));
  const lb = new LogBack(host);
  await lb.open(f, 1000);
  const s = baseState();
  s.run.log.file = f;
  s.run.log.lines = Array.from({ length: 200 }, (_, i) => line(300 + i));
  const h = 10;
  const top = lb.get().lines[400]!;
  const v = (): ViewState => ({ ...initialView(), focus: 'log', logAnchor: top.at, logPage: lb.get() });
  const before = logPanel({ s, v: v(), w: 70, h, now: Date.now(), focused: true, zoomed: false });
  assert.match(plain(before.lines[0]!), /step 400 /);
  assert.match(before.note!, /↑ 90 lines behind, live: End/);
  assert.equal(before.more, undefined, 'no second number in the title (it printed ↑193 ↓193)');
  appendFileSync(f, Array.from({ length: 40 }, (_, i) => line(500 + i) + '\n').join(''));
  await lb.refresh();
  const later = logPanel({ s, v: v(), w: 70, h, now: Date.now(), focused: true, zoomed: false });
  assert.deepEqual(later.lines.map(plain), before.lines.map(plain), 'the view did not move');
  assert.match(later.note!, /↑ 130 lines behind, live: End/);
  // live: the newest lines
  const live = logWindow(s, initialView(), h);
  assert.equal(live.shown[h - 1]!.text, line(499));
  // search: every match on screen highlighted, the current one marked
  const sv: ViewState = { ...v(), search: { panel: 'log', query: 'STEP 40', typing: false, at: top.at } };
  const o = logPanel({ s, v: sv, w: 70, h, now: Date.now(), focused: true, zoomed: false });
  assert.match(plain(o.lines[0]!), /^› /, 'the current match is marked');
  assert.ok(
    o.lines[0]!.some((g) => g.inverse && g.text.toLowerCase() === 'step 40'),
    'the match is drawn inverse (case-insensitive)',
  );
  assert.match(o.note!, /\/STEP 40 \d+ matches/);
});

test('highlight cuts across segments; ←/→ shifts a line by columns', () => {
  const l = [t('ab', 'dim'), t('cd'), t('ef', 'warn')];
  const hl = highlight(l, 'BCD');
  assert.equal(plain(hl), 'abcdef');
  assert.deepEqual(
    hl.filter((g) => g.inverse).map((g) => g.text),
    ['b', 'cd'],
  );
  assert.equal(plain(shiftLine(l, 3)), 'def');
  assert.equal(plain(shiftLine([t('a界b')], 2)), ' b', 'a wide character cut in half becomes a space');
});

test('help fits 80×24 with its close key on screen, and scrolls to the last key (q)', () => {
  const s = baseState();
  const frame = (scroll: number) =>
    compose(s, initialView(), 80, 24, Date.now(), { kind: 'help', scroll }).lines.map(plain).join('\n');
  const first = frame(0);
  assert.match(first, /esc \/ \? \/ q \/ enter closes/, 'how to close is always shown');
  assert.match(first, /↑↓ pgup pgdn scroll/, 'says it scrolls');
  assert.doesNotMatch(first, /q \/ ctrl-c +quit nsa-top/, 'at 80×24 the last key is below the fold');
  const max = helpMaxScroll(s, 72, 24 - 5);
  assert.ok(max > 0);
  const frames = Array.from({ length: max + 1 }, (_, i) => frame(i));
  assert.ok(
    frames.some((f) => /q \/ ctrl-c +quit nsa-top/.test(f)),
    'scrolling down, q is there',
  );
  const last = frame(max);
  // after the main screen's keys, the dialogs' (the halt question's n, the halt window's K, …)
  assert.match(last, /ctrl-c +in any dialog: quit nsa-top/, 'scrolled to the end, the last dialog key is there');
  assert.match(last, /esc \/ \? \/ q \/ enter closes/);
  assert.equal(frame(max + 50), last, 'scrolling past the end stays at the end');
  // every key nsa-top takes is in the help, its words wrapped, never cut at 80 columns
  const seen = frames.join('\n');
  for (const b of [...KEYMAP, ...dialogBindings()])
    assert.ok(seen.includes(keysText(b)), `${keysText(b)} (${b.help}) is in the help`);
  for (const w of ['in the halt question: halt now', 'SIGKILL them (press twice', 'erase the last character'])
    assert.ok(seen.replace(/\s*┃\s*┃?\s*/g, ' ').includes(w), w);
  const box = frames.flatMap((f) => f.split('\n')).filter((l) => l.includes('┃'));
  assert.ok(!box.some((l) => /…\s*┃/.test(l)), `a help line cut: ${box.find((l) => /…\s*┃/.test(l))}`);
});

test("Dumps: the search highlights every match, marks the current one, and the file for o is the set's", async () => {
  const s = baseState(await fixtureSnapshot('ddp2-dumps-halt'));
  const w = 100;
  const d = dumpsBody(s, w, Date.now())!;
  assert.ok(d.files.length >= 1 && d.files.every((f) => s.run.dumps.some((x) => x.path === f)));
  const texts = d.body.map(plain);
  const at = texts.findIndex((l) => /\w+ \S+\.py:\d+/.test(l));
  assert.ok(at > 0, 'a frame line to find');
  const query = texts[at]!.trim().split(' ')[0]!;
  const v: ViewState = {
    ...initialView(),
    search: { panel: 'dumps', query, typing: false, at },
    hscroll: { dumps: 2 },
  };
  const o = dumpsPanel({ s, v, w, h: 40, now: Date.now(), focused: true, zoomed: false });
  const row = o.lines[at]!;
  assert.match(plain(row), /^›/, 'the current match is marked');
  assert.ok(row.some((g) => g.inverse && g.text === query));
  assert.match(o.note!, new RegExp(`/${query} \\d+ match`));
  assert.match(o.note!, /→2/, 'scrolled sideways, and says so');
});

test('the Log keys: scroll back from live, down to the end goes live, g to the start, n/N wrap, refusals say why', async () => {
  const f = join(dir, 'keys.log');
  writeFileSync(f, Array.from({ length: 3000 }, (_, i) => line(i) + '\n').join(''));
  const s = baseState();
  s.run.log.file = f;
  s.run.log.lines = Array.from({ length: 200 }, (_, i) => line(2800 + i));
  const view = { current: { ...initialView(), focus: 'log' } as ViewState };
  const refused: string[] = [];
  const source = new LogBack(host);
  let path: string | null = f;
  const k = logKeys({
    view: { ref: view, set: (fn) => (view.current = fn(view.current)) },
    stateRef: { current: s },
    size: () => ({ w: 80, h: 10 }),
    source,
    logPath: () => path,
    refuse: (_w, why) => refused.push(why),
    redraw: () => {},
  });
  source.subscribe(() => k.onPage());
  const until = async (what: string, ok: () => boolean) => {
    for (const end = Date.now() + 10_000; !ok(); await new Promise((r) => setTimeout(r, 10)))
      if (Date.now() > end) assert.fail(what);
  };
  const top = () => logWindow(s, view.current, 10).shown[0]?.text;
  k.scroll(-5);
  k.scroll(-5); // a second key while the first read is under way: both count
  await until('scrolled back', () => (view.current.logAnchor ?? -1) >= 0);
  assert.equal(top(), line(3000 - 10 - 10));
  k.scroll(3);
  assert.equal(top(), line(2983));
  k.scroll(100);
  assert.equal(view.current.logAnchor, null, 'down to the end: live again');
  k.top();
  await until('at the start', () => top() === line(0));
  assert.ok(view.current.logPage?.atStart);
  // search from the start: n (older) wraps to the newest match, N goes newer
  view.current = { ...view.current, search: { panel: 'log', query: 'step 2999 ', typing: false, at: null } };
  k.next();
  await until('found', () => view.current.search?.at != null);
  assert.match(view.current.search!.said ?? '', /wrapped/);
  assert.ok(logWindow(s, view.current, 10).shown.some((l) => l.text === line(2999)));
  k.clear();
  assert.equal(view.current.search, null);
  k.next();
  assert.match(refused.pop()!, /\/ first/);
  k.bottom();
  path = null;
  k.scroll(-1);
  assert.match(refused.pop()!, /no train\.log/);
  k.scroll(-1);
  assert.match(refused.pop() ?? '', /no train\.log/, 'a refused scroll does not leave a move waiting forever');
  k.startSearch('training');
  assert.match(refused.pop()!, /tab to one of them/);
});
