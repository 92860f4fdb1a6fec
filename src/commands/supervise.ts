// `nsa-top supervise RUN_DIR [--resume]` — internal: the detached supervisor process that
// `nsa-top launch` and `nsa-top relaunch` start. See src/trainer/launch/supervisor.ts.
import { resolve } from 'node:path';
import { SUPERVISE_ENV } from '../trainer/launch/state.js';
import { runSupervisor } from '../trainer/launch/supervisor.js';
import { CliError } from './errors.js';

export async function run(argv: string[]): Promise<number> {
  let dir: string | null = null;
  let resume = false;
  for (const a of argv) {
    if (a === '--resume') resume = true;
    else if (a === '-h' || a === '--help') {
      process.stdout.write(
        'usage: nsa-top supervise [RUN_DIR] [--resume]   (internal; started by nsa-top launch/relaunch, RUN_DIR from NSA_TOP_SUPERVISE_RUN_DIR)\n',
      );
      return 0;
    } else if (a.startsWith('-')) throw new CliError(`supervise: unknown option ${a}`);
    else if (dir === null) dir = a;
    else throw new CliError(`supervise: unexpected argument ${a}`);
  }
  dir ??= process.env[SUPERVISE_ENV] || null;
  if (!dir)
    throw new CliError(
      `supervise: RUN_DIR missing (this command is started by nsa-top launch; it reads ${SUPERVISE_ENV})`,
    );
  delete process.env[SUPERVISE_ENV]; // not inherited by the trainer
  const code = await runSupervisor(resolve(dir), { resume });
  // the trainer's exit watcher must not keep a finished supervisor alive
  setTimeout(() => process.exit(code), 200).unref();
  return code;
}
