// HostStatsReader on the local machine: memory, load and CPU come from /proc every reading, the
// disks (a stat and a statfs through the thread pool each) only every localDisksEveryMs, and at once
// when the directories asked change. In-process, no child process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalHost } from '../../src/remote/local/host.js';
import { HostStatsReader, parseMeminfo } from '../../src/remote/hoststats.js';

test('local host stats: /proc every reading, the disks on their own slower cadence and at once for new directories', async (t) => {
  if (process.platform !== 'linux') {
    t.skip('needs Linux /proc');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-hoststats-'));
  const gone = join(dir, 'run');
  mkdirSync(gone);
  try {
    const slow = new HostStatsReader(new LocalHost(), { localEveryMs: 0, localDisksEveryMs: 60_000 });
    const a = (await slow.read([{ path: gone, role: 'run dir' }]))!;
    assert.ok(a.memTotalMiB! > 0 && a.memAvailMiB! > 0, 'memory read');
    assert.ok(a.load && a.load.every((x) => x >= 0), 'load read');
    assert.equal(a.disks.length, 1);
    assert.deepEqual(a.errors, []);
    rmSync(gone, { recursive: true });
    // the disks within their cadence: the last reading, not a stat of a directory now gone
    const b = (await slow.read([{ path: gone, role: 'run dir' }]))!;
    assert.equal(b.disks.length, 1, 'disks reused within localDisksEveryMs');
    assert.deepEqual(b.errors, []);
    assert.ok(b.cpuPct === null || (b.cpuPct >= 0 && b.cpuPct <= 100), 'CPU % between two readings');
    // other directories asked: read at once
    const c = (await slow.read([{ path: gone, role: 'checkpoints' }]))!;
    assert.equal(c.disks.length, 0);
    assert.match(c.errors.join('; '), /disk of checkpoints not readable \(ENOENT\)/);
    // and its error stays with the reused reading
    const d = (await slow.read([{ path: gone, role: 'checkpoints' }]))!;
    assert.match(d.errors.join('; '), /disk of checkpoints not readable/);
    // a reader with no disk cadence sees the directory gone at once
    const fast = new HostStatsReader(new LocalHost(), { localEveryMs: 0, localDisksEveryMs: 0 });
    mkdirSync(gone);
    assert.equal((await fast.read([{ path: gone, role: 'run dir' }]))!.disks.length, 1);
    rmSync(gone, { recursive: true });
    assert.match(
      (await fast.read([{ path: gone, role: 'run dir' }]))!.errors.join('; '),
      /disk of run dir not readable/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('parseMeminfo with keys reads only those lines (a reading every second needs 7 of ~55)', () => {
  const text = 'MemTotal:       2048 kB\nMemFree:         512 kB\nHugePages_Total:       0\nSwapFree:  1024 kB\n';
  assert.deepEqual(parseMeminfo(text, ['MemTotal', 'SwapFree']), { MemTotal: 2, SwapFree: 1 });
  assert.deepEqual(Object.keys(parseMeminfo(text)).sort(), ['HugePages_Total', 'MemFree', 'MemTotal', 'SwapFree']);
});
