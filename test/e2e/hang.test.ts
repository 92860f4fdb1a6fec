// End to end: a rank that hangs (the reference trainer's --inject hang) turns the cockpit's header
// to STALLED and the screen names the rank.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHungRun } from './liverun.js';
import { Cockpit } from './pty.js';

test(
  'an injected hang on rank 1 turns the header to STALLED and names rank 1; halt escalates to SIGKILL on request',
  { timeout: 180_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-hang-'));
    // the trainer without a supervisor (a supervisor would escalate a stuck halt on its own)
    const runDir = join(cwd, 'run');
    const run = startHungRun({ cwd, runDir, hang: 'step=12,rank=1', logEvery: 5, saveEvery: 25 });
    let cockpit: Cockpit | undefined;
    try {
      // the cockpit opens on a run dir that is a run (an empty dir is bad input)
      await run.firstBeat();
      // a short stall floor so the test does not wait the real 180 s (NSA_WATCH_* are honoured)
      // and a short grace after .HALT (a run without a profile: NSA_TOP_HALT_GRACE_S, else 300 s)
      const c = (cockpit = new Cockpit([runDir], {
        cwd,
        cols: 100,
        rows: 30,
        env: { NSA_WATCH_HEARTBEAT_STALL_S: '4', NSA_TOP_HALT_GRACE_S: '8' },
      }));
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
      // h on a rank that cannot see .HALT (stopped, like one stuck in the kernel): escalation is not
      // offered until .HALT has had its grace; then SIGKILL takes a second key press, and the rank goes
      const hb1 = JSON.parse(
        readFileSync(join(runDir, 'heartbeat_rank1.jsonl'), 'utf8').trim().split('\n').at(-1)!,
      ) as { pid: number };
      process.kill(hb1.pid, 'SIGSTOP');
      await c.send('h');
      // n acts once the question has been on screen a moment (its keys are then offered); the run is
      // STALLED here, so halt-after-checkpoint (c) is not offered (no checkpoint will come)
      await c.waitFor(/n halt now \(\.HALT\) {3}esc cancel/, 10_000);
      assert.match(c.screen(), /c \(halt after the next checkpoint\) is not offered: the run is STALLED/);
      await c.send('n');
      await c.waitFor(/rank 1 still running/, 15_000);
      await c.waitFor(
        /SIGINT\/SIGKILL not offered: the ranks have \d+s of their 8s grace left/,
        15_000,
        'no escalation during the grace',
      );
      await c.send('K', 300);
      assert.doesNotMatch(c.screen(), /press K again/, 'K does nothing before the grace has passed');
      await c.waitFor(/still running after the grace: i SIGINT {2}K SIGKILL/, 40_000, 'the escalation offer');
      await c.send('K', 300);
      await c.waitFor(/press K again to SIGKILL/, 5000);
      await c.send('K', 300);
      await c.waitFor(/SIGKILL sent/, 15_000);
      await c.waitFor(/all ranks stopped/, 30_000);
      const log = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8');
      assert.match(log, /"action":"escalate-sigkill","target":\{[^\n]*"result":"ok"/);
    } finally {
      await cockpit?.close(3000);
      run.stop();
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);
