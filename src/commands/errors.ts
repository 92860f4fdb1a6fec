import { InputError } from '../errors.js';

/** An error the CLI prints as one line and turns into an exit code (2: bad input / cannot judge). */
export class CliError extends InputError {}

/** Runs `f`; any error it throws becomes a one-line CliError prefixed with the command (exit 2). */
export function orCliError<T>(cmd: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new CliError(`${cmd}: ${(e as Error).message}`, 2);
  }
}
