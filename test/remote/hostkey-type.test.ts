// OpenSSH's accept-new exactly (issue 24 item 8): a host that known_hosts holds a key of any type
// for is never "new". A real loopback sshd presents only an ECDSA host key while known_hosts holds an
// ed25519 key for it: nsa-top refuses it as a changed key, with or without --accept-new-host-key,
// records nothing, and the real OpenSSH client under StrictHostKeyChecking=accept-new says the same.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HostKeyError } from '../../src/remote/ssh/connection.js';
import { resolveTarget } from '../../src/remote/ssh/config.js';
import { SshHost } from '../../src/remote/ssh/host.js';
import { knownHostName } from '../../src/remote/ssh/knownhosts.js';
import { startSshd, type TestSshd } from '../helpers/sshd.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-hostkey-type-'));
let sshd: TestSshd;
let edLine = '';

before(async () => {
  sshd = await startSshd({ hostKeyType: 'ecdsa' });
  console.log(`# ssh server under test: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  // an ed25519 key recorded for the same [127.0.0.1]:port, as if the host had presented it before
  const k = join(tmp, 'old_ed25519');
  const g = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', k], { encoding: 'utf8' });
  assert.equal(g.status, 0, g.stderr);
  const [type, b64] = readFileSync(`${k}.pub`, 'utf8').split(' ');
  edLine = `${knownHostName('127.0.0.1', sshd.port)} ${type} ${b64}\n`;
});
after(async () => {
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

test('the server presents ecdsa where known_hosts holds ed25519: refused as changed, with or without --accept-new-host-key', async () => {
  assert.match(sshd.knownHostsLine(), / ecdsa-sha2-nistp256 /, 'the server presents an ECDSA key');
  const kh = join(tmp, 'kh');
  writeFileSync(kh, edLine);
  const target = resolveTarget(`${userInfo().username}@127.0.0.1:${sshd.port}`, {
    identity: sshd.userKey,
    configText: '',
    home: tmp,
  });
  const base = { target, knownHostsFiles: [kh], knownHostsWritePath: kh, agentSocket: null };
  for (const acceptNewHostKey of [true, false]) {
    // a connection that is wrongly made is closed, so the test fails rather than hangs
    const attempt = SshHost.connect({ ...base, acceptNewHostKey }).then(async (h) => {
      await h.close();
      throw new Error(`connected (acceptNewHostKey ${acceptNewHostKey}): the ecdsa key was taken`);
    });
    await assert.rejects(attempt, (e: unknown) => {
      assert.ok(e instanceof HostKeyError, String(e));
      assert.equal(e.status, 'changed', e.message);
      assert.match(
        e.message,
        /HOST KEY CHANGED .*ecdsa-sha2-nistp256 SHA256:\S+, but known_hosts holds only ssh-ed25519/,
      );
      return true;
    });
  }
  assert.equal(readFileSync(kh, 'utf8'), edLine, 'the new key type was not recorded');

  // control: the same server with no key for the host is new, and accepted under the flag
  const empty = join(tmp, 'kh-empty');
  writeFileSync(empty, '');
  const h = await SshHost.connect({
    ...base,
    knownHostsFiles: [empty],
    knownHostsWritePath: empty,
    acceptNewHostKey: true,
  });
  await h.close();
  assert.match(readFileSync(empty, 'utf8'), / ecdsa-sha2-nistp256 /);
});

test('the CLI says so in one line, exit 2, and the OpenSSH client (accept-new) gives the same verdict', (t) => {
  const home = join(tmp, 'home');
  mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const kh = join(home, '.ssh', 'known_hosts');
  writeFileSync(kh, edLine, { mode: 0o600 });
  const runDir = join(tmp, 'run');
  cpSync(FIXTURE, runDir, { recursive: true });
  const r = spawnSync(
    process.execPath,
    [
      bin,
      'status',
      runDir,
      '--host',
      `${userInfo().username}@127.0.0.1:${sshd.port}`,
      '-i',
      sshd.userKey,
      '--accept-new-host-key',
    ],
    { env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' }, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(r.status, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /HOST KEY CHANGED/);
  assert.equal(readFileSync(kh, 'utf8'), edLine, 'nothing appended');

  const ssh = spawnSync('ssh', ['-V'], { encoding: 'utf8' });
  if (ssh.error) {
    t.skip('no OpenSSH client (ssh) installed: its verdict is not compared');
    return;
  }
  const o = spawnSync(
    'ssh',
    [
      '-F',
      '/dev/null',
      '-i',
      sshd.userKey,
      '-o',
      'BatchMode=yes',
      '-o',
      'StrictHostKeyChecking=accept-new',
      '-o',
      `UserKnownHostsFile=${kh}`,
      '-o',
      'GlobalKnownHostsFile=/dev/null',
      '-p',
      String(sshd.port),
      `${userInfo().username}@127.0.0.1`,
      'true',
    ],
    { encoding: 'utf8', timeout: 30_000, env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' } },
  );
  assert.equal(o.status, 255, `OpenSSH: ${o.stderr}`);
  assert.match(o.stderr, /REMOTE HOST IDENTIFICATION HAS CHANGED/, o.stderr);
  assert.equal(readFileSync(kh, 'utf8'), edLine, 'OpenSSH did not record it either');
});
