// Tab order follows the screen, zoomed or not, and every panel's title shows the number key that
// focuses it (src/ui/compose.ts readingOrder, tabLabel, tabTexts). Pure: layouts and frames.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compose, readingOrder, tabTexts, visiblePanels } from '../../src/ui/compose.js';
import { PANEL_NUMBERS } from '../../src/ui/keymap.js';
import { layout, type Layout, TITLES } from '../../src/ui/layout.js';
import { hitTest } from '../../src/ui/pointer.js';
import { plain } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { baseState } from './helpers.js';

const SIZES: [number, number, string[]][] = [
  // compact: the left column, then the right one (its tab group in title order)
  [80, 24, ['training', 'ranks', 'gates', 'gpus', 'alerts', 'log', 'dumps', 'actions']],
  // wide
  [120, 40, ['training', 'gates', 'log', 'gpus', 'ranks', 'alerts', 'dumps', 'actions']],
  // huge
  [200, 60, ['training', 'log', 'gpus', 'gates', 'ranks', 'alerts', 'dumps', 'actions']],
];

test('zoomed, Tab walks the panels in the order the screen reads unzoomed at that size', () => {
  for (const [cols, rows, want] of SIZES) {
    assert.deepEqual(readingOrder(cols, rows), want, `${cols}x${rows}`);
    const L = layout({ cols, rows, focus: 'training', zoom: null, gpuRows: 2, rankRows: 2 });
    assert.deepEqual(visiblePanels(L), want, `${cols}x${rows}: the same as the unzoomed screen's`);
  }
  assert.deepEqual(readingOrder(70, 20), [], 'too small: nothing to walk');
});

test('each panel title shows its number key, and a tab group that does not fit keeps every number', () => {
  const s = baseState();
  s.alerts = [{ id: 'x', rule: 'x', severity: 'warning', title: 't', detail: '', since: 0 }];
  for (const [cols, rows] of SIZES) {
    const f = compose(s, initialView(), cols, rows, Date.now());
    const text = f.lines.map(plain).join('\n');
    for (const [i, p] of PANEL_NUMBERS.entries()) {
      const mark = '⁰¹²³⁴⁵⁶⁷⁸⁹'[i + 1]!;
      assert.ok(text.includes(mark), `${cols}x${rows}: ${TITLES[p]} shows ${i + 1}`);
    }
    assert.ok(
      f.lines.every((l) => plain(l).length <= cols),
      'nothing drawn past the edge',
    );
  }
  // 80 columns: the tab group of four sheds its padding to show all four (it was cut at "acti" before)
  const f = compose(s, initialView(), 80, 24, Date.now());
  const L = f.layout as Extract<Layout, { kind: 'ok' }>;
  const group = L.slots.find((sl) => sl.panels.length === 4)!;
  assert.deepEqual(tabTexts(group, s), [' Alerts⁵(1) ', 'log⁶', 'dumps⁷', 'actions⁸']);
  assert.match(plain(f.lines[group.y]!), /┌ Alerts⁵\(1\) │log⁶│dumps⁷│actions⁸/);
  // narrower still: the hidden tabs keep a letter and their number; the pointer measures the same
  const narrow = { ...group, w: 24 };
  assert.deepEqual(tabTexts(narrow, s), [' Alerts⁵(1) ', 'l⁶', 'd⁷', 'a⁸']);
  const row = plain(f.lines[group.y]!);
  assert.equal(hitTest(L, s, row.indexOf('dumps⁷') + 1, group.y)?.panel, 'dumps');
});
