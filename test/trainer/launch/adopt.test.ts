// Adopting a run nsa-top did not start: a trainer launched by hand (a python stand-in that follows
// the real trainer's rules: fake_train.py) is looked at once by the built `nsa-top status`, which
// records its launch; after a halt, relaunch starts the same command under the supervisor with
// --resume <newest complete checkpoint>, and training continues. Needs `npm run build` first.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { readAdoption } from '../../../src/trainer/launch/adopt.js';
import { currentActor, readActionLog } from '../../../src/trainer/control/actions.js';
import type { SupervisorState } from '../../../src/trainer/control/types.js';
import { readSupervisorState, relaunch, stopRun } from '../../../src/trainer/launch/launch.js';
import { judgeAdoption } from '../../../src/checks/preflight.js';
import { resolveRunDirs } from '../../../src/trainer/run/rundirs.js';
import { selfCommand } from '../../../src/self.js';
import { tempDir } from '../control/helpers.js';
import { until } from './helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake_train.py', import.meta.url));
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const cleanup: (() => void)[] = [];
after(() => {
  for (const f of cleanup) f();
});

function cli(args: string[], cwd: string) {
  return spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, NSA_TOP_READ_ONLY: '' },
  });
}

/** A trainer repo dir with a config whose out_dir is OUT; started the runbook way, by hand. */
function handLaunch(tag: string, extraArgs: string[] = []) {
  const root = tempDir(tag);
  const repo = join(root, 'repo');
  const out = join(root, 'out');
  mkdirSync(join(repo, 'configs'), { recursive: true });
  writeFileSync(join(repo, 'configs', 'run.yaml'), `train: {steps: 100000, save_every: 10, out_dir: "${out}"}\n`);
  const script = trainerIn(repo);
  const logPath = join(root, 'hand.log');
  const fd = openSync(logPath, 'a');
  const child = spawn(PY, ['-u', script, '--dataset', 'synthetic', ...extraArgs], {
    cwd: repo,
    detached: true,
    stdio: ['ignore', fd, fd],
    env: {
      ...process.env,
      CONFIG: 'configs/run.yaml',
      NSA_FAKE_MARK: 'adopted-env',
      FAKE_STEP_MS: '40',
      API_TOKEN: 'secret',
    },
  });
  closeSync(fd);
  const pid = child.pid!;
  child.unref();
  cleanup.push(() => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  const state: { code: number | null | undefined } = { code: undefined };
  child.on('exit', (c) => (state.code = c));
  // (unref'd: a timer of `until` keeps the loop alive while waiting)
  const exited = until('the hand-launched trainer to exit', () =>
    state.code !== undefined ? { code: state.code } : null,
  ).then((r) => r.code);
  return { root, repo, out, logPath, pid, exited, script };
}

/** The stand-in laid out as the real trainer is (scripts/train_showcase.py in its repo): nsa-top takes
 *  only a known trainer command for a rank, never any python with the run dir in its environment. */
function trainerIn(repo: string): string {
  const script = join(repo, 'scripts', 'train_showcase.py');
  mkdirSync(join(repo, 'scripts'), { recursive: true });
  copyFileSync(FAKE, script);
  return script;
}

const ckpts = (out: string) => readdirSync(out).filter((n) => /^checkpoint_step\d+\.pt$/.test(n));

test('a hand-launched run, seen once by status, halted: relaunch runs the same command under the supervisor with --resume <newest checkpoint>', async () => {
  const run = handLaunch('adopt', ['--resume', '/nonexistent/old.pt']);
  await until('two checkpoints', () => existsSync(join(run.out, 'checkpoint_step20.pt')));
  // looked at once
  const st = cli(['status', run.out, '--json'], run.root);
  assert.ok(st.status === 0 || st.status === 1, st.stderr); // 1: the run's health (exit 2 would be bad input)
  const snap = JSON.parse(st.stdout) as {
    resumeCheckpoint: { path: string; step: number; segment: number; why: string } | null;
  };
  assert.ok(snap.resumeCheckpoint, 'status names a resume checkpoint');
  assert.equal(snap.resumeCheckpoint.segment, 0);
  const rec = (await readAdoption(host, run.out))!;
  assert.ok(rec, 'status recorded the launch in .nsa-top/launch.json');
  assert.equal(rec.launcher.pid, run.pid);
  assert.equal(rec.launcher.cwd, run.repo);
  assert.deepEqual(rec.launcher.argv.slice(1), [
    '-u',
    run.script,
    '--dataset',
    'synthetic',
    '--resume',
    '/nonexistent/old.pt',
  ]);
  assert.equal(rec.config, 'configs/run.yaml');
  assert.equal(rec.env.NSA_FAKE_MARK, 'adopted-env');
  assert.equal(rec.env.API_TOKEN, undefined, 'credentials are never recorded');
  assert.equal(rec.stdout, run.logPath);
  const adoptLog = await readActionLog(host, run.out);
  assert.equal(adoptLog.badLines, 0);
  assert.match(
    adoptLog.records.find((a) => a.action === 'adopt')?.detail ?? '',
    /recorded the launch of a run nsa-top did not start: python pid \d+ in /,
  );
  // halted by hand: exit 0, no checkpoint (the real trainer's .HALT)
  writeFileSync(join(run.out, '.HALT'), '');
  assert.equal(await run.exited, 0);
  const before = new Set(ckpts(run.out));
  const actor = await currentActor(host);
  const rl = await relaunch(host, run.out, actor, { removeStaleHalt: true, judgeAdoption });
  assert.equal(rl.result, 'ok', rl.detail);
  const newest = [...before].sort((a, b) => Number(/\d+/.exec(b)![0]) - Number(/\d+/.exec(a)![0]))[0]!;
  assert.equal(rl.target.resumeFrom, join(run.out, newest));
  const { runDir } = await resolveRunDirs(host, run.out);
  assert.notEqual(runDir, run.out, 'the out_dir now points at the supervised run');
  const sup = (await readSupervisorState(host, runDir)) as SupervisorState;
  cleanup.push(() => {
    if (sup.supervisor)
      try {
        process.kill(sup.supervisor.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
  });
  // the same command, the previous --resume replaced by the newest checkpoint
  const cmd = await until('the trainer command', async () =>
    (await readSupervisorState(host, runDir))?.lastCommand.length
      ? (await readSupervisorState(host, runDir))!.lastCommand
      : null,
  );
  assert.deepEqual(cmd, [
    rec.launcher.argv[0],
    '-u',
    run.script,
    '--dataset',
    'synthetic',
    '--resume',
    join(run.out, newest),
  ]);
  const log = () => readFileSync(join(runDir, 'train.log'), 'utf8');
  await until('the resumed trainer to log', () => /\[train\] resumed from .*checkpoint_step\d+\.pt/.test(log()));
  assert.match(log(), /\[boot\] loading config configs\/run\.yaml/);
  // its steps advance: a new segment's checkpoint_step10.pt is written after the relaunch
  const t0 = Date.now();
  await until('a checkpoint of the new segment', async () => {
    const st2 = await host.stat(join(run.out, 'checkpoint_step10.pt'));
    return st2 && st2.mtimeMs >= t0 - 1000;
  });
  const env = JSON.parse(readFileSync(join(run.out, 'env.json'), 'utf8')) as { env: Record<string, string> };
  assert.equal(env.env.NSA_FAKE_MARK, 'adopted-env', 'the recorded environment came back');
  // ...and a second status names the new segment's lower-numbered file as the one to resume from
  const st3 = JSON.parse(cli(['status', run.out, '--json'], run.root).stdout) as {
    resumeCheckpoint: { step: number; segment: number };
  };
  assert.equal(st3.resumeCheckpoint.segment, 1);
  const stop = await stopRun(host, run.out, actor, { reason: 'test done' });
  assert.equal(stop.result, 'started');
  await until('the supervisor to finish', async () => {
    const s = await readSupervisorState(host, runDir);
    return s && s.state === 'halted' && !(await verifyProcess(host, s.supervisor!).catch(() => false));
  });
});

test('a run nobody recorded: relaunch says to use a profile before asking anything', async () => {
  const root = tempDir('adopt-none');
  const out = join(root, 'out');
  mkdirSync(out);
  writeFileSync(
    join(out, 'checkpoint_step40.pt'),
    Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(100), Buffer.from('PK\x05\x06'), Buffer.alloc(18)]),
  );
  // no --yes and no terminal: before this change it stopped at "confirm with --yes"
  const r = cli(['relaunch', out], root);
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /not started by nsa-top.*launch --profile NAME -- --resume .*checkpoint_step40\.pt/s);
  assert.doesNotMatch(r.stderr, /confirm|Type the run name/);
  assert.equal(existsSync(join(out, '.nsa-top', 'supervisor.json')), false);
});

test("the recorded command: any earlier --resume replaced; torchrun's port read the way torchrun reads it; only run-shaping variables kept", async () => {
  const { withoutResume, masterPortOf, keepEnv } = await import('../../../src/trainer/launch/adopt.js');
  assert.deepEqual(
    withoutResume(['torchrun', '--nproc_per_node=2', 's.py', '--resume', 'a.pt', '--dataset', 'x', '--resume=b.pt']),
    ['torchrun', '--nproc_per_node=2', 's.py', '--dataset', 'x'],
  );
  assert.equal(masterPortOf(['python', '-m', 'torch.distributed.run', '--master_port=29719', 's.py'], {}), 29719);
  assert.equal(masterPortOf(['torchrun', '--master-port', '29001', 's.py'], {}), 29001);
  assert.equal(masterPortOf(['torchrun', 's.py'], { PET_MASTER_PORT: '29400' }), 29400);
  assert.equal(masterPortOf(['torchrun', 's.py'], {}), 29500);
  const env = keepEnv(
    [
      'CONFIG=c.yaml',
      'NSA_HEARTBEAT_EVERY=1',
      'PYTHONPATH=/x:.',
      'HF_TOKEN=hf_x',
      'WANDB_API_KEY=k',
      'NSA_TOP_RUN_DIR=/o',
      'HOME=/root',
      'NCCL_DEBUG=INFO',
      'RANK=0',
      '',
    ].join('\0'),
  );
  assert.deepEqual(env, { CONFIG: 'c.yaml', NSA_HEARTBEAT_EVERY: '1', PYTHONPATH: '/x:.', NCCL_DEBUG: 'INFO' });
});

test("a shared out_dir: a run started by hand after a supervised one is relaunched with the hand command, not the old profile's", async () => {
  const { launchRun } = await import('../../../src/trainer/launch/launch.js');
  const { prepareRelaunch } = await import('../../../src/trainer/launch/launch.js');
  const root = tempDir('adopt-shared');
  const repo = join(root, 'repo');
  const out = join(root, 'out');
  mkdirSync(join(repo, 'configs'), { recursive: true });
  writeFileSync(join(repo, 'configs', 'run.yaml'), `train: {steps: 12, save_every: 5, out_dir: "${out}"}\n`);
  writeFileSync(join(repo, 'configs', 'hand.yaml'), `train: {steps: 100000, save_every: 5, out_dir: "${out}"}\n`);
  const script = trainerIn(repo);
  const pf = join(root, 'p.yaml');
  writeFileSync(
    pf,
    `profiles:\n  prof:\n    trainer: nsa-vibe\n    repo: ${repo}\n    command: [${JSON.stringify(PY)}, -u, ${JSON.stringify(script)}, --from-profile]\n    config: configs/run.yaml\n    procs: 1\n    env: { FAKE_STEP_MS: 20 }\n`,
  );
  const r = await launchRun(host, { profile: 'prof', profilesFile: pf, cwd: root });
  await until('the supervised run to end', async () => {
    const s = await readSupervisorState(host, r.runDir);
    return s && s.state === 'exited' && !(await verifyProcess(host, s.supervisor!).catch(() => false));
  });
  // by hand, the runbook way, into the same out_dir
  const fd = openSync(join(root, 'hand.log'), 'a');
  const child = spawn(PY, ['-u', script, '--by-hand'], {
    cwd: repo,
    detached: true,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, CONFIG: 'configs/hand.yaml', FAKE_STEP_MS: '30' },
  });
  closeSync(fd);
  const pid = child.pid!;
  child.unref();
  cleanup.push(() => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  await until('the hand run to boot', () =>
    readFileSync(join(out, 'heartbeat_rank0.jsonl'), 'utf8').includes(`"pid": ${pid}`),
  );
  const st = cli(['status', out, '--json'], root);
  assert.ok(st.status === 0 || st.status === 1, st.stderr); // 1: the run's health (exit 2 would be bad input)
  assert.equal(
    (await readAdoption(host, out))?.launcher.pid,
    pid,
    'recorded although the out_dir points at a supervised run',
  );
  writeFileSync(join(out, '.HALT'), '');
  await until(
    'the hand run to exit',
    async () =>
      !(await verifyProcess(host, { pid, startTime: (await readAdoption(host, out))!.launcher.startTime }).catch(
        () => false,
      )),
  );
  // the judge is handed down by the caller: without it an adopted run is never relaunched
  assert.match((await prepareRelaunch(host, out)).refusal ?? '', /only after its preflight, and none was given/);
  const prep = await prepareRelaunch(host, out, { judgeAdoption });
  assert.equal(prep.refusal, null);
  assert.ok(prep.adopted, 'the hand command is the one to redo');
  assert.ok(prep.adopted.launcher.argv.includes('--by-hand'));
  assert.equal(prep.adopted.config, 'configs/hand.yaml');
});
