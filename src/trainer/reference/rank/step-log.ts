// What a rank writes at a log step (contract §1): the stdout step line, the heartbeat progress and
// step_end records, TensorBoard scalars, training.csv and the aux CSVs, opt_state_mb.txt; and
// metrics.json at the end. Only rank 0 writes; every rank keeps its tokens/s clock.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lrAt, type StepStats } from '../model-api.js';
import { TbWriter } from '../tb-writer.js';
import {
  FALLBACK_HEADER,
  K_STATS_HEADER,
  appendLog,
  appendWithHeader,
  quantile,
  stepLine,
  trainingCsvRow,
  writeJson,
} from '../writers.js';
import { out, type Rank } from './setup.js';

// The real trainer's switches (contract §3.10): NSA_DISABLE_CSV_LOGS, NSA_DISABLE_AUX_STATS.
const envOn = (k: string): boolean => ['1', 'true', 'yes'].includes((process.env[k] ?? '').toLowerCase());

export class StepLog {
  private readonly fetchMs: number[] = [];
  private lastLogTime = performance.now();
  private tokensSinceLog = 0;
  private optStateWritten = false;
  private readonly csvLogs = !envOn('NSA_DISABLE_CSV_LOGS');
  private readonly auxStats = !envOn('NSA_DISABLE_AUX_STATS');
  private readonly tb: TbWriter | null;

  constructor(private readonly r: Rank) {
    this.tb = r.rank === 0 && !envOn('NSA_TB_DISABLE') ? new TbWriter(r.dir) : null;
    if (this.tb) out(`[train] tensorboard logdir: ${join(r.dir, 'tb')}`);
  }

  /** the tokens/s clock starts now (training begins) */
  startClock(): void {
    this.lastLogTime = performance.now();
  }

  fetched(dtFetchS: number): void {
    this.fetchMs.push(dtFetchS * 1000);
    if (this.fetchMs.length > 200) this.fetchMs.shift();
  }

  trained(tokens: number): void {
    this.tokensSinceLog += tokens;
  }

  /** the steps that log: the first, every log_every, and the first after a resume */
  logsAt(s: number): boolean {
    return s === 1 || s % this.r.T.log_every === 0 || s === this.r.startStep + 1;
  }

  write(s: number, loss: number, dtFetch: number, stats: StepStats): void {
    const now = performance.now();
    const tps = this.tokensSinceLog / Math.max(1e-9, (now - this.lastLogTime) / 1000);
    this.tokensSinceLog = 0;
    this.lastLogTime = now;
    const { rank, dir, sched, hb, n } = this.r;
    if (rank !== 0) return;
    const lrNext = lrAt(s + 1, sched);
    const fetchMs = this.fetchMs;
    const p50 = fetchMs.length >= 20 ? quantile(fetchMs, 0.5) : null;
    const p95 = fetchMs.length >= 20 ? quantile(fetchMs, 0.95) : null;
    out(stepLine(s, loss, lrNext, tps, dtFetch * 1000, p50, p95));
    const g = stats.gate;
    const sel = stats.sel;
    const aux = this.auxStats
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
      loss,
      toks_per_s: tps,
      dt_fetch_s: dtFetch,
      ...(p50 !== null ? { fetch_p50_ms: p50, fetch_p95_ms: p95 } : {}),
      ...aux,
      rss_mib: Math.round(process.memoryUsage.rss() / 2 ** 20),
    });
    hb.write(s, 'step_end', { phase: 'end' });
    this.tb?.scalars(s, [
      { tag: 'train/loss', value: loss },
      { tag: 'train/toks_per_s', value: tps },
      { tag: 'train/lr', value: lrNext },
    ]);
    if (this.csvLogs) {
      appendLog(join(dir, 'training.csv'), trainingCsvRow(s, loss, lrNext, tps));
      if (this.auxStats) {
        appendWithHeader(
          join(dir, 'k_stats.csv'),
          K_STATS_HEADER,
          `${s},${sel.kMean.toFixed(4)},${Math.round(sel.kMax)},${Math.round(sel.rows)},${sel.pctAtMax.toFixed(4)}\n`,
        );
        appendWithHeader(join(dir, 'fallback_counters.csv'), FALLBACK_HEADER, `${s},0,0,0,0,0,0,0\n`);
      }
    }
    if (!this.optStateWritten) {
      writeFileSync(join(dir, 'opt_state_mb.txt'), `${((2 * n * 4) / 2 ** 20).toFixed(2)}\n`);
      this.optStateWritten = true;
    }
  }
}

export type Ending = 'completed' | 'halt' | 'nan' | 'signal' | 'aborted';

/** metrics.json and its stdout echo (rank 0) */
export function writeMetrics(
  r: Rank,
  end: { step: number; ending: Ending; lossFirst: number | null; lossLast: number | null },
): void {
  if (r.rank !== 0) return;
  const T = r.T;
  const metrics = {
    device: 'cpu',
    dtype: 'float32',
    steps: T.steps,
    seq_len: T.seq_len,
    batch_global: T.batch_size,
    lr: T.lr,
    loss_first: end.lossFirst,
    loss_last: end.lossLast,
    trainer: 'nsa-top-reference',
    last_step: end.step,
    ended: end.ending,
  };
  writeJson(join(r.dir, 'metrics.json'), metrics);
  out(JSON.stringify(metrics, null, 2));
}
