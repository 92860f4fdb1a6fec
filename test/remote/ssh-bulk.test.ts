// SshHost.pollDir's bulk first read (the watch loop's `b`: one cat of many small files, cut by the
// sizes find gave) over a real sshd on loopback: a file cat cannot read must not shift the bytes of
// the files after it into the wrong answers. A file unreadable when find looks is left out of the
// cat (find -readable); the gap is a file that becomes unreadable, or vanishes, between the find and
// the cat — and a chmod moves none of the stats checked after the bytes. The sessions' PATH starts
// with a stand-in cat that fails on that one file as cat does (says so, goes on, exits 1), so the
// gap is there every time.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { after, test } from 'node:test';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import type { SshHost } from '../../src/remote/ssh/host.js';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-ssh-bulk-'));
let sshd: TestSshd | null = null;
let host: SshHost | null = null;
after(async () => {
  await host?.close();
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

const realCat = spawnSync('sh', ['-c', 'command -v cat'], { encoding: 'utf8' }).stdout.trim();

test('a file cat could not read in the middle of a bulk read: every file is still answered with its own bytes', async (t) => {
  if (!realCat.startsWith('/')) return t.skip('no cat on PATH to stand in front of');
  const bin = join(tmp, 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'cat'),
    `#!/bin/sh\nrc=0\nfor f in "$@"; do\n  case $f in\n    --) ;;\n    *unreadable*) echo "cat: $f: Permission denied" >&2; rc=1 ;;\n    *) ${realCat} -- "$f" || rc=1 ;;\n  esac\ndone\nexit $rc\n`,
  );
  chmodSync(join(bin, 'cat'), 0o755);
  sshd = await startSshd({ path: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` });
  console.log(`# ssh server under test: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  host = await sshd.connect();
  const dir = join(tmp, 'run');
  mkdirSync(dir);
  // settled files (the bulk read takes only files unchanged for 2 s), each of its own length
  const old = new Date(Date.now() - 3600_000);
  const names = Array.from({ length: 12 }, (_, i) => (i === 5 ? `f${i}_unreadable.jsonl` : `f${i}.jsonl`));
  const content = new Map<string, string>();
  for (const [i, n] of names.entries()) {
    const text = `{"file": ${i}, "pad": "${'x'.repeat(10 + i * 7)}"}\n`.repeat(i + 1);
    content.set(n, text);
    writeFileSync(join(dir, n), text);
    utimesSync(join(dir, n), old, old);
  }
  const poll = await host.pollDir(
    dir,
    names.map((n) => ({ path: join(dir, n), offset: 0 })),
  );
  for (const r of poll.reads) {
    const n = r.path.slice(dir.length + 1);
    assert.equal(r.error, undefined, `${n}: ${r.error}`);
    assert.equal(r.data.toString('utf8'), content.get(n), `${n} answered with its own bytes`);
  }
  assert.equal(poll.reads.length, names.length);
});
