// The Host lines of the GPUs · Host panel: RAM, swap, CPU, load and the run dir's disk, on a CPU-only
// host and beside GPUs, at 80x24 and 120x40; coloured by the judge's host alerts. Pure: no process.
import './no-ci.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
import { evaluationFields } from '../../src/cockpit/state.js';
import type { HostStats } from '../../src/remote/hoststats.js';
import { compose } from '../../src/ui/compose.js';
import { plain } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { baseState, fixtureSnapshot } from './helpers.js';

const host = (at: number, availMiB: number): HostStats => ({
  at,
  memTotalMiB: 24_105,
  memAvailMiB: availMiB,
  swapTotalMiB: 0,
  swapFreeMiB: 0,
  load: [1.5, 1.25, 0.75],
  cpuPct: 63,
  disks: [{ path: '/runs/x', role: 'run dir', mount: null, totalMiB: 200_000, availMiB: 120_000 }],
  errors: [],
});

test('CPU-only host: RAM, CPU, load and the run dir disk are on screen at 80x24 and 120x40', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const s = {
    ...baseState(run),
    gpu: { status: 'no-nvidia-tools' as const, at: run.takenAt },
    hostStats: host(run.takenAt, 6_451),
  };
  for (const [cols, rows] of [
    [80, 24],
    [120, 40],
  ] as const) {
    const text = compose(s, initialView(), cols, rows, s.at).lines.map(plain).join('\n');
    assert.match(text, /GPUs · Host/);
    assert.match(text, /RAM .* 17\.2G\/23\.5G avail 6\.3G/, `${cols}x${rows}`);
    if (rows >= 40) {
      assert.match(text, /CPU\s+63% load 1\.50 1\.25 0\.75/);
      assert.match(text, /disk .* 117\.2G free\/195\.3G run dir/);
    }
  }
});

test('beside GPUs the host lines follow the devices; a host-mem critical colours the RAM line', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const now = run.takenAt;
  const ev = new Checker().evaluate({ now, run, procs: null, gpu: null, hostStats: host(now, 300) });
  assert.equal(ev.alerts.find((a) => a.id === 'host-mem')?.severity, 'critical');
  const dev = {
    index: 0,
    name: 'NVIDIA H100',
    uuid: 'GPU-a',
    mig: null,
    memUsedMiB: 1000,
    memTotalMiB: 80_000,
    utilPct: 10,
    powerW: null,
    powerLimitW: null,
    tempC: null,
    smClockMHz: null,
    memClockMHz: null,
  };
  const s = {
    ...baseState(run),
    ...evaluationFields(ev),
    gpu: { status: 'ok' as const, at: now, devices: [dev], apps: [], latencyMs: 1 },
    hostStats: host(now, 300),
  };
  const f = compose(s, initialView(), 120, 40, now);
  const lines = f.lines.map(plain);
  const gi = lines.findIndex((l) => /H100/.test(l));
  const ri = lines.findIndex((l) => /RAM .*avail 300M/.test(l));
  assert.ok(gi >= 0 && ri > gi, 'the RAM line comes after the device');
  const ramSegs = f.lines[ri]!.filter((x) => /avail 300M/.test(x.text));
  assert.equal(ramSegs[0]?.role, 'crit');
});

test('a multi-node view: each node’s GPUs under its name, and a node without GPUs said so, at 120x40', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const dev = (index: number, host: string) => ({
    index,
    name: 'NVIDIA A100-SXM4-80GB',
    uuid: `GPU-${host}-${index}`,
    mig: null,
    memUsedMiB: 40_000,
    memTotalMiB: 81_920,
    utilPct: 97,
    powerW: 300,
    powerLimitW: 400,
    tempC: 61,
    smClockMHz: 1410,
    memClockMHz: 1593,
    host,
  });
  const s = {
    ...baseState(run),
    gpu: {
      status: 'ok' as const,
      at: run.takenAt,
      latencyMs: 5,
      apps: [],
      devices: [dev(0, 'root@b:2222'), dev(1, 'root@b:2222')],
      nodes: [
        { host: 'local', status: 'no-nvidia-tools' as const, why: 'nvidia-smi not found' },
        { host: 'root@b:2222', status: 'ok' as const, why: null },
      ],
    },
    hostStats: host(run.takenAt, 6_451),
  };
  const rows = compose(s, initialView(), 120, 40, s.at).lines.map(plain);
  const at = (re: RegExp) => rows.findIndex((l) => re.test(l));
  const head = at(/│on root@b:2222 /);
  assert.ok(head >= 0, rows.join('\n'));
  assert.match(rows[head + 1]!, /│0 A100-SXM4-80GB .* 97%/);
  assert.match(rows[head + 2]!, /│1 A100-SXM4-80GB .* 97%/);
  assert.ok(at(/│local: nvidia-smi not found /) > head, rows.join('\n'));
  assert.ok(at(/RAM .* avail 6\.3G/) > head, 'the host lines still shown');
});
