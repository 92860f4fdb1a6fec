// `nsa-top launch --profile P --node N1 --node N2 …`: a multi-node launch (src/trainer/launch/
// nodelaunch.ts), one connection per node (src/remote/nodes.ts), and what it prints per node.
import { LocalHost } from '../remote/local/host.js';
import { NodeSet } from '../remote/nodes.js';
import { sanitize } from '../sanitize.js';
import { launchNodes, relaunchNodes } from '../trainer/launch/nodelaunch.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { CliError } from './errors.js';
import { nodeListOf } from './nodes.js';

export async function launchOnNodes(
  v: {
    profile: string;
    profiles?: string;
    steps?: number;
    attach: boolean;
    node?: string[];
    nodes?: string;
    identity?: string;
    'accept-new-host-key': boolean;
  },
  extraArgs: string[],
): Promise<number> {
  if (v.attach) throw new CliError('launch: --attach with --node: attach with nsa-top RUN --node … once it is up', 2);
  const names = await nodeListOf(v);
  let set: NodeSet;
  try {
    set = await NodeSet.open(names, { spec: { identity: v.identity, acceptNewHostKey: v['accept-new-host-key'] } });
  } catch (e) {
    throw new CliError(`launch: ${(e as Error).message.split('\n')[0]}. Nothing was started on any node.`, 2);
  }
  try {
    const r = await launchNodes(
      new LocalHost(),
      set.nodes.map((n) => ({ label: n.label, host: n.host, error: n.error })),
      { profile: v.profile, profilesFile: v.profiles, cwd: process.cwd(), steps: v.steps, extraArgs },
    );
    const lines = [
      `launched profile ${v.profile} on ${r.nodes.length} nodes`,
      `  run dir     ${r.runDir}`,
      `  out dir     ${r.outDir}`,
      ...r.nodes.map(
        (n) =>
          `  node ${sanitize(n.label)} (node_rank ${n.nodeRank}): ${n.record.result !== 'ok' ? `FAILED: ${sanitize(n.record.detail)}` : n.stopped ? `supervisor pid ${n.supervisorPid} STOPPED (${n.stopped.result}): ${sanitize(n.stopped.detail)}` : `supervisor pid ${n.supervisorPid} (detached)`}\n    dir       ${n.dir}`,
      ),
      r.nodes.some((n) => n.stopped)
        ? `  the launch failed: the supervisors it had started were stopped (logged in each node's action log); nothing trains`
        : `  watch       nsa-top ${r.runDir} ${r.nodes.map((n) => `--node ${sanitize(n.label)}`).join(' ')}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    return r.nodes.every((n) => n.record.result === 'ok') ? 0 : 1;
  } finally {
    await set.close();
  }
}

/** `nsa-top relaunch RUN --node …`: every node again, from the one newest complete checkpoint. */
export async function relaunchOnNodes(
  dir: string,
  v: {
    node?: string[];
    nodes?: string;
    identity?: string;
    'accept-new-host-key': boolean;
    yes: boolean;
    steps?: number;
    'carry-requests': boolean;
    'remove-stale-halt': boolean;
  },
  allowCommand: string[],
): Promise<number> {
  if (v.steps !== undefined || v['carry-requests'])
    throw new CliError('relaunch --node: --steps and --carry-requests are for a one-machine run', 2);
  if (!v.yes) throw new CliError('relaunch --node: confirm with --yes (every node is started again)', 2);
  const names = await nodeListOf(v);
  let set: NodeSet;
  try {
    set = await NodeSet.open(names, { spec: { identity: v.identity, acceptNewHostKey: v['accept-new-host-key'] } });
  } catch (e) {
    throw new CliError(`relaunch: ${(e as Error).message.split('\n')[0]}. Nothing was started on any node.`, 2);
  }
  try {
    const primary = set.nodes[0]!.host;
    if (!primary)
      throw new CliError(
        `relaunch: node ${set.nodes[0]!.label}, which reads the run dir, unreachable: ${set.nodes[0]!.error}. Nothing was started on any node.`,
        1,
      );
    const dirs = await resolveRunDirsAt(primary, await resolveRunDir(primary, dir, process.cwd()));
    const r = await relaunchNodes(
      primary,
      set.nodes.map((n) => ({ label: n.label, host: n.host, error: n.error })),
      dirs,
      { removeStaleHalt: v['remove-stale-halt'], allowCommand },
    );
    const lines = [
      `relaunched ${r.runDir} on ${r.nodes.length} nodes`,
      `  ${r.pickWhy}`,
      ...r.nodes.map(
        (n) =>
          `  node ${sanitize(n.label)} (node_rank ${n.nodeRank}): ${n.record.result === 'ok' ? `supervisor pid ${n.supervisorPid} (detached)` : `FAILED: ${sanitize(n.record.detail)}`}`,
      ),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    return r.nodes.every((n) => n.record.result === 'ok') ? 0 : 1;
  } finally {
    await set.close();
  }
}
