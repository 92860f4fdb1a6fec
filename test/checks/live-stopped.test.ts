// A stopped rank under the watchdog's loop at --interval 1, once the run has been calm long enough
// for the process table to be on its slow cadence (src/cockpit/peekcadence.ts: every 15 s while the
// run is RUNNING without an alert): SIGSTOP of rank 1 is STALLED, naming rank 1, within a round or
// two — the rank's own stat, looked at every round (src/cockpit/rankrefresh.ts), says T and the table
// is read that round — not 15 s later, and never only at the 180 s stall floor (the step alone would
// say nothing sooner). A watchdog asleep between rounds
// of --interval 60 ends at once on SIGTERM.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { lines, start, tmp, waitFor } from './live-helpers.js';

test('watchdog --interval 1: a rank stopped (SIGSTOP) during a calm run is STALLED and named within ~2 s', async () => {
  const dir = tmp();
  const trainer = start(['train', '--out', dir, '--steps', '100000', '--ranks', '2', '--log-every', '5']);
  const wd = start(['watchdog', dir, '--interval', '1', '--no-gpu']);
  // a second watchdog on a long interval: between its rounds it sleeps 60 s (the stall deadline is
  // further off), and SIGTERM must end that sleep at once, not at its end
  const slow = start(['watchdog', dir, '--interval', '60', '--no-gpu', '--no-record']);
  await waitFor('RUNNING', () => lines(wd.out()).some((l) => l.event === 'state' && l.state === 'RUNNING'), 60_000);
  await waitFor('RUNNING (60 s)', () => lines(slow.out()).some((l) => l.event === 'state'), 60_000);
  // calm for a few rounds: the table is on its slow cadence (every 15 s) by now, not read every round
  await new Promise((r) => setTimeout(r, 3000));
  const signalled = Date.now();
  slow.child.kill('SIGTERM');
  assert.equal(await slow.done, 0, 'exit 0 on a signal');
  const exit = lines(slow.out()).find((l) => l.event === 'exit');
  assert.equal(exit?.['reason'], 'signal');
  assert.ok(
    Date.now() - signalled < 15_000,
    `ended ${Date.now() - signalled} ms after SIGTERM, not at the end of its sleep`,
  );
  const pid = (
    JSON.parse(readFileSync(join(dir, 'heartbeat_rank1.jsonl'), 'utf8').trim().split('\n').at(-1)!) as { pid: number }
  ).pid;
  // our own rank: its environment names this run dir (checked before the signal)
  assert.ok(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`NSA_TOP_RUN_DIR=${dir}`));
  const before = lines(wd.out()).length;
  const stoppedAt = Date.now();
  process.kill(pid, 'SIGSTOP');
  try {
    const st = await waitFor(
      'STALLED naming rank 1',
      () =>
        lines(wd.out())
          .slice(before)
          .find((l) => l.event === 'state' && l.state === 'STALLED' && /rank 1/.test(String(l['why']))),
      30_000,
    );
    const latencyS = ((st['ts'] as number) - stoppedAt) / 1000;
    console.log(`stopped rank named STALLED ${latencyS.toFixed(2)} s after SIGSTOP: ${String(st['why'])}`);
    // the watchdog's own clock at the line; the table's cadence alone would make this up to 15 s
    assert.ok(latencyS < 4, `named ${latencyS.toFixed(2)} s after the stop`);
  } finally {
    // the watchdog and the launcher now; the ranks (proven ours by their environment) in live-helpers' after()
    process.kill(pid, 'SIGCONT');
    wd.child.kill('SIGKILL');
    trainer.child.kill('SIGKILL');
  }
});
