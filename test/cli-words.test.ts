// The command word as a person types it: a misspelt command is said to be one, with the nearest
// command (exit 2), while a path that exists is still a run dir; `version`; a bad --inject is refused
// before anything is started or written; every exit code is in --help.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXIT_CODES, editDistance, unknownCommand } from '../src/cli.js';

const bin = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-cli-words-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
const cli = (args: string[], cwd = tmp) =>
  spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });

test('nsa-top stauts: unknown command, did you mean status?, exit 2 — but a dir named stauts is a run dir', () => {
  const r = cli(['stauts']);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(
    r.stderr,
    "nsa-top: unknown command 'stauts' — did you mean status? (nsa-top --help lists the commands)\n",
  );
  const far = cli(['xyzzy']);
  assert.equal(far.status, 2);
  assert.match(far.stderr, /^nsa-top: unknown command 'xyzzy', and no run dir of that name here/);
  // a path that exists goes to the cockpit's own parsing (here: its --version)
  mkdirSync(join(tmp, 'stauts'));
  const dir = cli(['stauts', '--version']);
  assert.deepEqual([dir.status, dir.stdout, dir.stderr], [0, 'nsa-top 0.1.0\n', '']);
  assert.equal(cli(['version']).stdout, 'nsa-top 0.1.0\n');
  // pure parts: a swap is one edit; paths and options are never commands
  assert.equal(editDistance('stauts', 'status'), 1);
  assert.equal(
    unknownCommand('./x', () => false),
    null,
  );
  assert.equal(
    unknownCommand('runs/x', () => false),
    null,
  );
  assert.match(unknownCommand('relanch', () => false) ?? '', /did you mean relaunch\?/);
});

test('a bad --inject is one line, exit 2, and nothing is started or written (demo and launch)', () => {
  const cwd = join(tmp, 'inject');
  mkdirSync(cwd);
  for (const args of [
    ['demo', '--inject', 'hang@step=abc'],
    ['demo', '--inject', 'leak@mb=20', '--inject', 'nope@step=1'],
    ['launch', '--profile', 'demo', '--', '--inject=leak@mb=0'],
  ]) {
    const r = cli(args, cwd);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /^nsa-top: --inject '.*': .*Nothing was started\.\n$/);
    assert.deepEqual(readdirSync(cwd), [], `${args.join(' ')} created nothing`);
  }
});

test('--help and the README name every exit code', () => {
  const h = cli(['--help']);
  for (const [c] of EXIT_CODES) assert.match(h.stdout, new RegExp(`^  ${c} +\\S`, 'm'));
  // the README's one paragraph on exit codes says each of them, in bold
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const para = readme.slice(readme.indexOf('Exit codes, every command'));
  const end = para.indexOf('\n\n');
  for (const [c] of EXIT_CODES) assert.ok(para.slice(0, end).includes(`**${c}**`), `README: exit code ${c}`);
});
