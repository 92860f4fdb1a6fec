// The cockpit over SSH (OpenSSH on loopback): the same frame as locally, read through the SSH Host —
// run files, process table and telemetry all go through it. stdout piped: one frame, then exit.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import { BIN } from './pty.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/ddp2-dumps-halt', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-remote-'));
let sshd: TestSshd | null = null;
after(async () => {
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

test(
  'nsa-top RUN_DIR --host: the remote run in the cockpit, with the host in the header',
  { timeout: 120_000 },
  async () => {
    sshd = await startSshd();
    const runDir = join(tmp, 'run');
    cpSync(FIXTURE, runDir, { recursive: true });
    const target = `${userInfo().username}@127.0.0.1:${sshd.port}`;
    const env = { ...process.env, HOME: join(tmp, 'home'), SSH_AUTH_SOCK: '' };
    const r = spawnSync(
      process.execPath,
      [BIN, runDir, '--host', target, '-i', sshd.userKey, '--accept-new-host-key', '--read-only'],
      { env, encoding: 'utf8', timeout: 90_000 },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /HALTED/);
    assert.match(r.stdout, /step 31\/400/);
    assert.match(r.stdout, new RegExp(`@ ${target.replace(/[.]/g, '\\.')}`), 'the header names the remote host');
    assert.match(r.stdout, /READ-ONLY/);
    assert.match(r.stdout, /all_reduce/, 'stack dumps read over SSH');
    assert.doesNotMatch(r.stdout, /ODD/, 'dumps taken while steps advanced name no odd rank (as the rule says)');
  },
);
