// The reference trainer writes the nsa-vibe contract (§1): every file parses, formats match the real
// trainer's, and the cockpit's own RunModel reads the run. Also: CLI errors and --data.
// Runs the built binary (npm run build first).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { verifyCheckpoint } from '../../../src/trainer/reference/checkpoint.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { TfRecordReader, type TbEvent } from '../../../src/trainer/run/readers/tb.js';
import { csvRows, heartbeats, readLines, tmp, trainToEnd } from './helpers.js';

test('a short run writes every contract file in the real formats, and RunModel reads it', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd([
      '--out',
      t.out,
      '--config',
      t.cfg,
      '--steps',
      '12',
      '--log-every',
      '2',
      '--save-every',
      '6',
      '--eval-every',
      '4',
    ]);
    assert.equal(r.code, 0, r.stderr);

    // stdout lines, exactly like the real trainer's
    const lines = r.stdout.split('\n');
    assert.equal(lines[0], `[boot] loading config ${t.cfg}`);
    assert.ok(lines.includes('[boot] effective config: S=32 B=4 accum=1 gc=off'), r.stdout);
    assert.ok(lines.includes('[train] dataset=pride-and-prejudice tokenizer=byte'), r.stdout);
    const stepLines = lines.filter((l) => l.startsWith('step '));
    assert.deepEqual(
      stepLines.map((l) => l.slice(5, 9)),
      ['0001', '0002', '0004', '0006', '0008', '0010', '0012'],
    );
    for (const l of stepLines)
      assert.match(l, /^step \d{4} \| loss \d+\.\d{4} \| lr \d\.\d{2}e[-+]\d{2} \| toks\/s \d+ \| fetch \d+ms$/);
    const metricsOut = JSON.parse(r.stdout.slice(r.stdout.lastIndexOf('\n{') + 1));
    assert.equal(metricsOut.steps, 12);

    // training.csv: no header, step,loss(6dp),lr(%.6e),toks(int)
    const rows = csvRows(join(t.out, 'training.csv'));
    assert.deepEqual(
      rows.map((x) => Number(x[0])),
      [1, 2, 4, 6, 8, 10, 12],
    );
    for (const row of rows) {
      assert.equal(row.length, 4);
      assert.match(row[1]!, /^\d+\.\d{6}$/);
      assert.match(row[2]!, /^\d\.\d{6}e[-+]\d{2}$/);
      assert.match(row[3]!, /^\d+$/);
    }
    assert.ok(Number(rows[0]![1]) > 5 && Number(rows[0]![1]) < 6, 'first loss near ln 256');

    // val.csv: step,val_loss,ppl on eval steps that are log steps
    const val = csvRows(join(t.out, 'val.csv'));
    assert.deepEqual(
      val.map((x) => Number(x[0])),
      [4, 8, 12],
    );
    for (const v of val) assert.ok(Math.abs(Math.exp(Number(v[1])) - Number(v[2])) < 1e-3 * Number(v[2]));

    // heartbeat: boot, then progress + step_end on log steps
    const hb = heartbeats(t.out, 0);
    assert.equal(hb[0]!.msg, 'boot');
    assert.equal(hb[0]!.step, 0);
    assert.equal(hb[0]!.phase, 'start');
    const prog = hb.filter((h) => h.msg === 'progress');
    assert.equal(prog.length, 7);
    for (const p of prog) {
      for (const k of [
        'ts',
        'iso',
        'pid',
        'rank',
        'step',
        'loss',
        'toks_per_s',
        'dt_fetch_s',
        'gate_entropy_mean',
        'gate_entropy_min',
        'gate_max_gate',
        'gate_collapse_frac',
        'gate_branch_shares',
        'fb_total_fallbacks',
        'sel_k_mean',
        'sel_k_max',
        'sel_rows',
        'sel_pct_at_max',
      ])
        assert.ok(k in p, `progress lacks ${k}`);
      assert.match(String(p.iso), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      assert.equal((p.gate_branch_shares as number[]).length, 3);
      assert.ok((p.gate_entropy_mean as number) <= Math.log(3) + 1e-9);
    }
    const idx = hb.findIndex((h) => h.msg === 'progress' && h.step === 4);
    assert.equal(hb[idx + 1]!.msg, 'step_end', 'step_end follows progress');
    assert.ok(!('fetch_p50_ms' in prog[0]!), 'fetch percentiles wait for 20 samples');

    // env.json, metrics.json, side CSVs, opt_state_mb.txt, config.yaml
    const env = JSON.parse(readFileSync(join(t.out, 'env.json'), 'utf8'));
    assert.equal(env.trainer, 'nsa-top-reference');
    assert.match(env.python, /^node v\d+/);
    assert.equal(env.torch, undefined);
    assert.equal(env.cuda_available, false);
    assert.equal(env.env.CONFIG, t.cfg);
    const metrics = JSON.parse(readFileSync(join(t.out, 'metrics.json'), 'utf8'));
    for (const k of ['device', 'dtype', 'steps', 'seq_len', 'batch_global', 'lr', 'loss_first', 'loss_last'])
      assert.ok(k in metrics, k);
    assert.equal(metrics.batch_global, 4);
    assert.equal(readLines(join(t.out, 'k_stats.csv'))[0], 'step,k_mean,k_max,rows,pct_at_max');
    assert.equal(readLines(join(t.out, 'k_stats.csv')).length, 8);
    assert.match(
      readLines(join(t.out, 'fallback_counters.csv'))[0]!,
      /^step,selection_triton_fails,.*,total_fallbacks$/,
    );
    assert.match(readFileSync(join(t.out, 'opt_state_mb.txt'), 'utf8'), /^\d+\.\d+\n$/);
    const cfg = parseYaml(readFileSync(join(t.out, 'config.yaml'), 'utf8'));
    assert.deepEqual(Object.keys(cfg), ['model', 'nsa', 'data', 'runtime', 'train']);
    assert.equal(cfg.model.dim, 32);
    assert.equal(cfg.train.steps, 12);
    assert.equal(cfg.train.save_every, 6);

    // checkpoints: complete, named like the real ones
    for (const s of [6, 12])
      assert.deepEqual(await verifyCheckpoint(join(t.out, `checkpoint_step${s}.pt`)), { ok: true, step: s });

    // TensorBoard scalars like the real trainer's, readable by the cockpit's TFRecord decoder
    assert.ok(lines.includes(`[train] tensorboard logdir: ${join(t.out, 'tb')}`));
    const tbFiles = readdirSync(join(t.out, 'tb'));
    assert.equal(tbFiles.length, 1);
    assert.match(tbFiles[0]!, /^events\.out\.tfevents\.\d+\./);
    const events: TbEvent[] = [];
    const rd = new TfRecordReader();
    rd.push(readFileSync(join(t.out, 'tb', tbFiles[0]!)), (e) => events.push(e));
    assert.equal(rd.errors, 0, rd.lastError ?? '');
    assert.equal(events[0]!.fileVersion, 'brain.Event:2');
    const tbLoss = events.flatMap((e) => e.scalars.filter((x) => x.tag === 'train/loss').map((x) => [e.step, x.value]));
    assert.deepEqual(
      tbLoss.map((x) => x[0]),
      [1, 2, 4, 6, 8, 10, 12],
    );
    tbLoss.forEach(([, v], i) => assert.ok(Math.abs(v! - Number(rows[i]![1])) < 1e-5));
    assert.deepEqual(
      new Set(events.flatMap((e) => e.scalars.map((x) => x.tag))),
      new Set(['train/loss', 'train/toks_per_s', 'train/lr']),
    );

    // the cockpit's reader sees the same run
    const snap = await new RunModel(new LocalHost(), t.out).poll();
    assert.equal(snap.identity.trainer, 'nsa-top-reference');
    assert.equal(snap.step, 12);
    assert.equal(snap.totalSteps, 12);
    assert.deepEqual(
      snap.checkpoints.map((c) => c.step).sort((a, b) => a - b),
      [6, 12],
    );
    assert.equal(snap.series.loss.total, 7);
    assert.equal(snap.lastVal?.step, 12);
    assert.equal(snap.identity.model?.dim, 32);
    assert.ok(snap.lastProgress?.gate, 'gate stats read');
  } finally {
    t.cleanup();
  }
});

test('bad input is a one-line error with exit 2 and writes nothing', async () => {
  const t = tmp();
  try {
    const cases: [string[], RegExp][] = [
      [['--bogus'], /unknown option '--bogus'/],
      [['--steps', 'ten'], /--steps needs an integer/],
      [['--inject', 'hang@step=x'], /--inject 'hang@step=x'/],
      [['--inject', 'explode@step=3'], /unknown kind 'explode'/],
      [['--ranks', '2', '--inject', 'hang@step=3,rank=5'], /rank=5 does not exist/],
      [['--resume', join(t.dir, 'nope.pt')], /--resume .*nope\.pt/],
      [['--kernels', 'cuda'], /--kernels must be/],
    ];
    const results = await Promise.all(cases.map(([args]) => trainToEnd(['--out', t.out, '--config', t.cfg, ...args])));
    cases.forEach(([args, re], i) => {
      const r = results[i]!;
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    });
    assert.equal(existsSync(t.out), false, 'nothing written');
    const h = await trainToEnd(['--help']);
    assert.equal(h.code, 0);
    assert.match(h.stdout, /--ranks N[\s\S]*not a distributed training engine/i);
  } finally {
    t.cleanup();
  }
});

test('--data takes JSONL with a "text" field; the dataset name and local-dataset line follow it', async () => {
  const t = tmp();
  try {
    const data = join(t.dir, 'notes.jsonl');
    const para = 'It is a truth universally acknowledged that a tiny model needs some text to read. ';
    writeFileSync(
      data,
      Array.from({ length: 200 }, (_, i) => JSON.stringify({ id: i, text: para.repeat(3) })).join('\n') + '\n',
    );
    const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '3', '--data', data]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.includes('[train] dataset=notes tokenizer=byte'), r.stdout);
    assert.ok(r.stdout.includes(`[train] reading local dataset: ${data}`));
    const bad = join(t.dir, 'bad.jsonl');
    writeFileSync(bad, '{"text": "fine"}\n{"body": "no text here"}\n');
    const r2 = await trainToEnd(['--out', join(t.dir, 'run2'), '--config', t.cfg, '--steps', '3', '--data', bad]);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr, /bad\.jsonl:2: no string "text" field/);
    assert.equal(existsSync(join(t.dir, 'run2')), false, 'nothing written for bad data');
  } finally {
    t.cleanup();
  }
});
