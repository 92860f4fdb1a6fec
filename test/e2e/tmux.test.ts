// The built cockpit in a tmux pane shared by two clients of different sizes (an operator on a
// laptop and one on a big monitor attached to the same session): the pane follows tmux's
// `window-size latest` policy, and the cockpit's frame always fills the pane tmux gives it — it
// re-lays out when the bigger client attaches, when it goes away, and when a client too small for
// it attaches and then grows. The screen is read the way tmux itself holds it (capture-pane), on an
// isolated tmux server (its own socket, no config), never the user's.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single', import.meta.url));
const RUN_NAME = 'tmux-shared-run';
const SESSION = 'nsa';

// its own server: no CI (Ink behaves differently under it), no TMUX/TMUX_PANE (a test run from
// inside tmux must not talk to the user's server or refuse to nest), a known TERM
const T = isolatedTmux('nsa-top-tmux-', 'the shared-pane test');
const { tmp, sock: SOCK, env: ENV, tmux, skip: noTmux } = T;
const clients: pty.IPty[] = [];

function cleanup(): void {
  for (const c of clients.splice(0)) {
    try {
      c.kill();
    } catch {
      /* gone */
    }
  }
  T.close();
}
after(cleanup);

/** A tmux client attached to the session from a terminal of this size (a real pty). */
function attach(cols: number, rows: number): pty.IPty {
  const p = pty.spawn('tmux', ['-S', SOCK, 'attach-session', '-t', SESSION], {
    cols,
    rows,
    cwd: tmp,
    env: ENV,
    name: 'xterm-256color',
  });
  p.onData(() => {}); // drain: the client's own screen is not what is checked
  clients.push(p);
  return p;
}

function detach(p: pty.IPty): void {
  // the operator closes their terminal window: the tmux client gets a hangup and goes
  const i = clients.indexOf(p);
  if (i >= 0) clients.splice(i, 1);
  p.kill();
}

function paneSize(): { w: number; h: number } {
  const [w, h] = tmux('display-message', '-p', '-t', SESSION, '#{pane_width} #{pane_height}')
    .trim()
    .split(' ')
    .map(Number);
  return { w: w!, h: h! };
}

/** The pane as tmux holds it; -J joins rows the terminal wrapped, so a wrapped row shows as a longer line. */
const capture = (): string[] => T.capture(SESSION, { join: true });

/** Alive and not a zombie waiting for a parent to reap it. */
function running(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const width = (s: string): number => [...s].length; // the frame draws box-drawing and 1-column symbols only

/** Why the pane is not (yet) a full cockpit frame of exactly w×h; null when it is. */
function frameProblem(lines: string[], w: number, h: number): string | null {
  const rows = lines.map((l) => l.replace(/\s+$/, ''));
  if (rows.length !== h) return `${rows.length} rows captured (joined = a row wrapped), pane has ${h}`;
  const long = rows.findIndex((l) => width(l) > w);
  if (long >= 0) return `row ${long} is ${width(rows[long]!)} columns wide in a ${w}-column pane (it wrapped)`;
  if (rows.some((l) => /terminal too small/.test(l))) return '"terminal too small" at a size the cockpit fits in';
  if (!new RegExp(`FINISHED .*READ-ONLY .*${RUN_NAME} @ local`).test(rows[0]!))
    return `no header with the run name on row 0: ${rows[0]}`;
  // the panel columns start on row 3 (under the 3-row header) and all end on row h-3 (above the key
  // line, with the last row left empty): both border rows span exactly the pane
  const top = rows[3]!;
  const bottom = rows[h - 3]!;
  if (!(top.startsWith('┌') && top.endsWith('┐') && width(top) === w))
    return `top border (row 3) does not span ${w} columns: ${JSON.stringify(top)} (${width(top)})`;
  if (!(bottom.startsWith('└') && bottom.endsWith('┘') && width(bottom) === w))
    return `bottom border (row ${h - 3}) does not span ${w} columns: ${JSON.stringify(bottom)} (${width(bottom)})`;
  if (!/d dump:read-only/.test(rows[h - 2]!)) return `no key line (read-only) on row ${h - 2}: ${rows[h - 2]}`;
  if (rows[h - 1] !== '') return `the last row is not empty: ${rows[h - 1]}`;
  return null;
}

/** Poll until `check` returns null (success); fail with its last complaint and the pane. */
async function until(what: string, check: () => string | null, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let why: string | null = 'never checked';
  for (;;) {
    why = check();
    if (why === null) return;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  let pane = '';
  try {
    pane = capture().join('\n');
  } catch (e) {
    pane = String(e);
  }
  assert.fail(`${what}: ${why}\n--- pane ---\n${pane}`);
}

async function paneBecomes(w: number, h: number, why: string): Promise<void> {
  await until(`pane becomes ${w}x${h} (${why})`, () => {
    const s = paneSize();
    return s.w === w && s.h === h ? null : `pane is ${s.w}x${s.h}`;
  });
}

/** The cockpit says it does not fit, with the size it really has (the pane, not a client's terminal). */
async function tooSmall(w: number, h: number): Promise<void> {
  await until(`"terminal too small" in the ${w}x${h} pane`, () => {
    const rows = capture().map((l) => l.replace(/\s+$/, ''));
    const s = rows.join('\n');
    if (!/terminal too small/.test(s) || !s.includes(`${w}×${h}, nsa-top needs 80×23`))
      return `no "terminal too small / ${w}×${h}" message`;
    if (/[┌└]/.test(s)) return 'frame borders left over next to the message';
    if (rows.length !== h) return `${rows.length} rows captured (joined = a row wrapped), pane has ${h}`;
    const long = rows.findIndex((l) => width(l) > w);
    return long >= 0 ? `row ${long} is wider than the pane: ${rows[long]}` : null;
  });
}

/** The cockpit fills a w×h pane, in the layout that size gets. */
async function cockpitFills(w: number, h: number, what: string, timeoutMs = 8000): Promise<void> {
  await until(`the cockpit fills ${w}x${h} ${what}`, () => frameProblem(capture(), w, h), timeoutMs);
  const screen = capture().join('\n');
  if (w >= 120 && h >= 36) {
    // the wide layout: alerts and the log are panels of their own
    assert.match(screen, /┌ Alerts/, `wide layout at ${w}x${h}`);
    assert.match(screen, /┌ Log/, `wide layout at ${w}x${h}`);
    assert.doesNotMatch(screen, /Alerts⁵\(\d+\) │ ?log⁶/, `no compact tab group at ${w}x${h}`);
  } else {
    assert.match(
      screen,
      /Alerts⁵\(\d+\) │ ?log⁶ ?│ ?dumps⁷ ?│ ?actions⁸/,
      `compact layout with a tab group at ${w}x${h}`,
    );
  }
}

test(
  'two tmux clients of different sizes share the cockpit pane (window-size latest)',
  { skip: noTmux, timeout: 60_000 },
  async () => {
    try {
      const run = join(tmp, RUN_NAME);
      cpSync(FIXTURE, run, { recursive: true }); // nothing is written into the fixtures
      // No client yet: the detached session starts at 80x24. `window-size latest` (tmux's default
      // since 3.1, set explicitly so an older default or a distro config cannot change it): the pane
      // takes the size of the client that attached or typed last, so each operator who comes in gets a
      // cockpit for their own terminal. The status line takes one row of each client.
      tmux(
        'start-server',
        ';',
        'set-option',
        '-g',
        'default-terminal',
        'tmux-256color',
        ';',
        'set-option',
        '-g',
        'window-size',
        'latest',
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
        process.execPath,
        BIN,
        run,
        '--read-only',
      );
      const cockpitPid = Number(tmux('display-message', '-p', '-t', SESSION, '#{pane_pid}').trim());
      assert.ok(cockpitPid > 0 && running(cockpitPid), 'the pane runs the cockpit itself');

      const a = attach(100, 30);
      await paneBecomes(100, 29, 'client A 100x30 attached, one row for the status line');
      await cockpitFills(100, 29, 'for client A', 30_000); // the first frame: a cold start on a busy box

      const b = attach(140, 45);
      await until('both clients attached at their sizes', () => {
        const l = tmux('list-clients', '-t', SESSION, '-F', '#{client_width}x#{client_height}')
          .trim()
          .split('\n')
          .sort()
          .join(' ');
        return l === '100x30 140x45' ? null : `clients: ${l}`;
      });
      await paneBecomes(140, 44, 'client B 140x45 attached last');
      await cockpitFills(140, 44, 'for client B (the wide layout)');

      detach(b);
      await paneBecomes(100, 29, 'client B gone, back to client A');
      await cockpitFills(100, 29, 'for client A again after B left');

      // A client too small for the cockpit attaches: the pane shrinks for everyone, and the cockpit
      // says so with the size it really has (the pane, not the client's terminal)
      const c = attach(70, 20);
      await paneBecomes(70, 19, 'client C 70x20 attached last');
      await tooSmall(70, 19);
      // one row short of an 80x24 terminal inside tmux (80x23 pane) is still too small ...
      c.resize(80, 23);
      await paneBecomes(80, 22, 'client C resized to 80x23');
      await tooSmall(80, 22);
      // ... but an 80x24 terminal is enough: the status line leaves an 80x23 pane, the minimum
      c.resize(80, 24);
      await paneBecomes(80, 23, 'client C resized to 80x24');
      await cockpitFills(80, 23, 'in an 80x24 terminal under tmux');

      // ... and grows its terminal: the frame comes back at the new size
      c.resize(90, 27);
      await paneBecomes(90, 26, 'client C resized to 90x27');
      await cockpitFills(90, 26, 'after the too-small message');

      detach(c);
      await paneBecomes(100, 29, 'client C gone, back to client A');
      await cockpitFills(100, 29, 'for client A at the end');

      // the last client leaving does not end the cockpit (the session lives on, detached) ...
      detach(a);
      await until('no client left', () =>
        tmux('list-clients', '-t', SESSION).trim() === '' ? null : 'clients still listed',
      );
      await new Promise((r) => setTimeout(r, 500));
      assert.ok(running(cockpitPid), 'the cockpit survived every client coming and going');
      // ... and killing the server hangs it up: it exits rather than lingering without a terminal
      tmux('kill-server');
      await until(
        'the cockpit exits when its tmux server is killed',
        () => (running(cockpitPid) ? `pid ${cockpitPid} still running` : null),
        10_000,
      );
    } finally {
      cleanup();
    }
  },
);
