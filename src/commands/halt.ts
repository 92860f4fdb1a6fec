// `nsa-top halt RUN [--after-checkpoint] [--cancel] [--json]` — for scripts, through the same audited
// path as the cockpit's h. Plain: write .HALT now. --after-checkpoint: hand a durable request to a
// detached owner (the run's supervisor, else `nsa-top agent`) and return at once; it writes .HALT
// after the next complete checkpoint written from now on, whether or not anyone is watching.
// --cancel: cancel that request (too late once .HALT is written: it says so).
import { currentActor, readOnlyMode, requestHalt } from '../trainer/control/actions.js';
import { cancelRequest, submitHaltAfterCheckpoint } from '../trainer/control/requests.js';
import { localRun, parseControlArgs, report } from './control-cli.js';
import { CliError } from './errors.js';

const HELP = `usage: nsa-top halt RUN [--after-checkpoint | --cancel] [--json] [--read-only]

  (plain)             write <out_dir>/.HALT now ("halt: manual_stop USER"): the ranks stop at their
                      next step. The nsa-vibe trainer writes NO checkpoint on HALT.
  --after-checkpoint  write .HALT once a complete checkpoint written after now is there. Returns at
                      once: the request is carried by the run's supervisor, or by a detached
                      nsa-top agent, and outlives this shell and the SSH session. Any cockpit shows it.
  --cancel            cancel the pending request (refused once its .HALT is written)
  --json              print the outcome as JSON
Exit codes: 0 done or under way, 1 failed, 2 bad input, 3 refused (read-only, nothing to halt, too late).
Every step is logged in <out_dir>/.nsa-top/actions.jsonl.
`;

export async function run(argv: string[]): Promise<number> {
  const a = parseControlArgs('halt', argv, ['--after-checkpoint', '--cancel']);
  if (a === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if (a.flags.has('--after-checkpoint') && a.flags.has('--cancel'))
    throw new CliError('halt: --after-checkpoint and --cancel do not go together', 2);
  const { host, runDir } = await localRun(a);
  const actor = await currentActor(host);
  const readOnly = a.readOnly || readOnlyMode();
  if (a.flags.has('--cancel')) {
    const r = await cancelRequest(host, runDir, actor, { readOnly });
    return report('halt --cancel', a, r.record, { request: r.request });
  }
  if (a.flags.has('--after-checkpoint')) {
    const r = await submitHaltAfterCheckpoint(host, runDir, actor, { readOnly });
    return report('halt --after-checkpoint', a, r.record, { request: r.request });
  }
  return report('halt', a, await requestHalt(host, runDir, 'now', actor, { readOnly }));
}
