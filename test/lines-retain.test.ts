// A line a reader keeps holds only itself, not the splitter's 16 KiB decode window it was cut from
// (a V8 sliced string keeps its parent alive). No process: unit tier.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LineSplitter } from '../src/lines.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

test('one line kept per window of 2 000 windows holds ~its own bytes, not 2 000 × 16 KiB', () => {
  const line = (i: number) => `[train] step ${String(i).padStart(9, '0')} | loss 2.345 | lr 3.0e-04 | toks/s 12345\n`;
  const perWindow = Math.ceil((16 * 1024) / line(0).length);
  const total = 2000 * perWindow;
  const base = heap();
  const kept: string[] = [];
  const split = new LineSplitter();
  let n = 0;
  const cb = { line: (t: string) => void (n++ % perWindow === 0 && kept.push(t)), error: () => {} };
  let chunk = '';
  for (let i = 0; i < total; i++) {
    chunk += line(i);
    if (chunk.length >= 64 * 1024 || i === total - 1) {
      split.push(Buffer.from(chunk), cb);
      chunk = '';
    }
  }
  const held = heap() - base;
  assert.ok(kept.length >= 1900, String(kept.length));
  assert.equal(kept[1], line(perWindow).trimEnd(), 'the lines are whole');
  // as slices of their windows: ~32 MiB (measured 31 MiB); as their own strings: ~0.25 MiB
  assert.ok(held < 4 * 2 ** 20, `${kept.length} kept lines hold ${(held / 2 ** 20).toFixed(1)} MiB`);
});
