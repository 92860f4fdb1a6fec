// `report` tells the whole story (issue 19): the hang drill on the reference trainer under its
// supervisor (a stall that a halt ended is still a stall, and a stop that needed SIGINT says so in
// status, watchdog and report), an operator's halt of a hand-launched segment is a halt and not a
// crash, a diverged loss is named, and the dataset comes from the launch's argv as well as the log.
// Real processes (nsa-top launch / train), real files; every pid we start is recorded and
// SIGKILLed by verified start time if still alive; temp dirs are removed.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { killRecorded, runPids } from '../e2e/cleanup.js';
import { datasetFromArgv, datasetFromRunInfo } from '../../src/trainer/control/stopfacts.js';
import type { AdoptionRecord } from '../../src/trainer/launch/adopt.js';
import { LogFold } from '../../src/trainer/run/history.js';
import { Checker } from '../../src/checks/index.js';
import { fixture, FIXTURES, procs } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-report-story-'));
const started: { dir: string; pids: { pid: number; startTime: string | null }[] }[] = [];
const children: ChildProcess[] = [];

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of started) killRecorded([...s.pids, ...runPids(s.dir)]);
  rmSync(tmp, { recursive: true, force: true });
});

function cli(args: string[], env: Record<string, string> = {}, cwd = tmp) {
  return spawnSync(process.execPath, [BIN, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NSA_TOP_TEST: '1', ...env },
  });
}

async function waitFor<T>(what: string, f: () => T | null | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function lastStep(dir: string, rank: number): number {
  try {
    const lines = readFileSync(join(dir, `heartbeat_rank${rank}.jsonl`), 'utf8')
      .trim()
      .split('\n');
    for (let i = lines.length - 1; i >= 0; i--) {
      try {
        const s = (JSON.parse(lines[i]!) as { step?: number }).step;
        if (typeof s === 'number') return s;
      } catch {
        /* a partial line */
      }
    }
  } catch {
    /* not yet */
  }
  return -1;
}

type Crit = { id: string; status: string; evidence: string };
function crit(rep: { phases: { criteria: Crit[] }[] }, phase: number, id: string): Crit {
  const c = rep.phases[phase]!.criteria.find((x) => x.id === id);
  assert.ok(c, `criterion ${id} in phase ${phase}`);
  return c;
}

test(
  'the hang drill (hang@step=40,rank=1 under the supervisor, then stop): report NO-GO naming the stall, rank 1 and the SIGINT; status and watchdog exit 1; never "stopped by .HALT"',
  { timeout: 240_000 },
  async () => {
    const cwd = join(tmp, 'hang');
    mkdirSync(cwd);
    const l = cli(['launch', '--profile', 'demo', '--steps', '3000', '--', '--inject', 'hang@step=40,rank=1'], {}, cwd);
    assert.equal(l.status, 0, l.stderr + l.stdout);
    const runs = join(cwd, 'artifacts', 'train_runs');
    const dir = join(runs, readdirSync(runs)[0]!);
    const rec = { dir, pids: [] as { pid: number; startTime: string | null }[] };
    started.push(rec);
    await waitFor('rank 1 at the hang', () => lastStep(dir, 1) >= 40, 90_000);
    rec.pids = runPids(dir);
    // what the operator had: the watchdog (a short stall floor: the test does not wait 180 s) saw
    // the stall, and a stack dump of every rank was taken
    await waitFor(
      'the watchdog to call the stall',
      () => cli(['watchdog', '--once', dir], { NSA_WATCH_HEARTBEAT_STALL_S: '3' }).status === 1,
      60_000,
    );
    const d = cli(['dump', dir]);
    assert.equal(d.status, 0, d.stderr + d.stdout);
    const stop = cli(['stop', dir]);
    assert.equal(stop.status, 0, stop.stderr + stop.stdout);
    // .HALT is never seen by a hung rank: the supervisor SIGINTs after the profile's 10 s grace
    await waitFor(
      'the supervisor to finish the stop',
      () => {
        try {
          return JSON.parse(readFileSync(join(dir, '.nsa-top', 'supervisor.json'), 'utf8')).state === 'halted';
        } catch {
          return false;
        }
      },
      90_000,
    );
    assert.match(readFileSync(join(dir, '.nsa-top', 'supervisor.log'), 'utf8'), /after \.HALT: SIGINT to/);

    const st = cli(['status', dir]);
    assert.equal(st.status, 1, `status after the hang drill must exit 1:\n${st.stdout}`);
    assert.match(st.stdout, /STATE\s+HALTED — stopped by SIGINT at step 40\b.*\.HALT .*went unanswered/);
    assert.doesNotMatch(st.stdout, /stopped by \.HALT/);
    assert.match(st.stdout, /CRITICAL\s+stopped by SIGINT, not by \.HALT/);
    const sj = JSON.parse(cli(['status', dir, '--json']).stdout);
    assert.ok(
      sj.alerts.some((a: { id: string; level: string }) => a.id === 'stop:escalated' && a.level === 'critical'),
    );
    assert.equal(cli(['watchdog', '--once', dir]).status, 1, 'the watchdog judges the same');

    const r = cli(['report', dir, '--phase', '0', '--json']);
    assert.equal(r.status, 1, r.stderr);
    const rep = JSON.parse(r.stdout);
    assert.equal(rep.verdict, 'NO-GO');
    assert.match(rep.run.stateWhy, /stopped by SIGINT/);
    const clean = crit(rep, 0, 'clean-stop');
    assert.equal(clean.status, 'fail');
    assert.match(clean.evidence, /stalled at step 40 \(rank 1\) and never recovered/);
    // the watchdog ran before the dumps: its culprit is unknown; the dumps name the rank
    assert.match(clean.evidence, /rank 1 named by the watchdog|rank 1's stack dump shows injected-hang/);
    assert.match(clean.evidence, /stack dump\(s\) of rank 0, rank 1/);
    assert.match(clean.evidence, /SIGINT was needed: \.HALT by \S+ at .* went unanswered for \d+s, then SIGINT/);
    assert.match(clean.evidence, /metrics\.json: "ended": "aborted"/);
    assert.match(rep.phases[0].why, /no hang, every stop answered: .*stalled at step 40 \(rank 1\)/);
    const stall = rep.history.events.find((e: { kind: string; atStop?: boolean }) => e.kind === 'stall' && e.atStop);
    assert.equal(stall.rank, 1);
    assert.equal(stall.step, 40);
    const r1 = JSON.parse(cli(['report', dir, '--phase', '1', '--json']).stdout);
    const ns = crit(r1, 1, 'no-stall');
    assert.equal(ns.status, 'fail', 'the stall a halt ended is still a stall');
    assert.match(ns.evidence, /still on when the run was stopped/);
    const text = cli(['report', dir, '--phase', '0']).stdout;
    assert.doesNotMatch(text, /stopped by \.HALT/);
    assert.doesNotMatch(text, /✔ no stalls|✔ no critical alert/);
  },
);

test(
  "an operator's halt of a hand-launched segment is a halt, not a crash: from the recorded stdout, and from actions.jsonl alone",
  { timeout: 240_000 },
  async () => {
    const dir = join(tmp, 'hand', 'run');
    mkdirSync(dir, { recursive: true });
    // launched by hand, its stdout in the operator's own file outside the run dir
    const logPath = join(tmp, 'hand', 'stdout.log');
    // 120 steps: the halt (two CLI calls) lands well before the end at step 30, and the resumed
    // segment that then runs to the end is short
    const trainArgs = [
      'train',
      '--out',
      dir,
      '--ranks',
      '2',
      '--steps',
      '120',
      '--log-every',
      '5',
      '--save-every',
      '25',
    ];
    const start = (extra: string[]) => {
      const fd = openSync(logPath, 'a');
      const c = spawn(process.execPath, [BIN, ...trainArgs, ...extra], {
        cwd: join(tmp, 'hand'),
        stdio: ['ignore', fd, fd],
        env: { ...process.env, NSA_HEARTBEAT_EVERY: '1' },
      });
      closeSync(fd);
      children.push(c);
      return { c, done: new Promise<number | null>((res) => c.on('exit', (code) => res(code))) };
    };
    const rec = { dir, pids: [] as { pid: number; startTime: string | null }[] };
    started.push(rec);
    const first = start([]);
    await waitFor('30 steps', () => lastStep(dir, 0) >= 30, 90_000);
    rec.pids = runPids(dir);
    // nsa-top sees the live run it did not start: adoption records its argv and stdout
    cli(['status', dir]);
    const adopt = JSON.parse(readFileSync(join(dir, '.nsa-top', 'launch.json'), 'utf8')) as AdoptionRecord;
    assert.equal(adopt.kind, 'adopted');
    assert.equal(adopt.stdout, logPath);
    assert.ok(!existsSync(join(dir, 'train.log')), 'the run dir holds no train.log');
    const h = cli(['halt', dir]);
    assert.equal(h.status, 0, h.stderr + h.stdout);
    assert.equal(await first.done, 0);
    // resumed by hand from its checkpoint; it runs to the end
    rmSync(join(dir, '.HALT'));
    const second = start(['--resume']);
    assert.equal(await second.done, 0);

    const rep = JSON.parse(cli(['report', dir, '--phase', '0', '--json']).stdout);
    assert.deepEqual(
      rep.history.segments.map((g: { end: string }) => g.end),
      ['halted', 'current'],
    );
    const nc = crit(rep, 0, 'no-crash');
    assert.equal(nc.status, 'pass', nc.evidence);
    assert.match(
      nc.evidence,
      /segment #0 \(pid \d+\) steps 1–\d+ halted: stopped by \.HALT \(log: "HALT file detected"\)/,
    );
    assert.equal(crit(rep, 0, 'clean-stop').status, 'pass');

    // the stdout file is gone (rotated, another machine): nsa-top's own record of the halt suffices
    renameSync(logPath, `${logPath}.gone`);
    const rep2 = JSON.parse(cli(['report', dir, '--phase', '0', '--json']).stdout);
    const nc2 = crit(rep2, 0, 'no-crash');
    assert.equal(nc2.status, 'pass', nc2.evidence);
    assert.match(nc2.evidence, /halted: stopped by nsa-top's halt by \S+ at \S+ \(actions\.jsonl\)/);
    // and without that record it is the unexplained stop it looks like
    const actions = join(dir, '.nsa-top', 'actions.jsonl');
    writeFileSync(
      actions,
      readFileSync(actions, 'utf8')
        .split('\n')
        .filter((x) => !x.includes('"action":"halt"'))
        .join('\n'),
    );
    const nc3 = crit(JSON.parse(cli(['report', dir, '--phase', '0', '--json']).stdout), 0, 'no-crash');
    assert.equal(nc3.status, 'fail', 'without the log or the action record the stop is taken as a crash');
  },
);

test(
  'a diverged run (the reference trainer at lr 50: no NaN) gets a critical "loss diverged" with its steps',
  { timeout: 120_000 },
  async () => {
    const dir = join(tmp, 'diverge');
    const t = cli([
      'train',
      '--out',
      dir,
      '--steps',
      '60',
      '--lr',
      '50',
      '--log-every',
      '2',
      '--save-every',
      '0',
      '--eval-every',
      '0',
    ]);
    assert.equal(t.status, 0, t.stderr);
    const sj = JSON.parse(cli(['status', dir, '--json']).stdout);
    const a = sj.alerts.find((x: { id: string }) => x.id === 'loss:diverged');
    assert.ok(a, `a loss:diverged alert: ${JSON.stringify(sj.alerts.map((x: { title: string }) => x.title))}`);
    assert.equal(a.level, 'critical');
    assert.match(a.title, /^loss diverged: 5\.\d+ → [\d,]+ since step \d+$/);
    const peak = Math.max(
      ...readFileSync(join(dir, 'training.csv'), 'utf8')
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => Number(l.split(',')[1])),
    );
    assert.ok(peak > 1000, `the loss really diverged (peak ${peak})`);
    assert.match(a.detail, /the last 5 losses \(steps \d+–60\)/);
    const rep = cli(['report', dir, '--phase', '0']);
    assert.equal(rep.status, 1);
    assert.match(rep.stdout, /no critical alert: loss diverged/);
    // a healthy run (the reference trainer's recorded demo) and the real trainer's runs raise none
    for (const healthy of [
      join(FIXTURES, '..', 'reference', 'demo-healthy'),
      join(FIXTURES, 'single'),
      join(FIXTURES, 'ddp2-crash-resume', 'artifacts', 'ddp2-crash-resume'),
    ]) {
      const h = JSON.parse(cli(['status', healthy, '--json']).stdout);
      assert.ok(!h.alerts.some((x: { id: string }) => x.id === 'loss:diverged'), healthy);
    }
  },
);

test('the dataset comes from the launch argv when no log in the run dir names it; a loss pinned at ln(vocab) fails "dataset run"', () => {
  assert.equal(datasetFromArgv(['python', 'train.py', '--dataset', 'synthetic']), 'synthetic');
  assert.equal(datasetFromArgv(['python', 'train.py', '--dataset=fineweb_edu']), 'fineweb_edu');
  assert.equal(datasetFromArgv(['python', 'train.py']), null);
  assert.equal(
    datasetFromRunInfo(
      "profile: x\ncommand: torchrun --nproc_per_node=2 scripts/train_showcase.py --dataset 'synthetic' --ddp 1\n",
    ),
    'synthetic',
  );
  // the real trainer's 2-rank run on synthetic data, its train.log elsewhere (hand-launched)
  const dir = join(tmp, 'argv-ds');
  cpSync(join(FIXTURES, 'ddp2-crash-resume'), dir, { recursive: true });
  const out = join(dir, 'artifacts', 'ddp2-crash-resume');
  renameSync(join(out, 'train.log'), join(dir, 'elsewhere.log'));
  const before = crit(JSON.parse(cli(['report', out, '--phase', '1', '--json'], {}, dir).stdout), 1, 'real-run');
  assert.doesNotMatch(before.evidence, /synthetic data/, 'no log: the snapshot cannot name the dataset');
  const adoption: AdoptionRecord = {
    kind: 'adopted',
    version: 1,
    outDir: out,
    recordedAt: Date.now(),
    recordedBy: 'status',
    host: 'local',
    launcher: {
      pid: 1,
      startTime: '1',
      argv: [
        '/usr/bin/python3',
        '-m',
        'torch.distributed.run',
        '--nproc_per_node=2',
        'scripts/train_showcase.py',
        '--dataset',
        'synthetic',
        '--ddp',
        '1',
      ],
      cwd: dir,
      kind: 'torchrun',
    },
    ranks: [],
    env: { CONFIG: 'configs/ddp2-crash-resume.yaml' },
    config: 'configs/ddp2-crash-resume.yaml',
    procs: 2,
    stdout: null,
  };
  mkdirSync(join(out, '.nsa-top'), { recursive: true });
  writeFileSync(join(out, '.nsa-top', 'launch.json'), JSON.stringify(adoption));
  const c = crit(JSON.parse(cli(['report', out, '--phase', '1', '--json'], {}, dir).stdout), 1, 'real-run');
  assert.equal(c.status, 'fail');
  assert.match(c.evidence, /synthetic data \(--dataset in the launcher argv recorded at adoption: synthetic\)/);
  // loss 5.58–5.80 for 200 steps: pinned at ln(256) = 5.545, whatever the dataset is called
  assert.match(c.evidence, /loss pinned at ln\(256\) = 5\.545 \(±0\.25\) on \d+ % of the logged losses/);
  // the recorded stdout names it too (no --dataset in argv)
  adoption.launcher.argv = adoption.launcher.argv.filter((a) => a !== '--dataset' && a !== 'synthetic');
  adoption.stdout = join(dir, 'elsewhere.log');
  writeFileSync(join(out, '.nsa-top', 'launch.json'), JSON.stringify(adoption));
  const c2 = crit(JSON.parse(cli(['report', out, '--phase', '1', '--json'], {}, dir).stdout), 1, 'real-run');
  assert.match(c2.evidence, /synthetic data \(dataset= in the recorded stdout .*elsewhere\.log: synthetic\)/);
});

test("the reference launcher's ranks boot in any order: one launch is one process of the log, its halt stays with it", () => {
  // recorded (the demo's train.log): rank 1 prints its boot line after rank 0 already trains
  const launch = (halt: boolean) => [
    '[launcher] world_size=2: rank0=pid 16189, rank1=pid 16190 (a single-machine rehearsal, not a distributed engine)',
    '[boot] loading config /x/config.yaml',
    '[ddp] process group ready | backend=ipc world_size=2 timeout_min=15',
    '[train] dataset=pride-and-prejudice tokenizer=byte',
    '[boot] loading config /x/config.yaml',
    '[train] dataset=pride-and-prejudice tokenizer=byte',
    'step 0005 | loss 4.9',
    ...(halt ? ['[train] HALT file detected — stopping gracefully.'] : []),
  ];
  const f = new LogFold();
  for (const l of [...launch(true), ...launch(false)]) f.line(l);
  assert.equal(f.procs.length, 2);
  assert.deepEqual(
    f.procs.map((p) => p.halt),
    [true, false],
  );
  assert.equal(f.dataset, 'pride-and-prejudice');
});

test('the judge: a stop that needed SIGINT/SIGKILL is HALTED "stopped by SIGINT … went unanswered", critical; without the fact it is "stopped by .HALT"', async () => {
  // the real trainer's 2-rank run that stopped on .HALT (metrics.json written), no rank alive
  const run = await fixture('ddp2-dumps-halt');
  const now = Math.max(...run.ranks.map((r) => r.lastTs ?? 0)) + 60_000;
  const none = procs([]);
  const plain = new Checker().evaluate({ now, run, procs: none, gpu: null });
  assert.equal(plain.runState, 'HALTED');
  assert.match(plain.runStateWhy, /^stopped by \.HALT/);
  assert.ok(!plain.alerts.some((a) => a.id === 'stop:escalated'));
  for (const sig of ['SIGINT', 'SIGKILL'] as const) {
    const ev = new Checker().evaluate({
      now,
      run,
      procs: none,
      gpu: null,
      stopEscalation: sig,
      stopEscalationWhy: `${sig} by alice at 2026-11-26T04:09:13Z, 10s after .HALT (actions.jsonl)`,
    });
    assert.equal(ev.runState, 'HALTED');
    assert.match(
      ev.runStateWhy,
      new RegExp(`^stopped by ${sig} at step \\d+ of \\d+: \\.HALT.*went unanswered \\(${sig} by alice`),
    );
    assert.doesNotMatch(ev.runStateWhy, /stopped by \.HALT/);
    const a = ev.alerts.find((x) => x.id === 'stop:escalated');
    assert.equal(a?.severity, 'critical');
    assert.match(a!.title, new RegExp(`^stopped by ${sig}, not by \\.HALT`));
  }
});

test(
  'a crash is a crash, with the rank that died (crash@step=20,rank=1 on 2 ranks, the log in the run dir)',
  { timeout: 120_000 },
  () => {
    const dir = join(tmp, 'crash');
    mkdirSync(dir);
    const fd = openSync(join(dir, 'train.log'), 'a');
    const t = spawnSync(
      process.execPath,
      [
        BIN,
        'train',
        '--out',
        dir,
        '--ranks',
        '2',
        '--steps',
        '200',
        '--log-every',
        '5',
        '--inject',
        'crash@step=20,rank=1',
      ],
      { stdio: ['ignore', fd, fd], timeout: 110_000 },
    );
    closeSync(fd);
    assert.notEqual(t.status, 0, 'the injected crash fails the run');
    const rep = JSON.parse(cli(['report', dir, '--phase', '0', '--json']).stdout);
    assert.equal(rep.verdict, 'NO-GO');
    const c = crit(rep, 0, 'no-crash');
    assert.equal(c.status, 'fail');
    assert.match(c.evidence, /\(log: rank 1 \(pid \d+\) exited with code 1\)/);
  },
);
