// Column widths decide where every panel border lands: a wrong width shifts the whole row. The
// fast paths (index walking instead of per-character strings) must agree with the plain
// definition, character by character, on any text a trainer or a process table can produce.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { cpWidth, cut, ellipsize, fit, lineWidth, strWidth } from '../../src/ui/text.js';

// the definition: one code point at a time (for…of yields lone surrogates as themselves)
function widthOf(cp: number): number {
  return cpWidth(cp);
}
function refWidth(s: string): number {
  let w = 0;
  for (const ch of s) w += widthOf(ch.codePointAt(0)!);
  return w;
}
function refCut(s: string, width: number): string {
  let w = 0;
  let out = '';
  for (const ch of s) {
    const cw = widthOf(ch.codePointAt(0)!);
    if (w + cw > width) break;
    out += ch;
    w += cw;
  }
  return width <= 0 ? '' : out;
}

test('widths: ASCII 1, CJK and emoji 2, combining marks 0, lone surrogates 1', () => {
  assert.equal(strWidth('step 1200'), 9);
  assert.equal(strWidth('損失'), 4);
  assert.equal(strWidth('🔥x'), 3);
  assert.equal(strWidth('e\u0301'), 1);
  assert.equal(strWidth('\ud800a'), 2);
  assert.equal(cut('ab損失', 3), 'ab');
  assert.equal(cut('🔥🔥', 3), '🔥');
  assert.equal(ellipsize('checkpoint_step100.pt', 10), 'checkpoin…');
  assert.equal(lineWidth(fit([{ text: '損失 loss' }, { text: ' 2.71' }], 8)), 8);
});

test('the one-column fast path agrees with the definition on every code unit', () => {
  // strWidth answers text without a code unit of another width by its length (a native regexp
  // test): a range missing from that test would measure a wide or zero-width character as one.
  // Every BMP code unit, alone and between ASCII; astral code points (surrogate pairs) always take
  // the walk, so their ranges' edges are enough.
  const astral = [0x10000, 0x1f2ff, 0x1f300, 0x1f600, 0x1faff, 0x1fb00, 0x1ffff, 0x20000, 0x3fffd, 0x3fffe, 0x10ffff];
  const bad: string[] = [];
  for (let cp = 0; cp <= 0xffff; cp++) {
    const ch = String.fromCharCode(cp);
    if (strWidth(ch) !== cpWidth(cp) || strWidth('a' + ch) !== cpWidth(cp) + 1) bad.push(cp.toString(16));
  }
  for (const cp of astral) if (strWidth('a' + String.fromCodePoint(cp)) !== cpWidth(cp) + 1) bad.push(cp.toString(16));
  assert.deepEqual(bad, [], 'code points measured unlike their definition');
  assert.equal(strWidth('─'.repeat(40)), 40);
  assert.equal(cut('│ step 12 ──', 4), '│ st');
});

test('strWidth and cut agree with the per-code-point definition on arbitrary text', () => {
  const text = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({ maxLength: 40 }),
  );
  fc.assert(
    fc.property(text, fc.integer({ min: -1, max: 50 }), (s, w) => {
      assert.equal(strWidth(s), refWidth(s));
      const c = cut(s, w);
      assert.equal(c, refCut(s, w));
      assert.ok(strWidth(c) <= Math.max(0, w));
    }),
    { numRuns: 2000 },
  );
});

test("the painter's row delta, written over the old row, always gives the new row", async () => {
  const { rowDelta } = await import('../../src/ui/paint.js');
  const { fit: fitLine, plain } = await import('../../src/ui/text.js');
  // a row as terminal cells: a wide character takes its cell and a blank one after it
  const cells = (segs: { text: string }[], width: number, into: string[] = Array<string>(width).fill(' '), at = 0) => {
    let x = at;
    for (const s of segs)
      for (const ch of s.text) {
        const w = strWidth(ch);
        if (w === 0) continue;
        into[x] = ch;
        if (w === 2) into[x + 1] = '';
        x += w;
      }
    return into;
  };
  const seg = fc.record({
    text: fc.constantFrom('a', 'bc', '12', '9 s', '10 s', '損', '─', ' ', 'step'),
    role: fc.constantFrom(undefined, 'dim', 'ok'),
  });
  const W = 24;
  fc.assert(
    fc.property(fc.array(seg, { maxLength: 8 }), fc.array(seg, { maxLength: 8 }), (a, b) => {
      const prev = fitLine(a as never, W, false);
      const next = fitLine(b as never, W, false);
      const screen = cells(prev, W);
      const d = rowDelta(prev, next);
      if (d === null) assert.equal(plain(prev), plain(next));
      else cells(d.segs, W, screen, d.col);
      assert.equal(screen.join(''), cells(next, W).join(''));
    }),
    { numRuns: 3000 },
  );
});
