// `nsa-top attach RUN_DIR [cockpit options]` — open the cockpit on a supervised run (launcher dir or out_dir).
import { LocalHost } from '../remote/local/host.js';
import { verifyProcess } from '../remote/procs.js';
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import { readSupervisorState, relaunch } from '../trainer/launch/launch.js';
import { defineCommand, parseCommand } from './args.js';
import { cockpitArgs, COCKPIT_KEYS, COCKPIT_OPTIONS } from './options.js';
import { CliError } from './errors.js';
import { judgeAdoption } from '../checks/preflight.js';
import { relaunchRequestFate } from '../checks/carry.js';

export const command = defineCommand({
  name: 'attach',
  positional: {
    name: 'RUN_DIR',
    required: true,
    help: 'a run started by nsa-top launch (artifacts/train_runs/<profile>_<time>)',
  },
  options: COCKPIT_OPTIONS,
  about: 'Opens the cockpit on a run started by nsa-top launch (re-adopting its trainer if the supervisor died).',
  epilog: COCKPIT_KEYS,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const dir = a.positional;
  const host = new LocalHost();
  if (!(await host.stat(dir))?.isDir) throw new CliError(`attach: ${dir}: no such run directory`);
  const st = await readSupervisorState(host, dir);
  if (!st)
    process.stderr.write(
      `nsa-top: ${dir} has no supervisor state (not started by nsa-top launch?); opening the cockpit anyway\n`,
    );
  else if (st.supervisorGone && st.child?.startTime && (await verifyProcess(host, st.child).catch(() => false))) {
    // the supervisor died but its trainer runs on: a new supervisor adopts it (never a second copy)
    if (readOnlyMode()) process.stderr.write(`nsa-top: ${st.note} (read-only: not re-adopted)\n`);
    else {
      const rec = await relaunch(host, dir, await currentActor(host), {
        removeStaleHalt: false,
        judgeAdoption,
        judgeRequest: relaunchRequestFate,
      });
      process.stderr.write(
        `nsa-top: ${rec.result === 'ok' ? rec.detail : `could not re-adopt the trainer: ${rec.detail}`}\n`,
      );
    }
  }
  const cockpit = await import('./cockpit.js');
  return cockpit.runCockpit(cockpitArgs(dir, a.values));
}
