// The unit tier (`npm run test:unit`) promises files that start no process. Its guard must make a
// file that does start one fail, even when the test swallows the error, and leave the others alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
// inside the checkout, so the test files resolve node-pty and tsx the way the real ones do
mkdirSync(join(root, 'node_modules', '.cache'), { recursive: true });
const dir = mkdtempSync(join(root, 'node_modules', '.cache', 'nsa-unit-guard-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

function runGuarded(name: string, body: string) {
  const file = join(dir, name);
  writeFileSync(file, `import { test } from 'node:test';\n${body}\n`);
  return spawnSync(process.execPath, ['--import', 'tsx', '--import', './scripts/unit-guard.mjs', '--test', file], {
    cwd: root,
    encoding: 'utf8',
    // a runner started from inside a test file would take itself for a test file's process
    env: { ...process.env, NODE_TEST_CONTEXT: undefined },
    timeout: 60_000,
  });
}

test('a unit-tier file that spawns fails, naming the call, even when the test catches the error', () => {
  const r = runGuarded(
    'spawns.test.ts',
    `import { spawnSync } from 'node:child_process';
test('quietly spawns', () => { try { spawnSync('true'); } catch {} });`,
  );
  assert.notEqual(r.status, 0, r.stdout);
  assert.match(r.stdout, /^ok 1 - quietly spawns$/m, 'the test ran (and swallowed the error)');
  assert.match(r.stdout + r.stderr, /unit tier: spawnSync\("true"\)/);
});

test('node-pty is refused too', () => {
  const r = runGuarded(
    'pty.test.ts',
    `import { spawn } from 'node-pty';
test('opens a pty', () => { spawn('sh', [], {}); });`,
  );
  assert.notEqual(r.status, 0, r.stdout);
  assert.match(r.stdout, /^not ok 1 - opens a pty$/m, 'the test ran');
  assert.match(r.stdout + r.stderr, /unit tier: node-pty\.spawn\("sh"\)/);
});

test('a file that starts nothing passes under the guard (TypeScript compiled on the way)', () => {
  const r = runGuarded(
    'pure.test.ts',
    `const n: number = 1 + 1;\ntest('adds', () => { if (n !== 2) throw new Error('no'); });`,
  );
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^# pass 1$/m, 'the test ran');
});
