// docs/design.md maps every folder in one line: a folder added, moved or removed without the map
// following fails here, and so does a map line naming a folder that is gone.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function dirs(dir: string, out: string[] = []): string[] {
  out.push(relative(ROOT, dir) + '/');
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory() && name !== 'node_modules' && name !== 'out') dirs(p, out);
  }
  return out;
}

test('docs/design.md names every folder of src, test, bench, scripts, bin, data and docs, and no folder that is gone', () => {
  const text = readFileSync(join(ROOT, 'docs', 'design.md'), 'utf8');
  const section = text.split('\n## Folder map')[1]?.split('\n## ')[0] ?? '';
  const mapped = [...section.matchAll(/^\| `([^`]+\/)` \|/gm)].map((m) => m[1]!);
  assert.ok(mapped.length > 10, 'the Folder map table is there');
  // one line per folder: a second, stale line (two merges each adding theirs) tells two stories
  assert.deepEqual(
    mapped.filter((d, i) => mapped.indexOf(d) !== i),
    [],
    'folders mapped twice',
  );
  const actual = ['src', 'test', 'bench', 'scripts', 'bin', 'data', 'docs']
    .flatMap((d) => dirs(join(ROOT, d)))
    .filter((d) => !d.startsWith('test/fixtures/') || d === 'test/fixtures/')
    .filter((d) => !/^(bench|scripts|bin|data|docs)\/./.test(d));
  assert.deepEqual(
    actual.filter((d) => !mapped.includes(d)),
    [],
    'folders missing from the map',
  );
  assert.deepEqual(
    mapped.filter((d) => !actual.includes(d)),
    [],
    'map lines for folders that do not exist',
  );
  for (const row of section.split('\n').filter((l) => l.startsWith('| `'))) {
    const cells = row.split('|').map((c) => c.trim());
    assert.ok(cells.length === 4 && cells[2]!.length > 10, `${row}: one folder, one line that says what is there`);
  }
});
