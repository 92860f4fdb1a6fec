// End to end: the built nsa-top launches a detached supervisor; the workload is a stand-in that
// speaks the reference trainer's flags (fake-trainer.mjs). Needs `npm run build` first.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { crc32 } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc, verifyProcess } from '../../../src/remote/procs.js';
import { currentActor, readActions } from '../../../src/trainer/control/actions.js';
import type { SupervisorState } from '../../../src/trainer/control/types.js';
import { launchRun, readSupervisorState, relaunch, stopRun } from '../../../src/trainer/launch/launch.js';
import { selfCommand } from '../../../src/self.js';
import { tempDir } from '../control/helpers.js';
import { until, lastStep, profilesFile } from './helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake-trainer.mjs', import.meta.url));
const supervisors: SupervisorState['supervisor'][] = [];

const runs = new Set<string>();
after(async () => {
  // never leave a supervisor (or its trainer) behind: the trainer has its own session and outlives
  // a killed supervisor, so its process group is killed too (pid + start time from supervisor.json)
  const trainers: { pid: number; startTime: string }[] = [];
  for (const d of runs) {
    try {
      const c = (JSON.parse(readFileSync(join(d, '.nsa-top', 'supervisor.json'), 'utf8')) as SupervisorState).child;
      if (c?.startTime) trainers.push(c);
    } catch {
      /* no state */
    }
  }
  for (const s of supervisors) {
    if (s && (await verifyProcess(host, s).catch(() => false))) process.kill(s.pid, 'SIGKILL');
  }
  for (const c of trainers) {
    if (await verifyProcess(host, c).catch(() => false)) {
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        process.kill(c.pid, 'SIGKILL');
      }
    }
  }
});

async function track(runDir: string): Promise<SupervisorState> {
  runs.add(runDir);
  const st = (await readSupervisorState(host, runDir))!;
  supervisors.push(st.supervisor);
  return st;
}

/** Launches the fake trainer's profile in a fresh dir (with `inject`, if given) and tracks its supervisor. */
async function launchFake(name: string, inject?: string) {
  const cwd = tempDir(name);
  const r = await launchRun(host, {
    profile: 'fake',
    profilesFile: profilesFile(cwd),
    cwd,
    ...(inject ? { extraArgs: ['--inject', inject] } : {}),
  });
  await track(r.runDir);
  return { cwd, r };
}

/** A supervised fake trainer that hangs at step 5, once it has hung. */
async function launchHung(name: string) {
  const run = await launchFake(name, 'hang@step=5');
  await until(
    'the hang',
    () =>
      lastStep(run.r.runDir) >= 4 && readFileSync(join(run.r.runDir, 'train.log'), 'utf8').includes('[inject] hang'),
  );
  return run;
}

const finalState = (runDir: string) =>
  until('the supervisor to finish', async () => {
    const s = await readSupervisorState(host, runDir);
    return s &&
      ['halted', 'exited', 'failed'].includes(s.state) &&
      !(await verifyProcess(host, s.supervisor!).catch(() => false))
      ? s
      : null;
  });

test('launch from the CLI: the supervisor outlives the launching process; stop is not restarted; relaunch resumes and steps continue', async () => {
  const cwd = tempDir('sup-e2e');
  const pf = profilesFile(cwd);
  // the launching process, in its own process group so we can kill all of it
  const launcher = spawn(
    selfCommand()[0]!,
    [...selfCommand().slice(1), 'launch', '--profile', 'fake', '--profiles', pf],
    { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  launcher.stdout!.on('data', (b) => (out += b));
  launcher.stderr!.on('data', (b) => (out += b));
  const runDir = await until('the launch output', () => /run dir\s+(\S+)/.exec(out)?.[1]);
  try {
    try {
      process.kill(-launcher.pid!, 'SIGKILL'); // the cockpit / SSH session goes away
    } catch {
      /* it had already exited */
    }
    const st = await until('supervisor state', async () => {
      const s = await readSupervisorState(host, runDir);
      return s?.child?.startTime ? s : null;
    });
    supervisors.push(st.supervisor);
    runs.add(runDir);
    assert.equal(st.state, 'running');
    assert.equal(basenameOf(runDir).startsWith('fake_'), true);
    // its own session: not the test's
    const supProc = await readProc(host, st.supervisor!.pid);
    assert.ok(supProc);
    const sid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[3]);
    assert.notEqual(sid(st.supervisor!.pid), sid(process.pid));
    const s1 = await until('steps', () => lastStep(runDir) > 5 && lastStep(runDir));
    await new Promise((r) => setTimeout(r, 800));
    assert.ok(lastStep(runDir) > s1, 'training continues after the launcher was killed');
    // run.info and train.log
    const info = readFileSync(join(runDir, 'run.info'), 'utf8');
    assert.match(info, /^profile: fake$/m);
    assert.match(info, new RegExp(`^out_dir: ${runDir}$`, 'm'));
    assert.match(info, /^command: .*fake-trainer\.mjs --out /m);
    assert.match(info, /^env: NSA_TOP_RUN_DIR=/m);
    // no pty (its hang-up would kill the trainer with the supervisor): the output goes straight to train.log
    assert.match(
      readFileSync(join(runDir, 'train.log'), 'utf8'),
      /step 0001 \| loss .* \| isatty 0/,
      'the trainer writes to train.log',
    );

    // stop: .HALT, the trainer exits 0, no restart
    const who = await currentActor(host);
    const req = await stopRun(host, runDir, who);
    assert.equal(req.result, 'started');
    const done = await finalState(runDir);
    assert.equal(done.state, 'halted');
    assert.equal(done.restarts, 0);
    assert.match(readFileSync(join(runDir, '.HALT'), 'utf8'), new RegExp(`halt: manual_stop ${who.user}`));
    const stoppedAt = lastStep(runDir);
    const ckpts = readdirSync(runDir).filter((n) => /^checkpoint_step\d+\.pt$/.test(n));
    assert.ok(ckpts.includes(`checkpoint_step${stoppedAt}.pt`), 'the halt saved a checkpoint at the last step');

    // relaunch: refused while .HALT is there, then resumes once it is removed (confirmed)
    const refused = await relaunch(host, runDir, who, { removeStaleHalt: false, allowCommand: ['node'] });
    assert.equal(refused.result, 'refused');
    assert.match(refused.detail, /--remove-stale-halt/);
    // a half-written newer checkpoint must be skipped
    writeFileSync(
      join(runDir, `checkpoint_step${stoppedAt + 1000}.pt`),
      Buffer.concat([Buffer.from('NSATOPCK'), Buffer.alloc(300)]),
    );
    const rel = await relaunch(host, runDir, who, { removeStaleHalt: true, allowCommand: ['node'] });
    assert.equal(rel.result, 'ok', rel.detail);
    assert.equal(rel.target.resumeStep, stoppedAt);
    assert.match(rel.detail, new RegExp(`checkpoint_step${stoppedAt + 1000}\\.pt: skipped`));
    await track(runDir);
    await until('steps after resume', () => lastStep(runDir) > stoppedAt + 3);
    const hb = readFileSync(join(runDir, 'heartbeat_rank0.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const afterBoot = hb.slice(hb.map((r) => r.msg).lastIndexOf('boot') + 1).filter((r) => r.msg === 'progress');
    assert.equal(afterBoot[0].step, stoppedAt + 1, 'steps continue from the checkpoint, not from 1');
    assert.match(readFileSync(join(runDir, 'train.log'), 'utf8'), /resuming from .*checkpoint_step\d+\.pt/);
    await stopRun(host, runDir, who);
    assert.equal((await finalState(runDir)).state, 'halted');
    const actions = (await readActions(host, runDir)).map((a) => `${a.action}:${a.result}`);
    assert.deepEqual(actions, [
      'launch:ok',
      'halt:ok',
      'relaunch:refused',
      'remove-stale-halt:ok',
      'relaunch:started',
      'relaunch:ok',
      'halt:ok',
    ]);
  } catch (e) {
    throw withContext(e as Error, runDir, out);
  }
});

/** On failure, say what the supervisor and trainer saw (this test has been flaky once under load). */
function withContext(e: Error, runDir: string, launcherOut: string): Error {
  const tail = (p: string) => (existsSync(p) ? readFileSync(p, 'utf8').split('\n').slice(-15).join('\n') : '(missing)');
  e.message += `\n--- launcher output\n${launcherOut}\n--- supervisor.log\n${tail(join(runDir, '.nsa-top', 'supervisor.log'))}\n--- supervisor.json\n${tail(join(runDir, '.nsa-top', 'supervisor.json'))}\n--- train.log\n${tail(join(runDir, 'train.log'))}`;
  return e;
}

function basenameOf(p: string): string {
  return p.split('/').at(-1)!;
}

test('a crash is restarted from the newest complete checkpoint, up to the limit', async () => {
  const { r } = await launchFake('sup-crash', 'crash@step=15');
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'failed');
  assert.equal(st.restarts, 2);
  assert.deepEqual(
    st.exitCodes.map((e) => e.code),
    [3, 3, 3],
  );
  const log = readFileSync(join(r.runDir, 'train.log'), 'utf8');
  assert.equal((log.match(/resuming from .*checkpoint_step10\.pt/g) ?? []).length, 2);
  assert.match(st.note ?? '', /2 restarts are used up/);
});

test('a NaN abort is never restarted', async () => {
  const { r } = await launchFake('sup-nan', 'nan@step=4');
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted');
  assert.equal(st.exitCodes.length, 1);
  assert.match(st.note ?? '', /nan_loss/);
});

test('a .HALT that is a FIFO stops the run like any .HALT: not restarted, and the supervisor does not freeze reading it', async () => {
  const cwd = tempDir('sup-fifo-halt');
  const r = await launchRun(host, { profile: 'fake', profilesFile: profilesFile(cwd), cwd });
  const st0 = await until('the trainer', async () => {
    const s = await track(r.runDir);
    return s.child ? s : null;
  });
  const outDir = st0.outDir ?? r.runDir;
  await until('a few steps', () => lastStep(outDir) >= 3);
  // the trainer only asks whether .HALT exists; a blocking read of a FIFO would never return
  spawnSync('mkfifo', [join(outDir, '.HALT')]);
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted');
  assert.equal(st.exitCodes.length, 1, 'not restarted');
  assert.match(st.note ?? '', /HALT .*a FIFO.*not restarted/);
});

test('stop escalates .HALT → SIGINT → SIGKILL on a hung trainer, each step logged with the reason', async () => {
  const { r } = await launchHung('sup-hang');
  const who = await currentActor(host);
  await stopRun(host, r.runDir, who, { reason: 'test' });
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted');
  assert.equal(st.exitCodes.at(-1)!.signal !== null || st.exitCodes.at(-1)!.code !== 0, true);
  const acts = (await readActions(host, r.runDir)).map((a) => a.action);
  assert.deepEqual(acts.slice(1), ['halt', 'escalate-sigint', 'escalate-sigkill']);
  const kill = (await readActions(host, r.runDir)).at(-1)!;
  assert.equal(kill.who.user, who.user, 'the escalation is logged under the operator who asked');
  // each step the supervisor logs keeps the operator's reason (stop --reason)
  assert.deepEqual(
    (await readActions(host, r.runDir)).slice(1).map((a) => [a.target.reason, a.detail.endsWith('(reason: test)')]),
    [
      ['test', true],
      ['test', true],
      ['test', true],
    ],
  );
});

test('a stale .HALT in a shared out_dir refuses the launch and says how; relaunch removes it only when confirmed', async () => {
  const cwd = tempDir('sup-stale');
  const outDir = join(cwd, 'shared_out');
  mkdirSync(outDir);
  writeFileSync(join(outDir, '.HALT'), 'halt: heartbeat_stall\n');
  const pf = profilesFile(
    cwd,
    `  real-like:
    trainer: nsa-vibe
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FAKE)}]
    config: configs/whatever.yaml
    out_dir: ${outDir}
    procs: 1
    steps: 60
    args: [--out, ${outDir}]
    restart: { max_restarts: 0 }
`,
  );
  await assert.rejects(
    launchRun(host, { profile: 'real-like', profilesFile: pf, cwd }),
    (e: Error & { exitCode?: number }) => {
      assert.match(e.message, /stale \.HALT/);
      assert.match(e.message, /nsa-top relaunch .* --remove-stale-halt/);
      assert.equal(e.exitCode, 3);
      return true;
    },
  );
  assert.equal(readFileSync(join(outDir, '.HALT'), 'utf8'), 'halt: heartbeat_stall\n', 'nothing removed silently');
  const runDir = readdirSync(join(cwd, 'artifacts', 'train_runs')).map((n) =>
    join(cwd, 'artifacts', 'train_runs', n),
  )[0]!;
  assert.match(readFileSync(join(runDir, 'run.info'), 'utf8'), new RegExp(`^out_dir: ${outDir}$`, 'm'));
  const who = await currentActor(host);
  // an old run's checkpoint in the shared out_dir: a run that never ran starts fresh, like a launch
  const body = Buffer.concat([Buffer.from('NSATOPCK'), Buffer.from(JSON.stringify({ step: 40 }))]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(body) >>> 0);
  writeFileSync(join(outDir, 'checkpoint_step40.pt'), Buffer.concat([body, crc, Buffer.from('NSACKEND')]));
  const rel = await relaunch(host, outDir, who, { removeStaleHalt: true, allowCommand: ['node'] }); // the out_dir leads back to the run
  assert.equal(rel.result, 'ok', rel.detail);
  assert.match(rel.detail, /first start/);
  await track(runDir);
  // while it runs, a second launch into the same out_dir is refused
  await assert.rejects(
    launchRun(host, { profile: 'real-like', profilesFile: pf, cwd }),
    /is being written by the run .*stop it first/,
  );
  assert.equal(readdirSync(join(cwd, 'artifacts', 'train_runs')).length, 1, 'the refused launch left no run dir');
  const st = await finalState(runDir);
  assert.equal(st.state, 'exited');
  assert.equal(lastStep(outDir), 60);
  assert.doesNotMatch(readFileSync(join(runDir, 'train.log'), 'utf8'), /resuming from/);
  const acts = await readActions(host, outDir);
  const rm = acts.find((a) => a.action === 'remove-stale-halt')!;
  assert.equal(rm.target.content, 'halt: heartbeat_stall');
});

test('an old .anomaly_type kept as evidence does not stop restarts of a later run', async () => {
  const cwd = tempDir('sup-old-anomaly');
  const outDir = join(cwd, 'shared_out');
  mkdirSync(outDir);
  writeFileSync(join(outDir, '.anomaly_type'), 'nan_loss\n'); // from an earlier run; its .HALT was removed
  const pf = profilesFile(
    cwd,
    `  real-like:
    trainer: nsa-vibe
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FAKE)}]
    config: configs/whatever.yaml
    out_dir: ${outDir}
    procs: 1
    args: [--out, ${outDir}, --inject, crash@step=12]
    restart: { max_restarts: 1, backoff_s: 0.1 }
`,
  );
  const r = await launchRun(host, { profile: 'real-like', profilesFile: pf, cwd });
  await track(r.runDir);
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'failed', st.note ?? '');
  assert.equal(st.restarts, 1);
});

test('a stop during the restart backoff ends the run: no restart, logged', async () => {
  const cwd = tempDir('sup-backoff');
  const pf = profilesFile(cwd);
  writeFileSync(pf, readFileSync(pf, 'utf8').replace('backoff_s: 0.2,', 'backoff_s: 30,'));
  const r = await launchRun(host, { profile: 'fake', profilesFile: pf, cwd, extraArgs: ['--inject', 'crash@step=3'] });
  await track(r.runDir);
  await until('the backoff', async () => (await readSupervisorState(host, r.runDir))?.state === 'backoff');
  const who = await currentActor(host);
  assert.equal((await stopRun(host, r.runDir, who)).result, 'started');
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted');
  assert.equal(st.exitCodes.length, 1, 'not restarted');
  const last = (await readActions(host, r.runDir)).at(-1)!;
  assert.equal(last.action, 'halt');
  assert.equal(last.who.user, who.user);
  assert.match(last.detail, /not restarted/);
});

test('two relaunches at once (two cockpits): one supervisor, one trainer; the other is refused', async () => {
  const cwd = tempDir('sup-double');
  const pf = profilesFile(cwd);
  const r = await launchRun(host, { profile: 'fake', profilesFile: pf, cwd });
  await track(r.runDir);
  const who = await currentActor(host);
  await stopRun(host, r.runDir, who);
  await finalState(r.runDir);
  await relaunch(host, r.runDir, who, { removeStaleHalt: true, allowCommand: ['node'] }).then((x) =>
    assert.equal(x.result, 'ok', x.detail),
  );
  await track(r.runDir);
  await stopRun(host, r.runDir, who);
  await finalState(r.runDir);
  // now both at once (the .HALT from the stop is removed by whichever gets there first)
  const [a, b] = await Promise.all([
    relaunch(host, r.runDir, who, { removeStaleHalt: true, allowCommand: ['node'] }),
    relaunch(host, r.runDir, who, { removeStaleHalt: true, allowCommand: ['node'] }),
  ]);
  const results = [a.result, b.result].sort();
  assert.equal(results.filter((x) => x === 'ok').length, 1, `${a.result}: ${a.detail} / ${b.result}: ${b.detail}`);
  assert.ok(results.includes('refused') || results.includes('failed'), `${a.detail} / ${b.detail}`);
  const st = await until('the one trainer', async () => {
    const s = await readSupervisorState(host, r.runDir);
    return s?.child?.startTime ? s : null;
  });
  supervisors.push(st.supervisor);
  runs.add(r.runDir);
  const table = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).stdout;
  assert.equal(
    table.split('\n').filter((l) => l.includes('fake-trainer.mjs') && l.includes(r.runDir)).length,
    1,
    'exactly one trainer',
  );
  await stopRun(host, r.runDir, who);
  await finalState(r.runDir);
});

test('halt after the next checkpoint on a supervised run is carried by the supervisor: a checkpoint newer than the request, then .HALT and the stop', async () => {
  const cwd = tempDir('sup-hac');
  const pf = profilesFile(cwd);
  const r = await launchRun(host, { profile: 'fake', profilesFile: pf, cwd });
  await track(r.runDir);
  await until('progress', () => lastStep(r.runDir) >= 3);
  const who = await currentActor(host);
  const { submitHaltAfterCheckpoint } = await import('../../../src/trainer/control/requests.js');
  const out = await submitHaltAfterCheckpoint(host, r.runDir, who);
  assert.equal(out.record.result, 'started', out.record.detail);
  assert.equal(out.request?.owner?.kind, 'supervisor', 'the supervisor took it: no agent needed');
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted', st.note ?? '');
  const req = JSON.parse(readFileSync(join(r.runDir, '.nsa-top', 'requests.json'), 'utf8')).requests.at(-1);
  assert.equal(req.state, 'done');
  assert.ok(req.checkpoint.mtimeMs > req.ts, 'the checkpoint that triggered .HALT was written after the request');
  assert.ok(existsSync(req.checkpoint.path));
  const acts = await readActions(host, r.runDir);
  assert.ok(
    acts.some((a) => a.action === 'halt-after-checkpoint' && a.result === 'ok' && /\.HALT written/.test(a.detail)),
    'the .HALT step is logged',
  );
});

test('a relaunch whose trainer dies at once is logged as failed, and so is a supervisor that gives up', async () => {
  const { r } = await launchFake('sup-relfail', 'crash@step=1');
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'failed');
  const gaveUp = (await readActions(host, r.runDir)).filter((a) => a.action === 'launch').map((a) => a.result);
  assert.deepEqual(gaveUp, ['ok', 'failed'], 'the launch, then the supervisor giving up');
  const who = await currentActor(host);
  const rel = await relaunch(host, r.runDir, who, { removeStaleHalt: false, allowCommand: ['node'] });
  await track(r.runDir);
  assert.equal(rel.result, 'failed', rel.detail);
  assert.match(rel.detail, /exited at once \(exit 3\)/);
  await finalState(r.runDir);
});

test('a supervisor that cannot be asked (a directory planted at .nsa-top/stop.json) does not block a stop: .HALT is written here and the trainer stops', async () => {
  const { r } = await launchFake('sup-unasked');
  await until('progress', () => lastStep(r.runDir) >= 3);
  mkdirSync(join(r.runDir, '.nsa-top', 'stop.json'));
  const rec = await stopRun(host, r.runDir, await currentActor(host));
  assert.equal(rec.result, 'ok', rec.detail);
  assert.match(rec.detail, /^the supervisor could not be asked to stop \(.*stop\.json.*\): \.HALT written/);
  assert.match(readFileSync(join(r.runDir, '.HALT'), 'utf8'), /^halt: manual_stop /);
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted', 'the trainer stopped on the .HALT, and it was not restarted');
});

test("the cockpit's halt of a supervised run is the supervisor's stop escalation: a hung trainer is still stopped after the cockpit is gone", async () => {
  const { r } = await launchHung('sup-cockpit-halt');
  const who = await currentActor(host);
  const { createActions, supervisorStopFn } = await import('../../../src/cockpit/actions.js');
  const actions = createActions({
    host,
    runDir: r.runDir,
    readOnly: false,
    state: () => null,
    stop: supervisorStopFn(host, r.runDir, who, false),
  });
  const out = await actions.halt('now');
  assert.equal(out.result, 'started', out.detail);
  assert.match(out.detail, /the supervisor \(pid \d+\) took it: it writes \.HALT and escalates/);
  // nothing of the cockpit is involved any more: the supervisor takes it to the end
  const st = await finalState(r.runDir);
  assert.equal(st.state, 'halted');
  const acts = (await readActions(host, r.runDir)).map((a) => a.action);
  assert.deepEqual(acts.slice(-3), ['halt', 'escalate-sigint', 'escalate-sigkill']);
});
