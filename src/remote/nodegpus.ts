// The GPUs of a multi-node run (--node): one GpuMonitor (nvidia-smi over that node's own Host) per
// node, merged into the one GpuTelemetry every surface already reads (the cockpit's GPU panel, the
// judge, the metrics). Each device carries its node (`host`); a device's UUID is the GPU's own, so
// devices of different nodes never merge into one. The compute apps are NOT merged: an app's pid is
// its node's, so the merged sample holds the first node's apps only (what the first node's process
// table is matched against) and each other node's apps are handed to that node's own process table
// (`of(label)`, src/trainer/run/nodes.ts).
// How the nodes' states combine: a node whose nvidia-smi hangs (not answering) or fails (error) is
// what the merged telemetry says — a GPU fallen off the bus on node B is never hidden behind node A's
// healthy ones — then ok, then "no NVIDIA tools" (a CPU-only node among GPU nodes is not a problem).
// A node that cannot be reached is left out of that: the run is already STALE "node B unreachable"
// (src/trainer/run/nodes.ts), and its last devices are not shown as if read now.
// This file knows machines, not runs.
import { GpuMonitor } from './gpu.js';
import type { Host } from './host.js';
import type { NodeSet } from './nodes.js';
import type { GpuSample, GpuTelemetry, NodeGpuStatus } from './types.js';

/** one node's telemetry, or why its node cannot be reached */
export interface NodeGpuPart {
  host: string;
  telemetry: GpuTelemetry | null;
  /** the node cannot be reached now (its telemetry, if any, is not used) */
  unreachable?: string;
}

function tagged(s: GpuSample, host: string): GpuSample {
  return {
    ...s,
    devices: s.devices.map((d) => ({ ...d, host })),
    apps: s.apps.map((a) => ({ ...a })),
  };
}

/** one node's telemetry in one phrase */
export function statusOf(p: NodeGpuPart): NodeGpuStatus {
  if (p.unreachable !== undefined) return { host: p.host, status: 'unreachable', why: p.unreachable };
  const g = p.telemetry;
  if (!g) return { host: p.host, status: 'not-answering', why: 'no sample yet' };
  switch (g.status) {
    case 'ok':
      return { host: p.host, status: 'ok', why: null };
    case 'no-nvidia-tools':
      return { host: p.host, status: g.status, why: 'nvidia-smi not found' };
    case 'error':
      return { host: p.host, status: g.status, why: g.message.split('\n')[0]! };
    case 'not-answering':
      return { host: p.host, status: g.status, why: 'nvidia-smi not answering' };
  }
}

/**
 * The nodes' telemetries as one (pure). `parts[0]` is the first node (the one that reads the run
 * dir): only its compute apps are kept (pids are per node).
 */
export function mergeNodeGpus(parts: readonly NodeGpuPart[], now: number = Date.now()): GpuTelemetry {
  const nodes = parts.map(statusOf);
  const first = parts[0]?.host;
  const live = parts.filter((p) => p.unreachable === undefined && p.telemetry);
  const samples: { host: string; s: GpuSample }[] = [];
  for (const p of live) {
    const g = p.telemetry!;
    if (g.status === 'ok') samples.push({ host: p.host, s: tagged(g, p.host) });
  }
  // only the first node's apps: their pids are the ones its process table is matched against
  const join = (ss: { host: string; s: GpuSample }[], at: number): GpuSample => ({
    at,
    devices: ss.flatMap((x) => x.s.devices),
    apps: ss.filter((x) => x.host === first).flatMap((x) => x.s.apps),
    latencyMs: ss.reduce((m, x) => Math.max(m, x.s.latencyMs), 0),
    nodes,
  });
  const hung = live.filter((p) => p.telemetry!.status === 'not-answering');
  if (hung.length) {
    // the devices last seen: the answering nodes' now, the hung nodes' last good samples
    const last = [...samples];
    for (const p of hung) {
      const g = p.telemetry as Extract<GpuTelemetry, { status: 'not-answering' }>;
      if (g.lastGood) last.push({ host: p.host, s: tagged(g.lastGood, p.host) });
    }
    const since = Math.min(...hung.map((p) => (p.telemetry as { since: number }).since));
    return {
      status: 'not-answering',
      since,
      at: now,
      lastGood: last.length ? join(last, Math.min(...last.map((x) => x.s.at))) : null,
    };
  }
  const failed = live.filter((p) => p.telemetry!.status === 'error');
  if (failed.length)
    return {
      status: 'error',
      message: failed
        .map((p) => `node ${p.host}: ${(p.telemetry as { message: string }).message.split('\n')[0]}`)
        .join('; '),
      at: now,
    };
  if (samples.length) return { status: 'ok', ...join(samples, Math.min(...samples.map((x) => x.s.at))) };
  return { status: 'no-nvidia-tools', at: now };
}

/** The GPU telemetry of every node of a NodeSet, merged (a GpuSource). */
export class NodeGpus {
  private readonly monitors = new Map<string, { host: Host; m: GpuMonitor; first: Promise<void> }>();
  private stopped = false;
  private started: Promise<void> | null = null;

  constructor(
    private readonly set: NodeSet,
    private readonly o: { intervalMs: number; timeoutMs?: number; env?: Record<string, string> },
  ) {}

  /** Starts a monitor on every node reached; resolves when each has its first sample (or none). */
  start(): Promise<void> {
    this.started ??= Promise.all(
      this.set.nodes.map((n) => (this.monitorOf(n.label) ? this.monitors.get(n.label)!.first : null)),
    ).then(() => {});
    return this.started;
  }

  /** the node's monitor, started on its Host once the node has been reached */
  private monitorOf(label: string): GpuMonitor | null {
    if (this.stopped) return null;
    const n = this.set.nodes.find((x) => x.label === label);
    if (!n?.host) return null;
    const had = this.monitors.get(label);
    if (had && had.host === n.host) return had.m;
    had?.m.stop();
    const m = new GpuMonitor(n.host, {
      intervalMs: this.o.intervalMs,
      ...(this.o.timeoutMs !== undefined ? { timeoutMs: this.o.timeoutMs } : {}),
      ...(this.o.env ? { env: this.o.env } : {}),
    });
    // resolves at its first sample (or when nvidia-smi is found missing or silent)
    const first = m.start().catch(() => {});
    this.monitors.set(label, { host: n.host, m, first });
    return m;
  }

  /** one node's own telemetry (its apps' pids are that node's), null: not reached */
  of(label: string): GpuTelemetry | null {
    return this.monitorOf(label)?.current() ?? null;
  }

  private parts(): NodeGpuPart[] {
    return this.set.nodes.map((n) => {
      const r = this.set.reachable(n.label);
      if (typeof r === 'string') return { host: n.label, telemetry: null, unreachable: r };
      return { host: n.label, telemetry: this.of(n.label) };
    });
  }

  current(): GpuTelemetry {
    return mergeNodeGpus(this.parts());
  }

  /** how each node's nvidia-smi answers now, in node order */
  statuses(): NodeGpuStatus[] {
    return this.parts().map(statusOf);
  }

  stop(): void {
    this.stopped = true;
    for (const { m } of this.monitors.values()) m.stop();
    this.monitors.clear();
  }
}
