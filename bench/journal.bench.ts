// The journal's cost (docs/journal.md): two cockpits on one live 2-rank reference run, side by side in
// the same minute — one recording the journal, one with --no-record — their CPU (% of one core) and
// RSS, and the journal's bytes per hour of that run (extrapolated from the window). Targets:
// recording costs < 10 % of the cockpit's CPU, and the journal stays within its cap (4 parts of
// --journal-max-mb / 4). NSA_BENCH_SECONDS sets the window (default 60). Side by side is noisy on a
// shared box, so the recorder's CPU is also measured in process on this run's live states.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';
import { procSample, loadAverage } from './proc.js';

const BIN = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));
const SECONDS = Number(process.env.NSA_BENCH_SECONDS ?? 60);

function journalBytes(out: string): number {
  try {
    return readdirSync(join(out, '.nsa-top'))
      .filter((n) => /^journal(\.\d+)?\.jsonl$/.test(n))
      .reduce((n, f) => n + statSync(join(out, '.nsa-top', f)).size, 0);
  } catch {
    return 0;
  }
}

/** record() and flush CPU cost on the states an in-process collector emits on the live run `out` */
async function recordCost(out: string): Promise<{ recordMs: number; flushMs: number; looksPerS: number }> {
  const { Collector } = await import('../src/cockpit/collector.js');
  const { JournalRecorder } = await import('../src/journal/writer.js');
  const { LocalHost } = await import('../src/remote/local/host.js');
  const { resolveRunDirsAt } = await import('../src/trainer/run/rundir.js');
  const host = new LocalHost();
  const dirs = await resolveRunDirsAt(host, out);
  const c = new Collector({ host, runDir: out, dirs, intervalMs: 1000, readOnly: true });
  const states: { at: number }[] = [];
  c.subscribe((st) => states.push(st));
  c.start();
  const t0 = Date.now();
  await sleep(20_000);
  c.stop();
  const looksPerS = states.length / ((Date.now() - t0) / 1000);
  // a scratch run dir of its own: the bench's run keeps its one journal
  const d = mkdtempSync(join(tmpdir(), 'nsa-top-bench-journal-rec-'));
  try {
    mkdirSync(join(d, '.nsa-top'));
    writeFileSync(join(d, 'training.csv'), 'step,loss\n');
    const rec = new JournalRecorder({
      host,
      dirs: { ...dirs, outDir: d, runDir: d },
      as: 'cockpit',
      flushEveryMs: 3_600_000,
    });
    await rec.start();
    const span = states.at(-1)!.at - states[0]!.at + 1000;
    let recordUs = 0;
    let flushUs = 0;
    let looks = 0;
    let flushes = 0;
    // the first passes warm the JIT up (a cockpit records for hours): not counted
    let n = 0;
    for (let pass = 0; pass < 12; pass++)
      for (const st of states) {
        const counted = pass >= 2;
        const a = process.cpuUsage();
        rec.record({ ...st, at: st.at + pass * span } as never);
        const b = process.cpuUsage(a);
        if (counted) {
          recordUs += b.user + b.system;
          looks++;
        }
        if (++n % 5 === 0) {
          const f = process.cpuUsage();
          await rec.flush();
          const g = process.cpuUsage(f);
          if (counted) {
            flushUs += g.user + g.system;
            flushes++;
          }
        }
      }
    await rec.close();
    return { recordMs: recordUs / 1000 / looks, flushMs: flushUs / 1000 / Math.max(flushes, 1), looksPerS };
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), 'nsa-top-bench-journal-'));
const out = join(dir, 'run');
const trainer = spawn(
  process.execPath,
  [BIN, 'train', '--out', out, '--ranks', '2', '--steps', '100000', '--log-every', '5', '--save-every', '200'],
  { stdio: 'ignore' },
);
const cockpits: pty.IPty[] = [];
try {
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
  const open = (args: string[]) => {
    const p = pty.spawn(BIN, [out, ...args], { cols: 120, rows: 40, cwd: dir, env });
    p.onData(() => {});
    cockpits.push(p);
    return p;
  };
  // the recorder first: it takes the journal's lock
  const rec = open([]);
  for (let i = 0; i < 100 && journalBytes(out) === 0; i++) await sleep(200);
  const plain = open(['--no-record']);
  await sleep(5000); // start-up is not measured
  const a = [procSample(rec.pid)!, procSample(plain.pid)!];
  const b0 = journalBytes(out);
  const t0 = Date.now();
  const maxRss = [a[0]!.rssMiB, a[1]!.rssMiB];
  for (let s = 0; s < SECONDS; s++) {
    await sleep(1000);
    [rec, plain].forEach((p, i) => (maxRss[i] = Math.max(maxRss[i]!, procSample(p.pid)?.rssMiB ?? 0)));
  }
  const z = [procSample(rec.pid)!, procSample(plain.pid)!];
  const wall = (Date.now() - t0) / 1000;
  const bytes = journalBytes(out) - b0;
  const cpu = z.map((x, i) => (100 * (x.self - a[i]!.self)) / wall);
  const perHour = (bytes / wall) * 3600;
  const capMb = 32;
  const loadavg = loadAverage();
  console.log(`journal on a live 2-rank reference run, ${wall.toFixed(0)} s window (load average ${loadavg})`);
  console.log(`  metric                              recording    --no-record   target`);
  console.log(
    `  CPU, cockpit (% of 1 core)          ${`${cpu[0]!.toFixed(2)} %`.padStart(9)}   ${`${cpu[1]!.toFixed(2)} %`.padStart(11)}`,
  );
  console.log(
    `  recording's share of its CPU        ${`${((100 * (cpu[0]! - cpu[1]!)) / Math.max(cpu[0]!, 1e-9)).toFixed(1)} %`.padStart(9)}   ${''.padStart(11)}   < 10 %`,
  );
  console.log(
    `  RSS max (MiB)                       ${maxRss[0]!.toFixed(0).padStart(9)}   ${maxRss[1]!.toFixed(0).padStart(11)}`,
  );
  console.log(
    `  journal bytes/hour                  ${`${(perHour / 1048576).toFixed(2)} MB`.padStart(9)}   ${'–'.padStart(11)}   cap ${capMb} MB: full after ${(((capMb * 1048576) / perHour) | 0).toString()} h, then rotated`,
  );
  console.log(`  journal now                         ${`${(journalBytes(out) / 1024).toFixed(0)} KiB`.padStart(9)}`);
  // Side by side, two cockpits differ by ~0.1-0.15 % of a core on this shared box even when neither
  // records (an A/A run measured -29 %): the recorder's own cost is measured in process as well, on
  // the states a live collector emits on this run, record() and one flush per batch of 5 s.
  const inproc = await recordCost(out);
  const perS = inproc.recordMs * inproc.looksPerS + inproc.flushMs / 5;
  console.log(
    `  in process: record() ${inproc.recordMs.toFixed(3)} ms CPU a look (${inproc.looksPerS.toFixed(2)} looks/s), a flush ${inproc.flushMs.toFixed(2)} ms every 5 s`,
  );
  console.log(
    `  recording's share, in process       ${`${((100 * perS) / (10 * Math.max(cpu[1]!, 1e-9))).toFixed(1)} %`.padStart(9)}   of the --no-record cockpit's CPU   < 10 %`,
  );
} finally {
  for (const c of cockpits) c.kill('SIGTERM');
  await sleep(500);
  // the run stops itself at .HALT (its ranks with it), as the cockpit bench stops its run
  try {
    writeFileSync(join(out, '.HALT'), 'halt: bench done\n');
  } catch {
    /* no run dir */
  }
  const done = new Promise((r) => trainer.once('exit', r));
  if ((await Promise.race([done, sleep(20_000).then(() => 'late')])) === 'late') trainer.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
