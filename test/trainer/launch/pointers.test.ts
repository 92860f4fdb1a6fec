// Pointers that cannot be forged or go stale (issue 24 items 3, 6, 10): a copied out_dir with a live
// trainer in each — `nsa-top stop COPY` stops the copy only; planted, group-writable, foreign or
// hard-linked .nsa-top files are named and not followed; a planted launch.json (sh -c, LD_PRELOAD)
// is refused with the reason, and relaunch shows what it would run first; the adoption record keeps
// no argv secret and is 0600; a broken record is one line, exit 2. Real processes and files, the
// built CLI (`npm run build` first).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess, readProc } from '../../../src/remote/procs.js';
import { readSupervisorState, stopRun, launchRun, prepareRelaunch } from '../../../src/trainer/launch/launch.js';
import { judgeAdoption } from '../../../src/checks/preflight.js';
import { resolveRunDirs } from '../../../src/trainer/run/rundirs.js';
import { readLaunchPlan } from '../../../src/trainer/run/launchstate.js';
import { readPointerFile } from '../../../src/trainer/run/pointers.js';
import { readAdoption, redactArgv } from '../../../src/trainer/launch/adopt.js';
import { currentActor } from '../../../src/trainer/control/actions.js';
import { selfCommand } from '../../../src/self.js';
import { profilesFile, until } from './helpers.js';
import { mkdtempSync } from 'node:fs';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake_train.py', import.meta.url));
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const cleanup: (() => void)[] = [];
after(() => {
  for (const f of cleanup.reverse()) f();
});

function tmp(tag: string): string {
  const d = mkdtempSync(join(tmpdir(), `nsa-top-ptr-${tag}-`));
  cleanup.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function cli(args: string[], cwd: string) {
  return spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, NSA_TOP_READ_ONLY: '' },
    timeout: 120_000,
  });
}

function killGroupLater(pid: number) {
  cleanup.push(() => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
}

/** The stand-in laid out as the real trainer is: <repo>/scripts/train_showcase.py. */
function repoWith(root: string, configs: Record<string, string>): { repo: string; script: string } {
  const repo = join(root, 'repo');
  mkdirSync(join(repo, 'configs'), { recursive: true });
  mkdirSync(join(repo, 'scripts'), { recursive: true });
  for (const [name, outDir] of Object.entries(configs))
    writeFileSync(join(repo, 'configs', name), `train: {steps: 100000, save_every: 10, out_dir: "${outDir}"}\n`);
  const script = join(repo, 'scripts', 'train_showcase.py');
  copyFileSync(FAKE, script);
  return { repo, script };
}

/** A trainer started by hand (the runbook way) in `repo` with CONFIG=configs/<config>. */
function handStart(repo: string, script: string, config: string, log: string, extra: string[] = []) {
  const fd = openSync(log, 'a');
  const child = spawn(PY, ['-u', script, ...extra], {
    cwd: repo,
    detached: true,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, CONFIG: `configs/${config}`, FAKE_STEP_MS: '40' },
  });
  closeSync(fd);
  child.unref();
  killGroupLater(child.pid!);
  return child.pid!;
}

async function alive(pid: number, startTime: string): Promise<boolean> {
  return verifyProcess(host, { pid, startTime }).catch(() => false);
}

test('a copied out_dir with a live trainer in each: stop COPY stops the copy only; status and halt act on the copy', async () => {
  const root = tmp('copy');
  const out = join(root, 'out');
  const copy = join(root, 'copy');
  const { repo, script } = repoWith(root, { 'run.yaml': out, 'copy.yaml': copy });
  const pf = join(root, 'p.yaml');
  writeFileSync(
    pf,
    `profiles:\n  prof:\n    trainer: nsa-vibe\n    repo: ${repo}\n    command: [${JSON.stringify(PY)}, -u, ${JSON.stringify(script)}]\n    config: configs/run.yaml\n    procs: 1\n    env: { FAKE_STEP_MS: 40 }\n    stop: { halt_grace_s: 20, sigint_grace_s: 5 }\n`,
  );
  const r = await launchRun(host, { profile: 'prof', profilesFile: pf, cwd: root });
  const orig = await until('the original trainer to run', async () => {
    const s = await readSupervisorState(host, r.runDir);
    return s?.state === 'running' && s.child?.startTime ? s : null;
  });
  cleanup.push(() => {
    for (const p of [orig.child!.pid, orig.supervisor!.pid])
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
  });
  await until('a checkpoint of the original', () => existsSync(join(out, 'checkpoint_step10.pt')));
  assert.equal((await resolveRunDirs(host, out)).runDir, r.runDir, 'the original out_dir follows its pointer');
  // the copy: its .nsa-top/run.json still names the original launcher dir
  cpSync(out, copy, { recursive: true });
  rmSync(join(copy, '.HALT'), { force: true });
  assert.ok(existsSync(join(copy, '.nsa-top', 'run.json')));
  const copyPid = handStart(repo, script, 'copy.yaml', join(root, 'copy.log'));
  const copyProc = await until('the copy trainer to boot', async () => {
    const p = await readProc(host, copyPid).catch(() => null);
    return p && readFileSync(join(copy, 'heartbeat_rank0.jsonl'), 'utf8').includes(`"pid": ${copyPid}`) ? p : null;
  });

  const dirs = await resolveRunDirs(host, copy);
  assert.equal(dirs.runDir, copy, 'the copy is a run of its own');
  assert.match(
    dirs.pointerProblem ?? '',
    new RegExp(`${copy} is a copy of ${out}: its \\.nsa-top/run\\.json points to another run; not followed`),
  );

  // status acts on the copy, and says why it did not follow the pointer
  const st = cli(['status', copy, '--json'], root);
  assert.ok(st.status === 0 || st.status === 1, st.stderr);
  assert.match(st.stderr, /is a copy of .*not followed/, `status said: ${st.stderr}${st.stdout.slice(0, 2000)}`);

  // stop COPY: the copy's trainer stops (its .HALT), the original's supervisor and trainer go on
  const stop = cli(['stop', copy], root);
  assert.equal(stop.status, 0, stop.stderr + stop.stdout);
  assert.match(stop.stdout + stop.stderr, /is a copy of .*not followed/);
  assert.ok(existsSync(join(copy, '.HALT')), '.HALT written in the copy');
  assert.ok(!existsSync(join(out, '.HALT')), 'no .HALT in the original');
  assert.ok(!existsSync(join(r.runDir, '.nsa-top', 'stop.json')), 'no stop request to the original supervisor');
  await until('the copy trainer to stop', async () => !(await alive(copyPid, copyProc.startTime)), 30_000);
  assert.ok(await alive(orig.child!.pid, orig.child!.startTime), 'the original trainer still runs');
  assert.ok(await alive(orig.supervisor!.pid, orig.supervisor!.startTime), 'the original supervisor still runs');
  const s = await readSupervisorState(host, r.runDir);
  assert.equal(s?.state, 'running');

  // halt on the copy (a second trainer there) acts on the copy too
  rmSync(join(copy, '.HALT'));
  const copy2 = handStart(repo, script, 'copy.yaml', join(root, 'copy.log'));
  const p2 = await until('the second copy trainer', async () => {
    const p = await readProc(host, copy2).catch(() => null);
    return p && readFileSync(join(copy, 'heartbeat_rank0.jsonl'), 'utf8').includes(`"pid": ${copy2}`) ? p : null;
  });
  const h = cli(['halt', copy], root);
  assert.equal(h.status, 0, h.stderr + h.stdout);
  await until('the second copy trainer to stop', async () => !(await alive(copy2, p2.startTime)), 30_000);
  assert.ok(await alive(orig.child!.pid, orig.child!.startTime), 'the original trainer still runs');
  assert.ok(!existsSync(join(out, '.HALT')));

  // and the original is stopped through its own out_dir, as before
  const stopOrig = await stopRun(host, out, await currentActor(host), { reason: 'test done' });
  assert.equal(stopOrig.result, 'started', stopOrig.detail);
  await until('the original supervisor to finish', async () => {
    const x = await readSupervisorState(host, r.runDir);
    return x?.state === 'halted' && !(await alive(orig.supervisor!.pid, orig.supervisor!.startTime));
  });
});

/** A supervised run of the node fake trainer that has ended: its plan is there to be tampered with. */
async function endedRun(tag: string) {
  const cwd = tmp(tag);
  const r = await launchRun(host, { profile: 'fake', profilesFile: profilesFile(cwd), cwd, steps: 12 });
  await until('the run to end', async () => {
    const s = await readSupervisorState(host, r.runDir);
    return (
      s &&
      ['exited', 'failed', 'halted'].includes(s.state) &&
      !(await alive(s.supervisor!.pid, s.supervisor!.startTime))
    );
  });
  const planPath = join(r.runDir, '.nsa-top', 'launch.json');
  const plan = JSON.parse(readFileSync(planPath, 'utf8')) as Record<string, unknown> & {
    command: string[];
    env: Record<string, string>;
  };
  return { cwd, runDir: r.runDir, planPath, plan };
}

test('a planted launch.json is refused with the reason, and what it would run is shown first', async (t) => {
  const run = await endedRun('plant');
  const marker = join(run.cwd, 'PWNED');
  const supBefore = readFileSync(join(run.runDir, '.nsa-top', 'supervisor.json'), 'utf8');
  // the legitimate plan: shown, and it needs its program named (node is not a known trainer)
  // the run trained its 12 steps: a relaunch asks for one more (a FINISHED run is not relaunched
  // without --steps past it), so the refusals below are the pointer checks'
  const asIs = cli(['relaunch', run.runDir, '--yes', '--steps', '13'], run.cwd);
  assert.equal(asIs.status, 3, asIs.stderr);
  assert.match(asIs.stderr, /trainer: in /);
  assert.match(asIs.stderr, /runs: .*fake-trainer\.mjs/);
  assert.match(asIs.stderr, /not a known trainer .*--allow-command node/);

  // sh -c: refused, and shown as it is (with --yes too)
  writeFileSync(run.planPath, JSON.stringify({ ...run.plan, command: ['sh', '-c', `touch ${marker}`] }));
  const sh = cli(['relaunch', run.runDir, '--yes', '--steps', '13'], run.cwd);
  assert.equal(sh.status, 3, sh.stderr);
  assert.match(sh.stderr, new RegExp(`runs: sh -c 'touch ${marker}'`));
  assert.match(sh.stderr, /relaunch refused: .*sh is not a known trainer .*--allow-command sh/);

  // LD_PRELOAD: refused whatever the command, even a known trainer named by --allow-command
  writeFileSync(
    run.planPath,
    JSON.stringify({ ...run.plan, env: { ...run.plan.env, LD_PRELOAD: '/tmp/evil.so', PYTHONSTARTUP: '/tmp/x.py' } }),
  );
  const ld = cli(['relaunch', run.runDir, '--yes', '--steps', '13', '--allow-command', 'node'], run.cwd);
  assert.equal(ld.status, 3, ld.stderr);
  assert.match(ld.stderr, /LD_PRELOAD=\/tmp\/evil\.so/, 'every variable is shown');
  assert.match(ld.stderr, /relaunch refused: .*sets LD_PRELOAD \(the dynamic loader.*PYTHONSTARTUP/);
  // the cockpit's relaunch dialog gets the same lines and the same refusal
  const { createActions } = await import('../../../src/cockpit/actions.js');
  const info = await createActions({
    host,
    runDir: run.runDir,
    readOnly: false,
    state: () => null,
    relaunch: async () => ({ ok: false, result: 'refused', detail: 'not in this test' }),
  }).prepareRelaunch!();
  assert.ok(info.willRun?.includes('    LD_PRELOAD=/tmp/evil.so'), JSON.stringify(info.willRun));
  assert.match(info.refusal ?? '', /sets LD_PRELOAD/);

  // a plan written for another dir (a copy's) is not followed at all
  const other = tmp('plant-other');
  writeFileSync(run.planPath, JSON.stringify({ ...run.plan, runDir: other, dirId: { dev: 1, ino: 2 } }));
  const foreign = cli(['relaunch', run.runDir, '--yes', '--steps', '13', '--allow-command', 'node'], run.cwd);
  assert.equal(foreign.status, 3, foreign.stderr);
  assert.match(
    foreign.stderr,
    new RegExp(
      `${run.runDir} is a copy of ${other}: its \\.nsa-top/launch\\.json was written for another run; not followed`,
    ),
  );

  // the original file, group-writable: not followed
  writeFileSync(run.planPath, JSON.stringify(run.plan));
  chmodSync(run.planPath, 0o664);
  const gw = cli(['relaunch', run.runDir, '--yes', '--steps', '13', '--allow-command', 'node'], run.cwd);
  assert.equal(gw.status, 3, gw.stderr);
  assert.match(gw.stderr, /launch\.json: group-writable \(mode 664\): anyone could have written it; not followed/);
  chmodSync(run.planPath, 0o644);
  // owned by another user: not followed
  if (process.getuid?.() === 0) {
    chownSync(run.planPath, 65534, 65534);
    const ch = cli(['relaunch', run.runDir, '--yes', '--steps', '13', '--allow-command', 'node'], run.cwd);
    assert.equal(ch.status, 3, ch.stderr);
    assert.match(ch.stderr, /owned by uid 65534, not by you \(uid 0\)/);
    chownSync(run.planPath, 0, 0);
  } else t.diagnostic('skipped: a file owned by another user needs root to make (chown)');
  // a hard link to it from elsewhere: another file's content, not followed
  linkSync(run.planPath, join(run.cwd, 'linked.json'));
  assert.equal(await readLaunchPlan(host, run.runDir), null);
  rmSync(join(run.cwd, 'linked.json'));
  assert.ok(await readLaunchPlan(host, run.runDir), 'believed again once it is its own file');

  assert.ok(!existsSync(marker), 'the planted command never ran');
  assert.equal(
    readFileSync(join(run.runDir, '.nsa-top', 'supervisor.json'), 'utf8'),
    supBefore,
    'no supervisor was started',
  );
  // the real plan, named by its program: it runs
  const ok = cli(['relaunch', run.runDir, '--yes', '--steps', '13', '--allow-command', 'node'], run.cwd);
  assert.equal(ok.status, 0, ok.stderr + ok.stdout);
  assert.match(ok.stderr, /allowed by --allow-command node/);
  await until('the relaunched run to end', async () => {
    const s = await readSupervisorState(host, run.runDir);
    return (
      s && s.state !== 'running' && s.state !== 'starting' && !(await alive(s.supervisor!.pid, s.supervisor!.startTime))
    );
  });
});

test('a group-writable or foreign run.json in an out_dir is not followed', async () => {
  const root = tmp('ptr-gw');
  const out = join(root, 'out');
  const launcher = join(root, 'launcher');
  mkdirSync(join(out, '.nsa-top'), { recursive: true });
  mkdirSync(launcher);
  writeFileSync(join(out, 'training.csv'), 'step,loss\n');
  writeFileSync(join(launcher, 'run.info'), `run_dir: ${launcher}\nprofile: p\nout_dir: ${out}\n`);
  const id = statSync(out);
  const ptr = join(out, '.nsa-top', 'run.json');
  writeFileSync(ptr, JSON.stringify({ runDir: launcher, outDir: out, outDirId: { dev: id.dev, ino: id.ino } }));
  assert.equal((await resolveRunDirs(host, out)).runDir, launcher, 'a pointer nsa-top wrote is followed');
  chmodSync(ptr, 0o666);
  const gw = await resolveRunDirs(host, out);
  assert.equal(gw.runDir, out);
  assert.match(gw.pointerProblem ?? '', /run\.json: world-writable|run\.json: group-writable/);
  chmodSync(ptr, 0o644);
  // the launcher it names does not name this out_dir back
  writeFileSync(join(launcher, 'run.info'), `run_dir: ${launcher}\nprofile: p\nout_dir: ${join(root, 'elsewhere')}\n`);
  mkdirSync(join(root, 'elsewhere'));
  const back = await resolveRunDirs(host, out);
  assert.equal(back.runDir, out);
  assert.match(back.pointerProblem ?? '', /is a copy of .*elsewhere: its \.nsa-top\/run\.json points to another run/);
  // a symlink in its place
  rmSync(ptr);
  writeFileSync(join(root, 'elsewhere.json'), JSON.stringify({ runDir: launcher }));
  spawnSync('ln', ['-s', join(root, 'elsewhere.json'), ptr]);
  const ln = await resolveRunDirs(host, out);
  assert.equal(ln.runDir, out);
  assert.match(ln.pointerProblem ?? '', /is a symbolic link: not followed/);
});

test('the adoption record keeps no argv secret and is 0600; a relaunch of it says why it cannot run', async () => {
  const root = tmp('secret');
  const out = join(root, 'out');
  const { repo, script } = repoWith(root, { 'run.yaml': out });
  const pid = handStart(repo, script, 'run.yaml', join(root, 'hand.log'), [
    '--hf-token=hf_SECRET1',
    '--token',
    'SECRET2',
    'WANDB_API_KEY=SECRET3',
    '--password',
    'SECRET4',
    '--data',
    'https://user:SECRET5@example.com/x',
    '--dataset',
    'synthetic',
  ]);
  await until(
    'the hand run to boot',
    () =>
      existsSync(join(out, 'heartbeat_rank0.jsonl')) &&
      readFileSync(join(out, 'heartbeat_rank0.jsonl'), 'utf8').includes(`"pid": ${pid}`),
  );
  const st = cli(['status', out, '--json'], root);
  assert.ok(st.status === 0 || st.status === 1, st.stderr);
  const path = join(out, '.nsa-top', 'launch.json');
  const text = readFileSync(path, 'utf8');
  assert.equal(statSync(path).mode & 0o777, 0o600, 'readable by the user only');
  assert.doesNotMatch(text, /SECRET\d/, 'no secret written down');
  const rec = (await readAdoption(host, out))!;
  assert.ok(rec, 'the record is believed');
  assert.deepEqual(rec.launcher.argv.slice(3, 13), [
    '--hf-token=<redacted>',
    '--token',
    '<redacted>',
    'WANDB_API_KEY=<redacted>',
    '--password',
    '<redacted>',
    '--data',
    'https://user:<redacted>@example.com/x',
    '--dataset',
    'synthetic',
  ]);
  assert.deepEqual(rec.redacted, ['--hf-token', '--token', 'WANDB_API_KEY', '--password', 'a URL password']);
  writeFileSync(join(out, '.HALT'), '');
  await until('the hand run to exit', async () => !(await alive(pid, rec.launcher.startTime)));
  rmSync(join(out, '.HALT'));
  const prep = await prepareRelaunch(host, out, { judgeAdoption });
  assert.match(prep.refusal ?? '', /secrets on its command line .*a relaunch would pass <redacted>/);
  // no secret in the audit record either
  assert.doesNotMatch(readFileSync(join(out, '.nsa-top', 'actions.jsonl'), 'utf8'), /SECRET\d/);
});

test('argv redaction: the usual spellings of a secret, and nothing else', () => {
  const r = redactArgv([
    'python',
    'x.py',
    '--api-key=k',
    '--steps',
    '10',
    '--auth-token',
    't',
    '--key',
    'v',
    'HF_TOKEN=x',
    '--resume',
    'a.pt',
  ]);
  assert.deepEqual(r.argv, [
    'python',
    'x.py',
    '--api-key=<redacted>',
    '--steps',
    '10',
    '--auth-token',
    '<redacted>',
    '--key',
    '<redacted>',
    'HF_TOKEN=<redacted>',
    '--resume',
    'a.pt',
  ]);
  const plain = [
    'torchrun',
    '--nproc_per_node=2',
    's.py',
    '--save-every',
    '5',
    '--tokenizer',
    'gpt2',
    '--max-keys',
    '3',
  ];
  assert.deepEqual(redactArgv(plain), { argv: plain, redacted: [] });
});

test('relaunch of a recorded fixture run with a broken adoption record: one line, exit 2 (was "Invalid time value")', async () => {
  const fixture = fileURLToPath(new URL('../../fixtures/nsa-vibe/single', import.meta.url));
  for (const [what, patch, want] of [
    ['no recordedAt', { recordedAt: undefined }, /recordedAt is missing/],
    ['a string recordedAt', { recordedAt: 'yesterday' }, /recordedAt "yesterday" is not a time/],
    [
      'no argv',
      { launcher: { pid: 5, startTime: '1', argv: [], cwd: '/', kind: 'python' } },
      /launcher\.argv is not a command line/,
    ],
    [
      'a relative cwd',
      { launcher: { pid: 5, startTime: '1', argv: ['python', 'train_showcase.py'], cwd: 'x', kind: 'python' } },
      /launcher\.cwd is not an absolute path/,
    ],
  ] as const) {
    const root = tmp('badrec');
    const out = join(root, 'out');
    cpSync(fixture, out, { recursive: true });
    mkdirSync(join(out, '.nsa-top'));
    const rec = {
      kind: 'adopted',
      version: 1,
      outDir: out,
      recordedBy: 'status',
      host: 'local',
      launcher: {
        pid: 999999,
        startTime: '1',
        argv: [PY, '-u', 'scripts/train_showcase.py'],
        cwd: root,
        kind: 'python',
      },
      ranks: [],
      env: {},
      config: null,
      procs: 1,
      stdout: null,
      ...patch,
    } as Record<string, unknown>;
    if (!('recordedAt' in patch)) rec.recordedAt = Date.now();
    writeFileSync(join(out, '.nsa-top', 'launch.json'), JSON.stringify(rec));
    const r = cli(['relaunch', out, '--yes', '--steps', '1000'], root);
    assert.equal(r.status, 2, `${what}: ${r.stderr}`);
    assert.equal(r.stderr.trim().split('\n').length, 1, `${what}: one line: ${r.stderr}`);
    assert.match(r.stderr, /a broken adoption record: /);
    assert.match(r.stderr, want);
    assert.doesNotMatch(r.stderr, /Invalid time value/);
    assert.ok(!existsSync(join(out, '.nsa-top', 'supervised')), `${what}: nothing made`);
  }
});

test('over SSH: the same checks (owner by id -u, mode, device and inode by find), and a private record is 0600', async (t) => {
  const { startSshd } = await import('../../helpers/sshd.js');
  const { writeOwnAtomic } = await import('../../../src/trainer/control/ownfiles.js');
  const sshd = await startSshd();
  if (sshd.kind !== 'openssh') t.diagnostic(`sshd: ${sshd.why}`);
  const remote = await sshd.connect();
  try {
    const root = tmp('ssh');
    const out = join(root, 'out');
    const launcher = join(root, 'launcher');
    mkdirSync(join(out, '.nsa-top'), { recursive: true });
    mkdirSync(launcher);
    writeFileSync(join(out, 'training.csv'), 'step,loss\n');
    writeFileSync(join(launcher, 'run.info'), `run_dir: ${launcher}\nprofile: p\nout_dir: ${out}\n`);
    const id = statSync(out);
    const ptr = join(out, '.nsa-top', 'run.json');
    writeFileSync(ptr, JSON.stringify({ runDir: launcher, outDir: out, outDirId: { dev: id.dev, ino: id.ino } }));
    const st = await remote.stat(ptr);
    assert.equal(st?.uid, process.getuid?.());
    assert.equal(st?.nlink, 1);
    if (st?.dev !== undefined) assert.equal(st.dev, statSync(ptr).dev, "find's %D is stat's st_dev");
    assert.equal((await resolveRunDirs(remote, out)).runDir, launcher, 'followed over SSH');
    // a copy, over SSH
    const copy = join(root, 'copy');
    cpSync(out, copy, { recursive: true });
    const c = await resolveRunDirs(remote, copy);
    assert.equal(c.runDir, copy);
    assert.match(
      c.pointerProblem ?? '',
      new RegExp(`${copy} is a copy of ${out}: its \\.nsa-top/run\\.json points to another run; not followed`),
    );
    chmodSync(ptr, 0o664);
    assert.match((await resolveRunDirs(remote, out)).pointerProblem ?? '', /group-writable \(mode 664\)/);
    chmodSync(ptr, 0o644);
    if (process.getuid?.() === 0) {
      chownSync(ptr, 65534, 65534);
      assert.match(
        (await resolveRunDirs(remote, out)).pointerProblem ?? '',
        /owned by uid 65534, not by you \(uid 0\)/,
      );
      chownSync(ptr, 0, 0);
    }
    assert.equal((await resolveRunDirs(remote, out)).runDir, launcher);
    // the adoption record's write: 0600 over SSH too
    await writeOwnAtomic(remote, out, '.nsa-top/launch.json', '{}\n', { private: true });
    assert.equal(statSync(join(out, '.nsa-top', 'launch.json')).mode & 0o777, 0o600);
    await writeOwnAtomic(remote, out, '.nsa-top/other.json', '{}\n');
    assert.equal(statSync(join(out, '.nsa-top', 'other.json')).mode & 0o077 & 0o022, 0, 'never group/world-writable');
  } finally {
    await remote.close();
    await sshd.stop();
  }
});

test('what a relaunch runs: known trainers, loader variables, and every variable shown', async () => {
  const { unknownTrainer, describeWillRun, loaderVariable } = await import('../../../src/trainer/launch/willrun.js');
  for (const ok of [
    ['python', '-u', 'scripts/train_showcase.py', '--dataset', 'x'],
    ['/venv/bin/python3.11', '-X', 'dev', '/r/scripts/train_showcase.py'],
    ['torchrun', '--nproc_per_node', '2', '--master_port=29601', 'scripts/train_showcase.py'],
    ['torchrun', '--standalone', '--nproc_per_node=2', 'scripts/train_showcase.py'],
    ['python', '-m', 'torch.distributed.run', '--nproc_per_node=2', 'scripts/train_showcase.py'],
    [process.execPath, '/opt/nsa-top/bin/nsa-top.js', 'train', '--out', '/o'],
    ['nsa-top', 'train', '--out', '/o'],
  ])
    assert.equal(unknownTrainer(ok), null, ok.join(' '));
  for (const [bad, why] of [
    [['sh', '-c', 'touch x'], /sh is not a known trainer/],
    [['python', '-c', 'import os'], /inline code/],
    [['python', '-m', 'http.server'], /python -m http\.server is not the trainer/],
    [['python', 'evil.py'], /evil\.py is not the trainer script/],
    [['torchrun', '--no-python', 'sh', 'train_showcase.py'], /--no-python runs any program/],
    [['torchrun', '-m', 'evil'], /runs a module/],
    [['node', '--require=/tmp/x.js', '/o/bin/nsa-top.js', 'train'], /options that are not nsa-top's/],
    [['node', '--require', '/tmp/x.js', '/o/bin/nsa-top.js', 'train'], /node running x\.js is not a known trainer/],
    [['env', 'LD_PRELOAD=x', 'python', 'train_showcase.py'], /env is not a known trainer/],
    [['nsa-top', 'relaunch', '/x'], /nsa-top relaunch is not the trainer/],
  ] as const)
    assert.match(unknownTrainer([...bad]) ?? '', why, bad.join(' '));
  for (const v of [
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'LD_AUDIT',
    'PYTHONSTARTUP',
    'PYTHONINSPECT',
    'NODE_OPTIONS',
    'BASH_ENV',
    'ENV',
  ])
    assert.ok(loaderVariable(v), v);
  for (const v of ['PYTHONPATH', 'CONFIG', 'CUDA_VISIBLE_DEVICES', 'NSA_HEARTBEAT_EVERY', 'OLD_ENV'])
    assert.equal(loaderVariable(v), null, v);
  const w = describeWillRun(
    [
      {
        what: 'trainer',
        command: ['python', '-u', 'scripts/train_showcase.py'],
        cwd: '/r',
        env: { CONFIG: 'c.yaml', B: 'x y' },
      },
    ],
    { resume: { flag: '--resume', path: '/o/checkpoint_step40.pt' } },
  );
  assert.equal(w.refusal, null);
  assert.deepEqual(w.lines, [
    'trainer: in /r',
    '  runs: python -u scripts/train_showcase.py --resume /o/checkpoint_step40.pt',
    '  sets: 2 environment variables',
    "    B='x y'",
    '    CONFIG=c.yaml',
  ]);
  const u = describeWillRun([{ what: 'trainer', command: ['node', 'fake.mjs'], cwd: '/r', env: {} }]);
  assert.deepEqual(u.needsAllow, ['node']);
  assert.match(u.refusal ?? '', /--allow-command node/);
  assert.equal(
    describeWillRun([{ what: 'trainer', command: ['node', 'fake.mjs'], cwd: '/r', env: {} }], { allow: ['node'] })
      .refusal,
    null,
  );
});

test("a copied reference run (launcher dir = out_dir) with a live trainer in each: the copy's run.info, plan and supervisor state are the original's, not followed; stop COPY stops the copy only", async () => {
  const { FAKE_TRAINER } = await import('./helpers.js');
  const cwd = tmp('refcopy');
  const r = await launchRun(host, { profile: 'fake', profilesFile: profilesFile(cwd), cwd });
  const orig = await until('the original trainer to run', async () => {
    const s = await readSupervisorState(host, r.runDir);
    return s?.state === 'running' && s.child?.startTime ? s : null;
  });
  cleanup.push(() => {
    for (const p of [orig.child!.pid, orig.supervisor!.pid])
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
  });
  const copy = join(cwd, 'copy');
  cpSync(r.runDir, copy, { recursive: true });
  const fd = openSync(join(cwd, 'copy.log'), 'a');
  const child = spawn(
    process.execPath,
    [FAKE_TRAINER, '--out', copy, '--ranks', '1', '--steps', '100000', '--save-every', '10'],
    {
      cwd,
      detached: true,
      stdio: ['ignore', fd, fd],
    },
  );
  closeSync(fd);
  child.unref();
  killGroupLater(child.pid!);
  const kid = await until('the copy trainer', async () => {
    const p = await readProc(host, child.pid!).catch(() => null);
    const hb = join(copy, 'heartbeat_rank0.jsonl');
    return p && existsSync(hb) && readFileSync(hb, 'utf8').includes(`"pid":${child.pid}`) ? p : null;
  });
  const dirs = await resolveRunDirs(host, copy);
  assert.equal(dirs.runDir, copy);
  assert.equal(dirs.outDir, copy);
  assert.match(
    dirs.pointerProblem ?? '',
    new RegExp(`${copy} is a copy of ${r.runDir}: its run\\.info names another run; not followed`),
  );
  assert.equal(await readSupervisorState(host, copy), null, "the original supervisor's state is not the copy's");
  assert.equal(await readLaunchPlan(host, copy), null, 'nor is its plan');
  const stop = cli(['stop', copy], cwd);
  assert.equal(stop.status, 0, stop.stderr + stop.stdout);
  assert.match(stop.stdout + stop.stderr, /is a copy of .*not followed/);
  assert.ok(existsSync(join(copy, '.HALT')));
  assert.ok(!existsSync(join(r.runDir, '.HALT')));
  await until('the copy trainer to stop', async () => !(await alive(child.pid!, kid.startTime)), 30_000);
  assert.ok(await alive(orig.child!.pid, orig.child!.startTime), 'the original trainer still runs');
  assert.equal((await readSupervisorState(host, r.runDir))?.state, 'running');
  // a relaunch of the copy does not start the original's plan there
  const rl = cli(['relaunch', copy, '--yes', '--steps', '1000', '--allow-command', 'node'], cwd);
  assert.equal(rl.status, 3, rl.stderr);
  assert.match(rl.stderr, /is a copy of .*not followed/);
  const stopOrig = await stopRun(host, r.runDir, await currentActor(host), { reason: 'test done' });
  assert.equal(stopOrig.result, 'started', stopOrig.detail);
  await until('the original supervisor to finish', async () => {
    const x = await readSupervisorState(host, r.runDir);
    return x?.state === 'halted' && !(await alive(orig.supervisor!.pid, orig.supervisor!.startTime));
  });
});

test('a run another user started is never adopted: its command would be relaunched as you', async (t) => {
  if (process.getuid?.() !== 0) {
    t.diagnostic('skipped: starting a trainer as another user needs root');
    return;
  }
  const root = tmp('other-user');
  chmodSync(root, 0o755);
  const out = join(root, 'out');
  mkdirSync(out, { mode: 0o777 });
  chmodSync(out, 0o777);
  const { repo, script } = repoWith(root, { 'run.yaml': out });
  const log = join(root, 'hand.log');
  const fd = openSync(log, 'a');
  const child = spawn(PY, ['-u', script], {
    cwd: repo,
    detached: true,
    stdio: ['ignore', fd, fd],
    uid: 65534,
    gid: 65534,
    env: { ...process.env, CONFIG: 'configs/run.yaml', FAKE_STEP_MS: '40' },
  });
  closeSync(fd);
  child.unref();
  killGroupLater(child.pid!);
  await until("the other user's trainer to boot", () => {
    const hb = join(out, 'heartbeat_rank0.jsonl');
    return existsSync(hb) && readFileSync(hb, 'utf8').includes(`"pid": ${child.pid}`);
  });
  const st = cli(['status', out], root);
  assert.ok(st.status === 0 || st.status === 1, st.stderr);
  assert.match(
    st.stdout,
    new RegExp(`launch not recorded: pid ${child.pid} runs as uid 65534, not as you \\(uid 0\\)`),
  );
  assert.equal(existsSync(join(out, '.nsa-top', 'launch.json')), false, 'nothing recorded');
});

test('read in place (a run dir polled on a local file system), a pointer passes the same checks', async () => {
  const root = tmp('ptr-inplace');
  const dir = join(root, 'run');
  mkdirSync(join(dir, '.nsa-top'), { recursive: true });
  const local = new LocalHost();
  assert.equal(await local.pollIoMode(dir), 'sync', 'this test needs a local file system under the tmp dir');
  const ptr = join(dir, '.nsa-top', 'launch.json');
  writeFileSync(ptr, JSON.stringify({ kind: 'plan' }));
  assert.deepEqual((await readPointerFile(local, dir, 'launch.json')).json, { kind: 'plan' });
  chmodSync(ptr, 0o666);
  assert.match(
    (await readPointerFile(local, dir, 'launch.json')).problem ?? '',
    /(group|world)-writable.*not followed/,
  );
  chmodSync(ptr, 0o644);
  // a hard link from another file: its content is not ours
  const other = join(root, 'other.json');
  writeFileSync(other, JSON.stringify({ kind: 'theirs' }));
  rmSync(ptr);
  linkSync(other, ptr);
  assert.match((await readPointerFile(local, dir, 'launch.json')).problem ?? '', /2 hard links.*not followed/);
  // a symlink in its place is not followed (O_NOFOLLOW), and a FIFO never blocks the read
  rmSync(ptr);
  symlinkSync(other, ptr);
  assert.match((await readPointerFile(local, dir, 'launch.json')).problem ?? '', /symbolic link: not followed/);
  rmSync(ptr);
  assert.equal(spawnSync('mkfifo', [ptr]).status, 0);
  assert.match((await readPointerFile(local, dir, 'launch.json')).problem ?? '', /not a regular file/);
  rmSync(ptr);
  const none = await readPointerFile(local, dir, 'launch.json');
  assert.equal(none.json, null);
  assert.equal(none.problem, null, 'absent: no problem');
});
