// GPU telemetry from recorded nvidia-smi outputs (test/fixtures/nvidia-smi/: written from NVIDIA's
// documented formats for normal, N/A fields and MIG; real recordings from an H200 idle and under load)
// served by a fake `nvidia-smi` first on PATH.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../src/remote/local/host.js';
import {
  GpuMonitor,
  parseAppLine,
  parseGpuLine,
  parseListing,
  parseMigQuery,
  sampleGpus,
  smiValue,
} from '../../src/remote/gpu.js';
import { listProcesses } from '../../src/remote/procs.js';
import type { GpuDevice } from '../../src/remote/types.js';
import { startSshd } from '../helpers/sshd.js';

const FX = fileURLToPath(new URL('../fixtures/nvidia-smi/', import.meta.url));
const FAKE_BIN = join(FX, 'bin');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-gpu-'));
const host = new LocalHost();
const monitors: GpuMonitor[] = [];
after(() => {
  for (const m of monitors) m.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** a device as the assertions read it: index, name, uuid, memory, util, power, limit, temp, clocks, MIG */
const deviceRow = (d: GpuDevice) => [
  d.index,
  d.name,
  d.uuid,
  d.memUsedMiB,
  d.memTotalMiB,
  d.utilPct,
  d.powerW,
  d.powerLimitW,
  d.tempC,
  d.smClockMHz,
  d.memClockMHz,
  d.mig,
];

function fixture(name: string): { dir: string; env: Record<string, string> } {
  const dir = join(tmp, `${name}-${Math.random().toString(36).slice(2)}`);
  cpSync(join(FX, name), dir, { recursive: true });
  return { dir, env: { PATH: `${FAKE_BIN}:${process.env.PATH}`, NSA_FAKE_SMI_DIR: dir } };
}

function monitor(env: Record<string, string>, intervalMs = 200, timeoutMs = 1500): GpuMonitor {
  const m = new GpuMonitor(host, { intervalMs, timeoutMs, env });
  monitors.push(m);
  return m;
}

async function until<T>(f: () => T | null | undefined | false, ms = 10000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('unknown values are null, never 0; real zeros stay 0', () => {
  for (const v of ['[N/A]', '[Not Supported]', 'N/A', '[Unknown Error]', 'ERR!', '', '[Insufficient Permissions]'])
    assert.equal(smiValue(v), null, v);
  assert.equal(smiValue('0'), 0);
  assert.equal(smiValue(' 312.45'), 312.45);
  const lines = readFileSync(join(FX, 'na-fields', 'gpu.csv'), 'utf8')
    .trim()
    .split('\n');
  const [g0, g1] = lines.map(parseGpuLine);
  assert.equal(g0!.powerLimitW, null);
  assert.equal(g0!.memClockMHz, null);
  assert.equal(g0!.powerW, 348.21);
  assert.equal(g1!.powerW, null);
  assert.equal(g1!.memUsedMiB, 0, 'an idle GPU uses 0 MiB: a real 0');
  assert.equal(g1!.utilPct, 0);
  assert.equal(parseGpuLine('No devices were found'), null);
});

test('MIG listings: current and legacy UUID forms, instance ids and memory from -q', () => {
  const l = parseListing(readFileSync(join(FX, 'mig', 'L.txt'), 'utf8'));
  assert.deepEqual(
    l.map((m) => [m.parentIndex, m.profile, m.device, m.gpuInstance, m.computeInstance]),
    [
      [0, '3g.20gb', 0, null, null],
      [0, '2g.10gb', 1, null, null],
      [0, '1g.5gb', 2, 13, 0],
    ],
  );
  const q = parseMigQuery(readFileSync(join(FX, 'mig', 'q.txt'), 'utf8'));
  assert.deepEqual(
    q.map((x) => [x.gpuOrdinal, x.index, x.gpuInstance, x.computeInstance, x.memUsedMiB, x.memTotalMiB]),
    [
      [0, 0, 2, 0, 10240, 19968],
      [0, 1, 3, 0, 13, 9856],
      [0, 2, 13, 0, null, 4864],
    ],
  );
});

test('two A100s: devices and compute apps from one long-lived stream each', async () => {
  const { dir, env } = fixture('a100x2');
  const m = monitor(env);
  await m.start();
  const t = m.current();
  assert.equal(t.status, 'ok');
  if (t.status !== 'ok') return;
  assert.deepEqual(
    t.devices.map((d) => deviceRow(d).filter((_, i) => i !== 2)), // uuid aside
    [
      [0, 'NVIDIA A100-SXM4-80GB', 40530, 81920, 98, 312.45, 400, 63, 1410, 1593, null],
      [1, 'NVIDIA A100-SXM4-80GB', 40112, 81920, 97, 305.1, 400, 61, 1410, 1593, null],
    ],
  );
  const apps = await until(() => {
    const c = m.current();
    return c.status === 'ok' && c.apps.length === 2 && c.apps;
  });
  assert.deepEqual(
    apps.map((a) => [a.pid, a.usedMemMiB]),
    [
      [48213, 40102],
      [48214, 39684],
    ],
  );
  await new Promise((r) => setTimeout(r, 1000)); // several intervals
  const calls = readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n');
  const gpuCalls = calls.filter((c) => c.includes('--query-gpu'));
  assert.equal(gpuCalls.length, 1, 'one resident nvidia-smi for devices');
  assert.match(gpuCalls[0]!, /-lms 200$/);
  m.stop();
});

test('N/A and Not Supported fields are unknown in the telemetry too', async () => {
  const { env } = fixture('na-fields');
  const t = await sampleGpus(host, { env, intervalMs: 200, timeoutMs: 3000 });
  assert.equal(t.status, 'ok');
  if (t.status !== 'ok') return;
  assert.equal(t.devices[0]!.powerLimitW, null);
  assert.equal(t.devices[1]!.powerW, null);
});

test('MIG devices are listed under their GPU', async () => {
  const { env } = fixture('mig');
  const m = monitor(env);
  await m.start();
  const t = await until(() => {
    const c = m.current();
    return c.status === 'ok' && c.devices.length === 5 && c.devices.some((d) => d.memUsedMiB === 10240) && c;
  });
  if (t.status !== 'ok') return;
  assert.deepEqual(
    t.devices.map((d) => [
      d.index,
      d.name,
      d.mig ? [d.mig.gpuInstance, d.mig.computeInstance] : null,
      d.memUsedMiB,
      d.utilPct,
    ]),
    [
      [0, 'NVIDIA A100-SXM4-40GB', null, 11, null],
      [0, 'MIG 3g.20gb', [2, 0], 10240, null],
      [0, 'MIG 2g.10gb', [3, 0], 13, null],
      [0, 'MIG 1g.5gb', [13, 0], null, null],
      [1, 'NVIDIA A100-SXM4-40GB', null, 20311, 85],
    ],
  );
  assert.ok(t.devices.slice(1, 4).every((d) => d.mig!.parentUuid === t.devices[0]!.uuid));
  m.stop();
});

test('nvidia-smi missing: "no NVIDIA tools", not an error', async () => {
  const t = await sampleGpus(host, { env: { PATH: '/usr/bin:/bin' }, intervalMs: 200 });
  assert.equal(t.status, 'no-nvidia-tools');
});

test('nvidia-smi failing (no driver): an error that says why', async () => {
  const { dir, env } = fixture('a100x2');
  writeFileSync(join(dir, 'NO_DRIVER'), '');
  const m = monitor(env);
  await m.start();
  const t = m.current();
  assert.equal(t.status, 'error');
  if (t.status === 'error') assert.match(t.message, /couldn't communicate with the NVIDIA driver/);
  m.stop();
});

test('nvidia-smi hanging: bounded, "not answering since", everything else keeps working, and it recovers', async () => {
  const { dir, env } = fixture('a100x2');
  const m = monitor(env, 200, 1500);
  await m.start();
  assert.equal(m.current().status, 'ok');
  const okAt = Date.now();
  writeFileSync(join(dir, 'HANG'), ''); // the GPU fell off the bus
  const hung = await until(() => {
    const c = m.current();
    return c.status === 'not-answering' && c;
  }, 8000);
  if (hung.status !== 'not-answering') return;
  assert.ok(hung.since <= Date.now() - 1000 && hung.since >= okAt - 1000, 'since = the last good sample');
  assert.equal(hung.lastGood?.devices.length, 2, 'the last good sample is kept');
  // everything else keeps working while nvidia-smi hangs
  const t0 = Date.now();
  const r = await host.exec(['echo', 'alive'], { timeoutMs: 5000 });
  assert.equal(r.stdout, 'alive\n');
  const c0 = Date.now();
  m.current();
  assert.ok(Date.now() - c0 < 50, 'current() never blocks');
  void t0;
  // never a pile of hung nvidia-smi processes
  await new Promise((res) => setTimeout(res, 2500));
  const fakes = (await listProcesses(host)).filter(
    (p) => p.argv.some((a) => a.endsWith('/nvidia-smi')) && p.argv.join(' ').includes('-lms'),
  );
  assert.ok(fakes.length <= 1, `at most one device stream at a time (${fakes.length})`);
  rmSync(join(dir, 'HANG'));
  const back = await until(() => m.current().status === 'ok', 20000);
  assert.ok(back);
  m.stop();
});

test('over SSH the same telemetry arrives (real sshd, fake nvidia-smi on the remote PATH)', async () => {
  const sshd = await startSshd();
  const h = await sshd.connect();
  try {
    const { env } = fixture('a100x2');
    const m = new GpuMonitor(h, { intervalMs: 300, timeoutMs: 5000, env });
    monitors.push(m);
    await m.start();
    const remote = await until(() => {
      const c = m.current();
      return c.status === 'ok' && c.apps.length === 2 && c;
    });
    const local = await sampleGpus(host, { env, intervalMs: 200 });
    assert.equal(local.status, 'ok');
    if (remote.status === 'ok' && local.status === 'ok') assert.deepEqual(remote.devices, local.devices);
    // the connection drops: telemetry says "not answering" (never a false error) and comes back
    h.dropConnectionForTest();
    const seen = new Set<string>();
    const t0 = Date.now();
    let back = false;
    await new Promise((r) => setTimeout(r, 100));
    while (Date.now() - t0 < 20000) {
      const c = m.current();
      seen.add(c.status);
      if (c.status === 'ok' && h.connState().state === 'connected' && c.at > t0) {
        back = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(back, `telemetry came back after the reconnect (saw ${[...seen].join(', ')})`);
    assert.ok(!seen.has('error'), 'a dropped connection is not an nvidia-smi error');
    m.stop();
    assert.equal(existsSync(join(FX, 'a100x2', 'calls.log')), false, 'fixtures are never written');
  } finally {
    await h.close();
    await sshd.stop();
  }
  // nothing left running on the "remote" side once the host is closed
  const left = async () =>
    (await listProcesses(host)).filter((p) => p.argv.some((a) => a.endsWith('/nvidia-smi')) && p.argv.includes('300'));
  let l = await left();
  for (let i = 0; i < 25 && l.length; i++) {
    await new Promise((r) => setTimeout(r, 200));
    l = await left();
  }
  assert.deepEqual(l, []);
});

// Real recordings from an NVIDIA H200 (driver 580.159.04), see fixtures/nvidia-smi/h200-idle/README.md.
const H200 = 'GPU-548e3c03-bf85-418a-1efb-c2d382c8b25d';

test('H200 idle (recorded): 0 of 143771 MiB, 0 %, 81 W of 700 W, and no compute apps once they were asked', async () => {
  const { dir, env } = fixture('h200-idle');
  const m = monitor(env);
  await m.start();
  // the apps loop has answered (empty) more than once: "no apps" is a sample, not "not asked yet"
  await until(
    () =>
      existsSync(join(dir, 'calls.log')) &&
      readFileSync(join(dir, 'calls.log'), 'utf8')
        .split('\n')
        .filter((c) => c.includes('--query-compute-apps')).length >= 2,
  );
  const t = m.current();
  assert.equal(t.status, 'ok');
  if (t.status !== 'ok') return;
  assert.deepEqual(t.devices.map(deviceRow), [[0, 'NVIDIA H200', H200, 0, 143771, 0, 81.25, 700, 35, 345, 3201, null]]);
  assert.deepEqual(t.apps, []);
  m.stop();
});

test('H200 under load (recorded): 29923 MiB, 100 %, 689 W, two torch processes with their pids and memory', async () => {
  const { env } = fixture('h200-load');
  const m = monitor(env);
  await m.start();
  const t = await until(() => {
    const c = m.current();
    return c.status === 'ok' && c.apps.length === 2 && c;
  });
  if (t.status !== 'ok') return;
  assert.deepEqual(t.devices.map(deviceRow), [
    [0, 'NVIDIA H200', H200, 29923, 143771, 100, 689.04, 700, 56, 1545, 3201, null],
  ]);
  assert.deepEqual(
    t.apps.map((a) => [a.pid, a.gpuUuid, a.usedMemMiB]),
    [
      [702, H200, 21610],
      [703, H200, 8298],
    ],
  );
  m.stop();
});

test('H200 without MIG: its -L and full -q outputs yield no MIG devices', () => {
  for (const name of ['h200-idle', 'h200-load', 'h200-trainer']) {
    assert.deepEqual(parseListing(readFileSync(join(FX, name, 'L.txt'), 'utf8')), [], `${name} -L`);
    const q = readFileSync(join(FX, name, 'q.txt'), 'utf8');
    assert.match(q, /MIG Mode\s+Current\s+: Disabled/, `${name}: a real -q of a GPU with MIG off`);
    assert.deepEqual(parseMigQuery(q), [], `${name} -q`);
  }
  // the stream the reader keeps open parses line by line to the same device
  const stream = readFileSync(join(FX, 'h200-load', 'gpu-stream.csv'), 'utf8')
    .trim()
    .split('\n');
  const rows = stream.map(parseGpuLine);
  assert.ok(rows.length >= 5);
  for (const g of rows) {
    assert.ok(g);
    assert.equal(g.uuid, H200);
    assert.equal(g.memUsedMiB, 29923);
    assert.ok(g.powerW !== null && g.powerW > 600 && g.powerW <= 700, String(g.powerW));
  }
});

test('H200 under the real nsa-vibe trainer (recorded): its two ranks are the compute apps, on the one GPU', () => {
  const dev = parseGpuLine(readFileSync(join(FX, 'h200-trainer', 'gpu.csv'), 'utf8').trim())!;
  const uuid = 'GPU-e7ac267e-d08b-31b1-1018-449d742ffe14';
  assert.deepEqual(deviceRow(dev), [0, 'NVIDIA H200', uuid, 16927, 143771, 98, 141.81, 700, 40, 1980, 3201, null]);
  const apps = readFileSync(join(FX, 'h200-trainer', 'apps.csv'), 'utf8')
    .trim()
    .split('\n')
    .map(parseAppLine);
  // rank 1 (pid 650) and rank 0 (pid 649) of ../nsa-vibe/ddp2-h200-gpu, 8456 MiB each
  assert.deepEqual(
    apps.map((a) => [a?.pid, a?.gpuUuid, a?.usedMemMiB]),
    [
      [650, uuid, 8456],
      [649, uuid, 8456],
    ],
  );
});
