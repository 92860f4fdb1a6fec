// `o` in the cockpit: a log or a stack dump in the operator's $PAGER (default `less -R`), with the
// cockpit suspended: it leaves the alternate screen and raw mode, the pager has the terminal (the
// event loop waits on it: nothing paints, no key is read), then the cockpit comes back and redraws.
//
// Over --host the pager reads a private local copy (mode 0600 in a fresh 0700 temp dir, removed when
// the pager exits) of the file's last MAX_COPY bytes, read through the Host like everything else:
// no second SSH session, no `ssh -t` with a remote shell command line to quote, no pager on the
// training box. A local file is opened where it is (the pager only reads it).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Host } from '../remote/host.js';
import type { PagerFn } from '../ui/logkeys.js';

/** the most of a remote file copied for the pager: its end (a log's newest lines) */
export const MAX_COPY = 64 << 20;

export interface PagerTerminal {
  /** give the terminal to the pager (alternate screen off, raw mode off) */
  suspend(): void;
  /** take it back (alternate screen, raw mode, full repaint) */
  resume(): void;
}

/** The command the pager runs as: $PAGER through sh (it may carry arguments, as git reads it), else less -R. */
export function pagerCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.PAGER?.trim() || 'less -R';
}

export function makePager(host: Host, term: PagerTerminal): PagerFn {
  return async ({ path }) => {
    let file = path;
    let tmp: string | null = null;
    if (host.kind !== 'local') {
      const st = await host.stat(path);
      if (!st?.isFile) return `${path} is not there any more`;
      const data = await host.readRange(path, Math.max(0, st.size - MAX_COPY), st.size);
      tmp = mkdtempSync(join(tmpdir(), 'nsa-top-pager-'));
      file = join(tmp, basename(path));
      writeFileSync(file, data, { mode: 0o600, flag: 'wx' });
    }
    const cmd = pagerCommand();
    term.suspend();
    try {
      // the file is the script's $1, never part of the command line's text
      const r = spawnSync('/bin/sh', ['-c', `${cmd} "$1"`, 'nsa-top-pager', file], { stdio: 'inherit' });
      if (r.error) return `${cmd}: ${r.error.message}`;
      if (r.status === 127) return `the pager (${cmd}) was not found: set $PAGER`;
      return null;
    } finally {
      term.resume();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    }
  };
}
