// End to end: a rank that hangs (the reference trainer's --inject hang) turns the cockpit's header
// to STALLED and the screen names the rank.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killRecorded, runPids } from './cleanup.js';
import { Cockpit } from './pty.js';

test('an injected hang on rank 1 turns the header to STALLED and names rank 1', { timeout: 180_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-hang-'));
  // a short stall floor so the test does not wait the real 180 s (NSA_WATCH_* are honoured)
  const c = new Cockpit(['demo', '--steps', '400', '--inject', 'hang@step=12,rank=1', '--leave-running'], { cwd, cols: 100, rows: 30, env: { NSA_WATCH_HEARTBEAT_STALL_S: '4' } });
  let runDir = '';
  try {
    runDir = (await c.waitRaw(/started \(2 ranks\) in (\S+)/, 60_000))[1]!;
    await c.waitFor(/RUNNING/, 60_000);
    const m = await c.waitFor(/^ STALLED .*$/m, 90_000, 'the header turns STALLED');
    assert.match(m[0], /STALLED/);
    // both ranks go silent (rank 0 waits for rank 1 in the collective): the heartbeats cannot say
    // which one hangs. A stack dump of every rank does: rank 1 is the odd one, and the header says so.
    await c.send('d');
    await c.waitFor(/rank 1 pid \d+ (dumped|did not answer)/, 40_000);
    await c.send('\x1b', 300);
    const named = await c.waitFor(/^ STALLED .*rank 1.*$/m, 30_000, 'the STALLED header names rank 1');
    assert.doesNotMatch(named[0], /rank 0/, named[0]);
    assert.match(c.screen(), /rank 1 is the odd one|ODD: r1/);
  } finally {
    const pids = runDir ? runPids(runDir) : [];
    await c.close(3000);
    killRecorded(pids);
    rmSync(cwd, { recursive: true, force: true });
  }
});
