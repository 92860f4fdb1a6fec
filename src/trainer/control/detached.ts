// The helpers nsa-top leaves running on the training box (the supervisor, `nsa-top agent`) start
// the same way: this nsa-top again, in its own session (setsid) so a hangup of ours never reaches
// it, its output appended to its log among nsa-top's own files, and the caller free to go.
import { childProcess } from '../../builtins.js';
import { closeSync } from 'node:fs';
import { selfCommand } from '../../self.js';
import { openOwnAppendSync } from './ownfiles.js';

/** Starts `nsa-top ...args` detached, stdout and stderr to `<root>/<log>`; its pid, or throws. */
export function spawnSelfDetached(
  args: string[],
  o: { root: string; log: string; cwd: string; env: Record<string, string>; what: string },
): number {
  const [node, ...pre] = selfCommand();
  const fd = openOwnAppendSync(o.root, o.log);
  try {
    // What the helper works on travels in the environment, not argv: process discovery
    // (src/remote/procs) matches processes whose argv names the run, and a helper is not a rank.
    const env: NodeJS.ProcessEnv = { ...process.env, ...o.env };
    delete env.NSA_TOP_RUN_DIR;
    const child = childProcess().spawn(node!, [...pre, ...args], {
      detached: true,
      stdio: ['ignore', fd, fd],
      cwd: o.cwd,
      env,
    });
    child.on('error', () => {});
    child.unref();
    if (!child.pid) throw new Error(`could not start ${o.what}`);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}
