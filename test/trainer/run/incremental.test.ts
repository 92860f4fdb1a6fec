// RunModel over files that change between polls: appends with partial lines, truncation,
// replacement, resumes (segments), huge files read from the end first, bad input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, renameSync, writeFileSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { LocalHost } from '../../../src/remote/local/host.js';
import type { DirPoll, ReadRequest } from '../../../src/remote/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import type { RunSnapshot, Series } from '../../../src/trainer/run/snapshot.js';
import { hbLine, progressLine, RefusingHost, tempDir } from './helpers.js';

const T0 = 1_800_000_000;

function allPoints(s: Series): { step: number; segment: number }[] {
  return s.recent.map((p) => ({ step: p.step, segment: p.segment }));
}

test('a partial last line is held back until its newline arrives', async () => {
  const t = tempDir();
  try {
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    const csv = join(t.dir, 'training.csv');
    writeFileSync(hb, hbLine({ ts: T0, msg: 'boot', phase: 'start' }) + progressLine(1, T0 + 1));
    writeFileSync(csv, '1,5.500000,1.000000e-04,100\n2,5.4');
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.step, 1);
    assert.deepEqual(
      s.series.loss.recent.map((p) => p.step),
      [1],
      'half a CSV row is not a row',
    );
    assert.equal(s.files['training.csv']!.parseErrors, 0);

    const line = progressLine(2, T0 + 2);
    appendFileSync(hb, line.slice(0, 40));
    appendFileSync(csv, '00000,1.0');
    s = await m.poll();
    assert.equal(s.step, 1, 'a partial heartbeat line does not count');
    assert.equal(s.files['heartbeat_rank0.jsonl']!.parseErrors, 0);

    appendFileSync(hb, line.slice(40));
    appendFileSync(csv, '00000e-04,200\n');
    s = await m.poll();
    assert.equal(s.step, 2);
    assert.equal(s.loss, 5 - 2 / 1000);
    assert.deepEqual(
      s.series.loss.recent.map((p) => [p.step, p.value]),
      [
        [1, 5.5],
        [2, 5.4],
      ],
    );
    assert.equal(s.files['heartbeat_rank0.jsonl']!.parseErrors, 0);
    assert.equal(s.files['training.csv']!.records, 2);
  } finally {
    t.done();
  }
});

test('resume: a new boot with a new pid and steps restarting at 1 open a new segment, never mixed', async () => {
  const t = tempDir();
  try {
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    const csv = join(t.dir, 'training.csv');
    let hbText = hbLine({ ts: T0, msg: 'boot', pid: 100 });
    let csvText = '';
    for (let i = 1; i <= 10; i++) {
      hbText += progressLine(i, T0 + i, {}, 100);
      csvText += `${i},${(6 - i / 10).toFixed(6)},1.000000e-04,500\n`;
    }
    writeFileSync(hb, hbText);
    writeFileSync(csv, csvText);
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.step, 10);
    assert.equal(s.segments.length, 1);

    // relaunch with --resume: new pid, boot, steps from 1 again; appended to the same files
    appendFileSync(hb, hbLine({ ts: T0 + 100, msg: 'boot', pid: 200 }));
    s = await m.poll();
    assert.equal(s.segments.length, 2);
    assert.equal(s.segments[1]!.cause, 'boot');
    assert.equal(s.segments[1]!.pid, 200);
    assert.equal(s.step, null, 'just rebooted: no step yet in this segment, old CSV rows are not current');

    let more = '';
    let moreCsv = '';
    for (let i = 1; i <= 3; i++) {
      more += progressLine(i, T0 + 100 + i, {}, 200);
      moreCsv += `${i},${(4 - i / 10).toFixed(6)},2.000000e-04,700\n`;
    }
    appendFileSync(hb, more);
    appendFileSync(csv, moreCsv);
    s = await m.poll();
    assert.equal(s.step, 3);
    assert.equal(s.loss, 5 - 3 / 1000);
    assert.equal(s.segments.length, 2);
    const pts = allPoints(s.series.loss);
    assert.equal(pts.length, 13);
    assert.ok(pts.slice(0, 10).every((p) => p.segment === 0));
    assert.deepEqual(pts.slice(10), [
      { step: 1, segment: 1 },
      { step: 2, segment: 1 },
      { step: 3, segment: 1 },
    ]);
    const ent = allPoints(s.series.gateEntropy);
    assert.equal(ent.length, 0, 'no gate fields in these records');
    assert.equal(s.ranks[0]!.pid, 200);
    assert.equal(s.ranks[0]!.records, 7, 'records since the current boot');
    assert.ok(s.stepTimeS !== null && Math.abs(s.stepTimeS - 1) < 1e-6, 'step time from the current segment only');
  } finally {
    t.done();
  }
});

test('truncation and replacement of a file start a new segment and are counted', async () => {
  const t = tempDir();
  try {
    const csv = join(t.dir, 'training.csv');
    writeFileSync(csv, [1, 2, 3, 4, 5].map((i) => `${i},5.0,1e-4,10\n`).join(''));
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.step, 5);

    truncateSync(csv, 0);
    writeFileSync(csv, '6,4.0,1e-4,10\n'); // same inode, smaller
    s = await m.poll();
    assert.equal(s.files['training.csv']!.resets, 1);
    assert.equal(s.step, 6);
    assert.deepEqual(
      allPoints(s.series.loss).map((p) => p.segment),
      [0, 0, 0, 0, 0, 1],
    );
    assert.equal(s.segments[1]!.cause, 'file-truncated');

    const tmp = join(t.dir, 'training.csv.new');
    writeFileSync(tmp, '1,3.0,1e-4,10\n2,2.9,1e-4,10\n3,2.8,1e-4,10\n');
    renameSync(tmp, csv); // new inode
    s = await m.poll();
    assert.equal(s.files['training.csv']!.resets, 2);
    assert.equal(s.segments[2]!.cause, 'file-replaced');
    assert.deepEqual(allPoints(s.series.loss).slice(-3), [
      { step: 1, segment: 2 },
      { step: 2, segment: 2 },
      { step: 3, segment: 2 },
    ]);
    assert.equal(s.step, 3);
  } finally {
    t.done();
  }
});

test('bad input: garbage, NaN, binary, huge lines are counted; every good line around them is kept', async () => {
  const t = tempDir();
  try {
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    const parts: (string | Buffer)[] = [
      hbLine({ ts: T0, msg: 'boot' }),
      progressLine(1, T0 + 1),
      'this is not json\n',
      progressLine(2, T0 + 2),
      '{"ts": 1800000003.0, "msg": "progress", "step": 3, "loss": \n', // truncated record
      progressLine(4, T0 + 4),
      Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x80, 0x0a]), // binary bytes + newline
      progressLine(5, T0 + 5),
      '{"ts": 1800000006.0, "iso": "x", "pid": 100, "rank": 0, "step": 6, "msg": "progress", "loss": NaN, "toks_per_s": Infinity}\n',
      progressLine(7, T0 + 7),
      '{"ts": "yesterday", "msg": "progress", "step": 8}\n', // wrong type
      'x'.repeat(2 * 1024 * 1024) + '\n', // over the 1 MiB line cap
      progressLine(9, T0 + 9),
      '{"ts": 1800000010.0, "iso": "x", "pid": 100, "rank": 0, "step": 10, "msg": "progress", "loss": "nan", "toks_per_s": 5}\n',
      hbLine({ ts: T0 + 11, msg: 'some_future_event', step: 0, detail: 1 }),
      progressLine(12, T0 + 12),
    ];
    writeFileSync(hb, Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))));
    writeFileSync(
      join(t.dir, 'training.csv'),
      '1,5.0,1e-4,10\nstep,loss,lr,toks_per_s\n2,nan,1e-4,10\n3,garbage,1e-4,10\n4,4.0,1e-4,10,extra,cols\n\u0000\u0001\n5,3.9\n6,3.8,1e-4,10\n',
    );
    writeFileSync(join(t.dir, 'env.json'), '{not json');
    writeFileSync(join(t.dir, 'metrics.json'), '{"steps": 100, "loss_last": NaN}');
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.step, 12, 'the 2 MiB file is read from its end first');
    for (let i = 0; i < 20 && s.backfill.pending; i++) s = await m.poll();
    assert.equal(s.backfill.pending, false);
    const h = s.files['heartbeat_rank0.jsonl']!;
    assert.equal(h.parseErrors, 5, `errors: ${h.lastError}`);
    assert.equal(s.step, 12);
    const r0 = s.ranks[0]!;
    assert.equal(r0.events.progress, 9, 'progress 1,2,4,5,6,7,9,10,12 all kept');
    assert.equal(r0.events.some_future_event, 1, 'unknown event kinds are counted, not dropped');
    assert.deepEqual(
      r0.unknownEvents?.map((u) => [u.msg, u.fields.detail]),
      [['some_future_event', 1]],
      'and the record is kept',
    );
    assert.equal(s.seriesSource.loss, 'csv');
    assert.deepEqual(
      s.series.loss.recent.map((p) => p.step),
      [1, 4, 6],
      'CSV: good rows kept, NaN counted',
    );
    assert.equal(s.series.loss.nonFinite, 1);
    const c = s.files['training.csv']!;
    assert.equal(c.parseErrors, 3, `csv errors: ${c.lastError}`);
    assert.equal(s.files['env.json']!.parseErrors, 1);
    assert.equal(s.metrics?.steps, 100, 'bare NaN in metrics.json tolerated');
    assert.equal(s.totalSteps, 100);
  } finally {
    t.done();
  }
});

test('non-finite loss on the last progress record: loss null, flagged, not in the series', async () => {
  const t = tempDir();
  try {
    writeFileSync(
      join(t.dir, 'heartbeat_rank0.jsonl'),
      hbLine({ ts: T0, msg: 'boot' }) +
        progressLine(1, T0 + 1) +
        '{"ts": 1800000002.0, "iso": "x", "pid": 100, "rank": 0, "step": 2, "msg": "progress", "loss": NaN, "toks_per_s": 3.0}\n',
    );
    const s = await new RunModel(new LocalHost(), t.dir).poll();
    assert.equal(s.seriesSource.loss, 'heartbeat');
    assert.equal(s.loss, null);
    assert.equal(s.lastLossNonFinite, true);
    assert.equal(s.series.loss.total, 2);
    assert.equal(s.series.loss.nonFinite, 1);
    assert.deepEqual(
      s.series.loss.recent.map((p) => p.step),
      [1],
    );
    assert.doesNotThrow(() => JSON.parse(JSON.stringify(s)));
  } finally {
    t.done();
  }
});

test('heartbeat events: watchdog dumps, loader events, dt_fetch_s disappearing (synthetic fallback tell)', async () => {
  const t = tempDir();
  try {
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    let text = hbLine({ ts: T0, msg: 'boot' }) + hbLine({ ts: T0 + 0.5, msg: 'fineweb_loader_ready', dt: 1.25 });
    for (let i = 1; i <= 5; i++)
      text += progressLine(i, T0 + i, {
        dt_fetch_s: 0.01 * i,
        fetch_p50_ms: 12,
        fetch_p95_ms: 40,
        gpu_mem_alloc: 1000,
        gpu_mem_reserved: 2000,
      });
    writeFileSync(hb, text);
    writeFileSync(
      join(t.dir, 'heartbeat_rank1.jsonl'),
      hbLine({ ts: T0, rank: 1, pid: 101, msg: 'boot' }) +
        hbLine({ ts: T0 + 200, rank: 1, pid: 101, msg: 'watchdog_dump', path: 'x' }),
    );
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.data.withFetch, 5);
    assert.equal(s.data.dtFetchAbsent, false);
    assert.equal(s.data.lastDtFetchS, 0.05);
    assert.equal(s.data.fetchP95Ms, 40);
    assert.equal(s.ranks[0]!.memReservedMiB, 2000);
    assert.equal(s.series.memReservedMiB.recent.length, 5);
    assert.equal(s.ranks[0]!.loaderEvents[0]!.msg, 'fineweb_loader_ready');
    assert.equal(s.ranks[1]!.watchdogDumps, 1);
    assert.equal(s.ranks[1]!.lastMsg, 'watchdog_dump');
    assert.equal(s.ranks[1]!.lastStep, null, 'watchdog_dump carries step 0');

    let more = '';
    for (let i = 6; i <= 12; i++) more += progressLine(i, T0 + i);
    appendFileSync(hb, more);
    s = await m.poll();
    assert.equal(s.data.dtFetchAbsent, true, 'recent progress records lost dt_fetch_s');
    assert.equal(s.data.withoutFetch, 7);
  } finally {
    t.done();
  }
});

test('FSDP names, the smoke heartbeat.jsonl variant, reference-trainer dumps and env marker', async () => {
  const t = tempDir();
  try {
    writeFileSync(
      join(t.dir, 'heartbeat.jsonl'),
      JSON.stringify({ ts: T0, iso: 'x', step: 0, msg: 'start', alloc_mib: 10, reserved_mib: 20 }) +
        '\n' +
        JSON.stringify({ ts: T0 + 1, iso: 'x', step: 1, msg: 'step', alloc_mib: 11, reserved_mib: 22, loss: 4.5 }) +
        '\n',
    );
    writeFileSync(join(t.dir, 'training_fsdp.csv'), '1,4.5,1e-4,10\n');
    writeFileSync(join(t.dir, 'metrics_fsdp.json'), '{"steps": 9, "backend": "FSDP"}');
    writeFileSync(join(t.dir, 'checkpoint_fsdp_step100.pt'), 'x');
    writeFileSync(
      join(t.dir, 'env.json'),
      JSON.stringify({
        trainer: 'nsa-top-reference',
        distributed_backend: 'FSDP',
        env: { WORLD_SIZE: '2', NSA_PREFILL_BATCHED: '1' },
      }),
    );
    writeFileSync(
      join(t.dir, 'watchdog_stackdump_fsdp_1800000050.txt'),
      'Watchdog at 2027-01-15T08:00:50Z; last_heartbeat=1800000000.5\n\n--- Thread: MainThread (1) ---\n  File "a.py", line 3, in f\n    g()\n--- GRAD TRACE (watchdog) ---\nsomething\n',
    );
    writeFileSync(
      join(t.dir, 'stackdump_1800000060_rank1_4242.txt'),
      'Signal 10 at 2027-01-15T08:01:00Z\n# nsa-top-reference rank=1 pid=4242 step=17 phase=allreduce\n\n--- Thread: MainThread (7) ---\n  File "/x/trainer.ts", line 88, in allReduce\n    await barrier()\n',
    );
    writeFileSync(join(t.dir, '.anomaly_type'), 'heartbeat_stall\n');
    writeFileSync(join(t.dir, '.HALT'), 'halt: heartbeat_stall\n');
    const s = await new RunModel(new LocalHost(), t.dir).poll();
    assert.equal(s.identity.trainer, 'nsa-top-reference');
    assert.equal(s.identity.backend, 'FSDP');
    assert.equal(s.identity.worldSize, 2);
    assert.equal(s.totalSteps, 9);
    assert.equal(s.step, 1);
    assert.equal(s.ranks[0]!.memReservedMiB, 22);
    assert.equal(s.series.loss.recent.length, 1);
    assert.deepEqual(
      s.checkpoints.map((c) => [c.step, c.fsdp]),
      [[100, true]],
    );
    assert.equal(s.control.halt.content, 'halt: heartbeat_stall\n');
    assert.equal(s.control.anomaly?.type, 'heartbeat_stall');
    assert.equal(s.dumps.length, 2);
    const [wd, ref] = s.dumps as [(typeof s.dumps)[0], (typeof s.dumps)[0]];
    assert.equal(wd.kind, 'watchdog');
    assert.equal(wd.fsdp, true);
    assert.equal(wd.threads[0]!.frames[0]!.code, 'g()');
    assert.equal(wd.parseErrors, 0, 'GRAD TRACE section is not an error');
    assert.deepEqual([ref.rank, ref.pid, ref.step, ref.phase, ref.signal], [1, 4242, 17, 'allreduce', 10]);
    assert.equal(ref.threads[0]!.frames[0]!.func, 'allReduce');
  } finally {
    t.done();
  }
});

test('a read error on one file (e.g. permission) is reported on that file; the rest is read', async () => {
  const t = tempDir();
  try {
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hbLine({ ts: T0, msg: 'boot' }) + progressLine(1, T0 + 1));
    writeFileSync(join(t.dir, 'training.csv'), '1,5.0,1e-4,10\n');
    const s = await new RunModel(new RefusingHost((p) => p.endsWith('training.csv')), t.dir).poll();
    assert.equal(s.files['training.csv']!.lastError, 'EACCES: permission denied');
    assert.equal(s.step, 1);
    assert.equal(s.seriesSource.loss, 'heartbeat');
  } finally {
    t.done();
  }
});

test('a missing run dir gives exists=false and an error, not a throw', async () => {
  const s = await new RunModel(new LocalHost(), '/nonexistent/nsa-top/run').poll();
  assert.equal(s.exists, false);
  assert.match(s.error ?? '', /ENOENT/);
});

function snapshotCore(s: RunSnapshot) {
  return {
    step: s.step,
    loss: s.loss,
    segments: s.segments.map((g) => [g.index, g.firstStep, g.lastStep, g.pid, g.cause]),
    lossTotal: s.series.loss.total,
    toksTotal: s.series.toksPerS.total,
    entTotal: s.series.gateEntropy.total,
    ranks: s.ranks.map((r) => [r.rank, r.pid, r.lastStep, r.records, r.watchdogDumps, r.events]),
    data: s.data,
    stepTimeS: s.stepTimeS,
    logLines: s.log.lines.slice(-20),
    effective: s.log.effectiveConfig,
  };
}

test('a huge file is read from its end first; backfill over later polls gives the same run as a full read', async () => {
  const t = tempDir();
  try {
    let hb = hbLine({ ts: T0, msg: 'boot', pid: 100 });
    let csv = '';
    let log =
      '[boot] loading config configs/x.yaml\n[boot] effective config: S=8 B=1 accum=1 gc=off\n[train] dataset=synthetic tokenizer=byte\n';
    for (let i = 1; i <= 3000; i++) {
      if (i === 1800) hb += hbLine({ ts: T0 + 5000, msg: 'boot', pid: 200 });
      const step = i < 1800 ? i : i - 1799;
      const ts = i < 1800 ? T0 + i : T0 + 5000 + step;
      hb += progressLine(step, ts, { gate_entropy_mean: 1.0, gate_max_gate: 0.4 }, i < 1800 ? 100 : 200);
      if (i % 50 === 0) hb += hbLine({ ts, msg: 'watchdog_dump', path: 'p' });
      csv += `${step},${(5 - i / 1000).toFixed(6)},1.000000e-04,${i}\n`;
      log += `step ${String(step).padStart(4, '0')} | loss 1.0 | lr 1e-4 | toks/s 10\n`;
    }
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hb);
    writeFileSync(join(t.dir, 'training.csv'), csv);
    writeFileSync(join(t.dir, 'train.log'), log);
    const full = await new RunModel(new LocalHost(), t.dir, { recentWindow: 500, historyBuckets: 64 }).poll();
    assert.equal(full.backfill.pending, false);
    assert.equal(full.segments.length, 2);

    const opts = {
      recentWindow: 500,
      historyBuckets: 64,
      tailThreshold: 32 * 1024,
      tailBytes: 16 * 1024,
      backfillChunk: 48 * 1024,
    };
    const m = new RunModel(new LocalHost(), t.dir, opts);
    let s = await m.poll();
    assert.equal(s.backfill.pending, true, 'older history not read yet');
    assert.equal(s.step, full.step, 'the first snapshot already shows the present');
    assert.equal(s.loss, full.loss);
    assert.ok(s.series.loss.total < full.series.loss.total);
    let polls = 1;
    while (s.backfill.pending && polls < 200) {
      s = await m.poll();
      polls++;
    }
    assert.ok(polls > 3, `backfill took ${polls} polls (bounded chunks)`);
    assert.equal(s.backfill.pending, false);
    assert.deepEqual(snapshotCore(s), snapshotCore(full));
    const segs = [...s.series.loss.history.map((b) => b.segment), ...s.series.loss.recent.map((p) => p.segment)];
    assert.ok(
      segs.every((x, i) => i === 0 || x >= segs[i - 1]!),
      'segments in order after the merge',
    );
    assert.ok(s.series.loss.history.length <= 64);
    assert.equal(s.files['heartbeat_rank0.jsonl']!.parseErrors, 0);
    assert.equal(s.files['heartbeat_rank0.jsonl']!.records, full.files['heartbeat_rank0.jsonl']!.records);
  } finally {
    t.done();
  }
});

test('two models on one host both see a file replaced; a replacement mid-backfill is not mixed in', async () => {
  const t = tempDir();
  try {
    const host = new LocalHost();
    const hb = join(t.dir, 'heartbeat_rank0.jsonl');
    let text = hbLine({ ts: T0, msg: 'boot', pid: 100 });
    for (let i = 1; i <= 3000; i++) text += progressLine(i, T0 + i, {}, 100);
    writeFileSync(hb, text);
    const opts = { tailThreshold: 64 * 1024, tailBytes: 16 * 1024, backfillChunk: 32 * 1024 };
    const a = new RunModel(host, t.dir, opts);
    const b = new RunModel(host, t.dir, opts);
    let sa = await a.poll();
    let sb = await b.poll();
    assert.equal(sa.step, 3000);
    assert.equal(sa.backfill.pending, true);

    // replaced by a short new file (a fresh run in the same dir) while backfill is under way
    const tmp = join(t.dir, 'hb.new');
    writeFileSync(
      tmp,
      hbLine({ ts: T0 + 9000, msg: 'boot', pid: 300 }) +
        progressLine(1, T0 + 9001, {}, 300) +
        progressLine(2, T0 + 9002, {}, 300),
    );
    renameSync(tmp, hb);
    sa = await a.poll();
    sb = await b.poll();
    for (const s of [sa, sb]) {
      assert.equal(s.files['heartbeat_rank0.jsonl']!.resets, 1);
      assert.equal(s.step, 2);
      assert.equal(s.ranks[0]!.pid, 300);
      assert.equal(s.backfill.pending, false, "the old file's history is not read into the new one");
      const last = s.segments[s.segments.length - 1]!;
      assert.equal(last.pid, 300);
      assert.deepEqual(
        s.series.loss.recent.filter((p) => p.segment === last.index).map((p) => p.step),
        [1, 2],
      );
    }
  } finally {
    t.done();
  }
});

test('val.csv: step,val_loss,ppl rows (quoted header, BOM, CRLF tolerated) → valLoss series and lastVal', async () => {
  const t = tempDir();
  try {
    writeFileSync(join(t.dir, 'training.csv'), '1000,3.0,1e-4,10\n');
    writeFileSync(
      join(t.dir, 'val.csv'),
      '\ufeff"step","loss","ppl"\r\n1000,3.100000,22.197951\r\n2000,2.900000,18.174145\r\n',
    );
    const s = await new RunModel(new LocalHost(), t.dir).poll();
    assert.deepEqual(
      s.series.valLoss.recent.map((p) => [p.step, p.value]),
      [
        [1000, 3.1],
        [2000, 2.9],
      ],
    );
    assert.deepEqual(s.lastVal, { step: 2000, valLoss: 2.9, ppl: 18.174145 });
    assert.equal(s.files['val.csv']!.parseErrors, 0);
  } finally {
    t.done();
  }
});

test('a failing host never rejects poll(): the snapshot keeps what was read and says why; overlapping polls share one round', async () => {
  const t = tempDir();
  try {
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hbLine({ ts: T0, msg: 'boot' }) + progressLine(1, T0 + 1));
    let fail = false;
    let rounds = 0;
    class FlakyHost extends LocalHost {
      override async pollDir(dir: string, reads: ReadRequest[], subdirs?: string[]): Promise<DirPoll> {
        rounds++;
        if (fail) throw new Error('connection lost');
        return super.pollDir(dir, reads, subdirs);
      }
    }
    const m = new RunModel(new FlakyHost(), t.dir);
    const [a, b] = await Promise.all([m.poll(), m.poll()]);
    assert.equal(a, b, 'the second caller got the round in flight');
    assert.equal(rounds, 2, 'listing round + first reads of the new files, once');
    assert.equal(a.step, 1);
    fail = true;
    const s = await m.poll();
    assert.match(s.error ?? '', /connection lost/);
    assert.equal(s.step, 1, 'last known state kept');
    fail = false;
    appendFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), progressLine(2, T0 + 2));
    const s2 = await m.poll();
    assert.equal(s2.error, null);
    assert.equal(s2.step, 2);
  } finally {
    t.done();
  }
});

test('artifacts that disappear (a relaunch cleaning up) stop describing the run', async () => {
  const t = tempDir();
  try {
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hbLine({ ts: T0, msg: 'boot' }) + progressLine(1, T0 + 1));
    writeFileSync(join(t.dir, 'metrics.json'), '{"steps": 10}');
    writeFileSync(join(t.dir, '.HALT'), 'halt: manual_stop\n');
    writeFileSync(join(t.dir, '.anomaly_type'), 'nan_loss\n');
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.totalSteps, 10);
    assert.equal(s.control.halt.present, true);
    assert.equal(s.control.anomaly?.type, 'nan_loss');
    const { unlinkSync } = await import('node:fs');
    for (const f of ['metrics.json', '.HALT', '.anomaly_type']) unlinkSync(join(t.dir, f));
    s = await m.poll();
    assert.equal(s.metrics, null);
    assert.equal(s.totalSteps, null);
    assert.equal(s.ended, false);
    assert.equal(s.control.halt.present, false);
    assert.equal(s.control.anomaly, null);
  } finally {
    t.done();
  }
});

test('pathological input stays bounded: 3000 restarts, 500 distinct event names', async () => {
  const t = tempDir();
  try {
    let text = '';
    for (let i = 0; i < 3000; i++)
      text += hbLine({ ts: T0 + i * 10, msg: 'boot', pid: 1000 + i }) + progressLine(1, T0 + i * 10 + 1, {}, 1000 + i);
    for (let i = 0; i < 500; i++) text += hbLine({ ts: T0 + 40000 + i, msg: `weird_${i}`, pid: 3999 });
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), text);
    let csv = '';
    for (let i = 0; i < 3000; i++) csv += '1,5.0,1e-4,10\n2,4.9,1e-4,10\n';
    writeFileSync(join(t.dir, 'training.csv'), csv);
    const m = new RunModel(new LocalHost(), t.dir, { recentWindow: 100, historyBuckets: 64 });
    let s = await m.poll();
    for (let i = 0; i < 50 && s.backfill.pending; i++) s = await m.poll();
    assert.equal(s.segments.length, 1000, 'the newest 1000 segments');
    assert.equal(s.segments.at(-1)!.index, 2999, 'indices keep counting');
    assert.equal(s.segments.at(-1)!.pid, 3999);
    assert.ok(s.series.loss.history.length <= 128, `history ${s.series.loss.history.length}`);
    assert.ok(s.series.loss.recent.length <= 100);
    assert.equal(s.series.loss.total, 6000);
    const ev = s.ranks[0]!.events;
    assert.ok(Object.keys(ev).length <= 65, `${Object.keys(ev).length} event keys`);
    assert.equal(
      Object.values(ev).reduce((a, b) => a + b, 0),
      3000 * 3 + 500,
      'every record still counted',
    );
    assert.ok(s.ranks[0]!.unknownEvents!.length <= 5);
    assert.equal(s.step, 1);
    assert.ok(JSON.stringify(s).length < 2_000_000);
  } finally {
    t.done();
  }
});

test('a small file caught mid-write is an error only until it is complete', async () => {
  const t = tempDir();
  try {
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), hbLine({ ts: T0, msg: 'boot' }));
    writeFileSync(join(t.dir, 'metrics.json'), '{"steps": 4');
    const m = new RunModel(new LocalHost(), t.dir);
    let s = await m.poll();
    assert.equal(s.files['metrics.json']!.parseErrors, 1);
    assert.equal(s.metrics, null);
    writeFileSync(join(t.dir, 'metrics.json'), '{"steps": 40, "loss_last": 2.5}');
    s = await m.poll();
    assert.equal(s.files['metrics.json']!.parseErrors, 0);
    assert.equal(s.files['metrics.json']!.lastError, null);
    assert.equal(s.totalSteps, 40);
  } finally {
    t.done();
  }
});

test("a huge training.csv's first look reads ~4000 rows from its end: the recent window full, the rest left to backfill", async () => {
  const t = tempDir();
  try {
    let csv = '';
    for (let step = 1; step <= 50_000; step++)
      csv += `${step},${(5 - step / 20_000).toFixed(6)},2.000000e-04,${9000 + (step % 500)}\n`;
    writeFileSync(join(t.dir, 'training.csv'), csv); // ~1.6 MB: over the 1 MiB tail threshold
    writeFileSync(join(t.dir, 'heartbeat_rank0.jsonl'), progressLine(50_000, T0, {}, 100));
    const s = await new RunModel(new LocalHost(), t.dir).poll();
    assert.equal(s.series.loss.recent.length, 2000, 'the recent window is full at first look');
    assert.equal(s.series.loss.recent.at(-1)!.step, 50_000);
    // 128 KiB of ~32-byte rows (a partial first line dropped)
    assert.ok(s.series.loss.total > 3500 && s.series.loss.total < 4500, `rows read first: ${s.series.loss.total}`);
    assert.equal(s.backfill.pending, true);
  } finally {
    t.done();
  }
});
