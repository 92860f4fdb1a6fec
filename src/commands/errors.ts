/** An error the CLI prints as one line and turns into an exit code (2: bad input / cannot judge). */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 2) {
    super(message);
  }
}
