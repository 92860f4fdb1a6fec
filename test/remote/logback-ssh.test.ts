// The Log's scroll-back and `o` over SSH (a real loopback sshd, test/helpers/sshd.ts): the log is read
// backwards by byte ranges through the SshHost, exactly as locally (same lines, same offsets, the new
// lines counted); the pager gets a private local copy (0600, in a 0700 dir, gone after it exits) with
// the terminal suspended and resumed around it; a pager that is not there says so.
import assert from 'node:assert/strict';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import type { SshHost } from '../../src/remote/ssh/host.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { LogBack } from '../../src/trainer/run/logback.js';
import { makePager } from '../../src/commands/pager.js';

let sshd: TestSshd;
let host: SshHost;
const tmp = mkdtempSync(join(tmpdir(), 'nsa-logback-ssh-'));
const local = new LocalHost();

before(async () => {
  sshd = await startSshd();
  host = await sshd.connect({ watchIntervalMs: 250 });
});
after(async () => {
  await host?.close();
  await sshd?.stop();
  await local.close();
  rmSync(tmp, { recursive: true, force: true });
});

const line = (i: number) => `[train] step ${i} | loss ${(5 - i / 1e5).toFixed(5)} | ${'é'.repeat(i % 7)}`;

test('over SSH the scroll-back reads the same lines at the same offsets as locally, and counts new ones', async () => {
  const f = join(tmp, 'train.log');
  writeFileSync(f, Array.from({ length: 15_000 }, (_, i) => line(i) + '\n').join(''));
  const remote = new LogBack(host);
  const near = new LogBack(local);
  const t0 = Date.now();
  await remote.open(f, 5000);
  console.log(`# ${sshd.kind}: ${remote.get().lines.length} lines over SSH in ${Date.now() - t0} ms`);
  await near.open(f, 5000);
  // over SSH a read is larger (1 MiB: one remote command): where both read, the same lines at the same offsets
  const same = (what: string) => {
    const [a, b] = [remote.get().lines, near.get().lines];
    const n = Math.min(a.length, b.length);
    assert.ok(n > 0);
    assert.deepEqual(a.slice(a.length - n), b.slice(b.length - n), what);
  };
  same('the same lines at the same byte offsets');
  assert.ok(remote.get().lines.length >= 5000);
  await Promise.all([remote.older(8000), near.older(8000)]);
  same('older lines, read back by byte ranges');
  assert.ok(remote.get().atStart, 'the whole 15,000-line log is under the cap');
  appendFileSync(f, Array.from({ length: 12 }, (_, i) => line(15_000 + i) + '\n').join(''));
  await remote.refresh();
  await near.refresh();
  const p = remote.get();
  assert.equal(p.lines.length + p.after, 15_012, 'every line, the 12 new ones too');
  assert.equal(p.lines[p.lines.length - 1]!.text, line(15_011));
  same('the new lines, as locally');
  assert.equal(p.error, null);
});

test('o over SSH: the pager reads a private local copy, the terminal is handed over and back, the copy is gone', async () => {
  const f = join(tmp, 'stackdump_1700000000.txt');
  writeFileSync(
    f,
    'Signal 10 at 1700000000\nThread 0x1 (most recent call first):\n  File "train.py", line 1 in main\n',
  );
  const rec = join(tmp, 'pager-rec');
  const pager = join(tmp, 'pager.sh');
  // records its argument, the copy's mode and its dir's mode, and the copy's bytes
  writeFileSync(
    pager,
    `#!/bin/sh\n{ printf '%s\\n' "$1"; stat -c %a "$1"; stat -c %a "$(dirname "$1")"; } > '${rec}'\ncat "$1" >> '${rec}'\n`,
  );
  chmodSync(pager, 0o755);
  const calls: string[] = [];
  const term = { suspend: () => calls.push('suspend'), resume: () => calls.push('resume') };
  const was = process.env.PAGER;
  process.env.PAGER = pager;
  try {
    const why = await makePager(host, term)({ path: f, what: 'dump' });
    assert.equal(why, null);
    const [copy, mode, dirMode, ...rest] = readFileSync(rec, 'utf8').split('\n');
    assert.notEqual(copy, f, 'not the remote path: a local copy');
    assert.match(copy!, /nsa-top-pager-.*\/stackdump_1700000000\.txt$/);
    assert.equal(mode, '600');
    assert.equal(dirMode, '700');
    assert.equal(rest.join('\n'), readFileSync(f, 'utf8'), 'the copy holds the file');
    assert.ok(!existsSync(copy!), 'the copy is removed after the pager exits');
    assert.deepEqual(calls, ['suspend', 'resume']);
    // a local file is paged where it is
    await makePager(local, term)({ path: f, what: 'dump' });
    assert.equal(readFileSync(rec, 'utf8').split('\n')[0], f);
    // a pager that is not there: said, and the terminal comes back all the same
    process.env.PAGER = join(tmp, 'no-such-pager');
    const missing = await makePager(local, term)({ path: f, what: 'dump' });
    assert.match(missing ?? '', /was not found: set \$PAGER/);
    assert.deepEqual(calls.slice(-2), ['suspend', 'resume']);
  } finally {
    if (was === undefined) delete process.env.PAGER;
    else process.env.PAGER = was;
  }
});
