// Channel rationing of SshHost (src/remote/ssh/channels.ts), without a server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChannelLimiter } from '../../src/remote/ssh/channels.js';
import { SshConnectError } from '../../src/remote/ssh/connection.js';

test('at most max channels at once: the next waits for a release, or gives up at its deadline', async () => {
  const l = new ChannelLimiter(2, 'box');
  const g1 = await l.acquire(Date.now() + 1000);
  await l.acquire(Date.now() + 1000);
  await assert.rejects(l.acquire(Date.now() + 50), (e: Error) => {
    assert.ok(e instanceof SshConnectError);
    assert.match(e.message, /no free SSH channel on box \(2 in use\)/);
    return true;
  });
  const third = l.acquire(Date.now() + 5000);
  l.release(g1);
  assert.equal(await third, g1, 'handed over on release, same connection');
  assert.equal(l.opened, 3);
});

test('a new connection: the old channels do not count, and their late release frees nothing', async () => {
  const l = new ChannelLimiter(1, 'box');
  const old = await l.acquire(Date.now() + 1000);
  l.reset();
  const fresh = await l.acquire(Date.now() + 1000);
  assert.notEqual(fresh, old);
  l.release(old);
  await assert.rejects(l.acquire(Date.now() + 50), SshConnectError);
  l.release(fresh);
  await l.acquire(Date.now() + 50);
});

test('a waiter that outlived one wait slice is still the one a release wakes (no dead entry ahead of it)', async () => {
  const l = new ChannelLimiter(1, 'box');
  const g = await l.acquire(Date.now() + 1000);
  let got = false;
  const waiting = l.acquire(Date.now() + 10_000).then((x) => {
    got = true;
    return x;
  });
  await new Promise((r) => setTimeout(r, 1300)); // past its first 1 s slice: it waits again
  l.release(g);
  for (let i = 0; i < 5 && !got; i++) await new Promise((r) => setImmediate(r));
  assert.ok(got, 'woken by the release itself, not by its next timer');
  assert.equal(await waiting, g);
});
