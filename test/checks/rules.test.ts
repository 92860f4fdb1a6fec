// Every rule against the real fixture runs (read by the real RunModel) and against snapshots built
// to carry exactly the signal a rule is about. A rule that cannot fire here is a defect.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, thresholdsFromEnv, type Alert, type CheckInput } from '../../src/checks/index.js';
import { fixture, gpu, liveFixture, liveRun, proc, procs, series } from './helpers.js';

const ids = (as: Alert[]) => as.map((a) => a.id);
const find = (as: Alert[], id: string) => as.find((a) => a.id === id);
const above = (as: Alert[], sev: 'info' | 'warning') =>
  as.filter((a) => (sev === 'info' ? a.severity !== 'info' : a.severity === 'critical'));

test('NSA_WATCH_* names set the thresholds; a malformed value is an error naming the variable', () => {
  const t = thresholdsFromEnv({
    NSA_WATCH_HEARTBEAT_STALL_S: '3',
    NSA_WATCH_FLATLINE_N: '6',
    NSA_WATCH_GATE_ENTROPY_MIN: '0.3',
    NSA_WATCH_GATE_MAX_THRESHOLD: '0.8',
    NSA_WATCH_GATE_COLLAPSE_N: '5',
    NSA_WATCH_HALT: '1',
    NSA_WATCH_INTERVAL_S: '15',
  });
  assert.equal(t.stallFloorS, 3);
  assert.equal(t.flatlineN, 6);
  assert.equal(t.gateEntropyMin, 0.3);
  assert.equal(t.gateMaxThreshold, 0.8);
  assert.equal(t.gateCollapseN, 5);
  assert.equal(t.halt, true);
  assert.equal(t.intervalS, 15);
  const d = thresholdsFromEnv({});
  assert.equal(d.stallFloorS, 180);
  assert.equal(d.flatlineN, 4);
  assert.throws(() => thresholdsFromEnv({ NSA_WATCH_HEARTBEAT_STALL_S: 'soon' }), /NSA_WATCH_HEARTBEAT_STALL_S/);
});

test('single fixture: FINISHED; synthetic-data tell is a warning; nothing critical', async () => {
  const run = await fixture('single');
  const ev = new Checker().evaluate({ now: run.hostNowMs, run, procs: null, gpu: null });
  assert.equal(ev.runState, 'FINISHED');
  assert.match(ev.runStateWhy, /40 of 40/);
  assert.equal(find(ev.alerts, 'data:synthetic')?.severity, 'warning');
  // since the run (its segment) started, not since this Checker first looked
  assert.equal(find(ev.alerts, 'data:synthetic')?.since, run.segments.at(-1)!.startTs);
  assert.ok(run.segments.at(-1)!.startTs! < run.hostNowMs - 60_000);
  // 40 steps at lr 3e-4: the gate is still within 1e-3 of uniform, as a learning one is that early
  assert.equal(find(ev.alerts, 'gates:frozen'), undefined, 'too early to say the gate learns nothing');
  assert.deepEqual(above(ev.alerts, 'warning'), []);
  assert.equal(ev.stallDeadline, null, 'a finished run cannot stall');
});

test('ddp2 fixture: HALTED by .HALT, the left-over .HALT is noted, rank 1 with only a boot record is not a stall', async () => {
  const run = await fixture('ddp2-dumps-halt');
  const ev = new Checker().evaluate({ now: run.hostNowMs, run, procs: procs([]), gpu: null });
  assert.equal(ev.runState, 'HALTED');
  assert.match(ev.runStateWhy, /\.HALT.*31 of 400/);
  assert.ok(find(ev.alerts, 'halt:left'));
  assert.ok(!ids(ev.alerts).some((i) => i.startsWith('stall')));
  assert.ok(!ids(ev.alerts).includes('exited'), 'a halted run is not a crash');
});

test('ddp2 as if live: rank 1 boot-only is routine; once rank 0 goes quiet past the threshold the run is STALLED', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const alive = procs([proc(0, 'S'), proc(1, 'S')]);
  const c = new Checker();
  const ok = c.evaluate({ now: lastTs + 1000, run, procs: alive, gpu: null });
  assert.equal(ok.runState, 'RUNNING');
  assert.deepEqual(above(ok.alerts, 'warning'), []);
  assert.ok(!ids(ok.alerts).includes('stall:rank1'));
  // the threshold is the 180 s floor (0.44 s/step × log_every 1 is far below it)
  assert.equal(ok.stallThresholdS, 180);
  const late = c.evaluate({ now: lastTs + 200_000, run, procs: alive, gpu: null });
  assert.equal(late.runState, 'STALLED');
  const st = find(late.alerts, 'stall:run')!;
  assert.equal(st.severity, 'critical');
  assert.equal(st.anomaly, 'heartbeat_stall');
  assert.match(st.title, /step frozen at 31/);
  assert.ok(
    !find(late.alerts, 'stall:rank0'),
    'without per-step beats the run alert is the rank-0 alert: not said twice',
  );
  assert.ok(!find(late.alerts, 'stall:rank1'), 'rank 1 writes no per-step records: its silence is not evidence');
  assert.ok(late.verdicts.some((v) => v.kind === 'all-silent'));
  assert.ok(
    late.actOn.some((x) => x.id === 'stall:run'),
    'past the 180 s floor the watchdog acts',
  );
  // 170 s: overdue by the run's own cadence (0.44 s/step), so the operator sees STALLED, but it is
  // inside the watchdog's action threshold (the floor)
  const mid = new Checker().evaluate({ now: lastTs + 170_000, run, procs: alive, gpu: null });
  assert.equal(mid.runState, 'STALLED');
  assert.match(mid.runStateWhy, /all ranks silent since \d\d:\d\d:\d\d /);
  assert.equal(find(mid.alerts, 'stall:run')?.severity, 'critical');
  assert.deepEqual(mid.actOn, [], 'the watchdog waits for its floor');
  // 10 s: within noise
  assert.equal(new Checker().evaluate({ now: lastTs + 10_000, run, procs: alive, gpu: null }).runState, 'RUNNING');
});

test('stall threshold follows the run cadence: log_every × step time above the floor', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 200, t, logEvery: 20, stepTimeS: 12 }); // 240 s between heartbeats
  const c = new Checker();
  const a = c.evaluate({ now: t + 200_000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(a.expectedIntervalS, 240);
  assert.equal(a.stallThresholdS, 720);
  assert.ok(
    !find(a.alerts, 'stall:run'),
    '200 s is normal for a 240 s log interval (the real watchdog would halt here)',
  );
  const b = c.evaluate({ now: t + 730_000, run, procs: procs([proc(0)]), gpu: null });
  assert.ok(find(b.alerts, 'stall:run'));
  // a settable floor
  const small = new Checker({ stallFloorS: 3 }).evaluate({
    now: t + 4000,
    run: liveRun({ step: 5, t, stepTimeS: 0.1 }),
    procs: procs([proc(0)]),
    gpu: null,
  });
  assert.equal(small.stallThresholdS, 3);
  assert.ok(find(small.alerts, 'stall:run'));
});

test('heartbeats still written but the step frozen: a stall, told apart from silence', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t });
  run.ranks[0]!.lastTs = t + 250_000; // watchdog_dump records refresh the heartbeat
  run.ranks[0]!.lastMsg = 'watchdog_dump';
  const ev = new Checker().evaluate({ now: t + 260_000, run, procs: procs([proc(0)]), gpu: null });
  assert.match(find(ev.alerts, 'stall:run')!.title, /while heartbeats are still written/);
  assert.ok(ev.verdicts.some((v) => v.kind === 'heartbeat-without-progress'));
});

test('hang verdicts: one rank stopped (T) is the odd one out; GPUs busy at idle power are spinning in a collective', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t });
  run.identity.worldSize = 2;
  run.ranks.push({
    ...run.ranks[0]!,
    rank: 1,
    pid: 101,
    file: 'heartbeat_rank1.jsonl',
    lastMsg: 'boot',
    lastStep: null,
    stepAdvancedTs: null,
    lastTs: t - 60_000,
  });
  const input: CheckInput = {
    now: t + 200_000,
    run,
    procs: procs([proc(0, 'S', { gpuUuid: 'GPU-0' }), proc(1, 'T', { gpuUuid: 'GPU-1' })]),
    gpu: gpu([
      { utilPct: 100, powerW: 80 },
      { utilPct: 100, powerW: 75 },
    ]),
  };
  const ev = new Checker().evaluate(input);
  const odd = ev.verdicts.find((v) => v.kind === 'odd-rank');
  assert.equal(odd?.rank, 1);
  assert.match(odd!.text, /rank 1 is the odd one out: stopped/);
  assert.ok(ev.verdicts.some((v) => v.kind === 'collective-spin'));
  assert.equal(ev.runState, 'STALLED');
  assert.match(ev.runStateWhy, /^rank 1/);
  assert.equal(find(ev.alerts, 'proc-state:1')?.severity, 'critical');
  // at full power the GPUs are computing, not spinning
  const busy = new Checker().evaluate({
    ...input,
    gpu: gpu([
      { utilPct: 100, powerW: 390 },
      { utilPct: 100, powerW: 380 },
    ]),
  });
  assert.ok(!busy.verdicts.some((v) => v.kind === 'collective-spin'));
});

test('per-step beats: the rank whose beat lags is named', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t });
  run.ranks[0]!.events = { beat: 41, progress: 40 };
  run.ranks[0]!.lastMsg = 'beat';
  run.ranks[0]!.lastStep = 41;
  run.ranks.push({ ...run.ranks[0]!, rank: 1, pid: 101, lastStep: 40, lastTs: t - 500 });
  const ev = new Checker({ stallFloorS: 5 }).evaluate({
    now: t + 10_000,
    run,
    procs: procs([proc(0), proc(1)]),
    gpu: null,
  });
  assert.equal(ev.runState, 'STALLED');
  assert.match(ev.runStateWhy, /^rank 1/);
  assert.equal(ev.verdicts.find((v) => v.kind === 'odd-rank')?.rank, 1);
  assert.ok(find(ev.alerts, 'stall:rank1'), 'with beats, rank 1 silence is evidence');
});

test('a rank process gone while the others run is critical; all gone without metrics.json is EXITED', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const one = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(find(one.alerts, 'rank-died:1')?.severity, 'critical');
  const none = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([]), gpu: null });
  assert.equal(none.runState, 'EXITED');
  assert.match(none.runStateWhy, /step 31 of 400/);
  assert.equal(find(none.alerts, 'exited')?.severity, 'critical');
});

test('stale .HALT before the launch is critical; HALT not honoured after the grace is a warning', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const boot = run.ranks[0]!.bootTs!;
  run.control.halt = { present: true, content: 'halt: manual_stop', mtimeMs: boot - 3600_000 };
  const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(find(ev.alerts, 'halt:stale')?.severity, 'critical');
  assert.notEqual(ev.runState, 'HALTING');
  run.control.halt = { present: true, content: '', mtimeMs: lastTs };
  const h1 = new Checker().evaluate({ now: lastTs + 5000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(h1.runState, 'HALTING');
  assert.ok(!find(h1.alerts, 'halt:stuck'));
  // one grace (the run's profile stop.halt_grace_s, passed in by the observation): 90 s is within
  // the default 300 s, past a run's 60 s
  const h2d = new Checker().evaluate({ now: lastTs + 90_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.ok(!find(h2d.alerts, 'halt:stuck'), 'within the default grace (300 s)');
  const h2 = new Checker().evaluate({
    now: lastTs + 90_000,
    run,
    procs: procs([proc(0), proc(1)]),
    gpu: null,
    haltGraceS: 60,
  });
  assert.equal(find(h2.alerts, 'halt:stuck')?.severity, 'warning');
  assert.match(find(h2.alerts, 'halt:stuck')!.detail, /grace 1m00s|grace 60/);
  const h3 = new Checker().evaluate({ now: lastTs + 301_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(find(h3.alerts, 'halt:stuck')?.severity, 'warning');
  const gone = new Checker().evaluate({ now: lastTs + 90_000, run, procs: procs([]), gpu: null });
  assert.equal(gone.runState, 'HALTED');
});

test('synthetic-data tell: warning when the log says synthetic, critical when the run claims real data', async () => {
  const { run, lastTs } = await liveFixture('single');
  const claims = new Checker().evaluate({
    now: lastTs + 1000,
    run,
    procs: null,
    gpu: null,
    launched: { dataset: 'fineweb_edu' },
  });
  assert.equal(find(claims.alerts, 'data:synthetic-tell')?.severity, 'critical');
  run.identity.dataset = 'fineweb_edu';
  const fallback = new Checker().evaluate({ now: lastTs + 1000, run, procs: null, gpu: null });
  assert.equal(find(fallback.alerts, 'data:synthetic-tell')?.severity, 'critical');
  // with dt_fetch_s present, no tell
  run.data.dtFetchAbsent = false;
  run.data.withFetch = 40;
  assert.ok(
    !find(new Checker().evaluate({ now: lastTs + 1000, run, procs: null, gpu: null }).alerts, 'data:synthetic-tell'),
  );
});

test('loss pinned at ln(256) past step 200 on a run that claims real data', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 400, t });
  run.identity.dataset = 'fineweb_edu';
  run.identity.tokenizer = 'byte';
  run.series.loss = series(
    Array.from({ length: 40 }, (_, i) => 5.545 + 0.03 * Math.sin(i)),
    { step0: 10, every: 10 },
  );
  const ev = new Checker().evaluate({ now: t + 1000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(find(ev.alerts, 'loss:pinned-lnV')?.severity, 'critical');
  run.series.loss = series(
    Array.from({ length: 40 }, (_, i) => 5.5 - i * 0.05),
    { step0: 10, every: 10 },
  );
  assert.ok(
    !find(new Checker().evaluate({ now: t + 1000, run, procs: procs([proc(0)]), gpu: null }).alerts, 'loss:pinned-lnV'),
  );
});

test('wrong CONFIG and the toy config under a 125M name', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 100, t });
  run.identity.config = 'configs/train_showcase.yaml';
  run.identity.model = { dim: 128, nLayers: 1, nHeads: 8, nKvGroups: 2, dK: 16, dV: 16, vocab: 256 };
  const ev = new Checker().evaluate({
    now: t + 1000,
    run,
    procs: null,
    gpu: null,
    launched: { config: 'configs/m7c_125m_2xa100_production.yaml', flags: { NSA_PREFILL_BATCHED: '1' } },
  });
  assert.equal(find(ev.alerts, 'identity:config')?.severity, 'critical');
  assert.equal(find(ev.alerts, 'identity:toy')?.severity, 'critical');
  assert.ok(
    find(ev.alerts, 'identity:flag:NSA_PREFILL_BATCHED') === undefined,
    'env.json has no NSA flags at all here: nothing to compare',
  );
  run.identity.flags = { NSA_PREFILL_BATCHED: '0' };
  assert.equal(
    find(
      new Checker().evaluate({
        now: t + 1000,
        run,
        procs: null,
        gpu: null,
        launched: { flags: { NSA_PREFILL_BATCHED: '1' } },
      }).alerts,
      'identity:flag:NSA_PREFILL_BATCHED',
    )?.severity,
    'warning',
  );
  // config named 125M but the dims are different
  run.identity.config = 'configs/m7c_125m_80g.yaml';
  assert.equal(
    find(new Checker().evaluate({ now: t + 1000, run, procs: null, gpu: null }).alerts, 'identity:dims')?.severity,
    'critical',
  );
});

test('throughput plausibility: 38 tok/s for 125M on 2×A100 is absurdly low; 970 tok/s of "125M" on 2 CPU cores is impossible', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 300, t });
  run.identity.config = 'configs/m7c_125m_2xa100_production.yaml';
  run.identity.worldSize = 2;
  run.identity.dtype = 'torch.bfloat16';
  run.series.toksPerS = series([37, 38, 39, 38, 38], { step0: 200, every: 20 });
  const low = new Checker().evaluate({
    now: t + 1000,
    run,
    procs: procs([proc(0, 'S', { gpuUuid: 'GPU-0' }), proc(1, 'S', { gpuUuid: 'GPU-1' })]),
    gpu: gpu([{}, {}]),
  });
  const l = find(low.alerts, 'throughput:low');
  assert.equal(l?.severity, 'warning');
  assert.match(l!.detail, /2 × A100 bf16/);
  run.identity.device = 'cpu';
  run.identity.worldSize = 1;
  run.series.toksPerS = series([960, 970, 975, 968, 970], { step0: 200, every: 20 });
  const imp = new Checker().evaluate({
    now: t + 1000,
    run,
    procs: null,
    gpu: { status: 'no-nvidia-tools', at: 0 },
    hostCpus: 2,
  });
  assert.equal(find(imp.alerts, 'throughput:impossible')?.severity, 'critical');
  // the same tok/s from the toy model is plausible on the CPU
  run.identity.config = 'configs/train_showcase.yaml';
  run.identity.model = { dim: 128, nLayers: 1, nHeads: 8, nKvGroups: 2, dK: 16, dV: 16, vocab: 256 };
  assert.ok(
    !find(
      new Checker().evaluate({
        now: t + 1000,
        run,
        procs: null,
        gpu: { status: 'no-nvidia-tools', at: 0 },
        hostCpus: 2,
      }).alerts,
      'throughput:impossible',
    ),
  );
});

test('throughput flatline on N records and a drop below half the rolling median', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 100, t });
  run.series.toksPerS = series([400, 410, 405, 0, 0, 0]);
  const c = new Checker({ flatlineN: 4 });
  assert.ok(!find(c.evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'throughput:flatline'));
  run.series.toksPerS = series([400, 410, 405, 0, 0, 0, 0]);
  assert.equal(
    find(c.evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'throughput:flatline')?.anomaly,
    'throughput_flatline',
  );
  run.series.toksPerS = series([...Array(20).fill(400), 150, 160, 140]);
  assert.equal(
    find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'throughput:drop')?.severity,
    'warning',
  );
  run.series.toksPerS = series([...Array(20).fill(400), 150, 400, 400]); // one eval dip
  assert.ok(!find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'throughput:drop'));
});

test('loss: non-finite is critical, an explosion critical, a spike a warning, flat for N logs a warning', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 100, t });
  run.log.fatalNonFinite = true;
  run.control.anomaly = { type: 'nan_loss', mtimeMs: t };
  const nan = new Checker().evaluate({ now: t, run, procs: null, gpu: null });
  assert.equal(find(nan.alerts, 'loss:nonfinite')?.anomaly, 'nan_loss');
  assert.ok(!ids(nan.alerts).some((i) => i.startsWith('anomaly-file')), 'nan_loss is one alert, not two');
  const r2 = liveRun({ step: 100, t });
  r2.series.loss = series([
    ...Array(20)
      .fill(3)
      .map((x, i) => x - i * 0.01),
    12,
  ]);
  assert.equal(
    find(new Checker().evaluate({ now: t, run: r2, procs: null, gpu: null }).alerts, 'loss:spike')?.severity,
    'critical',
  );
  r2.series.loss = series([
    ...Array(20)
      .fill(3)
      .map((x, i) => x - i * 0.01),
    5,
  ]);
  assert.equal(
    find(new Checker().evaluate({ now: t, run: r2, procs: null, gpu: null }).alerts, 'loss:spike')?.severity,
    'warning',
  );
  r2.series.loss = series(Array(25).fill(2.345678));
  assert.equal(
    find(new Checker().evaluate({ now: t, run: r2, procs: null, gpu: null }).alerts, 'loss:flat')?.severity,
    'warning',
  );
});

test('gates: out of bounds counts down "would halt in k" and is critical on the 3rd consecutive record', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 10, t });
  const set = (ent: number[]) => {
    run.series.gateEntropy = series(ent);
    run.series.gateMax = series(ent.map(() => 0.5));
    run.series.collapseFrac = series(ent.map(() => 0));
  };
  set([1.0, 0.9, 0.8, 0.1]);
  let ev = new Checker().evaluate({ now: t, run, procs: null, gpu: null });
  assert.equal(ev.gateHaltIn, 2);
  assert.equal(find(ev.alerts, 'gates:collapse')?.severity, 'info');
  set([1.0, 0.9, 0.1, 0.1]);
  assert.equal(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).gateHaltIn, 1);
  set([1.0, 0.1, 0.1, 0.1]);
  ev = new Checker().evaluate({ now: t, run, procs: null, gpu: null });
  assert.equal(ev.gateHaltIn, 0);
  assert.equal(find(ev.alerts, 'gates:collapse')?.severity, 'critical');
  assert.equal(find(ev.alerts, 'gates:collapse')?.anomaly, 'gate_collapse');
  set([1.0, 0.9, 0.8, 0.7]);
  assert.equal(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).gateHaltIn, null);
  // max gate > 0.9 counts when the mean entropy lets the average row be that peaked (< 0.394 for
  // 0.9), and NSA_WATCH_GATE_COLLAPSE_N is honoured
  run.series.gateEntropy = series([0.35, 0.35, 0.35]);
  run.series.gateMax = series([0.95, 0.95, 0.95]);
  run.series.collapseFrac = series([0, 0, 0]);
  const c5 = new Checker(thresholdsFromEnv({ NSA_WATCH_GATE_COLLAPSE_N: '5' })).evaluate({
    now: t,
    run,
    procs: null,
    gpu: null,
  });
  assert.equal(c5.gateHaltIn, 2);
  assert.match(find(c5.alerts, 'gates:collapse')!.detail, /max gate 0\.95 > 0\.9 with entropy 0\.35/);
});

test('gates frozen at uniform: a warning once 1000 steps past warmup are still at ln 3, with the flags that cause it', () => {
  const t = 1_700_000_000_000;
  const at = (step0: number) => {
    const run = liveRun({ step: step0 + 49, t });
    run.series.gateEntropy = series(Array(50).fill(1.0986), { step0 });
    run.series.gateMax = series(Array(50).fill(0.34), { step0 });
    run.series.collapseFrac = series(Array(50).fill(0), { step0 });
    run.identity.flags['NSA_STOPGRAD_GATES'] = '1';
    return find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'gates:frozen');
  };
  assert.equal(at(100), undefined, 'step 149: a gate that learns is still this close to uniform');
  const f = at(1700);
  assert.equal(f?.severity, 'warning');
  assert.match(f!.title, /frozen at uniform: entropy ≈ ln 3 on 50 records past warmup \(steps 1700–1749\)/);
  assert.match(f!.detail, /NSA_STOPGRAD_GATES=1 set/);
});

test('gates: one row over the max-gate threshold in a healthy gate is not a collapse (the reference run at step 1150)', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 1160, t });
  // what the 2-rank reference demo writes from step ~1150 on: entropy 0.88-0.90 (healthy > 0.5),
  // collapse 0, shares [0.2, 0.49, 0.31]; one of 512 rows has its max gate above 0.9
  run.series.gateEntropy = series([0.895, 0.9, 0.882, 0.899, 0.884], { step0: 1140, every: 5 });
  run.series.gateMax = series([0.937, 0.931, 0.93, 0.964, 0.943], { step0: 1140, every: 5 });
  run.series.collapseFrac = series([0, 0, 0, 0, 0], { step0: 1140, every: 5 });
  let ev = new Checker().evaluate({ now: t, run, procs: null, gpu: null });
  assert.equal(find(ev.alerts, 'gates:collapse'), undefined);
  assert.equal(ev.gateHaltIn, null);
  // NSA_WATCH_GATE_MAX_THRESHOLD still governs: at 0.5 an entropy of 0.9 allows the typical row to be that peaked
  ev = new Checker(thresholdsFromEnv({ NSA_WATCH_GATE_MAX_THRESHOLD: '0.5' })).evaluate({
    now: t,
    run,
    procs: null,
    gpu: null,
  });
  assert.equal(find(ev.alerts, 'gates:collapse')?.severity, 'critical');
});

test('data loader: dt_fetch over 5 s, and fetch dominating the step time', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 50, t, stepTimeS: 1.0 });
  run.data.lastDtFetchS = 6.2;
  run.data.withFetch = 10;
  assert.equal(
    find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'data:slow')?.severity,
    'warning',
  );
  run.data.lastDtFetchS = 0.7;
  run.series.dtFetchS = series([0.6, 0.7, 0.7, 0.8]);
  const ev = new Checker().evaluate({ now: t, run, procs: null, gpu: null });
  assert.ok(!find(ev.alerts, 'data:slow'));
  assert.match(find(ev.alerts, 'data:dominates')!.title, /70 %/);
});

test('memory: a leak slope per rank from process RSS across evaluations; a flat RSS is quiet; GPU near capacity', () => {
  const t = 1_700_000_000_000;
  const c = new Checker();
  let ev = null;
  for (let s = 1; s <= 30; s++) {
    const run = liveRun({ step: s, t: t + s * 1000 });
    ev = c.evaluate({
      now: t + s * 1000,
      run,
      procs: procs([proc(0, 'R', { rssKiB: 400_000 + s * 8 * 1024 }), proc(1, 'R', { rssKiB: 400_000 })]),
      gpu: null,
    });
  }
  const leak = ev!.alerts.find((a) => a.rule === 'memory-growth');
  assert.equal(leak?.rank, 0);
  assert.match(leak!.title, /rank 0 memory growing 8 MiB\/step/);
  assert.ok(!ev!.alerts.some((a) => a.rule === 'memory-growth' && a.rank === 1));
  const g = new Checker().evaluate({
    now: t,
    run: liveRun({ step: 5, t }),
    procs: null,
    gpu: gpu([{ memUsedMiB: 80000, memTotalMiB: 81920 }]),
  });
  assert.equal(find(g.alerts, 'gpu-mem:0')?.severity, 'warning');
});

test("grad_norm 0 is the real trainer's artefact on optimizer steps, a warning only mid-accumulation", () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 20, t });
  run.lastProgress = {
    ts: t,
    step: 20,
    rank: 0,
    pid: 100,
    loss: 3,
    toksPerS: 100,
    dtFetchS: null,
    fetchP50Ms: null,
    fetchP95Ms: null,
    gradNorm: 0,
    gpuMemAllocMiB: null,
    gpuMemReservedMiB: null,
    gate: null,
    sel: null,
    fallbacks: null,
    extra: {},
  };
  assert.ok(!find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'grad:zero'));
  run.identity.train!.accum = 2;
  run.lastProgress.step = 21;
  assert.equal(
    find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'grad:zero')?.severity,
    'warning',
  );
});

test('`since` is kept across evaluations while the condition holds, and reset after it clears', () => {
  const t = 1_700_000_000_000;
  const c = new Checker();
  const run = liveRun({ step: 5, t });
  run.control.anomaly = { type: 'throughput_flatline', mtimeMs: null };
  const a1 = find(
    c.evaluate({ now: t + 1000, run, procs: null, gpu: null }).alerts,
    'anomaly-file:throughput_flatline',
  )!;
  const a2 = find(
    c.evaluate({ now: t + 5000, run, procs: null, gpu: null }).alerts,
    'anomaly-file:throughput_flatline',
  )!;
  assert.equal(a1.since, t + 1000);
  assert.equal(a2.since, t + 1000);
  run.control.anomaly = null;
  // cleared for good: absent on 3 checks over 30 s
  for (const dt of [6000, 20_000, 40_000]) c.evaluate({ now: t + dt, run, procs: null, gpu: null });
  run.control.anomaly = { type: 'throughput_flatline', mtimeMs: null };
  assert.equal(
    find(c.evaluate({ now: t + 41_000, run, procs: null, gpu: null }).alerts, 'anomaly-file:throughput_flatline')!
      .since,
    t + 41_000,
  );
});

test('hysteresis: a condition flickering on and off is one alert with one start, not a flapping one; it clears after 3 checks and 30 s clear', () => {
  const t = 1_700_000_000_000;
  const c = new Checker();
  const run = liveRun({ step: 5, t });
  const at = (s: number, on: boolean) => {
    run.control.anomaly = on ? { type: 'throughput_flatline', mtimeMs: null } : null;
    return c.evaluate({ now: t + s * 1000, run, procs: null, gpu: null });
  };
  const id = 'anomaly-file:throughput_flatline';
  // on, off, on, off … every second for a minute: present on every evaluation, one `since`
  for (let s = 0; s < 60; s++) {
    const ev = at(s, s % 2 === 0);
    const a = find(ev.alerts, id);
    assert.ok(a, `present at ${s} s`);
    assert.equal(a.since, t);
    assert.equal(a.severity, 'critical');
    assert.equal(a.clearing, s % 2 === 0 ? undefined : t + s * 1000, 'marked clearing while its condition is away');
    assert.deepEqual(ev.history, []);
  }
  // last seen at 58 s, gone for good from 59 s: held through 3 checks and 30 s, then in the
  // timeline with its start and its end
  assert.ok(find(at(60, false).alerts, id));
  assert.ok(find(at(75, false).alerts, id));
  assert.ok(find(at(87, false).alerts, id), '4 checks but only 29 s since last seen: still held');
  const ev = at(88, false);
  assert.equal(find(ev.alerts, id), undefined);
  assert.equal(ev.history.length, 1);
  assert.equal(ev.history[0]!.id, id);
  assert.equal(ev.history[0]!.since, t);
  assert.equal(ev.history[0]!.cleared, t + 59_000);
  assert.equal(ev.history[0]!.clearing, undefined);
  // back again: a new episode with a new start; the old one stays in the timeline
  const again = at(100, true);
  assert.equal(find(again.alerts, id)!.since, t + 100_000);
  assert.equal(again.history.length, 1);
});

test('hysteresis: a critical seen only at a lower severity stays critical (clearing) until the hold ends', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 10, t });
  const c = new Checker();
  const gates = (ent: number[], s: number) => {
    run.series.gateEntropy = series(ent);
    run.series.gateMax = series(ent.map(() => 0.5));
    run.series.collapseFrac = series(ent.map(() => 0));
    return find(c.evaluate({ now: t + s * 1000, run, procs: null, gpu: null }).alerts, 'gates:collapse');
  };
  assert.equal(gates([1.0, 0.1, 0.1, 0.1], 0)?.severity, 'critical');
  // one healthy record then one bad one: the rule alone says "info: would halt in 2 more"
  const held = gates([1.0, 0.1, 0.1, 0.1, 1.0, 0.1], 1);
  assert.equal(held?.severity, 'critical');
  assert.equal(held?.clearing, t + 1000);
  assert.equal(gates([1.0, 0.1, 0.1, 0.1, 1.0, 0.1, 0.1, 0.1], 2)?.clearing, undefined, 'critical again: holds');
  for (const s of [3, 20, 40]) gates([1.0, 1.0, 1.0, 0.1], s);
  const after = gates([1.0, 1.0, 1.0, 0.1], 41);
  assert.equal(after?.severity, 'info');
});

test('run state: STARTING before the first step, NO TRAINER with nothing at all', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 0, t });
  run.step = null;
  run.stepAdvancedTs = null;
  run.ranks[0]!.lastStep = 0;
  assert.equal(new Checker().evaluate({ now: t + 2000, run, procs: procs([proc(0)]), gpu: null }).runState, 'STARTING');
  const empty = liveRun({ step: 0, t });
  empty.ranks = [];
  assert.equal(new Checker().evaluate({ now: t, run: empty, procs: procs([]), gpu: null }).runState, 'NO TRAINER');
});

test('stack dumps taken since the freeze name the odd rank: one elsewhere while the others wait in the collective', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 30, t });
  run.identity.worldSize = 3;
  for (const r of [1, 2]) run.ranks.push({ ...run.ranks[0]!, rank: r, pid: 100 + r });
  const dump = (rank: number, phase: string, mtimeMs: number) => ({
    name: `stackdump_${rank}.txt`,
    path: `/tmp/run/stackdump_${rank}.txt`,
    kind: 'signal' as const,
    fsdp: false,
    epoch: Math.floor(mtimeMs / 1000),
    mtimeMs,
    header: 'Signal 10',
    signal: 10,
    rank,
    pid: 100 + rank,
    step: 30,
    phase,
    threads: [],
    parseErrors: 0,
  });
  run.dumps = [
    dump(0, 'allreduce-wait', t + 5000),
    dump(1, 'injected-hang', t + 6000),
    dump(2, 'allreduce-wait', t + 7000),
    dump(1, 'allreduce-wait', t - 5000),
  ];
  const ev = new Checker({ stallFloorS: 3 }).evaluate({
    now: t + 8000,
    run,
    procs: procs([proc(0), proc(1), proc(2)]),
    gpu: null,
  });
  assert.equal(ev.runState, 'STALLED');
  assert.match(ev.runStateWhy, /^rank 1/);
  const v = ev.verdicts.find((x) => x.kind === 'odd-rank');
  assert.equal(v?.rank, 1);
  assert.match(v!.text, /injected-hang.*allreduce-wait/);
  // dumps from before the freeze say nothing about it
  run.dumps = run.dumps.map((d) => ({ ...d, mtimeMs: t - 10_000 }));
  assert.ok(
    !new Checker({ stallFloorS: 3 })
      .evaluate({ now: t + 8000, run, procs: procs([proc(0), proc(1), proc(2)]), gpu: null })
      .verdicts.some((x) => x.kind === 'odd-rank'),
  );
});

test("the real trainer's rankless dumps name the odd rank through nsa-top's dump record", () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 30, t });
  run.identity.worldSize = 3;
  for (const r of [1, 2]) run.ranks.push({ ...run.ranks[0]!, rank: r, pid: 100 + r });
  // stackdump_<second>.txt: no rank, no pid in the file; the place is the main thread's innermost frame
  const dump = (sec: number, func: string) => ({
    name: `stackdump_${sec}.txt`,
    path: `/tmp/run/stackdump_${sec}.txt`,
    kind: 'signal' as const,
    fsdp: false,
    epoch: sec,
    mtimeMs: sec * 1000,
    header: `# stack dump ${sec}`,
    signal: 10,
    rank: null,
    pid: null,
    step: null,
    phase: null,
    threads: [{ name: 'MainThread', ident: '1', frames: [{ file: '/src/train.py', line: 7, func, code: null }] }],
    parseErrors: 0,
  });
  const s0 = Math.floor(t / 1000) + 5;
  run.dumps = [dump(s0, 'all_reduce'), dump(s0 + 1, 'injected_sleep'), dump(s0 + 2, 'all_reduce')];
  const claim = (rank: number, sec: number) => ({ rank, pid: 100 + rank, at: t + 9000, header: `# stack dump ${sec}` });
  const input: CheckInput = { now: t + 10_000, run, procs: procs([proc(0), proc(1), proc(2)]), gpu: null };
  const odd = (i: CheckInput) =>
    new Checker({ stallFloorS: 3 }).evaluate(i).verdicts.find((x) => x.kind === 'odd-rank');
  assert.equal(odd(input), undefined, 'without the record nobody can tell whose dump is whose');
  const claims = new Map([
    [`stackdump_${s0}.txt`, claim(0, s0)],
    [`stackdump_${s0 + 1}.txt`, claim(1, s0 + 1)],
    [`stackdump_${s0 + 2}.txt`, claim(2, s0 + 2)],
  ]);
  const v = odd({ ...input, dumpClaims: claims });
  assert.equal(v?.rank, 1);
  assert.match(v!.text, /injected_sleep.*all_reduce/);
  // a file written over since its claim (another first line) is nobody's
  run.dumps[1] = { ...run.dumps[1]!, header: '# stack dump later' };
  assert.equal(odd({ ...input, dumpClaims: claims }), undefined);
});

test('no CONFIG in env.json is the toy-default tell, but only once env.json was actually read', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 3, t });
  run.identity.config = null;
  assert.ok(
    !find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'identity:no-config'),
    'env.json unread (or unparsable) proves nothing',
  );
  run.files['env.json'] = { offset: 100, size: 100, records: 1, parseErrors: 0, lastError: null, resets: 0 };
  assert.equal(
    find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'identity:no-config')?.severity,
    'warning',
  );
});

test("nsa-top's own tools naming the run dir are never taken for a live rank", async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const me = proc(0, 'S');
  me.proc.argv = ['node', '/usr/lib/node_modules/nsa-top/bin/nsa-top.js', 'watchdog', '/runs/single'];
  me.source = 'argv';
  const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([me]), gpu: null });
  assert.equal(ev.runState, 'EXITED');
  const rankProc = proc(0, 'S');
  rankProc.proc.argv = ['node', '/x/bin/nsa-top.js', 'train', '--rank-worker'];
  const r1 = proc(1, 'S');
  r1.proc.argv = ['node', '/x/bin/nsa-top.js', 'train', '--rank-worker'];
  assert.equal(
    new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([rankProc, r1]), gpu: null }).runState,
    'RUNNING',
  );
});

test('run.info of a supervised real-trainer launch gives the launched CONFIG and NSA_* flags; a reference launch gives nothing to compare', async () => {
  const { launchedFromRunInfo } = await import('../../src/commands/watchdog.js');
  const info = [
    'run_dir: /r',
    'profile: m7c-2xa100-production',
    'trainer: nsa-vibe',
    'config: configs/m7c_125m_2xa100_production.yaml  # fixed by the profile',
    'env: NSA_PREFILL_BATCHED=1',
    'env: NSA_TOP_RUN_DIR=/r/out',
    "env: PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:256'",
  ].join('\n');
  assert.deepEqual(launchedFromRunInfo(info), {
    config: 'configs/m7c_125m_2xa100_production.yaml',
    flags: { NSA_PREFILL_BATCHED: '1' },
  });
  assert.equal(launchedFromRunInfo(info.replace('trainer: nsa-vibe', 'trainer: reference')), undefined);
  assert.deepEqual(launchedFromRunInfo('trainer: nsa-vibe\nconfig: (none)\n'), { config: null });
});

test('GPUs: the others spinning at idle power and one GPU idle name the rank on the idle GPU', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t });
  run.identity.worldSize = 3;
  for (const r of [1, 2])
    run.ranks.push({ ...run.ranks[0]!, rank: r, pid: 100 + r, lastMsg: 'boot', lastStep: null, stepAdvancedTs: null });
  const input: CheckInput = {
    now: t + 200_000,
    run,
    procs: procs([0, 1, 2].map((r) => proc(r, 'S', { gpuUuid: `GPU-${r}` }))),
    gpu: gpu([
      { utilPct: 100, powerW: 90 },
      { utilPct: 0, powerW: 60 },
      { utilPct: 100, powerW: 85 },
    ]),
  };
  const ev = new Checker().evaluate(input);
  assert.equal(ev.verdicts.find((v) => v.kind === 'odd-rank')?.rank, 1);
  assert.ok(ev.verdicts.some((v) => v.kind === 'collective-spin'));
  assert.match(ev.runStateWhy, /^rank 1/);
});

test('.anomaly_type left from an earlier run is a warning, not a critical anomaly of this run', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const boot = run.ranks[0]!.bootTs!;
  run.control.anomaly = { type: 'heartbeat_stall', mtimeMs: boot - 86_400_000 };
  const old = find(
    new Checker().evaluate({ now: lastTs + 1000, run, procs: null, gpu: null }).alerts,
    'anomaly-file:heartbeat_stall',
  )!;
  assert.equal(old.severity, 'warning');
  assert.equal(old.anomaly, undefined);
  run.control.anomaly = { type: 'heartbeat_stall', mtimeMs: lastTs };
  assert.equal(
    find(
      new Checker().evaluate({ now: lastTs + 1000, run, procs: null, gpu: null }).alerts,
      'anomaly-file:heartbeat_stall',
    )!.severity,
    'critical',
  );
});

test('the step-5 hang signature (§8.1): frozen step, rank at 100 % CPU, no GPU spin → "slow step" verdict naming NSA_PREFILL_BATCHED', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 1, t, logEvery: 20, stepTimeS: 2 });
  run.identity.flags = { NSA_PREFILL_BATCHED: '0' };
  const ev = new Checker().evaluate({
    now: t + 400_000,
    run,
    procs: procs([proc(0, 'R', { cpuPct: 104 })]),
    gpu: null,
  });
  const v = ev.verdicts.find((x) => x.kind === 'slow-step');
  assert.match(v!.text, /104 % CPU.*NSA_PREFILL_BATCHED=0/);
});

test('toy config with unknown dims (the real trainer writes no config into out_dir): the other §8.4 tells', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 300, t, total: 50000 });
  run.identity.model = null;
  run.identity.train!.seqLen = 128;
  run.identity.train!.saveEvery = 0;
  run.ranks[0]!.memReservedMiB = 42;
  const warn = find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'identity:toy');
  assert.equal(warn?.severity, 'warning');
  assert.match(warn!.detail, /seq_len 128.*42 MiB.*save_every 0/);
  const crit = find(
    new Checker().evaluate({
      now: t,
      run,
      procs: null,
      gpu: null,
      launched: { config: 'configs/m7c_125m_2xa100_production.yaml' },
    }).alerts,
    'identity:toy',
  );
  assert.equal(crit?.severity, 'critical');
  run.identity.train!.seqLen = 2048;
  run.ranks[0]!.memReservedMiB = 27000;
  assert.ok(
    !find(new Checker().evaluate({ now: t, run, procs: null, gpu: null }).alerts, 'identity:toy'),
    'one tell alone is not enough',
  );
});

test('a live launcher with no rank identified yet is STARTING, not NO TRAINER or EXITED', async () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 0, t });
  run.ranks = [];
  run.step = null;
  const launcher = proc(0, 'S').proc;
  launcher.argv = ['torchrun', '--nproc_per_node=2', 'scripts/train_showcase.py'];
  const p = { ...procs([]), launcher };
  assert.equal(new Checker().evaluate({ now: t, run, procs: p, gpu: null }).runState, 'STARTING');
  const { run: r2, lastTs } = await liveFixture('ddp2-dumps-halt');
  const ev = new Checker().evaluate({ now: lastTs + 1000, run: r2, procs: p, gpu: null });
  assert.notEqual(ev.runState, 'EXITED');
  assert.ok(!find(ev.alerts, 'exited'));
});

test('heartbeat files left by an earlier, wider launch are not ranks of this run', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const boot = run.ranks[0]!.bootTs!;
  run.ranks.push({
    ...run.ranks[1]!,
    rank: 3,
    pid: 999,
    file: 'heartbeat_rank3.jsonl',
    bootTs: boot - 86_400_000,
    lastTs: boot - 86_000_000,
  });
  const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.ok(!find(ev.alerts, 'rank-died:3'));
  assert.equal(ev.runState, 'RUNNING');
});

test('ranks leaving at a normal end, a HALT or a NaN abort are not deaths', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const one = procs([proc(0)]);
  run.totalSteps = 31; // rank 1 finished its last step, rank 0 is still writing metrics.json
  assert.ok(!find(new Checker().evaluate({ now: lastTs + 500, run, procs: one, gpu: null }).alerts, 'rank-died:1'));
  run.totalSteps = 400;
  run.control.halt = { present: true, content: 'halt: manual_stop', mtimeMs: lastTs };
  assert.ok(!find(new Checker().evaluate({ now: lastTs + 500, run, procs: one, gpu: null }).alerts, 'rank-died:1'));
  run.control.halt = { present: false, content: null, mtimeMs: null };
  assert.ok(
    find(new Checker().evaluate({ now: lastTs + 500, run, procs: one, gpu: null }).alerts, 'rank-died:1'),
    'mid-run it is one',
  );
});

test('a rank in D state: routine I/O while steps advance (info), critical once the step is frozen', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t });
  run.identity.worldSize = 2;
  run.ranks.push({ ...run.ranks[0]!, rank: 1, pid: 101, file: 'heartbeat_rank1.jsonl' });
  const ps = procs([proc(0, 'D'), proc(1, 'S')]);
  const advancing = new Checker().evaluate({ now: t + 500, run, procs: ps, gpu: null });
  assert.equal(find(advancing.alerts, 'proc-state:0')?.severity, 'info', 'a checkpoint fsync is not a warning');
  assert.equal(advancing.runState, 'RUNNING');
  const frozen = new Checker().evaluate({ now: t + 400_000, run, procs: ps, gpu: null });
  assert.equal(find(frozen.alerts, 'proc-state:0')?.severity, 'critical');
});

test('a fast run whose step stops: STALLED within seconds by its own cadence; the watchdog acts only past the 180 s floor', () => {
  const t = 1_700_000_000_000;
  const run = liveRun({ step: 40, t, stepTimeS: 0.05, logEvery: 1 });
  const input = (s: number): CheckInput => ({ now: t + s * 1000, run, procs: procs([proc(0, 'S')]), gpu: null });
  const soon = new Checker().evaluate(input(5));
  assert.equal(soon.runState, 'RUNNING', '5 s: within noise of a checkpoint save');
  assert.equal(find(soon.alerts, 'stall:run'), undefined);
  assert.equal(soon.advancing, true);
  const late = new Checker().evaluate(input(40));
  assert.equal(late.runState, 'STALLED', 'the state leaves RUNNING once the step is overdue by its cadence');
  assert.equal(late.advancing, false, 'no rate or ETA for a frozen step');
  assert.equal(late.noStepSinceMs, t);
  const w = find(late.alerts, 'stall:run');
  assert.equal(w?.severity, 'critical');
  assert.match(w!.title, /step frozen at 40 for 40s \(800× its usual interval\)/);
  assert.match(w!.detail, /the watchdog acts at 3m00s/);
  assert.deepEqual(late.actOn, [], 'the watchdog still waits for its floor');
  const stalled = new Checker().evaluate(input(200));
  assert.equal(stalled.runState, 'STALLED');
  assert.deepEqual(
    stalled.actOn.map((x) => x.id),
    ['stall:run'],
  );
  // with NSA_WATCH_HEARTBEAT_STALL_S=30 the watchdog acts sooner; the operator sees the same state
  const floor30 = new Checker(thresholdsFromEnv({ NSA_WATCH_HEARTBEAT_STALL_S: '30' })).evaluate(input(40));
  assert.equal(floor30.runState, 'STALLED');
  assert.deepEqual(
    floor30.actOn.map((x) => x.id),
    ['stall:run'],
  );
  // a slow-step run (1 log per 2 min) is never "late" before its own stall threshold
  const slow = liveRun({ step: 40, t, stepTimeS: 6, logEvery: 20 });
  const ev = new Checker().evaluate({ now: t + 300_000, run: slow, procs: procs([proc(0, 'S')]), gpu: null });
  assert.equal(ev.runState, 'RUNNING');
  assert.equal(find(ev.alerts, 'stall:run'), undefined);
});

test('a stopped rank (T) that the process table shows running again (SIGCONT) clears at once, not after the 30 s hysteresis', () => {
  const t = 1_700_000_000_000;
  const c = new Checker();
  const stopped = c.evaluate({
    now: t + 1000,
    run: liveRun({ step: 40, t }),
    procs: procs([proc(0, 'S'), proc(1, 'T')]),
    gpu: null,
  });
  assert.equal(find(stopped.alerts, 'proc-state:1')?.severity, 'critical');
  assert.equal(stopped.runState, 'STALLED');
  // SIGCONT: the next table shows rank 1 sleeping in its collective, the step moves again
  const back = c.evaluate({
    now: t + 3000,
    run: liveRun({ step: 41, t: t + 2500 }),
    procs: procs([proc(0, 'S'), proc(1, 'S')]),
    gpu: null,
  });
  assert.equal(back.runState, 'RUNNING');
  assert.equal(find(back.alerts, 'proc-state:1'), undefined, 'gone, not "clearing" beside RUNNING');
  assert.equal(back.history[0]?.id, 'proc-state:1', 'the episode is on the timeline');
  assert.equal(back.history[0]?.cleared, t + 3000);
  // a condition that is merely unseen keeps its hysteresis: the table not read (unknown) proves nothing
  const c2 = new Checker();
  c2.evaluate({ now: t + 1000, run: liveRun({ step: 40, t }), procs: procs([proc(0, 'S'), proc(1, 'T')]), gpu: null });
  const unknown = c2.evaluate({ now: t + 3000, run: liveRun({ step: 41, t: t + 2500 }), procs: null, gpu: null });
  assert.equal(find(unknown.alerts, 'proc-state:1')?.clearing, t + 3000);
});

test('leakOf reads its window in place: the same fit as the copied window it replaced (warm-up skip, last 60, short and flat series)', async () => {
  const { leakOf } = await import('../../src/checks/rules/memory.js');
  const { linfit } = await import('../../src/checks/stats.js');
  const { DEFAULT_THRESHOLDS } = await import('../../src/checks/index.js');
  // the copy-based leakOf as it was: slice off the warm-up, keep the last 60, fit two copied arrays
  const copied = (samples: { step: number; mib: number }[]) => {
    const s = samples.slice(Math.min(3, Math.floor(samples.length / 4))).slice(-60);
    if (s.length < DEFAULT_THRESHOLDS.leakMinPoints) return null;
    const span = s[s.length - 1]!.step - s[0]!.step;
    if (span < 5) return null;
    const fit = linfit(
      s.map((x) => x.step),
      s.map((x) => x.mib),
    );
    if (!fit) return null;
    const growth = fit.slope * span;
    const ok = growth > DEFAULT_THRESHOLDS.leakMinMiB && growth > 0.1 * Math.max(1, s[0]!.mib) && fit.r2 > 0.6;
    return ok ? { growth, slope: fit.slope, first: s[0]!, last: s[s.length - 1]!, r2: fit.r2 } : null;
  };
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  let leaks = 0;
  for (const n of [0, 3, 7, 8, 9, 12, 40, 59, 60, 61, 63, 64, 100, 300])
    for (const slope of [0, 0.5, 3, 40])
      for (const noise of [0, 5, 200]) {
        const samples = Array.from({ length: n }, (_, i) => ({
          step: 10 * i,
          mib: 1000 + slope * 10 * i + noise * (rnd() - 0.5),
        }));
        const want = copied(samples);
        assert.deepEqual(leakOf(samples, DEFAULT_THRESHOLDS), want, `n=${n} slope=${slope} noise=${noise}`);
        if (want) leaks++;
      }
  // the comparison covered fits that flag a leak, not only series too short to fit
  assert.ok(leaks >= 10, `only ${leaks} leaking series among the cases`);
});
