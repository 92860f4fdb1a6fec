// The snapshot builder: what the followers and readers parsed in, a RunSnapshot out. Pure: no I/O,
// no clock (the caller passes takenAt and the host's now).
//
// Several files can say the same thing (the step is in the heartbeat, training.csv and TensorBoard;
// the total steps in metrics.json, train.log and the config). PRECEDENCE below is the one table of
// which source wins for which field: the first source in a row that has a value gives it.
import { basename } from 'node:path';
import type { CheckpointInfo, FileHealth, RankHeartbeat, RunSnapshot, Series, StackDump } from './snapshot.js';
import { emptySnapshot } from './snapshot.js';
import { modelDims, nsaDims, trainCfg, type TrainerConfig } from './readers/config.js';
import type { TrainingCsv } from './readers/csv.js';
import type { HeartbeatState } from './readers/heartbeat.js';
import { plausibleWorldSize } from './readers/names.js';
import type { SeriesAcc } from './readers/series.js';
import type { ParsedRun } from './parsed.js';

const CKPT_SETTLE_MS = 2000;
const CKPT_OLD_MS = 30_000;

export interface SnapshotInputs {
  runDir: string;
  hostLabel: string;
  /** when the snapshot is taken (ms epoch, this machine) */
  takenAt: number;
  /** the host's clock at the latest listing (0: not known) */
  hostNowMs: number;
  exists: boolean;
  error: string | null;
  /** no file is followed or read (yet) */
  nothingRead: boolean;
  parsed: ParsedRun;
  /** the config env.json's CONFIG names, found outside the run dir (a config.yaml in the run dir wins) */
  envConfig: TrainerConfig | null;
  /** the file the model's dims come from */
  configFile: string | null;
  /** mtime of the followed training csv, as last read */
  trainingMtimeMs: number | null;
  checkpoints: readonly { info: CheckpointInfo; prevSize: number | null }[];
  /** every stack dump listed, oldest first (the newest ones are parsed) */
  dumpNames: readonly string[];
  memDumps: readonly string[];
  /** unreadBytes: event-file bytes listed and not read yet (0: the TB state is current) */
  tb: { present: boolean; files: number; unreadBytes: number };
  /** the health of every file read: line files, then TB event files, then whole files */
  files: readonly (readonly [string, FileHealth])[];
  /** files refused by name, with why */
  refused: ReadonlyMap<string, string>;
  backfill: { pending: boolean; bytesLeft: number };
}

/** What the precedence rules read. */
export interface Sources {
  /** rank 0's heartbeat (the reference for step and segments) */
  hb: HeartbeatState | null;
  csv: TrainingCsv | null;
  /** training.csv is as far along as the heartbeat (at least as many segments): its last row counts */
  csvCurrent: boolean;
  /**
   * TensorBoard's events are read to the end of every event file. They are read from the start,
   * 4 MiB a poll: before then (a long run without training.csv) its series and last values are
   * hours old and count for nothing — the heartbeat's stand in.
   */
  tbCurrent: boolean;
  p: ParsedRun;
  envVars: Record<string, unknown>;
  cfg: TrainerConfig | null;
  trainingName: string | null;
}

export type SourceName =
  | 'heartbeat'
  | 'csv'
  | 'tb'
  | 'metrics.json'
  | 'env.json'
  | 'train.log'
  | 'config'
  | 'k_stats.csv'
  | 'fallback_counters.csv'
  | 'derived';

/**
 * One source of a field: its value, or undefined when this source has none (the next one is
 * asked). `s` is the snapshot as filled so far: a rule may read a field of a row above it.
 */
export type Rule<T> = readonly [source: SourceName, value: (x: Sources, s: RunSnapshot) => T | undefined];

const rules = <T>(...r: Rule<T>[]): readonly Rule<T>[] => r;
const some = <T>(v: T | null | undefined): T | undefined => v ?? undefined;

type Last = { loss: number | null; nonFinite: boolean; toksPerS: number | null };
const finiteOrNull = (v: number): number | null => (Number.isFinite(v) ? v : null);
const REFERENCE = 'nsa-top-reference';

/** Per field: the sources in the order they win. */
export const PRECEDENCE = {
  // a claimed world size is believed only up to MAX_RANKS (beyond: a warning on env.json)
  worldSize: rules<number>(
    ['env.json', (x) => okWorldSize(x.envVars.WORLD_SIZE)],
    ['train.log', (x) => okWorldSize(x.p.log?.worldSize ?? undefined)],
    ['heartbeat', (x) => heartbeatWorldSize(x.p.heartbeats)],
  ),
  dataset: rules<string>(['train.log', (x) => some(x.p.log?.dataset)]),
  tokenizer: rules<string>(
    ['train.log', (x) => some(x.p.log?.tokenizer)],
    ['config', (x) => some(x.cfg?.data?.tokenizer)],
  ),
  backend: rules<'FSDP' | 'DDP' | 'single'>(
    [
      'env.json',
      (x) => (x.p.env?.distributed_backend === 'FSDP' || x.p.env?.implementation === 'FSDP' ? 'FSDP' : undefined),
    ],
    ['metrics.json', (x) => (x.p.metrics?.backend === 'FSDP' ? 'FSDP' : undefined)],
    ['heartbeat', (x) => (x.hb?.lastProgress?.extra.backend === 'FSDP' ? 'FSDP' : undefined)],
    ['csv', (x) => (x.trainingName === 'training_fsdp.csv' ? 'FSDP' : undefined)],
    ['derived', (_, s) => (s.identity.worldSize === null ? undefined : s.identity.worldSize > 1 ? 'DDP' : 'single')],
  ),
  trainer: rules<'nsa-top-reference' | 'nsa-vibe'>(
    [
      'env.json',
      (x) => (x.p.env?.trainer === REFERENCE || x.envVars.NSA_TOP_TRAINER === REFERENCE ? REFERENCE : undefined),
    ],
    ['env.json', (x) => (x.p.env ? 'nsa-vibe' : undefined)],
    ['heartbeat', (x) => (x.hb ? 'nsa-vibe' : undefined)],
    ['csv', (x) => (x.csv ? 'nsa-vibe' : undefined)],
  ),
  device: rules<string>(
    ['metrics.json', (x) => some(x.p.metrics?.device)],
    ['config', (x) => some(x.cfg?.runtime?.device)],
  ),
  dtype: rules<string>(
    ['metrics.json', (x) => some(x.p.metrics?.dtype)],
    ['config', (x) => some(x.cfg?.runtime?.precision)],
  ),
  // segments: the heartbeat of rank 0 is the reference; CSV, then TB, when there is none
  segments: rules<RunSnapshot['segments']>(
    ['heartbeat', (x) => (x.hb?.segments.length ? x.hb.segments : undefined)],
    ['csv', (x) => (x.csv?.seg.segments.length ? x.csv.seg.segments : undefined)],
    ['tb', (x) => (x.tbCurrent ? x.p.tb.seg.segments : undefined)],
  ),
  step: rules<{ step: number; advancedTs: number | null }>(
    [
      'heartbeat',
      (x) =>
        x.hb && x.hb.rank.lastStep !== null
          ? { step: x.hb.rank.lastStep, advancedTs: x.hb.rank.stepAdvancedTs }
          : undefined,
    ],
    [
      'csv',
      (x) => (x.csvCurrent && x.csv?.last ? { step: x.csv.last.step, advancedTs: x.csv.lastRowSeenMtime } : undefined),
    ],
    [
      'tb',
      (x) =>
        !x.hb && x.tbCurrent && x.p.tb.lastStep !== null ? { step: x.p.tb.lastStep, advancedTs: null } : undefined,
    ],
  ),
  totalSteps: rules<number>(
    ['metrics.json', (x) => some(x.p.metrics?.steps)],
    ['train.log', (x) => some(x.p.log?.stepsOverride)],
    ['config', (x) => some(x.cfg?.train?.steps)],
  ),
  /** loss and tokens/s: the latest of one source, never mixed */
  last: rules<Last>(
    [
      'heartbeat',
      (x) => {
        const lp = x.hb?.lastProgress;
        if (!lp || !x.hb || x.hb.progressInSegment <= 0) return undefined;
        return { loss: lp.loss, nonFinite: x.hb.lastLossNonFinite, toksPerS: lp.toksPerS };
      },
    ],
    [
      'csv',
      (x) => {
        const l = x.csvCurrent ? x.csv?.last : undefined;
        return l
          ? { loss: finiteOrNull(l.loss), nonFinite: !Number.isFinite(l.loss), toksPerS: finiteOrNull(l.toksPerS) }
          : undefined;
      },
    ],
    [
      'tb',
      (x) =>
        x.tbCurrent && x.p.tb.lastStep !== null
          ? { loss: x.p.tb.last.loss, nonFinite: false, toksPerS: x.p.tb.last.toks }
          : undefined,
    ],
  ),
  lr: rules<number>(
    ['csv', (x) => (x.csvCurrent && x.csv?.last && Number.isFinite(x.csv.last.lr) ? x.csv.last.lr : undefined)],
    ['tb', (x) => (x.tbCurrent ? some(x.p.tb.last.lr) : undefined)],
  ),
  stepTimeS: rules<number>(
    ['heartbeat', (x) => some(x.hb?.stepTimeS())],
    [
      'derived',
      (x, s) => {
        const t = x.cfg?.train;
        return s.toksPerS && s.toksPerS > 0 && t?.batch_size && t.seq_len
          ? (t.batch_size * (t.seq_len - 1)) / s.toksPerS
          : undefined;
      },
    ],
  ),
  // series: CSV when written, else TensorBoard, else heartbeat progress records
  lossSeries: rules<SeriesAcc>(
    ['csv', (x) => written(x.csv?.loss)],
    ['tb', (x) => (x.tbCurrent ? written(x.p.tb.loss) : undefined)],
    ['heartbeat', (x) => written(x.hb?.series.loss)],
  ),
  toksPerSSeries: rules<SeriesAcc>(
    ['csv', (x) => written(x.csv?.toksPerS)],
    ['tb', (x) => (x.tbCurrent ? written(x.p.tb.toks) : undefined)],
    ['heartbeat', (x) => written(x.hb?.series.toksPerS)],
  ),
  lrSeries: rules<SeriesAcc>(
    ['csv', (x) => written(x.csv?.lr)],
    ['tb', (x) => (x.tbCurrent ? written(x.p.tb.lr) : undefined)],
  ),
  gates: rules<NonNullable<RunSnapshot['gates']>>(['heartbeat', (x) => some(x.hb?.lastProgress?.gate)]),
  sel: rules<NonNullable<RunSnapshot['sel']>>(
    ['heartbeat', (x) => some(x.hb?.lastProgress?.sel)],
    [
      'k_stats.csv',
      (x) => {
        const k = x.p.kstats?.last;
        return k
          ? { kMean: k.k_mean ?? null, kMax: k.k_max ?? null, rows: k.rows ?? null, pctAtMax: k.pct_at_max ?? null }
          : undefined;
      },
    ],
  ),
  fallbacks: rules<NonNullable<RunSnapshot['fallbacks']>>(
    ['heartbeat', (x) => some(x.hb?.lastProgress?.fallbacks)],
    [
      'fallback_counters.csv',
      (x) => {
        const last = x.p.fallbacks?.last;
        if (!last) return undefined;
        const { step: _step, ...rest } = last;
        return rest;
      },
    ],
  ),
} as const;

function okWorldSize(raw: unknown): number | undefined {
  const ws = plausibleWorldSize(raw);
  return ws && 'ok' in ws ? ws.ok : undefined;
}

function heartbeatWorldSize(heartbeats: ReadonlyMap<string, HeartbeatState>): number | undefined {
  const hbRanks = [...heartbeats.values()].filter((h) => h.rank.file.startsWith('heartbeat_rank')).length;
  if (hbRanks === 0) return undefined;
  let maxHbRank = -1;
  for (const h of heartbeats.values()) if (h.rank.rank > maxHbRank) maxHbRank = h.rank.rank;
  return Math.max(hbRanks, 1 + maxHbRank);
}

function written(acc: SeriesAcc | undefined): SeriesAcc | undefined {
  return acc && acc.total > 0 ? acc : undefined;
}

/** the first source of a row with a value */
export function pick<T>(row: readonly Rule<T>[], x: Sources, s: RunSnapshot): { value: T; source: SourceName } | null {
  for (const [source, value] of row) {
    const v = value(x, s);
    if (v !== undefined) return { value: v, source };
  }
  return null;
}

function primaryHeartbeat(heartbeats: ReadonlyMap<string, HeartbeatState>): HeartbeatState | null {
  let best: HeartbeatState | null = null;
  for (const h of heartbeats.values()) {
    if (h.rank.rank !== 0) continue;
    // heartbeat_rank0.jsonl wins over the smoke variant
    if (!best || h.rank.file.startsWith('heartbeat_rank')) best = h;
  }
  return best;
}

export function buildSnapshot(i: SnapshotInputs): RunSnapshot {
  const s = emptySnapshot(i.runDir, i.hostLabel);
  s.takenAt = i.takenAt;
  s.hostNowMs = i.hostNowMs;
  s.exists = i.exists;
  s.error = i.error;
  if (!i.exists && i.nothingRead) return s;

  const p = i.parsed;
  const hb = primaryHeartbeat(p.heartbeats);
  const csv = p.training;
  const x: Sources = {
    hb,
    csv,
    csvCurrent: !!(csv?.last && (!hb || hb.segments.length === 0 || csv.seg.segments.length >= hb.segments.length)),
    tbCurrent: i.tb.unreadBytes === 0,
    p,
    envVars: (p.env?.env ?? {}) as Record<string, unknown>,
    cfg: p.config ?? i.envConfig,
    trainingName: p.trainingName,
  };
  const get = <T>(row: readonly Rule<T>[]): T | null => pick(row, x, s)?.value ?? null;
  const P = PRECEDENCE;

  // identity
  const id = s.identity;
  id.name = basename(i.runDir);
  id.config = typeof x.envVars.CONFIG === 'string' ? x.envVars.CONFIG : null;
  id.configFile = i.configFile;
  for (const [k, v] of Object.entries(x.envVars)) if (k.startsWith('NSA_')) id.flags[k] = String(v);
  id.worldSize = get(P.worldSize);
  const ws = plausibleWorldSize(x.envVars.WORLD_SIZE);
  const worldWarn = ws && 'bad' in ws ? ws.bad : null;
  id.dataset = get(P.dataset);
  id.tokenizer = get(P.tokenizer);
  if (x.cfg) {
    id.model = modelDims(x.cfg, id.tokenizer, id.dataset);
    id.nsa = nsaDims(x.cfg);
    id.train = trainCfg(x.cfg);
  }
  id.backend = get(P.backend);
  id.trainer = get(P.trainer) ?? 'unknown';
  id.device = get(P.device);
  id.dtype = get(P.dtype);
  id.torch = p.env?.torch ?? null;
  id.gpuName = p.env?.gpu_name ?? null;
  id.cudaDeviceCount = p.env?.cuda_device_count ?? null;

  s.segments = (get(P.segments) ?? []).map((seg) => ({ ...seg }));
  const step = get(P.step);
  if (step) [s.step, s.stepAdvancedTs] = [step.step, step.advancedTs];
  s.totalSteps = get(P.totalSteps);

  // last values
  s.lastProgress = hb?.lastProgress ?? null;
  const last = get(P.last);
  if (last) [s.loss, s.lastLossNonFinite, s.toksPerS] = [last.loss, last.nonFinite, last.toksPerS];
  s.lr = get(P.lr);

  // pace
  s.stepTimeS = get(P.stepTimeS);
  s.stepsPerS = s.stepTimeS && s.stepTimeS > 0 ? 1 / s.stepTimeS : null;

  // a series no source has stays empty (seriesSource says null): never another quantity's points
  // (a tokens/s chart and the throughput rules reading loss values as tok/s)
  const series = (row: readonly Rule<SeriesAcc>[], none: Series): [Series, 'csv' | 'tb' | 'heartbeat' | null] => {
    const got = pick(row, x, s);
    return got ? [got.value.toJSON(), got.source as 'csv' | 'tb' | 'heartbeat'] : [none, null];
  };
  [s.series.loss, s.seriesSource.loss] = series(P.lossSeries, s.series.loss);
  s.lossNonFiniteBySource = {
    csv: x.csv?.loss.nonFinite ?? 0,
    tb: x.p.tb.loss.nonFinite,
    heartbeat: x.hb?.series.loss.nonFinite ?? 0,
  };
  [s.series.toksPerS, s.seriesSource.toksPerS] = series(P.toksPerSSeries, s.series.toksPerS);
  const [lrSeries, lrSource] = series(P.lrSeries, s.series.lr);
  s.series.lr = lrSeries;
  s.seriesSource.lr = lrSource === 'heartbeat' ? null : lrSource; // no heartbeat row for lr
  if (p.val) s.series.valLoss = p.val.valLoss.toJSON();
  if (hb) {
    s.series.gateEntropy = hb.series.gateEntropy.toJSON();
    s.series.gateMax = hb.series.gateMax.toJSON();
    s.series.collapseFrac = hb.series.collapseFrac.toJSON();
    s.series.dtFetchS = hb.series.dtFetchS.toJSON();
    s.series.memReservedMiB = hb.series.memReservedMiB.toJSON();
  }

  s.ranks = ranksOf(p.heartbeats, hb);
  s.gates = get(P.gates);
  s.sel = get(P.sel);
  s.fallbacks = get(P.fallbacks);

  // data
  const anyLoaderError = [...p.heartbeats.values()].some((h) => h.loaderError);
  s.data = {
    withFetch: hb?.withFetch ?? 0,
    withoutFetch: hb?.withoutFetch ?? 0,
    lastDtFetchS: hb?.lastDtFetchS ?? null,
    fetchP50Ms: hb?.fetchP50Ms ?? null,
    fetchP95Ms: hb?.fetchP95Ms ?? null,
    dtFetchAbsent: hb?.dtFetchAbsent ?? false,
    syntheticFallback: (p.log?.syntheticFallback ?? false) || anyLoaderError,
  };

  s.control = {
    halt: { ...p.halt },
    anomaly: p.anomaly ? { ...p.anomaly } : null,
    gateCollapseDetails: p.gateCollapse,
  };

  s.checkpoints = checkpointsOf(i.checkpoints, i.hostNowMs || i.takenAt, hb?.rank ?? null);
  s.dumps = i.dumpNames.map((n) => p.dumps.get(n)).filter((d): d is StackDump => !!d);
  // the trainer's own watchdog names no rank in its dump; the one rank whose heartbeat record
  // names the file does (two ranks in one second share one file: then it stays unnamed)
  const wdClaims = new Map<string, Set<number>>();
  for (const r of s.ranks)
    for (const f of r.watchdogDumpFiles ?? []) wdClaims.set(f, (wdClaims.get(f) ?? new Set()).add(r.rank));
  s.dumps = s.dumps.map((d) => {
    const c = d.rank === null && d.kind === 'watchdog' ? wdClaims.get(d.name) : undefined;
    return c?.size === 1 ? { ...d, rank: [...c][0]! } : d;
  });
  s.dumpsTotal = i.dumpNames.length;

  s.metrics = p.metrics ? { ...p.metrics } : null;
  s.metricsMtimeMs = p.metrics ? p.metricsMtime : null;
  s.optStateMb = p.optStateMb;
  s.memDumps = [...i.memDumps];
  s.tb = { present: i.tb.present, files: i.tb.files, scalars: p.tb.scalars, lastStep: p.tb.lastStep };
  if (p.log) s.log = { ...p.log.tail, lines: [...p.log.tail.lines] };
  s.lastVal = p.val?.last ? { ...p.val.last } : null;

  // ended: metrics.json written at/after the last heartbeat of the current segment (a record of the
  // trainer's own watchdog thread is not the loop's: it writes one after a hung exit too)
  if (p.metrics && p.metricsMtime !== null) {
    const lastActivity = hb ? (hb.loopTs ?? hb.rank.lastTs) : csv ? i.trainingMtimeMs : null;
    s.ended = lastActivity === null || p.metricsMtime >= lastActivity - 2000;
    // metrics.json written before the current segment began is an earlier segment's (a FINISHED run
    // relaunched with --steps N): its `steps` is not what this one trains to
    const seg = s.segments.length > 1 ? s.segments[s.segments.length - 1]! : null;
    const began = seg ? (seg.bootTs ?? seg.startTs) : null;
    if (!s.ended && began !== null && p.metricsMtime < began && pick(P.totalSteps, x, s)?.source === 'metrics.json')
      s.totalSteps = get(P.totalSteps.filter(([src]) => src !== 'metrics.json'));
  }
  if (s.totalSteps !== null && s.step !== null && s.stepTimeS !== null && !s.ended)
    s.etaS = Math.max(0, (s.totalSteps - s.step) * s.stepTimeS);

  // file health + backfill progress
  for (const [name, h] of i.files) s.files[name] = { ...h };
  for (const [name, why] of i.refused)
    s.files[name] = { offset: 0, size: 0, records: 0, parseErrors: 1, lastError: why, resets: 0 };
  if (worldWarn && s.files['env.json'])
    s.files['env.json'] = {
      ...s.files['env.json'],
      parseErrors: s.files['env.json'].parseErrors + 1,
      lastError: worldWarn,
    };
  s.backfill = { ...i.backfill };
  return s;
}

function ranksOf(heartbeats: ReadonlyMap<string, HeartbeatState>, hb: HeartbeatState | null): RankHeartbeat[] {
  const ranks: RankHeartbeat[] = [];
  for (const h of heartbeats.values()) {
    if (h !== hb && h.rank.rank === 0 && !h.rank.file.startsWith('heartbeat_rank')) continue;
    ranks.push({
      ...h.rank,
      loaderEvents: [...h.rank.loaderEvents],
      events: { ...h.rank.events },
      unknownEvents: [...h.rank.unknownEvents],
    });
  }
  return ranks.sort((a, b) => a.rank - b.rank);
}

/**
 * A checkpoint is complete once it is CKPT_SETTLE_MS old and its size held still between
 * listings, or it is CKPT_OLD_MS old, or the trainer has stepped past it: the saving rank's step
 * went beyond the checkpoint's at least CKPT_SETTLE_MS after the file's last write. The trainers
 * save inside their step loop (the real one's torch.save returns before the next step starts; the
 * reference one renames a finished file into place), so that evidence is in hand at the first
 * listing: a look no longer waits for a second listing of a run's newest checkpoint a few seconds
 * after every save (status waited 0.7 s whenever one was under 30 s old, on a run saving every 20
 * steps nearly always). A save that failed half-way (the real trainer catches the error and goes on)
 * is not this check's to find, as with a size that held: the resume pick reads each file's end.
 */
function checkpointsOf(
  ckpts: readonly { info: CheckpointInfo; prevSize: number | null }[],
  nowMs: number,
  saver: { lastStep: number | null; stepAdvancedTs: number | null } | null,
): CheckpointInfo[] {
  const each = ckpts.map(({ info, prevSize }) => {
    // complete stays complete while the listing holds the same record (its age only grows)
    const done = completed.get(info);
    if (done) return done;
    const age = nowMs - info.mtimeMs;
    const steppedPast =
      saver !== null &&
      saver.lastStep !== null &&
      saver.lastStep > info.step &&
      saver.stepAdvancedTs !== null &&
      saver.stepAdvancedTs >= info.mtimeMs + CKPT_SETTLE_MS;
    const settled = age >= CKPT_SETTLE_MS && (prevSize === info.size || age >= CKPT_OLD_MS || steppedPast);
    const out = { ...info, complete: settled };
    if (settled) completed.set(info, out);
    return out;
  });
  // the same checkpoints as the last build (the usual round: none new, none changed): the same list
  const last = lastCheckpoints;
  if (last && last.each.length === each.length && last.each.every((c, i) => c === each[i])) return last.sorted;
  const sorted = [...each].sort((a, b) => a.step - b.step || a.mtimeMs - b.mtimeMs);
  lastCheckpoints = { each, sorted };
  return sorted;
}
/** each listed record's complete version (RunModel keeps a record while its file is unchanged) */
const completed = new WeakMap<CheckpointInfo, CheckpointInfo>();
/** the last list built, in listing order and sorted (one run model a process, mostly: else rebuilt) */
let lastCheckpoints: { each: CheckpointInfo[]; sorted: CheckpointInfo[] } | null = null;
