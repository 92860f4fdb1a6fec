// `nsa-top watchdog` as a command: --once on finished fixture runs, bad input exits 2 with one line,
// decisions appended to <run>/.nsa-top/watchdog.jsonl, and a stale .anomaly_type from an earlier
// run is reported but never acted on (no .HALT into a fresh run).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FIXTURES } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-wd-cli-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
cpSync(FIXTURES, join(tmp, 'fx'), { recursive: true });

function wd(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, 'watchdog', ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
}
const lines = (s: string) =>
  s
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

test('--once on the finished fixtures: state and alerts as JSON lines, exit 0, decisions appended to .nsa-top/watchdog.jsonl', () => {
  const dir = join(tmp, 'fx', 'ddp2-dumps-halt');
  const r = wd([dir, '--once', '--no-gpu']);
  assert.equal(r.status, 0, r.stderr);
  const ls = lines(r.stdout);
  assert.deepEqual(
    ls.map((l) => l.event).filter((e) => e !== 'alert'),
    ['start', 'state', 'exit'],
  );
  assert.equal(ls.find((l) => l.event === 'state').state, 'HALTED');
  assert.ok(ls.some((l) => l.event === 'alert' && l.id === 'data:synthetic' && l.severity === 'warning'));
  assert.equal(
    readFileSync(join(dir, '.nsa-top', 'watchdog.jsonl'), 'utf8')
      .trim()
      .split('\n').length,
    ls.length,
  );
  assert.ok(!existsSync(join(dir, '.anomaly_type')), 'nothing critical: nothing written');
});

test('bad input: one line and exit 2', () => {
  for (const [args, env, re] of [
    [['--interval', 'soon'], {}, /--interval needs a number/],
    [['--bogus'], {}, /unknown option --bogus/],
    [[join(tmp, 'missing')], {}, /run dir not found/],
    [[join(tmp, 'fx', 'single'), '--once'], { NSA_WATCH_HEARTBEAT_STALL_S: 'x' }, /NSA_WATCH_HEARTBEAT_STALL_S/],
  ] as [string[], Record<string, string>, RegExp][]) {
    const r = wd(args, env);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  }
});

test('a stale .anomaly_type from an earlier run is reported as a warning and never acted on, even with --halt', () => {
  const dir = join(tmp, 'fx2');
  cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
  writeFileSync(join(dir, '.anomaly_type'), 'heartbeat_stall\n');
  const old = new Date('2020-01-01T00:00:00Z');
  utimesSync(join(dir, '.anomaly_type'), old, old);
  const r = wd([dir, '--once', '--halt', '--no-gpu']);
  const ls = lines(r.stdout);
  const a = ls.find((l) => l.id === 'anomaly-file:heartbeat_stall');
  assert.equal(a?.severity, 'warning');
  assert.ok(!existsSync(join(dir, '.HALT')), 'no .HALT written');
  assert.equal(readFileSync(join(dir, '.anomaly_type'), 'utf8'), 'heartbeat_stall\n', 'left as it was');
});
