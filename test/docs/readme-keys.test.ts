// The README's key table is the keymap's: one row per binding, its keys (written as the help screen
// writes them, from the binding's key names) and its help, in order — the main screen's KEYMAP, then
// every dialog's keys (DIALOG_KEYS). When a binding changes, this test fails and prints the table to
// paste (the help screen, the footer and the dialogs are drawn from the same data, so they can never
// disagree).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dialogBindings } from '../../src/ui/dialogs/index.js';
import { keysText } from '../../src/ui/keys.js';
import { KEYMAP } from '../../src/ui/keymap.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('the README key table lists every binding of the keymap and the dialogs, with its help text, in order', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8').split('\n');
  const start = readme.indexOf('| key | does |');
  assert.ok(start >= 0, 'README.md has no "| key | does |" table');
  const rows: string[] = [];
  for (let i = start + 2; i < readme.length && readme[i]!.startsWith('|'); i++) rows.push(readme[i]!);
  const all = [...KEYMAP, ...dialogBindings()];
  const expected = all.map((b) => `| \`${keysText(b)}\` | ${b.help.replace(/\|/g, '\\|')} |`);
  assert.ok(KEYMAP.length > 10, 'the keymap lost its bindings');
  // the keys whose display is derived, not copied: a modifier, an arrow, and a dialog's
  for (const row of ['| `ctrl-l` |', '| `↑ / k` |', '| `shift-tab` |', '| `n` | in the halt question', '| `K` |'])
    assert.ok(
      expected.some((e) => e.startsWith(row)),
      `no row starting ${row} in:\n${expected.join('\n')}`,
    );
  assert.deepEqual(
    rows,
    expected,
    `README.md's key table should read:\n| key | does |\n|---|---|\n${expected.join('\n')}\n`,
  );
});
