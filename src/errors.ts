// Errors the domain throws and every front end maps the same way: the CLI prints the message as
// one line and exits with `exitCode`; the cockpit shows it in a dialog. Below src/commands nothing
// knows about the CLI, so modules throw these rather than the command layer's CliError.

/** Bad input or a refused request (a missing run dir, an unknown profile, read-only mode): exit 2. */
export class InputError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}
