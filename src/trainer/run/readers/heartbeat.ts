// heartbeat_rank{N}.jsonl (and the prod_smoke `heartbeat.jsonl` variant): one JSON object per
// line. Every event kind is accepted; unknown ones are counted, never dropped. Python's json.dumps
// writes bare NaN/Infinity tokens, which JSON.parse rejects: they are turned into strings first so
// the record survives and the value counts as non-finite.
import type { GateStats, ProgressRecord, RankHeartbeat, Segment, SelStats } from '../snapshot.js';
import { finiteOrNull, median, toNum } from './num.js';
import { jsonTooDeep, TOO_DEEP } from './jsonfiles.js';
import { SeriesAcc, type SeriesOptions } from './series.js';

/** a heartbeat line's record: parseHeartbeatLine checks these fields (the rest is kept as read) */
export interface HeartbeatRecord {
  /** finite */
  ts: number;
  msg: string;
  /** a non-negative integer */
  step?: number | undefined;
  /** a non-negative integer */
  rank?: number | undefined;
  /** an integer */
  pid?: number | undefined;
  iso?: string | undefined;
  [k: string]: unknown;
}

/** Event names the trainers write (TS, FSDP, prod_smoke). Anything else is "unknown" but kept. */
export const KNOWN_EVENTS = new Set([
  'boot',
  'progress',
  'step_end',
  'beat',
  'watchdog_dump',
  'fineweb_loader_error',
  'fineweb_loader_ready',
  'fineweb_loader_warmup',
  // prod_smoke_tinylm.py
  'start',
  'step',
  'done',
]);

const BARE_NONFINITE = /([:,[]\s*)(-?Infinity|NaN)(?=\s*[,\]}])/g;

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

export function parseHeartbeatLine(text: string): ParseResult<HeartbeatRecord> {
  if (jsonTooDeep(text)) return { ok: false, error: TOO_DEEP };
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch {
    if (!/NaN|Infinity/.test(text)) return { ok: false, error: 'not JSON' };
    try {
      obj = JSON.parse(text.replace(BARE_NONFINITE, '$1"$2"'));
    } catch {
      return { ok: false, error: 'not JSON' };
    }
  }
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return { ok: false, error: 'not a JSON object' };
  // The rules of the zod schema kept in test/trainer/run/zod-schemas.ts, by hand: this runs once
  // per line of a file that can hold millions (the property tests check that both agree).
  const o = obj as Record<string, unknown>;
  if (typeof o.ts !== 'number' || !Number.isFinite(o.ts))
    return { ok: false, error: 'bad record: ts is not a finite number' };
  if (typeof o.msg !== 'string') return { ok: false, error: 'bad record: msg is not a string' };
  if (o.step !== undefined && !(Number.isSafeInteger(o.step) && (o.step as number) >= 0))
    return { ok: false, error: 'bad record: step is not a non-negative integer' };
  if (o.rank !== undefined && !(Number.isSafeInteger(o.rank) && (o.rank as number) >= 0))
    return { ok: false, error: 'bad record: rank is not a non-negative integer' };
  if (o.pid !== undefined && !Number.isSafeInteger(o.pid))
    return { ok: false, error: 'bad record: pid is not an integer' };
  if (o.iso !== undefined && typeof o.iso !== 'string') return { ok: false, error: 'bad record: iso is not a string' };
  return { ok: true, value: o as HeartbeatRecord };
}

const BASE_KEYS = new Set([
  'ts',
  'iso',
  'pid',
  'rank',
  'step',
  'msg',
  'gpu_mem_alloc',
  'gpu_mem_reserved',
  'backend',
  'phase',
]);
const PROGRESS_KEYS = new Set([
  'loss',
  'toks_per_s',
  'dt_fetch_s',
  'fetch_p50_ms',
  'fetch_p95_ms',
  'grad_norm',
  'gate_entropy_mean',
  'gate_entropy_min',
  'gate_max_gate',
  'gate_collapse_frac',
  'gate_branch_shares',
  'sel_k_mean',
  'sel_k_max',
  'sel_rows',
  'sel_pct_at_max',
  'alloc_mib',
  'reserved_mib',
]);

export function toProgress(r: HeartbeatRecord): ProgressRecord {
  const o = r as Record<string, unknown>;
  const has = (k: string) => Object.hasOwn(o, k);
  let gate: GateStats | null = null;
  if (
    has('gate_entropy_mean') ||
    has('gate_max_gate') ||
    has('gate_collapse_frac') ||
    has('gate_branch_shares') ||
    has('gate_entropy_min')
  ) {
    const sh = o.gate_branch_shares;
    let shares: [number, number, number] | null = null;
    if (Array.isArray(sh) && sh.length === 3) {
      const v = sh.map((x) => finiteOrNull(x));
      if (v.every((x) => x !== null)) shares = v as [number, number, number];
    }
    gate = {
      step: r.step ?? 0,
      entropyMean: finiteOrNull(o.gate_entropy_mean),
      entropyMin: finiteOrNull(o.gate_entropy_min),
      maxGate: finiteOrNull(o.gate_max_gate),
      collapseFrac: finiteOrNull(o.gate_collapse_frac),
      branchShares: shares,
    };
  }
  let sel: SelStats | null = null;
  if (has('sel_k_mean') || has('sel_k_max') || has('sel_rows') || has('sel_pct_at_max')) {
    sel = {
      kMean: finiteOrNull(o.sel_k_mean),
      kMax: finiteOrNull(o.sel_k_max),
      rows: finiteOrNull(o.sel_rows),
      pctAtMax: finiteOrNull(o.sel_pct_at_max),
    };
  }
  let fallbacks: Record<string, number> | null = null;
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (k.startsWith('fb_')) {
      const n = finiteOrNull(v);
      if (n !== null) (fallbacks ??= {})[k.slice(3)] = n;
    } else if (!BASE_KEYS.has(k) && !PROGRESS_KEYS.has(k)) extra[k] = v;
  }
  return {
    ts: r.ts * 1000,
    step: r.step ?? 0,
    rank: r.rank ?? 0,
    pid: r.pid ?? 0,
    loss: finiteOrNull(o.loss),
    toksPerS: finiteOrNull(o.toks_per_s),
    dtFetchS: finiteOrNull(o.dt_fetch_s),
    fetchP50Ms: finiteOrNull(o.fetch_p50_ms),
    fetchP95Ms: finiteOrNull(o.fetch_p95_ms),
    gradNorm: finiteOrNull(o.grad_norm),
    gpuMemAllocMiB: finiteOrNull(o.gpu_mem_alloc ?? o.alloc_mib),
    gpuMemReservedMiB: finiteOrNull(o.gpu_mem_reserved ?? o.reserved_mib),
    gate,
    sel,
    fallbacks,
    extra,
  };
}

export interface HeartbeatSeries {
  loss: SeriesAcc;
  toksPerS: SeriesAcc;
  gateEntropy: SeriesAcc;
  gateMax: SeriesAcc;
  collapseFrac: SeriesAcc;
  dtFetchS: SeriesAcc;
  memReservedMiB: SeriesAcc;
}

/** A ring of (step, ts) marks kept in typed arrays: one per record would churn the old generation. */
class Marks {
  private readonly steps = new Float64Array(STEP_MARKS_CAP);
  private readonly tss = new Float64Array(STEP_MARKS_CAP);
  private start = 0;
  length = 0;

  push(step: number, ts: number): void {
    if (this.length && this.steps[(this.start + this.length - 1) % STEP_MARKS_CAP] === step) return;
    if (this.length === STEP_MARKS_CAP) {
      this.start = (this.start + 1) % STEP_MARKS_CAP;
      this.length--;
    }
    const i = (this.start + this.length) % STEP_MARKS_CAP;
    this.steps[i] = step;
    this.tss[i] = ts;
    this.length++;
  }

  clear(): void {
    this.start = 0;
    this.length = 0;
  }

  /** oldest first */
  toArray(): { step: number; ts: number }[] {
    const out: { step: number; ts: number }[] = [];
    for (let k = 0; k < this.length; k++) {
      const i = (this.start + k) % STEP_MARKS_CAP;
      out.push({ step: this.steps[i]!, ts: this.tss[i]! });
    }
    return out;
  }

  /** seconds a step between each two consecutive marks that advance (oldest first), read from
   *  the ring in place: no mark object built (this runs on every poll) */
  rates(): number[] {
    const out: number[] = [];
    for (let k = 1; k < this.length; k++) {
      const a = (this.start + k - 1) % STEP_MARKS_CAP;
      const b = (this.start + k) % STEP_MARKS_CAP;
      const sa = this.steps[a]!,
        sb = this.steps[b]!,
        ta = this.tss[a]!,
        tb = this.tss[b]!;
      if (sb > sa && tb >= ta) out.push((tb - ta) / 1000 / (sb - sa));
    }
    return out;
  }

  /** put `older` marks in front (keeping the newest STEP_MARKS_CAP) */
  prepend(older: Marks): void {
    const all = [...older.toArray(), ...this.toArray()];
    this.clear();
    for (const m of all) this.push(m.step, m.ts);
  }
}
const STEP_MARKS_CAP = 64;
/** distinct `msg` values counted one by one; more (garbage) land in "(other)" */
const MAX_EVENT_KINDS = 64;
const MAX_SEGMENTS = 1000;

/** progress records looked at for the "dt_fetch_s absent" tell */
const FETCH_RECENT = 5;

/**
 * The state built from one heartbeat file. Rank 0's (or the smoke file's) drives the run-level
 * numbers; other ranks give liveness.
 */
export class HeartbeatState {
  readonly rank: RankHeartbeat & { unknownEvents: NonNullable<RankHeartbeat['unknownEvents']> };
  readonly segments: Segment[] = [];
  readonly series: HeartbeatSeries;
  private lastProgressRaw: HeartbeatRecord | null = null;
  private lastProgressCache: ProgressRecord | null = null;
  /** progress records in the current segment */
  progressInSegment = 0;
  withFetch = 0;
  withoutFetch = 0;
  private recentFetch: boolean[] = [];
  lastDtFetchS: number | null = null;
  fetchP50Ms: number | null = null;
  fetchP95Ms: number | null = null;
  loaderError = false;
  lastLossNonFinite = false;
  /** ms of the newest record the training loop wrote: any but `watchdog_dump`, which the trainer's
   *  own watchdog thread writes while the loop may be long gone (a hung exit) */
  loopTs: number | null = null;
  events: Record<string, number> = {};
  unknownEvents = 0;
  private eventKinds = 0;
  private progressMarks = new Marks();
  private beatMarks = new Marks();
  private segHasSteps = false;
  /** the first record of this file (as read) was a boot: its first segment is a real start */
  private firstWasBoot: boolean | null = null;

  constructor(
    rank: number,
    file: string,
    opts: SeriesOptions,
    private readonly smoke = false,
  ) {
    this.rank = {
      rank,
      pid: null,
      file,
      bootTs: null,
      lastTs: null,
      lastMsg: null,
      lastStep: null,
      stepAdvancedTs: null,
      records: 0,
      watchdogDumps: 0,
      watchdogDumpFiles: [],
      memAllocMiB: null,
      memReservedMiB: null,
      loaderEvents: [],
      events: {},
      unknownEvents: [],
    };
    this.events = this.rank.events;
    const mk = () => new SeriesAcc(opts);
    this.series = {
      loss: mk(),
      toksPerS: mk(),
      gateEntropy: mk(),
      gateMax: mk(),
      collapseFrac: mk(),
      dtFetchS: mk(),
      memReservedMiB: mk(),
    };
  }

  get segment(): number {
    return this.segments.length ? this.segments[this.segments.length - 1]!.index : 0;
  }

  /** Start a new segment (resume, replaced or truncated file). */
  newSegment(cause: Segment['cause'], ts: number | null, pid: number | null): void {
    const cur = this.segments[this.segments.length - 1];
    if (cur && !this.segHasSteps && cur.pid === null && (cause === 'file-replaced' || cause === 'file-truncated')) {
      // nothing happened in the current one: just re-label it
      cur.cause = cause;
      return;
    }
    const index = this.segments.length ? this.segments[this.segments.length - 1]!.index + 1 : 0;
    this.segments.push({
      index,
      firstStep: 0,
      lastStep: 0,
      startTs: ts,
      bootTs: null,
      firstStepTs: null,
      pid,
      cause: index === 0 ? 'start' : cause,
    });
    // a run restarted thousands of times: keep the newest segments (indices stay as they were)
    if (this.segments.length > MAX_SEGMENTS) this.segments.splice(0, this.segments.length - MAX_SEGMENTS);
    this.segHasSteps = false;
    this.progressInSegment = 0;
    this.recentFetch = [];
    this.progressMarks.clear();
    this.beatMarks.clear();
    this.rank.lastStep = null;
    this.rank.records = 0;
  }

  record(r: HeartbeatRecord): void {
    const tsMs = r.ts * 1000;
    let msg = r.msg;
    if (this.smoke) msg = msg === 'start' ? 'boot' : msg === 'step' ? 'progress' : msg;
    const o = r as Record<string, unknown>;
    const ev = this.events[r.msg] !== undefined || this.eventKinds < MAX_EVENT_KINDS ? r.msg : '(other)';
    if (this.events[ev] === undefined) this.eventKinds++;
    this.events[ev] = (this.events[ev] ?? 0) + 1;
    if (!KNOWN_EVENTS.has(r.msg) && !r.msg.startsWith('fineweb_loader_')) {
      this.unknownEvents++;
      const fields: Record<string, unknown> = {};
      let n = 0;
      for (const [k, v] of Object.entries(o)) {
        if (BASE_KEYS.has(k) || n++ >= 20) continue;
        fields[k] = typeof v === 'string' ? v.slice(0, 200) : v;
      }
      this.rank.unknownEvents.push({ msg: r.msg.slice(0, 100), ts: r.ts * 1000, step: r.step ?? 0, fields });
      if (this.rank.unknownEvents.length > 5) this.rank.unknownEvents.shift();
    }
    const pid = r.pid ?? null;
    const step = r.step ?? 0;

    if (this.firstWasBoot === null) this.firstWasBoot = msg === 'boot';
    if (this.segments.length === 0) this.newSegment('start', tsMs, pid);
    let seg = this.segments[this.segments.length - 1]!;

    if (msg === 'boot') {
      if (this.segHasSteps || (seg.pid !== null && pid !== null && seg.pid !== pid)) {
        this.newSegment('boot', tsMs, pid);
        seg = this.segments[this.segments.length - 1]!;
      }
      if (seg.pid === null) seg.pid = pid;
      if (seg.startTs === null) seg.startTs = tsMs;
      // the boot the first step follows: what a boot takes is measured from the newest one
      if (!this.segHasSteps) seg.bootTs = tsMs;
      this.rank.bootTs = tsMs;
      this.rank.records = 0;
    } else if (step > 0 && (msg === 'progress' || msg === 'step_end' || msg === 'beat')) {
      if (this.segHasSteps && step < seg.lastStep) {
        this.newSegment('step-backwards', tsMs, pid);
        seg = this.segments[this.segments.length - 1]!;
      }
      if (!this.segHasSteps) {
        seg.firstStep = step;
        seg.firstStepTs = tsMs;
        this.segHasSteps = true;
      }
      if (step > seg.lastStep) seg.lastStep = step;
      if (seg.pid === null) seg.pid = pid;
      if (seg.startTs === null) seg.startTs = tsMs;
      if (this.rank.lastStep === null || step > this.rank.lastStep) {
        this.rank.lastStep = step;
        this.rank.stepAdvancedTs = tsMs;
      }
      if (msg === 'beat') this.beatMarks.push(step, tsMs);
    }

    this.rank.records++;
    if (pid !== null) this.rank.pid = pid;
    if (this.rank.lastTs === null || tsMs >= this.rank.lastTs) {
      this.rank.lastTs = tsMs;
      this.rank.lastMsg = r.msg;
    }
    if (msg !== 'watchdog_dump' && (this.loopTs === null || tsMs >= this.loopTs)) this.loopTs = tsMs;
    const alloc = finiteOrNull(o.gpu_mem_alloc ?? o.alloc_mib);
    const reserved = finiteOrNull(o.gpu_mem_reserved ?? o.reserved_mib);
    if (alloc !== null) this.rank.memAllocMiB = alloc;
    if (reserved !== null) this.rank.memReservedMiB = reserved;

    if (msg === 'watchdog_dump') {
      this.rank.watchdogDumps++;
      // the real trainer's own watchdog writes no rank into its dump file; this record says whose it is
      if (typeof o.path === 'string') {
        const name = o.path.slice(o.path.lastIndexOf('/') + 1).slice(0, 200);
        const files = (this.rank.watchdogDumpFiles ??= []);
        if (name) files.push(name);
        if (files.length > 20) files.shift();
      }
    }
    if (r.msg.startsWith('fineweb_loader_')) {
      if (r.msg === 'fineweb_loader_error') this.loaderError = true;
      const detail =
        r.msg === 'fineweb_loader_error'
          ? String(o.error ?? '')
          : r.msg === 'fineweb_loader_ready'
            ? `dt=${String(o.dt ?? '?')}s`
            : `requested=${String(o.requested ?? '?')} filled=${String(o.filled ?? '?')} wait_ms=${String(o.wait_ms ?? '?')}`;
      this.rank.loaderEvents.push({ msg: r.msg, ts: tsMs, detail: detail.slice(0, 500) });
      if (this.rank.loaderEvents.length > 20) this.rank.loaderEvents.shift();
    }

    if (msg === 'progress') this.progress(r, tsMs, step, seg.index);
  }

  /** the last progress record, typed (built on demand: most records are never looked at) */
  get lastProgress(): ProgressRecord | null {
    if (!this.lastProgressCache && this.lastProgressRaw) this.lastProgressCache = toProgress(this.lastProgressRaw);
    return this.lastProgressCache;
  }

  private progress(r: HeartbeatRecord, tsMs: number, step: number, segment: number): void {
    const o = r as Record<string, unknown>;
    this.lastProgressRaw = r;
    this.lastProgressCache = null;
    this.progressInSegment++;
    this.progressMarks.push(step, tsMs);
    const loss = toNum(o.loss);
    if (loss !== null) {
      this.series.loss.push(step, tsMs, loss, segment);
      this.lastLossNonFinite = !Number.isFinite(loss);
    }
    const toks = toNum(o.toks_per_s);
    if (toks !== null) this.series.toksPerS.push(step, tsMs, toks, segment);
    const ent = toNum(o.gate_entropy_mean);
    if (ent !== null) this.series.gateEntropy.push(step, tsMs, ent, segment);
    const mg = toNum(o.gate_max_gate);
    if (mg !== null) this.series.gateMax.push(step, tsMs, mg, segment);
    const cf = toNum(o.gate_collapse_frac);
    if (cf !== null) this.series.collapseFrac.push(step, tsMs, cf, segment);
    const mem = toNum(o.gpu_mem_reserved ?? o.reserved_mib);
    if (mem !== null) this.series.memReservedMiB.push(step, tsMs, mem, segment);
    const hasFetch = o.dt_fetch_s !== undefined;
    if (hasFetch) {
      this.withFetch++;
      const dt = toNum(o.dt_fetch_s);
      if (dt !== null) {
        this.series.dtFetchS.push(step, tsMs, dt, segment);
        if (Number.isFinite(dt)) this.lastDtFetchS = dt;
      }
    } else this.withoutFetch++;
    this.recentFetch.push(hasFetch);
    if (this.recentFetch.length > FETCH_RECENT) this.recentFetch.shift();
    const p50 = finiteOrNull(o.fetch_p50_ms);
    if (p50 !== null) this.fetchP50Ms = p50;
    const p95 = finiteOrNull(o.fetch_p95_ms);
    if (p95 !== null) this.fetchP95Ms = p95;
  }

  /**
   * Merge `h`, built from the bytes before where this state started reading (a huge file read
   * from its end first), in front of this state.
   */
  mergeHistory(h: HeartbeatState): void {
    if (h.segments.length === 0) return;
    const hLast = h.segments[h.segments.length - 1]!;
    const mine = this.segments[0];
    const continuation =
      !!mine && !this.firstWasBoot && !(h.segHasSteps && mine.firstStep > 0 && mine.firstStep < hLast.lastStep);
    // indices: the history keeps its own; ours move up behind it (our first segment takes the
    // history's last index when it merely continues it)
    const hNext = hLast.index + 1;
    const shift = !mine || continuation ? hNext - 1 : hNext;
    const merged = h.segments.map((x) => ({ ...x }));
    if (mine) {
      if (continuation) {
        const m = merged[merged.length - 1]!;
        if (mine.lastStep > m.lastStep) m.lastStep = mine.lastStep;
        if (!h.segHasSteps) {
          m.firstStep = mine.firstStep;
          m.firstStepTs = mine.firstStepTs ?? null;
        }
        m.pid ??= mine.pid;
      } else mine.cause = this.firstWasBoot ? 'boot' : 'step-backwards';
      for (const x of continuation ? this.segments.slice(1) : this.segments)
        merged.push({ ...x, index: x.index + shift });
    }
    if (merged.length > MAX_SEGMENTS) merged.splice(0, merged.length - MAX_SEGMENTS);
    this.segments.length = 0;
    this.segments.push(...merged);
    for (const k of Object.keys(this.series) as (keyof HeartbeatSeries)[])
      this.series[k].prependHistory(h.series[k], shift);

    const cont = continuation || !mine;
    const r = this.rank;
    if (cont) {
      if (r.bootTs === null) r.bootTs = h.rank.bootTs;
      if (r.lastStep === null) {
        r.lastStep = h.rank.lastStep;
        r.stepAdvancedTs = h.rank.stepAdvancedTs;
      }
      if (!this.firstWasBoot) r.records += h.rank.records;
      if (this.progressMarks.length < 2) this.progressMarks.prepend(h.progressMarks);
      if (this.beatMarks.length < 3) this.beatMarks.prepend(h.beatMarks);
      if (this.recentFetch.length < FETCH_RECENT)
        this.recentFetch = [...h.recentFetch, ...this.recentFetch].slice(-FETCH_RECENT);
      if (!this.segHasSteps) this.segHasSteps = h.segHasSteps;
      if (this.progressInSegment === 0 && h.lastProgress) this.lastLossNonFinite = h.lastLossNonFinite;
      this.progressInSegment += h.progressInSegment;
    }
    if (r.lastTs === null) {
      r.lastTs = h.rank.lastTs;
      r.lastMsg = h.rank.lastMsg;
    }
    r.pid ??= h.rank.pid;
    r.memAllocMiB ??= h.rank.memAllocMiB;
    r.memReservedMiB ??= h.rank.memReservedMiB;
    r.watchdogDumps += h.rank.watchdogDumps;
    r.watchdogDumpFiles = [...(h.rank.watchdogDumpFiles ?? []), ...(r.watchdogDumpFiles ?? [])].slice(-20);
    r.loaderEvents = [...h.rank.loaderEvents, ...r.loaderEvents].slice(-20);
    for (const [k, v] of Object.entries(h.events)) this.events[k] = (this.events[k] ?? 0) + v;
    if (!this.lastProgressRaw) this.lastProgressRaw = h.lastProgressRaw;
    this.withFetch += h.withFetch;
    this.withoutFetch += h.withoutFetch;
    this.lastDtFetchS ??= h.lastDtFetchS;
    this.fetchP50Ms ??= h.fetchP50Ms;
    this.fetchP95Ms ??= h.fetchP95Ms;
    this.loaderError ||= h.loaderError;
    this.unknownEvents += h.unknownEvents;
    r.unknownEvents = [...h.rank.unknownEvents, ...r.unknownEvents].slice(-5);
  }

  /** true when the recent progress records (current segment) carry no dt_fetch_s at all */
  get dtFetchAbsent(): boolean {
    return this.recentFetch.length > 0 && this.recentFetch.every((x) => !x);
  }

  /** median seconds per step over the recent step marks of the current segment */
  stepTimeS(): number | null {
    return median((this.beatMarks.length >= 3 ? this.beatMarks : this.progressMarks).rates());
  }
}
