// Control actions across the nodes of a multi-node run (--node): the same verified, audited path as
// on one host (actions.ts), with each rank's host chosen by the node its pid lives on. A rank target
// carries its node's label (`RankTarget.host`); the action is one record in the run's action log on
// the first node (the node that reads the run dir), and every check of a pid — verified by pid +
// start time, proven a rank of this run by the run's records — and its signal run on the rank's own
// node, through that node's Host: pids are per node, so a pid is never looked up or signalled on
// another node than the one it was found on. A node that cannot be reached is named for each of its
// ranks ("node B unreachable: …"), in the action's result and its record: never dropped.
// Dumps are watched in the run dir on the first node (the shared file system case). A node whose
// view of the out_dir is not that one (a node-local out_dir) is not signalled for a dump: its
// ranks would write their stacks on its own disk, where this dump could not tell whose they are.
import { join } from 'node:path';
import type { Host } from '../../remote/host.js';
import { NSA_DIR } from '../run/rundirs.js';
import { ACTIONS_FILE } from './audit.js';
import type { ActionRecord } from './types.js';

/** The machines of a multi-node run as the control actions see them. */
export interface NodeHosts {
  /** the label of the node that reads the run dir: the action log, .HALT and the dumps are there */
  readonly primary: string;
  /** every node, as the operator named them (the first is `primary`) */
  readonly labels: readonly string[];
  /** the node's Host when it can be acted on now, else why not (one phrase, naming the node) */
  reachable(label: string): Host | string;
}

/** The host a rank's pid lives on: the one host without nodes or for the first node's ranks. */
export function rankHost(host: Host, nodes: NodeHosts | undefined, t: { host?: string }): Host | string {
  if (!nodes || t.host === undefined || t.host === nodes.primary) return host;
  return nodes.reachable(t.host);
}

/**
 * The nodes that cannot be reached now and hold no target: their ranks are not known (never seen,
 * or not since the view was opened), so none is signalled there — which the action must say, for
 * each such node, rather than act on the other nodes as if they were all of the run.
 */
export function nodesOutOfReach(
  nodes: NodeHosts | undefined,
  targets: readonly { host?: string }[],
): { host: string; why: string }[] {
  if (!nodes) return [];
  const out: { host: string; why: string }[] = [];
  for (const label of nodes.labels) {
    if (label === nodes.primary || targets.some((t) => t.host === label)) continue;
    const r = nodes.reachable(label);
    if (typeof r === 'string') out.push({ host: label, why: r });
  }
  return out;
}

/** what a result says of such a node */
export function outOfReachText(n: { host: string; why: string }): string {
  return `${n.why}: its ranks are not known, none signalled there`;
}

/** `rank 1 on B` (a multi-node target), `rank 1` (one host) */
export function rankName(t: { rank: number; host?: string }): string {
  return `rank ${t.rank}${t.host !== undefined ? ` on ${t.host}` : ''}`;
}

/**
 * Whether `node` sees the first node's out_dir: the action's own 'started' line, appended there just
 * before, is in the node's copy of the action log (a shared file system shows it; a node-local
 * out_dir does not hold it). null: it does; else why not.
 */
export async function sharesOutDir(node: Host, outDir: string, started: ActionRecord): Promise<string | null> {
  if (started.notLogged !== undefined)
    return `cannot tell whether it shares the run dir (the action's first line was not logged: ${started.notLogged})`;
  const path = join(outDir, NSA_DIR, ACTIONS_FILE);
  let text: string;
  try {
    const st = await node.stat(path);
    if (!st)
      return `its ${outDir} is not the one the first node reads (no ${NSA_DIR}/${ACTIONS_FILE} in it: a node-local out_dir)`;
    text = (await node.readRange(path, Math.max(0, st.size - 64 * 1024), st.size)).toString('utf8');
  } catch (e) {
    return `could not read its ${NSA_DIR}/${ACTIONS_FILE}: ${(e as Error).message.split('\n')[0]}`;
  }
  for (const line of text.split('\n').reverse()) {
    if (!line.includes('"started"')) continue;
    try {
      const r = JSON.parse(line) as Partial<ActionRecord>;
      if (
        r.ts === started.ts &&
        r.result === 'started' &&
        r.action === started.action &&
        r.who?.pid === started.who.pid
      )
        return null;
    } catch {
      /* a cut line */
    }
  }
  return `its ${outDir} is not the one the first node reads (this action's record is not in it: a node-local out_dir)`;
}
