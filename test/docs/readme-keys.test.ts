// The README's key table is the keymap's: one row per binding, its keys and its help, in order. When
// a binding changes, this test fails and prints the table to paste (the help screen and the footer
// are drawn from the same KEYMAP, so the three can never disagree).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KEYMAP } from '../../src/ui/keymap.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('the README key table lists every binding of the keymap, with its help text, in order', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8').split('\n');
  const start = readme.indexOf('| key | does |');
  assert.ok(start >= 0, 'README.md has no "| key | does |" table');
  const rows: string[] = [];
  for (let i = start + 2; i < readme.length && readme[i]!.startsWith('|'); i++) rows.push(readme[i]!);
  const expected = KEYMAP.map((b) => `| \`${b.keys}\` | ${b.help.replace(/\|/g, '\\|')} |`);
  assert.ok(expected.length > 10, 'the keymap lost its bindings');
  assert.deepEqual(
    rows,
    expected,
    `README.md's key table should read:\n| key | does |\n|---|---|\n${expected.join('\n')}\n`,
  );
});
