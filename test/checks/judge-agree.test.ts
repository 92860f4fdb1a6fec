// One judge: for every fixture run and every generated run, `status --json` and `watchdog --once`
// give the same state, the same critical alert ids and the same exit code, and `watchdog --once`
// (even asked to --halt) changes no file of the run outside .nsa-top/. Without --halt the watchdog
// only observes: an anomaly is reported, never written into the run.
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
import { spawnWithoutDac, withoutDacSkip } from '../helpers/unprivileged.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-judge-agree-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function cli(args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
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

test('an empty or missing dir is bad input for status and watchdog --once: one line, exit 2', () => {
  const empty = join(tmp, 'empty');
  mkdirSync(empty, { recursive: true });
  for (const args of [
    ['status', empty],
    ['status', empty, '--json'],
    ['watchdog', empty, '--once', '--no-gpu'],
    ['status', join(tmp, 'nope')],
    ['watchdog', join(tmp, 'nope'), '--once'],
  ]) {
    const r = cli(args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
  assert.match(cli(['status', empty]).stderr, /holds no run artifacts/);
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
