// Every "contract §x" cited in the code must resolve to a heading of docs/contract.md, so a reader
// who clones the repo can follow it (the contract used to live outside the repository).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'fixtures') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.(ts|tsx|mjs|js)$/.test(name)) out.push(p);
  }
  return out;
}

test('every "contract §x" cited in src, test, bench and scripts is a section of docs/contract.md', () => {
  const headings = new Set<string>();
  for (const line of readFileSync(join(root, 'docs', 'contract.md'), 'utf8').split('\n')) {
    const m = /^#{2,3} (\d+(?:\.\d+)?)\.? /.exec(line);
    if (m) headings.add(m[1]!);
  }
  assert.ok(headings.has('1.5') && headings.has('8.8'), 'docs/contract.md lost its numbered sections');
  const missing: string[] = [];
  let cited = 0;
  for (const dir of ['src', 'test', 'bench', 'scripts']) {
    for (const file of sources(join(root, dir))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/contract §(\d+(?:\.\d+)?)/g)) {
        cited++;
        if (!headings.has(m[1]!)) missing.push(`${file.slice(root.length + 1)}: §${m[1]}`);
      }
    }
  }
  assert.ok(cited > 0, 'no citation found: the scan is not reading the sources');
  assert.deepEqual(missing, [], 'citations without a section in docs/contract.md');
});
