// `nsa-top replay` as an operator sees it, in a pane of an isolated tmux server (its own socket, no
// config), on a recorded real-trainer run nsa-top never watched (the crash-and-resume fixture): at
// the moment of the stall the header says STALLED, REPLAY and the moment, at step 51; `h` is refused
// with the replay's reason; `]` jumps to the next marker (the relaunch); q quits. Piped, it prints
// that frame and what it cannot show; a bad --at is a one-line error and exit 2.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';
import { nsaTopAsync } from '../helpers/cli.js';

const RUN = fileURLToPath(
  new URL('../fixtures/nsa-vibe/ddp2-crash-resume/artifacts/ddp2-crash-resume', import.meta.url),
);

const T = isolatedTmux('nsa-top-replay-tmux-', 'the replay screen test');
const { env: ENV, tmux, until, skip: noTmux } = T;

after(() => {
  T.close();
});

/** the timeline: the frame's last row (the pane's last row is left empty) */
const footer = (r: string[]) => r.find((l) => /^(‖|▶) /.test(l)) ?? '';

test(
  'replay in tmux: the stall as it stood, h refused with the reason, ] to the relaunch, q quits',
  { skip: noTmux, timeout: 90_000 },
  async () => {
    tmux(
      'new-session',
      '-d',
      '-s',
      'r',
      '-x',
      '120',
      '-y',
      '40',
      '--',
      process.execPath,
      BIN,
      'replay',
      RUN,
      '--at',
      '05:13:03',
    );
    tmux('set-option', '-t', 'r', 'remain-on-exit', 'on');
    const P = 'r:0';
    await until('the stall on screen', P, (r) =>
      /^ STALLED +REPLAY 2026-11-24 05:13:03 +ddp2-crash-resume .*all ranks silent since 05:12:42/.test(r[0] ?? '') &&
      /^step 51\/100 .*no step for 20s/.test(r[2] ?? '')
        ? null
        : `header ${JSON.stringify(r[0])} / ${JSON.stringify(r[2])}`,
    );
    // the footer is the timeline: the cursor, and the markers before and after it
    await until('the timeline', P, (r) => (/^‖ 1× │.*C.*!.*●.*R.*C.*│/.test(footer(r)) ? null : `footer ${footer(r)}`));
    tmux('send-keys', '-t', P, '-l', 'h');
    await until('h refused with the reason', P, (r) => {
      // the dialog wraps the run dir's path wherever the width falls (a longer checkout path moves
      // the break into the run's name): compared with the spaces taken out
      const text = r
        .map((l) => l.replace(/^[^┃]*┃ ?|┃.*$/g, '').trim())
        .join('')
        .replace(/\s+/g, '');
      return /replay:thisisarecordingof\S*ddp2-crash-resumeat05:13:03,nottherunnow/.test(text) ? null : 'no refusal';
    });
    tmux('send-keys', '-t', P, 'Escape');
    await until('the refusal closed', P, (r) => (r.some((l) => l.includes('┃')) ? 'still open' : null));
    tmux('send-keys', '-t', P, '-l', ']');
    await until('] at the relaunch', P, (r) =>
      /REPLAY 2026-11-24 05:13:15/.test(r[0] ?? '') && / R relaunch: rank 0 booted again \(\+1\)/.test(footer(r))
        ? null
        : `header ${JSON.stringify(r[0])} footer ${JSON.stringify(footer(r))}`,
    );
    tmux('send-keys', '-t', P, '-l', 'q');
    await T.paneDead(P, 'q');
  },
);

test(
  'replay piped: the frame at step=51 and what the files cannot show; a bad --at is exit 2 in one line',
  { timeout: 60_000 },
  async () => {
    // both replays side by side (each reads the recording, ~1.5 s of CPU)
    const [r, bad] = await Promise.all([
      nsaTopAsync(['replay', RUN, '--at', 'step=51'], { env: ENV, timeoutMs: 30_000 }),
      nsaTopAsync(['replay', RUN, '--at', '12:00'], { env: ENV, timeoutMs: 30_000 }),
    ]);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.match(lines[0]!, /^ RUNNING +REPLAY 2026-11-24 05:12:4\d +ddp2-crash-resume/);
    assert.match(r.stdout, /^replay: trainer files only .*2026-11-24 05:12:12 – 05:13:54; \d+ markers$/m);
    assert.match(r.stdout, /^replay: cannot show: no process history/m);
    assert.match(r.stdout, /^replay: cannot show: no GPU history/m);
    assert.equal(bad.status, 2);
    assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
    assert.match(
      bad.stderr,
      /--at 12:00: the recording has no such moment \(it spans 2026-11-24 05:12:12 – 05:13:54\)/,
    );
  },
);
