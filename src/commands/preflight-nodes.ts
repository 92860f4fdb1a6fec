// `nsa-top preflight --node local --node user@B[:port] …`: the preflight on every node of a
// multi-node run, each over its own Host (one connection per node, src/remote/nodes.ts), printed per
// node. A node that cannot be reached is a FAIL of that node (the launch would fail there), never
// left out; the exit is 1 when any node has a FAIL.
import { preflightExit, type PreflightLine } from '../checks/preflight.js';
import { NodeSet } from '../remote/nodes.js';
import { sanitize } from '../sanitize.js';
import { CliError } from './errors.js';
import { nodeListOf } from './nodes.js';
import { hostSpecOf } from './options.js';
import { formatLines, preflight, type Args } from './preflight.js';

export interface NodePreflight {
  host: string;
  reachable: boolean;
  error: string | null;
  lines: PreflightLine[];
  exitCode: number;
}

/** The line a node out of reach gets in place of its checks. */
export function unreachableLine(label: string, why: string): PreflightLine {
  return {
    check: 'node',
    status: 'FAIL',
    text: `node ${label} unreachable: ${why}`,
    fix: 'check the address, that its sshd runs, and the key (-i); nothing can be launched there',
  };
}

export async function preflightNodes(a: Args): Promise<number> {
  if (a.host) throw new CliError('preflight: --host and --node: name each machine with --node (local is this one)', 2);
  const names = await nodeListOf(a);
  let set: NodeSet;
  try {
    const { host: _h, ...spec } = hostSpecOf(a);
    set = await NodeSet.open(names, { spec });
  } catch (e) {
    throw new CliError(`preflight: ${(e as Error).message.split('\n')[0]}`, 2);
  }
  try {
    const results = await Promise.all(
      set.nodes.map(async (n): Promise<NodePreflight> => {
        if (!n.host) {
          const lines = [unreachableLine(n.label, n.error || 'not connected')];
          return { host: n.label, reachable: false, error: n.error, lines, exitCode: 1 };
        }
        try {
          const lines = await preflight(n.host, a);
          return { host: n.label, reachable: true, error: null, lines, exitCode: preflightExit(lines) };
        } catch (e) {
          if (e instanceof CliError) throw e; // bad input (unknown profile): the same on every node
          const why = (e as Error).message.split('\n')[0]!;
          return { host: n.label, reachable: false, error: why, lines: [unreachableLine(n.label, why)], exitCode: 1 };
        }
      }),
    );
    const exitCode = results.some((r) => r.exitCode !== 0) ? 1 : 0;
    if (a.json) process.stdout.write(JSON.stringify({ nodes: results, exitCode }, null, 2) + '\n');
    else {
      const parts = results.map((r) => formatLines(`node ${sanitize(r.host)}`, a.profile ?? null, r.lines));
      const bad = results.filter((r) => r.exitCode !== 0).map((r) => sanitize(r.host));
      parts.push(
        bad.length
          ? `${bad.length} of ${results.length} nodes not ready: ${bad.join(', ')}\n`
          : `all ${results.length} nodes ready\n`,
      );
      process.stdout.write(parts.join('\n'));
    }
    return exitCode;
  } finally {
    await set.close();
  }
}
