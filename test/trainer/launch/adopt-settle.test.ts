// A relaunch of a run started by hand waits for its recorded launcher when that is all that is left:
// torch 1.x's launcher looks at its ranks every 5 s and lives on for up to 5 s after they leave on
// .HALT, while status already says HALTED. Seen live on the real trainer: relaunch in those seconds
// was refused "the run is still running (pid N)". Real processes stand in for launcher and rank.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { settledAdoptionFacts, type AdoptionRecord } from '../../../src/trainer/launch/adopt.js';

const host = new LocalHost();
const kids: ChildProcess[] = [];
after(() => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
});

async function proc(seconds: number) {
  const c = spawn('sleep', [String(seconds)], { stdio: 'ignore' });
  kids.push(c);
  const info = await readProc(host, c.pid!);
  return { pid: c.pid!, startTime: info!.startTime };
}

function record(launcher: { pid: number; startTime: string }, ranks: { pid: number; startTime: string }[]) {
  return {
    kind: 'adopted',
    version: 1,
    outDir: '/tmp',
    recordedAt: Date.now(),
    recordedBy: 'test',
    host: 'local',
    launcher: { ...launcher, argv: ['/bin/sleep'], cwd: '/tmp', kind: 'python' },
    ranks: ranks.map((r, i) => ({ rank: i, ...r })),
    env: {},
    config: null,
    procs: ranks.length,
    stdout: null,
  } satisfies AdoptionRecord;
}

test('the launcher alone, exiting: the relaunch facts wait for it; a live rank or a launcher that stays is still running', async () => {
  const goneRank = await proc(0.1);
  await new Promise((r) => setTimeout(r, 300));
  // the launcher leaves 1.5 s after its ranks: no longer alive once it has been waited for
  const exiting = await proc(1.5);
  const t0 = Date.now();
  const f = await settledAdoptionFacts(host, record(exiting, [goneRank]), 10_000);
  assert.deepEqual(f.alive, []);
  assert.ok(Date.now() - t0 >= 1000, 'it waited');
  // a launcher that does not leave within the wait is the run still running
  const stays = await proc(60);
  assert.deepEqual((await settledAdoptionFacts(host, record(stays, [goneRank]), 800)).alive, [stays.pid]);
  // a live rank is not waited for: the run runs
  const rank = await proc(60);
  const t1 = Date.now();
  assert.deepEqual(
    (await settledAdoptionFacts(host, record(stays, [rank]), 10_000)).alive.sort(),
    [stays.pid, rank.pid].sort(),
  );
  assert.ok(Date.now() - t1 < 2000, 'no wait while a rank lives');
});
