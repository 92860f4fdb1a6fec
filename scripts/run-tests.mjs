// Runs every test/**/*.test.ts(x) with node's own runner, naming each file explicitly
// (Node 20 does not expand globs, and a run with no files would pass silently).
// TEST_FILTER=substr narrows the list, for local work only.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === 'fixtures' || name === 'node_modules') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.test\.tsx?$/.test(name)) out.push(relative(root, p));
  }
  return out;
}
let files = walk(join(root, 'test')).sort();
const filter = process.env.TEST_FILTER;
if (filter) files = files.filter((f) => f.includes(filter));
if (files.length === 0) {
  console.error('run-tests: no test files found under test/ — refusing to report a green run with nothing tested');
  process.exit(1);
}
console.log(`run-tests: ${files.length} files\n  ${files.join('\n  ')}`);
const args = ['--import', 'tsx', '--test', '--test-reporter=spec', ...files];
// A test file that never exits (a handle left open after a failed assertion) would hold CI until
// its 90-minute limit: give the whole run a bound well above its usual ~6 minutes on 2 cores.
const limitMin = Number(process.env.NSA_TOP_TEST_LIMIT_MIN || 40);
const r = spawnSync(process.execPath, args, {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, NSA_TOP_TEST: '1' },
  timeout: limitMin * 60_000,
  killSignal: 'SIGKILL',
});
if (r.error && /ETIMEDOUT/.test(String(r.error))) {
  console.error(
    `run-tests: the run exceeded ${limitMin} minutes and was stopped — a test file did not exit (an open handle?)`,
  );
  process.exit(1);
}
process.exit(r.status ?? 1);
