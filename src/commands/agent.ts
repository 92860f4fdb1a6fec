// `nsa-top agent` — internal: the small detached process that carries a run's durable control
// requests (halt after the next checkpoint) when no supervisor does. Started by `nsa-top halt
// --after-checkpoint` and the cockpit in its own session; its out_dir comes from the environment.
import { resolve } from 'node:path';
import { LocalHost } from '../remote/local/host.js';
import { AGENT_ENV, runAgent } from '../trainer/control/requests.js';
import { CliError } from './errors.js';

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(
      `usage: nsa-top agent   (internal; started detached by nsa-top halt --after-checkpoint; out_dir from ${AGENT_ENV})\n`,
    );
    return 0;
  }
  if (argv.length > 0) throw new CliError(`agent: unexpected argument ${argv[0]}`);
  const dir = process.env[AGENT_ENV];
  if (!dir)
    throw new CliError(`agent: ${AGENT_ENV} is not set (this command is started by nsa-top halt --after-checkpoint)`);
  delete process.env[AGENT_ENV];
  const code = await runAgent(new LocalHost(), resolve(dir));
  setTimeout(() => process.exit(code), 100).unref();
  return code;
}
