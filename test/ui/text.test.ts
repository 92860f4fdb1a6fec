// Column widths decide where every panel border lands: a wrong width shifts the whole row. The
// fast paths (index walking instead of per-character strings) must agree with the plain
// definition, character by character, on any text a trainer or a process table can produce.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { cut, ellipsize, fit, lineWidth, strWidth } from '../../src/ui/text.js';

// the definition: one code point at a time (for…of yields lone surrogates as themselves)
function widthOf(cp: number): number {
  return strWidth(String.fromCodePoint(cp));
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

test('strWidth and cut agree with the per-code-point definition on arbitrary text', () => {
  const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 20 }), fc.string({ maxLength: 40 }));
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
