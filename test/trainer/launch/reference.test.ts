// End to end with the real workload: nsa-top's reference trainer (`nsa-top train`, 2 ranks) under
// the detached supervisor. Needs `npm run build` first. Small model and batch to stay cheap.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { listProcesses, verifyProcess } from '../../../src/remote/procs.js';
import { findRunProcesses } from '../../../src/trainer/run/processes.js';
import { currentActor, dumpAll, readActions } from '../../../src/trainer/control/actions.js';
import type { SupervisorState } from '../../../src/trainer/control/types.js';
import { launchRun, readSupervisorState, relaunch, stopRun } from '../../../src/trainer/launch/launch.js';
import { selfCommand } from '../../../src/self.js';
import { tempDir } from '../control/helpers.js';
import { until } from './helpers.js';

const host = new LocalHost();
const supervisors: NonNullable<SupervisorState['supervisor']>[] = [];
after(async () => {
  for (const s of supervisors) if (await verifyProcess(host, s).catch(() => false)) process.kill(s.pid, 'SIGTERM');
});

function profiles(dir: string, procs: number, maxRestarts = 2): string {
  const f = join(dir, 'profiles.yaml');
  writeFileSync(
    f,
    `profiles:
  ref:
    trainer: reference
    procs: ${procs}
    steps: 100000
    save_every: 5
    log_every: 1
    args: [--seq-len, "64", --batch-size, "4"]
    env: { NSA_HEARTBEAT_EVERY: 1 }
    restart: { max_restarts: ${maxRestarts}, backoff_s: 0.2, backoff_factor: 1 }
    stop: { halt_grace_s: 60, sigint_grace_s: 10 }
`,
  );
  return f;
}

function records(dir: string): { msg: string; step: number }[] {
  const p = join(dir, 'heartbeat_rank0.jsonl');
  if (!existsSync(p)) return [];
  return readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { msg: string; step: number });
}

const boots = (dir: string) => records(dir).filter((r) => r.msg === 'boot').length;

/** progress steps of rank 0 since its newest boot */
function progress(dir: string): number[] {
  const recs = records(dir);
  const boot = recs.map((r) => r.msg).lastIndexOf('boot');
  return recs
    .slice(boot + 1)
    .filter((r) => r.msg === 'progress')
    .map((r) => r.step);
}

const settled = (runDir: string) =>
  until(
    'the supervisor to finish',
    async () => {
      const s = await readSupervisorState(host, runDir);
      return s &&
        ['halted', 'exited', 'failed'].includes(s.state) &&
        !(await verifyProcess(host, s.supervisor!).catch(() => false))
        ? s
        : null;
    },
    90000,
  );

async function track(runDir: string): Promise<void> {
  const s = await until('supervisor state', () => readSupervisorState(host, runDir));
  if (s.supervisor) supervisors.push(s.supervisor);
}

test('reference trainer, 2 ranks: detached launch survives its launcher; HALT is not restarted; relaunch resumes and steps continue', async (t) => {
  const cwd = tempDir('ref-e2e');
  const pf = profiles(cwd, 2);
  const launcher = spawn(
    selfCommand()[0]!,
    [...selfCommand().slice(1), 'launch', '--profile', 'ref', '--profiles', pf],
    { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  launcher.stdout!.on('data', (b) => (out += b));
  launcher.stderr!.on('data', (b) => (out += b));
  const runDir = await until('the launch output', () => /run dir\s+(\S+)/.exec(out)?.[1]);
  await track(runDir);
  try {
    process.kill(-launcher.pid!, 'SIGKILL');
  } catch {
    /* already exited */
  }
  const before = await until('training steps', () => progress(runDir).length >= 3 && progress(runDir).at(-1));
  await until('more steps after the launcher is gone', () => (progress(runDir).at(-1) ?? 0) > before + 1);
  assert.ok(existsSync(join(runDir, 'heartbeat_rank1.jsonl')), 'two ranks');

  const who = await currentActor(host);
  // d: one stack dump per rank of the live run. The ranks are the launcher's children (the
  // supervisor's own record of the launcher: pid + start time); findRunProcesses should agree.
  const sup = (await readSupervisorState(host, runDir))!;
  const table = await listProcesses(host);
  const kids = table.filter((p) => p.ppid === sup.child!.pid).sort((a, b) => a.pid - b.pid);
  assert.equal(kids.length, 2, 'two rank processes under the launcher');
  const found = await findRunProcesses(host, runDir, { heartbeatPids: [] }).catch(() => null);
  if (found?.ranks.length !== 2)
    t.diagnostic(
      `findRunProcesses found ${found?.ranks.length ?? 'no'} ranks (argv ${JSON.stringify(kids[0]!.argv.slice(0, 4))})`,
    );
  const dump = await dumpAll(
    host,
    runDir,
    kids.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime })),
    who,
  );
  assert.deepEqual(
    dump.perRank.map((r) => r.status),
    ['dumped', 'dumped'],
  );
  assert.notEqual(dump.perRank[0]!.file, dump.perRank[1]!.file);
  assert.equal((await stopRun(host, runDir, who)).result, 'started');
  const halted = await settled(runDir);
  assert.equal(halted.state, 'halted');
  assert.equal(halted.exitCodes.length, 1, 'a HALT is not restarted');
  const haltStep = progress(runDir).at(-1)!;
  const ckpts = readdirSync(runDir)
    .filter((n) => /^checkpoint_step\d+\.pt$/.test(n))
    .map((n) => Number(/\d+/.exec(n)![0]));
  const newest = Math.max(...ckpts);
  assert.ok(newest >= haltStep, `the reference trainer checkpoints on HALT (newest ${newest}, last step ${haltStep})`);

  const bootsBefore = boots(runDir);
  const rel = await relaunch(host, runDir, who, { removeStaleHalt: true });
  assert.equal(rel.result, 'ok', rel.detail);
  assert.equal(rel.target.resumeStep, newest);
  await track(runDir);
  const resumed = await until(
    'steps after the relaunch',
    () => boots(runDir) > bootsBefore && progress(runDir).length >= 2 && progress(runDir),
  );
  assert.equal(resumed[0], newest + 1, `steps continue after ${newest}, got ${resumed.join(',')}`);
  await stopRun(host, runDir, who);
  assert.equal((await settled(runDir)).state, 'halted');
  const acts = (await readActions(host, runDir)).map((a) => `${a.action}:${a.result}`);
  assert.deepEqual(acts, [
    'launch:ok',
    'dump:ok',
    'halt:ok',
    'remove-stale-halt:ok',
    'relaunch:started',
    'relaunch:ok',
    'halt:ok',
  ]);
});

test('reference trainer: crashes are restarted from the newest complete checkpoint, up to the limit', async () => {
  // the reference trainer fires each crash injection once per run dir (a restart resumes past it)
  const cwd = tempDir('ref-crash');
  const r = await launchRun(host, {
    profile: 'ref',
    profilesFile: profiles(cwd, 1, 1),
    cwd,
    extraArgs: ['--inject', 'crash@step=8', '--inject', 'crash@step=12'],
  });
  await track(r.runDir);
  const st = await settled(r.runDir);
  assert.equal(st.state, 'failed');
  assert.equal(st.restarts, 1);
  assert.equal(st.exitCodes.length, 2);
  assert.ok(st.exitCodes.every((e) => e.code !== 0));
  const log = readFileSync(join(r.runDir, 'train.log'), 'utf8');
  assert.equal((log.match(/resuming from .*checkpoint_step5\.pt/g) ?? []).length, 1, log.slice(-2000));
  assert.match(log, /crash@step=12/);
  assert.match(st.note ?? '', /its 1 restart is used up/);
});
