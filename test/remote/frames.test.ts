// The watch loop's byte stream arrives in whatever pieces TCP and SSH make of it: a frame parsed
// from any split must equal the frame parsed whole (file bytes hold newlines, NULs, fake headers).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FrameParser } from '../../src/remote/ssh/host.js';

type Ev = ['line', string] | ['data', string, string] | ['raw', string];

function parse(chunks: Buffer[], term: Buffer): Ev[] {
  const evs: Ev[] = [];
  const p: FrameParser = new FrameParser(
    (l) => {
      evs.push(['line', l]);
      if (l.startsWith('P ')) p.expectRaw(term, (b) => evs.push(['raw', b.toString('latin1')]));
    },
    (h, d) => evs.push(['data', h.join(' '), d.toString('latin1')]),
  );
  for (const c of chunks) p.push(c);
  return evs;
}

const bytes = fc.uint8Array({ maxLength: 60 }).map((a) => Buffer.from(a));
const item = fc.oneof(
  fc
    .constantFrom('B 1', 'L 3', 'e 12 f 10 1.5 name with spaces', 'E 3', 'Z 1', 'm f 4', 'N 2')
    .map((l) => ({ kind: 'line' as const, l })),
  bytes.map((d) => ({ kind: 'data' as const, d })),
  bytes.map((d) => ({ kind: 'raw' as const, d })),
);

test('frames parse the same however the stream is split', () => {
  const term = Buffer.from('\n@@P 9 0123456789abcdef@@\n');
  fc.assert(
    fc.property(
      fc.array(item, { maxLength: 12 }),
      fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 30 }),
      (items, cuts) => {
        const parts: Buffer[] = [];
        for (const it of items) {
          if (it.kind === 'line') parts.push(Buffer.from(`${it.l}\n`));
          else if (it.kind === 'data')
            parts.push(Buffer.from(`s f 4 12 ${it.d.length} 1.5 f 644 - 0 ${it.d.length}\n`), it.d);
          else if (!it.d.includes(term)) parts.push(Buffer.from('P 9\n'), it.d, term);
        }
        const all = Buffer.concat(parts);
        const whole = parse([all], term);
        const chunks: Buffer[] = [];
        let at = 0;
        for (const c of cuts) {
          if (at >= all.length) break;
          chunks.push(all.subarray(at, at + c));
          at += c;
        }
        chunks.push(all.subarray(at));
        assert.deepEqual(parse(chunks, term), whole);
        // and the whole parse is what was sent
        const sentData = items.filter((i) => i.kind === 'data').map((i) => (i as { d: Buffer }).d.toString('latin1'));
        assert.deepEqual(
          whole.filter((e) => e[0] === 'data').map((e) => e[2]),
          sentData,
        );
        const sentRaw = items
          .filter((i) => i.kind === 'raw' && !i.d.includes(term))
          .map((i) => (i as { d: Buffer }).d.toString('latin1'));
        assert.deepEqual(
          whole.filter((e) => e[0] === 'raw').map((e) => e[1]),
          sentRaw,
        );
      },
    ),
    { numRuns: 300 },
  );
});
