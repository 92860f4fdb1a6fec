// `nsa-top supervise RUN_DIR [--resume]` — internal: the detached supervisor process that
// `nsa-top launch` and `nsa-top relaunch` start. See src/trainer/launch/supervisor.ts.
import { resolve } from 'node:path';
import { SUPERVISE_ENV } from '../trainer/launch/state.js';
import { runSupervisor } from '../trainer/launch/supervisor.js';
import { startHere } from '../trainer/launch/nodelaunch.js';
import { supervisorMayClaim } from '../checks/carry.js';
import { defineCommand, parseCommand } from './args.js';
import { CliError } from './errors.js';

export const command = defineCommand({
  name: 'supervise',
  positional: { name: 'RUN_DIR', help: `the run to supervise (default: ${SUPERVISE_ENV})` },
  options: {
    resume: { type: 'boolean', help: 'resume the trainer from its newest complete checkpoint' },
    start: {
      type: 'boolean',
      help: "(a multi-node launch, over each node's Host) make this node's launcher dir from the plan on stdin and start its supervisor detached; answers one JSON line",
    },
  },
  about: `(internal; started by nsa-top launch/relaunch, RUN_DIR from ${SUPERVISE_ENV})`,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  if (a.values.start) {
    const chunks: Buffer[] = [];
    for await (const c of process.stdin) chunks.push(c as Buffer);
    const r = await startHere(Buffer.concat(chunks).toString('utf8'));
    process.stdout.write(`${JSON.stringify(r)}\n`);
    return r.state && r.state !== 'failed' ? 0 : 1;
  }
  const dir = a.positional || process.env[SUPERVISE_ENV];
  if (!dir)
    throw new CliError(
      `supervise: RUN_DIR missing (this command is started by nsa-top launch; it reads ${SUPERVISE_ENV})`,
    );
  delete process.env[SUPERVISE_ENV]; // not inherited by the trainer
  const code = await runSupervisor(resolve(dir), { resume: a.values.resume, mayClaim: supervisorMayClaim });
  // the trainer's exit watcher must not keep a finished supervisor alive
  setTimeout(() => process.exit(code), 200).unref();
  return code;
}
