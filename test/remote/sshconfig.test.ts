// --host parsing, ~/.ssh/config resolution, known_hosts matching and shell quoting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseHostSpec, resolveSshConfig, resolveTarget } from '../../src/remote/ssh/config.js';
import { appendKnownHost, checkHostKey, fingerprint } from '../../src/remote/ssh/knownhosts.js';
import { shJoin, shQuote } from '../../src/remote/quote.js';

test('--host forms', () => {
  assert.deepEqual(parseHostSpec('box'), { user: undefined, host: 'box', port: undefined });
  assert.deepEqual(parseHostSpec('ubuntu@10.0.0.5:2222'), { user: 'ubuntu', host: '10.0.0.5', port: 2222 });
  assert.deepEqual(parseHostSpec('me@[fe80::1]:22'), { user: 'me', host: 'fe80::1', port: 22 });
  assert.deepEqual(parseHostSpec('[::1]'), { user: undefined, host: '::1', port: undefined });
  for (const bad of ['', 'a@', '@box', 'box:port', 'box:70000', 'box; rm -rf ~', '$(id)@box'])
    assert.throws(() => parseHostSpec(bad), /invalid|empty/, bad);
});

test('ssh config: first value wins, patterns with wildcards and negation, Match blocks skipped, Include', () => {
  const home = mkdtempSync(join(tmpdir(), 'nsa-sshcfg-'));
  mkdirSync(join(home, '.ssh', 'conf.d'), { recursive: true });
  writeFileSync(
    join(home, '.ssh', 'conf.d', 'gpu.conf'),
    'Host gpu-*\n  User trainer\n  IdentityFile ~/.ssh/gpu_key\n',
  );
  const cfg = [
    'Include conf.d/*.conf',
    'Host gpu-* !gpu-bad',
    '  HostName %h.cluster.example',
    '  Port 2200',
    'Match host gpu-1',
    '  Port 9999',
    'Host gpu-1',
    '  Port 1111',
    '  User someone-else',
    'Host *',
    '  User fallback',
    '  IdentityFile ~/.ssh/id_default',
    '  IdentitiesOnly yes',
  ].join('\n');
  const r = resolveSshConfig(cfg, 'gpu-1', { home });
  assert.equal(r.user, 'trainer', 'Include came first');
  assert.equal(r.port, 2200, 'first value wins; Match skipped');
  assert.equal(r.hostName, '%h.cluster.example');
  assert.deepEqual(r.identityFiles, ['~/.ssh/gpu_key', '~/.ssh/id_default'], 'IdentityFile accumulates');
  assert.equal(r.identitiesOnly, true);
  const bad = resolveSshConfig(cfg, 'gpu-bad', { home });
  assert.equal(bad.port, undefined, 'negated pattern excludes');
  assert.equal(bad.user, 'trainer');
  // target: command line beats config; tokens expanded; only existing keys kept
  writeFileSync(join(home, '.ssh', 'gpu_key'), 'k');
  const t = resolveTarget('root@gpu-1', { configText: cfg, home, localUser: 'me' });
  assert.equal(t.user, 'root');
  assert.equal(t.hostName, 'gpu-1.cluster.example');
  assert.equal(t.port, 2200);
  assert.deepEqual(t.identityFiles, [join(home, '.ssh', 'gpu_key')]);
  assert.equal(t.label, 'root@gpu-1:2200');
  const t2 = resolveTarget('plain:2022', { configText: '', home, localUser: 'me' });
  assert.equal(t2.user, 'me');
  assert.equal(t2.port, 2022);
  assert.equal(t2.hostName, 'plain');
  assert.throws(
    () => resolveTarget('x', { configText: '', home, identity: join(home, 'missing') }),
    /identity file not found/,
  );
  rmSync(home, { recursive: true, force: true });
});

test('known_hosts: plain, hashed, wildcard, port form, revoked, changed', () => {
  const key = Buffer.concat([
    Buffer.from([0, 0, 0, 11]),
    Buffer.from('ssh-ed25519'),
    Buffer.from([0, 0, 0, 32]),
    Buffer.alloc(32, 7),
  ]);
  const other = Buffer.concat([
    Buffer.from([0, 0, 0, 11]),
    Buffer.from('ssh-ed25519'),
    Buffer.from([0, 0, 0, 32]),
    Buffer.alloc(32, 9),
  ]);
  const b64 = key.toString('base64');
  assert.equal(checkHostKey([`box ssh-ed25519 ${b64}`], 'box', 22, key).status, 'known');
  assert.equal(checkHostKey([`[box]:2222 ssh-ed25519 ${b64}`], 'box', 2222, key).status, 'known');
  assert.equal(
    checkHostKey([`box ssh-ed25519 ${b64}`], 'box', 2222, key).status,
    'unknown',
    'port 22 entry does not cover 2222',
  );
  assert.equal(checkHostKey([`*.example,!bad.example ssh-ed25519 ${b64}`], 'gpu.example', 22, key).status, 'known');
  assert.equal(checkHostKey([`*.example,!bad.example ssh-ed25519 ${b64}`], 'bad.example', 22, key).status, 'unknown');
  const salt = Buffer.alloc(20, 3);
  const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('box').digest('base64')}`;
  assert.equal(checkHostKey([`${hashed} ssh-ed25519 ${b64}`], 'box', 22, key).status, 'known');
  assert.equal(checkHostKey([`${hashed} ssh-ed25519 ${b64}`], 'other', 22, key).status, 'unknown');
  assert.equal(checkHostKey([`box ssh-ed25519 ${other.toString('base64')}`], 'box', 22, key).status, 'changed');
  assert.equal(
    checkHostKey([`box ssh-ed25519 ${b64}`, `@revoked * ssh-ed25519 ${b64}`], 'box', 22, key).status,
    'revoked',
  );
  // a host with a key of another type only is not new: the key is a changed one (OpenSSH's verdict)
  assert.deepEqual(checkHostKey([`box ssh-rsa AAAA`], 'box', 22, key), { status: 'changed', knownTypes: ['ssh-rsa'] });
  assert.deepEqual(checkHostKey([`other ssh-rsa AAAA`], 'box', 22, key), { status: 'unknown' });
  // appended entries are read back, file created 0600 in a new 0700 dir
  const d = mkdtempSync(join(tmpdir(), 'nsa-kh-'));
  const p = join(d, 'ssh', 'known_hosts');
  appendKnownHost(p, 'box', 2222, key);
  assert.equal(statSync(p).mode & 0o777, 0o600);
  assert.equal(statSync(join(d, 'ssh')).mode & 0o777, 0o700);
  assert.equal(checkHostKey([readFileSync(p, 'utf8')], 'box', 2222, key).status, 'known');
  appendKnownHost(p, 'box2', 22, key, true);
  assert.equal(checkHostKey([readFileSync(p, 'utf8')], 'box2', 22, key).status, 'known');
  // fingerprints match ssh-keygen's
  const kf = join(d, 'k');
  spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', kf]);
  const pub = readFileSync(`${kf}.pub`, 'utf8').split(' ');
  const fp = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${kf}.pub`], { encoding: 'utf8' }).split(' ')[1];
  assert.equal(fingerprint(Buffer.from(pub[1]!, 'base64')), fp);
  rmSync(d, { recursive: true, force: true });
});

test('shQuote: any string survives a POSIX shell as one word', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.string({ unit: 'binary' }).filter((s) => !s.includes('\0')),
        { minLength: 1, maxLength: 4 },
      ),
      (args) => {
        const out = execFileSync('sh', ['-c', `for a in ${shJoin(args)}; do printf '%s\\0' "$a"; done`]);
        assert.deepEqual(
          out.toString('utf8').split('\0').slice(0, -1),
          args.map((a) => Buffer.from(a, 'utf8').toString('utf8')),
        );
      },
    ),
    { numRuns: 60 },
  );
  assert.throws(() => shQuote('a\0b'), /NUL/);
  assert.equal(shQuote('plain/path-1.csv'), 'plain/path-1.csv');
  assert.equal(shQuote('A=b'), "'A=b'", 'never an assignment word');
});
