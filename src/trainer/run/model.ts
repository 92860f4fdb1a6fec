// RunModel: follows one run directory through a Host and builds RunSnapshots.
//
// Each poll() is one host.pollDir() round (the listing plus the new bytes of every followed file);
// only when that listing shows files not read yet (a new heartbeat rank, a new stack dump, a
// changed env.json / .HALT) does a second round fetch exactly those. Line files are read by byte
// offset; a partial last line waits for its newline; truncation/replacement and resumes open new
// segments. Files larger than TAIL_THRESHOLD are read from their end first (the first snapshot is
// fast and shows the present); their older history is read in bounded chunks over later polls and
// merged in front. Memory stays bounded: series keep a recent window at full resolution and
// min/max/last buckets before it.
import { basename, dirname, join, relative } from 'node:path';
import type { DirEntry, DirPoll, Host, ReadRequest, ReadResult } from '../../remote/host.js';
import type { CheckpointInfo, FileHealth, RankHeartbeat, RunSnapshot, Series, StackDump } from './snapshot.js';
import { emptySnapshot } from './snapshot.js';
import { FALLBACK_COLUMNS, HeaderCsv, K_STATS_COLUMNS, StepSegments, TrainingCsv, ValCsv } from './readers/csv.js';
import {
  configCandidates,
  configNamesOutDir,
  modelDims,
  nsaDims,
  parseTrainerConfig,
  trainCfg,
  type TrainerConfig,
} from './readers/config.js';
import { HeartbeatState, parseHeartbeatLine } from './readers/heartbeat.js';
import {
  parseEnvJson,
  parseGateCollapse,
  parseMetricsJson,
  parseOptState,
  type EnvJson,
  type MetricsJson,
} from './readers/jsonfiles.js';
import { DEFAULT_MAX_LINE, LineSplitter } from './readers/lines.js';
import { classify, MAX_RANKS, pickLog, plausibleWorldSize, type FileKind } from './readers/names.js';
import { SeriesAcc, type SeriesOptions } from './readers/series.js';
import { TrainLog } from './readers/trainlog.js';
import { toStackDump } from './readers/stackdump.js';
import { TfRecordReader } from './readers/tb.js';

export interface RunModelOptions {
  /** full-resolution points per series (default 2000) */
  recentWindow?: number;
  /** min/max/last buckets of older history per series (default 512) */
  historyBuckets?: number;
  /** train.log lines kept (default 200) */
  maxLogLines?: number;
  /** files bigger than this are read from the end first (default 1 MiB) */
  tailThreshold?: number;
  /** how much of a huge file's end the first poll reads (default 512 KiB) */
  tailBytes?: number;
  /** backfill bytes read per poll, over all files (default 4 MiB) */
  backfillChunk?: number;
  /** forward bytes read per file per poll (default 32 MiB) */
  forwardChunk?: number;
  /** parsed stack dumps kept (newest; default 32) */
  maxDumps?: number;
  /**
   * The trainer's stdout log when it lives outside the run dir (a supervised real-trainer run keeps
   * train.log in its launcher dir, the artifacts in out_dir). Default: the best-named log in the dir.
   */
  logPath?: string;
}

const WHOLE_FILE_CAP = 1024 * 1024;
const BACKFILL_PIECE = 512 * 1024;
/** TB event files are read front to back, this much per poll (they stay small: a few scalars per log step) */
const TB_CHUNK = 4 * 1024 * 1024;
const CKPT_SETTLE_MS = 2000;
const CKPT_OLD_MS = 30_000;

type LineSinkFn = (text: string, mtimeMs: number | null) => string | null;

/** A line-oriented file followed by byte offset. */
interface LineFollow {
  type: 'lines';
  name: string;
  path: string;
  kind: FileKind;
  offset: number;
  splitter: LineSplitter;
  health: FileHealth;
  /** skip bytes up to the first newline of the next forward read (started mid-file) */
  tailStart: boolean;
  sink: LineSinkFn;
  onReset(cause: 'file-replaced' | 'file-truncated'): void;
  backfill: Backfill | null;
  mtimeMs: number | null;
  /** inode of the file as last read (null before the first read) */
  ino: number | null;
}

interface Backfill {
  pos: number;
  /** exclusive; set once the tail read found its first newline */
  end: number | null;
  splitter: LineSplitter;
  sink: LineSinkFn;
  /** merge the history into the live state once everything before the tail has been read */
  finish(): void;
}

interface TbFollow {
  type: 'tb';
  name: string;
  path: string;
  offset: number;
  reader: TfRecordReader;
  health: FileHealth;
  order: number;
  ino: number | null;
  /** size in the latest listing of tb/ */
  listedSize: number;
}

interface WholeFile {
  name: string;
  kind: FileKind;
  key: string;
  health: FileHealth;
}

function newHealth(): FileHealth {
  return { offset: 0, size: 0, records: 0, parseErrors: 0, lastError: null, resets: 0 };
}

function keyOf(e: DirEntry): string {
  return `${e.size}:${e.mtimeMs}:${e.ino}`;
}

class TbState {
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

  scalar(fileOrder: number, tag: string, step: number, wallMs: number, value: number): void {
    this.scalars++;
    let acc: SeriesAcc | null = null;
    let which: 'loss' | 'toks' | 'lr' | null = null;
    if (tag === 'train/loss') [acc, which] = [this.loss, 'loss'];
    else if (tag === 'train/toks_per_s') [acc, which] = [this.toks, 'toks'];
    else if (tag === 'train/lr') [acc, which] = [this.lr, 'lr'];
    if (!acc || !which) return;
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

export class RunModel {
  private readonly sopts: SeriesOptions;
  private readonly o: Required<Omit<RunModelOptions, 'logPath'>> & { logPath: string | null };
  private logStarted = false;
  private readonly lineFiles = new Map<string, LineFollow>();
  private readonly tbFiles = new Map<string, TbFollow>();
  private readonly whole = new Map<string, WholeFile>();
  /** files seen but refused by name (a rank beyond MAX_RANKS), with why */
  private readonly refused = new Map<string, string>();
  private readonly heartbeats = new Map<string, HeartbeatState>();
  private training: TrainingCsv | null = null;
  private trainingName: string | null = null;
  private val: ValCsv | null = null;
  private kstats: HeaderCsv | null = null;
  private fallbacks: HeaderCsv | null = null;
  private log: TrainLog | null = null;
  private tb: TbState;
  private tbOrder = 0;
  private env: EnvJson | null = null;
  private metrics: MetricsJson | null = null;
  private metricsMtime: number | null = null;
  private config: TrainerConfig | null = null;
  /** the YAML env.json's CONFIG names, read from outside the run dir (runs nsa-top did not launch) */
  private envConfig: { path: string; cfg: TrainerConfig } | null = null;
  /** what envConfig was resolved for (CONFIG + cwd): resolved again only when that changes */
  private envConfigKey: string | null = null;
  private trainerCwd: string | null = null;
  private optStateMb: number | null = null;
  private halt: { present: boolean; content: string | null; mtimeMs: number | null } = {
    present: false,
    content: null,
    mtimeMs: null,
  };
  private anomaly: { type: string; mtimeMs: number | null } | null = null;
  private gateCollapse: Record<string, unknown> | null = null;
  private readonly ckpts = new Map<string, { info: CheckpointInfo; prevSize: number | null }>();
  private readonly dumps = new Map<string, StackDump>();
  private dumpNames: string[] = [];
  private memDumps: string[] = [];
  private hasTbDir = false;
  private last: RunSnapshot;
  private exists = false;
  private error: string | null = null;
  private hostNowMs = 0;

  constructor(
    private readonly host: Host,
    private readonly runDir: string,
    opts: RunModelOptions = {},
  ) {
    this.o = {
      recentWindow: opts.recentWindow ?? 2000,
      historyBuckets: opts.historyBuckets ?? 512,
      maxLogLines: opts.maxLogLines ?? 200,
      tailThreshold: opts.tailThreshold ?? 1024 * 1024,
      tailBytes: opts.tailBytes ?? 512 * 1024,
      backfillChunk: opts.backfillChunk ?? 4 * 1024 * 1024,
      forwardChunk: opts.forwardChunk ?? 32 * 1024 * 1024,
      maxDumps: opts.maxDumps ?? 32,
      logPath: opts.logPath ?? null,
    };
    this.sopts = { recentWindow: this.o.recentWindow, historyBuckets: this.o.historyBuckets };
    this.tb = new TbState(this.sopts);
    this.last = emptySnapshot(runDir, host.label);
  }

  snapshot(): RunSnapshot {
    return this.last;
  }

  private inFlight: Promise<RunSnapshot> | null = null;

  /**
   * One round: a single host.pollDir() call (listing + new bytes of every followed file), then
   * parse; a second round only for files the listing shows for the first time (or changed small
   * files). Concurrent callers share the round in flight. A host failure (e.g. SSH down) never
   * rejects: the snapshot keeps what was read and carries the error.
   */
  poll(): Promise<RunSnapshot> {
    if (!this.inFlight) {
      this.inFlight = this.pollOnce()
        .catch((e: unknown) => {
          this.error = `poll failed: ${(e as Error)?.message ?? String(e)}`;
          this.last = this.build();
          return this.last;
        })
        .finally(() => {
          this.inFlight = null;
        });
    }
    return this.inFlight;
  }

  private async pollOnce(): Promise<RunSnapshot> {
    const reads: ReadRequest[] = [];
    const owners: (() => (r: ReadResult) => void)[] = [];
    this.planFollowReads(reads, owners);
    const first = await this.host.pollDir(this.runDir, reads, ['tb']);
    this.hostNowMs = first.hostNowMs;
    this.applyReads(first, owners);
    const more: ReadRequest[] = [];
    const moreOwners: (() => (r: ReadResult) => void)[] = [];
    this.applyListing(first, more, moreOwners);
    if (this.o.logPath && !this.logStarted && first.entries) {
      const st = await this.host.stat(this.o.logPath).catch(() => null);
      if (st?.isFile) {
        this.logStarted = true;
        const name = relative(this.runDir, this.o.logPath) || basename(this.o.logPath);
        this.startLineFollow(
          { name, isDir: false, isFile: true, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino },
          { kind: 'log' },
          more,
          moreOwners,
          this.o.logPath,
        );
      }
    }
    if (more.length) {
      const second = await this.host.pollDir(this.runDir, more, []);
      this.applyReads(second, moreOwners);
    }
    await this.resolveEnvConfig();
    this.last = this.build();
    return this.last;
  }

  /**
   * The trainer's working directory (from /proc/PID/cwd of a live rank): env.json's CONFIG is
   * relative to it. True when that changes where CONFIG is looked for (a poll now may find it).
   */
  setTrainerCwd(cwd: string): boolean {
    if (cwd === this.trainerCwd) return false;
    this.trainerCwd = cwd;
    return this.wantsConfig();
  }

  /** env.json names a CONFIG that is not read yet (no config.yaml in the run dir either) */
  wantsConfig(): boolean {
    return !this.config && !this.envConfig && typeof this.env?.env?.['CONFIG'] === 'string';
  }

  /** the file the model's dims come from, or null */
  configSource(): string | null {
    return this.config ? join(this.runDir, 'config.yaml') : (this.envConfig?.path ?? null);
  }

  private async resolveEnvConfig(): Promise<void> {
    const c = (this.env?.env as Record<string, unknown> | undefined)?.['CONFIG'];
    if (typeof c !== 'string' || c === '' || c.length > 4096 || c.includes('\0')) {
      this.envConfig = null;
      this.envConfigKey = null;
      return;
    }
    if (this.config) return; // a config.yaml in the run dir wins
    const key = `${c}\n${this.trainerCwd ?? ''}`;
    if (key === this.envConfigKey && (this.envConfig || !this.trainerCwdUnknownRetry())) return;
    this.envConfigKey = key;
    const src = (this.env?.env as Record<string, unknown>)['NSA_VIBE_SRC'];
    const bases = [this.o.logPath ? dirname(this.o.logPath) : null, typeof src === 'string' ? src : null];
    const cands = configCandidates(c, { cwd: this.trainerCwd, outDir: this.runDir, bases }).slice(0, 12);
    let first: { path: string; cfg: TrainerConfig } | null = null;
    for (const { path, base } of cands) {
      const st = await this.host.stat(path).catch(() => null);
      if (!st?.isFile || st.size > WHOLE_FILE_CAP) continue;
      const text = await this.host
        .readFile(path, WHOLE_FILE_CAP)
        .then((b) => b.toString('utf8'))
        .catch(() => null);
      if (text === null) continue;
      const p = parseTrainerConfig(text);
      if (!p.ok) continue;
      const hit = { path, cfg: p.value };
      // the file whose out_dir is this run dir is this run's config, wherever it was found
      if (configNamesOutDir(p.value, base, this.runDir)) {
        first = hit;
        break;
      }
      first ??= hit;
    }
    this.envConfig = first;
  }

  /** no cwd known and nothing found yet: look again now and then (the file may appear later) */
  private envConfigLooks = 0;
  private trainerCwdUnknownRetry(): boolean {
    return ++this.envConfigLooks % 30 === 0;
  }

  // ---------------------------------------------------------------- reading

  private planFollowReads(reads: ReadRequest[], owners: (() => (r: ReadResult) => void)[]): void {
    let backfillBudget = this.o.backfillChunk;
    for (const f of this.lineFiles.values()) {
      reads.push({ path: f.path, offset: f.offset, maxBytes: this.o.forwardChunk });
      owners.push(() => (r) => this.onLineRead(f, r));
      const bf = f.backfill;
      if (bf && bf.end !== null) {
        // several modest pieces rather than one big buffer: each dies young in the GC
        let pos = bf.pos;
        while (backfillBudget > 0 && pos < bf.end) {
          const n = Math.min(backfillBudget, bf.end - pos, BACKFILL_PIECE);
          reads.push({ path: f.path, offset: pos, maxBytes: n });
          owners.push(() => (r) => this.onBackfillRead(f, r));
          pos += n;
          backfillBudget -= n;
        }
      }
    }
    this.planTbReads(reads, owners);
  }

  /**
   * TB event files are read one after another in name (= time) order: a later file is only read
   * once the earlier ones are read to their listed end, so series never interleave two writers.
   */
  private planTbReads(reads: ReadRequest[], owners: (() => (r: ReadResult) => void)[]): void {
    const files = [...this.tbFiles.values()].sort((a, b) => a.order - b.order);
    for (const t of files) {
      reads.push({ path: t.path, offset: t.offset, maxBytes: TB_CHUNK });
      owners.push(() => (r) => this.onTbRead(t, r));
      if (t.offset + TB_CHUNK < t.listedSize) break;
    }
  }

  private applyReads(p: DirPoll, owners: (() => (r: ReadResult) => void)[]): void {
    p.reads.forEach((r, i) => {
      const own = owners[i];
      if (!own) return;
      try {
        own()(r);
      } catch (e) {
        // a reader bug must never take the cockpit down: count it on the file
        const name = r.path.startsWith(this.runDir) ? r.path.slice(this.runDir.length + 1) : r.path;
        const h = this.healthOf(name);
        if (h) {
          h.parseErrors++;
          h.lastError = `internal: ${(e as Error).message}`;
        }
      }
    });
  }

  private healthOf(name: string): FileHealth | null {
    return this.lineFiles.get(name)?.health ?? this.tbFiles.get(name)?.health ?? this.whole.get(name)?.health ?? null;
  }

  private onLineRead(f: LineFollow, r: ReadResult): void {
    if (r.error) {
      f.health.lastError = r.error;
      return;
    }
    if (!r.stat) return; // vanished: keep what we have
    // Replacement and truncation are judged from our own inode/offset record, not only from the
    // host's `reset` (a host shared by several readers may have seen the new inode first).
    const replaced = f.ino !== null && r.stat.ino !== f.ino;
    const truncated = !replaced && r.stat.size < f.offset;
    f.ino = r.stat.ino;
    f.health.size = r.stat.size;
    f.mtimeMs = r.stat.mtimeMs;
    if (replaced || truncated) {
      f.health.resets++;
      f.splitter.reset();
      f.tailStart = false;
      f.backfill = null;
      f.onReset(replaced ? 'file-replaced' : 'file-truncated');
      f.offset = 0;
      f.health.offset = 0;
      if (r.offset !== 0) return; // data from elsewhere: read from 0 next poll
    } else if (r.offset !== f.offset) return; // answered from another offset: ask again next poll
    let data = r.data;
    if (f.tailStart && data.length) {
      const nl = data.indexOf(10);
      if (nl === -1) {
        f.offset += data.length;
        f.health.offset = f.offset;
        return;
      }
      f.tailStart = false;
      if (f.backfill) f.backfill.end = r.offset + nl + 1;
      f.offset += nl + 1;
      data = data.subarray(nl + 1);
    }
    this.feed(f.splitter, f.health, data, f.sink, r.stat.mtimeMs);
    f.offset += data.length;
    f.health.offset = f.offset;
  }

  private onBackfillRead(f: LineFollow, r: ReadResult): void {
    const bf = f.backfill;
    if (!bf || r.error || !r.stat || r.offset !== bf.pos || bf.end === null || r.stat.ino !== f.ino) return;
    const data = r.data.subarray(0, Math.max(0, bf.end - bf.pos));
    this.feed(bf.splitter, f.health, data, bf.sink, r.stat.mtimeMs);
    bf.pos += data.length;
    if (bf.pos >= bf.end || data.length === 0) {
      bf.splitter.flushPartial({ line: (t) => void bf.sink(t, null), error: () => {} });
      f.backfill = null;
      bf.finish();
    }
  }

  private feed(sp: LineSplitter, h: FileHealth, data: Buffer, sink: LineSinkFn, mtimeMs: number | null): void {
    sp.push(data, {
      line: (text) => {
        let err: string | null;
        try {
          err = sink(text, mtimeMs);
        } catch (e) {
          err = `internal: ${(e as Error).message}`;
        }
        if (err) {
          h.parseErrors++;
          h.lastError = err;
        } else h.records++;
      },
      error: (reason) => {
        h.parseErrors++;
        h.lastError = reason;
      },
    });
  }

  private onTbRead(t: TbFollow, r: ReadResult): void {
    if (r.error) {
      t.health.lastError = r.error;
      return;
    }
    if (!r.stat) return;
    const replaced = t.ino !== null && r.stat.ino !== t.ino;
    const truncated = !replaced && r.stat.size < t.offset;
    t.ino = r.stat.ino;
    t.health.size = r.stat.size;
    if (replaced || truncated) {
      t.health.resets++;
      t.reader.reset();
      t.offset = 0;
      t.health.offset = 0;
      this.tb.seg.markReset(replaced ? 'file-replaced' : 'file-truncated');
      if (r.offset !== 0) return;
    } else if (r.offset !== t.offset) return;
    const before = { rec: t.reader.records, err: t.reader.errors };
    t.reader.push(r.data, (ev) => {
      for (const s of ev.scalars) this.tb.scalar(t.order, s.tag, ev.step, ev.wallTime * 1000, s.value);
    });
    t.offset += r.data.length;
    t.health.offset = t.offset;
    t.health.records += t.reader.records - before.rec;
    t.health.parseErrors += t.reader.errors - before.err;
    if (t.reader.errors > before.err) t.health.lastError = t.reader.lastError;
  }

  // ---------------------------------------------------------------- listing

  private applyListing(p: DirPoll, more: ReadRequest[], owners: (() => (r: ReadResult) => void)[]): void {
    if (!p.entries) {
      this.exists = false;
      this.error = p.error ?? 'run dir missing';
      return;
    }
    this.exists = true;
    this.error = null;
    const seen = new Set<string>();
    const dumpEntries: { e: DirEntry; k: Extract<FileKind, { kind: 'stackdump' }> }[] = [];
    const mem: string[] = [];
    const logs: DirEntry[] = [];
    let haltSeen = false;
    let anomalySeen = false;
    let gateSeen = false;
    this.hasTbDir = false;
    this.refused.clear();
    for (const e of p.entries) {
      seen.add(e.name);
      if (e.isDir) {
        if (e.name === 'tb') this.hasTbDir = true;
        // a directory named like an artifact is reported by name, never read
        else if (classify(e.name).kind !== 'other')
          this.refused.set(e.name, 'not a regular file (a directory): not read');
        // the real trainer only asks whether .HALT exists: a directory stops it as well
        if (e.name === '.HALT') {
          haltSeen = true;
          this.halt = { present: true, content: '[not a regular file: a directory]', mtimeMs: e.mtimeMs };
        }
        continue;
      }
      const k = classify(e.name);
      switch (k.kind) {
        case 'heartbeat':
        case 'heartbeat-smoke':
        case 'training-csv':
        case 'val-csv':
        case 'k-stats':
        case 'fallback-counters':
          // never a per-rank slot for a rank no run can have
          if (k.kind === 'heartbeat' && k.rank >= MAX_RANKS)
            this.refused.set(e.name, `rank ${k.rank} is beyond ${MAX_RANKS} ranks: not read`);
          else if (!this.lineFiles.has(e.name)) this.startLineFollow(e, k, more, owners);
          break;
        case 'log':
          logs.push(e);
          break;
        case 'env-json':
        case 'metrics-json':
        case 'opt-state':
        case 'halt':
        case 'anomaly':
        case 'gate-collapse':
        case 'config-yaml':
          if (k.kind === 'halt') {
            haltSeen = true;
            this.halt.present = true;
            this.halt.mtimeMs = e.mtimeMs;
          }
          if (k.kind === 'anomaly') anomalySeen = true;
          if (k.kind === 'gate-collapse') gateSeen = true;
          if (k.kind === 'metrics-json' && this.metrics && this.metricsFsdp() && !k.fsdp) break;
          this.maybeReadWhole(e, k, more, owners);
          break;
        case 'checkpoint': {
          const prev = this.ckpts.get(e.name);
          const info: CheckpointInfo = {
            name: e.name,
            path: join(this.runDir, e.name),
            step: k.step,
            size: e.size,
            mtimeMs: e.mtimeMs,
            fsdp: k.fsdp,
            complete: false,
          };
          const prevSize = prev ? prev.info.size : null;
          this.ckpts.set(e.name, { info, prevSize });
          break;
        }
        case 'stackdump':
          dumpEntries.push({ e, k });
          break;
        case 'mem-dump':
          mem.push(e.name);
          break;
        default:
          break;
      }
    }
    const logPick = pickLog(logs);
    if (logPick && !this.o.logPath && !this.lineFiles.has(logPick.name)) {
      // one log only: the best-named one present
      for (const [name, f] of this.lineFiles) if (f.kind.kind === 'log') this.lineFiles.delete(name);
      this.startLineFollow(logPick, { kind: 'log' }, more, owners);
    }
    // small artifacts that are gone no longer describe the run (e.g. a relaunch cleaned up)
    const kindsSeen = new Set(p.entries.filter((e) => !e.isDir).map((e) => classify(e.name).kind));
    if (!kindsSeen.has('metrics-json')) {
      this.metrics = null;
      this.metricsMtime = null;
    }
    if (!kindsSeen.has('env-json')) this.env = null;
    if (!kindsSeen.has('opt-state')) this.optStateMb = null;
    if (!kindsSeen.has('config-yaml')) this.config = null;
    if (!haltSeen) this.halt = { present: false, content: null, mtimeMs: null };
    if (!anomalySeen) this.anomaly = null;
    if (!gateSeen) this.gateCollapse = null;
    for (const name of [...this.ckpts.keys()]) if (!seen.has(name)) this.ckpts.delete(name);
    for (const [name, w] of [...this.whole])
      if (!seen.has(name) && w.kind.kind !== 'stackdump') this.whole.delete(name);
    this.memDumps = mem.sort().slice(-200);

    // stack dumps: newest `maxDumps` parsed, the rest only counted
    dumpEntries.sort((a, b) => a.k.epoch - b.k.epoch || (a.e.name < b.e.name ? -1 : 1));
    this.dumpNames = dumpEntries.map((d) => d.e.name);
    const keep = dumpEntries.slice(-this.o.maxDumps);
    const keepNames = new Set(keep.map((d) => d.e.name));
    for (const name of [...this.dumps.keys()]) if (!keepNames.has(name)) this.dumps.delete(name);
    for (const { e, k } of keep) {
      const w = this.whole.get(e.name);
      if (w && w.key === keyOf(e)) continue;
      this.maybeReadWhole(e, k, more, owners);
    }
    for (const name of [...this.whole.keys()]) {
      const w = this.whole.get(name)!;
      if (w.kind.kind === 'stackdump' && !keepNames.has(name)) this.whole.delete(name);
    }

    // tb/
    const tbList = p.subdirs.tb;
    if (tbList) {
      const events = tbList
        .filter((e) => e.isFile && e.name.includes('tfevents'))
        .sort((a, b) => (a.name < b.name ? -1 : 1));
      let added = false;
      for (const e of events) {
        const name = `tb/${e.name}`;
        const known = this.tbFiles.get(name);
        if (known) {
          known.listedSize = e.size;
          continue;
        }
        const t: TbFollow = {
          type: 'tb',
          name,
          path: join(this.runDir, 'tb', e.name),
          offset: 0,
          reader: new TfRecordReader(),
          health: newHealth(),
          order: this.tbOrder++,
          ino: null,
          listedSize: e.size,
        };
        this.tbFiles.set(name, t);
        added = true;
      }
      if (added) this.planTbReads(more, owners);
    }
  }

  private metricsFsdp(): boolean {
    return this.metrics?.backend === 'FSDP';
  }

  private maybeReadWhole(
    e: DirEntry,
    k: FileKind,
    more: ReadRequest[],
    owners: (() => (r: ReadResult) => void)[],
  ): void {
    const key = keyOf(e);
    let w = this.whole.get(e.name);
    if (w && w.key === key) return;
    if (!w) {
      w = { name: e.name, kind: k, key: '', health: newHealth() };
      this.whole.set(e.name, w);
    }
    const wf = w;
    more.push({ path: join(this.runDir, e.name), offset: 0, maxBytes: WHOLE_FILE_CAP });
    owners.push(() => (r) => this.onWholeRead(wf, r));
  }

  private onWholeRead(w: WholeFile, r: ReadResult): void {
    if (r.error) {
      w.health.lastError = r.error;
      return;
    }
    if (!r.stat) return;
    w.key = `${r.stat.size}:${r.stat.mtimeMs}:${r.stat.ino}`;
    w.health.size = r.stat.size;
    w.health.offset = r.data.length;
    const text = r.data.toString('utf8');
    // a small file is judged on its current content: one caught mid-write and fine a poll later
    // is not an error
    const ok = (): void => {
      w.health.records = 1;
      w.health.parseErrors = 0;
      w.health.lastError = null;
    };
    const bad = (err: string): void => {
      w.health.records = 0;
      w.health.parseErrors = 1;
      w.health.lastError = err;
    };
    if (r.stat.size > WHOLE_FILE_CAP && w.kind.kind !== 'stackdump') {
      bad(`file larger than ${WHOLE_FILE_CAP} bytes; read its first ${WHOLE_FILE_CAP}`);
    }
    const k = w.kind;
    switch (k.kind) {
      case 'env-json': {
        const p = parseEnvJson(text);
        if (p.ok) {
          this.env = p.value;
          ok();
        } else bad(p.error);
        break;
      }
      case 'metrics-json': {
        const p = parseMetricsJson(text);
        if (p.ok) {
          this.metrics = p.value;
          this.metricsMtime = r.stat.mtimeMs;
          ok();
        } else bad(p.error);
        break;
      }
      case 'opt-state': {
        const p = parseOptState(text);
        if (p.ok) {
          this.optStateMb = p.value;
          ok();
        } else bad(p.error);
        break;
      }
      case 'halt':
        this.halt = { present: true, content: text.slice(0, 500), mtimeMs: r.stat.mtimeMs };
        ok();
        break;
      case 'anomaly':
        this.anomaly = { type: text.trim().split(/\r?\n/)[0]!.slice(0, 100), mtimeMs: r.stat.mtimeMs };
        ok();
        break;
      case 'gate-collapse': {
        const p = parseGateCollapse(text);
        if (p.ok) {
          this.gateCollapse = p.value;
          ok();
        } else bad(p.error);
        break;
      }
      case 'config-yaml': {
        const p = parseTrainerConfig(text);
        if (p.ok) {
          this.config = p.value;
          ok();
        } else bad(p.error);
        break;
      }
      case 'stackdump': {
        const d = toStackDump(w.name, join(this.runDir, w.name), k, r.stat.mtimeMs, text);
        this.dumps.set(w.name, d);
        w.health.records = d.threads.length;
        w.health.parseErrors = d.parseErrors;
        w.health.lastError = d.parseErrors ? 'unrecognised lines in dump' : null;
        break;
      }
      default:
        break;
    }
  }

  private startLineFollow(
    e: DirEntry,
    k: FileKind,
    more: ReadRequest[],
    owners: (() => (r: ReadResult) => void)[],
    path?: string,
  ): void {
    const made = this.makeSink(e.name, k);
    if (!made) return;
    const f: LineFollow = {
      type: 'lines',
      name: e.name,
      path: path ?? join(this.runDir, e.name),
      kind: k,
      offset: 0,
      splitter: new LineSplitter(DEFAULT_MAX_LINE),
      health: newHealth(),
      tailStart: false,
      sink: made.sink,
      onReset: made.onReset,
      backfill: null,
      mtimeMs: e.mtimeMs,
      ino: null,
    };
    if (e.size > this.o.tailThreshold && made.history) {
      f.offset = e.size - this.o.tailBytes;
      f.tailStart = true;
      const h = made.history();
      f.backfill = { pos: 0, end: null, splitter: new LineSplitter(DEFAULT_MAX_LINE), sink: h.sink, finish: h.finish };
    }
    this.lineFiles.set(e.name, f);
    more.push({ path: f.path, offset: f.offset, maxBytes: this.o.forwardChunk });
    owners.push(() => (r) => this.onLineRead(f, r));
  }

  /** The parser + state of one line file, and (for files read tail first) a history builder. */
  private makeSink(
    name: string,
    k: FileKind,
  ): {
    sink: LineSinkFn;
    onReset: (c: 'file-replaced' | 'file-truncated') => void;
    history?: () => { sink: LineSinkFn; finish: () => void };
  } | null {
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
        const l = new TrainLog(name, this.o.maxLogLines);
        this.log = l;
        return {
          sink: (text) => {
            l.line(text);
            return null;
          },
          onReset: () => {},
          history: () => {
            const h = new TrainLog(name, this.o.maxLogLines);
            return {
              sink: (text) => {
                h.line(text);
                return null;
              },
              finish: () => l.mergeHistory(h),
            };
          },
        };
      }
      default:
        return null;
    }
  }

  /** series options for backfilled history: straight into buckets (it all lies before the recent window) */
  private historyOpts(): SeriesOptions {
    return { recentWindow: 0, historyBuckets: this.sopts.historyBuckets };
  }

  // ---------------------------------------------------------------- snapshot

  private primaryHeartbeat(): HeartbeatState | null {
    let best: HeartbeatState | null = null;
    for (const h of this.heartbeats.values()) {
      if (h.rank.rank !== 0) continue;
      // heartbeat_rank0.jsonl wins over the smoke variant
      if (!best || h.rank.file.startsWith('heartbeat_rank')) best = h;
    }
    return best;
  }

  private build(): RunSnapshot {
    const s = emptySnapshot(this.runDir, this.host.label);
    s.takenAt = Date.now();
    s.hostNowMs = this.hostNowMs;
    s.exists = this.exists;
    s.error = this.error;
    if (!this.exists && this.lineFiles.size === 0 && this.whole.size === 0) return s;

    const hb = this.primaryHeartbeat();
    const csv = this.training;
    const env = this.env;
    const envVars = (env?.env ?? {}) as Record<string, unknown>;
    const cfg = this.config ?? this.envConfig?.cfg ?? null;
    const log = this.log;
    const metrics = this.metrics;

    // identity
    const id = s.identity;
    id.name = basename(this.runDir);
    id.config = typeof envVars.CONFIG === 'string' ? envVars.CONFIG : null;
    id.configFile = this.configSource();
    for (const [k, v] of Object.entries(envVars)) if (k.startsWith('NSA_')) id.flags[k] = String(v);
    // a claimed world size is believed only up to MAX_RANKS (beyond: a warning on env.json)
    const ws = plausibleWorldSize(envVars.WORLD_SIZE);
    const logWs = plausibleWorldSize(log?.worldSize ?? undefined);
    const hbRanks = [...this.heartbeats.values()].filter((h) => h.rank.file.startsWith('heartbeat_rank')).length;
    let maxHbRank = -1;
    for (const h of this.heartbeats.values()) if (h.rank.rank > maxHbRank) maxHbRank = h.rank.rank;
    id.worldSize =
      ws && 'ok' in ws
        ? ws.ok
        : logWs && 'ok' in logWs
          ? logWs.ok
          : hbRanks > 0
            ? Math.max(hbRanks, 1 + maxHbRank)
            : null;
    const worldWarn = ws && 'bad' in ws ? ws.bad : null;
    id.dataset = log?.dataset ?? null;
    id.tokenizer = log?.tokenizer ?? cfg?.data?.tokenizer ?? null;
    if (cfg) {
      id.model = modelDims(cfg, id.tokenizer, id.dataset);
      id.nsa = nsaDims(cfg);
      id.train = trainCfg(cfg);
    }
    const fsdp =
      env?.distributed_backend === 'FSDP' ||
      env?.implementation === 'FSDP' ||
      metrics?.backend === 'FSDP' ||
      hb?.lastProgress?.extra.backend === 'FSDP' ||
      this.trainingName === 'training_fsdp.csv';
    id.backend = fsdp ? 'FSDP' : id.worldSize === null ? null : id.worldSize > 1 ? 'DDP' : 'single';
    id.trainer =
      env?.trainer === 'nsa-top-reference' || envVars.NSA_TOP_TRAINER === 'nsa-top-reference'
        ? 'nsa-top-reference'
        : env || hb || csv
          ? 'nsa-vibe'
          : 'unknown';
    id.device = metrics?.device ?? cfg?.runtime?.device ?? null;
    id.dtype = metrics?.dtype ?? cfg?.runtime?.precision ?? null;
    id.torch = env?.torch ?? null;
    id.gpuName = env?.gpu_name ?? null;

    // segments: the heartbeat of rank 0 is the reference; CSV, then TB, when there is none
    s.segments = (
      hb?.segments.length ? hb.segments : csv?.seg.segments.length ? csv.seg.segments : this.tb.seg.segments
    ).map((x) => ({ ...x }));

    // step
    const csvCurrent = csv?.last && (!hb || hb.segments.length === 0 || csv.seg.segments.length >= hb.segments.length);
    if (hb && hb.rank.lastStep !== null) {
      s.step = hb.rank.lastStep;
      s.stepAdvancedTs = hb.rank.stepAdvancedTs;
    } else if (csvCurrent && csv?.last) {
      s.step = csv.last.step;
      s.stepAdvancedTs = csv.lastRowSeenMtime;
    } else if (!hb && this.tb.lastStep !== null) {
      s.step = this.tb.lastStep;
    }
    s.totalSteps = metrics?.steps ?? log?.stepsOverride ?? cfg?.train?.steps ?? null;

    // last values
    const lp = hb?.lastProgress ?? null;
    s.lastProgress = lp;
    if (lp && hb && hb.progressInSegment > 0) {
      s.loss = lp.loss;
      s.lastLossNonFinite = hb.lastLossNonFinite;
      s.toksPerS = lp.toksPerS;
    } else if (csvCurrent && csv?.last) {
      s.loss = Number.isFinite(csv.last.loss) ? csv.last.loss : null;
      s.lastLossNonFinite = !Number.isFinite(csv.last.loss);
      s.toksPerS = Number.isFinite(csv.last.toksPerS) ? csv.last.toksPerS : null;
    } else if (this.tb.lastStep !== null) {
      s.loss = this.tb.last.loss;
      s.toksPerS = this.tb.last.toks;
    }
    if (csvCurrent && csv?.last && Number.isFinite(csv.last.lr)) s.lr = csv.last.lr;
    else if (this.tb.last.lr !== null) s.lr = this.tb.last.lr;

    // pace
    let stepTime = hb?.stepTimeS() ?? null;
    if (stepTime === null && s.toksPerS && s.toksPerS > 0 && cfg?.train?.batch_size && cfg.train.seq_len) {
      stepTime = (cfg.train.batch_size * (cfg.train.seq_len - 1)) / s.toksPerS;
    }
    s.stepTimeS = stepTime;
    s.stepsPerS = stepTime && stepTime > 0 ? 1 / stepTime : null;

    // series: CSV when written, else TensorBoard, else heartbeat progress records
    const pick = (
      c: SeriesAcc | undefined,
      t: SeriesAcc,
      h: SeriesAcc | undefined,
    ): [Series, 'csv' | 'tb' | 'heartbeat' | null] =>
      c && c.total > 0
        ? [c.toJSON(), 'csv']
        : t.total > 0
          ? [t.toJSON(), 'tb']
          : h && h.total > 0
            ? [h.toJSON(), 'heartbeat']
            : [s.series.loss, null];
    [s.series.loss, s.seriesSource.loss] = pick(csv?.loss, this.tb.loss, hb?.series.loss);
    [s.series.toksPerS, s.seriesSource.toksPerS] = pick(csv?.toksPerS, this.tb.toks, hb?.series.toksPerS);
    const [lrSeries, lrSrc] = pick(csv?.lr, this.tb.lr, undefined);
    s.series.lr = lrSeries;
    s.seriesSource.lr = lrSrc === 'heartbeat' ? null : lrSrc;
    if (this.val) s.series.valLoss = this.val.valLoss.toJSON();
    if (hb) {
      s.series.gateEntropy = hb.series.gateEntropy.toJSON();
      s.series.gateMax = hb.series.gateMax.toJSON();
      s.series.collapseFrac = hb.series.collapseFrac.toJSON();
      s.series.dtFetchS = hb.series.dtFetchS.toJSON();
      s.series.memReservedMiB = hb.series.memReservedMiB.toJSON();
    }

    // ranks
    const ranks: RankHeartbeat[] = [];
    for (const h of this.heartbeats.values()) {
      if (h !== hb && h.rank.rank === 0 && !h.rank.file.startsWith('heartbeat_rank')) continue;
      ranks.push({
        ...h.rank,
        loaderEvents: [...h.rank.loaderEvents],
        events: { ...h.rank.events },
        unknownEvents: [...h.rank.unknownEvents],
      });
    }
    s.ranks = ranks.sort((a, b) => a.rank - b.rank);

    // gates / selection / fallbacks
    s.gates = lp?.gate ?? null;
    s.sel = lp?.sel ?? null;
    if (!s.sel && this.kstats?.last) {
      const k = this.kstats.last;
      s.sel = { kMean: k.k_mean ?? null, kMax: k.k_max ?? null, rows: k.rows ?? null, pctAtMax: k.pct_at_max ?? null };
    }
    s.fallbacks = lp?.fallbacks ?? null;
    if (!s.fallbacks && this.fallbacks?.last) {
      const { step: _step, ...rest } = this.fallbacks.last;
      s.fallbacks = rest;
    }

    // data
    const anyLoaderError = [...this.heartbeats.values()].some((h) => h.loaderError);
    s.data = {
      withFetch: hb?.withFetch ?? 0,
      withoutFetch: hb?.withoutFetch ?? 0,
      lastDtFetchS: hb?.lastDtFetchS ?? null,
      fetchP50Ms: hb?.fetchP50Ms ?? null,
      fetchP95Ms: hb?.fetchP95Ms ?? null,
      dtFetchAbsent: hb?.dtFetchAbsent ?? false,
      syntheticFallback: (log?.syntheticFallback ?? false) || anyLoaderError,
    };

    // control
    s.control = {
      halt: { ...this.halt },
      anomaly: this.anomaly ? { ...this.anomaly } : null,
      gateCollapseDetails: this.gateCollapse,
    };

    // checkpoints
    const now = this.hostNowMs || Date.now();
    s.checkpoints = [...this.ckpts.values()]
      .map(({ info, prevSize }) => {
        const age = now - info.mtimeMs;
        const settled = age >= CKPT_SETTLE_MS && (prevSize === info.size || age >= CKPT_OLD_MS);
        return { ...info, complete: settled };
      })
      .sort((a, b) => a.step - b.step || a.mtimeMs - b.mtimeMs);

    // dumps
    s.dumps = this.dumpNames.map((n) => this.dumps.get(n)).filter((d): d is StackDump => !!d);
    s.dumpsTotal = this.dumpNames.length;

    s.metrics = metrics ? { ...metrics } : null;
    s.optStateMb = this.optStateMb;
    s.memDumps = [...this.memDumps];
    s.tb = { present: this.hasTbDir, files: this.tbFiles.size, scalars: this.tb.scalars, lastStep: this.tb.lastStep };
    if (log) s.log = { ...log.tail, lines: [...log.tail.lines] };
    s.lastVal = this.val?.last ? { ...this.val.last } : null;

    // ended: metrics.json written at/after the last heartbeat of the current segment
    if (metrics && this.metricsMtime !== null) {
      const lastActivity =
        hb?.rank.lastTs ?? (csv ? (this.lineFiles.get(this.trainingName ?? '')?.mtimeMs ?? null) : null);
      s.ended = lastActivity === null || this.metricsMtime >= lastActivity - 2000;
    }
    if (s.totalSteps !== null && s.step !== null && s.stepTimeS !== null && !s.ended)
      s.etaS = Math.max(0, (s.totalSteps - s.step) * s.stepTimeS);

    // file health + backfill progress
    let bytesLeft = 0;
    let pending = false;
    for (const f of this.lineFiles.values()) {
      s.files[f.name] = { ...f.health };
      if (f.backfill) {
        pending = true;
        bytesLeft += (f.backfill.end ?? f.offset) - f.backfill.pos;
      }
    }
    for (const t of this.tbFiles.values()) s.files[t.name] = { ...t.health };
    for (const w of this.whole.values()) s.files[w.name] = { ...w.health };
    for (const [name, why] of this.refused)
      s.files[name] = { offset: 0, size: 0, records: 0, parseErrors: 1, lastError: why, resets: 0 };
    if (worldWarn && s.files['env.json'])
      s.files['env.json'] = {
        ...s.files['env.json'],
        parseErrors: s.files['env.json'].parseErrors + 1,
        lastError: worldWarn,
      };
    s.backfill = { pending, bytesLeft };
    return s;
  }
}
