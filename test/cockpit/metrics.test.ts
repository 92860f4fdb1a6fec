// The Prometheus rendering (src/cockpit/metrics.ts), pure: a recorded 2-rank nsa-vibe run and states
// built from it, judged by the Checker, rendered to the text format — each family's HELP/TYPE once
// and its samples together, label values escaped, the state one-hot, per-rank series by `rank`, GPU
// series with dcgm-exporter's label names, counters named _total, no pid or step label, and every
// value the Evaluation's. promtool reads the same text in test/cockpit/prometheus.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Checker, DEFAULT_THRESHOLDS, type CheckInput } from '../../src/checks/index.js';
import {
  DumpCounter,
  escapeLabel,
  renderMetrics,
  RUN_STATES,
  type ExporterSelf,
  type MetricsObservation,
} from '../../src/cockpit/metrics.js';
import { MetricsExporter, parseListen } from '../../src/cockpit/metrics-server.js';
import type { GpuTelemetry, ProcState, RunProcesses } from '../../src/remote/types.js';
import type { RunSnapshot } from '../../src/trainer/run/snapshot.js';
import { fixtureSnapshot } from '../ui/helpers.js';

const SELF: ExporterSelf = {
  version: '9.9.9',
  hostname: 'gpu-node-7',
  observations: 12,
  observationErrors: 1,
  lastGoodMs: 1_700_000_000_000,
  roundMs: 4.5,
};

function procsOf(states: ProcState[]): RunProcesses {
  return {
    at: 0,
    launcher: null,
    unknown: [],
    ranks: states.map((state, rank) => ({
      rank,
      localRank: rank,
      gpuMemMiB: null,
      gpuUuid: null,
      source: 'environ' as const,
      proc: {
        pid: 40_000 + rank,
        ppid: 1,
        startTime: '1',
        state,
        cpuPct: 150,
        rssKiB: 2048,
        wchan: null,
        argv: ['python'],
        env: {},
      },
    })),
  };
}

const GPU: GpuTelemetry = {
  status: 'ok',
  at: 0,
  latencyMs: 3,
  apps: [],
  devices: [0, 1].map((index) => ({
    index,
    name: 'NVIDIA A100-SXM4-80GB',
    uuid: `GPU-0000000${index}-aaaa-bbbb-cccc-dddddddddddd`,
    mig: null,
    memUsedMiB: 1024,
    memTotalMiB: 81920,
    utilPct: 97,
    powerW: 310.5,
    powerLimitW: 400,
    tempC: 61,
    smClockMHz: 1410,
    memClockMHz: 1593,
  })),
};

function render(
  run: RunSnapshot,
  o: Partial<MetricsObservation> = {},
  at = run.hostNowMs || run.takenAt,
  self: ExporterSelf = SELF,
) {
  const obs: MetricsObservation = {
    run,
    procs: null,
    gpu: null,
    supervisor: null,
    haltGraceS: 300,
    fresh: true,
    errors: [],
    ...o,
  };
  const input: CheckInput = { now: at, run, procs: obs.procs, gpu: obs.gpu, supervisor: obs.supervisor };
  const ev = new Checker().evaluate(input);
  return { ev, text: renderMetrics(obs, ev, DEFAULT_THRESHOLDS, self) };
}

/** name{labels} → value, and the families in order */
function parse(text: string) {
  const samples: { name: string; labels: Record<string, string>; value: string }[] = [];
  const meta: { name: string; kind: 'HELP' | 'TYPE'; rest: string }[] = [];
  for (const line of text.trimEnd().split('\n')) {
    const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (m) {
      meta.push({ kind: m[1] as 'HELP' | 'TYPE', name: m[2]!, rest: m[3]! });
      continue;
    }
    const s = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(s, `a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (s[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    samples.push({ name: s[1]!, labels, value: s[3]! });
  }
  return { samples, meta };
}

const find = (text: string, name: string, labels: Record<string, string> = {}) =>
  parse(text).samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

test('a recorded 2-rank run: HELP and TYPE once per family, its samples together, counters named _total, no pid or step label', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const { text } = render(run, { procs: procsOf(['S', 'Z']), gpu: GPU });
  const { samples, meta } = parse(text);
  const names = [...new Set(samples.map((s) => s.name))];
  for (const n of names) {
    assert.equal(meta.filter((m) => m.name === n && m.kind === 'HELP').length, 1, `${n}: one HELP`);
    const type = meta.filter((m) => m.name === n && m.kind === 'TYPE');
    assert.equal(type.length, 1, `${n}: one TYPE`);
    assert.equal(type[0]!.rest === 'counter', n.endsWith('_total'), `${n}: counters and only counters end in _total`);
    assert.match(n, /^nsatop_[a-z0-9_]+$/);
  }
  // each family's samples are contiguous, right after its TYPE line
  const lines = text.trimEnd().split('\n');
  for (const n of names) {
    const idx = lines.flatMap((l, i) => (l.startsWith(`${n}{`) || l.startsWith(`${n} `) ? [i] : []));
    assert.equal(idx[idx.length - 1]! - idx[0]! + 1, idx.length, `${n}: samples together`);
    assert.equal(lines[idx[0]! - 1], `# TYPE ${n} ${meta.find((m) => m.name === n && m.kind === 'TYPE')!.rest}`);
  }
  for (const s of samples) {
    for (const k of Object.keys(s.labels))
      assert.ok(!/pid|step|^ts$|time/i.test(k), `${s.name}: no unbounded label ${k}`);
    if (s.name !== 'nsatop_build_info') assert.equal(s.labels['run'], 'ddp2-dumps-halt', `${s.name} has run`);
  }
  assert.ok(text.endsWith('\n'));
});

test('the values are the snapshot and the Evaluation: step, state one-hot, per-rank series, alerts by level, thresholds', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const { ev, text } = render(run, { procs: procsOf(['S', 'Z']) });
  assert.equal(find(text, 'nsatop_train_step')[0]!.value, String(run.step));
  const states = find(text, 'nsatop_run_state_info');
  assert.deepEqual(
    states.map((s) => s.labels['state']),
    [...RUN_STATES],
  );
  assert.deepEqual(
    states.filter((s) => s.value === '1').map((s) => s.labels['state']),
    [ev.runState],
  );
  // rank 1 is a zombie: not up; rank 0 lives
  assert.equal(find(text, 'nsatop_rank_up', { rank: '0' })[0]!.value, '1');
  assert.equal(find(text, 'nsatop_rank_up', { rank: '1' })[0]!.value, '0');
  const hb1 = run.ranks.find((r) => r.rank === 1)!;
  assert.equal(
    find(text, 'nsatop_last_heartbeat_timestamp_seconds', { rank: '1' })[0]!.value,
    String(hb1.lastTs! / 1000),
  );
  assert.equal(find(text, 'nsatop_rank_cpu_ratio', { rank: '0' })[0]!.value, '1.5');
  assert.equal(find(text, 'nsatop_rank_resident_memory_bytes', { rank: '0' })[0]!.value, String(2048 * 1024));
  for (const level of ['critical', 'warning', 'info'])
    assert.equal(
      find(text, 'nsatop_alerts', { level })[0]!.value,
      String(ev.alerts.filter((a) => a.severity === level).length),
    );
  assert.ok(ev.alerts.length > 0, 'the halted fixture has alerts');
  assert.deepEqual(
    find(text, 'nsatop_alert_active')
      .map((s) => s.labels['id'])
      .sort(),
    ev.alerts.map((a) => a.id).sort(),
  );
  assert.equal(find(text, 'nsatop_stack_dumps_total')[0]!.value, String(run.dumps.length));
  assert.equal(find(text, 'nsatop_threshold_stall_seconds')[0]!.value, String(ev.stallThresholdS));
  assert.equal(find(text, 'nsatop_threshold_gate_entropy_min')[0]!.value, String(DEFAULT_THRESHOLDS.gateEntropyMin));
  assert.equal(find(text, 'nsatop_watchdog_observations_total')[0]!.value, '12');
  assert.equal(find(text, 'nsatop_build_info', { version: '9.9.9' }).length, 1);
});

test('unknown is absent, never 0: no process table, no rank_up; a NaN loss drops nsatop_loss and says non-finite', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  run.loss = null;
  run.lastLossNonFinite = true;
  const { text } = render(run, { fresh: false });
  assert.equal(find(text, 'nsatop_rank_up').length, 0);
  assert.ok(!/^# HELP nsatop_rank_up /m.test(text), 'an empty family is left out whole');
  assert.equal(find(text, 'nsatop_loss').length, 0);
  assert.equal(find(text, 'nsatop_loss_non_finite')[0]!.value, '1');
  assert.equal(find(text, 'nsatop_watchdog_observation_ok')[0]!.value, '0', 'a stale poll: blind');
  assert.equal(find(text, 'nsatop_gpu_telemetry_up').length, 0);
});

test('GPU series carry dcgm-exporter label names (gpu, UUID, modelName, hostname) and base units', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const { text } = render(run, { gpu: GPU });
  const util = find(text, 'nsatop_gpu_utilization_ratio');
  assert.equal(util.length, 2);
  assert.deepEqual(util[1]!.labels, {
    gpu: '1',
    UUID: GPU.status === 'ok' ? GPU.devices[1]!.uuid : '',
    modelName: 'NVIDIA A100-SXM4-80GB',
    hostname: 'gpu-node-7',
    run: 'ddp2-dumps-halt',
  });
  assert.equal(util[0]!.value, '0.97');
  assert.equal(find(text, 'nsatop_gpu_memory_total_bytes', { gpu: '0' })[0]!.value, String(81920 * 1024 * 1024));
  assert.equal(find(text, 'nsatop_gpu_sm_clock_hertz', { gpu: '0' })[0]!.value, String(1410e6));
  assert.equal(find(text, 'nsatop_gpu_telemetry_up')[0]!.value, '1');
});

test('a multi-node view: every per-rank series and each GPU carry host (the node as named); one host has none', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const nodeB = 'root@10.0.0.2:2222';
  const base = procsOf(['S', 'R']);
  const procs: RunProcesses = {
    ...base,
    ranks: base.ranks.map((r, i) => ({ ...r, proc: { ...r.proc, host: i === 0 ? 'local' : nodeB } })),
  };
  const gpu: GpuTelemetry =
    GPU.status === 'ok'
      ? { ...GPU, devices: GPU.devices.map((d, i) => ({ ...d, host: i === 0 ? 'local' : nodeB })) }
      : GPU;
  const { text } = render(run, { procs, gpu });
  for (const name of ['nsatop_rank_up', 'nsatop_rank_stopped', 'nsatop_rank_cpu_ratio']) {
    const hosts = find(text, name).map((x) => [x.labels['rank'], x.labels['host']]);
    assert.deepEqual(
      hosts,
      [
        ['0', 'local'],
        ['1', nodeB],
      ],
      name,
    );
  }
  // a GPU on node B: its own machine as hostname (joins DCGM_FI_* there), and the node as host
  const util = find(text, 'nsatop_gpu_utilization_ratio').map((x) => [
    x.labels['gpu'],
    x.labels['hostname'],
    x.labels['host'],
  ]);
  assert.deepEqual(util, [
    ['0', 'gpu-node-7', 'local'],
    ['1', '10.0.0.2', nodeB],
  ]);
  // one host: no host label anywhere
  const one = render(run, { procs: procsOf(['S', 'R']), gpu: GPU }).text;
  assert.ok(!/\bhost="/.test(one), 'no host label on one host');
});

test('label values are escaped per the text format: backslash, double quote, newline', async () => {
  assert.equal(escapeLabel('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  run.identity.name = 'we"ird\\run\nname';
  const { text } = render(run);
  assert.ok(text.includes('run="we\\"ird\\\\run\\nname"'), 'escaped in the sample line');
  for (const line of text.trimEnd().split('\n')) assert.ok(!line.includes('\r'));
  assert.equal(find(text, 'nsatop_train_step')[0]!.labels['run'], 'we"ird\\run\nname', 'and read back whole');
});

test('--metrics-listen HOST:PORT: the host is required, IPv6 in brackets, a port in range', () => {
  assert.deepEqual(parseListen('127.0.0.1:9464'), { host: '127.0.0.1', port: 9464 });
  assert.deepEqual(parseListen('[::1]:0'), { host: '::1', port: 0 });
  assert.deepEqual(parseListen('localhost:1'), { host: 'localhost', port: 1 });
  for (const bad of [':9464', '9464', '127.0.0.1', '127.0.0.1:', '127.0.0.1:65536', '::1:9464', 'a b:1', '127.0.0.1:x'])
    assert.equal(typeof parseListen(bad), 'string', bad);
});

test('nsatop_stack_dumps_total is a counter: dumps taken since the start, never lower when a dump file is removed', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  assert.ok(run.dumps.length >= 2, 'the fixture has dumps');
  const named = (names: string[]) => ({ dumps: names.map((name) => ({ name })), dumpsTotal: names.length });
  const c = new DumpCounter();
  const first = run.dumps.map((d) => d.name);
  assert.equal(c.update(run), first.length, 'the files present at the first round');
  assert.equal(c.update(run), first.length, 'nothing new: unchanged');
  // the operator cleans up the old dumps: the count stays
  assert.equal(c.update(named([])), first.length);
  // a new dump while one old file is removed: +1, though the number of files went down
  assert.equal(c.update(named(['stackdump_9999999999.txt'])), first.length + 1);
  assert.equal(c.update(named(['stackdump_9999999999.txt', 'stackdump_9999999998.txt'])), first.length + 2);
  // more files than named (the newest parsed only): the rise in files counts
  assert.equal(
    c.update({ dumps: [{ name: 'stackdump_9999999998.txt' }], dumpsTotal: 5 }),
    first.length + 2 + 3,
    'three more files than the round before',
  );
  // rendered from the exporter's count, not the files present
  const text = render(run, {}, undefined, { ...SELF, dumpsTaken: 41 }).text;
  assert.equal(find(text, 'nsatop_stack_dumps_total')[0]!.value, '41');
  assert.match(text, /# TYPE nsatop_stack_dumps_total counter/);
});

test('--metrics-file: a new judgement is written in its round, a moving step only every fileEveryMs, and close writes the last round', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-textfile-'));
  try {
    const path = join(dir, 'nsatop.prom');
    const ex = new MetricsExporter({
      version: '9.9.9',
      hostname: 'gpu-node-7',
      thresholds: DEFAULT_THRESHOLDS,
      runLabel: 'r',
      file: path,
      fileEveryMs: 60_000,
    });
    const run = await fixtureSnapshot('ddp2-dumps-halt');
    // the file opens with nsa-top's mark (a comment line), then the exposition
    const textfile = () => readFileSync(path, 'utf8').replace(/^# nsa-top [^\n]*\n/, '');
    const round = async (step: number, states: ProcState[]) => {
      const snap = { ...run, step };
      const obs: MetricsObservation = {
        run: snap,
        procs: procsOf(states),
        gpu: null,
        supervisor: null,
        haltGraceS: 300,
        fresh: true,
        errors: [],
      };
      const now = run.hostNowMs || run.takenAt;
      ex.round(
        { ...obs, ev: new Checker().evaluate({ now, run: snap, procs: obs.procs, gpu: null, supervisor: null }) },
        1,
      );
      await ex.idle();
      return textfile();
    };
    const stepOf = (text: string) => find(text, 'nsatop_train_step')[0]?.value;
    assert.equal(stepOf(await round(31, ['S', 'S'])), '31', 'the first round is written');
    assert.equal(stepOf(await round(32, ['S', 'S'])), '31', 'the same judgement, a moved step: not rewritten yet');
    const stopped = await round(33, ['S', 'T']);
    assert.equal(stepOf(stopped), '33', 'a stopped rank is a new judgement: written in its round');
    assert.ok(
      find(stopped, 'nsatop_alert_active').some((s) => /proc-state/.test(s.labels['id'] ?? '')),
      stopped,
    );
    await round(34, ['S', 'T']);
    await ex.close();
    assert.equal(stepOf(textfile()), '34', 'close leaves the last round in the file');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
