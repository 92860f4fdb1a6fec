// Writers for the contract's text artifacts (contract §1): heartbeat JSONL, the header-less CSVs,
// env.json, metrics.json, and the stdout step line. Formats follow the real trainer's exactly.
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Seconds since the epoch with microsecond digits (like Python's time.time()). */
export function nowEpoch(): number {
  return (performance.timeOrigin + performance.now()) / 1000;
}

/** Naive UTC ISO-8601 with 6 fractional digits and a Z: 2025-08-31T02:28:06.123456Z */
export function isoMicros(epochS: number): string {
  const ms = Math.floor(epochS * 1000);
  const micros = Math.floor((epochS * 1e6) % 1000);
  const base = new Date(ms).toISOString(); // ...SS.mmmZ
  return `${base.slice(0, 23)}${String(micros).padStart(3, '0')}Z`;
}

/** JSON with Python's json.dumps separators (", " and ": "), one line. */
export function pyJson(obj: Record<string, unknown>): string {
  const val = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(val).join(', ')}]`;
    if (v !== null && typeof v === 'object') return pyJson(v as Record<string, unknown>);
    if (typeof v === 'number' && !Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
    return JSON.stringify(v);
  };
  return `{${Object.entries(obj)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}: ${val(v)}`)
    .join(', ')}}`;
}

export class Heartbeat {
  readonly path: string;
  constructor(
    dir: string,
    private readonly rank: number,
  ) {
    this.path = join(dir, `heartbeat_rank${rank}.jsonl`);
  }
  write(step: number, msg: string, extra: Record<string, unknown> = {}): void {
    const ts = nowEpoch();
    const rec = { ts, iso: isoMicros(ts), pid: process.pid, rank: this.rank, step, msg, ...extra };
    appendFileSync(this.path, pyJson(rec) + '\n');
  }
}

/** `%.6e` the way C/Python print it: 2.992615e-04 */
export function fmtExp(x: number, digits: number): string {
  if (!Number.isFinite(x)) return String(x).toLowerCase();
  const s = x.toExponential(digits); // 2.992615e-4
  const m = /^(-?[\d.]+)e([+-])(\d+)$/.exec(s);
  if (!m) return s;
  return `${m[1]}e${m[2]}${m[3]!.padStart(2, '0')}`;
}

/** Python's %.0f / round-half-even is close enough with toFixed for our purposes. */
export function fmtFixed(x: number, digits: number): string {
  return x.toFixed(digits);
}

export function trainingCsvRow(step: number, loss: number, lr: number, toksPerS: number): string {
  return `${step},${fmtFixed(loss, 6)},${fmtExp(lr, 6)},${fmtFixed(toksPerS, 0)}\n`;
}

export function valCsvRow(step: number, valLoss: number): string {
  return `${step},${fmtFixed(valLoss, 6)},${fmtFixed(Math.exp(valLoss), 6)}\n`;
}

export const K_STATS_HEADER = 'step,k_mean,k_max,rows,pct_at_max\n';
export const FALLBACK_HEADER =
  'step,selection_triton_fails,selection_cuda_fails,selection_pack_fails,selection_mask_fails,compressed_fa2_fails,sliding_fa2_fails,total_fallbacks\n';

/** Appends a row to a CSV, writing the header first when the file is new (k_stats, fallback_counters). */
export function appendWithHeader(path: string, header: string, row: string): void {
  if (!existsSync(path)) appendFileSync(path, header);
  appendFileSync(path, row);
}

export function stepLine(
  step: number,
  loss: number,
  lr: number,
  tps: number,
  fetchMs: number | null,
  p50: number | null,
  p95: number | null,
): string {
  let s = `step ${String(step).padStart(4, '0')} | loss ${loss.toFixed(4)} | lr ${fmtExp(lr, 2)} | toks/s ${tps.toFixed(0)}`;
  if (fetchMs !== null) s += ` | fetch ${fetchMs.toFixed(0)}ms`;
  if (p50 !== null && p95 !== null) s += ` | fetch_p50 ${p50.toFixed(0)}ms | fetch_p95 ${p95.toFixed(0)}ms`;
  return s;
}

export function writeJson(path: string, obj: unknown): void {
  writeFileSync(path, JSON.stringify(obj, null, 2) + '\n');
}

export function envJson(configPath: string | null): Record<string, unknown> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (k.startsWith('NSA_') || k === 'WORLD_SIZE' || k === 'RANK' || k === 'LOCAL_RANK' || k === 'CONFIG') env[k] = v;
  }
  if (configPath && env.CONFIG === undefined) env.CONFIG = configPath;
  return {
    time: isoMicros(nowEpoch()),
    python: `node ${process.version}`,
    // No torch here. The key is left out rather than null: the cockpit's env.json reader
    // (readers/jsonfiles.ts) takes torch as an optional string and would reject the whole file.
    cuda_available: false,
    cuda_device_count: 0,
    env,
    trainer: 'nsa-top-reference',
  };
}

/** p-quantile (0..1) of a numeric sample, nearest-rank on a sorted copy. */
export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const idx = Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))));
  return s[idx]!;
}
