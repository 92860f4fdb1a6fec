// Writers for the contract's text artifacts (contract §1): heartbeat JSONL, the header-less CSVs,
// env.json, metrics.json, and the stdout step line. Formats follow the real trainer's exactly.
import { appendFileSync, closeSync, existsSync, fstatSync, openSync, readSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

// A log write on a full disk skips the line instead of ending the run (a full disk must not kill a
// training run over a heartbeat or a CSV row): the lines skipped are counted, the first one is said
// once on stderr, and the count when the rank ends. Any other write error still throws.
let skippedLines = 0;
const FULL = new Set(['ENOSPC', 'EDQUOT']);
/** files a skipped write may have left with part of a line */
const torn = new Set<string>();

function endsWithNewline(path: string): boolean {
  let fd: number | null = null;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    if (size === 0) return true;
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, size - 1);
    return b[0] === 0x0a;
  } catch {
    return true;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** log lines skipped so far on a full disk */
export function skippedLogLines(): number {
  return skippedLines;
}

/** Appends one log line (or frame) to `path`; on a full disk skips it (counted) and returns false. */
export function appendLog(path: string, data: string | Buffer): boolean {
  try {
    // a line cut short by the full disk is ended first, so the next one is not glued to it
    const mend = typeof data === 'string' && torn.delete(path) && !endsWithNewline(path);
    appendFileSync(path, mend ? `\n${data}` : data);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (!FULL.has(code)) throw e;
    torn.add(path);
    if (skippedLines++ === 0) {
      process.stderr.write(
        `[train] pid ${process.pid}: ${code} writing ${basename(path)}: the disk is full — log lines are skipped (and counted) while it stays full; training goes on\n`,
      );
      process.once('exit', () => {
        process.stderr.write(`[train] pid ${process.pid}: ${skippedLines} log line(s) skipped on a full disk\n`);
      });
    }
    return false;
  }
}

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
    appendLog(this.path, pyJson(rec) + '\n');
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
  if (!existsSync(path) && !appendLog(path, header)) return;
  appendLog(path, row);
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
