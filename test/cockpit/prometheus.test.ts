// The watchdog's metrics against the real Prometheus (Debian's `prometheus` package: prometheus and
// promtool; .ci/run installs it). One live 2-rank reference run, the built `nsa-top watchdog` with
// --metrics-listen on a loopback port it picks and --metrics-file, and a real prometheus (its own
// config and data dir, scrape_interval 1s, the shipped rules loaded) whose HTTP API must answer
// nsatop_train_step > 0 and a series with rank="1". `promtool check metrics` reports nothing on the
// exposition; the rules pass `promtool check rules` and their unit test. A port in use, a bad
// HOST:PORT and a textfile nsa-top did not write are one line and exit 2.
// Needs `npm run build` first (the binary is what runs).
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Checker, DEFAULT_THRESHOLDS } from '../../src/checks/index.js';
import { renderMetrics } from '../../src/cockpit/metrics.js';
import { TEXTFILE_MARK } from '../../src/trainer/control/ownfiles.js';
import { emptySnapshot } from '../../src/trainer/run/snapshot.js';
import { metricsListen, start, tmp, waitFor } from '../checks/live-helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const RULES = join(ROOT, 'docs', 'prometheus', 'nsa-top.rules.yml');
const RULES_TEST = join(ROOT, 'docs', 'prometheus', 'nsa-top.rules.test.yml');
const which = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim();
const PROMETHEUS = which('prometheus');
const PROMTOOL = which('promtool');
const noPromtool = PROMTOOL ? false : 'promtool is not installed (apt-get install prometheus; .ci/run installs it)';
const noPrometheus =
  PROMETHEUS && PROMTOOL ? false : 'prometheus is not installed (apt-get install prometheus; .ci/run installs it)';

const mine: ChildProcess[] = [];
after(async () => {
  for (const c of mine)
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      await Promise.race([new Promise((r) => c.once('exit', r)), new Promise((r) => setTimeout(r, 5000).unref())]);
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** promtool check metrics on a text: its exit status and everything it said */
function checkMetrics(text: string) {
  const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, said: (r.stdout + r.stderr).trim() };
}

/** `nsa-top watchdog ARGS` to its end: exit status and stderr (several run at once) */
function watchdogRun(args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'watchdog', ...args], { encoding: 'utf8', timeout: 30_000 }, (e, _out, err) =>
      resolve({ status: e ? ((e as { code?: number }).code ?? null) : 0, stderr: err }),
    );
  });
}

test(
  'the shipped rules: promtool check rules passes, and their unit test fires each alert',
  { skip: noPromtool },
  () => {
    const c = spawnSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' });
    assert.equal(c.status, 0, c.stdout + c.stderr);
    assert.match(c.stdout, /SUCCESS: 10 rules found/);
    const t = spawnSync(PROMTOOL, ['test', 'rules', RULES_TEST], { encoding: 'utf8', cwd: dirname(RULES_TEST) });
    assert.equal(t.status, 0, t.stdout + t.stderr);
  },
);

test(
  'a live 2-rank run: prometheus scrapes --metrics-listen and sees nsatop_train_step > 0 and rank="1"; promtool finds nothing; bad flags exit 2',
  { skip: noPrometheus, timeout: 90_000 },
  async () => {
    const dir = tmp();
    const run = join(dir, 'run');
    const textDir = join(dir, 'textfile');
    mkdirSync(textDir);
    const prom = join(textDir, 'nsatop.prom');
    const trainer = start([
      'train',
      '--out',
      run,
      '--steps',
      '3000',
      '--ranks',
      '2',
      '--log-every',
      '5',
      '--heartbeat-every',
    ]);
    await waitFor('the run dir', () => existsSync(join(run, 'heartbeat_rank1.jsonl')), 30_000);
    const wd = start([
      'watchdog',
      run,
      '--interval',
      '0.5',
      '--no-gpu',
      '--metrics-listen',
      '127.0.0.1:0',
      '--metrics-file',
      prom,
    ]);
    const listen = await metricsListen(wd);
    assert.match(listen, /^127\.0\.0\.1:\d+$/, 'bound where it was told, on the port it picked');

    const port = await freePort();
    const cfg = join(dir, 'prometheus.yml');
    writeFileSync(
      cfg,
      [
        'global: {scrape_interval: 1s, evaluation_interval: 1s}',
        `rule_files: [${JSON.stringify(RULES)}]`,
        'scrape_configs:',
        '  - job_name: nsa-top',
        `    static_configs: [{targets: [${JSON.stringify(listen)}]}]`,
        '',
      ].join('\n'),
    );
    const p = spawn(
      PROMETHEUS,
      [
        `--config.file=${cfg}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    mine.push(p);
    let plog = '';
    p.stderr!.on('data', (b) => (plog += b));
    const query = async (q: string) => {
      try {
        const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
        const j = (await r.json()) as {
          data?: { result?: { metric: Record<string, string>; value: [number, string] }[] };
        };
        return j.data?.result ?? [];
      } catch {
        return []; // not up yet
      }
    };
    const deadline = Date.now() + 45_000;
    let step: { metric: Record<string, string>; value: [number, string] }[] = [];
    let rank1: typeof step = [];
    while (Date.now() < deadline && (step.length === 0 || rank1.length === 0)) {
      assert.equal(p.exitCode, null, `prometheus exited: ${plog}`);
      step = await query('nsatop_train_step > 0');
      rank1 = await query('nsatop_rank_up{rank="1"} == 1');
      if (step.length === 0 || rank1.length === 0) await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(step.length, 1, `prometheus sees nsatop_train_step > 0 (log: ${plog})`);
    assert.equal(step[0]!.metric['job'], 'nsa-top');
    assert.equal(step[0]!.metric['run'], 'run');
    assert.ok(Number(step[0]!.value[1]) > 0);
    assert.equal(rank1.length, 1, 'a series with rank="1"');
    const rules = await fetch(`http://127.0.0.1:${port}/api/v1/rules`).then(
      (r) => r.json() as Promise<{ data: { groups: { rules: unknown[] }[] } }>,
    );
    assert.equal(rules.data.groups[0]!.rules.length, 10, 'the shipped rules loaded');
    assert.deepEqual(await query('ALERTS{alertstate="firing"}'), [], 'a healthy run fires nothing');

    // the exposition, as served and as written for node_exporter: promtool says nothing
    const res = await fetch(`http://${listen}/metrics`);
    assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
    const served = await res.text();
    assert.deepEqual(checkMetrics(served), { status: 0, said: '' });
    assert.match(served, /^nsatop_rank_up\{run="run",hostname="[^"]+",rank="1"\} 1$/m);
    const file = readFileSync(prom, 'utf8');
    assert.ok(file.startsWith(TEXTFILE_MARK + '\n'), 'the textfile carries its mark');
    assert.deepEqual(checkMetrics(file), { status: 0, said: '' });
    assert.equal((await fetch(`http://${listen}/nope`)).status, 404);

    // bad input is one line and exit 2: the port in use (the watchdog holds it), no HOST:PORT, a
    // textfile nsa-top did not write, a textfile path inside the run, a textfile in read-only mode
    writeFileSync(join(textDir, 'other.prom'), 'node_other_metric 1\n');
    const bad = [
      [['--metrics-listen', listen], /cannot listen: the port is in use/],
      [['--metrics-listen', '9464'], /--metrics-listen needs HOST:PORT/],
      [['--metrics-file', join(textDir, 'other.prom')], /nsa-top did not write it: refused/],
      [['--metrics-file', join(run, 'nsatop.prom')], /holds a run/],
      [['--metrics-file', join(textDir, 'ro.prom'), '--read-only'], /read-only mode: nothing written/],
    ] as [string[], RegExp][];
    const once = watchdogRun([run, '--no-gpu', '--once', '--metrics-file', join(textDir, 'once.prom')]);
    const results = await Promise.all(bad.map(([args]) => watchdogRun([run, '--no-gpu', ...args])));
    for (const [i, [args, re]] of bad.entries()) {
      const r = results[i]!;
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, re);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
    assert.equal(readFileSync(join(textDir, 'other.prom'), 'utf8'), 'node_other_metric 1\n', 'left as it was');
    assert.ok(!existsSync(join(textDir, 'ro.prom')));
    // --once --metrics-file: one round written (a cron job's textfile), the exit code still the health
    const o = await once;
    assert.equal(o.status, 0, o.stderr);
    const onceText = readFileSync(join(textDir, 'once.prom'), 'utf8');
    assert.match(onceText, /^nsatop_train_step\{run="run",hostname="[^"]+"\} [1-9]\d*$/m);
    assert.match(onceText, /^nsatop_run_state_info\{run="run",hostname="[^"]+",state="RUNNING"\} 1$/m);

    wd.child.kill('SIGINT');
    assert.equal(await wd.done, 0);
    // the launcher checkpoints and stops its ranks: waited for, so nothing writes while the dir goes
    trainer.child.kill('SIGINT');
    p.kill('SIGTERM');
    await waitFor(
      'the trainer to stop',
      () => trainer.child.exitCode !== null || trainer.child.signalCode !== null,
      30_000,
    );
  },
);

test(
  "GPU series: promtool objects only to dcgm-exporter's camelCase modelName, kept on purpose so the series join",
  { skip: noPromtool },
  () => {
    const run = emptySnapshot('/tmp/r');
    run.exists = true;
    const gpu = {
      status: 'ok' as const,
      at: 0,
      latencyMs: 1,
      apps: [],
      devices: [
        {
          index: 0,
          name: 'NVIDIA H200',
          uuid: 'GPU-1',
          mig: null,
          memUsedMiB: 1,
          memTotalMiB: 2,
          utilPct: 50,
          powerW: 100,
          powerLimitW: 700,
          tempC: 40,
          smClockMHz: 1980,
          memClockMHz: 3201,
        },
      ],
    };
    const ev = new Checker().evaluate({ now: 0, run, procs: null, gpu });
    const text = renderMetrics(
      { run, procs: null, gpu, supervisor: null, haltGraceS: 300, fresh: true, errors: [] },
      ev,
      DEFAULT_THRESHOLDS,
      { version: '0', hostname: 'h', observations: 1, observationErrors: 0, lastGoodMs: 0, roundMs: 1 },
    );
    const r = checkMetrics(text);
    const said = r.said.split('\n').filter(Boolean);
    assert.ok(said.length > 0, 'promtool lints label names');
    for (const l of said)
      assert.match(l, /^nsatop_gpu_\w+ label names should be written in 'snake_case' not 'camelCase'$/);
    const without = checkMetrics(text.replace(/modelName=/g, 'model_name='));
    assert.deepEqual(without, { status: 0, said: '' }, 'nothing else');
  },
);
