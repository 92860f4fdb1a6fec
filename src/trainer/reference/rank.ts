// One rank of the reference trainer: the training loop and everything it writes (contract §1) and
// answers to (§2), with the real trainer's defects fixed compatibly: HALT saves a checkpoint first and
// stops every rank at the same step; SIGTERM/SIGINT checkpoint then exit; stack dumps never collide;
// resume continues the step count, schedule, optimizer and data position.
//
// The seams: rank/setup.ts (boot, resume), rank/signals.ts (stop signals, guarded waits),
// rank/injections.ts, rank/step-log.ts (what a log step writes, metrics.json), rank/persist.ts
// (checkpoints, eval), rank/watchdog.ts; this file is the step loop and how a run ends.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ActivityStack } from './activity.js';
import { CollectiveAborted, type Comm, type Reduced } from './comm.js';
import type { DataPosition } from './data.js';
import { clipGradNorm, lrAt } from './model-api.js';
import type { RunSpec } from './spec.js';
import { RankInjections } from './rank/injections.js';
import { Checkpoints, evaluate } from './rank/persist.js';
import { bootRank, out, type Rank } from './rank/setup.js';
import { signalExitCode, StopSignals } from './rank/signals.js';
import { StepLog, writeMetrics, type Ending } from './rank/step-log.js';
import { Watchdog } from './rank/watchdog.js';

export { windowOf } from './rank/setup.js';

// At least ms by the clock the step log reads: a timer can fire a fraction of a millisecond early by
// performance.now() (libuv rounds its loop time to whole ms), and slow-data@ms=M promises >= M.
const sleep = async (ms: number) => {
  const until = performance.now() + ms;
  for (let left = ms; left > 0; left = until - performance.now()) {
    await new Promise<void>((r) => setTimeout(r, Math.ceil(left)));
  }
};
const yieldToLoop = () => new Promise<void>((r) => setImmediate(r));

/**
 * Runs one rank to its end; returns the exit code. SIGUSR1 is answered by the caller's handler
 * (installed at process start, see dumps.ts) from `act`, which this loop keeps current.
 */
export async function runRank(spec: RunSpec, comm: Comm, act: ActivityStack = new ActivityStack()): Promise<number> {
  while (act.phase !== 'idle') act.exit(); // the early 'startup' entered at process start
  act.enter('startup');
  const signals = new StopSignals(comm.rank, comm.rank === 0 || comm.world === 1, out);
  signals.install();
  const r = await bootRank(spec, comm);
  const loop = new StepLoop(r, comm, act, signals);
  act.exit(); // startup
  // awaited here so that runRank stays on the stack a dump shows (the loop runs inside it)
  return await loop.run();
}

class StepLoop {
  private readonly inj: RankInjections;
  private readonly log: StepLog;
  private readonly ckpts: Checkpoints;
  private watchdog: Watchdog | null = null;
  private step: number;
  /** the data position at the start of the step in flight (what an abandoned step resumes from) */
  private boundaryPos: DataPosition;
  private lossFirst: number | null = null;
  private lossLast: number | null = null;
  private ending: Ending = 'completed';
  private exitCode = 0;

  constructor(
    private readonly r: Rank,
    private readonly comm: Comm,
    private readonly act: ActivityStack,
    private readonly signals: StopSignals,
  ) {
    this.inj = new RankInjections(r.spec.injections, r.rank, r.world, r.dir);
    this.log = new StepLog(r);
    this.ckpts = new Checkpoints(r, act);
    this.step = r.startStep;
    this.boundaryPos = { ...r.sampler.pos };
  }

  private save(atStep: number, pos: DataPosition, why: string): void {
    this.ckpts.save(atStep, pos, why, this.lossLast);
  }

  async run(): Promise<number> {
    const { r, inj } = this;
    this.watchdog = new Watchdog(r, this.act);
    this.log.startClock();
    if (inj.collapseFrom <= this.step + 1) r.model.setGateOverride('collapse');
    try {
      while (this.step < r.T.steps) if (!(await this.oneStep(this.step + 1))) break;
      if (this.ending === 'completed') this.save(this.step, { ...r.sampler.pos }, 'end of training');
    } catch (err) {
      if (!(err instanceof CollectiveAborted)) throw err;
      // A peer failed, the launcher went away, or a stop signal arrived while this rank was blocked:
      // the last completed step is consistent on every rank, so rank 0 keeps it.
      this.ending = 'aborted';
      process.stderr.write(`[train] rank ${r.rank}: collective abandoned at step ${this.step + 1}: ${err.message}\n`);
      this.save(this.step, this.boundaryPos, 'abandoned collective');
      this.exitCode = this.signals.signal ? signalExitCode(this.signals.signal) : 1;
    }
    this.watchdog.stop();
    this.signals.uninstall();
    // A crash elsewhere leaves what a real crash leaves: no metrics.json (graceful endings write it).
    if (this.ending !== 'aborted' || this.signals.signal)
      writeMetrics(r, { step: this.step, ending: this.ending, lossFirst: this.lossFirst, lossLast: this.lossLast });
    this.comm.close();
    return this.exitCode;
  }

  /** trains step `s`; false: the run ends here */
  private async oneStep(s: number): Promise<boolean> {
    const { r, act, inj } = this;
    act.step = s;
    this.boundaryPos = { ...r.sampler.pos };
    if (r.spec.heartbeatEvery) r.hb.write(s, 'beat', { phase: 'step_start' });
    inj.leak();
    if (inj.at('crash', s) && inj.firstTime('crash', s)) {
      process.stderr.write(`[inject] crash@step=${s}: rank ${r.rank} (pid ${process.pid}) exits with code 1\n`);
      throw new Error(`injected crash at step ${s} on rank ${r.rank}`);
    }
    if (s === inj.collapseFrom) r.model.setGateOverride('collapse');

    // fetch
    const tf = performance.now();
    const batch = await act.runAsync('fetch', async () => {
      // The step boundary's yield to the event loop (signal handlers run here) counts as the fetch.
      await yieldToLoop();
      if (inj.slowMs > 0) await sleep(inj.slowMs);
      return r.sampler.next();
    });
    const dtFetch = (performance.now() - tf) / 1000;
    this.log.fetched(dtFetch);

    const haltSeen = existsSync(join(r.dir, '.HALT'));

    // forward + backward
    const stats = act.run('forward', () => inj.slowed(() => r.model.forwardBackward(batch, r.share.count)));
    let loss = stats.loss;
    if (inj.at('nan', s)) loss = NaN;
    const nan = !Number.isFinite(loss);
    if (inj.at('hang', s) && inj.firstTime('hang', s)) await this.hang(s);

    const reduced = await this.allreduce(s, loss, nan, haltSeen);
    if (reduced.nan) {
      this.ending = 'nan';
      if (r.rank === 0) {
        out('[train][FATAL] non-finite loss detected — aborting run.');
        writeFileSync(join(r.dir, '.anomaly_type'), 'nan_loss\n');
        writeFileSync(join(r.dir, '.HALT'), 'halt: nan_loss\n');
      }
      return false;
    }

    // optimizer
    act.run('optimizer', () => {
      if (reduced.grads !== r.model.grads) r.model.grads.set(reduced.grads);
      clipGradNorm(r.model.grads, r.T.grad_clip);
      r.opt.step(r.model.params, r.model.grads, lrAt(s, r.sched));
    });
    this.step = s;
    this.watchdog?.advanced();
    this.log.trained(reduced.tokens);
    if (this.lossFirst === null) this.lossFirst = reduced.loss;
    this.lossLast = reduced.loss;

    if (this.log.logsAt(s)) {
      act.run('logging', () => this.log.write(s, reduced.loss, dtFetch, stats));
      evaluate(r, act, s);
    }
    return this.afterStep(s, reduced);
  }

  /** an injected hang: blocks as if in a collective until a stop signal abandons it */
  private async hang(s: number): Promise<void> {
    process.stderr.write(
      `[inject] hang@step=${s}: rank ${this.r.rank} (pid ${process.pid}) blocks as if in a collective\n`,
    );
    this.act.enter('injected-hang');
    const keepAlive = setInterval(() => {}, 1 << 30);
    try {
      await this.signals.guarded(new Promise<never>(() => {}), 0);
    } finally {
      clearInterval(keepAlive);
      this.act.exit();
    }
  }

  /** all-reduce (grads weighted by local batch; flags ORed) */
  private allreduce(s: number, loss: number, nan: boolean, haltSeen: boolean): Promise<Reduced> {
    const { r } = this;
    const world = r.world;
    if (world > 1) for (let i = 0; i < r.n; i++) r.model.grads[i]! *= r.share.count;
    return this.act.runAsync('allreduce-wait', () =>
      this.signals.guarded(
        this.comm.allreduce({
          step: s,
          grads: r.model.grads,
          weight: world > 1 ? r.share.count : 1,
          loss: nan ? NaN : loss,
          tokens: r.share.count * (r.window - 1),
          halt: haltSeen,
          stop: this.signals.signal !== null,
          nan,
        }),
        2000,
      ),
    );
  }

  /** checkpoints, and the endings every rank agreed on (HALT, a stop signal); false: the run ends */
  private afterStep(s: number, reduced: Reduced): boolean {
    const T = this.r.T;
    const posNow = { ...this.r.sampler.pos };
    if (T.save_every > 0 && s % T.save_every === 0) this.save(s, posNow, 'periodic');
    if (reduced.halt) {
      this.ending = 'halt';
      if (this.r.rank === 0) out('[train] HALT file detected — stopping gracefully.');
      this.save(s, posNow, 'halt');
      return false;
    }
    if (reduced.stop) {
      this.ending = 'signal';
      const sig = this.signals.signal;
      this.save(s, posNow, sig ?? 'stop');
      this.exitCode = signalExitCode(sig);
      return false;
    }
    return true;
  }
}
