// LocalHost's poll path, in both of its I/O modes: synchronous calls on local file systems,
// asynchronous ones elsewhere (a hung network mount must not freeze the cockpit's keys). Whatever
// the mode, a poll must report the same listing, bytes, truncation and replacement.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalHost } from '../../src/remote/local/host.js';

for (const mode of ['sync', 'async'] as const) {
  test(`pollDir (${mode} I/O): listing, incremental bytes, truncation, replacement, missing and unreadable paths`, async () => {
    const dir = mkdtempSync(join(tmpdir(), `nsa-local-${mode}-`));
    try {
      const h = new LocalHost({ pollIo: mode });
      const f = join(dir, 'heartbeat_rank0.jsonl');
      writeFileSync(f, 'one\n');
      mkdirSync(join(dir, 'tb'));
      writeFileSync(join(dir, 'tb', 'events.out.tfevents.1'), 'ev');
      let p = await h.pollDir(dir, [{ path: f, offset: 0 }], ['tb', 'nope']);
      assert.deepEqual(
        p.entries!.map((e) => [e.name, e.isDir, e.size]),
        [
          ['heartbeat_rank0.jsonl', false, 4],
          ['tb', true, p.entries![1]!.size],
        ],
      );
      assert.deepEqual(
        p.subdirs.tb!.map((e) => e.name),
        ['events.out.tfevents.1'],
      );
      assert.equal(p.subdirs.nope, null);
      assert.equal(p.reads[0]!.data.toString(), 'one\n');
      assert.equal(p.reads[0]!.stat!.size, 4);

      appendFileSync(f, 'two\n');
      p = await h.pollDir(dir, [{ path: f, offset: 4 }]);
      assert.equal(p.reads[0]!.data.toString(), 'two\n');
      assert.equal(p.reads[0]!.reset, undefined);
      p = await h.pollDir(dir, [{ path: f, offset: 8, maxBytes: 2 }]);
      assert.equal(p.reads[0]!.data.length, 0, 'nothing new: no bytes');

      writeFileSync(f, 'x\n'); // truncated in place
      p = await h.pollDir(dir, [{ path: f, offset: 8 }]);
      assert.equal(p.reads[0]!.reset, 'truncated');
      assert.equal(p.reads[0]!.offset, 0);
      assert.equal(p.reads[0]!.data.toString(), 'x\n');

      writeFileSync(join(dir, 'new'), 'fresh content\n');
      renameSync(join(dir, 'new'), f); // replaced: another inode, even though it is longer
      p = await h.pollDir(dir, [{ path: f, offset: 2, maxBytes: 5 }]);
      assert.equal(p.reads[0]!.reset, 'replaced');
      assert.equal(p.reads[0]!.data.toString(), 'fresh');

      p = await h.pollDir(dir, [
        { path: join(dir, 'absent.csv'), offset: 0 },
        { path: join(dir, 'tb'), offset: 0 },
        { path: f, offset: 5 },
      ]);
      assert.equal(p.reads[0]!.stat, null);
      assert.equal(p.reads[0]!.error, undefined, 'a missing file is not an error');
      assert.match(
        p.reads[1]!.error ?? '',
        /not a regular file \(a directory\)/,
        'a directory is an error on that read only',
      );
      assert.equal(p.reads[2]!.data.toString(), ' content\n');

      assert.equal(await h.stat(join(dir, 'absent')), null);
      assert.equal(await h.stat(join(f, 'below-a-file')), null);
      assert.equal((await h.stat(f))!.size, 14);

      const gone = await h.pollDir(join(dir, 'missing'), [{ path: join(dir, 'missing', 'x'), offset: 0 }]);
      assert.equal(gone.entries, null);
      assert.match(gone.error ?? '', /ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(
    `pollDir (${mode} I/O): a FIFO named like an artifact is reported by name, never opened for a blocking read`,
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), `nsa-fifo-${mode}-`));
      try {
        const h = new LocalHost({ pollIo: mode });
        for (const name of ['training.csv', 'env.json', '.HALT']) execFileSync('mkfifo', [join(dir, name)]);
        writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), '{"ts":1,"msg":"boot"}\n');
        // without O_NONBLOCK the open below waits in the kernel for a writer that never comes
        const p = await h.pollDir(
          dir,
          ['training.csv', 'env.json', '.HALT', 'heartbeat_rank0.jsonl'].map((n) => ({
            path: join(dir, n),
            offset: 0,
          })),
        );
        for (const r of p.reads.slice(0, 3)) assert.match(r.error ?? '', /not a regular file \(a FIFO\)/, r.path);
        assert.equal(p.reads[3]!.data.toString(), '{"ts":1,"msg":"boot"}\n');
        await assert.rejects(h.readFile(join(dir, 'env.json'), 4096), /not a regular file \(a FIFO\)/);
        await assert.rejects(h.readRange(join(dir, '.HALT'), 0), /not a regular file/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
}

test('readRange under a run dir known to be local is answered in place, with the same bytes as through the thread pool', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-local-range-'));
  try {
    const f = join(dir, 'actions.jsonl');
    writeFileSync(f, 'abcdefghij');
    writeFileSync(join(dir, 'empty'), '');
    const auto = new LocalHost();
    // the poll finds the dir local: reads under it go in place from then on
    await auto.pollDir(dir, []);
    assert.equal(await auto.pollIoMode(dir), 'sync');
    const pool = new LocalHost({ pollIo: 'async' });
    for (const h of [auto, pool]) {
      assert.equal((await h.readRange(f, 2, 5)).toString(), 'cde');
      assert.equal((await h.readRange(f, 7)).toString(), 'hij');
      assert.equal((await h.readRange(f, 8, 100)).toString(), 'ij', 'an end past the size stops at the size');
      assert.equal((await h.readRange(f, 20)).length, 0);
      assert.equal((await h.readFile(f, 4)).toString(), 'abcd');
      assert.equal((await h.readFile(join(dir, 'empty'))).length, 0);
      await assert.rejects(h.readFile(join(dir, 'nope')), /ENOENT/);
      await assert.rejects(h.readFile(dir), /not a regular file \(a directory\)/);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('auto I/O: a file system that is not known to be local (here procfs) stays asynchronous', async () => {
  const h = new LocalHost();
  assert.equal(await h.pollIoMode('/proc'), 'async');
  assert.equal(await new LocalHost({ pollIo: 'sync' }).pollIoMode('/proc'), 'sync');
  assert.equal(await new LocalHost({ pollIo: 'async' }).pollIoMode(tmpdir()), 'async');
});

test("pollDir's settled names: a quiet old checkpoint is listed from its last stat, yet a rewrite in place or a replacement shows within 10 polls, a new one at once", async () => {
  const { utimesSync, statSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'nsa-local-settled-'));
  try {
    const old = (Date.now() - 300_000) / 1000;
    for (let k = 1; k <= 30; k++) {
      writeFileSync(join(dir, `checkpoint_step${k * 50}.pt`), 'w'.repeat(k));
      utimesSync(join(dir, `checkpoint_step${k * 50}.pt`), old, old);
    }
    writeFileSync(join(dir, 'training.csv'), 'step,loss\n');
    utimesSync(join(dir, 'training.csv'), old, old);
    const host = new LocalHost();
    const settled = (n: string) => n.startsWith('checkpoint_');
    const entry = async (name: string) =>
      (await host.pollDir(dir, [], [], settled)).entries!.find((e) => e.name === name);
    for (let i = 0; i < 3; i++) await host.pollDir(dir, [], [], settled);
    // a file the caller did not name settled is stat'ed at every poll, however old
    appendFileSync(join(dir, 'training.csv'), '1,2.5\n');
    utimesSync(join(dir, 'training.csv'), old, old);
    assert.equal((await entry('training.csv'))!.size, 'step,loss\n1,2.5\n'.length);
    // old checkpoints rewritten in place (a resumed run's steps again): the directory does not
    // change; most are listed from their last stat at the next poll (a tenth are looked at again
    // each poll), and every one is seen within SETTLED_RECHECK (10) polls
    for (let k = 1; k <= 30; k++) writeFileSync(join(dir, `checkpoint_step${k * 50}.pt`), 'rewritten, longer');
    const rewritten = (es: { name: string; size: number }[]) =>
      es.filter((e) => e.name.startsWith('checkpoint_') && e.size === 'rewritten, longer'.length).length;
    const next = rewritten((await host.pollDir(dir, [], [], settled)).entries!);
    assert.ok(next <= 10, `quiet checkpoints are not stat'ed at every poll: ${next} of 30 seen at once`);
    let polls = 1;
    while (rewritten((await host.pollDir(dir, [], [], settled)).entries!) < 30) {
      polls++;
      assert.ok(polls < 10, 'every one seen within 10 polls');
    }
    // …and while it is young, at every poll
    appendFileSync(join(dir, 'checkpoint_step50.pt'), '+');
    assert.equal((await entry('checkpoint_step50.pt'))!.size, 'rewritten, longer+'.length);
    // a checkpoint replaced by a rename (a new inode under the old name, an old mtime): within 10 polls too
    for (let i = 0; i < 3; i++) await host.pollDir(dir, [], [], settled);
    writeFileSync(join(dir, 'tmp'), 'replaced!');
    utimesSync(join(dir, 'tmp'), old, old);
    renameSync(join(dir, 'tmp'), join(dir, 'checkpoint_step100.pt'));
    const ino = statSync(join(dir, 'checkpoint_step100.pt')).ino;
    polls = 0;
    while ((await entry('checkpoint_step100.pt'))!.ino !== ino) {
      polls++;
      assert.ok(polls < 10, 'the replacement seen within 10 polls');
    }
    assert.equal((await entry('checkpoint_step100.pt'))!.size, 'replaced!'.length);
    // one removed, then back (a poll listed the dir without it) with an old mtime: its new stat at once
    rmSync(join(dir, 'checkpoint_step250.pt'));
    await host.pollDir(dir, [], [], settled);
    writeFileSync(join(dir, 'checkpoint_step250.pt'), 'back again');
    utimesSync(join(dir, 'checkpoint_step250.pt'), old, old);
    assert.equal((await entry('checkpoint_step250.pt'))!.size, 'back again'.length);
    // a new one is there at its first poll, a removed one gone
    writeFileSync(join(dir, 'checkpoint_step1550.pt'), 'new');
    rmSync(join(dir, 'checkpoint_step150.pt'));
    const names = (await host.pollDir(dir, [], [], settled)).entries!.map((e) => e.name);
    assert.ok(names.includes('checkpoint_step1550.pt'));
    assert.ok(!names.includes('checkpoint_step150.pt'));
    // quiet for 15 s is quiet enough (a fast run saves every second or two: a minute of them was
    // stat'ed every poll): most of them listed from their last stat at the next poll
    const recent = (Date.now() - 15_000) / 1000;
    for (let k = 1; k <= 30; k++)
      if (k !== 3 && k !== 5) utimesSync(join(dir, `checkpoint_step${k * 50}.pt`), recent, recent);
    for (let i = 0; i < 3; i++) await host.pollDir(dir, [], [], settled);
    for (let k = 1; k <= 30; k++)
      if (k !== 3 && k !== 5) writeFileSync(join(dir, `checkpoint_step${k * 50}.pt`), 'again, rewritten');
    const again = (await host.pollDir(dir, [], [], settled)).entries!.filter(
      (e) => e.size === 'again, rewritten'.length,
    );
    assert.ok(
      again.length <= 10,
      `checkpoints quiet for 15 s are not stat'ed at every poll: ${again.length} of 28 seen at once`,
    );
    // the listing without `settled` (status, relaunch) is always afresh
    writeFileSync(join(dir, 'checkpoint_step200.pt'), 'fresh look');
    utimesSync(join(dir, 'checkpoint_step200.pt'), old, old);
    assert.equal((await host.list(dir)).find((e) => e.name === 'checkpoint_step200.pt')!.size, 'fresh look'.length);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
