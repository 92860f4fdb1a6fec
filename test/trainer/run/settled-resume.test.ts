// The run model lets the poll list a quiet checkpoint from its last stat (LocalHost's settled names)
// only once the trainer has stepped past it. A resumed real trainer counts from step 1 again and
// rewrites the earlier segment's checkpoints in place: those rewrites show at the next poll (a halt
// after the next checkpoint fires on one), while a run that has passed its checkpoints lists them
// from memory.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { hbLine, progressLine, tempDir } from './helpers.js';

const STEPS = Array.from({ length: 30 }, (_, i) => (i + 1) * 10);

test('a resumed run (steps from 1 again, or booted and not stepped): its old checkpoints rewritten in place show at the next poll', async () => {
  const t = tempDir();
  try {
    const dir = t.dir;
    const now = Date.now() / 1000;
    const hb = join(dir, 'heartbeat_rank0.jsonl');
    writeFileSync(
      hb,
      hbLine({ ts: now - 400, msg: 'boot', phase: 'start', pid: 100 }) +
        STEPS.map((s, i) => progressLine(s + 5, now - 390 + i)).join(''),
    );
    const ck = (s: number) => join(dir, `checkpoint_step${s}.pt`);
    // every checkpoint written, then quiet (well over the 10 s a name needs to be listed from memory)
    const writeAll = (bytes: number) => {
      for (const s of STEPS) {
        writeFileSync(ck(s), Buffer.alloc(bytes, 1));
        utimesSync(ck(s), now - 300, now - 300);
      }
    };
    writeAll(100);
    const m = new RunModel(new LocalHost(), dir);
    const seen = async (bytes: number) => (await m.poll()).checkpoints.filter((c) => c.size === bytes).length;
    for (let i = 0; i < 3; i++) await m.poll();
    // the run is at step 305, past every one: rewritten, most are listed from their last stat
    for (const s of STEPS) writeFileSync(ck(s), Buffer.alloc(200, 1));
    assert.ok((await seen(200)) <= 10, 'a run past its checkpoints lists them from memory');
    // a new process booted, not stepped yet: it may rewrite any of them
    appendFileSync(hb, hbLine({ ts: now - 5, msg: 'boot', phase: 'start', pid: 200 }));
    writeAll(300);
    for (let i = 0; i < 3; i++) await m.poll();
    for (const s of STEPS) writeFileSync(ck(s), Buffer.alloc(400, 1));
    assert.equal(await seen(400), 30, 'booted, not stepped: every rewrite at the next poll');
    // it steps from 1 again (the real trainer's resume): every checkpoint ahead of it, at once
    appendFileSync(hb, progressLine(5, now - 1, {}, 200));
    writeAll(500);
    for (let i = 0; i < 3; i++) await m.poll();
    for (const s of STEPS) writeFileSync(ck(s), Buffer.alloc(600, 1));
    assert.equal(await seen(600), 30, 'at step 5: every rewrite ahead of it at the next poll');
  } finally {
    t.done();
  }
});
