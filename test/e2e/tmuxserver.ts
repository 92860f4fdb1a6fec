// An isolated tmux server for one test file: its own socket in its own temp dir, no config, the
// environment without the caller's tmux and CI variables, TZ fixed to UTC (times on screen are local).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface IsolatedTmux {
  /** the test's temp dir (the socket lives in it; removed by close) */
  tmp: string;
  env: Record<string, string>;
  /** why the test must skip (no tmux here), or false */
  skip: string | false;
  /** runs a tmux command on this server; throws with its stderr when it fails */
  tmux(...args: string[]): string;
  /** kills the server (if a session was ever made) and removes the temp dir */
  close(): void;
}

export function isolatedTmux(prefix: string, what: string): IsolatedTmux {
  const v = spawnSync('tmux', ['-V'], { encoding: 'utf8', timeout: 5000 });
  const env: Record<string, string> = { TZ: 'UTC' };
  for (const [k, val] of Object.entries(process.env))
    if (val !== undefined && !['CI', 'NO_COLOR', 'TMUX', 'TMUX_PANE', 'TZ'].includes(k)) env[k] = val;
  env.TERM = 'xterm-256color';
  const tmp = mkdtempSync(join(tmpdir(), prefix));
  const sock = join(tmp, 'tmux.sock');
  return {
    tmp,
    env,
    skip: v.error || v.status !== 0 ? `tmux is not installed: ${what} needs a real tmux` : false,
    tmux(...args) {
      const r = spawnSync('tmux', ['-S', sock, '-f', '/dev/null', ...args], { encoding: 'utf8', env, timeout: 10_000 });
      if (r.error) throw r.error;
      if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim()}`);
      return r.stdout;
    },
    close() {
      // kill-server on a socket no session ever used just fails: harmless
      spawnSync('tmux', ['-S', sock, 'kill-server'], { env, timeout: 10_000 });
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
