// The watchdog's CPU at 1 Hz with its Prometheus surface on, on a live 2-rank reference run. Two
// watchdogs watch the same run side by side, so they share its load: one plain, one with
// --metrics-listen (scraped once a second, as a Prometheus with scrape_interval 1s would) and
// --metrics-file (the textfile replaced every round). Target: < 0.5 % of a core with metrics on.
// Each is started as a user starts it (bin/nsa-top.js and its V8 flags), with --no-gpu (no GPU here;
// on a GPU box nvidia-smi's own cost comes on top, the same with metrics on or off).
// TODO(issue 21, alert delivery): once `watchdog --notify URL` exists, give the metrics watchdog a
// --notify to a loopback receiver too, and say so in the row's name.
// NSA_BENCH_SECONDS (60): the measured window, after NSA_BENCH_WARMUP (20) seconds. The run logs every
// 5 steps, as the cockpit's bench; NSA_BENCH_BEATS=1 adds per-step beats (--heartbeat-every: ~16
// heartbeat records a second to read and judge).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);
const WARMUP = Number(process.env.NSA_BENCH_WARMUP ?? 20);
const BEATS = process.env.NSA_BENCH_BEATS === '1';
const TICK = 100; // clock ticks per second (Linux USER_HZ)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds of a process and of its waited-for children */
function cpu(pid: number): { self: number; all: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const self = (Number(f[11]) + Number(f[12])) / TICK;
    return { self, all: self + (Number(f[13]) + Number(f[14])) / TICK };
  } catch {
    return null;
  }
}

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
      '5',
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
  const plain = watchdog([]);
  const metrics = watchdog(['--metrics-listen', '127.0.0.1:0', '--metrics-file', join(textDir, 'nsatop.prom')]);
  let listen: string | null = null;
  for (let i = 0; i < 200 && !listen; i++) {
    listen = /"listen":"([^"]+)"/.exec(metrics.out())?.[1] ?? null;
    if (!listen) await sleep(100);
  }
  if (!listen) throw new Error('bench: the metrics watchdog never said where it listens');
  // a scraper at 1 Hz, as Prometheus with scrape_interval 1s
  let scrapes = 0;
  let bytes = 0;
  let scraping = true;
  const scraper = (async () => {
    while (scraping) {
      const t = Date.now();
      const body = await fetch(`http://${listen}/metrics`).then((r) => r.text());
      scrapes++;
      bytes = body.length;
      await sleep(Math.max(0, 1000 - (Date.now() - t)));
    }
  })();
  await sleep(WARMUP * 1000);
  const a0 = cpu(plain.c.pid!)!;
  const b0 = cpu(metrics.c.pid!)!;
  const s0 = scrapes;
  const t0 = Date.now();
  await sleep(SECONDS * 1000);
  const a1 = cpu(plain.c.pid!);
  const b1 = cpu(metrics.c.pid!);
  const wall = (Date.now() - t0) / 1000;
  scraping = false;
  await scraper;
  if (!a1 || !b1) throw new Error('bench: a watchdog ended during the window');
  const pct = (x: number, y: number) => (100 * (y - x)) / wall;
  const loadavg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const on = pct(b0.all, b1.all);
  console.log(
    `watchdog at --interval 1 on a live 2-rank reference run (${BEATS ? 'per-step beats' : 'log every 5 steps'}), ${wall.toFixed(0)} s after ${WARMUP} s (load average ${loadavg})`,
  );
  console.log(`  ${'watchdog'.padEnd(58)} ${'CPU, % of 1 core'.padStart(16)}   target`);
  console.log(`  ${'plain'.padEnd(58)} ${`${pct(a0.all, a1.all).toFixed(2)} %`.padStart(16)}`);
  console.log(
    `  ${`metrics on: /metrics scraped at 1 Hz (${scrapes - s0} scrapes, ${(bytes / 1024).toFixed(1)} KiB) + textfile`.padEnd(58)} ${`${on.toFixed(2)} %`.padStart(16)}   < 0.5 %   ${on < 0.5 ? 'yes' : 'NO'}`,
  );
  console.log(
    `  ${'difference (the metrics surface)'.padEnd(58)} ${`${(on - pct(a0.all, a1.all)).toFixed(2)} %`.padStart(16)}`,
  );
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
