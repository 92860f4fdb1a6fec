// Every runtime dependency earns its place: shipped code (src/) imports it. What only tests, benches
// and the build use is a devDependency, so `npm ci --omit=dev` on a box carries nothing unused.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.(ts|tsx)$/.test(name) && !name.endsWith('.d.ts')) out.push(readFileSync(p, 'utf8'));
  }
  return out;
}

/** the packages src/ imports (static, dynamic or through createRequire), by package name */
function importedBySrc(): Set<string> {
  const names = new Set<string>();
  for (const text of sources(join(ROOT, 'src'))) {
    for (const m of text.matchAll(/(?:from\s+|import\(\s*|require\(\s*)'([^'.][^']*)'/g)) {
      const spec = m[1]!;
      if (spec.startsWith('node:')) continue;
      names.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  return names;
}

test('every dependency in package.json is imported by shipped code, and shipped code imports no devDependency', () => {
  const used = importedBySrc();
  assert.deepEqual(
    Object.keys(pkg.dependencies).filter((d) => !used.has(d)),
    [],
    'dependencies src/ never imports (remove them, or move them to devDependencies)',
  );
  assert.deepEqual(
    [...used].filter((d) => d in pkg.devDependencies && !d.startsWith('@types/')),
    [],
    'src/ imports a devDependency: `npm ci --omit=dev` would break it',
  );
  assert.deepEqual(
    [...used].filter((d) => !(d in pkg.dependencies) && !(d in pkg.devDependencies)),
    [],
    'src/ imports a package package.json does not name',
  );
});
