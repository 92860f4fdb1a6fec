// How much memory the lines a reader keeps hold (not part of `npm run bench`: one measurement,
// run by hand): node --expose-gc --import tsx bench/line-retain.ts [lines] [keepEvery]
// A line cut from the splitter's 16 KiB decode window as a V8 sliced string keeps the whole window
// alive; a reader that keeps one line in K (the log's error lines, a parsed record's text) then
// holds every window. Pushes `lines` 80-byte lines in 64 KiB reads, keeps every `keepEvery`-th,
// and prints the heap they hold after a full GC, per kept line.
import { LineSplitter } from '../src/lines.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const total = Number(process.argv[2] ?? 2_000_000);
const every = Number(process.argv[3] ?? 20);

const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const base = heap();
const kept: string[] = [];
const split = new LineSplitter();
let n = 0;
const cb = {
  line: (t: string) => {
    if (n++ % every === 0) kept.push(t);
  },
  error: () => {},
};
const CHUNK = 64 * 1024;
let chunk = '';
for (let i = 0; i < total; i++) {
  chunk += `[train] step ${String(i).padStart(9, '0')} | loss 2.${String(i % 997).padStart(3, '0')} | lr 3.0e-04 | toks/s 12345\n`;
  if (chunk.length >= CHUNK || i === total - 1) {
    split.push(Buffer.from(chunk), cb);
    chunk = '';
  }
}
const held = heap() - base;
const chars = kept.reduce((a, s) => a + s.length, 0);
console.log(
  `${total} lines, ${kept.length} kept (${(chars / kept.length).toFixed(0)} chars each): heap held ${(held / 2 ** 20).toFixed(1)} MiB, ${(held / kept.length).toFixed(0)} B per kept line`,
);
