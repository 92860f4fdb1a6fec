// Shared by `nsa-top halt | dump | stop`: argument parsing, the run dir, and one way of printing an
// action's outcome (a line for people, or --json for scripts) with a stable exit code:
//   0 done or under way (started), 1 failed or partial, 2 bad input, 3 refused (read-only included).
import type { ActionRecord } from '../trainer/control/types.js';
import { LocalHost } from '../remote/local/host.js';
import { resolveRunDir } from '../trainer/run/rundir.js';
import { CliError } from './errors.js';

export interface ControlArgs {
  runDir: string | undefined;
  json: boolean;
  readOnly: boolean;
  flags: Set<string>;
  values: Map<string, string>;
}

export function parseControlArgs(
  cmd: string,
  argv: string[],
  flags: string[],
  valued: string[] = [],
): ControlArgs | 'help' {
  const a: ControlArgs = { runDir: undefined, json: false, readOnly: false, flags: new Set(), values: new Map() };
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]!;
    if (x === '-h' || x === '--help') return 'help';
    if (x === '--json') a.json = true;
    else if (x === '--read-only') a.readOnly = true;
    else if (flags.includes(x)) a.flags.add(x);
    else if (valued.includes(x)) {
      const v = argv[++i];
      if (v === undefined) throw new CliError(`${cmd}: ${x} needs a value`, 2);
      a.values.set(x, v);
    } else if (x.startsWith('-')) throw new CliError(`${cmd}: unknown option ${x} (see nsa-top ${cmd} --help)`, 2);
    else if (a.runDir === undefined) a.runDir = x;
    else throw new CliError(`${cmd}: more than one RUN given: ${a.runDir}, ${x}`, 2);
  }
  return a;
}

export async function localRun(a: ControlArgs): Promise<{ host: LocalHost; runDir: string }> {
  const host = new LocalHost();
  return { host, runDir: await resolveRunDir(host, a.runDir, process.cwd()) };
}

export function exitCodeOf(result: ActionRecord['result']): number {
  return result === 'ok' || result === 'started' ? 0 : result === 'refused' ? 3 : 1;
}

/** Prints the outcome and returns the exit code. */
export function report(cmd: string, a: ControlArgs, rec: ActionRecord, extra: Record<string, unknown> = {}): number {
  const code = exitCodeOf(rec.result);
  if (a.json)
    process.stdout.write(
      `${JSON.stringify({ command: cmd, result: rec.result, exitCode: code, detail: rec.detail, action: rec.action, target: rec.target, ...extra }, null, 2)}\n`,
    );
  else (code === 0 ? process.stdout : process.stderr).write(`${cmd} ${rec.result}: ${rec.detail}\n`);
  return code;
}
