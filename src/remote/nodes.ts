// The machines of a multi-node run (--node H, repeatable; --nodes H1,H2; SLURM_JOB_NODELIST): one
// Host per node, one SSH connection each, `local` for this machine. A node that cannot be reached is
// kept as a fact (its error, since when) and tried again, never dropped from the list: the run's
// view must say "node B unreachable", not show the run without it. A refused host key is not a node
// that is down: it is the operator's input, and stays an error (exit 2), as with --host.
// This file knows machines, not runs: src/trainer/run/nodes.ts reads a run's ranks on them.
import { childProcess } from '../builtins.js';
import type { Host } from './host.js';
import { LocalHost } from './local/host.js';
import type { OpenHostSpec } from './index.js';

/** The nodes the command line names: --node (in order), then --nodes's list; duplicates once. */
export function nodeNames(node: readonly string[] | undefined, nodes: string | undefined): string[] {
  const out: string[] = [];
  for (const n of [...(node ?? []), ...(nodes ?? '').split(',')]) {
    const t = n.trim();
    if (t === '') continue;
    if (/\s/.test(t)) throw new Error(`node '${t}' holds a space: give each node as user@host[:port] or an alias`);
    if (!out.includes(t)) out.push(t);
  }
  return out;
}

/** A Slurm node list (`gpu[01-03],login1`) expanded by `scontrol show hostnames`; null without scontrol. */
export function slurmNodes(list: string, timeoutMs = 5000): Promise<string[] | null> {
  return new Promise((resolve) => {
    childProcess().execFile('scontrol', ['show', 'hostnames', list], { timeout: timeoutMs }, (err, stdout) => {
      if (err) return resolve(null);
      const names = stdout
        .split('\n')
        .map((s) => s.trim())
        .filter(Boolean);
      resolve(names.length ? names : null);
    });
  });
}

/**
 * The node list: the command line's, else SLURM_JOB_NODELIST expanded (`local` stands for the node
 * this runs on when it is one of them). [] when neither names a node: a one-host run.
 */
export async function resolveNodeList(
  node: readonly string[] | undefined,
  nodes: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  hostname: string = '',
): Promise<string[]> {
  const given = nodeNames(node, nodes);
  if (given.length > 0) return given;
  const list = env.SLURM_JOB_NODELIST?.trim();
  if (!list) return [];
  const names = (await slurmNodes(list)) ?? (/[[\]]/.test(list) ? null : nodeNames(undefined, list));
  if (!names) throw new Error(`SLURM_JOB_NODELIST=${list} needs scontrol to expand it: give --node for each node`);
  return names.map((n) => (hostname && (n === hostname || n === hostname.split('.')[0]) ? 'local' : n));
}

export interface NodeState {
  /** as the operator named it (`local`, `root@10.0.0.2:2222`, an alias): shown on ranks and alerts */
  readonly label: string;
  /** null while it has never been reached */
  host: Host | null;
  /** why it cannot be reached now ('' when it can) */
  error: string;
  /** ms epoch (this machine's clock) of its last answer; null: never */
  lastOkAt: number | null;
  /** ms epoch when it was first found unreachable in the current outage */
  downSince: number | null;
}

export interface OpenNodesOptions {
  /** the host options (-i, --accept-new-host-key, ssh overrides) each SSH node is opened with */
  spec: Omit<OpenHostSpec, 'host'>;
  /** how often a node never reached is tried again (default 5 s) */
  retryMs?: number;
  /** connect timeout per attempt (default 5 s) */
  connectTimeoutMs?: number;
}

/** Several machines, each its own Host. */
export class NodeSet {
  readonly nodes: NodeState[];
  private retryAt = new Map<string, number>();
  private connecting = new Map<string, Promise<void>>();

  private constructor(
    labels: string[],
    private readonly o: OpenNodesOptions,
  ) {
    this.nodes = labels.map((label) => ({ label, host: null, error: '', lastOkAt: null, downSince: null }));
  }

  /**
   * Opens every node at once (one SSH connection each). A node that does not answer is kept,
   * unreachable; a refused host key throws (the operator's input, exit 2).
   */
  static async open(labels: string[], o: OpenNodesOptions): Promise<NodeSet> {
    const set = new NodeSet(labels, o);
    await Promise.all(set.nodes.map((n) => set.connect(n)));
    return set;
  }

  private connect(n: NodeState): Promise<void> {
    const going = this.connecting.get(n.label);
    if (going) return going;
    const p = (async () => {
      if (n.label === 'local') {
        n.host = new LocalHost();
        return;
      }
      const { openHost, HostKeyError } = await import('./index.js');
      const t0 = Date.now();
      try {
        n.host = await openHost({
          ...this.o.spec,
          host: n.label,
          // a node lost is tried again at least every 5 s (not the 15 s of one --host): it comes back
          // into the view within seconds of its sshd
          ssh: { readyTimeoutMs: this.o.connectTimeoutMs ?? 5000, backoffMaxMs: 5000, ...this.o.spec.ssh },
        });
        n.error = '';
      } catch (e) {
        // a refused host key (unknown, changed, revoked) is the operator's to settle: never "down"
        // (and so is a node given no way to log in: no key, no agent)
        if (e instanceof HostKeyError || /^no way to authenticate/.test((e as Error).message)) throw e;
        n.error = `${(e as Error).message}`.split('\n')[0]!;
        n.downSince ??= t0;
        this.retryAt.set(n.label, Date.now() + (this.o.retryMs ?? 5000));
      }
    })().finally(() => this.connecting.delete(n.label));
    this.connecting.set(n.label, p);
    return p;
  }

  /** Tries again, in the background, the nodes never reached whose retry is due. */
  retryDue(): void {
    for (const n of this.nodes)
      if (!n.host && (this.retryAt.get(n.label) ?? 0) <= Date.now()) void this.connect(n).catch(() => {});
  }

  /**
   * The node named `label` when it can be acted on now (its Host), else why not in one phrase:
   * never reached, its connection lost or closed, or not one of these nodes. An action on a node
   * that cannot be reached says so for that node; it is never dropped, and never sent elsewhere.
   */
  reachable(label: string): Host | string {
    const n = this.nodes.find((x) => x.label === label);
    if (!n) return `node ${label} is not one of the nodes named (--node)`;
    if (!n.host) return `node ${label} unreachable: ${n.error || 'not connected yet'}`;
    const c = n.host.connState();
    if (c.state === 'reconnecting')
      return `node ${label} unreachable: connection lost${c.lastError ? `: ${c.lastError}` : ''}`;
    if (c.state === 'closed') return `node ${label} unreachable: connection closed`;
    return n.host;
  }

  /** A node answered (its process table was read). */
  answered(n: NodeState): void {
    n.lastOkAt = Date.now();
    n.error = '';
    n.downSince = null;
  }

  /** A node did not answer (why). */
  failed(n: NodeState, why: string): void {
    n.error = why;
    n.downSince ??= Date.now();
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.host?.close().catch(() => {})));
  }
}
