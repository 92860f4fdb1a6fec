// `nsa-top supervise RUN_DIR [--resume]` — internal: the detached supervisor process that
// `nsa-top launch` and `nsa-top relaunch` start. See src/trainer/supervisor/supervisor.ts.
import { resolve } from 'node:path';
import { runSupervisor } from '../trainer/supervisor/supervisor.js';
import { CliError } from './errors.js';

export async function run(argv: string[]): Promise<number> {
  let dir: string | null = null;
  let resume = false;
  for (const a of argv) {
    if (a === '--resume') resume = true;
    else if (a === '-h' || a === '--help') {
      process.stdout.write('usage: nsa-top supervise RUN_DIR [--resume]   (internal; started by nsa-top launch/relaunch)\n');
      return 0;
    } else if (a.startsWith('-')) throw new CliError(`supervise: unknown option ${a}`);
    else if (dir === null) dir = a;
    else throw new CliError(`supervise: unexpected argument ${a}`);
  }
  if (!dir) throw new CliError('supervise: RUN_DIR missing (this command is started by nsa-top launch)');
  const code = await runSupervisor(resolve(dir), { resume });
  // the pty and its reader must not keep a finished supervisor alive
  setTimeout(() => process.exit(code), 200).unref();
  return code;
}
