// Without a terminal the cockpit does not crash: stdout piped prints one frame and points to the
// headless form; bad arguments fail with one clear line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BIN } from './pty.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/ddp2-dumps-halt', import.meta.url));

test('stdout piped: one frame of the cockpit, a hint about `nsa-top status`, exit 0', () => {
  const r = spawnSync(process.execPath, [BIN, FIXTURE], { encoding: 'utf8', input: '', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /HALTED/);
  assert.match(r.stdout, /step 31\/400/);
  assert.doesNotMatch(r.stdout, /\x1b\[/, 'no escape sequences into a pipe');
  assert.match(r.stderr, /nsa-top status/);
  assert.doesNotMatch(r.stdout, /READ-ONLY/);
  // NSA_TOP_READ_ONLY=1 is --read-only: the cockpit says so in its header and footer, not only in refusals
  const ro = spawnSync(process.execPath, [BIN, FIXTURE], {
    encoding: 'utf8',
    input: '',
    timeout: 60_000,
    env: { ...process.env, NSA_TOP_READ_ONLY: '1' },
  });
  assert.equal(ro.status, 0, ro.stderr);
  assert.match(ro.stdout, /READ-ONLY/);
  assert.match(ro.stdout, /h halt:read-only/);
});

test('bad input: a missing run dir and an unknown option are one-line errors with exit 2', () => {
  const a = spawnSync(process.execPath, [BIN, '/nonexistent/run'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(a.status, 2);
  assert.match(a.stderr, /run dir not found: \/nonexistent\/run/);
  const b = spawnSync(process.execPath, [BIN, FIXTURE, '--frobnicate'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(b.status, 2);
  assert.match(b.stderr, /unknown option --frobnicate/);
  const c = spawnSync(process.execPath, [BIN, FIXTURE, '--interval', 'soon'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(c.status, 2);
  assert.match(c.stderr, /--interval/);
});
