// Quoting for POSIX shells. Every path or argument that reaches a remote shell goes through
// shQuote: a run dir named `a; rm -rf ~` is a name, not a command.

/** One word, single-quoted for sh/bash/dash/zsh/ksh: `'` becomes `'\''`. */
export function shQuote(s: string): string {
  if (s.includes('\0')) throw new Error('cannot pass a NUL byte to a remote shell');
  if (s !== '' && /^[A-Za-z0-9_@%+:,./-]+$/.test(s)) return s;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** argv → one shell command line, every element quoted. */
export function shJoin(argv: string[]): string {
  return argv.map(shQuote).join(' ');
}

/** NAME=value for `env`, with the name validated (it is not quoted by the shell). */
export function envAssign(name: string, value: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw new Error(`invalid environment variable name: ${JSON.stringify(name)}`);
  return shQuote(`${name}=${value}`);
}
