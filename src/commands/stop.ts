// `nsa-top stop RUN [--reason TEXT] [--json]` — the supervisor's stop escalation for scripts: .HALT,
// then SIGINT after the profile's halt_grace_s, SIGKILL sigint_grace_s later, carried out by the
// detached supervisor (this command returns at once). Without a live supervisor (a run started by
// hand, or one whose supervisor died) this command carries the same escalation in the foreground,
// as it does for a multi-node run (stopnodes.ts): the grace counts from the .HALT the ranks were given.
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import { stopRun } from '../trainer/launch/launch.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { NODE_OPTIONS, nodeListOf, openNodes } from './nodes.js';
import { stopNodes } from './stopnodes.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { CliError } from './errors.js';
import { hostRun, JSON_OPTION, report } from './control-cli.js';
import { refusedByState, reportRefusal } from './fit.js';

export const command = defineCommand({
  name: 'stop',
  positional: RUN_DIR_ARG,
  options: {
    reason: { type: 'string', value: 'TEXT', help: "why, for the action log (default 'nsa-top stop')" },
    'halt-grace': {
      type: 'number',
      min: 0,
      value: 'S',
      help: "s after .HALT before SIGINT when this command escalates (no live supervisor, or --node; default: the profile's stop.halt_grace_s, else 300)",
    },
    'sigint-grace': {
      type: 'number',
      min: 0,
      value: 'S',
      help: "s after SIGINT before SIGKILL when this command escalates (default: the profile's stop.sigint_grace_s, else 60)",
    },
    ...JSON_OPTION,
    ...HOST_OPTIONS,
    ...NODE_OPTIONS,
  },
  about: `Stops a supervised run the way docs/launch.md describes: the supervisor writes .HALT, waits the
profile's stop.halt_grace_s, then SIGINTs the ranks, and SIGKILLs them stop.sigint_grace_s later,
each step logged. Returns at once.
A run without a live supervisor (started by hand, or its supervisor died): this command carries the
same escalation itself, in the foreground: .HALT, then SIGINT to the ranks still running once .HALT
is --halt-grace old (a .HALT written long ago has had its grace: SIGINT goes at once), SIGKILL
--sigint-grace later, each rank checked (pid + start time) and each step logged. Exit 0 once every
rank has stopped; interrupted, it leaves .HALT and logs what it sent.
A multi-node run (--node for each node, or --nodes H1,H2; the first reads the run dir): this command
carries the escalation itself, in the foreground: the one .HALT, then SIGINT to the ranks still
running after --halt-grace, SIGKILL --sigint-grace later, each rank checked and signalled on its own
node (audited); a node out of reach is named. Exit 0 once every rank on every node has stopped.`,
  epilog:
    'Exit codes: 0 requested, 1 failed, 2 bad input, 3 refused (read-only; nothing to stop: the run is FINISHED, HALTED, EXITED or has no trainer).',
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const v = a.values;
  const nodeList = await nodeListOf(v);
  if (nodeList.length > 0) {
    if (v.host) throw new CliError("stop: --host and --node: name the run dir's machine as the first --node", 2);
    const nodes = await openNodes(nodeList, hostSpecOf(v));
    try {
      const host = nodes.primary.host!;
      const dirs = await resolveRunDirsAt(host, await resolveRunDir(host, a.positional, process.cwd()));
      return await stopNodes(host, dirs, nodes, {
        readOnly: v['read-only'] || readOnlyMode(),
        json: v.json,
        reason: v.reason ?? 'nsa-top stop',
        ...(v['halt-grace'] !== undefined ? { haltGraceS: v['halt-grace'] } : {}),
        ...(v['sigint-grace'] !== undefined ? { sigintGraceS: v['sigint-grace'] } : {}),
      });
    } finally {
      await nodes.set.close();
    }
  }
  const { host, runDir, dirs } = await hostRun(a.positional, a.values);
  try {
    const actor = await currentActor(host);
    const readOnly = a.values['read-only'] || readOnlyMode();
    const no = readOnly ? null : await refusedByState(host, runDir, 'stop');
    if (no) return reportRefusal('stop', a.values.json, { action: 'halt', runDir }, no);
    const reason = a.values.reason ?? 'nsa-top stop';
    const rec = await stopRun(host, runDir, actor, { readOnly, reason, escalating: !readOnly });
    // a live supervisor took it ('started', its profile's graces), or nothing was written: said as is
    if (rec.result !== 'ok' || readOnly) return report('stop', a.values.json, rec);
    // .HALT written here and no supervisor escalates it: this command does, in the foreground
    const spec = hostSpecOf(v);
    const nodes = await openNodes([spec.host && spec.host !== 'local' ? spec.host : 'local'], spec);
    try {
      return await stopNodes(nodes.primary.host!, dirs, nodes, {
        readOnly,
        json: v.json,
        reason,
        halted: rec,
        ...(v['halt-grace'] !== undefined ? { haltGraceS: v['halt-grace'] } : {}),
        ...(v['sigint-grace'] !== undefined ? { sigintGraceS: v['sigint-grace'] } : {}),
      });
    } finally {
      await nodes.set.close();
    }
  } finally {
    await host.close().catch(() => {});
  }
}
