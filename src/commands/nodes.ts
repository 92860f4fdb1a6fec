// The command line of a multi-node view (--node H, repeatable; --nodes H1,H2; SLURM_JOB_NODELIST),
// and what `status` prints of its nodes: which node read the run dir, each node's ranks with their
// pids as that node sees them, and the nodes that do not answer.
import { hostname } from 'node:os';
import { ago } from '../format.js';
import type { OpenHostSpec } from '../remote/index.js';
import { NodeSet, resolveNodeList } from '../remote/nodes.js';
import { NodeGpus } from '../remote/nodegpus.js';
import type { Observation } from '../cockpit/observe.js';
import { NodeProcesses } from '../trainer/run/nodes.js';
import type { NodeHosts } from '../trainer/control/nodes.js';
export { NODE_OPTIONS } from './options.js';
import { CliError } from './errors.js';

/** the nodes the options (or SLURM_JOB_NODELIST) name; [] for a one-host look */
export async function nodeListOf(v: { node?: string[]; nodes?: string }): Promise<string[]> {
  try {
    return await resolveNodeList(v.node, v.nodes, process.env, hostname());
  } catch (e) {
    throw new CliError(`${(e as Error).message}`, 2);
  }
}

/**
 * One connection per node. The first node reads the run dir: when it cannot be reached there is no
 * run to look at (exit 2); any other node that cannot be reached is part of what is shown.
 */
export async function openNodes(names: string[], spec: OpenHostSpec): Promise<NodeProcesses> {
  const { host: _h, ...rest } = spec;
  let set: NodeSet;
  try {
    set = await NodeSet.open(names, { spec: rest });
  } catch (e) {
    throw new CliError(`${(e as Error).message}`, 2);
  }
  const first = set.nodes[0]!;
  if (!first.host) {
    await set.close();
    throw new CliError(`node ${first.label}, which reads the run dir, cannot be reached: ${first.error}`, 2);
  }
  return new NodeProcesses(set);
}

/**
 * Every node's GPUs (one nvidia-smi per node, on its own connection), merged for the GPU panel, the
 * judge and the metrics; each node's own apps map its ranks to their GPUs. Sampling starts now; the
 * caller stops it.
 */
export function nodeGpus(nodes: NodeProcesses, intervalMs: number, timeoutMs?: number): NodeGpus {
  const g = new NodeGpus(nodes.set, { intervalMs, ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
  nodes.gpus = g;
  // start() resolves at every node's first sample; the cockpit does not wait for it, --once does
  void g.start().catch(() => {});
  return g;
}

/** status --json `nodes[]` and `processes[]` (docs/status-json.md) */
export function nodesJson(nodes: NodeProcesses, obs: Observation) {
  const now = Date.now();
  const g = obs.gpu;
  const sample = g?.status === 'ok' ? g : g?.status === 'not-answering' ? g.lastGood : null;
  return {
    // every node's GPUs, each with its node; `gpuNodes`: how each node's nvidia-smi answered
    gpus: (sample?.devices ?? []).map((d) => ({
      host: d.host ?? null,
      index: d.index,
      name: d.name,
      uuid: d.uuid,
      memUsedMiB: d.memUsedMiB,
      memTotalMiB: d.memTotalMiB,
      utilPct: d.utilPct,
      powerW: d.powerW,
      tempC: d.tempC,
      // the ranks on it (its node's compute apps), by rank
      ranks: (obs.procs?.ranks ?? []).filter((r) => r.gpuUuid === d.uuid).map((r) => r.rank),
    })),
    gpuNodes: nodes.gpus?.statuses() ?? [],
    nodes: nodes.set.nodes.map((n, i) => ({
      host: n.label,
      readsRunDir: i === 0,
      reachable: n.error === '',
      error: n.error || null,
      lastAnswerAgeS: n.lastOkAt === null ? null : Math.round((now - n.lastOkAt) / 100) / 10,
    })),
    processes: (obs.procs?.ranks ?? []).map((r) => ({
      rank: r.rank,
      host: r.proc.host ?? null,
      pid: r.proc.pid,
      startTime: r.proc.startTime,
      state: r.proc.state,
      localRank: r.localRank,
      groupRank:
        r.proc.env.GROUP_RANK !== undefined && /^\d+$/.test(r.proc.env.GROUP_RANK)
          ? Number(r.proc.env.GROUP_RANK)
          : null,
      cpuPct: r.proc.cpuPct,
      // its node does not answer: what is shown is that old
      unseenForS: r.proc.unseenSinceMs === undefined ? null : Math.round((now - r.proc.unseenSinceMs) / 100) / 10,
    })),
  };
}

/** status's `nodes` lines */
export function formatNodes(nodes: NodeProcesses, obs: Observation): string {
  const out: string[] = [];
  nodes.set.nodes.forEach((n, i) => {
    const ranks = (obs.procs?.ranks ?? []).filter((r) => r.proc.host === n.label);
    const rs = ranks.map((r) => `rank ${r.rank} pid ${r.proc.pid} (${r.proc.state})`).join(', ') || 'no rank';
    const seen = n.lastOkAt === null ? '' : ` ${ago(n.lastOkAt, Date.now())}`;
    const what = n.error ? `UNREACHABLE: ${n.error}${ranks.length ? `; last seen${seen}: ${rs}` : ''}` : rs;
    out.push(`${(i === 0 ? 'nodes' : '').padEnd(10)}${n.label}${i === 0 ? ' (reads the run dir)' : ''}: ${what}`);
  });
  // each node's GPUs in one line: how many, and their utilisation (or why none)
  const g = obs.gpu;
  const devices = g?.status === 'ok' ? g.devices : g?.status === 'not-answering' ? (g.lastGood?.devices ?? []) : [];
  (nodes.gpus?.statuses() ?? []).forEach((st, i) => {
    const mine = devices.filter((d) => d.host === st.host);
    const util = mine.map((d) => (d.utilPct === null ? '?' : `${Math.round(d.utilPct)}%`)).join(' ');
    const what =
      st.status === 'ok' ? `${mine.length} GPU${mine.length === 1 ? '' : 's'}${util ? ` (util ${util})` : ''}` : st.why;
    out.push(`${(i === 0 ? 'gpus' : '').padEnd(10)}${st.host}: ${what}`);
  });
  return `${out.join('\n')}\n`;
}

/** The nodes as the control actions take them: each rank's pid checked and signalled on its own node. */
export function nodeHosts(nodes: NodeProcesses): NodeHosts {
  return {
    primary: nodes.primary.label,
    labels: nodes.set.nodes.map((n) => n.label),
    reachable: (label) => nodes.set.reachable(label),
  };
}
