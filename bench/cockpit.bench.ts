// nsa-top's own cost while it watches a live 2-rank reference run: CPU (% of one core, its own and
// including any commands it runs) and RSS over 60 s at the default 1 Hz refresh, plus the bytes it
// writes to the terminal. Targets: <= 0.5 % of one core, RSS <= 100 MB.
// Two windows: the first minute (from 5 s after start: V8 is still compiling the code that runs
// once a second, on its own threads) and a steady-state minute from NSA_BENCH_STEADY s (default 120)
// on, which is what a cockpit left open next to a 40-hour run costs. NSA_BENCH_SECONDS sets the
// window length; NSA_BENCH_STEADY=0 skips the second window.
// Peers in the same run, at the same 1 s refresh and terminal size: btop and htop where installed
// (the target is the cockpit's CPU <= btop's), and `nsa-top status` on the same live run against a
// bare `node -e ''` start (target <= 3x).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';
import { procSample, loadAverage } from './proc.js';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);
const STEADY = Number(process.env.NSA_BENCH_STEADY ?? 120);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), 'nsa-top-bench-cockpit-'));
const out = join(dir, 'run');
const trainer = spawn(
  process.execPath,
  [BIN, 'train', '--out', out, '--ranks', '2', '--steps', '100000', '--log-every', '5', '--save-every', '0'],
  { stdio: 'ignore' },
);
let cockpit: pty.IPty | null = null;
const peers: { name: string; p: pty.IPty }[] = [];
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
  // the peers, in ptys of the same size, each refreshing once a second
  const cfg = join(dir, 'xdg');
  mkdirSync(join(cfg, 'btop'), { recursive: true });
  writeFileSync(join(cfg, 'btop', 'btop.conf'), 'update_ms = 1000\n');
  for (const [name, argv] of [
    ['btop', ['btop']],
    ['htop', ['htop', '-d', '10']],
  ] as const) {
    if (spawnSync('sh', ['-c', `command -v ${argv[0]}`]).status !== 0) {
      console.log(`  (${name} is not installed: no ${name} column; apt-get install ${name})`);
      continue;
    }
    const p = pty.spawn(argv[0], [...argv.slice(1)], {
      cols: 120,
      rows: 40,
      cwd: dir,
      env: { ...env, XDG_CONFIG_HOME: cfg, HOME: dir, TERM: 'xterm-256color' },
    });
    p.onData(() => {});
    peers.push({ name, p });
  }
  await sleep(5000); // start-up itself is not measured
  const pid = cockpit.pid;
  const t00 = Date.now();
  let maxRss = 0;
  // one window: CPU over it, and the RSS maximum sampled every second
  const window = async (seconds: number) => {
    const pa = peers.map((x) => procSample(x.p.pid));
    const a = procSample(pid)!;
    const b0 = bytes;
    const t0 = Date.now();
    maxRss = Math.max(maxRss, a.rssMiB);
    for (let s = 0; s < seconds; s++) {
      await sleep(1000);
      const x = procSample(pid);
      if (x) maxRss = Math.max(maxRss, x.rssMiB);
    }
    const z = procSample(pid)!;
    const wall = (Date.now() - t0) / 1000;
    const peerPct = peers.map((x, i) => {
      const b = procSample(x.p.pid);
      const s = pa[i];
      return b && s ? (100 * (b.self - s.self)) / wall : NaN;
    });
    return {
      peerPct,
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
  const loadavg = loadAverage();
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
  peers.forEach((x, i) =>
    row(
      `CPU, ${x.name} at 1 s (same run)`,
      (w) => `${w.peerPct[i]!.toFixed(2)} %`,
      x.name === 'btop' ? 'nsa-top <= btop' : '',
    ),
  );
  if (peers.length)
    row(
      'ratio nsa-top / btop',
      (w) => {
        const b = w.peerPct[peers.findIndex((x) => x.name === 'btop')];
        return b === undefined || !(b > 0) ? '–' : `${(w.selfPct / b).toFixed(2)} ×`;
      },
      '<= 1.00 ×',
    );
  console.log(`  RSS, max over both windows          ${maxRss.toFixed(1).padStart(9)} MB${''.padStart(17)}<= 100 MB`);
  // one look at the same live run from a script, against a bare node start: the three are run in
  // turn, 9 rounds, and each row is its median (run in blocks of 5, one after the other, a load that
  // changed between the blocks — the trainer's validation, a peer's redraw — moved the ratio by
  // ±0.6 between two runs of one build); `nsa-top status` runs through bin/nsa-top.js's shebang
  // (its node flags), as an installed one does
  const looks: string[][] = [
    ['-e', ''],
    [BIN, 'status', out],
    [BIN, 'status', out, '--json'],
  ];
  const took: number[][] = looks.map(() => []);
  for (let round = 0; round < 9; round++)
    looks.forEach((argv, i) => {
      const t0 = performance.now();
      if (argv[0] === BIN) spawnSync(BIN, argv.slice(1), { stdio: 'ignore' });
      else spawnSync(process.execPath, argv, { stdio: 'ignore' });
      took[i]!.push(performance.now() - t0);
    });
  const [bare, st, sj] = took.map((ts) => ts.sort((x, y) => x - y)[4]!) as [number, number, number];
  console.log(
    `  status on this live run: ${st.toFixed(0)} ms (table), ${sj.toFixed(0)} ms (--json); bare node ${bare.toFixed(0)} ms: ${(Math.max(st, sj) / bare).toFixed(2)} x (target <= 3 x; medians of 9, interleaved)`,
  );
  cockpit.write('q');
  await sleep(1500);
} finally {
  for (const x of peers)
    try {
      x.p.kill('SIGKILL');
    } catch {
      /* exited */
    }
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
