// The hands on a live run, in a real pty: mouse reporting on while the cockpit is up and off once it
// quits; a click on rank 1's row selects it, the wheel scrolls the panel under the pointer without
// taking the focus, number keys and a burst of Tabs move the focus (read from the screen's inverse
// title), and `d` with rank 1 selected dumps rank 1 alone — only its stack file appears, and the
// audited record names it (and says `only`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killRecorded, runPids } from './cleanup.js';
import { BIN, Cockpit } from './pty.js';

const MOUSE_ON = '\x1b[?1000h\x1b[?1006h';
const MOUSE_OFF = '\x1b[?1006l\x1b[?1000l';
const TITLES = ['Training', 'Gates', 'GPUs', 'Ranks', 'Alerts', 'Log', 'Dumps', 'Actions'];

/** The panel titles drawn inverse (the focused panel's), read from the terminal's cells. */
function focused(c: Cockpit): string[] {
  const b = c.term.buffer.active;
  const out: string[] = [];
  for (let y = 0; y < c.term.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    if (!line) continue;
    let run = '';
    for (let x = 0; x <= c.term.cols; x++) {
      const cell = x < c.term.cols ? line.getCell(x) : undefined;
      if (cell && cell.isInverse()) run += cell.getChars() || ' ';
      else {
        // the title's number key (Ranks⁴) and the Alerts count are not part of its name
        const w = run
          .trim()
          .replace(/[⁰¹²³⁴⁵⁶⁷⁸⁹]/g, '')
          .replace(/\(\d+\)$/, '');
        if (TITLES.includes(w)) out.push(w);
        run = '';
      }
    }
  }
  return out;
}

async function focusIs(c: Cockpit, title: string, what: string): Promise<void> {
  const until = Date.now() + 10_000;
  for (;;) {
    await new Promise<void>((r) => c.term.write('', r));
    const f = focused(c);
    if (f.length === 1 && f[0] === title) return;
    if (Date.now() > until) assert.fail(`${what}: focus is on ${JSON.stringify(f)}, not ${title}\n${c.screen()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** 1-based (x, y) of the first cell of `re`'s match on screen, searched from column `fromX`. */
function cellOf(c: Cockpit, re: RegExp, fromX = 0): { x: number; y: number } | null {
  const rows = c.screen().split('\n');
  for (let y = 0; y < rows.length; y++) {
    const m = re.exec(rows[y]!.slice(fromX));
    if (m) return { x: fromX + m.index + 1, y: y + 1 };
  }
  return null;
}

test(
  'mouse, number keys, a Tab burst and a dump of the one selected rank on a live reference run',
  { timeout: 120_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-keys-'));
    const runDir = join(cwd, 'run');
    mkdirSync(runDir);
    // its stdout is the run's train.log (what a launcher would do): the Log panel has lines to scroll
    const logFd = openSync(join(runDir, 'train.log'), 'a');
    const trainer = spawn(
      process.execPath,
      [BIN, 'train', '--out', runDir, '--ranks', '2', '--steps', '100000', '--log-every', '2', '--save-every', '0'],
      { cwd, stdio: ['ignore', logFd, logFd], env: { ...process.env, NSA_HEARTBEAT_EVERY: '1' } },
    );
    closeSync(logFd);
    const c = new Cockpit([runDir], { cwd, cols: 120, rows: 40 });
    try {
      await c.waitRaw(/\x1b\[\?1000h\x1b\[\?1006h/, 30_000);
      // both ranks in the Ranks panel (the right column of the wide layout), stepping
      await c.waitFor(/^ RUNNING /m, 60_000, 'the run RUNNING');
      // rank 1's row in the Ranks panel, both read from one screen: a look between two writes of a
      // repaint (under a loaded suite) once had the header's RUNNING and no panel yet
      let r1: { x: number; y: number } | null = null;
      for (const until = Date.now() + 30_000; !r1 && Date.now() < until;) {
        await c.waitFor(/│ 1 \d+ +[RS] /, 30_000, "rank 1's row");
        const rows = c.screen().split('\n');
        const ranksX = rows.find((l) => l.includes('┌ Ranks'))?.indexOf('┌ Ranks') ?? -1;
        for (let y = 0; ranksX >= 0 && !r1 && y < rows.length; y++) {
          const m = /│ 1 \d+ /.exec(rows[y]!.slice(ranksX));
          if (m) r1 = { x: ranksX + m.index + 1, y: y + 1 };
        }
        if (!r1) await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(r1, `rank 1's row in the Ranks panel\n${c.screen()}`);

      // a click on rank 1's row: the Ranks panel takes the focus and rank 1 is selected
      c.proc.write(`\x1b[<0;${r1.x + 3};${r1.y}M\x1b[<0;${r1.x + 3};${r1.y}m`);
      await c.waitFor(/r1 selected: d dumps it alone/, 10_000, 'rank 1 selected by a click');
      await focusIs(c, 'Ranks', 'a click on a rank row');

      // the wheel over the Log scrolls the Log back (it then holds still and says how far behind live
      // it is: the run writes ~20 lines a second, so the count grows), the focus stays on Ranks
      const log = cellOf(c, /┌ Log/)!;
      c.proc.write(`\x1b[<64;${log.x + 4};${log.y + 3}M`);
      await c.waitFor(/┌ Log⁶ +↑ ?\d+ (lines )?behind/, 20_000, 'the Log scrolled back by one wheel notch');
      await focusIs(c, 'Ranks', 'the wheel does not move the focus');

      // five Tabs in one write move five panels, in screen order: Ranks → Alerts → Dumps → Actions
      // → Training → Gates; then number keys
      c.proc.write('\t\t\t\t\t');
      await focusIs(c, 'Gates', 'five Tabs in one write');
      c.proc.write('6');
      await focusIs(c, 'Log', 'key 6');
      c.proc.write('4');
      await focusIs(c, 'Ranks', 'key 4');

      // d on the selected rank: rank 1 alone, said in the dialog; only rank 1's stack file appears
      const before = new Set(readdirSync(runDir).filter((f) => f.startsWith('stackdump_')));
      c.proc.write('d');
      await c.waitFor(/Stack dump of rank 1/, 10_000, 'the dump window names rank 1');
      await c.waitFor(/rank 1 pid \d+ dumped/, 30_000, "rank 1's stack dumped");
      assert.doesNotMatch(c.screen(), /rank 0 pid/, 'rank 0 is not in the outcome');
      const made = readdirSync(runDir).filter((f) => f.startsWith('stackdump_') && !before.has(f));
      assert.equal(made.length, 1, `one new stack file: ${made.join(', ')}`);
      assert.match(made[0]!, /_rank1_\d+\.txt$/, 'and it is rank 1’s');
      const recs = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map(
          (l) => JSON.parse(l) as { action: string; result: string; target: Record<string, unknown>; detail: string },
        )
        .filter((r) => r.action === 'dump');
      const rec = recs.at(-1)!;
      assert.equal(rec.result, 'ok', rec.detail);
      assert.deepEqual(
        (rec.target['ranks'] as { rank: number }[]).map((r) => r.rank),
        [1],
        'the record names rank 1 alone',
      );
      assert.deepEqual(rec.target['only'], [1]);
      assert.match(rec.detail, /^only rank 1 \(chosen\): 1\/1 ranks dumped: rank 1 stackdump_/);

      // the Dumps panel says whose set it is: rank 1's alone, by choice
      await c.send('\x1b', 300);
      await c.waitFor(/your set of rank 1 only \(chosen\)/, 10_000, 'the Dumps panel names the chosen rank');
      // quit while a dump of every rank is under way (ranks are signalled ≥ 1.1 s apart): it finishes
      // and is recorded before the process ends, and the terminal says so — live, q between rank 0's
      // signal and rank 1's left one stack file and no record at all
      await c.send('\x1b', 300);
      await c.waitFor(/^(?![\s\S]*r1 selected)/, 10_000, 'rank 1 no longer selected');
      const dumpsBefore = recs.length;
      c.proc.write('d');
      await c.waitFor(/Stack dump(?! of rank)/, 10_000, 'the dump window of every rank');
      c.proc.write('\x1b');
      await c.send('q');
      await c.exited;
      assert.ok(c.raw.lastIndexOf(MOUSE_OFF) > c.raw.lastIndexOf(MOUSE_ON), 'mouse reporting off after quit');
      assert.match(c.raw, /waiting for the dump under way to finish/);
      const after = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { action: string; result: string; detail: string })
        .filter((r) => r.action === 'dump');
      assert.equal(after.length, dumpsBefore + 1, 'the dump under way at the quit is recorded');
      assert.match(
        `${after.at(-1)!.result} ${after.at(-1)!.detail}`,
        /^ok 2\/2 ranks dumped: rank 0 stackdump_\S+, rank 1 stackdump_/,
      );
      assert.match(c.raw, /nsa-top: dump ok: 2\/2 ranks dumped/);
    } finally {
      const pids = runPids(runDir);
      await c.close(3000);
      killRecorded(pids);
      if (trainer.exitCode === null) trainer.kill('SIGKILL');
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);
