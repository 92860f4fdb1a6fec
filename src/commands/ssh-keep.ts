// `nsa-top ssh-keep` — internal: the small detached process that keeps a --host command's SSH
// connection (and one warm session) for the next command within NSA_TOP_SSH_KEEP seconds
// (src/remote/ssh/keep.ts, keeper.ts). Started by a --host command as it closes; what it keeps
// comes from the environment (no secret: the target, its identity files' paths, the socket).
import { KEEP_SPEC_ENV, type KeepSpec } from '../remote/ssh/keep.js';
import { runKeeper } from '../remote/ssh/keeper.js';
import { defineCommand, parseCommand } from './args.js';
import { CliError } from './errors.js';

export const command = defineCommand({
  name: 'ssh-keep',
  options: {},
  about: `(internal; started detached by a --host command; what it keeps from ${KEEP_SPEC_ENV})`,
});

export async function run(argv: string[]): Promise<number> {
  if (!parseCommand(command, argv)) return 0;
  const raw = process.env[KEEP_SPEC_ENV];
  if (!raw) throw new CliError(`ssh-keep: ${KEEP_SPEC_ENV} is not set (this command is started by a --host command)`);
  delete process.env[KEEP_SPEC_ENV];
  let spec: KeepSpec;
  try {
    spec = JSON.parse(raw) as KeepSpec;
  } catch {
    throw new CliError(`ssh-keep: ${KEEP_SPEC_ENV} is not JSON`);
  }
  if (!spec?.target?.hostName || typeof spec.socket !== 'string' || !(spec.idleS > 0))
    throw new CliError(`ssh-keep: ${KEEP_SPEC_ENV} lacks a target, a socket or an idle window`);
  return runKeeper(spec);
}
