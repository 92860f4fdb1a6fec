// Readers bench: a generated 50k-step run (training.csv + heartbeat_rank0.jsonl) at three heartbeat
// sizes — 1k lines, 100k lines and ~1 GB (2M+ lines: 50k-step cycles with resumes) — read by a
// fresh RunModel in its own process (a plain-node bundle, so RSS is the reader's, not tsx's).
// Measures time to first snapshot, peak RSS (sampled + the kernel's maxRSS) and the time to read
// the whole history in the background. Targets: first snapshot <= 250 ms, RSS <= 100 MB, flat.
// Everything is written under os.tmpdir() and deleted afterwards.
// Knobs for digging: NSA_BENCH_VERBOSE=1 (memoryUsage at the RSS peak), NSA_BENCH_NODE_FLAGS="--flag",
// NSA_BENCH_CHILD_ENV="K=V,K2=V2" (e.g. MALLOC_MMAP_THRESHOLD_) for the measuring child.
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const STEPS = 50_000;
const T0 = 1_800_000_000;

// ----------------------------------------------------------------- child: measure one run dir
const CHILD = `
import { LocalHost } from ${JSON.stringify(join(here, '..', 'src', 'remote', 'local', 'host.ts'))};
import { RunModel } from ${JSON.stringify(join(here, '..', 'src', 'trainer', 'run', 'model.ts'))};
const dir = process.argv[2];
const base = process.memoryUsage().rss;
let peak = base;
let at = null;
const sample = () => { const u = process.memoryUsage(); if (u.rss > peak) { peak = u.rss; at = u; } };
const timer = setInterval(sample, 5);
const t0 = performance.now();
const c0 = process.cpuUsage();
const m = new RunModel(new LocalHost(), dir);
let s = await m.poll();
const first = performance.now() - t0;
const cu = process.cpuUsage(c0);
const firstCpu = (cu.user + cu.system) / 1000;
sample();
const firstPeak = peak;
const firstStep = s.step;
let polls = 1;
while (s.backfill.pending && polls < 10000) { s = await m.poll(); polls++; sample(); }
const full = performance.now() - t0;
// steady state: polls with nothing new, then with one log step appended per poll
const { appendFileSync } = await import('node:fs');
let t1 = performance.now();
for (let i = 0; i < 20; i++) await m.poll();
const idlePoll = (performance.now() - t1) / 20;
const hbPath = dir + '/heartbeat_rank0.jsonl';
t1 = performance.now();
for (let i = 0; i < 20; i++) {
  const step = 900000 + i;
  appendFileSync(hbPath, '{"ts": ' + (1.9e9 + i) + ', "iso": "x", "pid": 1, "rank": 0, "step": ' + step + ', "msg": "progress", "loss": 2.5, "toks_per_s": 9000.0}\\n');
  await m.poll();
}
const appendPoll = (performance.now() - t1) / 20;
sample();
clearInterval(timer);
const ru = process.resourceUsage();
console.error(JSON.stringify(at));
console.log(JSON.stringify({ firstCpu, idlePoll, appendPoll, base, first, firstPeak, firstStep, full, polls, peak, maxRss: ru.maxRSS * 1024,
  step: s.step, segments: s.segments.length, lossTotal: s.series.loss.total, hbRecords: s.files['heartbeat_rank0.jsonl']?.records ?? 0,
  errors: Object.values(s.files).reduce((n, f) => n + f.parseErrors, 0) }));
`;

// ----------------------------------------------------------------- generator
function progress(step: number, ts: number, pid: number): string {
  const loss = (5.5 - Math.log1p(step) / 5 + ((step * 7919) % 100) / 1000).toFixed(15);
  return (
    `{"ts": ${ts.toFixed(7)}, "iso": "2027-01-15T08:00:00.000000Z", "pid": ${pid}, "rank": 0, "step": ${step}, "msg": "progress", "loss": ${loss}, "toks_per_s": ${(9000 + (step % 500)).toFixed(10)}, ` +
    `"dt_fetch_s": 0.0${(step % 90) + 10}, "fetch_p50_ms": 12.5, "fetch_p95_ms": 40.25, "gpu_mem_alloc": 20123, "gpu_mem_reserved": 31744, ` +
    `"gate_entropy_mean": 1.0984768867492676, "gate_entropy_min": 1.0972706079483032, "gate_max_gate": 0.35773134231567383, "gate_collapse_frac": 0.0, "gate_branch_shares": [0.33158570528030396, 0.33819395303726196, 0.3302202820777893], ` +
    `"fb_selection_triton_fails": 0, "fb_selection_cuda_fails": 0, "fb_selection_pack_fails": 0, "fb_selection_mask_fails": 0, "fb_compressed_fa2_fails": 0, "fb_sliding_fa2_fails": 0, "fb_total_fallbacks": 0, ` +
    `"sel_k_mean": 73.0, "sel_k_max": 128, "sel_rows": 512, "sel_pct_at_max": 0.01953125}\n` +
    `{"ts": ${(ts + 0.0001).toFixed(7)}, "iso": "2027-01-15T08:00:00.000100Z", "pid": ${pid}, "rank": 0, "step": ${step}, "msg": "step_end", "phase": "end"}\n`
  );
}

/** heartbeat with `lines` lines (or ~`bytes` bytes): 50k-step cycles, each started by a boot (a resume) */
function writeHeartbeat(path: string, target: { lines?: number; bytes?: number }): number {
  const fd = openSync(path, 'w');
  let lines = 0;
  let bytes = 0;
  let buf = '';
  let ts = T0;
  let pid = 1000;
  const done = () => (target.lines !== undefined ? lines >= target.lines : bytes >= target.bytes!);
  outer: for (;;) {
    pid++;
    buf += `{"ts": ${ts.toFixed(7)}, "iso": "x", "pid": ${pid}, "rank": 0, "step": 0, "msg": "boot", "phase": "start"}\n`;
    lines++;
    for (let step = 1; step <= STEPS; step++) {
      ts += 0.5;
      const chunk = progress(step, ts, pid);
      buf += chunk;
      lines += 2;
      bytes += chunk.length;
      if (buf.length > 8 * 1024 * 1024) {
        writeSync(fd, buf);
        buf = '';
      }
      if (done()) break outer;
    }
    ts += 60;
  }
  writeSync(fd, buf);
  closeSync(fd);
  return lines;
}

function writeRun(dir: string, target: { lines?: number; bytes?: number }): number {
  mkdirSync(dir, { recursive: true });
  const lines = writeHeartbeat(join(dir, 'heartbeat_rank0.jsonl'), target);
  let csv = '';
  for (let step = 1; step <= STEPS; step++)
    csv += `${step},${(5.5 - Math.log1p(step) / 5).toFixed(6)},${(2e-4).toExponential(6)},${9000 + (step % 500)}\n`;
  writeFileSync(join(dir, 'training.csv'), csv);
  writeFileSync(
    join(dir, 'env.json'),
    JSON.stringify({
      torch: '2.4',
      env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml', WORLD_SIZE: '1', NSA_PREFILL_BATCHED: '1' },
    }),
  );
  writeFileSync(
    join(dir, 'config.yaml'),
    'model: {dim: 768, n_layers: 12, n_heads: 12, n_kv_groups: 2, d_k: 64, d_v: 64}\nnsa: {l: 32, d: 16, l_sel: 64, n_sel: 16, w: 512}\ntrain: {steps: 50000, seq_len: 2048, batch_size: 2, lr: 2.0e-4, log_every: 1, save_every: 5000, seed: 1, out_dir: x}\n',
  );
  return lines;
}

// ----------------------------------------------------------------- status vs a bare node start
const BIN = join(here, '..', 'bin', 'nsa-top.js');
/** one run of `argv` (ms); `nsa-top …` runs through bin/nsa-top.js's shebang (its node flags), as an installed nsa-top does */
function timeMs(argv: string[]): number {
  const t0 = performance.now();
  const r =
    argv[0] === BIN
      ? spawnSync(BIN, argv.slice(1), { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
      : spawnSync(process.execPath, argv, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const ms = performance.now() - t0;
  if (r.status !== 0 && r.status !== 1) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}
/** the four looks run in turn, 7 rounds, each the median of its 7: a load that changes during the
 *  measurement falls on all of them alike */
function statusVsNode(dir: string): string[] {
  const looks = [
    ['-e', ''],
    [BIN, 'status', '--help'],
    [BIN, 'status', dir, '--json'],
    [BIN, 'status', dir],
  ];
  const took: number[][] = looks.map(() => []);
  for (let round = 0; round < 7; round++) looks.forEach((argv, i) => took[i]!.push(timeMs(argv)));
  const [node, load, json, table] = took.map((t) => t.sort((a, b) => a - b)[3]!) as [number, number, number, number];
  return [
    `${node.toFixed(0)} ms`,
    `${load.toFixed(0)} ms`,
    `${json.toFixed(0)} ms`,
    `${table.toFixed(0)} ms`,
    `${(Math.max(json, table) / node).toFixed(2)} ×`,
  ];
}

const statusRows: string[][] = [];

// ----------------------------------------------------------------- main
const MB = 1024 * 1024;
const root = mkdtempSync(join(tmpdir(), 'nsa-top-bench-readers-'));
const cleanup = () => rmSync(root, { recursive: true, force: true });
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});
try {
  // the child runs as plain node from a bundle: RSS without the tsx loader
  const childTs = join(root, 'child.ts');
  const childJs = join(root, 'child.mjs');
  writeFileSync(childTs, CHILD);
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [childTs],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: childJs,
    logLevel: 'error',
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  });

  const scenarios: { name: string; target: { lines?: number; bytes?: number } }[] = [
    { name: '1k lines', target: { lines: 1_000 } },
    { name: '100k lines', target: { lines: 100_000 } },
    { name: '~1 GB', target: { bytes: 1024 * MB } },
  ];
  const rows: string[][] = [];
  for (const sc of scenarios) {
    const dir = join(root, sc.name.replace(/\W+/g, '_'));
    const g0 = performance.now();
    const lines = writeRun(dir, sc.target);
    const size = statSync(join(dir, 'heartbeat_rank0.jsonl')).size;
    const gen = performance.now() - g0;
    const r = spawnSync(
      process.execPath,
      [...(process.env.NSA_BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []), childJs, dir],
      {
        encoding: 'utf8',
        maxBuffer: 16 * MB,
        env: {
          ...process.env,
          ...(process.env.NSA_BENCH_CHILD_ENV
            ? Object.fromEntries(
                process.env.NSA_BENCH_CHILD_ENV.split(',').map((kv) => kv.split('=') as [string, string]),
              )
            : {}),
        },
      },
    );
    if (r.status !== 0) throw new Error(`child failed: ${r.stderr}`);
    if (process.env.NSA_BENCH_VERBOSE) console.log(sc.name, r.stderr.trim());
    const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
    rows.push([
      sc.name,
      `${(j.base / MB).toFixed(0)} MB`,
      lines.toLocaleString('en-US'),
      `${(size / MB).toFixed(0)} MiB`,
      `${j.first.toFixed(0)} ms (${j.firstCpu.toFixed(0)} ms CPU)`,
      `${(j.firstPeak / MB).toFixed(0)} MB`,
      `${(Math.max(j.peak, j.maxRss) / MB).toFixed(0)} MB`,
      `${(j.full / 1000).toFixed(1)} s / ${j.polls}`,
      `${j.idlePoll.toFixed(1)} / ${j.appendPoll.toFixed(1)} ms`,
      `${j.step} · ${j.segments} seg · ${j.errors} err`,
      `${(gen / 1000).toFixed(1)} s`,
    ]);
    statusRows.push([sc.name, ...statusVsNode(dir)]);
    rmSync(dir, { recursive: true, force: true });
  }
  const head = [
    'heartbeat',
    'node base',
    'lines',
    'size',
    'first snapshot (CPU)',
    'RSS at first',
    'peak RSS incl. backfill',
    'full history / polls',
    'poll idle / +1 step',
    'step · segments · errors',
    'generate',
  ];
  const all = [head, ...rows];
  const w = head.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  for (const r of all) console.log(r.map((c, i) => c.padEnd(w[i]!)).join('  '));
  console.log(
    `machine: ${cpus().length} cores, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} (times scale with the load)`,
  );
  console.log('targets: first snapshot <= 250 ms, RSS <= 100 MB, flat from 1k to 1M+ lines (node baseline included)');
  console.log(
    '"full history" polls back to back (no cockpit interval): the peak there is GC slack of a 1 GB parse at full speed',
  );
  console.log('');
  const sHead = [
    'heartbeat',
    "bare `node -e ''`",
    '`status --help` (loading only)',
    '`status --json`',
    '`status` (table)',
    'ratio status / node',
  ];
  const sAll = [sHead, ...statusRows];
  const sw = sHead.map((_, i) => Math.max(...sAll.map((r) => r[i]!.length)));
  for (const r of sAll) console.log(r.map((c, i) => c.padEnd(sw[i]!)).join('  '));
  console.log(
    'target: `nsa-top status` answers from the tail in <= 3 x a bare node start (the slower of --json and the table; medians of 7, interleaved, status through its shebang as installed; the process table is read too)',
  );
} finally {
  cleanup();
}
