// The --ranks N launcher, shaped like torchrun: it spawns N rank processes (RANK, LOCAL_RANK,
// WORLD_SIZE, NSA_TOP_RUN_DIR in their environment), relays the gradient all-reduce between them,
// forwards SIGTERM/SIGINT, ignores SIGUSR1 (signal a rank for a dump), and when one rank fails it
// tears the others down and exits non-zero. It is a rehearsal harness for per-rank monitoring on one
// machine, not a distributed training engine.
import { spawn, type ChildProcess } from 'node:child_process';
import { combine, type Contribution, type ToLauncher, type ToRank } from './comm.js';
import { EARLY_SIGUSR1_NODE_ARGS } from './dumps.js';
import type { RunSpec } from './spec.js';

const SIGNUM: Record<string, number> = { SIGINT: 2, SIGTERM: 15, SIGKILL: 9 };

interface RankProc {
  rank: number;
  child: ChildProcess;
  exited: boolean;
  code: number | null;
  signal: NodeJS.Signals | null;
}

const log = (line: string) => process.stdout.write(`[launcher] ${line}\n`);
const logErr = (line: string) => process.stderr.write(`[launcher] ${line}\n`);

export async function runLauncher(spec: RunSpec, selfCommand: string[]): Promise<number> {
  const world = spec.world;
  const ranks: RankProc[] = [];
  const timeoutMin = Number(process.env.NSA_PG_TIMEOUT_MIN ?? 15);
  const timeoutMs = Number.isFinite(timeoutMin) && timeoutMin > 0 ? timeoutMin * 60_000 : 15 * 60_000;

  let pending = new Map<number, Contribution>();
  let pendingStep: number | null = null;
  let pendingSince = 0;
  let broken: string | null = null;
  let failure: { rank: number; code: number | null; signal: NodeJS.Signals | null } | null = null;
  let stopSignal: NodeJS.Signals | null = null;
  let killTimer: NodeJS.Timeout | null = null;

  const sendTo = (r: RankProc, m: ToRank) => {
    if (!r.exited && r.child.connected)
      r.child.send(m, (err) => err && !r.exited && logErr(`send to rank ${r.rank} failed: ${err.message}`));
  };
  const abortAll = (why: string) => {
    if (broken) return;
    broken = why;
    for (const r of ranks) sendTo(r, { t: 'abort', why });
    pending = new Map();
  };
  const killAll = (sig: NodeJS.Signals) => {
    for (const r of ranks) if (!r.exited) r.child.kill(sig);
  };
  const armKillTimer = (ms: number) => {
    if (killTimer) return;
    killTimer = setTimeout(() => {
      const left = ranks.filter((r) => !r.exited);
      if (left.length) {
        logErr(`ranks ${left.map((r) => r.rank).join(',')} still running ${ms / 1000}s after teardown — SIGKILL`);
        killAll('SIGKILL');
      }
    }, ms);
    killTimer.unref();
  };

  const env = (rank: number): NodeJS.ProcessEnv => ({
    ...process.env,
    RANK: String(rank),
    LOCAL_RANK: String(rank),
    WORLD_SIZE: String(world),
    LOCAL_WORLD_SIZE: String(world),
    MASTER_ADDR: '127.0.0.1',
    NSA_TOP_RUN_DIR: spec.outDir,
    CONFIG: process.env.CONFIG ?? spec.configPath,
  });

  const done = new Promise<void>((resolveAll) => {
    const onMessage = (r: RankProc) => (m: ToLauncher) => {
      if (m.t !== 'reduce') return;
      if (broken) {
        sendTo(r, { t: 'abort', why: broken });
        return;
      }
      if (pendingStep !== null && m.c.step !== pendingStep) {
        abortAll(`ranks disagree on the step (${pendingStep} vs ${m.c.step} from rank ${r.rank})`);
        return;
      }
      if (pendingStep === null) {
        pendingStep = m.c.step;
        pendingSince = Date.now();
      }
      pending.set(r.rank, m.c);
      if (pending.size === world) {
        const cs = [...pending.values()];
        pending = new Map();
        pendingStep = null;
        const reduced = combine(cs);
        for (const rp of ranks) sendTo(rp, { t: 'reduced', r: reduced });
      }
    };
    for (let rank = 0; rank < world; rank++) {
      const [cmd, ...pre] = selfCommand;
      // node itself: install a SIGUSR1 listener before the bundle loads (see dumps.ts)
      const early = /(^|\/)node[^/]*$/.test(cmd!) ? EARLY_SIGUSR1_NODE_ARGS : [];
      const child = spawn(cmd!, [...early, ...pre, 'train', '--rank-worker'], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        serialization: 'advanced',
        env: env(rank),
        // Its own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
        detached: true,
      });
      const rp: RankProc = { rank, child, exited: false, code: null, signal: null };
      ranks.push(rp);
      child.on('message', onMessage(rp));
      child.on('error', (err) => logErr(`rank ${rank}: ${err.message}`));
      child.on('exit', (code, signal) => {
        rp.exited = true;
        rp.code = code;
        rp.signal = signal;
        const bad = signal !== null || (code !== 0 && !(stopSignal && code === 128 + (SIGNUM[stopSignal] ?? 15)));
        if (bad && !failure && !stopSignal) {
          failure = { rank, code, signal };
          logErr(
            `rank ${rank} (pid ${child.pid}) exited with ${signal ? `signal ${signal}` : `code ${code}`} — tearing down the other ranks`,
          );
          abortAll(`rank ${rank} failed`);
          // The others leave on the abort (rank 0 keeps the last completed step); signals only if they don't.
          setTimeout(() => killAll('SIGTERM'), 10_000).unref();
          armKillTimer(30_000);
        } else if (!broken && ranks.some((o) => !o.exited)) {
          // A rank leaving (halt, nan, stop) while others still wait in a collective: release them.
          if (pending.size > 0 || code !== 0) abortAll(`rank ${rank} left`);
        }
        if (ranks.every((o) => o.exited)) resolveAll();
      });
      sendTo(rp, { t: 'spec', spec });
    }
  });

  log(
    `world_size=${world}: ${ranks.map((r) => `rank${r.rank}=pid ${r.child.pid}`).join(', ')} (a single-machine rehearsal, not a distributed engine)`,
  );

  const onUsr1 = () =>
    log(
      `SIGUSR1 ignored by the launcher (pid ${process.pid}); send it to a rank for a stack dump: ${ranks.map((r) => `rank${r.rank}=${r.child.pid}`).join(' ')}`,
    );
  const onStop = (sig: NodeJS.Signals) => {
    if (stopSignal) {
      log(`second ${sig}: forwarding, ranks exit at once`);
      killAll(sig);
      armKillTimer(5_000);
      return;
    }
    stopSignal = sig;
    log(`${sig}: forwarding to the ranks; they checkpoint, then exit`);
    killAll(sig);
    armKillTimer(120_000);
  };
  process.on('SIGUSR1', onUsr1);
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);

  const watchdog = setInterval(() => {
    if (pendingStep !== null && !broken && Date.now() - pendingSince > timeoutMs) {
      const missing = ranks.filter((r) => !pending.has(r.rank)).map((r) => r.rank);
      logErr(
        `collective at step ${pendingStep} timed out after ${timeoutMin} min (NSA_PG_TIMEOUT_MIN) waiting on rank(s) ${missing.join(',')} — tearing down`,
      );
      failure = failure ?? { rank: missing[0] ?? -1, code: null, signal: null };
      abortAll('collective timeout');
      killAll('SIGTERM');
      armKillTimer(30_000);
    }
  }, 1000);

  await done;
  clearInterval(watchdog);
  if (killTimer) clearTimeout(killTimer);
  process.off('SIGUSR1', onUsr1);
  process.off('SIGTERM', onStop);
  process.off('SIGINT', onStop);

  if (failure) return 1;
  if (stopSignal) return 128 + (SIGNUM[stopSignal] ?? 15);
  const codes = ranks.map((r) => r.code ?? 1);
  return codes.find((c) => c !== 0) ?? 0;
}
