// The pure snapshot builder: which source wins a field (PRECEDENCE), fed straight into ParsedRun
// through the same parsers RunModel uses, no files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildSnapshot, PRECEDENCE, type SnapshotInputs } from '../../../src/trainer/run/build.js';
import { ParsedRun } from '../../../src/trainer/run/parsed.js';
import { progressLine } from './helpers.js';

function parsed(): ParsedRun {
  return new ParsedRun({ recentWindow: 100, historyBuckets: 16 }, 50);
}

function feed(p: ParsedRun, name: string, text: string): void {
  const kind =
    name === 'training.csv'
      ? ({ kind: 'training-csv', fsdp: false } as const)
      : ({ kind: 'heartbeat', rank: Number(/rank(\d+)/.exec(name)![1]) } as const);
  const parser = p.lineParser(name, kind)!;
  for (const line of text.split('\n')) if (line) assert.equal(parser.sink(line, 1000), null, line);
}

function build(p: ParsedRun, over: Partial<SnapshotInputs> = {}) {
  return buildSnapshot({
    runDir: '/runs/x',
    hostLabel: 'local',
    takenAt: 5000,
    hostNowMs: 5000,
    exists: true,
    error: null,
    nothingRead: false,
    parsed: p,
    envConfig: null,
    configFile: null,
    trainingMtimeMs: null,
    checkpoints: [],
    dumpNames: [],
    memDumps: [],
    tb: { present: false, files: 0, unreadBytes: 0 },
    files: [],
    refused: new Map(),
    backfill: { pending: false, bytesLeft: 0 },
    ...over,
  });
}

test('the heartbeat wins step, loss and tokens/s over training.csv; lr comes from the csv', () => {
  const p = parsed();
  feed(p, 'heartbeat_rank0.jsonl', progressLine(10, 100) + progressLine(20, 110));
  feed(p, 'training.csv', '10,4.5,0.001,900\n');
  const s = build(p);
  assert.equal(s.step, 20);
  assert.equal(s.loss, 5 - 20 / 1000);
  assert.equal(s.toksPerS, 1020);
  assert.equal(s.lr, 0.001);
  assert.equal(s.seriesSource.loss, 'csv', 'series: the csv is written, so it is the chart');
  assert.equal(s.identity.trainer, 'nsa-vibe');
  assert.equal(s.identity.worldSize, 1, 'from the heartbeat files');
});

test('without a heartbeat, training.csv gives step and loss; a non-finite loss is flagged, not shown', () => {
  const p = parsed();
  feed(p, 'training.csv', '1,5.0,0.001,900\n2,nan,0.002,950\n');
  const s = build(p, { trainingMtimeMs: 4000 });
  assert.equal(s.step, 2);
  assert.equal(s.loss, null);
  assert.equal(s.lastLossNonFinite, true);
  assert.equal(s.toksPerS, 950);
  assert.equal(s.stepAdvancedTs, 1000, 'the mtime the row was read at');
  assert.equal(s.identity.worldSize, null);
  assert.equal(s.identity.backend, null);
});

test('totalSteps: metrics.json over the config; no source leaves null', () => {
  const p = parsed();
  assert.equal(build(p).totalSteps, null);
  const withCfg = build(p, { envConfig: { train: { steps: 300 } } as never });
  assert.equal(withCfg.totalSteps, 300);
  p.metrics = { steps: 400 } as never;
  assert.equal(build(p, { envConfig: { train: { steps: 300 } } as never }).totalSteps, 400);
  assert.deepEqual(
    PRECEDENCE.totalSteps.map(([src]) => src),
    ['metrics.json', 'train.log', 'config'],
  );
});

test('a run dir that does not exist and has nothing followed builds the empty snapshot', () => {
  const p = parsed();
  feed(p, 'heartbeat_rank0.jsonl', progressLine(10, 100));
  const s = build(p, { exists: false, nothingRead: true, error: 'run dir missing' });
  assert.equal(s.exists, false);
  assert.equal(s.error, 'run dir missing');
  assert.equal(s.step, null, 'nothing filled in');
  assert.equal(s.identity.trainer, 'unknown');
  assert.equal(build(p).step, 10, 'the same state in a run dir that exists');
});

test('a series no source writes stays empty: heartbeats without toks_per_s never chart loss as tokens/s', () => {
  const p = parsed();
  feed(
    p,
    'heartbeat_rank0.jsonl',
    progressLine(10, 100, { toks_per_s: undefined }) + progressLine(20, 110, { toks_per_s: undefined }),
  );
  const s = build(p);
  assert.equal(s.seriesSource.loss, 'heartbeat');
  assert.ok(s.series.loss.recent.length > 0, 'loss is charted');
  assert.equal(s.seriesSource.toksPerS, null);
  assert.deepEqual(s.series.toksPerS.recent, [], 'no tokens/s points');
  assert.deepEqual(s.series.lr.recent, [], 'no lr points');
});

test('totalSteps after a relaunch with --steps N: an earlier segment’s metrics.json (older than the run’s records) does not say the total', () => {
  const p = parsed();
  // the first segment finished at 300 (metrics.json at t=1000 s); the relaunch (a new boot, a new
  // pid) trains on from its checkpoint: records from t=2000 s
  const boot = (ts: number, pid: number) =>
    JSON.stringify({ ts, pid, rank: 0, step: 0, msg: 'boot', phase: 'start' }) + '\n';
  feed(
    p,
    'heartbeat_rank0.jsonl',
    boot(100, 100) +
      progressLine(299, 900) +
      progressLine(300, 901) +
      boot(1999, 200) +
      progressLine(301, 2000, {}, 200) +
      progressLine(302, 2001, {}, 200),
  );
  p.metrics = { steps: 300 } as never;
  p.metricsMtime = 1_000_000;
  const cfg = { envConfig: { train: { steps: 600 } } as never, hostNowMs: 2_002_000, takenAt: 2_002_000 };
  const s = build(p, cfg);
  assert.equal(s.segments.length, 2, 'the relaunch is a segment of its own');
  assert.equal(s.ended, false, 'metrics.json is older than the newest record');
  assert.equal(s.totalSteps, 600, 'the relaunch’s total, not the earlier segment’s 300');
  assert.notEqual(s.etaS, null);
  // metrics.json written after the newest record: the run ended, and its word stands
  p.metricsMtime = 2_001_500;
  assert.equal(build(p, cfg).totalSteps, 300);
  // one segment whose records are newer than metrics.json (clocks apart, a copied dir): its word stands
  const one = parsed();
  feed(one, 'heartbeat_rank0.jsonl', progressLine(301, 2000) + progressLine(302, 2001));
  one.metrics = { steps: 300 } as never;
  one.metricsMtime = 1_000_000;
  assert.equal(build(one, cfg).totalSteps, 300);
});
