// A run's processes across several nodes (a multi-node torchrun job): the one observation reads the
// run dir on the first node (where rank 0 writes it; with a shared file system every node's copy is
// the same) and each other node's process table through that node's own Host, with the same proof as
// on one host (findRunProcesses: command, environment, start time against the run's records). Each
// rank is identified by (host, pid, start time) — pids are per node, and two nodes' pid namespaces
// hand out the same numbers — and carries its node on `proc.host`. A node that does not answer
// keeps the ranks it last showed (stale) and makes the table unknown to the judge (`error`), so no
// rank is called dead for a node we cannot see, and `view()` makes the state STALE with "node B
// unreachable" and the age of its last answer: never RUNNING by omission.
import type { Host } from '../../remote/host.js';
import type { NodeSet, NodeState } from '../../remote/nodes.js';
import type { GpuTelemetry, NodeGpuStatus, RunProcesses } from '../../remote/types.js';
import { findRunProcesses } from './processes.js';
import type { FindRunHints } from './ranks.js';

/** a node's process table that has not come back in this long is a node that does not answer */
const NODE_READ_TIMEOUT_MS = 4000;

export interface NodeViewAge {
  ageMs: number;
  staleAfterMs: number;
  cause: string;
}

function tag(rp: RunProcesses, label: string): RunProcesses {
  return {
    ...rp,
    launcher: rp.launcher ? { ...rp.launcher, host: label } : null,
    ranks: rp.ranks.map((r) => ({ ...r, proc: { ...r.proc, host: label } })),
    unknown: rp.unknown.map((p) => ({ ...p, host: label })),
    ...(rp.unproven ? { unproven: rp.unproven.map((u) => ({ ...u, host: label })) } : {}),
  };
}

function unseen(rp: RunProcesses, sinceMs: number): RunProcesses {
  return { ...rp, ranks: rp.ranks.map((r) => ({ ...r, proc: { ...r.proc, unseenSinceMs: sinceMs } })) };
}

/**
 * `p` within `ms`, and no longer than the host's link stays up: a read in flight when the node's
 * connection drops may never settle, and the round (the whole view) must not wait out the timeout
 * to say the node is unreachable.
 */
function withTimeout<T>(p: Promise<T>, ms: number, what: string, h: Host): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let watch: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(new Error(`${what} did not answer in ${ms / 1000} s`)), ms);
      watch = setInterval(() => {
        const down = linkDown(h);
        if (down) rej(new Error(down));
      }, 100);
    }),
  ]).finally(() => {
    clearTimeout(timer);
    clearInterval(watch);
  });
}

/** Whether the host's connection is down right now (an SSH host reconnecting or closed). */
function linkDown(h: Host): string | null {
  const c = h.connState();
  if (c.state === 'reconnecting') return `connection lost${c.lastError ? `: ${c.lastError}` : ''}`;
  if (c.state === 'closed') return 'connection closed';
  return null;
}

/** The ranks of every node, merged; kept between rounds for the nodes that stop answering. */
export class NodeProcesses {
  private last = new Map<string, RunProcesses>();
  /** which nodes' links were down at the last merge */
  private mergedLinks = '';
  /** each node's own GPU telemetry (src/remote/nodegpus.ts): its apps' pids map that node's ranks to GPUs */
  gpus: { of(label: string): GpuTelemetry | null; current(): GpuTelemetry; statuses(): NodeGpuStatus[] } | null = null;

  constructor(
    readonly set: NodeSet,
    private readonly timeoutMs = NODE_READ_TIMEOUT_MS,
  ) {}

  /** the node that reads the run dir (the first named) */
  get primary(): NodeState {
    return this.set.nodes[0]!;
  }

  /**
   * `first`: the first node's processes as the observation read them through its own host (null:
   * not read this round). Every other node is read now, at once, each within a few seconds.
   */
  async merge(first: RunProcesses | null, outDir: string, hints: FindRunHints): Promise<RunProcesses> {
    const at = Date.now();
    this.set.retryDue();
    const p0 = this.primary;
    if (first) {
      if (first.error) this.set.failed(p0, first.error);
      else this.set.answered(p0);
      // a table that could not be read keeps the last one's ranks (shown stale), as for the others
      if (!first.error || !this.last.has(p0.label)) this.last.set(p0.label, tag(first, p0.label));
    }
    await Promise.all(
      this.set.nodes.slice(1).map(async (n) => {
        const h = n.host;
        if (!h) return; // never reached: NodeSet retries it
        const down = linkDown(h);
        if (down) return this.set.failed(n, down);
        try {
          const g = this.gpus?.of(n.label) ?? null;
          const rp = await withTimeout(
            findRunProcesses(h, outDir, { ...hints, gpu: g?.status === 'ok' ? g : null }),
            this.timeoutMs,
            `node ${n.label}`,
            h,
          );
          if (rp.error) throw new Error(rp.error);
          this.set.answered(n);
          this.last.set(n.label, tag(rp, n.label));
        } catch (e) {
          this.set.failed(n, linkDown(h) ?? (e as Error).message.split('\n')[0]!);
        }
      }),
    );
    // a node that does not answer: its last ranks, each marked with the time of that answer (stale)
    const parts = this.set.nodes
      .map((n) => {
        const p = this.last.get(n.label);
        return p && n.error ? unseen(p, n.lastOkAt ?? n.downSince ?? at) : p;
      })
      .filter((x): x is RunProcesses => !!x);
    const ranks = parts.flatMap((p) => p.ranks).sort((a, b) => a.rank - b.rank);
    const provenRanks = new Set(ranks.map((r) => r.rank));
    // a heartbeat names its writer's pid on its own node: on the other nodes that pid is nobody, or
    // some other process — not a doubt about the rank, once the rank is proven where it runs
    const unproven = parts.flatMap((p) => p.unproven ?? []).filter((u) => u.rank === null || !provenRanks.has(u.rank));
    const down = this.set.nodes.filter((n) => n.error);
    this.mergedLinks = this.links();
    return {
      at,
      launcher: parts[0]?.launcher ?? parts.find((p) => p.launcher)?.launcher ?? null,
      ranks,
      unknown: parts.flatMap((p) => p.unknown),
      ...(unproven.length ? { unproven } : {}),
      ...(down.length ? { error: down.map((n) => `node ${n.label} unreachable: ${n.error}`).join('; ') } : {}),
    };
  }

  /** the nodes whose connection is down now (never reached, lost, closed) */
  private links(): string {
    return this.set.nodes
      .filter((n) => !n.host || linkDown(n.host) !== null)
      .map((n) => n.label)
      .join(' ');
  }

  /**
   * A node's connection went down or came back since the last merge: its ranks are to be read (or
   * marked stale) now, not when the process table is next due.
   */
  linksChanged(): boolean {
    return this.links() !== this.mergedLinks;
  }

  /**
   * How old our view of the slowest node is, when a node does not answer: STALE at once (a node
   * that does not answer is a fact, not a guess), aged from its last answer (or from when it was
   * first tried). null while every node answers.
   */
  view(): NodeViewAge | null {
    // a connection that dropped is seen every round, not only when the process table is next due
    for (const n of this.set.nodes) {
      const why = n.host ? linkDown(n.host) : null;
      if (why) this.set.failed(n, why);
    }
    const down = this.set.nodes.filter((n) => n.error);
    if (down.length === 0) return null;
    const since = (n: NodeState) => n.lastOkAt ?? n.downSince ?? Date.now();
    const worst = down.reduce((a, b) => (since(b) < since(a) ? b : a));
    return {
      ageMs: Math.max(1, Date.now() - since(worst)),
      staleAfterMs: 0,
      cause: down.map((n) => `node ${n.label} unreachable: ${n.error}`).join('; '),
    };
  }
}
