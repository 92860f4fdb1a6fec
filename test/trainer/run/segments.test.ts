// The run's segments (readRunSegments: every boot of a new pid starts one; its last step is the
// last step-bearing line before the next boot) — what status's resume pick labels checkpoints with.
// The reader looks only at the lines around each boot; the oracle below reads every line, as the
// reader did before. Random heartbeats (repeated boots of one pid, torn and foreign lines, "boot"
// inside other records, no final newline) read in random small chunks must give the same segments.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readRunSegments } from '../../../src/trainer/run/checkpoints.js';
import { tempDir } from './helpers.js';

interface Seg {
  index: number;
  startTs: number;
  pid: number | null;
  lastStep: number | null;
}

/** every line, in order, as the reader did before it looked only around boots */
function oracle(text: string): Seg[] {
  const segs: Seg[] = [];
  let lastStepLine: string | null = null;
  const close = () => {
    const cur = segs[segs.length - 1];
    const m = cur && lastStepLine ? /"step":\s*(\d+)/.exec(lastStepLine) : null;
    if (cur && m && Number(m[1]) > 0) cur.lastStep = Number(m[1]);
    lastStepLine = null;
  };
  for (const line of text.split('\n')) {
    if (line.includes('"boot"')) {
      try {
        const j = JSON.parse(line) as { ts?: unknown; pid?: unknown; msg?: unknown };
        if (j.msg === 'boot' && typeof j.ts === 'number') {
          const pid = typeof j.pid === 'number' ? j.pid : null;
          const cur = segs[segs.length - 1];
          if (!cur || cur.pid !== pid || pid === null) {
            close();
            segs.push({ index: segs.length, startTs: j.ts * 1000, pid, lastStep: null });
          }
          continue;
        }
      } catch {
        /* torn */
      }
    }
    if (segs.length && line.includes('"step"') && !/"step":\s*0[,}]/.test(line)) lastStepLine = line;
  }
  close();
  return segs;
}

const line = fc.oneof(
  fc
    .record({ pid: fc.option(fc.integer({ min: 1, max: 3 })), ts: fc.integer({ min: 1, max: 9e5 }) })
    .map(({ pid, ts }) => JSON.stringify({ ts, pid, rank: 0, step: 0, msg: 'boot', phase: 'start' })),
  fc.integer({ min: 1, max: 5000 }).map((step) => JSON.stringify({ ts: 1, pid: 1, step, msg: 'progress', loss: 5 })),
  fc.integer({ min: 1, max: 5000 }).map((step) => JSON.stringify({ ts: 1, step, msg: 'step_end', phase: 'end' })),
  fc.constant('{"ts": 2, "msg": "note", "text": "after the \\"boot\\" phase"}'),
  fc.constant('{"ts": 3, "msg": "boot", "pid": 2'),
  fc.constant('{"ts": 4, "msg": "watchdog", "step": 0}'),
  fc.constant(''),
);

test(
  'segments read around the boots are those of reading every line, in any chunking',
  { timeout: 60_000 },
  async () => {
    const t = tempDir();
    const host = new LocalHost();
    try {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(line, { maxLength: 60 }),
          fc.boolean(),
          fc.integer({ min: 8, max: 400 }),
          async (lines, finalNewline, chunk) => {
            const text = lines.join('\n') + (finalNewline && lines.length ? '\n' : '');
            const dir = join(t.dir, `r${n++}`);
            mkdirSync(dir);
            writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), text);
            assert.deepEqual(await readRunSegments(host, dir, chunk), oracle(text));
          },
        ),
        {
          numRuns: 300,
          examples: [
            // an empty first line and one-byte lines: the backwards search from a line's start at offset 1
            [
              ['', '{"ts": 5, "pid": 1, "msg": "boot"}', '', '{"step": 7}', '{"ts": 9, "pid": 2, "msg": "boot"}'],
              true,
              8,
            ],
            [
              ['{"ts": 5, "pid": 1, "msg": "boot"}', '{"step": 3}', '', '', '{"ts": 6, "pid": 2, "msg": "boot"}'],
              false,
              9,
            ],
          ],
        },
      );
    } finally {
      t.done();
    }
  },
);
