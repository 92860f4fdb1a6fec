// `nsa-top stop RUN [--reason TEXT] [--json]` — the supervisor's stop escalation for scripts: .HALT,
// then SIGINT after the profile's halt_grace_s, SIGKILL sigint_grace_s later, carried out by the
// detached supervisor (this command returns at once). Without a live supervisor: .HALT only, and
// it says so.
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import { stopRun } from '../trainer/launch/launch.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, RUN_DIR_ARG } from './options.js';
import { hostRun, JSON_OPTION, report } from './control-cli.js';
import { refusedByState, reportRefusal } from './fit.js';

export const command = defineCommand({
  name: 'stop',
  positional: RUN_DIR_ARG,
  options: {
    reason: { type: 'string', value: 'TEXT', help: "why, for the action log (default 'nsa-top stop')" },
    ...JSON_OPTION,
    ...HOST_OPTIONS,
  },
  about: `Stops a supervised run the way docs/launch.md describes: the supervisor writes .HALT, waits the
profile's stop.halt_grace_s, then SIGINTs the ranks, and SIGKILLs them stop.sigint_grace_s later,
each step logged. Returns at once. A run without a live supervisor gets .HALT only.`,
  epilog:
    'Exit codes: 0 requested, 1 failed, 2 bad input, 3 refused (read-only; nothing to stop: the run is FINISHED, HALTED, EXITED or has no trainer).',
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { host, runDir } = await hostRun(a.positional, a.values);
  try {
    const actor = await currentActor(host);
    const readOnly = a.values['read-only'] || readOnlyMode();
    const no = readOnly ? null : await refusedByState(host, runDir, 'stop');
    if (no) return reportRefusal('stop', a.values.json, { action: 'halt', runDir }, no);
    const rec = await stopRun(host, runDir, actor, {
      readOnly,
      reason: a.values.reason ?? 'nsa-top stop',
    });
    return report('stop', a.values.json, rec);
  } finally {
    await host.close().catch(() => {});
  }
}
