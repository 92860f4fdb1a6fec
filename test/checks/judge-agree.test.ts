// One judge, one observation: for every fixture run and every generated run — live ones included, a
// supervised run whose supervisor is SIGKILLed with a halt request pending among them — the cockpit's
// collector, `status --json`, `watchdog --once` and `report` give the same state and the same critical
// alert ids (status and watchdog also the same exit code), and `watchdog --once` (even asked to --halt)
// changes no file of the run outside .nsa-top/. Without --halt the watchdog only observes: an anomaly
// is reported, never written into the run.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FIXTURES } from './helpers.js';
import { nsaTopAsync } from '../helpers/cli.js';
import { spawnWithoutDac, withoutDacSkip } from '../helpers/unprivileged.js';
import { Collector } from '../../src/cockpit/collector.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { verifyProcess } from '../../src/remote/procs.js';
import { currentActor } from '../../src/trainer/control/actions.js';
import { submitHaltAfterCheckpoint } from '../../src/trainer/control/requests.js';
import { launchRun, readSupervisorState } from '../../src/trainer/launch/launch.js';
import { tempDir } from '../trainer/control/helpers.js';
import { until } from '../trainer/launch/helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-judge-agree-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function cli(args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
}

/** the cockpit's view of a run: the collector's second round (a checkpoint is complete once its
 *  size holds across two polls: like status, it pauses before that round only when a checkpoint has
 *  been seen once), read-only, never taking anything over */
async function cockpitLook(dir: string): Promise<CockpitState> {
  const c = new Collector({ host: new LocalHost(), runDir: dir, readOnly: true });
  const first = await c.tick();
  if (first.run.checkpoints.some((k) => !k.complete)) await new Promise((r) => setTimeout(r, 800));
  return c.tick();
}

const activeCritical = (s: CockpitState) =>
  s.alerts
    .filter((a) => a.severity === 'critical' && a.clearing === undefined)
    .map((a) => a.id)
    .sort();

/**
 * The four surfaces on one run: the same state and the same critical alert ids. `report` grades a
 * run; its `run.state` and `critical[]` are the same evaluation.
 */
async function fourAgree(dir: string, what = dir) {
  const s = cli(['status', dir, '--json']);
  assert.ok(s.status === 0 || s.status === 1, `${what}: status exit ${s.status} ${s.stderr}`);
  const snap = JSON.parse(s.stdout);
  const statusCrit = snap.alerts
    .filter((a: { level: string }) => a.level === 'critical')
    .map((a: { id: string }) => a.id)
    .sort();
  const w = cli(['watchdog', dir, '--once', '--no-gpu']);
  assert.ok(w.status === 0 || w.status === 1, `${what}: watchdog exit ${w.status} ${w.stderr}`);
  const ls = lines(w.stdout);
  const exit = ls.find((l) => l.event === 'exit');
  const wdCrit = ls
    .filter((l) => l.event === 'alert' && l.severity === 'critical')
    .map((l) => l.id)
    .sort();
  // the cockpit and report read the run as the watchdog left it, side by side (neither writes to it)
  const [cockpit, r] = await Promise.all([cockpitLook(dir), nsaTopAsync(['report', dir, '--json'])]);
  assert.ok([0, 1, 2].includes(r.status ?? -1), `${what}: report exit ${r.status} ${r.stderr}`);
  assert.equal(exit.state, snap.state.runState, `${what}: watchdog state`);
  assert.deepEqual(wdCrit, statusCrit, `${what}: watchdog critical ids`);
  assert.equal(w.status, s.status, `${what}: exit code`);
  assert.equal(cockpit.runState, snap.state.runState, `${what}: cockpit state`);
  assert.deepEqual(activeCritical(cockpit), statusCrit, `${what}: cockpit critical ids`);
  if (r.stdout.trim().startsWith('{')) {
    const rep = JSON.parse(r.stdout);
    assert.equal(rep.run.state, snap.state.runState, `${what}: report state`);
    assert.deepEqual(rep.critical.map((a: { id: string }) => a.id).sort(), statusCrit, `${what}: report critical ids`);
  } else assert.equal(r.status, 2, `${what}: report printed no JSON: ${r.stderr}`);
  return { snap, cockpit, statusExit: s.status, reported: r.stdout.trim().startsWith('{') };
}

/** path → sha256 (and mode/size of every entry) of the tree, .nsa-top/ left out */
function hashTree(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const rel = relative(dir, p);
      if (rel === '.nsa-top') continue;
      const st = lstatSync(p);
      if (st.isDirectory()) {
        out.set(rel + '/', `dir ${st.mode}`);
        walk(p);
      } else
        out.set(
          rel,
          `${st.mode} ${st.size} ${st.mtimeMs} ${createHash('sha256').update(readFileSync(p)).digest('hex')}`,
        );
    }
  };
  walk(dir);
  return out;
}

const T0 = 1_790_000_000; // 2026-09-21, long before the test runs: nothing is live
const hb = (o: Record<string, unknown>) => JSON.stringify({ iso: 'x', rank: 0, pid: 4242, ...o }) + '\n';
function progress(
  step: number,
  ts: number,
  loss: number | string = 5 - step / 1000,
  extra: Record<string, unknown> = {},
): string {
  const l = typeof loss === 'string' ? loss : loss.toFixed(4);
  return (
    `{"ts": ${ts}, "iso": "x", "pid": 4242, "rank": 0, "step": ${step}, "msg": "progress", "loss": ${l}, "toks_per_s": 9000.0${Object.entries(
      extra,
    )
      .map(([k, v]) => `, "${k}": ${JSON.stringify(v)}`)
      .join('')}}\n` + hb({ ts: ts + 0.01, step, msg: 'step_end' })
  );
}

/** generated runs, each a dir of the real trainer's files */
function generate(): string[] {
  const runs: string[] = [];
  const mk = (name: string, files: Record<string, string>) => {
    const d = join(tmp, 'gen', name);
    mkdirSync(d, { recursive: true });
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(dirname(join(d, f)), { recursive: true });
      writeFileSync(join(d, f), text);
    }
    runs.push(d);
    return d;
  };
  const env = JSON.stringify({
    torch: '2.4',
    env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml', WORLD_SIZE: '1' },
  });
  let text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 30; s++) text += progress(s, T0 + s, s === 30 ? 'NaN' : undefined);
  mk('nan-died', { 'env.json': env, 'heartbeat_rank0.jsonl': text });

  text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 50; s++)
    text += progress(s, T0 + s, undefined, {
      gate_entropy_mean: 0.01,
      gate_entropy_min: 0.0,
      gate_max_gate: 0.99,
      gate_collapse_frac: 0.9,
      gate_branch_shares: [0.98, 0.01, 0.01],
    });
  mk('gate-collapse-died', { 'env.json': env, 'heartbeat_rank0.jsonl': text });

  text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 20; s++) text += progress(s, T0 + s);
  mk('halt-requested', { 'env.json': env, 'heartbeat_rank0.jsonl': text, '.HALT': 'halt: manual_stop\n' });

  // a crash and a resume (step count back to 1), then it ended without metrics.json
  text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 40; s++) text += progress(s, T0 + s);
  text += hb({ ts: T0 + 100, step: 0, msg: 'boot', pid: 5151 });
  for (let s = 1; s <= 10; s++) text += progress(s, T0 + 100 + s).replaceAll('"pid": 4242', '"pid": 5151');
  mk('crash-resume-died', { 'env.json': env, 'heartbeat_rank0.jsonl': text });

  // finished: metrics.json after the last heartbeat
  text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 20; s++) text += progress(s, T0 + s);
  mk('finished', {
    'env.json': env,
    'heartbeat_rank0.jsonl': text,
    'metrics.json': JSON.stringify({
      device: 'cuda',
      dtype: 'torch.bfloat16',
      steps: 20,
      loss_first: 5,
      loss_last: 4.98,
    }),
  });

  // a supervised launcher dir: run.info names the out dir
  const out = mk('launcher-out', {
    'env.json': env,
    'heartbeat_rank0.jsonl': hb({ ts: T0, step: 0, msg: 'boot' }) + progress(1, T0 + 1),
  });
  mk('launcher', {
    'run.info': `run_dir: ${join(tmp, 'gen', 'launcher')}\nconfig: configs/m7c_125m_2xa100_production.yaml\nout_dir: ${out}\n`,
    'train.log': '[boot] loading config configs/m7c_125m_2xa100_production.yaml\n',
  });
  return runs;
}

function fixtureRuns(): string[] {
  const dst = join(tmp, 'fx');
  cpSync(FIXTURES, dst, { recursive: true });
  return [
    join(dst, 'single'),
    join(dst, 'ddp2-dumps-halt'),
    join(dst, 'ddp2-crash-resume', 'artifacts', 'ddp2-crash-resume'),
  ];
}

const lines = (s: string) =>
  s
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

test('the cockpit, status, watchdog --once and report agree on every fixture and generated run', async () => {
  const runs = [...fixtureRuns(), ...generate()];
  let reported = 0;
  for (const dir of runs) if ((await fourAgree(dir)).reported) reported++;
  assert.ok(reported >= runs.length - 2, `report graded only ${reported} of ${runs.length} runs`);
});

test('a live supervised run, then its supervisor SIGKILLed with a halt request pending: the four surfaces agree at each step, with the supervisor and the request present', async () => {
  const host = new LocalHost();
  const cwd = tempDir('agree-live');
  const pf = join(cwd, 'profiles.yaml');
  writeFileSync(
    pf,
    `profiles:
  live:
    trainer: reference
    procs: 1
    steps: 100000
    save_every: 100000
    log_every: 1
    args: [--seq-len, "32", --batch-size, "2", --inject, "slow-data@ms=50"]
    restart: { max_restarts: 2, backoff_s: 0.2, backoff_factor: 1 }
    stop: { halt_grace_s: 20, sigint_grace_s: 5 }
`,
  );
  const { runDir, supervisorPid } = await launchRun(host, { profile: 'live', profilesFile: pf, cwd });
  const st0 = await until('the trainer', async () => {
    const x = await readSupervisorState(host, runDir);
    return x?.child?.startTime ? x : null;
  });
  const outDir = st0.outDir ?? runDir;
  try {
    await until('steps', () => {
      try {
        return readFileSync(join(outDir, 'heartbeat_rank0.jsonl'), 'utf8').split('\n').length > 8;
      } catch {
        return false;
      }
    });
    const live = await fourAgree(runDir, 'live supervised');
    assert.equal(live.snap.state.runState, 'RUNNING');
    assert.equal(live.snap.supervisor.alive, true);
    assert.equal(live.cockpit.supervisor?.state, 'running');
    // a halt after the next checkpoint (none will come: save_every is past the end), carried by the supervisor
    const sub = await submitHaltAfterCheckpoint(host, runDir, await currentActor(host));
    assert.equal(sub.request?.owner?.kind, 'supervisor', sub.record.detail);
    const pending = await fourAgree(runDir, 'request pending');
    assert.equal(pending.snap.requests[0].carrier.alive, true);
    assert.equal(pending.cockpit.requests?.[0]?.id, sub.request!.id);
    process.kill(supervisorPid, 'SIGKILL');
    await until('the supervisor to die', async () => !(await verifyProcess(host, st0.supervisor!)));
    const dead = await fourAgree(runDir, 'supervisor SIGKILLed');
    const crit = dead.snap.alerts
      .filter((a: { level: string }) => a.level === 'critical')
      .map((a: { id: string }) => a.id);
    assert.ok(crit.includes('supervisor:dead'), crit.join(','));
    assert.ok(crit.includes(`request-orphan:${sub.request!.id}`), crit.join(','));
    assert.equal(dead.statusExit, 1);
    assert.equal(dead.snap.supervisor.alive, false);
    assert.equal(dead.cockpit.supervisor?.supervisorGone, true);
  } finally {
    for (const p of [st0.supervisor!, st0.child!])
      if (await verifyProcess(host, p).catch(() => false)) process.kill(p.pid, 'SIGKILL');
    // the trainer's own rank (a child of the launcher): found by the run's heartbeat, ours to end
    try {
      const pid = JSON.parse(
        readFileSync(join(outDir, 'heartbeat_rank0.jsonl'), 'utf8').trim().split('\n').at(-1)!,
      ).pid;
      if (typeof pid === 'number' && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('train'))
        process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    rmSync(cwd, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
});

test('status --json and watchdog --once agree on every run; --once (even with --halt) changes nothing outside .nsa-top/', () => {
  const runs = [...fixtureRuns(), ...generate()];
  const states = new Set<string>();
  let criticals = 0;
  for (const dir of runs) {
    const before = hashTree(dir);
    const s = cli(['status', dir, '--json']);
    assert.ok(s.status === 0 || s.status === 1, `${dir}: status exit ${s.status} ${s.stderr}`);
    const snap = JSON.parse(s.stdout);
    const w = cli(['watchdog', dir, '--once', '--no-gpu', '--halt', '--dump-on-stall']);
    assert.ok(w.status === 0 || w.status === 1, `${dir}: watchdog exit ${w.status} ${w.stderr}`);
    const ls = lines(w.stdout);
    const exit = ls.find((l) => l.event === 'exit');
    const crit = ls
      .filter((l) => l.event === 'alert' && l.severity === 'critical')
      .map((l) => l.id)
      .sort();
    assert.equal(exit.state, snap.state.runState, `${dir}: state`);
    assert.equal(exit.why, snap.state.why, `${dir}: why`);
    assert.deepEqual(
      crit,
      snap.alerts
        .filter((a: { level: string }) => a.level === 'critical')
        .map((a: { id: string }) => a.id)
        .sort(),
      `${dir}: critical alert ids`,
    );
    assert.equal(w.status, s.status, `${dir}: exit code`);
    assert.equal(ls.find((l) => l.event === 'start').observeOnly, true, '--once never acts');
    assert.ok(!ls.some((l) => l.event === 'halt' || l.event === 'dump'), `${dir}: --once acted`);
    assert.deepEqual(hashTree(dir), before, `${dir}: watchdog --once changed the run outside .nsa-top/`);
    for (const a of snap.alerts) {
      assert.ok(['info', 'warning', 'critical'].includes(a.level));
      assert.equal(typeof a.title, 'string');
      assert.equal(typeof a.since, 'number');
    }
    states.add(snap.state.runState);
    criticals += crit.length;
  }
  // not vacuous: the runs cover ended, dead and anomalous states
  assert.ok(states.has('FINISHED') && states.has('HALTED') && states.has('EXITED'), [...states].join(','));
  assert.ok(criticals >= 2, 'some runs raise critical alerts');
});

test('without --halt the watchdog only observes: a NaN is reported, .anomaly_type is written only with --halt', () => {
  const dir = join(tmp, 'observe');
  mkdirSync(dir, { recursive: true });
  let text = hb({ ts: T0, step: 0, msg: 'boot' });
  for (let s = 1; s <= 30; s++) text += progress(s, T0 + s, s === 30 ? 'NaN' : undefined);
  writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), text);
  writeFileSync(join(dir, 'env.json'), JSON.stringify({ env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml' } }));
  const before = hashTree(dir);
  const w = cli(['watchdog', dir, '--no-gpu', '--interval', '0.1']);
  assert.equal(w.status, 1, w.stderr);
  const an = lines(w.stdout).find((l) => l.event === 'anomaly');
  assert.equal(an?.type, 'nan_loss');
  assert.equal(an?.wrote, null);
  assert.match(an?.why, /observe-only/);
  assert.deepEqual(hashTree(dir), before, 'observe-only: nothing written into the run outside .nsa-top/');
  const acted = cli(['watchdog', dir, '--no-gpu', '--interval', '0.1', '--halt']);
  assert.equal(acted.status, 1);
  assert.equal(readFileSync(join(dir, '.anomaly_type'), 'utf8'), 'nan_loss\n');
  assert.ok(existsSync(join(dir, '.HALT')));
  const help = cli(['watchdog', '--help']);
  assert.match(
    help.stdout,
    /OBSERVE-ONLY BY DEFAULT: without --halt it writes nothing into the run dir outside \.nsa-top\//,
  );
});

test('an empty or missing dir is bad input for status and watchdog --once: one line, exit 2', async () => {
  const empty = join(tmp, 'empty');
  mkdirSync(empty, { recursive: true });
  const calls = [
    ['status', empty],
    ['status', empty, '--json'],
    ['watchdog', empty, '--once', '--no-gpu'],
    ['status', join(tmp, 'nope')],
    ['watchdog', join(tmp, 'nope'), '--once'],
  ];
  // side by side: none of them may write anything
  const results = await Promise.all(calls.map((args) => nsaTopAsync(args)));
  for (const [i, r] of results.entries()) {
    assert.equal(r.status, 2, `${calls[i]!.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
  assert.match(results[0]!.stderr, /holds no run artifacts/);
  assert.ok(!existsSync(join(empty, '.nsa-top')), 'nothing written into an empty dir');
});

test(
  'a run dir that lists but cannot be read (mode 444, as an unprivileged user) is exit 2, never "running"',
  { skip: withoutDacSkip },
  () => {
    const base = mkdtempSync(join(tmpdir(), 'nsa-judge-perm-'));
    try {
      const dir = join(base, 'run');
      cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
      chmodSync(base, 0o755);
      chmodSync(dir, 0o444);
      for (const args of [
        ['status', dir, '--json'],
        ['watchdog', dir, '--once', '--no-gpu'],
        ['report', dir],
      ]) {
        const r = spawnWithoutDac([process.execPath, BIN, ...args], { encoding: 'utf8', timeout: 60_000, cwd: '/' });
        assert.equal(r.status, 2, `${args[0]}: ${r.stdout}${r.stderr}`);
        assert.equal(r.stdout, '');
        // one line that says why (whichever layer finds it first: the dir's listing or its entries)
        assert.match(r.stderr, /^nsa-top: (report: )?cannot read run dir [^\n]*EACCES[^\n]*\n$/);
      }
    } finally {
      chmodSync(join(base, 'run'), 0o755);
      rmSync(base, { recursive: true, force: true });
    }
  },
);
