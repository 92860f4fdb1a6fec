// A one-shot look (status without --full: RunModel's backfill false) answers a huge file from its
// tail: its later polls read no older history (a slice of the oldest part cost status more to parse
// than the tail it answers from); the cockpit's model (the default) fills the history in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel, type RunModelOptions } from '../../../src/trainer/run/model.js';
import { hbLine, progressLine, tempDir } from './helpers.js';

const T0 = 1_800_000_000;

test('one-shot look: a huge file is answered from its tail, and later polls read no older history', async () => {
  const t = tempDir();
  try {
    let hb = hbLine({ ts: T0, msg: 'boot', pid: 100 });
    let csv = '';
    for (let step = 1; step <= 600; step++) {
      hb += progressLine(step, T0 + step);
      csv += `${step},${(5 - step / 1000).toFixed(6)},1.000000e-04,${1000 + step}\n`;
    }
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hb);
    writeFileSync(join(t.dir, 'training.csv'), csv);
    const size = Buffer.byteLength(hb) + csv.length;
    // the whole history would fit one poll's budget: still not read
    const base: RunModelOptions = { tailThreshold: 8 * 1024, tailBytes: 4 * 1024, backfillChunk: size };
    const twoPolls = async (o: RunModelOptions) => {
      const m = new RunModel(new LocalHost(), t.dir, { ...base, ...o });
      const first = await m.poll();
      return { first, second: await m.poll() };
    };

    const oneShot = await twoPolls({ backfill: false });
    assert.equal(oneShot.first.backfill.pending, true);
    assert.equal(oneShot.second.backfill.pending, true, 'no older history was read');
    assert.equal(oneShot.second.backfill.bytesLeft, oneShot.first.backfill.bytesLeft);
    assert.equal(oneShot.second.series.loss.total, oneShot.first.series.loss.total);
    assert.equal(oneShot.second.step, 600, 'the present is there');
    assert.equal(oneShot.second.loss, 5 - 600 / 1000);

    // the cockpit's model reads it on its next poll: the same run as a full read
    const cockpit = await twoPolls({});
    assert.equal(cockpit.second.backfill.pending, false, 'the default reads the older history');
    const full = await new RunModel(new LocalHost(), t.dir).poll();
    assert.equal(cockpit.second.series.loss.total, full.series.loss.total);
    assert.ok(oneShot.second.series.loss.total < full.series.loss.total);
  } finally {
    t.done();
  }
});
