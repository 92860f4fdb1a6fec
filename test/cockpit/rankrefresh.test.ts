// The watchdog's look at each proven rank between two reads of the process table
// (src/cockpit/rankrefresh.ts), on real processes: a busy one and a sleeping one, as the table read
// them, come back as they are now — state, wait channel, CPU % since the last look, RSS, a newer
// `at` — with the table's proof kept; SIGSTOP, SIGCONT and death are a change of life (the table is
// read that round), and only the table the look was taken against is refreshed.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { RankRefresher } from '../../src/cockpit/rankrefresh.js';
import type { Host } from '../../src/remote/host.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { readProc } from '../../src/remote/procs.js';
import type { RunProcesses } from '../../src/remote/types.js';

const kids: ChildProcess[] = [];
function child(cmd: string, ...args: string[]): ChildProcess {
  const c = spawn(cmd, args, { stdio: 'ignore' });
  kids.push(c);
  return c;
}
test.after(() => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
});

async function waitFor<T>(what: string, f: () => T | null | undefined | false, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('a busy and a sleeping rank refreshed from their own stat; stopped, continued and dead ranks are a change', async () => {
  const host = new LocalHost();
  const busy = child(process.execPath, '-e', 'for (;;) {}');
  const idle = child('sleep', '60');
  const info = async (c: ChildProcess) => {
    const p = await readProc(host, c.pid!);
    if (!p) throw new Error(`no process ${c.pid}`);
    return p;
  };
  const table = async (): Promise<RunProcesses> => ({
    at: Date.now(),
    launcher: null,
    ranks: [
      { rank: 0, localRank: 0, proc: await info(busy), gpuMemMiB: null, gpuUuid: null, source: 'environ' },
      { rank: 1, localRank: 1, proc: await info(idle), gpuMemMiB: null, gpuUuid: null, source: 'environ' },
    ],
    unknown: [],
  });
  const t0 = await table();
  const r = new RankRefresher();
  assert.equal(r.look({ kind: 'ssh' } as Host, t0), null, 'another host: not refreshed this way');
  assert.equal(r.look(host, null), null, 'no table yet');

  // the busy rank uses a core; give it a moment of CPU to measure
  const busyOf = (p: RunProcesses) => p.ranks.find((x) => x.rank === 0)!.proc;
  const idleOf = (p: RunProcesses) => p.ranks.find((x) => x.rank === 1)!.proc;
  await new Promise((res) => setTimeout(res, 400));
  let now = Date.now();
  const look = r.look(host, t0, now)!;
  assert.equal(look.changed, false);
  const t1 = look.apply(t0);
  assert.notEqual(t1, t0);
  assert.equal(t1.at, now, 'the look is a look of its own (the straggler view counts it)');
  assert.equal(busyOf(t1).pid, busy.pid);
  assert.equal(busyOf(t1).startTime, busyOf(t0).startTime, 'the proof kept');
  assert.deepEqual(busyOf(t1).argv, busyOf(t0).argv);
  assert.ok(busyOf(t1).cpuPct! > 10, `the busy rank's CPU since the table: ${busyOf(t1).cpuPct}`);
  assert.ok(busyOf(t1).cpuTotalS! >= busyOf(t0).cpuTotalS!);
  assert.ok(busyOf(t1).rssKiB! > 1000, `RSS from the stat: ${busyOf(t1).rssKiB}`);
  assert.equal(idleOf(t1).state, 'S', 'the idle rank sleeps');
  assert.ok(idleOf(t1).cpuPct! < 10, `the idle rank's CPU: ${idleOf(t1).cpuPct}`);
  const other = { ...t0 };
  assert.equal(look.apply(other), other, 'another table: left as it is');

  // SIGSTOP: a change of life, not refreshed
  process.kill(busy.pid!, 'SIGSTOP');
  await waitFor('the busy rank stopped', () => ['T', 't'].includes(readStat(busy.pid!)));
  now = Date.now();
  assert.equal(r.look(host, t1, now)!.changed, true, 'stopped');
  // the table read that round says T; the next look agrees with it; SIGCONT is a change again
  const stopped: RunProcesses = { ...(await table()), at: now };
  assert.equal(busyOf(stopped).state, 'T');
  const l2 = r.look(host, stopped)!;
  assert.equal(l2.changed, false, 'stopped, as the table said');
  assert.equal(busyOf(l2.apply(stopped)).state, 'T');
  process.kill(busy.pid!, 'SIGCONT');
  await waitFor('the busy rank runs again', () => !['T', 't'].includes(readStat(busy.pid!)));
  assert.equal(r.look(host, stopped)!.changed, true, 'running again');
  // gone
  idle.kill('SIGKILL');
  await waitFor('the idle rank gone', () => idle.exitCode !== null || idle.signalCode !== null);
  assert.equal(r.look(host, t1)!.changed, true, 'dead');
  // a rank the table saw a zombie, reaped since: no change of life, kept as the table saw it, the
  // others refreshed
  const running = await table().catch(() => null);
  assert.equal(running, null, 'the idle rank is gone (readProc finds nothing)');
  const zombie: RunProcesses = {
    ...t1,
    at: Date.now(),
    ranks: [
      { ...t1.ranks[0]!, proc: await info(busy) },
      { ...t1.ranks[1]!, proc: { ...idleOf(t1), state: 'Z' } },
    ],
  };
  const l3 = r.look(host, zombie)!;
  assert.equal(l3.changed, false, 'dead, as the table said');
  const t3 = l3.apply(zombie);
  assert.equal(idleOf(t3), idleOf(zombie));
  assert.notEqual(busyOf(t3), busyOf(zombie));
  assert.equal(busyOf(t3).pid, busy.pid);
});

function readStat(pid: number): string {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return s.slice(s.lastIndexOf(')') + 2).split(' ')[0]!;
  } catch {
    return 'gone';
  }
}
