// The early SSH connection of a --host command (src/remote/early.ts), without a server process: the
// options read from a command line, the claim (only for the same target and options), and an
// unclaimed connect cut short — against a TCP listener that never speaks SSH, so a process that
// abandoned it would otherwise wait out the 15 s handshake timeout.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { abandonEarly, claimEarly, earlySpecOf, startEarly } from '../../src/remote/early.js';

test('earlySpecOf reads --host, -i and --accept-new-host-key as the commands do; nothing else connects early', () => {
  assert.deepEqual(earlySpecOf(['run', '--host', 'u@box:2222', '-i', 'k', '--json']), {
    host: 'u@box:2222',
    identity: 'k',
    acceptNewHostKey: false,
  });
  assert.deepEqual(earlySpecOf(['--host=box', '--identity=/k', '--accept-new-host-key']), {
    host: 'box',
    identity: '/k',
    acceptNewHostKey: true,
  });
  assert.equal(earlySpecOf(['run', '--json']), null, 'no --host');
  assert.equal(earlySpecOf(['--host', 'local']), null, 'this machine');
  assert.equal(earlySpecOf(['--host', 'a', '--host', 'b']), null, 'given twice: the command says so');
  assert.equal(earlySpecOf(['--host', 'box', '--help']), null, '--help connects nowhere');
  assert.equal(earlySpecOf(['--host', 'box', '-i', 'a', '-i', 'b']), null);
});

test('claimed only for the same target and options, once; an unclaimed connect is cut short', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'nsa-early-'));
  const key = join(tmp, 'id');
  writeFileSync(key, 'not parsed before the handshake\n');
  const socks = new Set<Socket>();
  const closed = new Set<Socket>();
  const silent = createServer((s) => {
    socks.add(s);
    s.resume();
    s.on('close', () => closed.add(s));
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  const port = (silent.address() as { port: number }).port;
  try {
    const spec = { host: `u@127.0.0.1:${port}`, identity: key, acceptNewHostKey: false };
    startEarly(spec);
    assert.equal(claimEarly({ ...spec, acceptNewHostKey: true }), null, 'other options: not this one');
    assert.equal(claimEarly({ ...spec, port: 22 }), null, 'a spec with more in it: not this one');
    const mine = claimEarly(spec);
    assert.ok(mine, 'the same spec takes it');
    assert.equal(claimEarly(spec), null, 'once');
    // the claimer's connect fails as its own would (the server hangs up)
    await new Promise<void>((r) => {
      const wait = () => (socks.size >= 1 ? r() : setTimeout(wait, 10));
      wait();
    });
    for (const s of socks) s.destroy();
    await assert.rejects(mine, /closed during the handshake|cannot reach|lost before handshake/);

    // a second process-start: nobody claims it, and abandoning it ends the connect at once
    startEarly(spec);
    await new Promise<void>((r) => {
      const t0 = Date.now();
      const wait = () => (socks.size >= 2 || Date.now() - t0 > 10_000 ? r() : setTimeout(wait, 10));
      wait();
    });
    const t0 = Date.now();
    abandonEarly();
    // the abandoned connect closes its socket: the listener sees it end
    assert.equal(socks.size, 2, 'the second early connect reached the listener');
    await new Promise<void>((r) => {
      const wait = () => (closed.size >= 2 || Date.now() - t0 > 10_000 ? r() : setTimeout(wait, 10));
      wait();
    });
    assert.ok(Date.now() - t0 < 3000, `cut short in ${Date.now() - t0} ms, not after the handshake timeout`);
  } finally {
    for (const s of socks) s.destroy();
    silent.close();
    rmSync(tmp, { recursive: true, force: true });
  }
});
