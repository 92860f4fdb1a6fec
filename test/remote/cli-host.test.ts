// The built binary with --host against a real sshd: the host-key refusal a user sees, the
// --accept-new-host-key path that records the key in ~/.ssh/known_hosts, then a plain reconnect.
// HOME points at a temp dir, so the user's own ~/.ssh is never read or written.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-cli-host-'));
let sshd: TestSshd | null = null;
after(async () => {
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

test('nsa-top watchdog --host: unknown key refused with its fingerprint, accepted with --accept-new-host-key, known afterwards', async () => {
  sshd = await startSshd();
  console.log(`# ssh server under test: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  const home = join(tmp, 'home');
  const runDir = join(tmp, 'run');
  cpSync(FIXTURE, runDir, { recursive: true });
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const args = [
    'watchdog',
    runDir,
    '--once',
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
  ];
  const run = (extra: string[] = []) =>
    spawnSync(process.execPath, [bin, ...args, ...extra], { env, encoding: 'utf8', timeout: 60000 });
  const fp = spawnSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${sshd.dir}/host_ed25519.pub`], {
    encoding: 'utf8',
  }).stdout.split(' ')[1]!;

  const refused = run();
  assert.equal(refused.status, 2, refused.stderr);
  assert.ok(refused.stderr.includes(fp), `the fingerprint is shown: ${refused.stderr}`);
  assert.match(refused.stderr, /--accept-new-host-key/);
  assert.equal(existsSync(join(home, '.ssh', 'known_hosts')), false, 'nothing recorded');

  const accepted = run(['--accept-new-host-key']);
  assert.notEqual(accepted.status, 2, accepted.stderr);
  assert.match(accepted.stdout, /\{/, 'the watchdog printed its decisions');
  assert.match(
    readFileSync(join(home, '.ssh', 'known_hosts'), 'utf8'),
    new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 `),
  );

  const again = run();
  assert.equal(again.status, accepted.status, again.stderr);
});

test('nsa-top status --host --json equals the local status of the same run (but for when and where it was taken)', async () => {
  sshd ??= await startSshd();
  const home = join(tmp, 'home-status');
  const runDir = join(tmp, 'run-status');
  // old mtimes: checkpoints count as complete only once settled, for both readers alike
  cpSync(FIXTURE, runDir, { recursive: true, preserveTimestamps: true });
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const status = (extra: string[]) =>
    spawnSync(process.execPath, [bin, 'status', runDir, '--json', ...extra], { env, encoding: 'utf8', timeout: 60000 });
  const local = status([]);
  assert.equal(local.status, 0, local.stderr);
  const remote = status([
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
    '--accept-new-host-key',
  ]);
  assert.equal(remote.status, 0, remote.stderr);
  const strip = (text: string) => {
    const j = JSON.parse(text) as Record<string, unknown>;
    assert.notEqual(j.host, undefined);
    for (const k of ['takenAt', 'host', 'hostNowMs']) delete j[k];
    return j;
  };
  const r = JSON.parse(remote.stdout) as { host: string; step: number };
  assert.match(r.host, /127\.0\.0\.1/, 'the remote snapshot says where it was taken');
  assert.equal(r.step, 40);
  assert.deepEqual(strip(remote.stdout), strip(local.stdout));
  const bad = status(['--host']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--host needs user@box/);
});
