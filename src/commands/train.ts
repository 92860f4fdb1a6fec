// `nsa-top train`: the reference NSA trainer (src/trainer/reference). This module only wires the CLI
// to it; the trainer itself never imports cockpit code.
import { CliError } from './errors.js';
import { PACKAGE_ROOT, selfCommand } from '../self.js';
import { runTrain, TrainInputError } from '../trainer/reference/main.js';

export async function run(argv: string[]): Promise<number> {
  try {
    const code = await runTrain(argv, { selfCommand: selfCommand(), packageRoot: PACKAGE_ROOT });
    // Ranks and the launcher hold IPC channels and signal handlers; leave deterministically.
    process.exit(code);
  } catch (err) {
    if (err instanceof TrainInputError) throw new CliError(err.message, err.exitCode);
    throw err;
  }
}
