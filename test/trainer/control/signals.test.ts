// Issue 24 #1 and #2 with real victims: a Python stand-in for the trainer (scripts/train_showcase.py,
// the run's NSA_TOP_RUN_DIR and RANK in its environment) that writes its boot record and installs its
// SIGUSR1 handler only when told to — SIGUSR1's default action kills it until then — and impostors
// started after the run's last record with the run's environment. Every path that sends SIGUSR1
// (the control dump, `nsa-top dump` locally and over --host, the cockpit's d, `watchdog
// --dump-on-stall`) must leave a rank still starting alive and name it not ready, and must never
// signal an impostor or a process that took a dead rank's pid. Victims are counted: 0.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createActions } from '../../../src/cockpit/actions.js';
import type { CockpitState } from '../../../src/cockpit/state.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { currentActor, dumpAll, dumpRun } from '../../../src/trainer/control/actions.js';
import { findRunProcesses } from '../../../src/trainer/run/processes.js';
import { hintsFromRun } from '../../../src/trainer/run/ranks.js';
import { openRunModel } from '../../../src/trainer/run/rundir.js';
import { tempDir } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-signals-'));
const started: ChildProcess[] = [];
const dirs: string[] = [];
after(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of [tmp, ...dirs]) rmSync(d, { recursive: true, force: true });
});

// The stand-in trainer. BOOT=1: its boot record first (heartbeat_rank{RANK}.jsonl, its pid), then
// PROGRESS steps; HANDLER=now|wait|none: when its SIGUSR1 handler goes in (wait: once $GO exists);
// die: a handler that ends the process (exit 0), as if a dump had brought it down.
// The handler writes a stack dump like the real trainer's, and a mark (MARKS/signalled.<pid>) so a
// test can tell a process was signalled at all; MARKS/ready.<pid> says the handler is in.
const STANDIN = `
import datetime, json, os, signal, sys, time, traceback
d = os.environ['NSA_TOP_RUN_DIR']; rank = int(os.environ.get('RANK', '0')); marks = os.environ['MARKS']
def rec(**kw):
    with open(os.path.join(d, 'heartbeat_rank%d.jsonl' % rank), 'a') as f:
        f.write(json.dumps(dict(ts=time.time(), pid=os.getpid(), rank=rank, **kw)) + '\\n')
def on_usr1(sig, frame):
    open(os.path.join(marks, 'signalled.%d' % os.getpid()), 'a').write('x\\n')
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with open(os.path.join(d, 'stackdump_%d.txt' % int(time.time())), 'w') as f:
        f.write('Signal %d at %sZ\\n' % (sig, now.isoformat()))
        traceback.print_stack(frame, file=f)
if os.environ.get('BOOT') == '1':
    rec(step=0, msg='boot', phase='start')
    for s in range(1, int(os.environ.get('PROGRESS', '0')) + 1):
        rec(step=s, msg='progress', loss=5 - s * 0.1, toks_per_s=400, lr=3e-4)
        with open(os.path.join(d, 'training.csv'), 'a') as f:
            f.write('%d,%.6f,3.000000e-04,400\\n' % (s, 5 - s * 0.1))
mode = os.environ.get('HANDLER', 'now')
if mode == 'die':
    on_usr1 = lambda sig, frame: os._exit(0)
if mode == 'wait':
    while not os.path.exists(os.environ['GO']):
        time.sleep(0.05)
if mode != 'none':
    signal.signal(signal.SIGUSR1, on_usr1)
    open(os.path.join(marks, 'ready.%d' % os.getpid()), 'w').close()
while True:
    time.sleep(1)
`;
const repo = join(tmp, 'nsa-vibe');
mkdirSync(join(repo, 'scripts'), { recursive: true });
const SCRIPT = join(repo, 'scripts', 'train_showcase.py');
writeFileSync(SCRIPT, STANDIN);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  f: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  what: string,
  ms = 60_000,
): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function runDir(tag: string): { dir: string; marks: string } {
  const dir = tempDir(tag);
  dirs.push(dir);
  const marks = join(tmp, `${tag}-marks`);
  mkdirSync(marks, { recursive: true });
  return { dir, marks };
}

interface Trainer {
  child: ChildProcess;
  pid: number;
}

function startTrainer(
  dir: string,
  marks: string,
  o: { rank: number; handler: 'now' | 'wait' | 'none' | 'die'; boot: boolean; progress?: number; go?: string },
): Trainer {
  const child = spawn(PY, ['-u', 'scripts/train_showcase.py'], {
    cwd: repo,
    env: {
      ...process.env,
      NSA_TOP_RUN_DIR: dir,
      RANK: String(o.rank),
      WORLD_SIZE: '2',
      MARKS: marks,
      HANDLER: o.handler,
      BOOT: o.boot ? '1' : '0',
      PROGRESS: String(o.progress ?? 0),
      GO: o.go ?? '',
    },
    stdio: 'ignore',
  });
  started.push(child);
  return { child, pid: child.pid! };
}

function alive(t: Trainer): boolean {
  return t.child.exitCode === null && t.child.signalCode === null;
}

function signalled(marks: string, t: Trainer): boolean {
  return existsSync(join(marks, `signalled.${t.pid}`));
}

/** the trainer's boot record is in its heartbeat file */
async function booted(dir: string, rank: number, t: Trainer): Promise<void> {
  await until(() => {
    try {
      return readFileSync(join(dir, `heartbeat_rank${rank}.jsonl`), 'utf8').includes(`"pid": ${t.pid},`);
    } catch {
      return false;
    }
  }, `boot record of pid ${t.pid}`);
}

/** visible in /proc with its own command line (not the fork's parent's) */
async function visible(t: Trainer): Promise<void> {
  await until(async () => (await readProc(host, t.pid))?.argv.at(-1) === 'scripts/train_showcase.py', `pid ${t.pid}`);
}

function cli(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { code: number | null; json: Record<string, unknown>; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000, env });
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    /* not --json */
  }
  return { code: r.status, json, stderr: r.stderr };
}

type PerRank = { rank: number; pid: number; status: string; why?: string; notReady?: boolean; file?: string }[];

async function cockpitState(dir: string): Promise<CockpitState> {
  const { model } = await openRunModel(host, dir);
  const run = await model.poll();
  const procs = await findRunProcesses(host, dir, hintsFromRun(run));
  return { procs, run } as unknown as CockpitState;
}

const NOT_READY = /rank 0 not ready for a dump yet \(still starting: no SIGUSR1 handler\)/;

test('a rank still starting (boot record written, no SIGUSR1 handler yet) is not signalled by any dump path and is named not ready; once its handler is in, the dump works', async () => {
  const { dir, marks } = runDir('notready');
  const go = join(marks, 'go');
  const t = startTrainer(dir, marks, { rank: 0, handler: 'wait', boot: true, go });
  await booted(dir, 0, t);
  await visible(t);
  // the control dump (what `nsa-top dump` runs)
  const r = await dumpRun(host, dir, () => currentActor(host), { waitMs: 500, answerMs: 500 });
  assert.ok(r.outcome, `the rank is proven by its boot record: ${JSON.stringify(r.unproven)}`);
  const pr = r.outcome.perRank[0]!;
  assert.deepEqual([pr.pid, pr.status, pr.notReady], [t.pid, 'refused', true]);
  assert.match(pr.why!, NOT_READY);
  assert.match(pr.why!, /py-spy|try again/);
  // dumpAll handed the rank directly
  const info = (await readProc(host, t.pid))!;
  const d = await dumpAll(host, dir, [{ rank: 0, pid: t.pid, startTime: info.startTime }], await currentActor(host), {
    waitMs: 300,
    answerMs: 300,
  });
  assert.equal(d.perRank[0]!.notReady, true);
  // the cockpit's d
  const state = await cockpitState(dir);
  const actions = createActions({ host, runDir: dir, readOnly: false, state: () => state });
  const c = await actions.dump(() => {});
  assert.deepEqual([c.results[0]!.outcome, c.results[0]!.notReady], ['refused', true]);
  assert.match(c.results[0]!.why ?? '', NOT_READY);
  // `nsa-top dump`
  const x = cli(['dump', dir, '--json']);
  assert.equal(x.code, 1, x.stderr);
  const xr = (x.json.perRank as PerRank)[0]!;
  assert.deepEqual([xr.pid, xr.status, xr.notReady], [t.pid, 'refused', true]);
  assert.match(xr.why!, NOT_READY);
  assert.doesNotMatch(JSON.stringify(x.json), /is gone/);
  const plain = cli(['dump', dir]);
  assert.match(plain.stderr, /rank 0 \(pid \d+\): refused — rank 0 not ready for a dump yet/);
  await sleep(300);
  assert.ok(alive(t), 'the rank still starting is alive');
  assert.ok(!signalled(marks, t));
  assert.deepEqual(
    readdirSync(dir).filter((n) => n.startsWith('stackdump_')),
    [],
  );
  // the action log says why
  const log = readFileSync(join(dir, '.nsa-top', 'actions.jsonl'), 'utf8');
  assert.match(log, /not ready for a dump yet/);
  // the handler goes in: the same command dumps it
  writeFileSync(go, '');
  await until(() => existsSync(join(marks, `ready.${t.pid}`)), 'the handler');
  const ok = cli(['dump', dir, '--json']);
  assert.equal(ok.code, 0, JSON.stringify(ok.json));
  const okr = (ok.json.perRank as PerRank)[0]!;
  assert.equal(okr.status, 'dumped');
  assert.ok(okr.file && existsSync(okr.file));
  assert.ok(alive(t), 'the dumped rank goes on');
});

test('nsa-top dump --host (loopback sshd): the handler is checked on the remote side, in the same command as the kill', async (t) => {
  const { startSshd } = await import('../../helpers/sshd.js');
  const sshd = await startSshd();
  t.diagnostic(`sshd: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  try {
    const { dir, marks } = runDir('notready-ssh');
    const go = join(marks, 'go');
    const tr = startTrainer(dir, marks, { rank: 0, handler: 'wait', boot: true, go });
    await booted(dir, 0, tr);
    await visible(tr);
    const home = join(tmp, 'home');
    mkdirSync(home, { recursive: true });
    const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
    const remote = [
      '--host',
      `${userInfo().username}@127.0.0.1:${sshd.port}`,
      '-i',
      sshd.userKey,
      '--accept-new-host-key',
    ];
    const x = cli(['dump', dir, '--json', ...remote], env);
    assert.equal(x.code, 1, `${x.stderr} ${JSON.stringify(x.json)}`);
    const xr = (x.json.perRank as PerRank)[0]!;
    assert.deepEqual([xr.pid, xr.status, xr.notReady], [tr.pid, 'refused', true]);
    assert.match(xr.why!, NOT_READY);
    await sleep(300);
    assert.ok(alive(tr), 'alive after a dump over SSH');
    assert.ok(!signalled(marks, tr));
    writeFileSync(go, '');
    await until(() => existsSync(join(marks, `ready.${tr.pid}`)), 'the handler');
    const ok = cli(['dump', dir, '--json', ...remote], env);
    assert.equal(ok.code, 0, `${ok.stderr} ${JSON.stringify(ok.json)}`);
    assert.equal((ok.json.perRank as PerRank)[0]!.status, 'dumped');
    assert.ok(alive(tr));
  } finally {
    await sshd.stop();
  }
});

test("impostors with the run's NSA_TOP_RUN_DIR and RANK, started after its last record, are never signalled: nsa-top dump, the cockpit's d, watchdog --dump-on-stall", async () => {
  const { dir, marks } = runDir('impostor');
  // the run's one rank: booted, three steps, then silent (a stall); its handler is in
  const rank0 = startTrainer(dir, marks, { rank: 0, handler: 'now', boot: true, progress: 3 });
  await until(() => existsSync(join(marks, `ready.${rank0.pid}`)), 'rank 0');
  await booted(dir, 0, rank0);
  await sleep(100); // (the impostors start after the last record, by the clock)
  // impostor A: no handler (SIGUSR1 would kill it); impostor B: a handler that marks any signal
  const a = startTrainer(dir, marks, { rank: 1, handler: 'none', boot: false });
  const b = startTrainer(dir, marks, { rank: 0, handler: 'now', boot: false });
  await visible(a);
  await visible(b);
  await until(() => existsSync(join(marks, `ready.${b.pid}`)), 'impostor B');
  const impostors = [a, b];
  const notAimedAt = (perRank: PerRank | undefined) =>
    assert.ok(!perRank?.some((r) => impostors.some((i) => i.pid === r.pid)), JSON.stringify(perRank));

  // 1. nsa-top dump
  const x = cli(['dump', dir, '--json']);
  assert.equal(x.code, 0, `${x.stderr} ${JSON.stringify(x.json)}`);
  const per = x.json.perRank as PerRank;
  assert.deepEqual(
    per.map((r) => [r.rank, r.pid, r.status]),
    [[0, rank0.pid, 'dumped']],
  );
  const refused = x.json.refused as { pid: number; why: string }[];
  for (const i of impostors) {
    const u = refused.find((r) => r.pid === i.pid);
    assert.ok(u, `impostor ${i.pid} is named: ${JSON.stringify(refused)}`);
    assert.match(u.why, /names this run in its environment, but no record of the run names pid \d+/);
  }
  // 1b. the boot record rotated away (a fresh file holding rank 0's last heartbeat only): rank 0 is
  // still named by that record, the impostors still by nothing
  const hb = join(dir, 'heartbeat_rank0.jsonl');
  const recs = readFileSync(hb, 'utf8').trim().split('\n');
  renameSync(hb, `${hb}.1`);
  writeFileSync(hb, `${recs.at(-1)}\n`);
  const rot = cli(['dump', dir, '--json']);
  assert.equal(rot.code, 0, `${rot.stderr} ${JSON.stringify(rot.json)}`);
  assert.deepEqual(
    (rot.json.perRank as PerRank).map((r) => [r.pid, r.status]),
    [[rank0.pid, 'dumped']],
  );
  for (const i of impostors)
    assert.ok(
      (rot.json.refused as { pid: number }[]).some((r) => r.pid === i.pid),
      `impostor ${i.pid} refused`,
    );
  renameSync(`${hb}.1`, hb);
  // 2. the cockpit's d
  const state = await cockpitState(dir);
  const actions = createActions({ host, runDir: dir, readOnly: false, state: () => state });
  const c = await actions.dump(() => {});
  assert.deepEqual(
    c.results.filter((r) => r.outcome === 'dumped').map((r) => r.pid),
    [rank0.pid],
  );
  for (const i of impostors) assert.equal(c.results.find((r) => r.pid === i.pid)?.outcome, 'refused');
  // 3. watchdog --dump-on-stall (acting, not --once)
  const wd = spawn(
    process.execPath,
    [BIN, 'watchdog', dir, '--dump-on-stall', '--stall', '1', '--interval', '0.2', '--no-gpu'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  started.push(wd);
  let out = '';
  wd.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  const lines = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const dumpLine = await until(() => lines().find((l) => l.event === 'dump'), 'the watchdog dump', 90_000);
  notAimedAt(dumpLine.perRank as PerRank);
  assert.deepEqual(
    (dumpLine.perRank as PerRank).map((r) => [r.pid, r.status]),
    [[rank0.pid, 'dumped']],
  );
  await sleep(1500); // a few more rounds: the run has not ended, none of its processes was killed
  wd.kill('SIGTERM');
  await until(() => wd.exitCode !== null || wd.signalCode !== null, 'the watchdog to stop');
  assert.ok(
    !lines().some((l) => l.event === 'state' && /FINISHED|EXITED/.test(String(l.state))),
    `no run end logged: ${out}`,
  );

  // 0 victims
  await sleep(300);
  for (const i of impostors) assert.ok(alive(i), `impostor ${i.pid} is alive`);
  assert.ok(!signalled(marks, b), 'impostor B was never signalled at all');
  assert.ok(alive(rank0), 'the rank answered every dump and goes on');
});

test("a rank that ends after the watchdog's own SIGUSR1 is not logged as a run that finished or halted by itself", async () => {
  const { dir, marks } = runDir('ended');
  const rank0 = startTrainer(dir, marks, { rank: 0, handler: 'die', boot: true, progress: 3 });
  await until(() => existsSync(join(marks, `ready.${rank0.pid}`)), 'rank 0');
  const wd = spawn(
    process.execPath,
    [BIN, 'watchdog', dir, '--dump-on-stall', '--stall', '1', '--interval', '0.2', '--no-gpu'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  started.push(wd);
  let out = '';
  wd.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  await until(() => wd.exitCode !== null, 'the watchdog to see the run end', 90_000);
  const lines = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const dump = lines.find((l) => l.event === 'dump') as { perRank: PerRank } | undefined;
  assert.equal(dump?.perRank[0]?.status, 'no-answer', out);
  assert.match(dump!.perRank[0]!.why!, /the process ended after nsa-top sent it SIGUSR1/);
  assert.doesNotMatch(dump!.perRank[0]!.why!, /is gone/);
  const exit = lines.find((l) => l.event === 'exit')!;
  assert.equal(exit.state, 'EXITED', out);
  assert.match(String(exit.why), /rank 0 \(pid \d+\) ended — after this watchdog's SIGUSR1/);
  assert.equal(exit.code, 1);
  assert.ok(!lines.some((l) => l.event === 'state' && /FINISHED|HALTED/.test(String(l.state))), out);
});

test("pid reuse inside `unshare --pid --fork --mount-proc`: a dead rank's pid taken by the same command is not signalled by nsa-top dump", (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('needs root (unshare --pid and ns_last_pid inside the new pid namespace)');
    return;
  }
  const probe = spawnSync(
    'unshare',
    ['--pid', '--fork', '--mount-proc', 'sh', '-c', 'echo $$ > /proc/sys/kernel/ns_last_pid && echo ok'],
    {
      encoding: 'utf8',
    },
  );
  if (probe.status !== 0 || !probe.stdout.includes('ok')) {
    t.skip(
      `unshare --pid --fork --mount-proc is not permitted here: ${(probe.stderr || probe.error?.message || '').trim()}`,
    );
    return;
  }
  const { dir, marks } = runDir('reuse');
  // inside the namespace, pids are this script's to hand out: rank 0 boots (its record names its
  // pid), dies by SIGKILL, and the same command (no boot record of its own; a handler that marks
  // any signal) is started on its pid by setting ns_last_pid; then nsa-top dump.
  const script = `
set -u
D="$1"; M="$2"; PY="$3"; BIN="$4"; NODE="$5"
cd "$(dirname "$(dirname "$6")")"
export NSA_TOP_RUN_DIR="$D" RANK=0 WORLD_SIZE=1 MARKS="$M" PROGRESS=2
BOOT=1 HANDLER=now "$PY" -u scripts/train_showcase.py & A=$!
i=0; until [ -e "$M/ready.$A" ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 70; sleep 0.05; done
kill -9 $A; wait $A 2>/dev/null
sleep 0.2
echo $((A - 1)) > /proc/sys/kernel/ns_last_pid
BOOT=0 HANDLER=now "$PY" -u scripts/train_showcase.py & B=$!
echo "$A $B" > "$M/pids"
[ "$A" = "$B" ] || { kill -9 $B; exit 77; }
i=0; until [ -e "$M/ready.$B" ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 71; sleep 0.05; done
"$NODE" "$BIN" dump "$D" --json > "$M/dump.json" 2> "$M/dump.err"; echo $? > "$M/dump.rc"
sleep 0.3
kill -0 $B && echo alive > "$M/alive"
kill -9 $B
`;
  const r = spawnSync(
    'unshare',
    ['--pid', '--fork', '--mount-proc', 'sh', '-c', script, 'sh', dir, marks, PY, BIN, process.execPath, SCRIPT],
    { encoding: 'utf8', timeout: 180_000 },
  );
  if (r.status === 77) {
    t.skip(`the dead rank's pid went to another process first (${readFileSync(join(marks, 'pids'), 'utf8').trim()})`);
    return;
  }
  assert.equal(r.status, 0, `${r.stderr}`);
  const [pa, pb] = readFileSync(join(marks, 'pids'), 'utf8').trim().split(' ').map(Number);
  assert.equal(pa, pb, 'the same pid');
  const dump = JSON.parse(readFileSync(join(marks, 'dump.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(readFileSync(join(marks, 'dump.rc'), 'utf8').trim(), '3', JSON.stringify(dump));
  assert.match(String(dump.detail), /no rank process (of this run )?is running/);
  const u = (dump.refused as { pid: number; why: string }[]).find((x) => x.pid === pb);
  assert.match(u?.why ?? '', /after the boot record .* the pid was recycled/);
  assert.ok(existsSync(join(marks, 'alive')), 'the process on the reused pid is alive');
  assert.ok(!existsSync(join(marks, `signalled.${pb}`)), 'and was never signalled');
});
