// A log you can read (issue 20), at the keyboard in a real tmux pane of 80×24: the help scrolls to
// `q`; the Log scrolled back holds still while its file grows (a writer appends to train.log the
// whole time) and says how far behind live it is; `/` finds and highlights; `o` runs $PAGER (a small
// script that records its argument) with the cockpit suspended, and the cockpit comes back. One
// cockpit for every step. Keys go one key per send (key bursts are issue 20's other slice).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN } from './pty.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single', import.meta.url));
const SESSION = 'logread';

const tmuxVersion = spawnSync('tmux', ['-V'], { encoding: 'utf8', timeout: 5000 });
const noTmux =
  tmuxVersion.error || tmuxVersion.status !== 0
    ? 'tmux is not installed: the log-reading test needs a real tmux'
    : false;

const ENV: Record<string, string> = {};
for (const [k, v] of Object.entries(process.env))
  if (v !== undefined && !['CI', 'NO_COLOR', 'TMUX', 'TMUX_PANE', 'PAGER'].includes(k)) ENV[k] = v;
ENV.TERM = 'xterm-256color';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-top-logread-'));
const SOCK = join(tmp, 'tmux.sock');
let serverStarted = false;
let writer: NodeJS.Timeout | null = null;

function tmux(...args: string[]): string {
  const r = spawnSync('tmux', ['-S', SOCK, '-f', '/dev/null', ...args], {
    encoding: 'utf8',
    env: ENV,
    timeout: 10_000,
  });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: exit ${r.status}: ${r.stderr.trim()}`);
  return r.stdout;
}

function cleanup(): void {
  if (writer) clearInterval(writer);
  writer = null;
  if (serverStarted) {
    serverStarted = false;
    spawnSync('tmux', ['-S', SOCK, 'kill-server'], { env: ENV, timeout: 10_000 });
  }
  rmSync(tmp, { recursive: true, force: true });
}
after(cleanup);

const screen = (): string[] => tmux('capture-pane', '-p', '-t', SESSION).replace(/\n$/, '').split('\n');
/** with the styles: a focused panel's title is bold inverse */
const styled = (): string => tmux('capture-pane', '-e', '-p', '-t', SESSION);
const key = (...k: string[]) => tmux('send-keys', '-t', SESSION, ...k);
const text = (s: string) => tmux('send-keys', '-t', SESSION, '-l', s);

async function until(what: string, check: () => string | null, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let why: string | null = 'never checked';
  for (;;) {
    why = check();
    if (why === null) return;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 120));
  }
  assert.fail(`${what}: ${why}\n--- pane ---\n${screen().join('\n')}`);
}

/** the Log's title row and its body rows (the compact layout shows it as a tab of the lower right slot) */
function logRows(): { title: string; body: string[] } | null {
  const rows = screen();
  const i = rows.findIndex((r) => /┌ Log⁶ /.test(r));
  if (i < 0) return null;
  const body: string[] = [];
  for (let j = i + 1; j < rows.length && !rows[j]!.includes('└'); j++) body.push(rows[j]!);
  return { title: rows[i]!, body };
}

/** the focused panel: its title is drawn bold inverse */
const focused = (): string | null => /\x1b\[(?:\d+;)*7(?:;\d+)*m (\w+)[⁰¹²³⁴⁵⁶⁷⁸⁹]? /.exec(styled())?.[1] ?? null;

const line = (i: number) => `[train] step ${i} | loss ${(5 - i / 1e4).toFixed(4)} | mark-${i}`;

test(
  'reading the log at 80×24: help scrolls to q, a scrolled-back Log holds still, / finds, o pages',
  { skip: noTmux, timeout: 60_000 },
  async () => {
    try {
      const run = join(tmp, 'run');
      cpSync(FIXTURE, run, { recursive: true });
      const log = join(run, 'train.log');
      appendFileSync(log, Array.from({ length: 3000 }, (_, i) => line(100 + i) + '\n').join(''));
      let next = 3100;
      // the trainer goes on writing the whole time: 5 lines every 100 ms
      writer = setInterval(() => {
        appendFileSync(log, Array.from({ length: 5 }, () => line(next++) + '\n').join(''));
      }, 100);
      const rec = join(tmp, 'pager-arg');
      const pager = join(tmp, 'pager.sh');
      writeFileSync(pager, `#!/bin/sh\nprintf '%s' "$1" > '${rec}'\n`);
      chmodSync(pager, 0o755);
      tmux(
        'start-server',
        ';',
        'new-session',
        '-d',
        '-s',
        SESSION,
        '-x',
        '80',
        '-y',
        '24',
        '--',
        'env',
        `PAGER=${pager}`,
        process.execPath,
        BIN,
        run,
        '--read-only',
      );
      serverStarted = true;
      await until(
        'the cockpit is up',
        () => (screen().some((r) => /d dump:read-only/.test(r)) ? null : 'no key line yet'),
        30_000,
      );

      // the help at 80×24: how to close is on screen; pgdn brings q's own line into view
      key('?');
      await until('help open', () => (screen().join('\n').includes('esc / ? / q / enter closes') ? null : 'no help'));
      assert.doesNotMatch(screen().join('\n'), /q \/ ctrl-c +quit nsa-top/, 'the last key is below the fold at 80×24');
      for (let i = 0; i < 4 && !/q \/ ctrl-c +quit nsa-top/.test(screen().join('\n')); i++) {
        key('NPage'); // pgdn: tmux calls it NPage
        await new Promise((r) => setTimeout(r, 300));
      }
      await until('help scrolled to q', () =>
        /q \/ ctrl-c +quit nsa-top/.test(screen().join('\n')) ? null : 'q not shown',
      );
      key('Escape');
      await until('help closed', () => (screen().join('\n').includes('closes') ? 'still open' : null));

      // the Log's own panel (and its whole title) at a size an operator reads logs at
      tmux('resize-window', '-t', SESSION, '-x', '120', '-y', '40');
      await until('the wide layout', () => (screen().some((r) => /┌ Log⁶ /.test(r)) ? null : 'no Log panel yet'));
      // focus the Log: Tab, one at a time, each time waiting for the focus to move
      for (let i = 0; i < 10 && focused() !== 'Log'; i++) {
        const was = focused();
        key('Tab');
        await until('Tab moves the focus', () => (focused() !== was ? null : `still ${was}`));
      }
      assert.equal(focused(), 'Log');

      // scrolled back: the view holds its lines while the writer goes on, the title counts the lines behind
      key('PPage');
      await until('scrolled back', () =>
        /lines? behind, live: End/.test(logRows()?.title ?? '') ? null : `title: ${logRows()?.title}`,
      );
      const first = logRows()!;
      const behind0 = Number(/↑ (\d+) lines? behind/.exec(first.title)![1]);
      const grownTo = next + 40;
      await until('the log grew by 40 lines', () => (next >= grownTo ? null : `at ${next}`));
      await until('the title counts the new lines', () => {
        const n = Number(/↑ (\d+) lines? behind/.exec(logRows()?.title ?? '')?.[1] ?? -1);
        return n >= behind0 + 40 ? null : `behind ${n}, was ${behind0}`;
      });
      assert.deepEqual(logRows()!.body, first.body, 'the scrolled-back view did not drift');
      assert.doesNotMatch(first.title, /↓/, 'one number in the title, not ↑N ↓N');

      // search: a line far back, found and highlighted
      key('/');
      await until('search prompt', () => (/\/▏/.test(logRows()?.title ?? '') ? null : `title: ${logRows()?.title}`));
      text('mark-1234');
      key('Enter');
      await until('found', () => {
        const r = logRows();
        return r && /\/mark-1234 1 match/.test(r.title) && r.body.some((b) => b.includes('› [train] step 1234 '))
          ? null
          : `title: ${r?.title}`;
      });
      assert.match(styled(), /\x1b\[(?:\d+;)*7(?:;\d+)*m(?:\x1b\[[\d;]*m)*mark-1234/, 'the match is drawn inverse');
      key('Escape');
      await until('search cleared', () => (/mark-1234/.test(logRows()?.title ?? '') ? 'still searching' : null));
      key('End');
      await until('live again', () =>
        /behind/.test(logRows()?.title ?? 'behind') ? `title: ${logRows()?.title}` : null,
      );

      // o: $PAGER gets the log's path, the cockpit steps aside and comes back
      key('o');
      await until('the pager ran', () => (existsSync(rec) ? null : 'no record'));
      assert.equal(readFileSync(rec, 'utf8'), log, 'the pager got the log file');
      await until('the cockpit is back', () =>
        screen().some((r) => /d dump:read-only/.test(r)) && logRows() ? null : 'not redrawn',
      );
    } finally {
      cleanup();
    }
  },
);
