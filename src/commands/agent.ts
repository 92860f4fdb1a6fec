// `nsa-top agent` — internal: the small detached process that carries a run's durable control
// requests (halt after the next checkpoint) when no supervisor does. Started by `nsa-top halt
// --after-checkpoint` and the cockpit in its own session; its out_dir comes from the environment.
import { resolve } from 'node:path';
import { LocalHost } from '../remote/local/host.js';
import { AGENT_ENV, runAgent } from '../trainer/control/requests.js';
import { agentMayClaim } from '../checks/carry.js';
import { defineCommand, parseCommand } from './args.js';
import { CliError } from './errors.js';

export const command = defineCommand({
  name: 'agent',
  options: {},
  about: `(internal; started detached by nsa-top halt --after-checkpoint; out_dir from ${AGENT_ENV})`,
});

export async function run(argv: string[]): Promise<number> {
  if (!parseCommand(command, argv)) return 0;
  const dir = process.env[AGENT_ENV];
  if (!dir)
    throw new CliError(`agent: ${AGENT_ENV} is not set (this command is started by nsa-top halt --after-checkpoint)`);
  delete process.env[AGENT_ENV];
  // the claim rule is the judge's (src/checks/carry.ts): never a request a live supervisor of the run left
  const code = await runAgent(new LocalHost(), resolve(dir), { mayClaim: agentMayClaim });
  setTimeout(() => process.exit(code), 100).unref();
  return code;
}
