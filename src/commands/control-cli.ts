// Shared by `nsa-top halt | dump | stop`: their RUN and --json, the run dir, and one way of printing an
// action's outcome (a line for people, or --json for scripts) with a stable exit code:
//   0 done or under way (started), 1 failed or partial, 2 bad input, 3 refused (read-only included).
import type { ActionRecord } from '../trainer/control/types.js';
import { LocalHost } from '../remote/local/host.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import type { OptionSpec } from './args.js';
import type { Host } from '../remote/host.js';
import { hostSpecOf } from './options.js';
import { CliError } from './errors.js';

export const JSON_OPTION = {
  json: { type: 'boolean', help: 'print the outcome as JSON' },
} as const satisfies Record<string, OptionSpec>;

/** The host and the run, resolved once here at the edge (`dirs`: launcher dir, out_dir, supervised). */
export async function localRun(
  runDir: string | undefined,
): Promise<{ host: LocalHost; runDir: string; dirs: RunDirs }> {
  const host = new LocalHost();
  const dir = await resolveRunDir(host, runDir, process.cwd());
  return { host, runDir: dir, dirs: await resolveRunDirsAt(host, dir) };
}

/**
 * The machine (`--host user@box[:port]`, `-i`, `--accept-new-host-key`; else this one) and the run
 * on it, resolved once. The caller closes `host` when done.
 */
export async function hostRun(
  runDir: string | undefined,
  v: { host?: string; identity?: string; 'accept-new-host-key': boolean },
): Promise<{ host: Host; runDir: string; dirs: RunDirs }> {
  const spec = hostSpecOf(v);
  if (!spec.host || spec.host === 'local') return localRun(runDir);
  let host: Host;
  try {
    // loaded only for --host: the SSH stack costs what a local action does not need
    host = await (await import('../remote/index.js')).openHost(spec);
  } catch (e) {
    throw new CliError(`--host ${spec.host}: ${(e as Error).message}`, 2);
  }
  try {
    const dir = await resolveRunDir(host, runDir, process.cwd());
    return { host, runDir: dir, dirs: await resolveRunDirsAt(host, dir) };
  } catch (e) {
    await host.close().catch(() => {});
    throw e;
  }
}

export function exitCodeOf(result: ActionRecord['result']): number {
  return result === 'ok' || result === 'started' ? 0 : result === 'refused' ? 3 : 1;
}

/** Prints the outcome and returns the exit code. */
export function report(
  cmd: string,
  json: boolean,
  rec: Pick<ActionRecord, 'result' | 'detail' | 'action' | 'target' | 'notLogged'>,
  extra: Record<string, unknown> = {},
): number {
  const code = exitCodeOf(rec.result);
  if (json)
    process.stdout.write(
      `${JSON.stringify({ command: cmd, result: rec.result, exitCode: code, detail: rec.detail, action: rec.action, target: rec.target, ...(rec.notLogged !== undefined ? { notLogged: rec.notLogged } : {}), ...extra }, null, 2)}\n`,
    );
  else (code === 0 ? process.stdout : process.stderr).write(`${cmd} ${rec.result}: ${rec.detail}\n`);
  // taken but not in the action log (a safety action fails open): said where a script's log keeps it
  if (rec.notLogged !== undefined && (json || code === 0))
    process.stderr.write(`nsa-top ${cmd}: ${rec.result}, NOT logged: ${rec.notLogged}\n`);
  return code;
}
