// Training outlives its supervisor: SIGKILL the supervisor of a live run and the trainer keeps
// stepping (its own session, no pty to hang up); supervisor.json is not believed once its
// supervisor is gone; a relaunch re-adopts the live trainer instead of starting a second copy,
// and the adopted trainer can still be stopped. Real processes throughout (the built nsa-top, the
// fake trainer of supervisor.test.ts). Needs `npm run build` first.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { listProcesses, readProc, verifyProcess } from '../../../src/remote/procs.js';
import { currentActor } from '../../../src/trainer/control/actions.js';
import { launchRun, readSupervisorState, relaunch, stopRun } from '../../../src/trainer/launch/launch.js';
import { spawnSync } from 'node:child_process';
import { tempDir } from '../control/helpers.js';
import { until, lastStep, profilesFile } from './helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake-trainer.mjs', import.meta.url));
const BIN = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));
const leftovers: { pid: number; startTime: string }[] = [];

const budgetDirs: string[] = [];

after(async () => {
  for (const p of leftovers) if (await verifyProcess(host, p).catch(() => false)) process.kill(p.pid, 'SIGKILL');
  for (const d of budgetDirs) rmSync(d, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
});

async function trainersOf(runDir: string): Promise<number[]> {
  return (await listProcesses(host))
    .filter((p) => p.argv.includes(FAKE) && p.argv.includes(runDir) && p.state !== 'Z')
    .map((p) => p.pid);
}

test('SIGKILL of the supervisor: the trainer keeps stepping, supervisor.json says the supervisor is gone, relaunch re-adopts (one trainer), stop still works', async () => {
  const cwd = tempDir('sup-adopt');
  const pf = profilesFile(cwd);
  const { runDir, supervisorPid } = await launchRun(host, { profile: 'fake', profilesFile: pf, cwd });
  const st0 = await until('the trainer', async () => {
    const s = await readSupervisorState(host, runDir);
    return s?.child?.startTime ? s : null;
  });
  leftovers.push(st0.supervisor!, st0.child!);
  assert.equal(st0.supervisor!.pid, supervisorPid);
  const trainer = st0.child!;
  // its own session and process group: nothing the supervisor's death sends reaches it
  const stat = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  assert.equal(Number(stat(trainer.pid)[3]), trainer.pid, 'the trainer leads its own session');
  assert.notEqual(Number(stat(trainer.pid)[3]), Number(stat(supervisorPid)[3]));
  await until('steps', () => lastStep(runDir) >= 3);

  process.kill(supervisorPid, 'SIGKILL');
  await until('the supervisor to die', async () => !(await verifyProcess(host, st0.supervisor!)));
  const s1 = lastStep(runDir);
  await until('steps after the supervisor died', () => lastStep(runDir) > s1 + 3, 15000);
  assert.equal(await verifyProcess(host, trainer), true, 'the same trainer process lives on');

  // supervisor.json still says running on disk; readers check the supervisor's pid + start time
  assert.equal(JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')).state, 'running');
  const gone = (await readSupervisorState(host, runDir))!;
  assert.equal(gone.state, 'failed');
  assert.equal(gone.supervisorGone, true);
  assert.match(gone.note!, /supervisor \(pid \d+\) is gone .*trainer \(pid \d+\) still runs unsupervised/);

  // `nsa-top relaunch`, as the alert tells the operator, re-adopts the live trainer: same pid, no
  // second copy (live on the real trainer it refused: "the trainer … is still running: stop it first")
  const who = await currentActor(host);
  const cli = spawnSync(process.execPath, [BIN, 'relaunch', runDir, '--yes', '--allow-command', 'node'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(cli.status, 0, cli.stderr);
  assert.match(
    cli.stderr,
    new RegExp(`re-adopts the running trainer \\(pid ${trainer.pid}\\): .*nothing is restarted now`),
  );
  assert.match(cli.stdout, new RegExp(`relaunch ok: re-adopted the running trainer \\(pid ${trainer.pid}\\)`));
  const st2 = (await readSupervisorState(host, runDir))!;
  leftovers.push(st2.supervisor!);
  assert.notEqual(st2.supervisor!.pid, supervisorPid);
  assert.equal(st2.state, 'running');
  assert.deepEqual(st2.child, trainer);
  assert.match(st2.note!, /adopted the running trainer/);
  await new Promise((r) => setTimeout(r, 1500));
  assert.deepEqual(await trainersOf(runDir), [trainer.pid], 'exactly one trainer runs');
  const s2 = lastStep(runDir);
  await until('steps under the new supervisor', () => lastStep(runDir) > s2 + 2);

  // the adopted trainer is stopped through the new supervisor (.HALT, then escalation if needed)
  const stop = await stopRun(host, runDir, who, { reason: 'test over' });
  assert.equal(stop.result, 'started', stop.detail);
  const end = await until(
    'the run to stop',
    async () => {
      const s = await readSupervisorState(host, runDir);
      return s && s.state === 'halted' && !(await verifyProcess(host, s.supervisor!).catch(() => false)) ? s : null;
    },
    30000,
  );
  assert.equal(end.child, null);
  assert.equal(
    await readProc(host, trainer.pid).then((p) => p !== null && p.startTime === trainer.startTime && p.state !== 'Z'),
    false,
    'the trainer stopped',
  );
  assert.deepEqual(await trainersOf(runDir), []);
});

test('the restart budget survives re-adoption: a crash restarted (1 of 2 used), the supervisor SIGKILLed, relaunch re-adopts — still 1 of 2', async () => {
  const cwd = tempDir('sup-budget');
  budgetDirs.push(cwd);
  const pf = profilesFile(cwd);
  const { runDir, supervisorPid } = await launchRun(host, { profile: 'fake', profilesFile: pf, cwd });
  const st0 = await until('the trainer', async () => {
    const s = await readSupervisorState(host, runDir);
    return s?.child?.startTime ? s : null;
  });
  leftovers.push(st0.supervisor!, st0.child!);
  await until('steps', () => lastStep(runDir) >= 3);
  process.kill(st0.child!.pid, 'SIGKILL'); // a crash of the trainer our supervisor started
  const st1 = await until('the restart', async () => {
    const s = await readSupervisorState(host, runDir);
    return s?.restarts === 1 && s.state === 'running' && s.child?.startTime && s.child.pid !== st0.child!.pid
      ? s
      : null;
  });
  leftovers.push(st1.child!);
  process.kill(supervisorPid, 'SIGKILL');
  await until('the supervisor to die', async () => !(await verifyProcess(host, st0.supervisor!)));
  const rec = await relaunch(host, runDir, await currentActor(host), {
    removeStaleHalt: false,
    allowCommand: ['node'],
  });
  assert.equal(rec.result, 'ok', rec.detail);
  const st2 = await until('the re-adoption', async () => {
    const s = await readSupervisorState(host, runDir);
    return s && s.supervisor?.pid !== supervisorPid && s.state === 'running' && /adopted/.test(s.note ?? '') ? s : null;
  });
  leftovers.push(st2.supervisor!);
  assert.deepEqual(st2.child, st1.child, 'the same trainer, re-adopted');
  assert.equal(st2.restarts, 1, 'the restart used before stays used');
  assert.equal(st2.maxRestarts, 2);
  const stop = await stopRun(host, runDir, await currentActor(host), { reason: 'test over' });
  assert.equal(stop.result, 'started', stop.detail);
  await until(
    'the run to stop',
    async () => {
      const s = await readSupervisorState(host, runDir);
      return s && s.state === 'halted' && !(await verifyProcess(host, s.supervisor!).catch(() => false));
    },
    30000,
  );
});
