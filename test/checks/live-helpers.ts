// Shared by the live checks tests: the reference trainer (`nsa-top train`) and the real
// `nsa-top watchdog` binary side by side, in temp dirs, cleaned up (by verified pid) afterwards.
// Needs `npm run build` first (the binary is what runs). Not a test file itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const dirs: string[] = [];
const children: ChildProcess[] = [];

export interface Line {
  event: string;
  id?: string;
  severity?: string;
  anomaly?: string | null;
  state?: string;
  code?: number;
  verdicts?: { kind: string; rank?: number }[];
  [k: string]: unknown;
}

export function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'nsa-checks-live-'));
  dirs.push(d);
  return d;
}

export function start(args: string[]): { child: ChildProcess; out: () => string; done: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NSA_TOP_TEST: '1' },
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', () => {});
  const done = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, out: () => out, done };
}

export function lines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

export async function waitFor<T>(what: string, f: () => T | null | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Rank pids of OUR run (heartbeat pids whose environment names this run dir): verified before any signal. */
function ourRankPids(dir: string): number[] {
  const pids: number[] = [];
  if (!existsSync(dir)) return pids;
  for (const f of readdirSync(dir).filter((n) => /^heartbeat_rank\d+\.jsonl$/.test(n))) {
    for (const l of readFileSync(join(dir, f), 'utf8').split('\n')) {
      const m = /"pid": ?(\d+)/.exec(l);
      if (m) pids.push(Number(m[1]));
    }
  }
  return [...new Set(pids)].filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`NSA_TOP_RUN_DIR=${dir}`);
    } catch {
      return false;
    }
  });
}

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) {
    for (const pid of ourRankPids(d)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    // a rank just SIGKILLed may still be writing its last line as the dir goes (ENOTEMPTY): retried
    rmSync(d, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  }
});

/** where a watchdog started with --metrics-listen HOST:0 serves /metrics (its start line says) */
export function metricsListen(wd: { out: () => string }): Promise<string> {
  return waitFor(
    'the start line naming the bound address',
    () => (lines(wd.out()).find((l) => l.event === 'start')?.['metrics'] as { listen?: string } | undefined)?.listen,
    20_000,
  );
}

export const TRAIN2 = [
  '--ranks',
  '2',
  '--log-every',
  '5',
  '--heartbeat-every',
  '--save-every',
  '50',
  '--eval-every',
  '50',
];

/** trainer + watchdog side by side; resolves when the watchdog exits (it exits when the run has ended) */
export async function watched(
  steps: number,
  inject: string[],
  wdArgs: string[],
  opts: {
    train?: string[];
    whileRunning?: (dir: string, wdOut: () => string, trainer: ChildProcess) => Promise<void>;
  } = {},
) {
  const dir = tmp();
  const trainer = start([
    'train',
    '--out',
    dir,
    '--steps',
    String(steps),
    ...(opts.train ?? TRAIN2),
    ...inject.flatMap((i) => ['--inject', i]),
  ]);
  const wd = start(['watchdog', dir, '--interval', '0.5', ...wdArgs]);
  if (opts.whileRunning) await opts.whileRunning(dir, wd.out, trainer.child);
  const timer = setTimeout(() => wd.child.kill('SIGKILL'), 90_000);
  const code = await wd.done;
  clearTimeout(timer);
  await Promise.race([trainer.done, new Promise((r) => setTimeout(r, 15_000))]);
  const ls = lines(wd.out());
  const alerts = ls.filter((l) => l.event === 'alert');
  return { dir, code, ls, alerts, trainerCode: trainer.child.exitCode };
}

export const has = (alerts: Line[], id: string, severity?: string) =>
  alerts.some((a) => a.id === id && (!severity || a.severity === severity));
