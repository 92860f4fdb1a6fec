// A checkpoint is complete at the first listing once the trainer has stepped past it (the saving
// rank's step went beyond the checkpoint's at least 2 s after the file's last write): a one-shot
// look (status) then needs no second listing, while a checkpoint the trainer has not stepped past
// still needs its size to hold across two polls (or 30 s of age).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { hbLine, progressLine, tempDir } from './helpers.js';

function run(dir: string, nowS: number, steps: [number, number][]): void {
  writeFileSync(
    join(dir, 'heartbeat_rank0.jsonl'),
    hbLine({ ts: nowS - 60, msg: 'boot', phase: 'start' }) +
      steps.map(([step, ago]) => progressLine(step, nowS - ago)).join(''),
  );
  const ck = join(dir, 'checkpoint_step20.pt');
  writeFileSync(ck, Buffer.alloc(4096, 1));
  // last written 10 s ago: settled by age alone only after 30 s
  utimesSync(ck, nowS - 10, nowS - 10);
}

test('the first listing: complete once rank 0 stepped past the checkpoint 2 s after its last write, not before', async () => {
  const t = tempDir();
  try {
    const now = Date.now() / 1000;
    const cases: { name: string; steps: [number, number][]; complete: boolean }[] = [
      // saved after step 20, step 21 started 3 s after the file's last write
      {
        name: 'stepped-past',
        steps: [
          [19, 14],
          [20, 12],
          [21, 7],
        ],
        complete: true,
      },
      // the next step only 1 s after the write: not evidence enough (clock and write granularity)
      {
        name: 'too-close',
        steps: [
          [19, 14],
          [20, 12],
          [21, 9],
        ],
        complete: false,
      },
      // still at the checkpoint's step (its save may still run)
      {
        name: 'same-step',
        steps: [
          [19, 14],
          [20, 2],
        ],
        complete: false,
      },
    ];
    for (const c of cases) {
      const dir = join(t.dir, c.name);
      mkdirSync(dir);
      run(dir, now, c.steps);
      const m = new RunModel(new LocalHost(), dir);
      const s = await m.poll();
      assert.equal(s.checkpoints.length, 1, c.name);
      assert.equal(s.checkpoints[0]!.complete, c.complete, c.name);
      // the second listing settles the ones without the evidence, as before (same size, >= 2 s old)
      const again = await m.poll();
      assert.equal(again.checkpoints[0]!.complete, true, `${c.name}, second poll`);
    }
  } finally {
    t.done();
  }
});
