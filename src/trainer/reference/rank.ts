// One rank of the reference trainer: the training loop and everything it writes (contract §1) and
// answers to (§2), with the real trainer's defects fixed compatibly: HALT saves a checkpoint first and
// stops every rank at the same step; SIGTERM/SIGINT checkpoint then exit; stack dumps never collide;
// resume continues the step count, schedule, optimizer and data position.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ActivityStack, writeWatchdogDump } from './activity.js';
import { TbWriter } from './tb-writer.js';
import { writeCheckpoint, readCheckpoint } from './checkpoint.js';
import { CollectiveAborted, type Comm, type Reduced } from './comm.js';
import { loadCorpus, LaneSampler, shareOf, valBatches, type DataPosition } from './data.js';
import { forRank, formatInjection } from './inject.js';
import { AdamW, clipGradNorm, createModel, lrAt, type Model, type StepStats } from './model-api.js';
import { modelConfigOf } from './model-config.js';
import type { RunSpec } from './spec.js';
import {
  FALLBACK_HEADER,
  Heartbeat,
  K_STATS_HEADER,
  appendWithHeader,
  envJson,
  quantile,
  stepLine,
  trainingCsvRow,
  valCsvRow,
  writeJson,
} from './writers.js';

/** Bytes per training sequence handed to the model (it predicts bytes 2..seq_len from their prefixes). */
export function windowOf(seqLen: number): number {
  return seqLen;
}

const SIGNUM: Record<string, number> = { SIGINT: 2, SIGTERM: 15 };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const yieldToLoop = () => new Promise<void>((r) => setImmediate(r));
const out = (line: string) => process.stdout.write(line + '\n');

type Ending = 'completed' | 'halt' | 'nan' | 'signal' | 'aborted';

/**
 * Runs one rank to its end; returns the exit code. SIGUSR1 is answered by the caller's handler
 * (installed at process start, see dumps.ts) from `act`, which this loop keeps current.
 */
export async function runRank(spec: RunSpec, comm: Comm, act: ActivityStack = new ActivityStack()): Promise<number> {
  const rank = comm.rank;
  const world = comm.world;
  const dir = spec.outDir;
  const cfg = spec.cfg;
  const T = cfg.train;
  while (act.phase !== 'idle') act.exit(); // the early 'startup' entered at process start
  act.enter('startup');

  // ---- signals
  let stopSignal: string | null = null;
  const stopListeners = new Set<() => void>();
  const onStop = (sig: NodeJS.Signals) => {
    if (stopSignal) {
      process.stderr.write(`[train] rank ${rank}: second ${sig} — exiting at once\n`);
      process.exit(128 + (SIGNUM[sig] ?? 15));
    }
    stopSignal = sig;
    if (rank === 0 || world === 1)
      out(`[train] ${sig} received — checkpointing at the end of this step, then exiting.`);
    for (const l of [...stopListeners]) l();
  };
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  // Waits that might never end (a hung peer, an injected hang) are guarded: once a stop signal has
  // arrived, give the wait a short grace, then abandon it.
  const guarded = async <X>(p: Promise<X>, graceMs: number): Promise<X> => {
    let timer: NodeJS.Timeout | undefined;
    let onStop: () => void = () => {};
    const intr = new Promise<never>((_, reject) => {
      onStop = () => {
        timer = setTimeout(() => reject(new CollectiveAborted(`${stopSignal} while waiting`, 'signal')), graceMs);
      };
      if (stopSignal) onStop();
      else stopListeners.add(onStop);
    });
    try {
      return await Promise.race([p, intr]);
    } finally {
      clearTimeout(timer);
      stopListeners.delete(onStop);
    }
  };

  // ---- boot
  out(`[boot] loading config ${spec.configPath}`);
  out(`[boot] effective config: S=${T.seq_len} B=${T.batch_size} accum=1 gc=off`);
  if (rank === 0) for (const n of spec.notes) out(n);
  writeJson(join(dir, 'env.json'), envJson(spec.configPath));
  if (world > 1 && rank === 0)
    out(
      `[ddp] process group ready | backend=ipc world_size=${world} timeout_min=${Number(process.env.NSA_PG_TIMEOUT_MIN ?? 15)}`,
    );

  const model: Model = await createModel(modelConfigOf(spec.cfg), { seed: T.seed, kernels: spec.kernels });
  const n = model.params.length;
  if (rank === 0) out(`[train] reference NSA model: ${n.toLocaleString('en-US')} parameters, kernels=${model.kernels}`);
  const hb = new Heartbeat(dir, rank);
  hb.write(0, 'boot', { phase: 'start' });

  const corpus = loadCorpus(spec.dataPath, cfg.data.val_fraction, spec.datasetName);
  const window = windowOf(T.seq_len);
  const share = shareOf(T.batch_size, world, rank);
  const sampler = new LaneSampler(corpus.train, T.batch_size, window, window - 1, share.start, share.count);
  out(`[train] dataset=${corpus.name} tokenizer=byte`);
  if (rank === 0) out('[train] gradient_checkpointing=off');
  if (rank === 0 && spec.dataPath && spec.datasetName !== 'pride-and-prejudice')
    out(`[train] reading local dataset: ${spec.dataPath}`);

  const decayMask = new Uint8Array(n);
  for (const l of model.layout) if (l.decay) decayMask.fill(1, l.offset, l.offset + l.size);
  const opt = new AdamW(n, { weightDecay: T.weight_decay, decayMask });
  const sched = { lr: T.lr, warmupSteps: T.warmup_steps, totalSteps: T.steps, minLr: T.min_lr };

  let step = 0;
  if (spec.resumePath) {
    const ck = await readCheckpoint(spec.resumePath);
    if (ck.header.n_params !== n)
      throw new Error(`checkpoint ${spec.resumePath} has ${ck.header.n_params} parameters; the model has ${n}`);
    model.params.set(ck.params);
    opt.importState({ t: ck.header.optimizer.t, m: ck.m, v: ck.v });
    step = ck.header.step;
    if (ck.header.data.lanes === T.batch_size && ck.header.data.train_bytes === corpus.train.length)
      sampler.pos = { cursor: ck.header.data.cursor, epoch: ck.header.data.epoch };
    else if (rank === 0)
      out(
        '[train] note: the global batch or the data changed since the checkpoint; data restarts at the beginning of the corpus',
      );
    out(`[train] resumed from ${spec.resumePath}`);
  }
  const startStep = step;

  const inj = forRank(spec.injections, rank);
  if (inj.length && (rank === 0 || world === 1 || inj.some((i) => i.rank === rank)))
    process.stderr.write(`[inject] rank ${rank}: ${inj.map(formatInjection).join(' ')}\n`);
  // The real trainer's switches (contract §3.10): NSA_DISABLE_CSV_LOGS, NSA_DISABLE_AUX_STATS.
  const envOn = (k: string) => ['1', 'true', 'yes'].includes((process.env[k] ?? '').toLowerCase());
  const csvLogs = !envOn('NSA_DISABLE_CSV_LOGS');
  const auxStats = !envOn('NSA_DISABLE_AUX_STATS');
  const tb = rank === 0 && !envOn('NSA_TB_DISABLE') ? new TbWriter(dir) : null;
  if (tb) out(`[train] tensorboard logdir: ${join(dir, 'tb')}`);
  const slowMs = inj.reduce((a, i) => a + (i.kind === 'slow-data' ? i.ms : 0), 0);
  const leakMb = inj.reduce((a, i) => a + (i.kind === 'leak' ? i.mb : 0), 0);
  const at = (kind: string, s: number) => inj.some((i) => 'step' in i && i.kind === kind && i.step === s);
  const collapseFrom = Math.min(
    ...inj.filter((i) => i.kind === 'gate-collapse').map((i) => (i as { step: number }).step),
  );
  const leaked: Buffer[] = [];
  // crash and hang fire once per run dir: a supervisor's restart resumes past them, so a drill shows
  // the recovery instead of the same failure again (.nsa-top-injected records what has fired).
  const firedPath = join(dir, '.nsa-top-injected');
  const firstTime = (kind: string, s: number): boolean => {
    const key = `${kind}@step=${s} rank=${rank}`;
    let fired = '';
    try {
      fired = readFileSync(firedPath, 'utf8');
    } catch {
      /* none yet */
    }
    if (fired.split('\n').includes(key)) {
      process.stderr.write(`[inject] ${kind}@step=${s} already fired on rank ${rank} in this run dir; skipped\n`);
      return false;
    }
    appendFileSync(firedPath, key + '\n');
    return true;
  };

  // ---- state for logging
  const fetchMs: number[] = [];
  let lastLogTime = performance.now();
  let tokensSinceLog = 0;
  let lossFirst: number | null = null;
  let lossLast: number | null = null;
  let optStateWritten = false;
  let lastSavedStep = spec.resumePath ? step : -1;
  let boundaryPos: DataPosition = { ...sampler.pos };
  let lastStats: StepStats | null = null;
  let ending: Ending = 'completed';
  let exitCode = 0;

  const save = (atStep: number, pos: DataPosition, why: string): void => {
    if (rank !== 0 || atStep === lastSavedStep || atStep <= 0) return;
    act.run('checkpoint', () => {
      const st = opt.exportState();
      let p: string;
      try {
        p = writeCheckpoint(dir, {
          header: {
            format: 'nsa-top-reference-checkpoint',
            version: 1,
            step: atStep,
            time: new Date().toISOString(),
            config: cfg,
            world_size: world,
            data: {
              cursor: pos.cursor,
              epoch: pos.epoch,
              lanes: T.batch_size,
              train_bytes: corpus.train.length,
              source: corpus.source,
            },
            rng: { seed: T.seed },
            optimizer: { kind: 'adamw', t: st.t },
            n_params: n,
            layout: model.layout.map((l) => ({ ...l })),
            sections: ['params', 'adam_m', 'adam_v'],
            loss_last: lossLast,
          },
          params: model.params,
          m: st.m,
          v: st.v,
        });
      } catch (err) {
        // Like the real trainer, a failed save does not stop training; unlike it, it says so loudly.
        process.stderr.write(`[train] checkpoint at step ${atStep} FAILED (${why}): ${(err as Error).message}\n`);
        return;
      }
      if (why !== 'periodic') out(`[train] checkpoint saved: ${p} (${why})`);
      lastSavedStep = atStep;
    });
  };

  const writeMetrics = (): void => {
    if (rank !== 0) return;
    const metrics = {
      device: 'cpu',
      dtype: 'float32',
      steps: T.steps,
      seq_len: T.seq_len,
      batch_global: T.batch_size,
      lr: T.lr,
      loss_first: lossFirst,
      loss_last: lossLast,
      trainer: 'nsa-top-reference',
      last_step: step,
      ended: ending,
    };
    writeJson(join(dir, 'metrics.json'), metrics);
    out(JSON.stringify(metrics, null, 2));
  };

  act.exit(); // startup

  // The in-process watchdog (contract §1.12), done right: it watches this rank's step progress, not
  // its heartbeat writes, so ranks >= 1 and long log intervals raise no false alarms; a rank stuck
  // for > 180 s (NSA_TOP_WATCHDOG_STALL_S) writes watchdog_stackdump_* and a watchdog_dump record,
  // checked every 30 s (NSA_TOP_WATCHDOG_POLL_S), again every stall interval while it lasts.
  const stallS = Number(process.env.NSA_TOP_WATCHDOG_STALL_S ?? 180);
  const pollS = Number(process.env.NSA_TOP_WATCHDOG_POLL_S ?? 30);
  let lastAdvance = Date.now() / 1000;
  const watchdog = setInterval(
    () => {
      const now = Date.now() / 1000;
      if (now - lastAdvance <= stallS) return;
      try {
        const p = writeWatchdogDump(dir, rank, act, lastAdvance);
        hb.write(0, 'watchdog_dump', { path: p });
        process.stderr.write(
          `[watchdog] rank ${rank}: no step for ${(now - lastAdvance).toFixed(0)} s — dumped ${p}\n`,
        );
      } catch (err) {
        process.stderr.write(`[watchdog] rank ${rank}: dump failed: ${(err as Error).message}\n`);
      }
      lastAdvance = now;
    },
    Math.max(0.05, pollS) * 1000,
  );
  watchdog.unref();
  const t0 = performance.now();
  lastLogTime = t0;
  if (collapseFrom <= step + 1) model.setGateOverride('collapse');

  try {
    while (step < T.steps) {
      const s = step + 1;
      act.step = s;
      boundaryPos = { ...sampler.pos };
      if (spec.heartbeatEvery) hb.write(s, 'beat', { phase: 'step_start' });
      if (leakMb > 0) leaked.push(Buffer.alloc(Math.round(leakMb * 1024 * 1024), 1));
      if (at('crash', s) && firstTime('crash', s)) {
        process.stderr.write(`[inject] crash@step=${s}: rank ${rank} (pid ${process.pid}) exits with code 1\n`);
        throw new Error(`injected crash at step ${s} on rank ${rank}`);
      }
      if (s === collapseFrom) model.setGateOverride('collapse');

      // fetch
      const tf = performance.now();
      const batch = await act.runAsync('fetch', async () => {
        // The step boundary's yield to the event loop (signal handlers run here) counts as the fetch.
        await yieldToLoop();
        if (slowMs > 0) await sleep(slowMs);
        return sampler.next();
      });
      const dtFetch = (performance.now() - tf) / 1000;
      fetchMs.push(dtFetch * 1000);
      if (fetchMs.length > 200) fetchMs.shift();

      const haltSeen = existsSync(join(dir, '.HALT'));

      // forward + backward
      const stats = act.run('forward', () => model.forwardBackward(batch, share.count));
      let loss = stats.loss;
      if (at('nan', s)) loss = NaN;
      const nan = !Number.isFinite(loss);

      if (at('hang', s) && firstTime('hang', s)) {
        process.stderr.write(
          `[inject] hang@step=${s}: rank ${rank} (pid ${process.pid}) blocks as if in a collective\n`,
        );
        act.enter('injected-hang');
        const keepAlive = setInterval(() => {}, 1 << 30);
        try {
          await guarded(new Promise<never>(() => {}), 0);
        } finally {
          clearInterval(keepAlive);
          act.exit();
        }
      }

      // all-reduce (grads weighted by local batch; flags ORed)
      if (world > 1) for (let i = 0; i < n; i++) model.grads[i]! *= share.count;
      const reduced: Reduced = await act.runAsync('allreduce-wait', () =>
        guarded(
          comm.allreduce({
            step: s,
            grads: model.grads,
            weight: world > 1 ? share.count : 1,
            loss: nan ? NaN : loss,
            tokens: share.count * (window - 1),
            halt: haltSeen,
            stop: stopSignal !== null,
            nan,
          }),
          2000,
        ),
      );

      if (reduced.nan) {
        ending = 'nan';
        if (rank === 0) {
          out('[train][FATAL] non-finite loss detected — aborting run.');
          writeFileSync(join(dir, '.anomaly_type'), 'nan_loss\n');
          writeFileSync(join(dir, '.HALT'), 'halt: nan_loss\n');
        }
        break;
      }

      // optimizer
      act.run('optimizer', () => {
        if (reduced.grads !== model.grads) model.grads.set(reduced.grads);
        clipGradNorm(model.grads, T.grad_clip);
        opt.step(model.params, model.grads, lrAt(s, sched));
      });
      step = s;
      lastAdvance = Date.now() / 1000;
      lastStats = stats;
      tokensSinceLog += reduced.tokens;
      if (lossFirst === null) lossFirst = reduced.loss;
      lossLast = reduced.loss;

      // log step
      if (s === 1 || s % T.log_every === 0 || s === startStep + 1) {
        act.run('logging', () => {
          const now = performance.now();
          const tps = tokensSinceLog / Math.max(1e-9, (now - lastLogTime) / 1000);
          tokensSinceLog = 0;
          lastLogTime = now;
          if (rank !== 0) return;
          const lrNext = lrAt(s + 1, sched);
          const p50 = fetchMs.length >= 20 ? quantile(fetchMs, 0.5) : null;
          const p95 = fetchMs.length >= 20 ? quantile(fetchMs, 0.95) : null;
          out(stepLine(s, reduced.loss, lrNext, tps, dtFetch * 1000, p50, p95));
          const g = lastStats!.gate;
          const sel = lastStats!.sel;
          const aux = auxStats
            ? {
                gate_entropy_mean: g.entropyMean,
                gate_entropy_min: g.entropyMin,
                gate_max_gate: g.maxGate,
                gate_collapse_frac: g.collapseFrac,
                gate_branch_shares: g.branchShares,
                fb_selection_triton_fails: 0,
                fb_selection_cuda_fails: 0,
                fb_selection_pack_fails: 0,
                fb_selection_mask_fails: 0,
                fb_compressed_fa2_fails: 0,
                fb_sliding_fa2_fails: 0,
                fb_total_fallbacks: 0,
                sel_k_mean: sel.kMean,
                sel_k_max: sel.kMax,
                sel_rows: sel.rows,
                sel_pct_at_max: sel.pctAtMax,
              }
            : {};
          hb.write(s, 'progress', {
            loss: reduced.loss,
            toks_per_s: tps,
            dt_fetch_s: dtFetch,
            ...(p50 !== null ? { fetch_p50_ms: p50, fetch_p95_ms: p95 } : {}),
            ...aux,
            rss_mib: Math.round(process.memoryUsage.rss() / 2 ** 20),
          });
          hb.write(s, 'step_end', { phase: 'end' });
          tb?.scalars(s, [
            { tag: 'train/loss', value: reduced.loss },
            { tag: 'train/toks_per_s', value: tps },
            { tag: 'train/lr', value: lrNext },
          ]);
          if (csvLogs) {
            appendFileSync(join(dir, 'training.csv'), trainingCsvRow(s, reduced.loss, lrNext, tps));
            if (auxStats) {
              appendWithHeader(
                join(dir, 'k_stats.csv'),
                K_STATS_HEADER,
                `${s},${sel.kMean.toFixed(4)},${Math.round(sel.kMax)},${Math.round(sel.rows)},${sel.pctAtMax.toFixed(4)}\n`,
              );
              appendWithHeader(join(dir, 'fallback_counters.csv'), FALLBACK_HEADER, `${s},0,0,0,0,0,0,0\n`);
            }
          }
          if (!optStateWritten) {
            writeFileSync(join(dir, 'opt_state_mb.txt'), `${((2 * n * 4) / 2 ** 20).toFixed(2)}\n`);
            optStateWritten = true;
          }
        });
        if (rank === 0 && T.eval_every > 0 && s % T.eval_every === 0) {
          act.run('eval', () => {
            const vb = valBatches(corpus.val, window, Math.min(T.batch_size, 8), 4);
            if (vb.length === 0) return;
            let sum = 0;
            for (const b of vb) sum += model.forward(b, b.length / window).loss;
            const vl = sum / vb.length;
            if (Number.isFinite(vl)) appendFileSync(join(dir, 'val.csv'), valCsvRow(s, vl));
          });
        }
      }

      // checkpoint
      const posNow = { ...sampler.pos };
      if (T.save_every > 0 && s % T.save_every === 0) save(s, posNow, 'periodic');
      if (reduced.halt) {
        ending = 'halt';
        if (rank === 0) out('[train] HALT file detected — stopping gracefully.');
        save(s, posNow, 'halt');
        break;
      }
      if (reduced.stop) {
        ending = 'signal';
        save(s, posNow, stopSignal ?? 'stop');
        exitCode = 128 + (SIGNUM[stopSignal ?? 'SIGTERM'] ?? 15);
        break;
      }
    }
    if (ending === 'completed') save(step, { ...sampler.pos }, 'end of training');
  } catch (err) {
    if (!(err instanceof CollectiveAborted)) throw err;
    // A peer failed, the launcher went away, or a stop signal arrived while this rank was blocked:
    // the last completed step is consistent on every rank, so rank 0 keeps it.
    ending = 'aborted';
    process.stderr.write(`[train] rank ${rank}: collective abandoned at step ${step + 1}: ${err.message}\n`);
    save(step, boundaryPos, 'abandoned collective');
    exitCode = stopSignal ? 128 + (SIGNUM[stopSignal] ?? 15) : 1;
  }
  clearInterval(watchdog);
  process.off('SIGTERM', onStop);
  process.off('SIGINT', onStop);
  // A crash elsewhere leaves what a real crash leaves: no metrics.json (graceful endings write it).
  if (ending !== 'aborted' || stopSignal) writeMetrics();
  comm.close();
  return exitCode;
}
