// A multi-node launch (issue 22): a profile with `nnodes`, a rendezvous (`rdzv_endpoint: HOST:PORT`
// for torchrun's c10d rendezvous, or `master_addr:` + `master_port:` for a static one) and
// optionally `node_ranks: {NODE: R}`; `nsa-top launch --profile P --node N1 --node N2 …` names the
// nodes. Each node gets its slot (its node_rank, in --node order unless node_ranks says) and its own
// torchrun command: `torchrun --nnodes=N --node_rank=R --rdzv_backend=c10d --rdzv_endpoint=A:P
// --rdzv_id=ID …` (or `--master_addr=A --master_port=P`). Pure: the profile check (schema issues)
// and the command, unit-tested in test/trainer/launch/multinode.test.ts.
import { InputError } from '../../errors.js';

/** one node's place in the run */
export interface NodeSlot {
  /** the node as the operator named it (--node): `local`, user@host[:port], an alias */
  label: string;
  nodeRank: number;
  nnodes: number;
  /** torchrun's --rdzv_id: the same on every node (the launch's run dir name) */
  rdzvId: string;
}

/** the multi-node fields of a profile */
export interface MultiNodeFields {
  nnodes?: number | undefined;
  rdzv_endpoint?: string | undefined;
  master_addr?: string | undefined;
  master_port?: number | undefined;
  node_ranks?: Record<string, number> | undefined;
}

/** What is wrong with a profile's multi-node fields (the schema reports each at its key). */
export function multiNodeIssues(p: MultiNodeFields): { path: string[]; message: string }[] {
  const out: { path: string[]; message: string }[] = [];
  const multi = (p.nnodes ?? 1) > 1;
  if (p.rdzv_endpoint !== undefined && p.master_addr !== undefined)
    out.push({
      path: ['master_addr'],
      message: 'two rendezvous: rdzv_endpoint (c10d) or master_addr + master_port (static), not both',
    });
  if (p.rdzv_endpoint !== undefined && p.master_port !== undefined)
    out.push({
      path: ['master_port'],
      message: 'the port is set twice: rdzv_endpoint already holds it (HOST:PORT)',
    });
  if (p.master_addr !== undefined && p.master_port === undefined)
    out.push({ path: ['master_addr'], message: 'master_addr needs master_port (the rendezvous port on that node)' });
  if (multi && p.rdzv_endpoint === undefined && p.master_addr === undefined)
    out.push({
      path: ['nnodes'],
      message: `nnodes ${p.nnodes} needs a rendezvous every node can reach: rdzv_endpoint: HOST:PORT, or master_addr: + master_port:`,
    });
  if (!multi)
    for (const k of ['rdzv_endpoint', 'master_addr', 'node_ranks'] as const)
      if (p[k] !== undefined)
        out.push({ path: [k], message: `${k} is for a multi-node run: set nnodes: N (N > 1) with it` });
  if (p.node_ranks && p.nnodes !== undefined) {
    const ranks = Object.values(p.node_ranks);
    const want = Array.from({ length: p.nnodes }, (_, i) => i);
    if (ranks.length !== p.nnodes || want.some((r) => !ranks.includes(r)))
      out.push({
        path: ['node_ranks'],
        message: `node_ranks must give each of the ${p.nnodes} nodes one of the ranks 0..${p.nnodes - 1}, once (got ${ranks.join(', ') || 'none'})`,
      });
  }
  return out;
}

/**
 * Each named node's slot, in --node order. Throws a one-line InputError (exit 2) when the profile
 * is not a multi-node one, the node count is not its nnodes, or node_ranks does not name the nodes.
 */
export function nodeSlots(
  profileName: string,
  p: MultiNodeFields,
  labels: readonly string[],
  rdzvId: string,
): NodeSlot[] {
  const n = p.nnodes;
  if (n === undefined || n < 2)
    throw new InputError(
      `profile ${profileName} is not a multi-node profile: --node needs nnodes: N (N > 1) and rdzv_endpoint: HOST:PORT (or master_addr: + master_port:) in it. Nothing was started.`,
    );
  if (labels.length !== n)
    throw new InputError(
      `profile ${profileName}: nnodes ${n}, but ${labels.length} node${labels.length === 1 ? '' : 's'} named (${labels.join(', ')}): give one --node per node. Nothing was started.`,
    );
  if (!p.node_ranks) return labels.map((label, nodeRank) => ({ label, nodeRank, nnodes: n, rdzvId }));
  const unknown = Object.keys(p.node_ranks).filter((k) => !labels.includes(k));
  const missing = labels.filter((l) => p.node_ranks![l] === undefined);
  if (unknown.length || missing.length)
    throw new InputError(
      `profile ${profileName}: node_ranks names ${Object.keys(p.node_ranks).join(', ')}, but the nodes are ${labels.join(', ')}${missing.length ? ` (no rank for ${missing.join(', ')})` : ''}: name them as --node does. Nothing was started.`,
    );
  return labels.map((label) => ({ label, nodeRank: p.node_ranks![label]!, nnodes: n, rdzvId }));
}

/**
 * torchrun's multi-node flags for one node. c10d: node_rank 0 hosts the rendezvous store
 * (is_host=1), the others join it; static: MASTER_ADDR/PORT of node_rank 0.
 */
export function torchrunNodeArgs(p: MultiNodeFields, slot: NodeSlot): string[] {
  const base = [`--nnodes=${slot.nnodes}`, `--node_rank=${slot.nodeRank}`];
  if (p.rdzv_endpoint !== undefined)
    return [
      ...base,
      '--rdzv_backend=c10d',
      `--rdzv_endpoint=${p.rdzv_endpoint}`,
      `--rdzv_id=${slot.rdzvId}`,
      `--rdzv_conf=is_host=${slot.nodeRank === 0 ? 1 : 0}`,
    ];
  return [...base, `--master_addr=${p.master_addr ?? ''}`, `--master_port=${p.master_port ?? ''}`];
}
