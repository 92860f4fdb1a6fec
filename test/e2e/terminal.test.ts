// The built cockpit in a real pty on a finished fixture run (no trainer needed): resize re-lays out
// cleanly (compact, too small, huge), the frame never reaches the last row, and the keys from the
// one keymap drive help, focus and zoom; a cockpit on an ended run writes no journal into it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cockpit, ESC } from './pty.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/ddp2-dumps-halt', import.meta.url));

test('resize, help, focus and zoom in a real terminal', { timeout: 90_000 }, async () => {
  const c = new Cockpit([FIXTURE], { cwd: '/tmp', cols: 120, rows: 40 });
  try {
    await c.waitFor(/HALTED/, 30_000);
    await c.waitFor(/┌ Dumps/);
    assert.equal(c.row(39).trim(), '', 'the last row stays empty (frame is rows-1)');
    const resize = async (cols: number, rows: number) => {
      c.proc.resize(cols, rows);
      c.term.resize(cols, rows);
      await new Promise((r) => setTimeout(r, 600));
    };
    await resize(80, 24);
    await c.waitFor(/Alerts⁵\(\d+\) │ ?log⁶ ?│ ?dumps⁷ ?│ ?actions⁸/, 10_000, 'the compact layout with a tab group');
    for (const line of c.screen().split('\n')) assert.ok(line.length <= 80);
    assert.equal(c.row(23).trim(), '');
    assert.match(c.row(0), /HALTED/);
    await resize(70, 20);
    await c.waitFor(/terminal too small/, 10_000);
    await resize(200, 60);
    await c.waitFor(/┌ Actions/, 10_000, 'the huge layout shows every panel');
    assert.doesNotMatch(c.screen(), /terminal too small/, 'nothing left over from the previous frame');
    assert.equal(c.row(59).trim(), '');
    // ? shows the help built from the keymap; esc closes it
    await c.send('?', 400);
    await c.waitFor(/Keys[\s\S]*stack dump of every rank[\s\S]*quit nsa-top/, 10_000);
    await c.send(ESC, 400);
    await c.waitFor(/┌ Actions/);
    assert.doesNotMatch(c.screen(), /stack dump of every rank/);
    // tab to the log, z zooms it over the whole middle
    await c.send('z', 400);
    await c.waitFor(/┌ Training/, 5000);
    for (let i = 0; i < 8 && !/┌ Log/.test(c.screen()); i++) await c.send('\t', 400);
    await c.waitFor(/HALT file detected/, 10_000, 'the zoomed log');
    assert.doesNotMatch(c.screen(), /┌ Gates/);
    await c.send('q');
    assert.equal(await c.exited, 0);
    // a cockpit on a run that has ended records no journal: the recorded fixture is left as it was
    assert.ok(!existsSync(join(FIXTURE, '.nsa-top', 'journal.jsonl')), 'no journal written into the ended run');
  } finally {
    await c.close(3000);
  }
});
