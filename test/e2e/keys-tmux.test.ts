// Keys as tmux sends them: `tmux send-keys -l jjjjj` writes the five keys to the pane at once, and
// each must count, in order. On a finished fixture run, in a pane of an isolated tmux server (its
// own socket, no config): five Tabs in one write then z zoom the panel five along the screen's
// order, and zoomed, five Shift-Tabs and five Tabs walk the same order (titles show the number keys); `kkkkk` scrolls the Log five lines up, `kkk` three more, `jjjjj` five back down, `gG` ends at
// the end (g alone would stay at the start). tmux also says whether the program in the pane asked for the mouse: on (SGR) by
// default, never with --no-mouse, and off again after q and after SIGTERM.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single', import.meta.url));

const T = isolatedTmux('nsa-top-keys-tmux-', 'the send-keys test');
const { tmp, tmux, capture, skip: noTmux } = T;
after(() => T.close());
const until = (what: string, t: string, check: (rows: string[]) => string | null, ms = 15_000) =>
  T.until(what, t, check, ms);

/** The zoomed panel's title (row 3) and its last body line (above its bottom border). */
function zoomed(rows: string[]): { title: string; last: string } {
  const bottom = rows.findLastIndex((l) => l.startsWith('└'));
  return { title: rows[3] ?? '', last: (rows[bottom - 1] ?? '').replace(/^│\s*/, '').replace(/\s*│\s*$/, '') };
}

test(
  'tmux send-keys bursts: every key counts, in order; the mouse asked for unless --no-mouse',
  { skip: noTmux, timeout: 60_000 },
  async () => {
    const run = join(tmp, 'run');
    cpSync(FIXTURE, run, { recursive: true });
    const log = readFileSync(join(run, 'train.log'), 'utf8').replace(/\n$/, '').split('\n');
    // the Log's line `back` lines up from the newest, as the panel draws it (cut at the border)
    const line = (back: number) => log[log.length - 1 - back]!.trim();
    tmux('new-session', '-d', '-s', 'k', '-x', '120', '-y', '40', '--', process.execPath, BIN, run, '--read-only');
    tmux('new-window', '-d', '-t', 'k', '-n', 'nomouse', '--', process.execPath, BIN, run, '--read-only', '--no-mouse');
    tmux('new-window', '-d', '-t', 'k', '-n', 'term', '--', process.execPath, BIN, run, '--read-only');
    // panes stay after their program ends, to be asked what it left the terminal in
    tmux('set-option', '-t', 'k', 'remain-on-exit', 'on');
    const P = 'k:0';
    await until(
      'the cockpit on screen',
      P,
      (r) => (/FINISHED/.test(r[0] ?? '') && r[3]?.startsWith('┌') ? null : 'no frame'),
      30_000,
    );

    // wide layout: Training → Gates → Log → GPUs → Ranks → Alerts: five Tabs, in one write
    tmux('send-keys', '-t', P, '-l', '\t\t\t\t\t');
    tmux('send-keys', '-t', P, '-l', 'z');
    await until('five Tabs then z zoom Alerts', P, (r) =>
      /^┌ Alerts/.test(zoomed(r).title) ? null : `zoomed: ${zoomed(r).title}`,
    );
    // its title shows the number key that focuses it
    assert.match(zoomed(capture(P)).title, /^┌ Alerts⁵/);
    // zoomed, Tab keeps the screen's order: five Shift-Tabs back to Training, five Tabs on to Alerts
    // (the focus list's own order would have ended on Actions, then Log)
    tmux('send-keys', '-t', P, 'BTab', 'BTab', 'BTab', 'BTab', 'BTab');
    await until('zoomed: five Shift-Tabs back along the screen to Training', P, (r) =>
      /^┌ Training¹/.test(zoomed(r).title) ? null : `zoomed: ${zoomed(r).title}`,
    );
    tmux('send-keys', '-t', P, '-l', '\t\t\t\t\t');
    await until('zoomed: five Tabs along the screen to Alerts', P, (r) =>
      /^┌ Alerts⁵/.test(zoomed(r).title) ? null : `zoomed: ${zoomed(r).title}`,
    );

    // 6: the Log (zoomed, it takes the screen); at its end, the newest line last
    tmux('send-keys', '-t', P, '-l', '6');
    await until('6 zooms the Log', P, (r) => (/^┌ Log/.test(zoomed(r).title) ? null : `zoomed: ${zoomed(r).title}`));
    const at = (back: number, what: string) =>
      until(what, P, (r) => {
        const z = zoomed(r);
        return line(back).startsWith(z.last.replace(/…$/, '')) && z.last.length > 0
          ? null
          : `last line ${JSON.stringify(z.last)}, want ${JSON.stringify(line(back))} (${back} up)`;
      });
    await at(0, 'the Log at its end');
    tmux('send-keys', '-t', P, '-l', 'kkkkk');
    await at(5, 'kkkkk: five lines up');
    tmux('send-keys', '-t', P, '-l', 'kkk');
    await at(8, 'kkk: three more');
    tmux('send-keys', '-t', P, '-l', 'jjjjj');
    await at(3, 'jjjjj: five lines back down');
    tmux('send-keys', '-t', P, '-l', 'gG');
    await at(0, 'gG: to the start, then the end');

    // the program in the pane asked tmux for SGR mouse reports; the --no-mouse one did not
    const flags = (t: string) => tmux('display-message', '-p', '-t', t, '#{mouse_any_flag} #{mouse_sgr_flag}').trim();
    assert.equal(flags(P), '1 1', 'mouse reporting on in the cockpit');
    await until(
      'the --no-mouse cockpit on screen',
      'k:nomouse',
      (r) => (/FINISHED/.test(r[0] ?? '') ? null : 'no frame'),
      30_000,
    );
    assert.equal(flags('k:nomouse'), '0 0', '--no-mouse leaves the mouse to the terminal');
    const dead = (t: string, what: string) => T.paneDead(t, what);
    // q: the cockpit gives the mouse back as it goes (a program that does not leaves the flags set)
    tmux('send-keys', '-t', P, '-l', 'q');
    await dead(P, 'q');
    assert.equal(flags(P), '0 0', 'mouse reporting off once the cockpit quit');
    // SIGTERM (to the pid tmux started for this test's pane): the same
    await until(
      'the cockpit in the third pane',
      'k:term',
      (r) => (/FINISHED/.test(r[0] ?? '') ? null : 'no frame'),
      30_000,
    );
    assert.equal(flags('k:term'), '1 1');
    process.kill(Number(tmux('display-message', '-p', '-t', 'k:term', '#{pane_pid}').trim()), 'SIGTERM');
    await dead('k:term', 'SIGTERM');
    assert.equal(flags('k:term'), '0 0', 'mouse reporting off after SIGTERM');
  },
);
