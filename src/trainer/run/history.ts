// The whole history of a run, for `report`: rank 0's heartbeat file and the trainer's log read from
// their first byte to their last, streaming (bounded memory whatever their size), folded into
// segments (one per process: a boot, or the step count going backwards) and the events an
// acceptance verdict must not miss — stalls that cleared, non-finite losses, failed checkpoint
// saves, crashes and restarts — each with its steps and time. The cockpit reads huge files from
// the end and back-fills lazily; this reads everything, once.
import { dur } from '../../format.js';
import type { Host } from '../../remote/host.js';
import { parseHeartbeatLine } from './readers/heartbeat.js';
import { DEFAULT_MAX_LINE, LineSplitter } from '../../lines.js';

export interface HistorySegment {
  index: number;
  pid: number | null;
  firstStep: number | null;
  lastStep: number | null;
  /** ms epoch of its first and last record */
  startTs: number | null;
  endTs: number | null;
  records: number;
  /** how it ended, for every segment but the last (the current one is judged live) */
  end: 'crashed' | 'halted' | 'non-finite' | 'finished' | 'current';
  /** evidence for `end` */
  endWhy: string;
  /** the stop needed this signal after .HALT went unanswered (nsa-top's records), else null */
  stopSignal?: 'SIGINT' | 'SIGKILL' | null;
}

export type HistoryEventKind = 'stall' | 'non-finite' | 'checkpoint-failed' | 'crash';

export interface HistoryEvent {
  kind: HistoryEventKind;
  segment: number;
  step: number | null;
  stepTo?: number | null;
  /** ms epoch */
  ts: number | null;
  tsTo?: number | null;
  gapS?: number;
  /** a stall that was still on when the segment was stopped (it never cleared) */
  atStop?: boolean;
  /** the rank the evidence names (the watchdog's culprit, a dump) */
  rank?: number | null;
  text: string;
}

/**
 * What nsa-top and the trainer recorded about stops, beside the heartbeats and the log (the shape
 * of src/trainer/control/stopfacts.ts StopFacts, plus the run's stack dumps and metrics.json).
 */
export interface StopEvidence {
  /** operator/supervisor halts, escalations and (re)launches, oldest first (ms epoch) */
  events: {
    ts: number;
    kind: 'halt' | 'escalate-sigint' | 'escalate-sigkill' | 'launch';
    who: string | null;
    source: string;
  }[];
  /** the watchdog's stall decisions (ms epoch) */
  stalls: { ts: number; step: number | null; rank: number | null; title: string }[];
  /** stack dumps in the run dir: when (ms epoch) and of which rank */
  dumps?: { ts: number; rank: number | null; kind: 'signal' | 'watchdog' }[];
  /** metrics.json's "ended" (the reference trainer: "finished" | "halted" | "aborted") */
  metricsEnded?: string | null;
}

export interface RunHistory {
  /** false when a file could not be read to its end */
  complete: boolean;
  error: string | null;
  bytes: number;
  records: number;
  segments: HistorySegment[];
  /** the first MAX_EVENTS of each kind, in file order */
  events: HistoryEvent[];
  counts: Record<HistoryEventKind, number>;
  /** (step, ms) of rank 0's progress records in the current segment (step times) */
  progressTimes: { step: number; t: number }[];
  /** `[train] dataset=X` in the log read (a hand-launched run's recorded stdout included) */
  logDataset: string | null;
}

const MAX_EVENTS = 50;
const MAX_PROGRESS_TIMES = 20_000;
const CHUNK = 8 * 1024 * 1024;

interface LogProc {
  /** a training line was printed since this process's boot (the next boot is a new launch) */
  trained: boolean;
  resumedFrom: string | null;
  halt: boolean;
  fatal: boolean;
  ckptFailed: { step: number; text: string }[];
  killed: string | null;
  /** torchrun's failure summary: the rank whose block is being read */
  summaryRank?: number | null;
  /** opened by the reference launcher's own line: every boot line after it is this launch's */
  launcher?: boolean;
  /** the rank the supervisor saw go first when this process's trainer exited (its "trainer exited"
   *  line: src/trainer/launch/rankwatch.ts), and how it ended when it could tell */
  firstGone?: { rank: number; pid: number; how: string | null } | null;
}

const RE_LOG_BOOT = /^\[boot\] loading config /;
// the reference launcher, once per launch, before its ranks boot
const RE_LOG_LAUNCHER = /^\[launcher\] world_size=\d+:/;
// past boot: every rank of a launch prints its own `[boot] loading config` before any of these
const RE_LOG_TRAINING = /^(\[ddp\] process group ready|\[train\]|step \d+ \|)/;
const RE_LOG_RESUMED = /^\[train\] resumed from (.*)$/;
const RE_LOG_HALT = /\[train\] HALT file detected/;
const RE_LOG_FATAL = /\[train\]\[FATAL\] non-finite loss detected/;
// the reference trainer says so; the real one swallows a failed torch.save (TS:1489-1499)
const RE_LOG_CKPT_FAIL = /\[train\] checkpoint at step (\d+) FAILED\b(.*)$/;
// torchrun's summary of a rank killed by a signal
const RE_LOG_SIGNAL = /Signal (\d+) \((SIG\w+)\) received by PID (\d+)/;
const RE_LOG_DATASET = /^\[train\] dataset=(\S+)/;
// torchrun's failure summary names the global rank of each failure block before its traceback
const RE_LOG_SUMMARY_RANK = /^\s*rank\s*: (\d+) \(local_rank: \d+\)/;
// the reference launcher: the first rank to die takes the others down
const RE_LOG_RANK_EXIT = /^\[launcher\] rank (\d+) \(pid (\d+)\) exited with (code -?\d+|signal \w+)/;
// the supervisor, when its trainer exits: "trainer exited: code 1 (rank 1, pid 123, went first: SIGKILL)"
const RE_LOG_FIRST_GONE =
  /^\[nsa-top supervisor\] \S+ trainer exited: .*\(rank (\d+), pid (\d+), went first(?:: ([^)]+))?\)\s*$/;

/** Folds heartbeat records of one rank into segments and events. Pure: feed lines, then finish(). */
export class HistoryFold {
  private segs: HistorySegment[] = [];
  private cur: HistorySegment | null = null;
  private lastTs: number | null = null;
  private lastStepSeen: number | null = null;
  private lastLossNonFinite = false;
  readonly events: HistoryEvent[] = [];
  readonly counts: Record<HistoryEventKind, number> = { stall: 0, 'non-finite': 0, 'checkpoint-failed': 0, crash: 0 };
  records = 0;
  progressTimes: { step: number; t: number }[] = [];

  /** the watchdog's stall decisions, oldest first, and the next one not yet placed in a gap */
  private readonly wdStalls: StopEvidence['stalls'];
  private wdNext = 0;

  /**
   * `stallS`: a gap between records longer than this is a stall. `watchdogStalls`: the stalls the
   * watchdog (or a cockpit's journal) decided on: the gap each falls in is a stall too, however
   * short against `stallS` (the watchdog's own threshold may be lower than the report's).
   */
  constructor(
    private readonly stallS: number,
    watchdogStalls: StopEvidence['stalls'] = [],
  ) {
    this.wdStalls = [...watchdogStalls].sort((a, b) => a.ts - b.ts);
  }

  /** the first watchdog stall in (from, to], consuming every one up to `to`; null from: none counted */
  private watchdogStallIn(from: number | null, to: number): StopEvidence['stalls'][number] | null {
    let found: StopEvidence['stalls'][number] | null = null;
    while (this.wdNext < this.wdStalls.length && this.wdStalls[this.wdNext]!.ts <= to) {
      const x = this.wdStalls[this.wdNext++]!;
      if (from !== null && x.ts > from) found ??= x;
    }
    return found;
  }

  private add(e: HistoryEvent): void {
    this.counts[e.kind]++;
    if (this.events.filter((x) => x.kind === e.kind).length < MAX_EVENTS) this.events.push(e);
  }

  private open(pid: number | null, ts: number): HistorySegment {
    const s: HistorySegment = {
      index: this.segs.length,
      pid,
      firstStep: null,
      lastStep: null,
      startTs: ts,
      endTs: ts,
      records: 0,
      end: 'current',
      endWhy: '',
    };
    this.segs.push(s);
    this.cur = s;
    this.lastTs = null;
    this.lastStepSeen = null;
    this.lastLossNonFinite = false;
    this.progressTimes = [];
    return s;
  }

  line(text: string): void {
    const r = parseHeartbeatLine(text);
    if (!r.ok) return;
    const o = r.value as unknown as Record<string, unknown>;
    const ts = (o.ts as number) * 1000;
    const msg = o.msg as string;
    const step = typeof o.step === 'number' ? o.step : null;
    const pid = typeof o.pid === 'number' ? o.pid : null;
    this.records++;
    let seg = this.cur;
    if (!seg || msg === 'boot' || (pid !== null && seg.pid !== null && pid !== seg.pid)) seg = this.open(pid, ts);
    else if (step !== null && step > 0 && this.lastStepSeen !== null && step < this.lastStepSeen && msg === 'progress')
      seg = this.open(pid, ts);
    seg.records++;
    seg.pid ??= pid;
    // a gap between consecutive records of one process longer than the stall threshold, or one the
    // watchdog called a stall: a stall (it cleared: records came after it)
    const wd = this.lastTs === null || ts >= this.lastTs ? this.watchdogStallIn(this.lastTs, ts) : null;
    if (this.lastTs !== null && (ts - this.lastTs > this.stallS * 1000 || wd)) {
      this.add({
        kind: 'stall',
        segment: seg.index,
        step: this.lastStepSeen,
        stepTo: step,
        ts: this.lastTs,
        tsTo: ts,
        gapS: (ts - this.lastTs) / 1000,
        ...(wd && wd.rank !== null ? { rank: wd.rank } : {}),
        text: `no heartbeat for ${dur((ts - this.lastTs) / 1000)} after step ${this.lastStepSeen ?? 0} (${iso(this.lastTs)} → ${iso(ts)}), then it went on${wd ? `; watchdog: ${wd.title} at ${iso(wd.ts)}` : ''}`,
      });
    }
    if (this.lastTs === null || ts >= this.lastTs) this.lastTs = ts;
    seg.endTs = Math.max(seg.endTs ?? ts, ts);
    if (step !== null && step > 0) {
      seg.firstStep ??= step;
      seg.lastStep = Math.max(seg.lastStep ?? step, step);
      this.lastStepSeen = step;
    }
    if (msg === 'progress' && step !== null) {
      const loss = o.loss;
      const nonFinite =
        (typeof loss === 'number' && !Number.isFinite(loss)) ||
        (typeof loss === 'string' && /^-?(NaN|Infinity)$/.test(loss));
      this.lastLossNonFinite = nonFinite;
      if (nonFinite)
        this.add({
          kind: 'non-finite',
          segment: seg.index,
          step,
          ts,
          text: `loss ${String(loss)} at step ${step} (${iso(ts)})`,
        });
      const last = this.progressTimes[this.progressTimes.length - 1];
      if (last && step <= last.step) this.progressTimes = [];
      this.progressTimes.push({ step, t: ts });
      if (this.progressTimes.length > MAX_PROGRESS_TIMES)
        this.progressTimes.splice(0, this.progressTimes.length - MAX_PROGRESS_TIMES / 2);
    }
    if (this.cur === seg && msg === 'progress') seg.end = this.lastLossNonFinite ? 'non-finite' : 'current';
  }

  /** Close: how each earlier segment ended, given the log's processes (aligned from the end) and the configured total. */
  finish(logProcs: LogProc[], total: number | null, ev?: StopEvidence): HistorySegment[] {
    const n = this.segs.length;
    const off = logProcs.length - n;
    for (let i = 0; i < n; i++) {
      const s = this.segs[i]!;
      const lp = off + i >= 0 ? logProcs[off + i] : undefined;
      if (lp)
        for (const f of lp.ckptFailed)
          this.add({ kind: 'checkpoint-failed', segment: i, step: f.step, ts: null, text: f.text });
      const stop = ev ? this.stopOf(s, this.segs[i + 1]?.startTs ?? null, ev, i === n - 1) : null;
      s.stopSignal = stop?.signal ?? null;
      if (i === n - 1) {
        s.end = 'current';
        s.endWhy = ['the current process', stop?.why, lp?.killed ? `log: ${lp.killed}` : null]
          .filter(Boolean)
          .join('; ');
        continue;
      }
      const next = this.segs[i + 1]!;
      const nextLog = off + i + 1 >= 0 ? logProcs[off + i + 1] : undefined;
      // the rank the supervisor saw go first, for a process that died (a halt or a finish has none)
      const g = lp?.firstGone;
      const first =
        g && !(lp?.halt || stop?.halt || stop?.signal)
          ? `after rank ${g.rank} died first${g.how ? ` (${g.how})` : ''}, seen by the supervisor, `
          : '';
      const restart = `restarted ${next.startTs !== null && s.endTs !== null ? `${dur((next.startTs - s.endTs) / 1000)} later ` : ''}${first}as segment #${next.index}${next.pid !== null ? ` (pid ${next.pid})` : ''}, step count from ${next.firstStep ?? 1}${nextLog?.resumedFrom ? `, weights from ${nextLog.resumedFrom}` : ''}`;
      if (stop?.signal) {
        // a halt that went unanswered: neither a graceful halt nor a crash
        s.end = 'halted';
        s.endWhy = `${stop.why}; ${restart}`;
      } else if (lp?.halt) {
        s.end = 'halted';
        s.endWhy = `stopped by .HALT (log: "HALT file detected"); ${restart}`;
      } else if (stop?.halt) {
        s.end = 'halted';
        s.endWhy = `${stop.why}; ${restart}`;
      } else if (lp?.fatal || s.end === 'non-finite') {
        s.end = 'non-finite';
        s.endWhy = `aborted on a non-finite loss; ${restart}`;
      } else if (total !== null && s.lastStep !== null && s.lastStep >= total) {
        s.end = 'finished';
        s.endWhy = `reached step ${s.lastStep} of ${total}; ${restart}`;
      } else {
        s.end = 'crashed';
        // with no log for this process a .HALT cannot be ruled out: an unexplained stop is judged a
        // crash (an acceptance gate passes only what it can show), and says so
        // (no "of N": the configured total now may not be the one this process ran with)
        s.endWhy = `ended at step ${s.lastStep ?? 0} without finishing, a .HALT or a non-finite loss${lp?.killed ? ` (${lp.killed})` : ''}${lp ? '' : ' (no log covers it: taken as a crash)'}; ${restart}`;
        this.add({
          kind: 'crash',
          segment: i,
          step: s.lastStep,
          ts: s.endTs,
          ...(g ? { rank: g.rank } : {}),
          text: `segment #${i}${s.pid !== null ? ` (pid ${s.pid})` : ''}, steps ${s.firstStep ?? 0}–${s.lastStep ?? 0} (${iso(s.startTs)} → ${iso(s.endTs)}), crashed: ${s.endWhy}`,
        });
      }
    }
    return this.segs;
  }

  /**
   * How segment `s` was stopped, from nsa-top's records between its first record and the next
   * segment's start (`until`; open for the last): an operator/supervisor halt, the escalation
   * that followed it, and a stall that was still on when it was stopped (recorded as a stall event:
   * a stall that a halt ended is still a stall).
   */
  private stopOf(
    s: HistorySegment,
    until: number | null,
    ev: StopEvidence,
    last: boolean,
  ): { halt: boolean; signal: 'SIGINT' | 'SIGKILL' | null; why: string | null } | null {
    const from = s.startTs ?? -Infinity;
    const end = s.endTs ?? from;
    const inSeg = (ts: number) => ts >= from && (until === null || ts < until);
    const evs = ev.events.filter((e) => inSeg(e.ts));
    const halt = evs.find((e) => e.kind === 'halt' && e.ts >= end - 60_000) ?? null;
    const kill = evs.filter((e) => e.kind === 'escalate-sigkill').at(-1);
    const int = evs.filter((e) => e.kind === 'escalate-sigint').at(-1);
    const esc = kill ?? int ?? null;
    const signal = kill ? 'SIGKILL' : int ? 'SIGINT' : null;
    if (!halt && !esc) return null;
    const by = (e: { who: string | null; ts: number; source: string }) =>
      `${e.who ? `by ${e.who} ` : ''}at ${iso(e.ts)} (${e.source})`;
    let why = halt ? `stopped by nsa-top's halt ${by(halt)}` : `stopped by ${signal} ${by(esc!)}`;
    if (halt && esc)
      why = `stopped by ${signal}: .HALT ${by(halt)} went unanswered for ${dur((esc.ts - halt.ts) / 1000)}, then ${signal} ${by(esc)}`;
    // a stall still on when it was stopped: the watchdog said so after the last record, or the
    // ranks wrote nothing from .HALT until the signal that ended them
    const stopTs = esc?.ts ?? halt?.ts ?? end;
    const wd = ev.stalls.filter((x) => x.ts > end && inSeg(x.ts));
    const silentThroughHalt = !!(halt && esc && end < halt.ts);
    if (wd.length || silentThroughHalt) {
      const rank = wd.find((x) => x.rank !== null)?.rank ?? null;
      const dumps = (ev.dumps ?? []).filter((d) => d.ts >= end && d.ts <= stopTs + 5000);
      const ranks = [...new Set(dumps.map((d) => d.rank).filter((r): r is number => r !== null))].sort((a, b) => a - b);
      const parts = [
        `no heartbeat for ${dur((stopTs - end) / 1000)} after step ${s.lastStep ?? 0} (${iso(end)} → ${iso(stopTs)}), until it was stopped`,
        rank !== null ? `rank ${rank} named by the watchdog` : null,
        wd.length ? `watchdog: ${wd[0]!.title} at ${iso(wd[0]!.ts)}` : null,
        dumps.length
          ? `${dumps.length} stack dump(s)${ranks.length ? ` of rank ${ranks.join(', rank ')}` : ''} taken during it`
          : null,
        signal ? `${signal} was needed: ${why.replace(/^stopped by \w+: /, '')}` : null,
        last && ev.metricsEnded ? `metrics.json: "ended": "${ev.metricsEnded}"` : null,
      ].filter(Boolean);
      this.add({
        kind: 'stall',
        segment: s.index,
        step: s.lastStep,
        stepTo: null,
        ts: end,
        tsTo: stopTs,
        gapS: (stopTs - end) / 1000,
        atStop: true,
        rank,
        text: `stalled at step ${s.lastStep ?? 0}${rank !== null ? ` (rank ${rank})` : ''} and never recovered: ${parts.join('; ')}`,
      });
    }
    return { halt: !!halt, signal, why };
  }
}

/** Folds the trainer's log into its processes (one per `[boot] loading config`). */
export class LogFold {
  readonly procs: LogProc[] = [];
  /** the newest `[train] dataset=X` */
  dataset: string | null = null;
  private fresh(): LogProc {
    return { trained: false, resumedFrom: null, halt: false, fatal: false, ckptFailed: [], killed: null };
  }
  private cur(): LogProc {
    if (!this.procs.length) this.procs.push(this.fresh());
    return this.procs[this.procs.length - 1]!;
  }
  line(text: string): void {
    if (RE_LOG_LAUNCHER.test(text)) {
      // the reference launcher names each launch once: its ranks' boot lines (printed in any
      // order, one rank may already train) all belong to it
      this.procs.push({ ...this.fresh(), launcher: true });
      return;
    }
    if (RE_LOG_BOOT.test(text)) {
      // the other ranks of the same launch print theirs too, before anything trains
      if (!this.procs.length || (this.cur().trained && !this.cur().launcher)) this.procs.push(this.fresh());
      return;
    }
    if (text.length > 4000) return;
    if (RE_LOG_TRAINING.test(text)) this.cur().trained = true;
    let m: RegExpExecArray | null;
    if ((m = RE_LOG_DATASET.exec(text))) this.dataset = m[1]!;
    if ((m = RE_LOG_RESUMED.exec(text))) this.cur().resumedFrom ??= m[1]!.trim().slice(0, 300);
    else if (RE_LOG_HALT.test(text)) this.cur().halt = true;
    else if (RE_LOG_FATAL.test(text)) this.cur().fatal = true;
    else if ((m = RE_LOG_CKPT_FAIL.exec(text))) {
      const p = this.cur();
      if (p.ckptFailed.length < MAX_EVENTS) p.ckptFailed.push({ step: Number(m[1]), text: text.trim().slice(0, 300) });
    } else if ((m = RE_LOG_SUMMARY_RANK.exec(text))) this.cur().summaryRank = Number(m[1]);
    else if ((m = RE_LOG_SIGNAL.exec(text))) {
      const r = this.cur().summaryRank;
      this.cur().killed ??= `${r !== null && r !== undefined ? `rank ${r} (pid ${m[3]})` : `rank pid ${m[3]}`} killed by ${m[2]}`;
    } else if ((m = RE_LOG_RANK_EXIT.exec(text)))
      this.cur().killed ??= `rank ${m[1]} (pid ${m[2]}) exited with ${m[3]}`;
    else if ((m = RE_LOG_FIRST_GONE.exec(text)))
      this.cur().firstGone = { rank: Number(m[1]), pid: Number(m[2]), how: m[3] ?? null };
  }
}

async function streamLines(
  host: Host,
  path: string,
  cb: (line: string) => void,
): Promise<{ bytes: number; error: string | null }> {
  const st = await host.stat(path);
  if (!st) return { bytes: 0, error: null };
  if (!st.isFile) return { bytes: 0, error: `${path} is not a regular file` };
  const split = new LineSplitter(DEFAULT_MAX_LINE);
  const cbs = { line: cb, error: () => {} };
  let pos = 0;
  while (pos < st.size) {
    const end = Math.min(st.size, pos + CHUNK);
    const buf = await host.readRange(path, pos, end);
    if (buf.length === 0) break;
    split.push(buf, cbs);
    pos += buf.length;
  }
  split.flushPartial(cbs);
  return { bytes: pos, error: null };
}

/**
 * Read rank 0's heartbeat file and the trainer's log from start to end. `stallS`: the stall
 * threshold in force; `total`: the configured step count (to tell a finished segment).
 */
export async function readRunHistory(
  host: Host,
  o: { heartbeat: string | null; log: string | null; stallS: number; total: number | null; stop?: StopEvidence },
): Promise<RunHistory> {
  const fold = new HistoryFold(o.stallS, o.stop?.stalls);
  const logFold = new LogFold();
  let bytes = 0;
  let error: string | null = null;
  for (const [path, f] of [
    [o.heartbeat, (l: string) => fold.line(l)],
    [o.log, (l: string) => logFold.line(l)],
  ] as const) {
    if (!path) continue;
    try {
      const r = await streamLines(host, path, f);
      bytes += r.bytes;
      error ??= r.error;
    } catch (e) {
      error ??= `${path}: ${(e as Error).message}`;
    }
  }
  const segments = fold.finish(logFold.procs, o.total, o.stop);
  return {
    complete: error === null,
    error,
    bytes,
    records: fold.records,
    segments,
    events: fold.events,
    counts: fold.counts,
    progressTimes: fold.progressTimes,
    logDataset: logFold.dataset,
  };
}

function iso(ms: number | null): string {
  return ms === null ? '?' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
