// ParsedRun: what the readers have parsed out of one run directory so far (the heartbeats, the
// CSVs, TensorBoard scalars, train.log and the small whole files). The followers feed it; the
// snapshot builder (build.ts) reads it. No I/O here.
import type { StackDump } from './snapshot.js';
import { FALLBACK_COLUMNS, HeaderCsv, K_STATS_COLUMNS, StepSegments, TrainingCsv, ValCsv } from './readers/csv.js';
import { parseTrainerConfig, type TrainerConfig } from './readers/config.js';
import { HeartbeatState, parseHeartbeatLine } from './readers/heartbeat.js';
import type { ParseResult } from './readers/heartbeat.js';
import {
  parseEnvJson,
  parseGateCollapse,
  parseMetricsJson,
  parseOptState,
  type EnvJson,
  type MetricsJson,
} from './readers/jsonfiles.js';
import type { FileKind } from './readers/names.js';
import { SeriesAcc, type SeriesOptions } from './readers/series.js';
import { toStackDump } from './readers/stackdump.js';
import type { TbEvent } from './readers/tb.js';
import { TrainLog } from './readers/trainlog.js';
import type { LineParser, LineSinkFn, ResetCause } from './follow.js';

/** The TensorBoard scalars of all event files, in file order. */
export class TbState {
  readonly seg = new StepSegments();
  readonly loss: SeriesAcc;
  readonly toks: SeriesAcc;
  readonly lr: SeriesAcc;
  scalars = 0;
  lastStep: number | null = null;
  last: { loss: number | null; toks: number | null; lr: number | null } = { loss: null, toks: null, lr: null };
  private curFile = -1;

  constructor(opts: SeriesOptions) {
    this.loss = new SeriesAcc(opts);
    this.toks = new SeriesAcc(opts);
    this.lr = new SeriesAcc(opts);
  }

  event(fileOrder: number, ev: TbEvent): void {
    for (const s of ev.scalars) this.scalar(fileOrder, s.tag, ev.step, ev.wallTime * 1000, s.value);
  }

  reset(cause: ResetCause): void {
    this.seg.markReset(cause);
  }

  scalar(fileOrder: number, tag: string, step: number, wallMs: number, value: number): void {
    this.scalars++;
    // (no destructuring here: a one-shot status runs this per scalar in V8's interpreter, where
    // an array pattern walks the iterator protocol)
    let acc: SeriesAcc;
    let which: 'loss' | 'toks' | 'lr';
    if (tag === 'train/loss') {
      acc = this.loss;
      which = 'loss';
    } else if (tag === 'train/toks_per_s') {
      acc = this.toks;
      which = 'toks';
    } else if (tag === 'train/lr') {
      acc = this.lr;
      which = 'lr';
    } else return;
    if (fileOrder !== this.curFile) {
      if (this.curFile !== -1) this.seg.markReset('boot');
      this.curFile = fileOrder;
    }
    // the three tags of one step share a step number: only loss drives segments
    const segIdx = which === 'loss' ? this.seg.observe(step, wallMs) : this.seg.index;
    acc.push(step, wallMs, value, segIdx);
    this.last[which] = Number.isFinite(value) ? value : null;
    if (which === 'loss') this.lastStep = step;
  }
}

export interface HaltState {
  present: boolean;
  content: string | null;
  mtimeMs: number | null;
}

/** small files are read whole, up to this size */
export const WHOLE_FILE_CAP = 1024 * 1024;

const NO_HALT: HaltState = { present: false, content: null, mtimeMs: null };

/** A small file read whole: its kind, and the stat of the read. */
export interface WholeRead {
  name: string;
  path: string;
  kind: FileKind;
  text: string;
  mtimeMs: number;
}

export class ParsedRun {
  readonly heartbeats = new Map<string, HeartbeatState>();
  training: TrainingCsv | null = null;
  trainingName: string | null = null;
  val: ValCsv | null = null;
  kstats: HeaderCsv | null = null;
  fallbacks: HeaderCsv | null = null;
  log: TrainLog | null = null;
  readonly tb: TbState;
  env: EnvJson | null = null;
  metrics: MetricsJson | null = null;
  metricsMtime: number | null = null;
  /** config.yaml of the run dir */
  config: TrainerConfig | null = null;
  optStateMb: number | null = null;
  halt: HaltState = { ...NO_HALT };
  anomaly: { type: string; mtimeMs: number | null } | null = null;
  gateCollapse: Record<string, unknown> | null = null;
  readonly dumps = new Map<string, StackDump>();

  constructor(
    private readonly sopts: SeriesOptions,
    private readonly maxLogLines: number,
  ) {
    this.tb = new TbState(sopts);
  }

  /**
   * Forgets the small files the latest listing no longer shows (`kindsSeen`: the kinds of its
   * files; `seen`: the markers also a directory counts for).
   */
  forgetAbsent(
    kindsSeen: ReadonlySet<FileKind['kind']>,
    seen: { halt: boolean; anomaly: boolean; gateCollapse: boolean },
  ): void {
    if (!kindsSeen.has('metrics-json')) {
      this.metrics = null;
      this.metricsMtime = null;
    }
    if (!kindsSeen.has('env-json')) this.env = null;
    if (!kindsSeen.has('opt-state')) this.optStateMb = null;
    if (!kindsSeen.has('config-yaml')) this.config = null;
    if (!seen.halt) this.halt = { ...NO_HALT };
    if (!seen.anomaly) this.anomaly = null;
    if (!seen.gateCollapse) this.gateCollapse = null;
  }

  /** series options for backfilled history: straight into buckets (it all lies before the recent window) */
  private historyOpts(): SeriesOptions {
    return { recentWindow: 0, historyBuckets: this.sopts.historyBuckets };
  }

  /** The parser + state of one line file, and (for files read tail first) a history builder; null: not followed. */
  lineParser(name: string, k: FileKind): LineParser | null {
    switch (k.kind) {
      case 'heartbeat':
      case 'heartbeat-smoke': {
        const rank = k.kind === 'heartbeat' ? k.rank : 0;
        const smoke = k.kind === 'heartbeat-smoke';
        const st = new HeartbeatState(rank, name, this.sopts, smoke);
        this.heartbeats.set(name, st);
        const hbSink =
          (s: HeartbeatState): LineSinkFn =>
          (text) => {
            const r = parseHeartbeatLine(text);
            if (!r.ok) return r.error;
            s.record(r.value);
            return null;
          };
        return {
          sink: hbSink(st),
          onReset: (c) => st.newSegment(c, null, null),
          history: () => {
            const h = new HeartbeatState(rank, name, this.historyOpts(), smoke);
            return { sink: hbSink(h), finish: () => st.mergeHistory(h) };
          },
        };
      }
      case 'training-csv': {
        // the plain and the FSDP name never both matter: the first one seen wins
        if (this.training) return null;
        const t = new TrainingCsv(this.sopts);
        this.training = t;
        this.trainingName = name;
        return {
          sink: (text, m) => t.line(text, m),
          onReset: (c) => t.seg.markReset(c),
          history: () => {
            const h = new TrainingCsv(this.historyOpts());
            return { sink: (text) => h.line(text, null), finish: () => t.mergeHistory(h) };
          },
        };
      }
      case 'val-csv': {
        const v = new ValCsv(this.sopts);
        this.val = v;
        return { sink: (text) => v.line(text), onReset: (c) => v.seg.markReset(c) };
      }
      case 'k-stats': {
        const c = new HeaderCsv(K_STATS_COLUMNS);
        this.kstats = c;
        return { sink: (text) => c.line(text), onReset: () => {} };
      }
      case 'fallback-counters': {
        const c = new HeaderCsv(FALLBACK_COLUMNS);
        this.fallbacks = c;
        return { sink: (text) => c.line(text), onReset: () => {} };
      }
      case 'log': {
        const logSink =
          (l: TrainLog): LineSinkFn =>
          (text) => {
            l.line(text);
            return null;
          };
        const l = new TrainLog(name, this.maxLogLines);
        this.log = l;
        return {
          sink: logSink(l),
          onReset: () => {},
          history: () => {
            const h = new TrainLog(name, this.maxLogLines);
            return { sink: logSink(h), finish: () => l.mergeHistory(h) };
          },
        };
      }
      default:
        return null;
    }
  }

  /**
   * Parses a small file read whole into this run's state. Returns how the file reads: records and
   * parse errors for its health, and the error if any; null for kinds not read whole.
   */
  applyWhole(w: WholeRead): { records: number; parseErrors: number; error: string | null } | null {
    const k = w.kind;
    if (k.kind === 'stackdump') {
      const d = toStackDump(w.name, w.path, k, w.mtimeMs, w.text);
      this.dumps.set(w.name, d);
      return {
        records: d.threads.length,
        parseErrors: d.parseErrors,
        error: d.parseErrors ? 'unrecognised lines in dump' : null,
      };
    }
    const apply = WHOLE_FILES[k.kind as keyof typeof WHOLE_FILES] as WholeFileRule | undefined;
    if (!apply) return null;
    const r = apply(this, w);
    return r.ok ? { records: 1, parseErrors: 0, error: null } : { records: 0, parseErrors: 1, error: r.error };
  }
}

type WholeFileRule = (p: ParsedRun, w: WholeRead) => ParseResult<unknown>;

/** parse, and on success keep the value */
function parsed<T>(
  parse: (text: string) => ParseResult<T>,
  keep: (p: ParsedRun, v: T, w: WholeRead) => void,
): WholeFileRule {
  return (p, w) => {
    const r = parse(w.text);
    if (r.ok) keep(p, r.value, w);
    return r;
  };
}

const OK: ParseResult<null> = { ok: true, value: null };

/** The small files read whole, by kind: how each is parsed and where its value goes. */
const WHOLE_FILES = {
  'env-json': parsed(parseEnvJson, (p, v) => (p.env = v)),
  'metrics-json': parsed(parseMetricsJson, (p, v, w) => {
    p.metrics = v;
    p.metricsMtime = w.mtimeMs;
  }),
  'opt-state': parsed(parseOptState, (p, v) => (p.optStateMb = v)),
  'gate-collapse': parsed(parseGateCollapse, (p, v) => (p.gateCollapse = v)),
  'config-yaml': parsed(parseTrainerConfig, (p, v) => (p.config = v)),
  halt: (p, w) => {
    p.halt = { present: true, content: w.text.slice(0, 500), mtimeMs: w.mtimeMs };
    return OK;
  },
  anomaly: (p, w) => {
    p.anomaly = { type: w.text.trim().split(/\r?\n/)[0]!.slice(0, 100), mtimeMs: w.mtimeMs };
    return OK;
  },
} satisfies Partial<Record<FileKind['kind'], WholeFileRule>>;
