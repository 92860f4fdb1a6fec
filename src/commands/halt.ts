// `nsa-top halt RUN [--after-checkpoint] [--cancel] [--json]` — for scripts, through the same audited
// path as the cockpit's h. Plain: write .HALT now. --after-checkpoint: hand a durable request to a
// detached owner (the run's supervisor, else `nsa-top agent`) and return at once; it writes .HALT
// after the next complete checkpoint written from now on, whether or not anyone is watching.
// --cancel: cancel that request (too late once .HALT is written: it says so).
import { currentActor, readOnlyMode, requestHalt } from '../trainer/control/actions.js';
import { cancelRequest, submitHaltAfterCheckpoint } from '../trainer/control/requests.js';
import type { Host } from '../remote/host.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { NODE_OPTIONS, nodeListOf, openNodes } from './nodes.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { hostRun, JSON_OPTION, report } from './control-cli.js';
import { CliError } from './errors.js';
import { refusedByState, reportRefusal } from './fit.js';

export const command = defineCommand({
  name: 'halt',
  positional: RUN_DIR_ARG,
  options: {
    'after-checkpoint': {
      type: 'boolean',
      help: `write .HALT once a complete checkpoint written after now is there. Returns at
once: the request is carried by the run's supervisor, or by a detached
nsa-top agent, and outlives this shell and the SSH session. Any cockpit shows it.`,
    },
    cancel: { type: 'boolean', help: 'cancel the pending request (refused once its .HALT is written)' },
    ...JSON_OPTION,
    ...HOST_OPTIONS,
    ...NODE_OPTIONS,
  },
  about: `Plain: write <out_dir>/.HALT now ("halt: manual_stop USER"): the ranks stop at their next step.
The nsa-vibe trainer writes NO checkpoint on HALT.
A multi-node run (--node for each node, or --nodes H1,H2): the one .HALT is written in the run dir on
the first node, where every rank polls it when the nodes share the run dir; the run's state (what
may be halted) is judged with every node's ranks.`,
  epilog: `Exit codes: 0 done or under way, 1 failed, 2 bad input, 3 refused (read-only; nothing to halt: the run is
FINISHED, HALTED, EXITED or has no trainer; --after-checkpoint while the run is STALLED or already
halting, when no checkpoint can come; too late) — the cockpit's h refuses the same, in the same words.
Every step is logged in <out_dir>/.nsa-top/actions.jsonl. A halt is never blocked by its log: when
the record cannot be kept (a linked .nsa-top, a full disk), .HALT is still written, exit 0, and the
result says "NOT logged: why" (also on stderr). Only read-only refuses a halt.`,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const v = a.values;
  if (v['after-checkpoint'] && v.cancel)
    throw new CliError('halt: --after-checkpoint and --cancel do not go together', 2);
  const nodeList = await nodeListOf(v);
  if (nodeList.length > 0) {
    if (v.host) throw new CliError("halt: --host and --node: name the run dir's machine as the first --node", 2);
    const nodes = await openNodes(nodeList, hostSpecOf(v));
    try {
      // the run dir on the first node: the action log and the one .HALT are there
      const host = nodes.primary.host!;
      const dirs = await resolveRunDirsAt(host, await resolveRunDir(host, a.positional, process.cwd()));
      return await haltOn(host, dirs, v, nodes);
    } finally {
      await nodes.set.close();
    }
  }
  // the run is resolved once (hostRun: this machine, or --host) and handed down: the audit and
  // .HALT go where it says
  const { host, dirs } = await hostRun(a.positional, v);
  try {
    return await haltOn(host, dirs, v);
  } finally {
    await host.close().catch(() => {});
  }
}

async function haltOn(
  host: Host,
  dirs: RunDirs,
  v: { 'after-checkpoint': boolean; cancel: boolean; json: boolean; 'read-only': boolean },
  nodes: NodeProcesses | null = null,
): Promise<number> {
  const actor = await currentActor(host);
  const readOnly = v['read-only'] || readOnlyMode();
  if (v.cancel) {
    const r = await cancelRequest(host, dirs, actor, { readOnly });
    return report('halt --cancel', v.json, r.record, { request: r.request });
  }
  // what the cockpit refuses (nothing to halt; no checkpoint coming while STALLED), with its words
  if (!readOnly) {
    const action = v['after-checkpoint'] ? 'haltAfterCheckpoint' : 'haltNow';
    const no = await refusedByState(host, dirs, action, nodes ? { nodes } : {});
    if (no) {
      const cmd = v['after-checkpoint'] ? 'halt --after-checkpoint' : 'halt';
      const kind = v['after-checkpoint'] ? 'halt-after-checkpoint' : 'halt';
      return reportRefusal(cmd, v.json, { action: kind, runDir: dirs.runDir }, no);
    }
  }
  if (v['after-checkpoint']) {
    const r = await submitHaltAfterCheckpoint(host, dirs, actor, { readOnly });
    return report('halt --after-checkpoint', v.json, r.record, { request: r.request });
  }
  return report('halt', v.json, await requestHalt(host, dirs, 'now', actor, { readOnly }));
}
