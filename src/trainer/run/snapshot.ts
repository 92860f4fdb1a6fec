// RunSnapshot: everything the UI and the checks need about one run directory, as plain data.
// Built by the pure snapshot builder (src/trainer/run/build.ts) from what RunModel read; no I/O
// here. Times are ms epoch unless the name says otherwise (heartbeat `ts` values are converted from
// seconds to ms).
// This shape is also the `nsa-top status --json` output (documented in the README): add fields,
// never rename or remove them.

export interface ModelDims {
  dim: number;
  nLayers: number;
  nHeads: number;
  nKvGroups: number;
  dK: number;
  dV: number;
  vocab: number;
}

export interface NsaDims {
  l: number;
  d: number;
  lSel: number;
  nSel: number;
  w: number;
}

export interface TrainCfg {
  steps: number | null;
  seqLen: number | null;
  batchSize: number | null;
  accum: number | null;
  lr: number | null;
  warmupSteps: number | null;
  logEvery: number | null;
  evalEvery: number | null;
  saveEvery: number | null;
  outDir: string | null;
}

export interface RunIdentity {
  /** basename of the run dir */
  name: string;
  /** env.json env.CONFIG (null when absent: the toy default config was used) */
  config: string | null;
  /** every NSA_* variable from env.json */
  flags: Record<string, string>;
  worldSize: number | null;
  /** the YAML the model/nsa/train fields were read from: the run dir's config.yaml, or the file
   * env.json's CONFIG names (resolved against the trainer's cwd); null when none was readable */
  configFile?: string | null;
  /** from the config YAML in the run dir (config.yaml / run config) or checkpoint/metrics */
  model: ModelDims | null;
  nsa: NsaDims | null;
  train: TrainCfg | null;
  /** `[train] dataset=<ds>` from train.log, e.g. synthetic | fineweb_edu */
  dataset: string | null;
  tokenizer: string | null;
  backend: 'DDP' | 'FSDP' | 'single' | null;
  /** which trainer wrote this run */
  trainer: 'nsa-vibe' | 'nsa-top-reference' | 'unknown';
  device: string | null;
  dtype: string | null;
  torch: string | null;
  gpuName: string | null;
  /** CUDA devices each process saw (env.json `cuda_device_count`, the last rank to write it) */
  cudaDeviceCount: number | null;
}

/** The last `progress` heartbeat record, typed; unknown keys kept in `extra`. */
export interface ProgressRecord {
  ts: number;
  step: number;
  rank: number;
  pid: number;
  loss: number | null;
  toksPerS: number | null;
  dtFetchS: number | null;
  fetchP50Ms: number | null;
  fetchP95Ms: number | null;
  gradNorm: number | null;
  gpuMemAllocMiB: number | null;
  gpuMemReservedMiB: number | null;
  gate: GateStats | null;
  sel: SelStats | null;
  fallbacks: Record<string, number> | null;
  extra: Record<string, unknown>;
}

export interface GateStats {
  step: number;
  entropyMean: number | null;
  entropyMin: number | null;
  maxGate: number | null;
  collapseFrac: number | null;
  /** [cmp, sel, win] */
  branchShares: [number, number, number] | null;
}

export interface SelStats {
  kMean: number | null;
  kMax: number | null;
  rows: number | null;
  pctAtMax: number | null;
}

/** One point of a metric series. `segment` counts run segments (resumes). */
export interface SeriesPoint {
  step: number;
  /** ms epoch of the record when known */
  t: number | null;
  value: number;
  segment: number;
}

/** A downsampled stretch of older history. */
export interface SeriesBucket {
  stepFrom: number;
  stepTo: number;
  tFrom: number | null;
  tTo: number | null;
  min: number;
  max: number;
  last: number;
  count: number;
  segment: number;
}

/** Bounded series: full resolution for the recent window, min/max/last buckets before it. */
export interface Series {
  recent: SeriesPoint[];
  history: SeriesBucket[];
  /** points seen in total, including non-finite ones (counted in `nonFinite`) */
  total: number;
  nonFinite: number;
}

export interface Segment {
  /** 0-based */
  index: number;
  firstStep: number;
  lastStep: number;
  startTs: number | null;
  /** ms epoch of the segment's newest `boot` record before its first step (null: it began without one) */
  bootTs?: number | null;
  /** ms epoch of its first step record (progress/step_end/beat); null while it has not stepped */
  firstStepTs?: number | null;
  /** pid of rank 0 in this segment when known */
  pid: number | null;
  /** why a new segment started */
  cause: 'start' | 'step-backwards' | 'boot' | 'file-replaced' | 'file-truncated';
}

export interface RankHeartbeat {
  rank: number;
  pid: number | null;
  file: string;
  bootTs: number | null;
  lastTs: number | null;
  lastMsg: string | null;
  lastStep: number | null;
  /** ms epoch at which this rank's step number last increased */
  stepAdvancedTs: number | null;
  /** heartbeat record count since the current boot */
  records: number;
  watchdogDumps: number;
  /** the files its `watchdog_dump` records name (`path`, base name; the last 20) */
  watchdogDumpFiles?: string[];
  memAllocMiB: number | null;
  memReservedMiB: number | null;
  loaderEvents: { msg: string; ts: number; detail: string }[];
  /** records per event name (`msg`) over the whole file, unknown kinds included */
  events: Record<string, number>;
  /** the last few records of event kinds this version does not know (kept, never dropped) */
  unknownEvents?: { msg: string; ts: number; step: number; fields: Record<string, unknown> }[];
}

export interface DataFetchStats {
  /** progress records seen that carry dt_fetch_s, and that lack it */
  withFetch: number;
  withoutFetch: number;
  lastDtFetchS: number | null;
  fetchP50Ms: number | null;
  fetchP95Ms: number | null;
  /** true when recent progress records have no dt_fetch_s (synthetic data, or silent fallback) */
  dtFetchAbsent: boolean;
  /** `[warn] Falling back to synthetic dataset` / fineweb_loader_error seen */
  syntheticFallback: boolean;
}

export interface ControlState {
  halt: { present: boolean; content: string | null; mtimeMs: number | null };
  anomaly: { type: string; mtimeMs: number | null } | null;
  gateCollapseDetails: Record<string, unknown> | null;
}

export interface CheckpointInfo {
  name: string;
  path: string;
  step: number;
  size: number;
  mtimeMs: number;
  fsdp: boolean;
  /**
   * not modified in the last couple of seconds and: size unchanged across two polls, or untouched
   * for 30 s, or the saving rank stepped past it (build.ts checkpointsOf)
   */
  complete: boolean;
}

export interface StackFrame {
  file: string;
  line: number | null;
  func: string;
  code: string | null;
}

export interface StackThread {
  name: string;
  ident: string | null;
  frames: StackFrame[];
}

export interface StackDump {
  name: string;
  path: string;
  kind: 'signal' | 'watchdog';
  fsdp: boolean;
  /** epoch seconds from the file name */
  epoch: number;
  mtimeMs: number;
  /** first line: "Signal 10 at ..." / "Watchdog at ...; last_heartbeat=..." */
  header: string;
  signal: number | null;
  /** when the dump names them (the reference trainer does; the real one does not) */
  rank: number | null;
  pid: number | null;
  step: number | null;
  phase: string | null;
  threads: StackThread[];
  parseErrors: number;
}

export interface FileHealth {
  /** bytes consumed so far */
  offset: number;
  size: number;
  records: number;
  parseErrors: number;
  lastError: string | null;
  /** times the file was seen truncated or replaced */
  resets: number;
}

export interface LogTail {
  file: string | null;
  /** last lines (bounded) */
  lines: string[];
  effectiveConfig: string | null;
  haltSeen: boolean;
  fatalNonFinite: boolean;
  oom: boolean;
  resumedFrom: string | null;
  /**
   * checkpoint saves the current process said failed (`[train] checkpoint at step N FAILED …`, the
   * reference trainer; the real one swallows a failed save), the newest 20
   */
  checkpointFailed: { step: number; text: string }[];
  /**
   * the newest step whose checkpoint the trainer's own retention removed (`[train] checkpoint
   * retention: removed …checkpoint_stepN.pt`, the reference trainer's --keep-checkpoints): saves at or
   * below it are gone by design, not missing; null: none removed
   */
  checkpointsRemovedThrough?: number | null;
}

export function emptyLogTail(file: string | null): LogTail {
  return {
    file,
    lines: [],
    effectiveConfig: null,
    haltSeen: false,
    fatalNonFinite: false,
    oom: false,
    resumedFrom: null,
    checkpointFailed: [],
    checkpointsRemovedThrough: null,
  };
}

export interface RunSnapshot {
  schema: 1;
  takenAt: number;
  runDir: string;
  host: string;
  exists: boolean;
  error: string | null;

  identity: RunIdentity;

  step: number | null;
  totalSteps: number | null;
  /** ms epoch the run-level step last advanced */
  stepAdvancedTs: number | null;
  loss: number | null;
  lr: number | null;
  toksPerS: number | null;
  stepsPerS: number | null;
  /** median seconds per step over the recent window */
  stepTimeS: number | null;
  etaS: number | null;
  lastProgress: ProgressRecord | null;
  segments: Segment[];

  series: {
    loss: Series;
    toksPerS: Series;
    lr: Series;
    valLoss: Series;
    gateEntropy: Series;
    gateMax: Series;
    collapseFrac: Series;
    dtFetchS: Series;
    memReservedMiB: Series;
  };

  ranks: RankHeartbeat[];
  gates: GateStats | null;
  sel: SelStats | null;
  fallbacks: Record<string, number> | null;
  data: DataFetchStats;
  control: ControlState;
  checkpoints: CheckpointInfo[];
  dumps: StackDump[];
  metrics: Record<string, unknown> | null;
  optStateMb: number | null;
  memDumps: string[];
  tb: { present: boolean; files: number; scalars: number; lastStep: number | null };
  log: LogTail;
  /** training finished: metrics.json written after the last heartbeat of this segment */
  ended: boolean;
  /** when metrics.json was last written (ms epoch, its mtime); null when there is none */
  metricsMtimeMs: number | null;
  files: Record<string, FileHealth>;

  // ---- added by the readers (issue 2) ----
  /** the newest loss value was NaN/Inf (then `loss` is null) */
  lastLossNonFinite: boolean;
  /** last val.csv row */
  lastVal: { step: number; valLoss: number; ppl: number } | null;
  /** every stack dump file seen (`dumps` holds the newest ones, parsed) */
  dumpsTotal: number;
  /**
   * non-finite losses each source holds, whichever the loss series is drawn from: a NaN only
   * training.csv (or only TensorBoard, or only a heartbeat) holds is still a NaN
   */
  lossNonFiniteBySource: { csv: number; tb: number; heartbeat: number };
  /** where loss/toks/lr series come from: CSV, TensorBoard or heartbeat progress records */
  seriesSource: {
    loss: 'csv' | 'tb' | 'heartbeat' | null;
    toksPerS: 'csv' | 'tb' | 'heartbeat' | null;
    lr: 'csv' | 'tb' | null;
  };
  /** huge files are read from the end first; older history fills in over the next polls */
  backfill: { pending: boolean; bytesLeft: number };
  /** host clock at the poll that built this snapshot (ages: hostNowMs − lastTs) */
  hostNowMs: number;
}

function emptySeriesValue(): Series {
  return { recent: [], history: [], total: 0, nonFinite: 0 };
}

/** A snapshot of nothing (no run read yet). Tests and fakes can start from it and override fields. */
export function emptySnapshot(runDir = '', host = 'local'): RunSnapshot {
  return {
    schema: 1,
    takenAt: 0,
    runDir,
    host,
    exists: false,
    error: null,
    identity: {
      name: runDir.split('/').filter(Boolean).pop() ?? '',
      config: null,
      flags: {},
      worldSize: null,
      model: null,
      nsa: null,
      train: null,
      dataset: null,
      tokenizer: null,
      backend: null,
      trainer: 'unknown',
      device: null,
      dtype: null,
      torch: null,
      gpuName: null,
      cudaDeviceCount: null,
    },
    step: null,
    totalSteps: null,
    stepAdvancedTs: null,
    loss: null,
    lr: null,
    toksPerS: null,
    stepsPerS: null,
    stepTimeS: null,
    etaS: null,
    lastProgress: null,
    segments: [],
    series: {
      loss: emptySeriesValue(),
      toksPerS: emptySeriesValue(),
      lr: emptySeriesValue(),
      valLoss: emptySeriesValue(),
      gateEntropy: emptySeriesValue(),
      gateMax: emptySeriesValue(),
      collapseFrac: emptySeriesValue(),
      dtFetchS: emptySeriesValue(),
      memReservedMiB: emptySeriesValue(),
    },
    ranks: [],
    gates: null,
    sel: null,
    fallbacks: null,
    data: {
      withFetch: 0,
      withoutFetch: 0,
      lastDtFetchS: null,
      fetchP50Ms: null,
      fetchP95Ms: null,
      dtFetchAbsent: false,
      syntheticFallback: false,
    },
    control: { halt: { present: false, content: null, mtimeMs: null }, anomaly: null, gateCollapseDetails: null },
    checkpoints: [],
    dumps: [],
    metrics: null,
    optStateMb: null,
    memDumps: [],
    tb: { present: false, files: 0, scalars: 0, lastStep: null },
    log: emptyLogTail(null),
    ended: false,
    metricsMtimeMs: null,
    files: {},
    lastLossNonFinite: false,
    lastVal: null,
    dumpsTotal: 0,
    lossNonFiniteBySource: { csv: 0, tb: 0, heartbeat: 0 },
    seriesSource: { loss: null, toksPerS: null, lr: null },
    backfill: { pending: false, bytesLeft: 0 },
    hostNowMs: 0,
  };
}
