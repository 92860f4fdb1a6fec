// nsa-top's own cost while it watches a live 2-rank reference run: CPU (% of one core, its own and
// including the short commands it runs) and RSS over 60 s at the default 1 Hz refresh, plus the bytes
// it writes to the terminal. Targets: <= 0.5 % of one core, RSS <= 100 MB.
// NSA_BENCH_SECONDS shortens the window.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);
const TICK = 100; // clock ticks per second (Linux USER_HZ)

function stat(pid: number): { self: number; children: number; rssMiB: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
    return { self: (Number(f[11]) + Number(f[12])) / TICK, children: (Number(f[13]) + Number(f[14])) / TICK, rssMiB: rss };
  } catch {
    return null;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), 'nsa-top-bench-cockpit-'));
const out = join(dir, 'run');
const trainer = spawn(process.execPath, [BIN, 'train', '--out', out, '--ranks', '2', '--steps', '100000', '--log-every', '5', '--save-every', '0'], { stdio: 'ignore' });
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
  await sleep(5000); // start-up is not the steady state
  const pid = cockpit.pid;
  const a = stat(pid)!;
  const b0 = bytes;
  const t0 = Date.now();
  let maxRss = a.rssMiB;
  for (let s = 0; s < SECONDS; s++) {
    await sleep(1000);
    const x = stat(pid);
    if (x) maxRss = Math.max(maxRss, x.rssMiB);
  }
  const z = stat(pid)!;
  const wall = (Date.now() - t0) / 1000;
  const selfPct = (100 * (z.self - a.self)) / wall;
  const allPct = (100 * (z.self - a.self + z.children - a.children)) / wall;
  const loadavg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`cockpit on a live 2-rank reference run, 120x40, 1 s refresh, ${wall.toFixed(0)} s (load average ${loadavg})`);
  console.log(`  metric                               measured     target`);
  console.log(`  CPU, nsa-top process (% of 1 core)  ${selfPct.toFixed(2).padStart(8)} %   <= 0.5 %`);
  console.log(`  CPU incl. its commands (ps, sh)      ${allPct.toFixed(2).padStart(8)} %`);
  console.log(`  RSS, max                            ${maxRss.toFixed(1).padStart(8)} MB  <= 100 MB`);
  console.log(`  terminal output                     ${((bytes - b0) / wall / 1024).toFixed(1).padStart(8)} KiB/s`);
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
