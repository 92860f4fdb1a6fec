// RunModel: follows one run directory through a Host and builds RunSnapshots; the poll loop that
// composes the followers (follow.ts: offsets, truncation, rotation, tail-first reads), the parsed
// state (parsed.ts) and the pure snapshot builder (build.ts, with the source precedence table).
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
import type { CheckpointInfo, FileHealth, RunSnapshot } from './snapshot.js';
import { emptySnapshot } from './snapshot.js';
import { classify, MAX_RANKS, pickLog, type FileKind } from './readers/names.js';

type StackDumpKind = Extract<FileKind, { kind: 'stackdump' }>;
import type { SeriesOptions } from './readers/series.js';
import { buildSnapshot } from './build.js';
import { EnvConfig } from './envconfig.js';
import { LineFollower, newHealth, TbFollower } from './follow.js';
import { ParsedRun, WHOLE_FILE_CAP } from './parsed.js';

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
  /**
   * the same for training.csv (default 128 KiB, never more than tailBytes): ~4000 rows of ~32
   * bytes, twice the recent window. 512 KiB held ~16k rows, which the first look folded into
   * history buckets ~40 ms of a ~270 ms status (a heartbeat's 512 KiB is ~500 records).
   */
  csvTailBytes?: number;
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

/** TB event files are read front to back, this much per poll (they stay small: a few scalars per log step) */
const TB_CHUNK = 4 * 1024 * 1024;

/** What answers one read of a round. */
type Owner = (r: ReadResult) => void;

/** A small file read whole whenever its size/mtime/inode change. */
interface WholeFile {
  name: string;
  kind: FileKind;
  key: string;
  health: FileHealth;
}

function keyOf(e: { size: number; mtimeMs: number; ino: number }): string {
  return `${e.size}:${e.mtimeMs}:${e.ino}`;
}

export class RunModel {
  private readonly o: Required<Omit<RunModelOptions, 'logPath'>> & { logPath: string | null };
  private logStarted = false;
  private readonly lineFiles = new Map<string, LineFollower>();
  private readonly tbFiles = new Map<string, TbFollower>();
  private readonly whole = new Map<string, WholeFile>();
  /** files seen but refused by name (a rank beyond MAX_RANKS), with why */
  private readonly refused = new Map<string, string>();
  private readonly p: ParsedRun;
  private tbOrder = 0;
  /** the YAML env.json's CONFIG names, read from outside the run dir (runs nsa-top did not launch) */
  private readonly envConfig: EnvConfig;
  private readonly ckpts = new Map<string, { info: CheckpointInfo; prevSize: number | null }>();
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
      csvTailBytes: opts.csvTailBytes ?? Math.min(opts.tailBytes ?? Infinity, 128 * 1024),
      backfillChunk: opts.backfillChunk ?? 4 * 1024 * 1024,
      forwardChunk: opts.forwardChunk ?? 32 * 1024 * 1024,
      maxDumps: opts.maxDumps ?? 32,
      logPath: opts.logPath ?? null,
    };
    const sopts: SeriesOptions = { recentWindow: this.o.recentWindow, historyBuckets: this.o.historyBuckets };
    this.p = new ParsedRun(sopts, this.o.maxLogLines);
    this.last = emptySnapshot(runDir, host.label);
    this.envConfig = new EnvConfig(host, runDir, this.o.logPath ? dirname(this.o.logPath) : null);
  }

  snapshot(): RunSnapshot {
    return this.last;
  }

  private inFlight: Promise<RunSnapshot> | null = null;

  /**
   * One round: a single host.pollDir() call (listing + new bytes of every followed file), then
   * parse; a second round only for files the listing shows for the first time (or changed small
   * files). Concurrent callers share the round in flight. A host failure (e.g. SSH down) never
   * rejects: the snapshot keeps what was read and carries the error. `via`: a look of the model's
   * host (Host.look) to poll through, so an observation round's look-ahead serves its poll (over
   * SSH a first round's listings and first reads come with the look, not a frame and reads after it).
   */
  poll(via: Host = this.host): Promise<RunSnapshot> {
    if (!this.inFlight) {
      this.inFlight = this.pollOnce(via)
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

  private async pollOnce(host: Host): Promise<RunSnapshot> {
    const reads: ReadRequest[] = [];
    const owners: Owner[] = [];
    this.planFollowReads(reads, owners);
    // old checkpoints may be listed from an earlier stat once quiet (re-stat'ed every few polls):
    // a long run keeps hundreds, and each stat'ed every second was a third of a watchdog's CPU.
    // Not one the trainer's step has yet to pass: a resumed real trainer counts from step 1 again
    // and rewrites the earlier segment's checkpoints in place, which must show at once (a halt
    // after the next checkpoint fires on it); none while a new segment has booted and not stepped
    const seg = this.last.segments.at(-1);
    const step = seg?.firstStepTs === null ? 0 : this.last.step;
    const first = await host.pollDir(this.runDir, reads, ['tb'], (name) => settledCheckpoint(name, step));
    this.hostNowMs = first.hostNowMs;
    this.applyReads(first, owners);
    const more: ReadRequest[] = [];
    const moreOwners: Owner[] = [];
    this.applyListing(first, more, moreOwners);
    if (this.o.logPath && !this.logStarted && first.entries) {
      const st = await host.stat(this.o.logPath).catch(() => null);
      if (st?.isFile) {
        this.logStarted = true;
        const name = relative(this.runDir, this.o.logPath) || basename(this.o.logPath);
        this.startLineFollow(
          { name, size: st.size, mtimeMs: st.mtimeMs },
          { kind: 'log' },
          more,
          moreOwners,
          this.o.logPath,
        );
      }
    }
    if (more.length) {
      // the small files that decide the verdict (metrics.json, env.json, .HALT, config) first: over
      // SSH each new file is one read, answered in order, and a run dir with thousands of files must
      // not leave metrics.json unread when a one-shot look (status) is judged
      const order = more.map((_, i) => i).sort((a, b) => readRank(more[a]!) - readRank(more[b]!) || a - b);
      const second = await host.pollDir(
        this.runDir,
        order.map((i) => more[i]!),
        [],
      );
      this.applyReads(
        second,
        order.map((i) => moreOwners[i]!),
      );
    }
    await this.envConfig.resolve(this.p.env, !!this.p.config);
    this.last = this.build();
    return this.last;
  }

  /**
   * The trainer's working directory (from /proc/PID/cwd of a live rank): env.json's CONFIG is
   * relative to it. True when that changes where CONFIG is looked for (a poll now may find it).
   */
  setTrainerCwd(cwd: string): boolean {
    return this.envConfig.setTrainerCwd(cwd) && this.wantsConfig();
  }

  /** env.json names a CONFIG that is not read yet (no config.yaml in the run dir either) */
  wantsConfig(): boolean {
    return !this.p.config && !this.envConfig.found && typeof this.p.env?.env?.['CONFIG'] === 'string';
  }

  /** the file the model's dims come from, or null */
  configSource(): string | null {
    return this.p.config ? join(this.runDir, 'config.yaml') : (this.envConfig.found?.path ?? null);
  }

  // ---------------------------------------------------------------- reading

  private planFollowReads(reads: ReadRequest[], owners: Owner[]): void {
    let backfillBudget = this.o.backfillChunk;
    for (const f of this.lineFiles.values()) {
      reads.push(f.request(this.o.forwardChunk));
      owners.push((r) => f.onRead(r));
      backfillBudget -= f.planBackfill(backfillBudget, reads, owners);
    }
    this.planTbReads(reads, owners);
  }

  /**
   * TB event files are read one after another in name (= time) order: a later file is only read
   * once the earlier ones are read to their listed end, so series never interleave two writers.
   */
  private planTbReads(reads: ReadRequest[], owners: Owner[]): void {
    const files = [...this.tbFiles.values()].sort((a, b) => a.order - b.order);
    const tb = this.p.tb;
    for (const t of files) {
      reads.push(t.request(TB_CHUNK));
      owners.push((r) =>
        t.onRead(
          r,
          (cause) => tb.reset(cause),
          (ev) => tb.event(t.order, ev),
        ),
      );
      if (t.offset + TB_CHUNK < t.listedSize) break;
    }
  }

  private applyReads(p: DirPoll, owners: Owner[]): void {
    p.reads.forEach((r, i) => {
      const own = owners[i];
      if (!own) return;
      try {
        own(r);
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

  private startLineFollow(
    e: { name: string; size: number; mtimeMs: number },
    k: FileKind,
    more: ReadRequest[],
    owners: Owner[],
    path?: string,
  ): void {
    const parser = this.p.lineParser(e.name, k);
    if (!parser) return;
    const f = new LineFollower(e.name, path ?? join(this.runDir, e.name), k, parser, {
      size: e.size,
      mtimeMs: e.mtimeMs,
      tailThreshold: this.o.tailThreshold,
      tailBytes: k.kind === 'training-csv' ? this.o.csvTailBytes : this.o.tailBytes,
    });
    this.lineFiles.set(e.name, f);
    more.push(f.request(this.o.forwardChunk));
    owners.push((r) => f.onRead(r));
  }

  private maybeReadWhole(e: DirEntry, k: FileKind, more: ReadRequest[], owners: Owner[]): void {
    const key = keyOf(e);
    let w = this.whole.get(e.name);
    if (w && w.key === key) return;
    if (!w) {
      w = { name: e.name, kind: k, key: '', health: newHealth() };
      this.whole.set(e.name, w);
    }
    const wf = w;
    more.push({ path: join(this.runDir, e.name), offset: 0, maxBytes: WHOLE_FILE_CAP });
    owners.push((r) => this.onWholeRead(wf, r));
  }

  private onWholeRead(w: WholeFile, r: ReadResult): void {
    if (r.error) {
      w.health.lastError = r.error;
      return;
    }
    if (!r.stat) return;
    w.key = keyOf(r.stat);
    w.health.size = r.stat.size;
    w.health.offset = r.data.length;
    if (r.stat.size > WHOLE_FILE_CAP && w.kind.kind !== 'stackdump') {
      w.health.records = 0;
      w.health.parseErrors = 1;
      w.health.lastError = `file larger than ${WHOLE_FILE_CAP} bytes; read its first ${WHOLE_FILE_CAP}`;
    }
    // a small file is judged on its current content: one caught mid-write and fine a poll later
    // is not an error
    const read = this.p.applyWhole({
      name: w.name,
      path: join(this.runDir, w.name),
      kind: w.kind,
      text: r.data.toString('utf8'),
      mtimeMs: r.stat.mtimeMs,
    });
    if (!read) return;
    w.health.records = read.records;
    w.health.parseErrors = read.parseErrors;
    w.health.lastError = read.error;
  }

  // ---------------------------------------------------------------- listing

  private applyListing(p: DirPoll, more: ReadRequest[], owners: Owner[]): void {
    if (!p.entries) {
      this.exists = false;
      this.error = p.error ?? 'run dir missing';
      return;
    }
    this.exists = true;
    this.error = null;
    const seen = new Set<string>();
    const dumpEntries: { e: DirEntry; k: StackDumpKind }[] = [];
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
          this.p.halt = { present: true, content: '[not a regular file: a directory]', mtimeMs: e.mtimeMs };
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
            this.p.halt.present = true;
            this.p.halt.mtimeMs = e.mtimeMs;
          }
          if (k.kind === 'anomaly') anomalySeen = true;
          if (k.kind === 'gate-collapse') gateSeen = true;
          if (k.kind === 'metrics-json' && this.p.metrics && this.metricsFsdp() && !k.fsdp) break;
          this.maybeReadWhole(e, k, more, owners);
          break;
        case 'checkpoint': {
          const prev = this.ckpts.get(e.name);
          // unchanged since the last listing (a long run's hundreds of old ones): the same record,
          // so what is built from it (its completeness, the sorted list, the journal's diff) is too
          if (prev && prev.info.size === e.size && prev.info.mtimeMs === e.mtimeMs && prev.info.step === k.step) {
            if (prev.prevSize !== e.size) this.ckpts.set(e.name, { info: prev.info, prevSize: e.size });
            break;
          }
          const info: CheckpointInfo = {
            name: e.name,
            path: prev ? prev.info.path : join(this.runDir, e.name),
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
    this.p.forgetAbsent(kindsSeen, { halt: haltSeen, anomaly: anomalySeen, gateCollapse: gateSeen });
    for (const name of [...this.ckpts.keys()]) if (!seen.has(name)) this.ckpts.delete(name);
    for (const [name, w] of [...this.whole])
      if (!seen.has(name) && w.kind.kind !== 'stackdump') this.whole.delete(name);
    this.memDumps = mem.sort().slice(-200);
    this.listDumps(dumpEntries, more, owners);
    if (p.subdirs.tb) this.listTb(p.subdirs.tb, more, owners);
    // a tb/ that cannot be listed is named (status, the unreadable-artifacts rule), never skipped in silence
    else if (this.hasTbDir && p.subdirErrors?.tb)
      this.refused.set('tb/', `${p.subdirErrors.tb} — its TensorBoard events are not read`);
  }

  /** stack dumps: the newest `maxDumps` parsed (again when changed), the rest only counted */
  private listDumps(dumpEntries: { e: DirEntry; k: StackDumpKind }[], more: ReadRequest[], owners: Owner[]): void {
    dumpEntries.sort((a, b) => a.k.epoch - b.k.epoch || (a.e.name < b.e.name ? -1 : 1));
    this.dumpNames = dumpEntries.map((d) => d.e.name);
    const keep = dumpEntries.slice(-this.o.maxDumps);
    const keepNames = new Set(keep.map((d) => d.e.name));
    for (const name of [...this.p.dumps.keys()]) if (!keepNames.has(name)) this.p.dumps.delete(name);
    for (const { e, k } of keep) {
      const w = this.whole.get(e.name);
      if (w && w.key === keyOf(e)) continue;
      this.maybeReadWhole(e, k, more, owners);
    }
    for (const name of [...this.whole.keys()]) {
      const w = this.whole.get(name)!;
      if (w.kind.kind === 'stackdump' && !keepNames.has(name)) this.whole.delete(name);
    }
  }

  /** tb/: event files are followed in name order; a new one is read at once */
  private listTb(tbList: DirEntry[], more: ReadRequest[], owners: Owner[]): void {
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
      const t = new TbFollower(name, join(this.runDir, 'tb', e.name), this.tbOrder++, e.size);
      this.tbFiles.set(name, t);
      added = true;
    }
    if (added) this.planTbReads(more, owners);
  }

  private metricsFsdp(): boolean {
    return this.p.metrics?.backend === 'FSDP';
  }

  // ---------------------------------------------------------------- snapshot

  private build(): RunSnapshot {
    let bytesLeft = 0;
    let pending = false;
    for (const f of this.lineFiles.values()) {
      const left = f.backfillLeft();
      if (left === null) continue;
      pending = true;
      bytesLeft += left;
    }
    // TB event files are read from their start, TB_CHUNK a poll: a long run's are behind for a while
    let tbUnread = 0;
    // (one that cannot be read is not waited for: its error is on the file, and --full would spin)
    for (const t of this.tbFiles.values()) if (!t.readFailed) tbUnread += Math.max(0, t.listedSize - t.offset);
    if (tbUnread > 0) {
      pending = true;
      bytesLeft += tbUnread;
    }
    const health = (m: Map<string, { name: string; health: FileHealth }>) =>
      [...m.values()].map((f) => [f.name, f.health] as const);
    const trainingName = this.p.trainingName;
    return buildSnapshot({
      runDir: this.runDir,
      hostLabel: this.host.label,
      takenAt: Date.now(),
      hostNowMs: this.hostNowMs,
      exists: this.exists,
      error: this.error,
      nothingRead: this.lineFiles.size === 0 && this.whole.size === 0,
      parsed: this.p,
      envConfig: this.envConfig.found?.cfg ?? null,
      configFile: this.configSource(),
      trainingMtimeMs: trainingName === null ? null : (this.lineFiles.get(trainingName)?.mtimeMs ?? null),
      checkpoints: [...this.ckpts.values()],
      dumpNames: this.dumpNames,
      memDumps: this.memDumps,
      tb: { present: this.hasTbDir, files: this.tbFiles.size, unreadBytes: tbUnread },
      files: [...health(this.lineFiles), ...health(this.tbFiles), ...health(this.whole)],
      refused: this.refused,
      backfill: { pending, bytesLeft },
    });
  }
}

/** The order a poll's new reads are sent in: whole small artifacts, then training.csv, the log and rank 0's heartbeat, then the rest. */
function readRank(r: ReadRequest): number {
  const k = classify(basename(r.path));
  switch (k.kind) {
    case 'metrics-json':
    case 'env-json':
    case 'halt':
    case 'anomaly':
    case 'config-yaml':
    case 'gate-collapse':
      return 0;
    case 'training-csv':
    case 'log':
      return 1;
    case 'heartbeat':
      return k.rank === 0 ? 1 : 2;
    default:
      return 2;
  }
}

/** a checkpoint's name whose step the run has passed (classify's memo: the poll asks of every
 *  name every round); with no step known, any checkpoint */
function settledCheckpoint(name: string, step: number | null): boolean {
  const k = classify(name);
  return k.kind === 'checkpoint' && (step === null || k.step < step);
}
