// The GPUs of a multi-node view merged into one telemetry (src/remote/nodegpus.ts), pure: each device
// with its node, only the first node's compute apps (pids are per node), and which node's state wins.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mergeNodeGpus, type NodeGpuPart } from '../../src/remote/nodegpus.js';
import type { GpuSample, GpuTelemetry } from '../../src/remote/types.js';

const sample = (uuids: string[], pid: number, at = 1000): GpuSample => ({
  at,
  latencyMs: 5,
  apps: [{ pid, gpuUuid: uuids[0]!, usedMemMiB: 100 }],
  devices: uuids.map((uuid, index) => ({
    index,
    name: 'NVIDIA H100',
    uuid,
    mig: null,
    memUsedMiB: 1,
    memTotalMiB: 80,
    utilPct: 90,
    powerW: 300,
    powerLimitW: 700,
    tempC: 50,
    smClockMHz: 1980,
    memClockMHz: 2619,
  })),
});
const ok = (s: GpuSample): GpuTelemetry => ({ status: 'ok', ...s });
const A = ok(sample(['GPU-a0', 'GPU-a1'], 100));
const B = ok(sample(['GPU-b0'], 100, 900));

test('every node’s devices, each with its node; the apps are the first node’s only (the same pid on B is another process)', () => {
  const g = mergeNodeGpus([
    { host: 'local', telemetry: A },
    { host: 'root@b', telemetry: B },
  ]);
  assert.equal(g.status, 'ok');
  if (g.status !== 'ok') return;
  assert.deepEqual(
    g.devices.map((d) => [d.host, d.index, d.uuid]),
    [
      ['local', 0, 'GPU-a0'],
      ['local', 1, 'GPU-a1'],
      ['root@b', 0, 'GPU-b0'],
    ],
  );
  assert.deepEqual(g.apps, [{ pid: 100, gpuUuid: 'GPU-a0', usedMemMiB: 100 }]);
  assert.equal(g.at, 900, 'as old as the oldest node’s sample');
  assert.deepEqual(
    g.nodes?.map((n) => [n.host, n.status]),
    [
      ['local', 'ok'],
      ['root@b', 'ok'],
    ],
  );
});

test('a hung nvidia-smi on node B is what the merge says, with every node’s last devices; a CPU-only node is not', () => {
  const hung: GpuTelemetry = { status: 'not-answering', since: 500, at: 2000, lastGood: sample(['GPU-b0'], 7, 400) };
  const g = mergeNodeGpus([
    { host: 'local', telemetry: A },
    { host: 'root@b', telemetry: hung },
  ]);
  assert.equal(g.status, 'not-answering');
  if (g.status !== 'not-answering') return;
  assert.equal(g.since, 500);
  assert.deepEqual(
    g.lastGood?.devices.map((d) => d.host),
    ['local', 'local', 'root@b'],
  );
  const cpu = mergeNodeGpus([
    { host: 'local', telemetry: { status: 'no-nvidia-tools', at: 1 } },
    { host: 'root@b', telemetry: B },
  ]);
  assert.equal(cpu.status, 'ok');
  if (cpu.status === 'ok') {
    assert.deepEqual(cpu.apps, [], 'node B’s apps are not the first node’s');
    assert.deepEqual(
      cpu.nodes?.map((n) => [n.host, n.status]),
      [
        ['local', 'no-nvidia-tools'],
        ['root@b', 'ok'],
      ],
    );
  }
  const err = mergeNodeGpus([
    { host: 'local', telemetry: A },
    { host: 'root@b', telemetry: { status: 'error', message: 'NVIDIA-SMI has failed\nmore', at: 1 } },
  ]);
  assert.deepEqual(err.status === 'error' ? err.message : err.status, 'node root@b: NVIDIA-SMI has failed');
});

test('a node out of reach is left out (the run is STALE for it), and named; no node with GPUs: no NVIDIA tools', () => {
  const parts: NodeGpuPart[] = [
    { host: 'local', telemetry: A },
    { host: 'root@b', telemetry: null, unreachable: 'node root@b unreachable: connection lost' },
  ];
  const g = mergeNodeGpus(parts);
  assert.equal(g.status, 'ok');
  if (g.status === 'ok') {
    assert.equal(g.devices.length, 2);
    assert.deepEqual(g.nodes?.[1], {
      host: 'root@b',
      status: 'unreachable',
      why: 'node root@b unreachable: connection lost',
    });
  }
  const none = mergeNodeGpus([
    { host: 'local', telemetry: { status: 'no-nvidia-tools', at: 1 } },
    { host: 'root@b', telemetry: { status: 'no-nvidia-tools', at: 1 } },
  ]);
  assert.equal(none.status, 'no-nvidia-tools');
});
