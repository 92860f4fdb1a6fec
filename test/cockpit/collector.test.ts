// The collector reads a real run dir through the Host and emits a CockpitState only when something
// the screen shows changed (the UI renders on emission), judged by the shared Checker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Collector } from '../../src/cockpit/collector.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import type { ConnState } from '../../src/remote/host.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { readProc } from '../../src/remote/procs.js';
import { FIXTURES } from '../ui/helpers.js';

test('collector: one emission per visible change, none for an unchanged run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-collector-'));
  try {
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
    const c = new Collector({ host: new LocalHost(), runDir: dir, readOnly: true });
    const seen: CockpitState[] = [];
    c.subscribe((s) => seen.push(s));
    const s1 = await c.tick();
    assert.equal(seen.length, 1);
    assert.equal(s1.runState, 'HALTED');
    assert.equal(s1.run.step, 31);
    assert.equal(s1.readOnly, true);
    assert.ok(s1.self.rssMiB && s1.self.rssMiB > 10, 'measures its own RSS');
    await c.tick();
    await c.tick();
    assert.equal(seen.length, 1, 'nothing changed: no new state, no new frame');
    // the trainer writes another progress record: step 32 shows up
    appendFileSync(
      join(dir, 'heartbeat_rank0.jsonl'),
      JSON.stringify({
        ts: Date.now() / 1000,
        pid: 32202,
        rank: 0,
        step: 32,
        msg: 'progress',
        loss: 5.6,
        toks_per_s: 1000,
      }) + '\n',
    );
    appendFileSync(join(dir, 'training.csv'), '32,5.6,2.97e-04,1000\n');
    const s2 = await c.tick();
    assert.equal(seen.length, 2, 'a new step is a new state');
    assert.equal(s2.run.step, 32);
    // an action by someone else appears in the shared action log
    const rec = {
      ts: Date.now(),
      who: { user: 'alice', tty: '/dev/pts/3', tmux: null, host: 'box', pid: 1 },
      action: 'dump',
      target: {},
      result: 'ok',
      detail: '2/2 ranks dumped',
    };
    mkdirSync(join(dir, '.nsa-top'), { recursive: true });
    appendFileSync(join(dir, '.nsa-top', 'actions.jsonl'), JSON.stringify(rec) + '\n');
    const s3 = await c.tick();
    assert.equal(seen.length, 3);
    assert.equal(s3.actions.at(-1)?.who.user, 'alice');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('collector: a hand-launched run relaunched under a supervisor — the supervisor shows without reopening the cockpit', async () => {
  const { writeFileSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-collector-adopt-'));
  try {
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
    const c = new Collector({ host: new LocalHost(), runDir: dir, readOnly: true });
    assert.equal((await c.tick()).supervisor, null);
    // what relaunch of an adopted run leaves: a launcher dir inside .nsa-top/, pointed at by run.json
    const launcher = join(dir, '.nsa-top', 'supervised', 'x_1');
    mkdirSync(join(launcher, '.nsa-top'), { recursive: true });
    // the supervisor must be alive to be believed: this test process stands in for it
    const me = await readProc(new LocalHost(), process.pid);
    writeFileSync(
      join(launcher, '.nsa-top', 'supervisor.json'),
      JSON.stringify({
        runDir: launcher,
        profile: 'adopted',
        supervisor: { pid: process.pid, startTime: me!.startTime },
        child: null,
        state: 'running',
        restarts: 0,
        maxRestarts: 3,
        exitCodes: [],
        lastCommand: [],
        resumeFrom: null,
        updatedAt: Date.now(),
        outDir: dir,
        phase: 'train',
        note: null,
      }),
    );
    // its run.info names the out_dir back: a pointer is followed only then (src/trainer/run/pointers.ts)
    writeFileSync(join(launcher, 'run.info'), `run_dir: ${launcher}\nprofile: adopted\nout_dir: ${dir}\n`);
    writeFileSync(join(dir, '.nsa-top', 'run.json'), JSON.stringify({ runDir: launcher, profile: 'adopted' }));
    const s2 = await c.tick();
    assert.equal(s2.supervisor?.profile, 'adopted');
    assert.equal(s2.supervisor?.state, 'running');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A LocalHost whose connection can drop and whose polls can hang, as an SSH host's do. */
class DroppingHost extends LocalHost {
  conn: ConnState = { state: 'connected', since: Date.now() };
  hang: Promise<void> | null = null;
  override connState(): ConnState {
    return this.conn;
  }
  override async pollDir(...a: Parameters<LocalHost['pollDir']>): ReturnType<LocalHost['pollDir']> {
    if (this.hang) await this.hang;
    return super.pollDir(...a);
  }
}

test('collector: a dropped host or a stuck poll is STALE with its age, never the last live-looking state', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-collector-'));
  const host = new DroppingHost();
  const c = new Collector({ host, runDir: dir, readOnly: true, intervalMs: 200, staleAfterMs: 400 });
  try {
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
    let rounds = 0;
    c.onRound(() => rounds++);
    const s1 = await c.tick();
    assert.equal(s1.runState, 'HALTED');
    assert.equal(rounds, 1, 'the end of each round is told, a new state or not');
    host.conn = { state: 'reconnecting', since: Date.now(), attempt: 2, lastError: 'ECONNRESET' };
    const s2 = await c.tick();
    assert.equal(s2.runState, 'STALE');
    assert.equal(s2.stateHealth, 'warning');
    assert.match(
      s2.runStateWhy,
      /^no fresh data for [\d.]+ ?\w+ \(host reconnecting, try 2: ECONNRESET\); last seen HALTED/,
    );
    assert.equal(s2.advancing, false);
    host.conn = { state: 'connected', since: Date.now() };
    assert.equal((await c.tick()).runState, 'HALTED', 'fresh again: judged again');
    // a poll that hangs (the connection silently gone): the screen must not keep the last frame
    let release!: () => void;
    host.hang = new Promise<void>((r) => (release = r));
    const stale = new Promise<CockpitState>((resolve) => c.subscribe((s) => s.runState === 'STALE' && resolve(s)));
    const before = rounds;
    c.start();
    const s3 = await stale;
    assert.match(s3.runStateWhy, /^no fresh data for .*last seen HALTED/);
    // the round has not ended: the ages on screen were told to count on meanwhile
    assert.ok(rounds > before, 'a hanging round still ticks the screen');
    host.hang = null;
    release();
    const back = new Promise<CockpitState>((resolve) => c.subscribe((s) => s.runState !== 'STALE' && resolve(s)));
    assert.equal((await back).runState, 'HALTED');
  } finally {
    c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('collector: an open cockpit sees its supervisor SIGKILLed in the next round, though supervisor.json never changes', async () => {
  const { spawn } = await import('node:child_process');
  const { writeFileSync, statSync } = await import('node:fs');
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-collector-supdead-'));
  // a stand-in supervisor: a process of our own, named in supervisor.json by pid + start time
  const stand = spawn('sleep', ['600'], { stdio: 'ignore' });
  try {
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
    rmSync(join(dir, 'metrics.json')); // a run that has not ended: a dead supervisor is critical
    const host = new LocalHost();
    let me = await readProc(host, stand.pid!);
    for (let i = 0; i < 50 && !me; i++) {
      await new Promise((r) => setTimeout(r, 50));
      me = await readProc(host, stand.pid!);
    }
    assert.ok(me, 'the stand-in runs');
    mkdirSync(join(dir, '.nsa-top'), { recursive: true });
    const file = join(dir, '.nsa-top', 'supervisor.json');
    writeFileSync(
      file,
      JSON.stringify({
        runDir: dir,
        profile: 'p',
        supervisor: { pid: stand.pid, startTime: me.startTime },
        child: null,
        state: 'running',
        restarts: 1,
        maxRestarts: 2,
        exitCodes: [{ at: Date.now() - 5000, code: null, signal: 'SIGKILL' }],
        lastCommand: [],
        resumeFrom: null,
        updatedAt: Date.now(),
      }),
    );
    const mtime = statSync(file).mtimeMs;
    const c = new Collector({ host, runDir: dir, readOnly: true });
    const s1 = await c.tick();
    assert.equal(s1.supervisor?.state, 'running');
    assert.ok(s1.alerts.some((a) => a.id === 'supervisor:restarted'));
    assert.ok(!s1.alerts.some((a) => a.id === 'supervisor:dead'));
    stand.kill('SIGKILL');
    await new Promise<void>((r) => stand.once('exit', () => r()));
    const s2 = await c.tick();
    assert.equal(statSync(file).mtimeMs, mtime, 'the file did not change');
    assert.equal(s2.supervisor?.supervisorGone, true);
    const dead = s2.alerts.find((a) => a.id === 'supervisor:dead');
    assert.equal(dead?.severity, 'critical');
    assert.equal(dead?.title, `supervisor dead (pid ${stand.pid} gone): crashes will not be restarted`);
    assert.match(dead!.detail, /1 of 2 restarts used/);
    assert.ok(
      !s2.alerts.some((a) => a.id === 'supervisor:restarted'),
      'no "supervisor restarted the trainer" beside it, not even clearing',
    );
  } finally {
    if (stand.exitCode === null && stand.signalCode === null) stand.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('collector: a rank stopped (SIGSTOP) between two reads of the process table is STALLED and named the next round; after SIGCONT its alert is gone the next round', async (t) => {
  const { spawn, spawnSync } = await import('node:child_process');
  const { existsSync, readFileSync, writeFileSync } = await import('node:fs');
  const { dirname } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  if (spawnSync(PY, ['-c', 'pass']).status !== 0)
    return t.skip(`no working ${PY}: the real trainer's stand-in cannot run`);
  const STANDIN = join(
    dirname(fileURLToPath(import.meta.url)),
    '..',
    'trainer',
    'control',
    'standin',
    'train_showcase.py',
  );
  // two stand-in ranks of the real trainer, tied to the run dir by CONFIG's train.out_dir, each
  // named by its own boot record: proven ranks, as the real trainer's are
  const work = mkdtempSync(join(tmpdir(), 'nsa-top-collector-stop-'));
  const dir = join(work, 'artifacts', 'run');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(work, 'config.yaml'), 'train:\n  out_dir: artifacts/run\n  steps: 100\n');
  const kids = [0, 1].map((r) =>
    spawn(PY, ['-u', STANDIN], {
      cwd: work,
      env: { ...process.env, CONFIG: 'config.yaml', RANK: String(r), LOCAL_RANK: String(r), WORLD_SIZE: '2' },
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  );
  const state = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];
  const until = async (what: string, f: () => boolean) => {
    for (const end = Date.now() + 15_000; !f(); await new Promise((r) => setTimeout(r, 20)))
      assert.ok(Date.now() < end, `timed out waiting for ${what}`);
  };
  // the process table every 5 s (the cockpit's cadence); the rounds are ticked by hand
  const c = new Collector({ host: new LocalHost(), runDir: dir, readOnly: true, procsIntervalMs: 5000 });
  try {
    await Promise.all(kids.map((k) => new Promise((r) => k.stdout!.once('data', r))));
    const rank1 = kids[1]!.pid!;
    // a round that reads the table and proves both ranks
    let s = await c.tick();
    for (let i = 0; i < 20 && (s.procs?.ranks.length ?? 0) < 2; i++) s = await c.tick();
    assert.deepEqual(
      s.procs?.ranks.map((r) => r.rank).sort(),
      [0, 1],
      `both stand-ins proven: ${JSON.stringify(s.procs?.unproven)}`,
    );
    assert.notEqual(s.runState, 'STALLED');
    // a calm round: the table is on its 5 s cadence now (not read again until it is due)
    const readAt = (await c.tick()).procs?.at;
    process.kill(rank1, 'SIGSTOP');
    await until('rank 1 stopped', () => state(rank1) === 'T');
    // the next round, well inside the table's 5 s: named
    s = await c.tick();
    assert.equal(s.runState, 'STALLED', `${s.runState}: ${s.runStateWhy}`);
    assert.match(s.runStateWhy, new RegExp(`^rank 1 \\(pid ${rank1}\\) is stopped \\(T\\)`));
    assert.equal(s.alerts.find((a) => a.id === 'proc-state:1')?.severity, 'critical');
    assert.notEqual(s.procs?.at, readAt, 'the whole table was read again for it');
    process.kill(rank1, 'SIGCONT');
    await until('rank 1 running', () => state(rank1) !== 'T');
    s = await c.tick();
    assert.notEqual(s.runState, 'STALLED', s.runStateWhy);
    assert.ok(!s.alerts.some((a) => a.id === 'proc-state:1'), 'the stopped alert is gone, not clearing');
    assert.equal(s.alertHistory?.[0]?.id, 'proc-state:1', 'its episode is on the timeline');
  } finally {
    for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  }
});
