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
