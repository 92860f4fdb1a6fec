// `nsa-top attach RUN_DIR` — open the cockpit on a supervised run (launcher dir or out_dir).
import { LocalHost } from '../remote/local/host.js';
import { verifyProcess } from '../remote/procs.js';
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import { readSupervisorState, relaunch } from '../trainer/launch/launch.js';
import { CliError } from './errors.js';

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === '-h' || argv[0] === '--help') {
    process.stdout.write(
      'usage: nsa-top attach RUN_DIR [cockpit options]\n\nOpens the cockpit on a run started by nsa-top launch.\n',
    );
    return 0;
  }
  const [dir, ...rest] = argv;
  if (!dir || dir.startsWith('-'))
    throw new CliError('attach: RUN_DIR missing (artifacts/train_runs/<profile>_<time>)');
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
      const rec = await relaunch(host, dir, await currentActor(host), { removeStaleHalt: false });
      process.stderr.write(
        `nsa-top: ${rec.result === 'ok' ? rec.detail : `could not re-adopt the trainer: ${rec.detail}`}\n`,
      );
    }
  }
  const cockpit = await import('./cockpit.js');
  return cockpit.run([dir, ...rest]);
}
