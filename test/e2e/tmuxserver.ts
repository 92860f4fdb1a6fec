// An isolated tmux server for one test file: its own socket in its own temp dir, no config, the
// environment without the caller's tmux and CI variables, TZ fixed to UTC (times on screen are local).
// Also the pane reading every tmux test does: capture a pane, poll it until a check passes (failing
// with the check's last complaint and the pane), wait for a pane's program to end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface IsolatedTmux {
  /** the test's temp dir (the socket lives in it; removed by close) */
  tmp: string;
  /** the server's socket (for a client attached from a pty: `tmux -S sock attach-session`) */
  sock: string;
  env: Record<string, string>;
  /** why the test must skip (no tmux here), or false */
  skip: string | false;
  /** runs a tmux command on this server; throws with its stderr when it fails */
  tmux(...args: string[]): string;
  /** the pane's rows as tmux holds them (`-J`: a row the terminal wrapped comes back as one longer line) */
  capture(target: string, opts?: { join?: boolean }): string[];
  /** polls the pane every 100 ms until `check` returns null; fails with its last reason and the pane */
  until(what: string, target: string, check: (rows: string[]) => string | null, ms?: number): Promise<string[]>;
  /** waits until the pane's program has ended (the pane needs remain-on-exit on) */
  paneDead(target: string, what: string, ms?: number): Promise<void>;
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
  const tmux = (...args: string[]): string => {
    const r = spawnSync('tmux', ['-S', sock, '-f', '/dev/null', ...args], { encoding: 'utf8', env, timeout: 10_000 });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim()}`);
    return r.stdout;
  };
  const capture = (target: string, opts: { join?: boolean } = {}): string[] =>
    tmux('capture-pane', '-p', ...(opts.join ? ['-J'] : []), '-t', target)
      .replace(/\n$/, '')
      .split('\n');
  return {
    tmp,
    sock,
    env,
    skip: v.error || v.status !== 0 ? `tmux is not installed: ${what} needs a real tmux` : false,
    tmux,
    capture,
    async until(what, target, check, ms = 30_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const rows = capture(target);
        const why = check(rows);
        if (why === null) return rows;
        if (Date.now() > deadline) assert.fail(`${what}: ${why}\n--- pane ---\n${rows.join('\n')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async paneDead(target, what, ms = 10_000) {
      const deadline = Date.now() + ms;
      while (tmux('display-message', '-p', '-t', target, '#{pane_dead}').trim() !== '1') {
        if (Date.now() > deadline) assert.fail(`the program in ${target} did not end on ${what}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    close() {
      // kill-server on a socket no session ever used just fails: harmless
      spawnSync('tmux', ['-S', sock, 'kill-server'], { env, timeout: 10_000 });
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
