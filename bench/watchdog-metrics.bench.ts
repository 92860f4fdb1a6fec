// The watchdog's CPU at 1 Hz with its Prometheus surface on, on a live 2-rank reference run. Two
// watchdogs watch the same run side by side, so they share its load: one plain, one with
// --metrics-listen (scraped once a second, as a Prometheus with scrape_interval 1s would) and
// --metrics-file (the textfile replaced every round), and one with --metrics-listen scraped every
// 15 s (Prometheus's usual interval; it renders on the scrape). Target: < 0.5 % of a core with metrics on.
// None of the three records the run's journal (--no-record; only one watchdog of a run does, the
// first to take its lock): a fourth, plain one records it, and its row says what recording adds.
// Each is started as a user starts it (bin/nsa-top.js and its V8 flags), with --no-gpu (no GPU here;
// on a GPU box nvidia-smi's own cost comes on top, the same with metrics on or off).
// The 1 Hz metrics watchdog also delivers alerts (--notify and --deadman to a loopback receiver in
// this process), so its row is "metrics and notify on", as the issue's target reads.
// NSA_BENCH_SECONDS (60): the measured window, after NSA_BENCH_WARMUP (20) seconds. The run logs every
// 5 steps, as the cockpit's bench (several records a second: the step moves every round);
// NSA_BENCH_LOG_EVERY=50 logs every ~3 s, as real runs log less often than the watchdog looks (the
// rounds in between see no new record); NSA_BENCH_BEATS=1 adds per-step beats (--heartbeat-every:
// ~16 heartbeat records a second to read and judge).
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { procSample, loadAverage } from './proc.js';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);
const WARMUP = Number(process.env.NSA_BENCH_WARMUP ?? 20);
const BEATS = process.env.NSA_BENCH_BEATS === '1';
const LOG_EVERY = process.env.NSA_BENCH_LOG_EVERY ?? '5';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const kids: ChildProcess[] = [];
const dir = mkdtempSync(join(tmpdir(), 'nsa-top-bench-wdmetrics-'));
function cleanup(): void {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGINT');
}
process.on('exit', () => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function main(): Promise<void> {
  const run = join(dir, 'run');
  const textDir = join(dir, 'textfile');
  mkdirSync(textDir);
  const trainer = spawn(
    process.execPath,
    [
      BIN,
      'train',
      '--out',
      run,
      '--ranks',
      '2',
      '--steps',
      '100000',
      '--log-every',
      LOG_EVERY,
      ...(BEATS ? ['--heartbeat-every'] : []),
    ],
    { stdio: 'ignore' },
  );
  kids.push(trainer);
  for (let i = 0; i < 300; i++) {
    try {
      if (readFileSync(join(run, 'training.csv'), 'utf8').length > 0) break;
    } catch {
      /* not yet */
    }
    await sleep(200);
  }
  const watchdog = (extra: string[]) => {
    const c = spawn(BIN, ['watchdog', run, '--interval', '1', '--no-gpu', ...extra], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    kids.push(c);
    let out = '';
    c.stdout!.on('data', (b) => (out += b));
    return { c, out: () => out };
  };
  const received = { posts: 0, pings: 0 };
  const receiver = createServer((req, res) => {
    if (req.method === 'POST') received.posts++;
    else received.pings++;
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiver.unref();
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  // one watchdog records the run's journal (the first to take its lock: only one does); the rows
  // compare the others, which do not (--no-record), and its own row says what recording adds
  const recorder = watchdog([]);
  await sleep(1000);
  const plain = watchdog(['--no-record']);
  const metrics = watchdog([
    '--no-record',
    '--metrics-listen',
    '127.0.0.1:0',
    '--metrics-file',
    join(textDir, 'nsatop.prom'),
    '--notify',
    `${hook}/hook`,
    '--deadman',
    `${hook}/ping`,
  ]);
  // a common Prometheus setup: no textfile, a scrape every 15 s (the exporter renders on the scrape)
  const served = watchdog(['--no-record', '--metrics-listen', '127.0.0.1:0']);
  const listenOf = async (w: { out: () => string }) => {
    for (let i = 0; i < 200; i++) {
      const l = /"listen":"([^"]+)"/.exec(w.out())?.[1];
      if (l) return l;
      await sleep(100);
    }
    throw new Error('bench: a metrics watchdog never said where it listens');
  };
  let scraping = true;
  const scraper = (listen: string, everyMs: number) => {
    const s = { scrapes: 0, bytes: 0, done: Promise.resolve() };
    s.done = (async () => {
      while (scraping) {
        const t = Date.now();
        const body = await fetch(`http://${listen}/metrics`).then((r) => r.text());
        s.scrapes++;
        s.bytes = body.length;
        while (scraping && Date.now() - t < everyMs) await sleep(Math.min(200, everyMs - (Date.now() - t)));
      }
    })();
    return s;
  };
  const fast = scraper(await listenOf(metrics), 1000);
  const slow = scraper(await listenOf(served), 15_000);
  await sleep(WARMUP * 1000);
  const ws = [plain, metrics, served, recorder];
  const c0 = ws.map((w) => procSample(w.c.pid!)!);
  const s0 = [fast.scrapes, slow.scrapes];
  const t0 = Date.now();
  await sleep(SECONDS * 1000);
  const c1 = ws.map((w) => procSample(w.c.pid!));
  const wall = (Date.now() - t0) / 1000;
  scraping = false;
  await Promise.all([fast.done, slow.done]);
  if (c1.some((c) => !c)) throw new Error('bench: a watchdog ended during the window');
  const pct = (x: number, y: number) => (100 * (y - x)) / wall;
  const loadavg = loadAverage();
  const pcts = ws.map((_, i) => pct(c0[i]!.all, c1[i]!.all));
  const row = (name: string, v: number, target = '') =>
    console.log(`  ${name.padEnd(64)} ${`${v.toFixed(2)} %`.padStart(16)}   ${target}`);
  console.log(
    `watchdog at --interval 1 on a live 2-rank reference run (${BEATS ? 'per-step beats' : `log every ${LOG_EVERY} steps`}), ${wall.toFixed(0)} s after ${WARMUP} s (load average ${loadavg})`,
  );
  console.log(`  ${'watchdog'.padEnd(64)} ${'CPU, % of 1 core'.padStart(16)}   target`);
  row('plain', pcts[0]!);
  row(
    `metrics at 1 Hz (${fast.scrapes - s0[0]!} scrapes of ${(fast.bytes / 1024).toFixed(1)} KiB) + textfile + notify/deadman (${received.pings} pings)`,
    pcts[1]!,
    `< 0.5 %   ${pcts[1]! < 0.5 ? 'yes' : 'NO'}`,
  );
  row(
    `metrics: /metrics every 15 s (${slow.scrapes - s0[1]!} scrapes), no textfile`,
    pcts[2]!,
    `< 0.5 %   ${pcts[2]! < 0.5 ? 'yes' : 'NO'}`,
  );
  row('metrics at 1 Hz and notify (difference from plain)', pcts[1]! - pcts[0]!);
  row('the metrics surface at 15 s (difference from plain)', pcts[2]! - pcts[0]!);
  row('recording the journal (a plain watchdog that records; difference from plain)', pcts[3]! - pcts[0]!);
  cleanup();
  await Promise.race([new Promise((r) => trainer.once('exit', r)), sleep(15_000)]);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    cleanup();
    process.exit(1);
  },
);
