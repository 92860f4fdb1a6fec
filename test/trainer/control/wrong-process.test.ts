// Wrong-process scenarios with real victims: nsa-top must never signal a process that has not
// proven it is a rank of the run, whatever the run dir's heartbeats or a process's argv say. Each
// victim is a plain `python3` with no SIGUSR1 handler — SIGUSR1's default action would kill it —
// and each scenario drives the paths that signal: `watchdog --dump-on-stall`, the cockpit's dump
// action, and dumpAll itself. Every victim must survive, and nsa-top must say why it did not signal.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createActions } from '../../../src/cockpit/actions.js';
import type { CockpitState } from '../../../src/cockpit/state.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { findRunProcesses, runRecordHints } from '../../../src/trainer/run/processes.js';
import { hintsFromRun } from '../../../src/trainer/run/ranks.js';
import { currentActor, dumpAll } from '../../../src/trainer/control/actions.js';
import { openRunModel } from '../../../src/trainer/run/rundir.js';
import { startKid, killKids, type Kid } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-wrongproc-'));
const victims: ChildProcess[] = [];
after(() => {
  for (const v of victims) v.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A plain python that sleeps (no SIGUSR1 handler: the signal's default action kills it). */
function startVictim(args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): ChildProcess {
  const v = spawn(PY, args, { cwd: opts.cwd ?? tmp, env: { ...process.env, ...opts.env }, stdio: 'ignore' });
  victims.push(v);
  return v;
}

async function visible(pid: number, argvTail: string): Promise<NonNullable<Awaited<ReturnType<typeof readProc>>>> {
  for (let i = 0; i < 200; i++) {
    const p = await readProc(host, pid);
    if (p && p.argv.at(-1) === argvTail) return p;
    await sleep(25);
  }
  throw new Error(`pid ${pid} never showed ${argvTail}`);
}

function alive(v: ChildProcess): boolean {
  return v.exitCode === null && v.signalCode === null;
}

/** A run dir whose rank-0 heartbeat names `pid`: booted at bootS, stepping until 5 s later, then silent. */
function runDir(name: string, pid: number, bootS: number): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  const rec = (ts: number, step: number, msg: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ ts, iso: new Date(ts * 1000).toISOString(), pid, rank: 0, step, msg, ...extra });
  const lines = [rec(bootS, 0, 'boot', { phase: 'start' })];
  for (let s = 1; s <= 5; s++) {
    lines.push(rec(bootS + s, s, 'progress', { loss: 5 - s * 0.1, toks_per_s: 400, lr: 3e-4 }));
    lines.push(rec(bootS + s + 0.01, s, 'step_end', { phase: 'end' }));
  }
  writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), `${lines.join('\n')}\n`);
  writeFileSync(
    join(dir, 'training.csv'),
    [1, 2, 3, 4, 5].map((s) => `${s},${(5 - s * 0.1).toFixed(6)},3.000000e-04,400`).join('\n') + '\n',
  );
  return dir;
}

/** What the cockpit would hold: the run's processes found from its heartbeats. */
async function cockpitState(dir: string): Promise<CockpitState> {
  const { model } = await openRunModel(host, dir);
  const run = await model.poll();
  const procs = await findRunProcesses(host, dir, hintsFromRun(run));
  return { procs, run } as unknown as CockpitState;
}

function watchdogOnce(dir: string): { code: number | null; lines: Record<string, unknown>[] } {
  const r = spawnSync(process.execPath, [BIN, 'watchdog', dir, '--once', '--dump-on-stall', '--no-gpu'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return {
    code: r.status,
    lines: r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** Drives every signalling path at the run dir and checks the victim lives and the reason is given. */
async function assertNotSignalled(dir: string, v: ChildProcess, why: RegExp): Promise<void> {
  const pid = v.pid!;
  // 1. watchdog --dump-on-stall
  const wd = watchdogOnce(dir);
  const un = wd.lines.find((l) => l.event === 'unproven') as { processes: { pid: number; why: string }[] } | undefined;
  assert.ok(un, `the watchdog says which processes it did not take for ranks: ${JSON.stringify(wd.lines)}`);
  const mine = un.processes.find((p) => p.pid === pid);
  assert.ok(mine, `pid ${pid} is named`);
  assert.match(mine.why, why);
  assert.match(mine.why, /never signalled/);
  const dumpLine = wd.lines.find((l) => l.event === 'dump') as { perRank?: { pid: number }[] } | undefined;
  assert.ok(!dumpLine?.perRank?.some((r) => r.pid === pid), 'the watchdog never aimed a dump at it');
  // 2. the cockpit's `d`
  const state = await cockpitState(dir);
  assert.ok(!state.procs!.ranks.some((r) => r.proc.pid === pid));
  const actions = createActions({ host, runDir: dir, readOnly: false, state: () => state });
  await assert.rejects(
    actions.dump(() => {}),
    (e: Error) => {
      assert.match(e.message, /no rank process of this run is proven: nothing signalled/);
      assert.match(e.message, new RegExp(`pid ${pid}`));
      assert.match(e.message, why);
      return true;
    },
  );
  // 3. dumpAll handed the victim's own identity (a stale or crafted target list): refused at the signal
  const info = (await readProc(host, pid))!;
  const out = await dumpAll(host, dir, [{ rank: 0, pid, startTime: info.startTime }], await currentActor(host), {
    waitMs: 300,
    answerMs: 300,
  });
  assert.equal(out.perRank[0]!.status, 'refused');
  assert.match(out.perRank[0]!.why!, /not signalled/);
  await sleep(300);
  assert.ok(alive(v), 'the victim is alive');
  assert.equal(readdirSync(dir).filter((n) => n.startsWith('stackdump_')).length, 0);
}

test("a dead trainer's pid recycled by an unrelated python (via ns_last_pid) is never signalled", async (t) => {
  let writable = true;
  try {
    writeFileSync('/proc/sys/kernel/ns_last_pid', '');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EINVAL') writable = false;
  }
  if (!writable) {
    t.skip(
      '/proc/sys/kernel/ns_last_pid is not writable here (needs root in the pid namespace): the recycled-pid scenario cannot be staged',
    );
    return;
  }
  // a trainer-shaped process that proves itself (a rank of this run), then dies by SIGKILL and its
  // pid goes to a sleeping python started after the trainer's boot record
  let victim: ChildProcess | null = null;
  let dead: Kid | null = null;
  const dir0 = join(tmp, 'recycled');
  mkdirSync(dir0, { recursive: true });
  for (let attempt = 0; attempt < 30 && !victim; attempt++) {
    const k = await startKid(host, dir0);
    k.child.kill('SIGKILL');
    await k.exited;
    await sleep(20);
    writeFileSync('/proc/sys/kernel/ns_last_pid', String(k.pid - 1));
    const v = startVictim(['-c', 'import time; time.sleep(600)']);
    if (v.pid === k.pid) {
      victim = v;
      dead = k;
    } else v.kill('SIGKILL');
  }
  if (!victim || !dead) {
    t.skip("could not hand the dead trainer's pid to the victim (other processes took it first, 30 tries)");
    return;
  }
  const vi = await visible(victim.pid!, 'import time; time.sleep(600)');
  assert.notEqual(vi.startTime, dead.startTime);
  // the run's records: booted before the victim existed, silent for 10 minutes (a stall)
  const dir = runDir('recycled', victim.pid!, Math.floor(vi.startedAtMs! / 1000) - 600);
  await assertNotSignalled(
    dir,
    victim,
    /its command \(.*python3 -c import time; time.sleep\(600\)\) is not a trainer nsa-top knows/,
  );
  // the stale target the cockpit held for the dead trainer (its pid + start time) is refused too
  const out = await dumpAll(
    host,
    dir,
    [{ rank: 0, pid: dead.pid, startTime: dead.startTime }],
    await currentActor(host),
    { waitMs: 300 },
  );
  assert.equal(out.perRank[0]!.status, 'refused');
  assert.match(out.perRank[0]!.why!, /another process|start time/);
  assert.ok(alive(victim));
});

test('a heartbeat naming an older unrelated python (a run dir copied from another box) signals nothing', async () => {
  const v = startVictim(['-c', 'import time; time.sleep(600)']);
  const vi = await visible(v.pid!, 'import time; time.sleep(600)');
  // the copied heartbeat's boot is after the victim started (its writer was another process on
  // another box, which had the same pid)
  const dir = runDir('copied', v.pid!, Math.floor(vi.startedAtMs! / 1000) + 1);
  await assertNotSignalled(dir, v, /is not a trainer nsa-top knows/);
});

test('an older trainer of another run (train_showcase.py, CONFIG elsewhere) named by a heartbeat signals nothing', async () => {
  const repo = join(tmp, 'other-repo');
  mkdirSync(join(repo, 'scripts'), { recursive: true });
  mkdirSync(join(repo, 'configs'), { recursive: true });
  writeFileSync(join(repo, 'scripts', 'train_showcase.py'), 'import time\ntime.sleep(600)\n');
  writeFileSync(join(repo, 'configs', 'other.yaml'), 'train: {steps: 10, out_dir: "artifacts/other_run"}\n');
  const v = startVictim(['scripts/train_showcase.py', '--dataset', 'synthetic'], {
    cwd: repo,
    env: { CONFIG: 'configs/other.yaml', RANK: '0', WORLD_SIZE: '1' },
  });
  const vi = await visible(v.pid!, 'synthetic');
  const dir = runDir('copied-trainer', v.pid!, Math.floor(vi.startedAtMs! / 1000) + 1);
  await assertNotSignalled(dir, v, /its CONFIG .*other\.yaml writes to .*artifacts\/other_run, not this run/);
});

test('lookalikes with the run dir in argv (eval_trained_ckpt.py RUN_DIR; RANK in the environment) are not rank 0', async () => {
  const scripts = join(tmp, 'tools');
  mkdirSync(scripts, { recursive: true });
  writeFileSync(join(scripts, 'eval_trained_ckpt.py'), 'import time\ntime.sleep(600)\n');
  writeFileSync(join(scripts, 'inspect.py'), 'import time\ntime.sleep(600)\n');
  // a run dir of a trainer that is gone (its pid is nobody now: pid_max is never reached here)
  const dir = runDir('lookalike', 4_000_000, Math.floor(Date.now() / 1000) - 600);
  const a = startVictim([join(scripts, 'eval_trained_ckpt.py'), dir]);
  const b = startVictim([join(scripts, 'inspect.py'), '--run', dir], {
    env: { RANK: '0', LOCAL_RANK: '0', WORLD_SIZE: '1' },
  });
  await visible(a.pid!, dir);
  await visible(b.pid!, dir);
  for (const v of [a, b])
    await assertNotSignalled(
      dir,
      v,
      /names the run dir in its arguments, but its command \(.*\) is not a trainer nsa-top knows/,
    );
});

test("a heartbeat written inside a container names the writer's pid there: recognised as another pid namespace", async (t) => {
  // python3 is pid 2 inside a new pid namespace (sh is 1); pid 2 here is some other process
  const marker = join(tmp, 'ns-ready');
  const c = spawn(
    'unshare',
    [
      '--pid',
      '--fork',
      'sh',
      '-c',
      `${PY} -c "import os,time; open('${marker}','w').write(str(os.getpid())); time.sleep(600)" & wait`,
    ],
    { stdio: 'ignore', detached: true },
  );
  victims.push(c);
  const killGroup = () => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  t.after(killGroup);
  let inner = 0;
  for (let i = 0; i < 200 && !inner; i++) {
    await sleep(25);
    if (existsSync(marker)) inner = Number(readFileSync(marker, 'utf8'));
    if (c.exitCode !== null) break;
  }
  if (!inner) {
    t.skip('unshare --pid could not start a pid namespace here');
    return;
  }
  const dir = runDir('container', inner, Math.floor(Date.now() / 1000) - 600);
  const state = await cockpitState(dir);
  const u = state.procs!.unproven?.find((x) => x.pid === inner);
  assert.ok(u, JSON.stringify(state.procs));
  assert.match(u.why, /another pid namespace: its writer is pid \d+ here \(NSpid \d+ \d+\)/);
  assert.deepEqual(state.procs!.ranks, []);
  // the shell script (the path over SSH) reads NSpid the same way
  const scriptOnly = new Proxy(new LocalHost(), {
    get(tgt, k) {
      if (k === 'readProcTable') return undefined;
      const v = Reflect.get(tgt, k) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(tgt) : v;
    },
  });
  const viaScript = await findRunProcesses(scriptOnly, dir, { heartbeatPids: [{ rank: 0, pid: inner }] });
  assert.equal(viaScript.unproven?.find((x) => x.pid === inner)?.why, u.why);
});

test('over SSH (loopback sshd): a heartbeat naming an unrelated python signals nothing; a proven rank is still dumped', async (t) => {
  const { startSshd } = await import('../../helpers/sshd.js');
  const sshd = await startSshd();
  t.diagnostic(`sshd: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  const remote = await sshd.connect();
  const kids: Kid[] = [];
  try {
    const v = startVictim(['-c', 'import time; time.sleep(600)']);
    const vi = await visible(v.pid!, 'import time; time.sleep(600)');
    const dir = runDir('over-ssh', v.pid!, Math.floor(vi.startedAtMs! / 1000) + 1);
    const hints = {
      heartbeatPids: [{ rank: 0, pid: v.pid!, lastTs: vi.startedAtMs! + 6000, bootTs: vi.startedAtMs! + 1000 }],
    };
    const procs = await findRunProcesses(remote, dir, hints);
    assert.deepEqual(procs.ranks, []);
    const u = procs.unproven?.find((x) => x.pid === v.pid);
    assert.match(
      u?.why ?? '',
      /heartbeat_rank0 names pid \d+, but its command \(.*python3 -c import time; time.sleep\(600\)\) is not a trainer nsa-top knows/,
    );
    const state = { procs } as unknown as CockpitState;
    const actions = createActions({ host: remote, runDir: dir, readOnly: false, state: () => state });
    await assert.rejects(
      actions.dump(() => {}),
      /no rank process of this run is proven: nothing signalled.*is not a trainer nsa-top knows/,
    );
    const out = await dumpAll(
      remote,
      dir,
      [{ rank: 0, pid: v.pid!, startTime: vi.startTime }],
      await currentActor(remote),
      { waitMs: 300, answerMs: 300 },
    );
    assert.equal(out.perRank[0]!.status, 'refused');
    assert.match(out.perRank[0]!.why!, /not signalled: .*not a trainer nsa-top knows/);
    // a real rank of another run dir (reference-shaped: NSA_TOP_RUN_DIR in its environment) is proven
    // over SSH and answers
    const good = join(tmp, 'over-ssh-good');
    mkdirSync(good, { recursive: true });
    // a run dir holds a run's artifacts (nsa-top writes its action log into nothing else)
    writeFileSync(join(good, 'env.json'), JSON.stringify({ env: {} }));
    kids.push(await startKid(host, good));
    // its boot record (read over SSH as every signal path reads it) names it
    const gp = await findRunProcesses(remote, good, await runRecordHints(remote, good));
    assert.deepEqual(
      gp.ranks.map((r) => r.proc.pid),
      [kids[0]!.pid],
    );
    const ok = await dumpAll(
      remote,
      good,
      [{ rank: 0, pid: kids[0]!.pid, startTime: kids[0]!.startTime }],
      await currentActor(remote),
      { waitMs: 3000 },
    );
    assert.equal(ok.perRank[0]!.status, 'dumped', ok.perRank[0]!.why);
    await sleep(300);
    assert.ok(alive(v), 'the victim is alive');
  } finally {
    killKids(kids);
    await remote.close();
    await sshd.stop();
  }
});
