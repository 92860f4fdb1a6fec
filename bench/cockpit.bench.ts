// nsa-top's own cost while it watches a live 2-rank reference run: CPU (% of one core, its own and
// including any commands it runs) and RSS over 60 s at the default 1 Hz refresh, plus the bytes it
// writes to the terminal. Targets: <= 0.5 % of one core, RSS <= 100 MB.
// Two windows: the first minute (from 5 s after start: V8 is still compiling the code that runs
// once a second, on its own threads) and a steady-state minute from NSA_BENCH_STEADY s (default 120)
// on, which is what a cockpit left open next to a 40-hour run costs. NSA_BENCH_SECONDS sets the
// window length; NSA_BENCH_STEADY=0 skips the second window.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);
const STEADY = Number(process.env.NSA_BENCH_STEADY ?? 120);
const TICK = 100; // clock ticks per second (Linux USER_HZ)

function stat(pid: number): { self: number; children: number; rssMiB: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
    return {
      self: (Number(f[11]) + Number(f[12])) / TICK,
      children: (Number(f[13]) + Number(f[14])) / TICK,
      rssMiB: rss,
    };
  } catch {
    return null;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), 'nsa-top-bench-cockpit-'));
const out = join(dir, 'run');
const trainer = spawn(
  process.execPath,
  [BIN, 'train', '--out', out, '--ranks', '2', '--steps', '100000', '--log-every', '5', '--save-every', '0'],
  { stdio: 'ignore' },
);
let cockpit: pty.IPty | null = null;
try {
  // wait for the run to be live
  for (let i = 0; i < 300; i++) {
    try {
      if (readFileSync(join(out, 'training.csv'), 'utf8').length > 0) break;
    } catch {
      /* not yet */
    }
    await sleep(200);
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'CI') env[k] = v;
  // started through its shebang, as `npx nsa-top` / a PATH install runs it (node flags included)
  cockpit = pty.spawn(BIN, [out], { cols: 120, rows: 40, cwd: dir, env });
  let bytes = 0;
  cockpit.onData((d) => (bytes += Buffer.byteLength(d)));
  await sleep(5000); // start-up itself is not measured
  const pid = cockpit.pid;
  const t00 = Date.now();
  let maxRss = 0;
  // one window: CPU over it, and the RSS maximum sampled every second
  const window = async (seconds: number) => {
    const a = stat(pid)!;
    const b0 = bytes;
    const t0 = Date.now();
    maxRss = Math.max(maxRss, a.rssMiB);
    for (let s = 0; s < seconds; s++) {
      await sleep(1000);
      const x = stat(pid);
      if (x) maxRss = Math.max(maxRss, x.rssMiB);
    }
    const z = stat(pid)!;
    const wall = (Date.now() - t0) / 1000;
    return {
      selfPct: (100 * (z.self - a.self)) / wall,
      allPct: (100 * (z.self - a.self + z.children - a.children)) / wall,
      kibPerS: (bytes - b0) / wall / 1024,
      from: (t0 - t00) / 1000 + 5,
      wall,
    };
  };
  const first = await window(SECONDS);
  let steady: Awaited<ReturnType<typeof window>> | null = null;
  if (STEADY > 0) {
    const wait = STEADY - (Date.now() - t00) / 1000 - 5;
    if (wait > 0) await sleep(wait * 1000);
    steady = await window(SECONDS);
  }
  const loadavg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const fmt = (w: { from: number; wall: number }) => `${w.from.toFixed(0)}–${(w.from + w.wall).toFixed(0)} s`;
  console.log(`cockpit on a live 2-rank reference run, 120x40, 1 s refresh (load average ${loadavg})`);
  console.log(`  metric                               first minute  steady state   target`);
  console.log(
    `  window after start                   ${fmt(first).padStart(12)}  ${(steady ? fmt(steady) : '–').padStart(12)}`,
  );
  const row = (name: string, f: (w: typeof first) => string, target: string) =>
    console.log(
      `  ${name.padEnd(36)} ${f(first).padStart(12)}  ${(steady ? f(steady) : '–').padStart(12)}   ${target}`,
    );
  row('CPU, nsa-top process (% of 1 core)', (w) => `${w.selfPct.toFixed(2)} %`, '<= 0.5 %');
  row('CPU incl. commands it ran', (w) => `${w.allPct.toFixed(2)} %`, '');
  row('terminal output', (w) => `${w.kibPerS.toFixed(1)} KiB/s`, '');
  console.log(`  RSS, max over both windows          ${maxRss.toFixed(1).padStart(9)} MB${''.padStart(17)}<= 100 MB`);
  cockpit.write('q');
  await sleep(1500);
} finally {
  try {
    if (cockpit) process.kill(cockpit.pid, 'SIGKILL');
  } catch {
    /* exited */
  }
  try {
    writeFileSync(join(out, '.HALT'), 'halt: bench done\n');
  } catch {
    /* no run dir */
  }
  const done = new Promise((r) => trainer.once('exit', r));
  if ((await Promise.race([done, sleep(20_000).then(() => 'late')])) === 'late') trainer.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
