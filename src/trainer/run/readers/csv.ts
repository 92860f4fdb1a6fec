// The trainer's CSV files. training.csv / val.csv have no header (tolerated when present, also
// mid-file) and positional columns; extra columns are ignored. Resume appends to the same file
// and restarts at step 1: steps going backwards start a new segment.
import type { Segment } from '../snapshot.js';
import { parseIntCell, parseNumCell, parseNumSpan } from './num.js';
import { SeriesAcc, type SeriesOptions } from './series.js';

export type CsvRow = { step: number; values: (number | null)[] };

/** what parseCsvRow returns for a header line */
const HEADER = -1;

/**
 * One CSV line → step + numeric cells (first `n` after the step). `header` when it looks like a
 * header (first cell not a number, e.g. "step"); an error string when malformed.
 */
export function parseCsvLine(text: string, n: number): { row: CsvRow } | { header: true } | { error: string } {
  const values: (number | null)[] = [];
  const r = parseCsvRow(text, n, values);
  if (r === HEADER) return { header: true };
  if (typeof r === 'string') return { error: r };
  return { row: { step: r, values } };
}

/** comma positions of the row being parsed (reused) */
const commas: number[] = [];

/**
 * parseCsvLine without its objects (a training.csv holds a row per step: millions on a long run):
 * the `n` cells after the step go into `out`; returns the step, HEADER, or the error. The cells
 * are the text between commas, as `text.split(',')` gives them, found by indexOf and read in
 * place (parseNumSpan).
 */
function parseCsvRow(text: string, n: number, out: (number | null)[]): number | string {
  const c1 = text.indexOf(',');
  const end0 = c1 === -1 ? text.length : c1;
  // a header's first cell starts with a letter or _ (optionally quoted): never with a digit
  const f0 = text.charCodeAt(0);
  let step: number | null;
  if (f0 >= 48 && f0 <= 57) {
    step = parseNumSpan(text, 0, end0);
    if (step !== null && !(Number.isInteger(step) && step >= 0)) step = null;
  } else {
    const first = text.slice(0, end0).trim();
    if (/^["']?[A-Za-z_]/.test(first) && parseNumCell(first) === null) return HEADER;
    step = parseIntCell(first);
  }
  if (step === null) return `bad step ${JSON.stringify(text.slice(0, end0).trim().slice(0, 40))}`;
  let cells = 1;
  for (let at = c1; at !== -1 && cells < n + 1; at = text.indexOf(',', at + 1)) commas[cells++ - 1] = at;
  if (cells < n + 1) return `expected ${n + 1} columns, got ${cells}`;
  for (let i = 1; i <= n; i++) {
    const from = commas[i - 1]! + 1;
    const next = i < n ? commas[i]! : text.indexOf(',', from);
    const to = next === -1 ? text.length : next;
    const v = parseNumSpan(text, from, to);
    if (v === null) return `column ${i + 1} not a number: ${JSON.stringify(text.slice(from, to).trim().slice(0, 40))}`;
    out[i - 1] = v;
  }
  return step;
}

/** segments kept per stream (the newest; a run restarted thousands of times keeps memory bounded) */
const MAX_SEGMENTS = 1000;

/** Tracks segments of a step-keyed append-only stream (steps going backwards → new segment). */
export class StepSegments {
  readonly segments: Segment[] = [];
  lastStep: number | null = null;
  private pendingCause: Segment['cause'] | null = null;

  get index(): number {
    return this.segments.length ? this.segments[this.segments.length - 1]!.index : 0;
  }

  observe(step: number, ts: number | null): number {
    let cause: Segment['cause'] | null = null;
    if (this.segments.length === 0) cause = 'start';
    else if (this.pendingCause) cause = this.pendingCause;
    else if (this.lastStep !== null && step < this.lastStep) cause = 'step-backwards';
    if (cause) {
      const index = this.segments.length ? this.segments[this.segments.length - 1]!.index + 1 : 0;
      this.segments.push({ index, firstStep: step, lastStep: step, startTs: ts, pid: null, cause });
      if (this.segments.length > MAX_SEGMENTS) this.segments.splice(0, this.segments.length - MAX_SEGMENTS);
      this.pendingCause = null;
    }
    const seg = this.segments[this.segments.length - 1]!;
    if (step > seg.lastStep) seg.lastStep = step;
    this.lastStep = step;
    return seg.index;
  }

  /**
   * Put `older` (segments of the rows before ours) in front; returns how far our segment indices
   * moved. Our first segment continues older's last unless steps went backwards across the seam.
   */
  prepend(older: StepSegments): number {
    if (older.segments.length === 0) return 0;
    const merged = older.segments.map((x) => ({ ...x }));
    const mine = this.segments[0];
    const oLast = merged[merged.length - 1]!;
    const continuation = !mine || (older.lastStep !== null && mine.firstStep >= older.lastStep);
    const shift = continuation ? oLast.index : oLast.index + 1;
    if (mine) {
      if (continuation) {
        if (mine.lastStep > oLast.lastStep) oLast.lastStep = mine.lastStep;
      } else mine.cause = 'step-backwards';
      for (const x of continuation ? this.segments.slice(1) : this.segments)
        merged.push({ ...x, index: x.index + shift });
    }
    if (merged.length > MAX_SEGMENTS) merged.splice(0, merged.length - MAX_SEGMENTS);
    this.segments.length = 0;
    this.segments.push(...merged);
    if (this.lastStep === null) this.lastStep = older.lastStep;
    return shift;
  }

  /** the file was truncated or replaced: the next row opens a new segment */
  markReset(cause: Segment['cause']): void {
    if (this.segments.length) this.pendingCause = cause;
  }
}

export interface CsvRowSink {
  /** returns an error string to count the line as bad */
  line(text: string, mtimeMs: number | null): string | null;
}

/** training.csv / training_fsdp.csv: step,loss,lr,toks_per_s */
export class TrainingCsv implements CsvRowSink {
  readonly seg = new StepSegments();
  readonly loss: SeriesAcc;
  readonly lr: SeriesAcc;
  readonly toksPerS: SeriesAcc;
  headers = 0;
  last: { step: number; loss: number; lr: number; toksPerS: number; segment: number } | null = null;
  /** mtime of the file when the last row was read (the CSV carries no time) */
  lastRowSeenMtime: number | null = null;
  /** one row's cells, reused */
  private readonly cells: (number | null)[] = [0, 0, 0];

  constructor(opts: SeriesOptions) {
    this.loss = new SeriesAcc(opts);
    this.lr = new SeriesAcc(opts);
    this.toksPerS = new SeriesAcc(opts);
  }

  line(text: string, mtimeMs: number | null): string | null {
    const cells = this.cells;
    const step = parseCsvRow(text, 3, cells);
    if (step === HEADER) {
      this.headers++;
      return null;
    }
    if (typeof step === 'string') return step;
    // by index: array destructuring runs the iterator protocol until V8 optimises the caller
    const loss = cells[0]!;
    const lr = cells[1]!;
    const toks = cells[2]!;
    const s = this.seg.observe(step, null);
    this.loss.push(step, null, loss, s);
    this.lr.push(step, null, lr, s);
    this.toksPerS.push(step, null, toks, s);
    this.last = { step, loss, lr, toksPerS: toks, segment: s };
    this.lastRowSeenMtime = mtimeMs;
    return null;
  }

  /** Merge rows read later from before where this state started (huge file read tail first). */
  mergeHistory(h: TrainingCsv): void {
    const shift = this.seg.prepend(h.seg);
    this.loss.prependHistory(h.loss, shift);
    this.lr.prependHistory(h.lr, shift);
    this.toksPerS.prependHistory(h.toksPerS, shift);
    this.headers += h.headers;
    this.last ??= h.last;
  }
}

/** val.csv: step,val_loss,ppl */
export class ValCsv implements CsvRowSink {
  readonly seg = new StepSegments();
  readonly valLoss: SeriesAcc;
  last: { step: number; valLoss: number; ppl: number } | null = null;

  constructor(opts: SeriesOptions) {
    this.valLoss = new SeriesAcc(opts);
  }

  line(text: string): string | null {
    const cells: (number | null)[] = [0, 0];
    const step = parseCsvRow(text, 2, cells);
    if (step === HEADER) return null;
    if (typeof step === 'string') return step;
    const v = cells[0]!;
    const ppl = cells[1]!;
    this.valLoss.push(step, null, v, this.seg.observe(step, null));
    this.last = { step, valLoss: v, ppl };
    return null;
  }
}

/** k_stats.csv / fallback_counters.csv: a header naming the columns, then numeric rows. Last row kept. */
export class HeaderCsv implements CsvRowSink {
  columns: string[] | null = null;
  rows = 0;
  // The newest good row as columns and values; its object is made when read (k_stats.csv and
  // fallback_counters.csv hold a row per logged step and only the last one is shown: a status of a
  // young run read ~3000 rows whole, ~16 ms as an object each).
  private lastCols: string[] | null = null;
  private lastVals: number[] = [];
  private scratch: number[] = [];
  private lastObj: Record<string, number> | null = null;

  constructor(private readonly defaultColumns: string[]) {}

  get last(): Record<string, number> | null {
    const cols = this.lastCols;
    if (cols === null) return null;
    if (this.lastObj === null) {
      const row: Record<string, number> = {};
      for (let i = 0; i < cols.length; i++) row[cols[i]!] = this.lastVals[i]!;
      this.lastObj = row;
    }
    return this.lastObj;
  }

  line(text: string): string | null {
    const f0 = text.charCodeAt(0);
    // a row that starts with a digit is data (a header's first cell starts with a letter, _ or a
    // quote), read in place as parseCsvRow reads training.csv; anything else the general way
    if (!(f0 >= 48 && f0 <= 57)) return this.general(text);
    const cols = this.columns ?? this.defaultColumns;
    let cells = 1;
    for (let at = text.indexOf(','); at !== -1; at = text.indexOf(',', at + 1)) cells++;
    if (cells < cols.length) return `expected ${cols.length} columns, got ${cells}`;
    const vals = this.scratch;
    let from = 0;
    for (let i = 0; i < cols.length; i++) {
      const next = text.indexOf(',', from);
      const to = next === -1 ? text.length : next;
      const v = parseNumSpan(text, from, to);
      if (v === null) return `column ${cols[i]} not a number`;
      vals[i] = v;
      from = to + 1;
    }
    this.keep(cols, vals);
    return null;
  }

  private keep(cols: string[], vals: number[]): void {
    vals.length = cols.length;
    this.scratch = this.lastVals;
    this.lastVals = vals;
    this.lastCols = cols;
    this.lastObj = null;
    this.rows++;
  }

  private general(text: string): string | null {
    const cells = text.split(',').map((c) => c.trim());
    if (/^["']?[A-Za-z_]/.test(cells[0]!)) {
      this.columns = cells.map((c) => c.replace(/^["']|["']$/g, ''));
      return null;
    }
    const cols = this.columns ?? this.defaultColumns;
    if (cells.length < cols.length) return `expected ${cols.length} columns, got ${cells.length}`;
    const vals = this.scratch;
    for (let i = 0; i < cols.length; i++) {
      const v = parseNumCell(cells[i]!);
      if (v === null) return `column ${cols[i]} not a number`;
      vals[i] = v;
    }
    this.keep(cols, vals);
    return null;
  }
}

export const K_STATS_COLUMNS = ['step', 'k_mean', 'k_max', 'rows', 'pct_at_max'];
export const FALLBACK_COLUMNS = [
  'step',
  'selection_triton_fails',
  'selection_cuda_fails',
  'selection_pack_fails',
  'selection_mask_fails',
  'compressed_fa2_fails',
  'sliding_fa2_fails',
  'total_fallbacks',
];
