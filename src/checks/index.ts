// src/checks: snapshots in, judgements out. The TUI, `nsa-top watchdog` and `nsa-top report` all
// call Checker.evaluate, so they can never disagree. Pure: no I/O here (the command modules do it).
import type { RunState } from './types.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import { buildCtx, type CheckInput, type Ctx } from './context.js';
import { gatesView, gpuHealth, rankHealth } from './present.js';
import {
  hangVerdicts,
  oddRankFromDumps,
  ruleAnomalyFile,
  ruleUnreadable,
  ruleData,
  ruleExited,
  ruleExitHang,
  ruleGates,
  ruleGradNorm,
  ruleHalt,
  ruleIdentity,
  ruleLoss,
  ruleMemory,
  ruleProcesses,
  refutedByTable,
  ruleStall,
  ruleThroughput,
  stallInfo,
  type Draft,
  type MemSample,
} from './rules/index.js';
import { bootPhase, heldByBoot, ruleBoot } from './boot.js';
import { deriveRunState, STATE_HEALTH, staleVerdict } from './runstate.js';
import { asOfView, blindView } from './view.js';
import { waitsForFile } from './waits.js';
import { ruleSupervisor, supersededBy } from './supervisor.js';
import { byCodeUnit } from '../format.js';
import { ruleDivergence } from './divergence.js';
import { ruleStopEscalated } from './stopped.js';
import { foldIntoHostMem, HostSeries, isRankRssLeak, ruleHostResources } from './rules/hostres.js';
import { DEFAULT_THRESHOLDS, type Thresholds } from './thresholds.js';
import { ruleStraggler, StragglerTracker, type StragglerView } from './straggler.js';
import { operatorNumbers, ruleRestartStorm, type OperatorNumbers } from './numbers.js';
import type {
  Alert,
  ClearedAlert,
  Culprit,
  GatesView,
  GpuHealth,
  HangVerdict,
  Health,
  RankHealth,
  Severity,
} from './types.js';

export type { CheckInput, Launched } from './context.js';
export type { Thresholds } from './thresholds.js';
export { DEFAULT_THRESHOLDS, maxGateEntropyBound, thresholdsFromEnv } from './thresholds.js';
export { launchedFromRunInfo } from './launched.js';
export type * from './types.js';
export { haltOutlook } from './present.js';
export { stragglerFields, type RankPace, type StragglerView } from './straggler.js';
export { numbersLine, type Mfu, type OperatorNumbers } from './numbers.js';
export { BOOT_STATES, STATE_HEALTH, staleVerdict } from './runstate.js';
export { blindView, type ViewAge } from './view.js';
export {
  actionVerdicts,
  newestHeartbeatAgeS,
  relaunchWantsSteps,
  type ActionInput,
  type ActionVerdicts,
  type Verdict,
} from './actions.js';

export interface Evaluation {
  /** alerts in force (critical first, then newest), including those clearing under hysteresis */
  alerts: Alert[];
  /** the timeline of alerts whose condition cleared, newest first (bounded; empty for a one-shot) */
  history: ClearedAlert[];
  verdicts: HangVerdict[];
  runState: RunState;
  runStateWhy: string;
  /** "watchdog would halt in k checks" for the gate rule; null when not counting down */
  gateHaltIn: number | null;
  /** the stall threshold in force, s (max(floor, factor × expected interval)) */
  stallThresholdS: number;
  /** expected seconds between rank-0 heartbeats from the run's own cadence; null until known */
  expectedIntervalS: number | null;
  /** ms epoch at which the watchdog's stall threshold is crossed if nothing advances; null when the run is not live */
  stallDeadline: number | null;
  /** how the state is to be shown */
  stateHealth: Health;
  /** the rank the evidence names when the run does not advance */
  culprit: Culprit | null;
  /** the run advances: step rate and ETA mean something */
  advancing: boolean;
  /** the step has not advanced since (ms) and the run is meant to be moving: "no step for …"; null otherwise */
  noStepSinceMs: number | null;
  /** per-rank health for the Ranks panel */
  ranks: RankHealth[];
  /** which rank holds the others back: per-rank score (1 = fastest), min/max, the named straggler
   *  (src/checks/straggler.ts); the metrics' nsatop_straggler_score{rank} reads ranks[].score */
  straggler: StragglerView;
  /** MFU with its arithmetic and assumed peak ("unknown peak" said), restarts and storm, the newest
   *  checkpoint's age (src/checks/numbers.ts) */
  numbers: OperatorNumbers;
  /** gate readings against the thresholds in force; null without gate stats */
  gates: GatesView | null;
  /** each GPU's readings judged, for the GPUs panel */
  gpus: GpuHealth[];
  /** the odd rank of the stack dumps taken since the step froze (the rule's answer; the Dumps panel marks it) */
  dumpOdd: { rank: number; where: string; others: string } | null;
  /** the critical alerts the watchdog acts on (.anomaly_type, dumps, .HALT): conditions that hold now
   *  (not clearing), past its action threshold — the stall floor (NSA_WATCH_HEARTBEAT_STALL_S) — which
   *  is not what the operator sees */
  actOn: Alert[];
}

const SEV_ORDER: Record<Severity, number> = { critical: 0, warning: 1, info: 2 };

/** Alerts ordered for display: critical first, then newest first. */
export function sortAlerts(alerts: Alert[]): Alert[] {
  return [...alerts].sort(
    (x, y) => SEV_ORDER[x.severity] - SEV_ORDER[y.severity] || y.since - x.since || byCodeUnit(x.id, y.id),
  );
}

const MAX_MEM_SAMPLES = 240;

export class Checker {
  readonly thresholds: Thresholds;
  /** per alert id: what is shown, when its condition was last seen, and how long it has been clear */
  private shown = new Map<string, { alert: Alert; lastSeen: number; absent: number; clearingSince: number | null }>();
  private history: ClearedAlert[] = [];
  /** the history as last handed out: the same array while it has not changed, so a recorder that
   *  diffs each round's Evaluation compares it by reference (entries are only ever unshifted) */
  private historyOut: {
    src: ClearedAlert[];
    len: number;
    first: ClearedAlert | undefined;
    copy: ClearedAlert[];
  } | null = null;
  /** per `${rank}:${source}`: memory samples by step (process RSS, rss_mib, rank heartbeat memory) */
  private mem = new Map<string, MemSample[]>();
  private lastRunDir: string | null = null;
  /** the state last judged on data fresh enough to judge (what STALE says was last seen) */
  private lastSeen: { state: RunState; why: string } | null = null;
  /** the host's RAM and disk readings over time (the host rules fit a trend) */
  private hostSeries = new HostSeries();
  private strag = new StragglerTracker();

  constructor(t?: Partial<Thresholds>) {
    this.thresholds = { ...DEFAULT_THRESHOLDS, ...(t ?? {}) };
  }

  /** call once per refresh; keeps bounded history internally (consecutive counts, rolling medians, `since`) */
  evaluate(input: CheckInput): Evaluation {
    const blind = blindView(input);
    if (blind) return this.evaluateBlind(input, blind);
    const ev = this.judge(input.view ? asOfView(input) : input);
    this.lastSeen = { state: ev.runState, why: ev.runStateWhy };
    return ev;
  }

  /**
   * Data too old to judge (a gap in our view, src/checks/view.ts): the data is judged as of when it
   * was read, so the panels keep what was seen, but the state is STALE with the data's age, the
   * watchdog is given nothing to act on, and the Checker keeps nothing of it — the alerts, their
   * hysteresis and the history are as they were before the gap.
   */
  private evaluateBlind(input: CheckInput, blind: { ageS: number; cause: string }): Evaluation {
    const shown = new Map([...this.shown].map(([k, e]) => [k, { ...e }]));
    const history = this.history.slice();
    const mem = new Map([...this.mem].map(([k, v]) => [k, v.slice()]));
    const lastRunDir = this.lastRunDir;
    let ev: Evaluation;
    try {
      ev = this.judge(asOfView(input));
    } finally {
      this.shown = shown;
      this.history = history;
      this.mem = mem;
      this.lastRunDir = lastRunDir;
    }
    const v = staleVerdict(this.lastSeen, blind.ageS, blind.cause);
    return {
      ...ev,
      history: history.slice(),
      runState: v.state,
      runStateWhy: v.why,
      stateHealth: STATE_HEALTH[v.state],
      culprit: null,
      advancing: false,
      noStepSinceMs: null,
      actOn: [],
      gateHaltIn: null,
      stallDeadline: null,
    };
  }

  private historyView(): ClearedAlert[] {
    const h = this.history;
    const o = this.historyOut;
    if (o && o.src === h && o.len === h.length && o.first === h[0]) return o.copy;
    const copy = Object.freeze(h.slice()) as ClearedAlert[];
    this.historyOut = { src: h, len: h.length, first: h[0], copy };
    return copy;
  }

  private judge(input: CheckInput): Evaluation {
    if (this.lastRunDir !== null && this.lastRunDir !== input.run.runDir) {
      this.shown.clear();
      this.history = [];
      this.mem.clear();
      this.hostSeries.clear();
      this.strag.reset();
    }
    this.lastRunDir = input.run.runDir;
    const ctx = buildCtx(input, this.thresholds);
    this.sampleMemory(ctx);
    this.hostSeries.add(input.hostStats);
    const si = stallInfo(ctx);
    const gates = ruleGates(ctx);
    const boot = bootPhase(ctx, si);
    // a restarting, booting or broken group has no straggler: its ranks are not stepping together
    const stragglerHold = boot
      ? `the run is ${boot.state}`
      : si.dead.length
        ? `rank ${si.dead.map((d) => d.rank).join(',')} process gone`
        : null;
    const straggler = this.strag.view(ctx, stragglerHold);
    if (stragglerHold) this.settle((id) => id.startsWith('straggler:'), ctx.now);
    const numbers = operatorNumbers(ctx);
    const all: Draft[] = foldIntoHostMem([
      ...ruleStall(ctx, si),
      ...ruleProcesses(ctx, si),
      ...ruleHalt(ctx),
      ...ruleAnomalyFile(ctx),
      ...ruleUnreadable(ctx),
      ...ruleExited(ctx),
      ...ruleExitHang(ctx),
      ...ruleThroughput(ctx),
      ...ruleIdentity(ctx),
      ...ruleLoss(ctx),
      ...gates.alerts,
      ...ruleData(ctx),
      ...ruleMemory(ctx, this.mem),
      ...ruleGradNorm(ctx),
      ...ruleSupervisor(ctx, si.hung),
      ...ruleBoot(boot),
      ...ruleDivergence(ctx),
      ...ruleStopEscalated(ctx),
      ...ruleHostResources(ctx, this.hostSeries),
      ...ruleStraggler(straggler),
      ...ruleRestartStorm(ctx, numbers),
    ]);
    // a boot in progress holds the stall and run-ended alerts (nothing steps or lives yet, by
    // design); alerts that need a file the trainer has not written yet wait for it
    const drafts = all.filter((d) => !(boot && heldByBoot(boot, d.id)) && waitsForFile(ctx, d.id) === null);
    if (boot) this.settle((id) => heldByBoot(boot, id), ctx.now);
    const alerts = this.stamp(drafts, ctx.now, refutedByTable(ctx, si));
    const rs = deriveRunState(ctx, si, boot);
    // a boot within its budget is not a hang: no hang diagnosis to give
    const verdicts = boot && !boot.over ? [] : hangVerdicts(ctx, si);
    const sorted = sortAlerts(alerts);
    const lastAdvance = ctx.lastAdvanceTs;
    return {
      alerts: sorted,
      history: this.historyView(),
      verdicts,
      runState: rs.state,
      runStateWhy: rs.why,
      stateHealth: STATE_HEALTH[rs.state],
      culprit: rs.culprit,
      advancing: rs.state === 'RUNNING',
      noStepSinceMs:
        (rs.state === 'STALLED' || rs.state === 'HALTING') && lastAdvance !== null && (ctx.run.step ?? 0) > 0
          ? lastAdvance
          : null,
      ranks: rankHealth(ctx, si, rs.state, alerts, verdicts, rs.culprit),
      straggler,
      numbers,
      gates: gatesView(ctx, gates.haltIn, alerts),
      gpus: gpuHealth(ctx),
      dumpOdd: si.overdue ? oddRankFromDumps(ctx) : null,
      actOn: sorted.filter(
        (x) =>
          x.severity === 'critical' &&
          !!x.anomaly &&
          x.clearing === undefined &&
          !x.id.startsWith('anomaly-file:') &&
          (x.id !== 'stall:run' || si.runStalled),
      ),
      gateHaltIn: gates.haltIn,
      stallThresholdS: ctx.cadence.thresholdS,
      expectedIntervalS: ctx.cadence.expectedS,
      stallDeadline:
        boot && !boot.backoff && boot.since !== null
          ? boot.since + boot.budgetS * 1000
          : si.live && ctx.lastAdvanceTs !== null
            ? ctx.lastAdvanceTs + ctx.cadence.thresholdS * 1000
            : null,
    };
  }

  /**
   * Alerts a new fact has made untrue (a restart's boot settles the stall and the "run ended" of
   * the trainer it replaces): they go to the timeline now, not through the hysteresis of a
   * condition that merely flickered.
   */
  private settle(which: (id: string) => boolean, now: number): void {
    for (const [id, e] of [...this.shown]) {
      if (!which(id)) continue;
      this.shown.delete(id);
      this.history.unshift({ ...e.alert, cleared: e.clearingSince ?? now });
    }
    if (this.history.length > this.thresholds.alertHistoryMax) this.history.length = this.thresholds.alertHistoryMax;
  }

  /**
   * `since`: the data's own time when a rule knows it, else when this Checker first saw the condition.
   * Hysteresis, once for every rule: an alert whose condition is no longer seen (or is seen only at a
   * lower severity) stays as it was last seen, marked `clearing`, until the condition has stayed away
   * for alertClearChecks evaluations and alertClearS seconds; if it comes back meanwhile the alert
   * goes on with its first `since`. A cleared episode goes to the timeline (`history`). An alert in
   * `refuted` — its condition proven untrue, not merely unseen (a stopped rank the process table shows
   * running again) — goes to the timeline at once.
   */
  private stamp(drafts: Draft[], now: number, refuted: ReadonlySet<string> = new Set()): Alert[] {
    const seen = new Set<string>();
    const out: Alert[] = [];
    const t = this.thresholds;
    const done = (e: { lastSeen: number; absent: number }) =>
      e.absent >= t.alertClearChecks && now - e.lastSeen >= t.alertClearS * 1000;
    const clear = (a: Alert, at: number) => {
      const { clearing: _c, ...rest } = a;
      this.history.unshift({ ...rest, cleared: at });
      if (this.history.length > t.alertHistoryMax) this.history.length = t.alertHistoryMax;
    };
    for (const d of drafts) {
      if (seen.has(d.id)) continue;
      seen.add(d.id);
      const prev = this.shown.get(d.id);
      const prevSince = prev?.alert.since;
      const since =
        d.since !== undefined && Number.isFinite(d.since)
          ? Math.min(d.since, prevSince ?? d.since)
          : (prevSince ?? now);
      const alert: Alert = { ...d, since };
      for (const k of ['step', 'rank', 'anomaly'] as const) if (alert[k] === undefined) delete alert[k];
      if (prev && SEV_ORDER[d.severity] > SEV_ORDER[prev.alert.severity]) {
        // seen only at a lower severity: the higher one is clearing
        prev.absent++;
        prev.clearingSince ??= now;
        if (!done(prev)) {
          out.push({ ...prev.alert, clearing: prev.clearingSince });
          continue;
        }
        clear(prev.alert, prev.clearingSince);
      }
      this.shown.set(d.id, { alert, lastSeen: now, absent: 0, clearingSince: null });
      out.push(alert);
    }
    // alerts a present one makes untrue go at once (to the timeline), without hysteresis
    for (const id of seen)
      for (const gone of [
        ...supersededBy(id),
        // host RAM running out names the ranks that grow: their own alerts go to the timeline now
        ...(id === 'host-mem' ? [...this.shown.keys()].filter(isRankRssLeak) : []),
      ]) {
        const e = this.shown.get(gone);
        if (!e || seen.has(gone)) continue;
        this.shown.delete(gone);
        clear(e.alert, now);
      }
    for (const [id, e] of [...this.shown]) {
      if (seen.has(id)) continue;
      e.absent++;
      e.clearingSince ??= now;
      if (done(e) || refuted.has(id)) {
        this.shown.delete(id);
        clear(e.alert, e.clearingSince);
      } else out.push({ ...e.alert, clearing: e.clearingSince });
    }
    return out;
  }

  private sampleMemory(ctx: Ctx): void {
    const step = ctx.run.step;
    if (step === null) return;
    const push = (key: string, s: number, mib: number | null | undefined) => {
      if (mib === null || mib === undefined || !Number.isFinite(mib)) return;
      let arr = this.mem.get(key);
      if (!arr) this.mem.set(key, (arr = []));
      const last = arr[arr.length - 1];
      if (last && s < last.step) arr.length = 0; // resumed or relaunched: a new series
      if (last && last.step === s && arr.length) {
        arr[arr.length - 1] = { step: s, mib };
        return;
      }
      arr.push({ step: s, mib });
      if (arr.length > MAX_MEM_SAMPLES) arr.splice(0, arr.length - MAX_MEM_SAMPLES);
    };
    for (const r of ctx.alive) if (r.proc.rssKiB !== null) push(`${r.rank}:process RSS`, step, r.proc.rssKiB / 1024);
    const lp = ctx.run.lastProgress;
    const rss = lp?.extra?.['rss_mib'];
    if (lp && typeof rss === 'number') push(`${lp.rank}:rss_mib`, lp.step, rss);
    for (const r of ctx.ranks) {
      if (r.rank === 0) continue; // rank 0's heartbeat memory is a full series in the snapshot
      if (r.lastStep !== null && r.lastStep > 0) push(`${r.rank}:gpu_mem_reserved`, r.lastStep, r.memReservedMiB);
    }
  }
}

/** One-shot evaluation (no history): for `report` and tests. */
export function evaluateOnce(input: CheckInput, t?: Partial<Thresholds>): Evaluation {
  return new Checker(t).evaluate(input);
}

/** an alert's fields as `status --json` and the watchdog's `alert` lines give them */
export function alertFields(a: Alert) {
  return {
    id: a.id,
    rule: a.rule,
    severity: a.severity,
    title: a.title,
    detail: a.detail,
    since: a.since,
    step: a.step ?? null,
    rank: a.rank ?? null,
  };
}

const DEAD = new Set<RunState>(['STALLED', 'EXITED', 'NO TRAINER']);

/**
 * The exit code of `status` and `watchdog --once`: 0 healthy (running, finished, halted on
 * request), 1 an anomaly (any critical alert), a stall or a dead run.
 */
export function healthExit(ev: Evaluation): 0 | 1 {
  return ev.alerts.some((a) => a.severity === 'critical') || DEAD.has(ev.runState) ? 1 : 0;
}

/**
 * Why a snapshot cannot be judged at all (exit 2), or null: the dir is gone, holds no run artifact,
 * or nothing in it could be read.
 */
export function unjudgeable(run: RunSnapshot, outDir: string): string | null {
  if (!run.exists) return `cannot read run dir ${outDir}: ${run.error ?? 'missing'}`;
  const files = Object.entries(run.files);
  if (files.length === 0 && run.checkpoints.length === 0 && !run.tb.present) {
    return `${outDir} holds no run artifacts (no heartbeat_rank*.jsonl, training.csv, env.json, checkpoint or tb/)`;
  }
  const readable = files.filter(([, h]) => h.records > 0 || (h.lastError === null && h.size === 0));
  if (files.length > 0 && readable.length === 0 && files.every(([, h]) => h.lastError)) {
    const [name, h] = files[0]!;
    return `cannot read the run's files in ${outDir} (${name}: ${h.lastError}${files.length > 1 ? `, and ${files.length - 1} more` : ''})`;
  }
  return null;
}
