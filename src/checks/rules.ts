// The watchdog rules. Each is a pure function of the evaluation context (and, for the few that need
// more than one snapshot, the Checker's bounded history). Each alert says what, since when and why.
import type { ProcState, RankProc } from '../remote/types.js';
import type { RunSnapshot, Series, SeriesPoint, StackDump } from '../trainer/run/snapshot.js';
import type { Alert, HangVerdict, Severity } from './types.js';
import type { Ctx } from './context.js';
import { maxGateEntropyBound, type Thresholds } from './thresholds.js';
import { claims125m, configBasename, cpuPeak, flopsPerToken, gpuPeak, isToyModel, knownConfig } from './flops.js';
import { dur, pct, sig } from '../format.js';
import { currentSegment, linfit, median } from './stats.js';
import { dumpPlace, dumpTimeMs } from '../trainer/run/readers/stackdump.js';

export type Draft = Omit<Alert, 'since'> & { since?: number };

export const LN3 = Math.log(3);

function a(
  id: string,
  rule: string,
  severity: Severity,
  title: string,
  detail: string,
  extra: Partial<Draft> = {},
): Draft {
  return { id, rule, severity, title, detail, ...extra };
}

const ago = (ctx: Ctx, ts: number) => dur(Math.max(0, (ctx.now - ts) / 1000), 'precise');

// ---------------------------------------------------------------------------------------------
// Liveness: stall per rank and for the run; "step advanced" ≠ "heartbeat written" ≠ "process alive"

export interface StallInfo {
  /** the run-level step has not advanced for longer than the stall threshold: the watchdog's action threshold
   *  (max(floor, factor × cadence); the 180 s floor and NSA_WATCH_HEARTBEAT_STALL_S govern it) */
  runStalled: boolean;
  /** the step is overdue by the run's own cadence (max(lateFactor × expected, lateFloorS), never later than
   *  the stall threshold): what the operator sees — the run is not advancing */
  overdue: boolean;
  /** seconds after the last advance at which the step is overdue */
  overdueS: number;
  frozenS: number | null;
  /** ranks whose own per-step heartbeat stopped (only ranks that write per-step records) */
  stalledRanks: number[];
  /** the rank that lags the others (lowest last step among per-step writers) when one does */
  oddRank: number | null;
  /** live rank processes stopped (T) or traced (t): they can never reach their next collective */
  stopped: RankProc[];
  /** ranks of this launch whose process is gone or a zombie while others still run */
  dead: { rank: number; zombie: boolean }[];
  /** the last advance was at a save/eval step (or a checkpoint is being written): a routine pause */
  pause: PauseInfo | null;
  /** the run is live enough for a stall to mean something */
  live: boolean;
  /** evidence says the run is not advancing: overdue, a stopped rank, or a dead one */
  hung: boolean;
}

/** Seconds without a step advance after which a run is overdue by its own cadence (the state leaves RUNNING). */
export function overdueAfterS(ctx: Ctx): number {
  const { cadence } = ctx;
  if (cadence.expectedS === null) return cadence.thresholdS;
  return Math.min(cadence.thresholdS, Math.max(ctx.t.lateFactor * cadence.expectedS, ctx.t.lateFloorS));
}

export interface PauseInfo {
  /** what the trainer does between this step and the next heartbeat, e.g. "saving checkpoint_step2000.pt (save_every 2000)" */
  what: string;
  /** the step whose save/eval it is */
  step: number;
  /** seconds after the last advance at which the step is overdue during this pause */
  allowS: number;
  /** the longest such pause measured earlier in this segment, s (null: none measured) */
  measuredS: number | null;
}

/**
 * The real trainer saves `checkpoint_step{N}.pt` on rank 0 when N % save_every == 0 and evaluates when
 * N % eval_every == 0 (at a log step), both AFTER step N's progress/step_end heartbeat: the heartbeat
 * says nothing meanwhile (contract §1.14). A save in any step before the next heartbeat delays it too.
 * Also a checkpoint file newer than the last advance and not yet settled: being written now.
 */
export function pauseAt(ctx: Ctx): PauseInfo | null {
  const { run, cadence } = ctx;
  const last = ctx.lastAdvanceTs;
  if (last === null) return null;
  let n = run.step ?? 0;
  for (const r of ctx.ranks) if (r.lastStep !== null && r.lastStep > n) n = r.lastStep;
  if (n <= 0) return null;
  const stride = cadence.beat ? 1 : Math.max(1, Math.round(cadence.logEvery ?? 1));
  const total = run.totalSteps ?? Infinity;
  const saveEvery = run.identity.train?.saveEvery ?? 0;
  const evalEvery = run.identity.train?.evalEvery ?? 0;
  let saveStep: number | null = null;
  if (saveEvery > 0) {
    const s = Math.ceil(n / saveEvery) * saveEvery;
    if (s < n + stride && s <= total) saveStep = s;
  }
  const evalStep = evalEvery > 0 && n % evalEvery === 0 ? n : null;
  const writing = run.checkpoints
    .filter((c) => c.mtimeMs > last && !c.complete)
    .sort((a, b) => b.mtimeMs - a.mtimeMs)[0];
  // the save step's file already written and settled after the advance: that pause is over
  const saved =
    saveStep !== null ? run.checkpoints.find((c) => c.step === saveStep && c.mtimeMs > last && c.complete) : undefined;
  if (saved && !writing && evalStep === null) return null;
  if (saveStep === null && evalStep === null && !writing) return null;
  const parts: string[] = [];
  if (evalStep !== null) parts.push(`evaluating (eval_every ${evalEvery})`);
  if (writing) parts.push(`writing ${writing.name} (${sig(writing.size / 2 ** 20)} MiB so far)`);
  else if (saveStep !== null && !saved) parts.push(`saving checkpoint_step${saveStep}.pt (save_every ${saveEvery})`);
  if (parts.length === 0) return null;
  // earlier pauses of the same kind: the gap between a heartbeat and the next across a save/eval step,
  // less the run's usual time for those steps
  // training.csv (preferred for loss) has no timestamps: the first series whose points carry them
  let pts: SeriesPoint[] = [];
  for (const ser of [
    run.series.loss,
    run.series.toksPerS,
    run.series.gateEntropy,
    run.series.dtFetchS,
    run.series.memReservedMiB,
  ]) {
    pts = currentSegment(ser).filter((p) => p.t !== null);
    if (pts.length >= 2) break;
  }
  const st = cadence.stepTimeS ?? 0;
  const pauses: number[] = [];
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1]!,
      b = pts[i]!;
    if (b.step <= a.step || b.step > n) continue;
    const hasSave =
      (saveStep !== null || writing) && saveEvery > 0 && Math.ceil(a.step / saveEvery) * saveEvery < b.step;
    const hasEval = evalStep !== null && a.step % evalEvery === 0;
    if (!hasSave && !hasEval) continue;
    pauses.push(Math.max(0, (b.t! - a.t!) / 1000 - (b.step - a.step) * st));
  }
  const measuredS = pauses.length ? Math.max(...pauses.slice(-3)) : null;
  const base = overdueAfterS(ctx);
  const allowS =
    measuredS === null
      ? cadence.thresholdS
      : Math.min(cadence.thresholdS, Math.max(base, base + ctx.t.pauseFactor * measuredS));
  return { what: parts.join(', then '), step: saveStep ?? n, allowS, measuredS };
}

/** Ranks leave at different moments of a normal end, a HALT or a NaN abort: those are not deaths. */
function stopping(ctx: Ctx): boolean {
  return (
    ctx.ended ||
    ctx.run.control.halt.present ||
    ctx.run.control.anomaly?.type === 'nan_loss' ||
    ctx.run.log.fatalNonFinite ||
    ctx.run.log.haltSeen
  );
}

export function stallInfo(ctx: Ctx): StallInfo {
  const { run, cadence } = ctx;
  const live =
    !ctx.ended &&
    !(ctx.procsKnown && ctx.alive.length === 0 && !ctx.launcherAlive) &&
    run.exists &&
    ctx.ranks.length > 0;
  const frozenS = ctx.lastAdvanceTs === null ? null : (ctx.now - ctx.lastAdvanceTs) / 1000;
  const runStalled = live && frozenS !== null && frozenS > cadence.thresholdS;
  const pause = live && frozenS !== null ? pauseAt(ctx) : null;
  const overdueS = pause ? pause.allowS : overdueAfterS(ctx);
  const overdue = live && frozenS !== null && frozenS > overdueS;
  const stalledRanks: number[] = [];
  let oddRank: number | null = null;
  const stopped = live ? ctx.alive.filter((r) => r.proc.state === 'T' || r.proc.state === 't') : [];
  const dead: { rank: number; zombie: boolean }[] = [];
  if (live && ctx.procsKnown && ctx.alive.length > 0 && !stopping(ctx)) {
    const aliveRanks = new Set(ctx.alive.map((r) => r.rank));
    const total = run.totalSteps;
    for (const hb of ctx.ranks) {
      if (aliveRanks.has(hb.rank)) continue;
      if (total !== null && Math.max(run.step ?? 0, hb.lastStep ?? 0) >= total) continue;
      dead.push({ rank: hb.rank, zombie: ctx.in.procs!.ranks.some((r) => r.rank === hb.rank) });
    }
  }
  if (live) {
    // Per-rank: only ranks that write per-step records can be judged on their own heartbeat. Rank 0
    // always writes progress; ranks >= 1 only with `beat` (a boot record alone is routine, §2.7).
    const perStep = ctx.ranks.filter((r) => r.rank === 0 || cadence.beat);
    // one alert per rank only when there is more than one rank to tell apart (else stall:run says it)
    if (cadence.beat && perStep.length > 1)
      for (const r of perStep) {
        const ts = r.lastTs;
        if (ts !== null && (ctx.now - ts) / 1000 > cadence.thresholdS) stalledRanks.push(r.rank);
      }
    if (cadence.beat && perStep.length >= 2) {
      const steps = perStep.map((r) => r.lastStep ?? 0);
      const max = Math.max(...steps);
      const laggards = perStep.filter((r) => (r.lastStep ?? 0) < max);
      if (laggards.length === 1 && overdue) oddRank = laggards[0]!.rank;
    }
    if (oddRank === null && overdue) oddRank = oddRankFromDumps(ctx)?.rank ?? oddRankFromGpus(ctx)?.rank ?? null;
  }
  const hung = overdue || stopped.length > 0 || dead.length > 0;
  return { runStalled, overdue, overdueS, frozenS, stalledRanks, oddRank, stopped, dead, pause, live, hung };
}

/**
 * GPUs of the run: the others busy at idle power (NCCL spinning in the collective) and exactly one
 * idle — the rank on the idle GPU never reached the collective.
 */
export function oddRankFromGpus(ctx: Ctx): { rank: number; gpu: number } | null {
  if (ctx.gpus.length < 2) return null;
  const byUuid = new Map(ctx.alive.filter((r) => r.gpuUuid).map((r) => [r.gpuUuid!, r.rank]));
  if (byUuid.size < 2) return null;
  const spinning = (g: (typeof ctx.gpus)[number]) =>
    g.utilPct !== null &&
    g.utilPct >= ctx.t.spinUtilPct &&
    g.powerW !== null &&
    g.powerLimitW !== null &&
    g.powerW < ctx.t.spinPowerFrac * g.powerLimitW;
  const idle = ctx.gpus.filter((g) => g.utilPct !== null && g.utilPct < 20 && byUuid.has(g.uuid));
  const spin = ctx.gpus.filter(spinning);
  if (idle.length === 1 && spin.length === ctx.gpus.length - 1 && spin.length >= 1)
    return { rank: byUuid.get(idle[0]!.uuid)!, gpu: idle[0]!.index };
  return null;
}

/**
 * Stack dumps taken since the step froze, newest per rank: when every rank but one shows the same
 * place (waiting in the collective) and one shows another, that one is the odd one out.
 */
export function oddRankFromDumps(ctx: Ctx): { rank: number; where: string; others: string } | null {
  const since = ctx.lastAdvanceTs ?? 0;
  const newest = new Map<number, StackDump>();
  for (const d of ctx.run.dumps) {
    if (d.rank === null || dumpTimeMs(d) < since) continue;
    const prev = newest.get(d.rank);
    if (!prev || dumpTimeMs(d) > dumpTimeMs(prev)) newest.set(d.rank, d);
  }
  if (newest.size < 2) return null;
  const sig = new Map<number, string>();
  for (const [r, d] of newest) {
    const s = dumpPlace(d);
    if (s) sig.set(r, s);
  }
  const counts = new Map<string, number[]>();
  for (const [r, s] of sig) counts.set(s, [...(counts.get(s) ?? []), r]);
  if (counts.size !== 2) return null;
  const [a, b] = [...counts.entries()];
  const [odd, rest] =
    a![1].length === 1 && b![1].length > 1
      ? [a!, b!]
      : b![1].length === 1 && a![1].length > 1
        ? [b!, a!]
        : sig.size === 2
          ? pickTwo(a!, b!)
          : [null, null];
  if (!odd || !rest) return null;
  return { rank: odd[1][0]!, where: odd[0], others: rest[0] };
}

/** Two ranks, two places: the one not waiting in a collective is the odd one. */
function pickTwo(a: [string, number[]], b: [string, number[]]): [[string, number[]] | null, [string, number[]] | null] {
  const waiting = (s: string) => /allreduce|all_reduce|collective|barrier|broadcast|wait/i.test(s);
  if (waiting(a[0]) && !waiting(b[0])) return [b, a];
  if (waiting(b[0]) && !waiting(a[0])) return [a, b];
  return [null, null];
}

export function ruleStall(ctx: Ctx, si: StallInfo): Draft[] {
  const out: Draft[] = [];
  const { cadence } = ctx;
  const expect =
    cadence.expectedS === null
      ? 'cadence not known yet'
      : `expected every ${dur(cadence.expectedS, 'precise')}${cadence.beat ? ' (per-step beats)' : ` (log_every ${cadence.logEvery ?? '?'} × ${sig(cadence.stepTimeS ?? 0)} s/step)`}`;
  const thr = `threshold ${dur(cadence.thresholdS, 'precise')} = max(floor ${dur(ctx.t.stallFloorS, 'precise')}, ${ctx.t.stallCadenceFactor} × expected)`;
  // The step is overdue by the run's own cadence: the run is not advancing, and the operator sees it
  // now (at 20 steps/s, 40 s without a step is a hang in all but name). The watchdog acts on it only
  // past the stall threshold (the 180 s floor spares slow steps a false HALT): Evaluation.actOn.
  if (si.overdue && ctx.lastAdvanceTs !== null) {
    const hbAge = ctx.lastHeartbeatTs === null ? null : (ctx.now - ctx.lastHeartbeatTs) / 1000;
    const stepTxt = ctx.run.step === null || ctx.run.step === 0 ? 'no first step' : `step frozen at ${ctx.run.step}`;
    const hbFresh = hbAge !== null && hbAge < si.overdueS;
    const procTxt = ctx.procsKnown ? `${ctx.alive.length} rank process(es) alive` : 'process table unknown';
    const who = si.oddRank !== null ? ` — rank ${si.oddRank} is behind the others` : '';
    const times =
      cadence.expectedS !== null && cadence.expectedS > 0
        ? ` (${sig(si.frozenS! / cadence.expectedS)}× its usual interval)`
        : '';
    const act = si.runStalled
      ? 'past the watchdog threshold'
      : `the watchdog acts at ${dur(cadence.thresholdS, 'precise')}`;
    const atPause = si.pause
      ? ` at a save/eval step (${si.pause.what}; allowed ${dur(si.pause.allowS, 'precise')})`
      : '';
    const overTxt = si.pause
      ? `overdue past ${dur(si.overdueS, 'precise')} = ${si.pause.measuredS === null ? 'the stall threshold (no earlier save/eval pause measured)' : `min(threshold, lateness + ${ctx.t.pauseFactor} × the ${dur(si.pause.measuredS, 'precise')} an earlier one took)`}`
      : `overdue past ${dur(si.overdueS, 'precise')} = max(${ctx.t.lateFactor} × expected, ${dur(ctx.t.lateFloorS, 'precise')})`;
    out.push(
      a(
        'stall:run',
        'heartbeat-stall',
        'critical',
        hbFresh
          ? `${stepTxt} for ${dur(si.frozenS!, 'precise')}${times}${atPause} while heartbeats are still written (last ${dur(hbAge!, 'precise')} ago)${who}`
          : `${stepTxt} for ${dur(si.frozenS!, 'precise')}${times}${atPause}; no heartbeat from any rank for ${hbAge === null ? '?' : dur(hbAge, 'precise')}${who}`,
        `step last advanced ${ago(ctx, ctx.lastAdvanceTs)} ago; newest heartbeat ${ctx.lastHeartbeatTs === null ? 'never' : ago(ctx, ctx.lastHeartbeatTs) + ' ago'}; ${procTxt}; ${expect}; ${overTxt}; ${act} (${thr})`,
        {
          since: ctx.lastAdvanceTs + si.overdueS * 1000,
          step: ctx.run.step ?? undefined,
          anomaly: 'heartbeat_stall',
          rank: si.oddRank ?? undefined,
        },
      ),
    );
  }
  for (const rank of si.stalledRanks) {
    const r = ctx.ranks.find((x) => x.rank === rank)!;
    out.push(
      a(
        `stall:rank${rank}`,
        'heartbeat-stall',
        si.overdue ? 'critical' : 'warning',
        `rank ${rank} heartbeat silent ${ago(ctx, r.lastTs!)} (last "${r.lastMsg ?? '?'}" at step ${r.lastStep ?? '?'})`,
        `pid ${r.pid ?? '?'}; step advanced ${r.stepAdvancedTs === null ? 'never' : ago(ctx, r.stepAdvancedTs) + ' ago'}; ${expect}; ${thr}`,
        { since: r.lastTs! + cadence.thresholdS * 1000, rank, step: r.lastStep ?? undefined },
      ),
    );
  }
  // Watchdog dumps from rank 0 mean rank 0 itself was silent > 180 s at some point.
  const r0 = ctx.ranks.find((r) => r.rank === 0);
  if (r0 && r0.watchdogDumps > 0) {
    out.push(
      a(
        'watchdog-dump:rank0',
        'heartbeat-stall',
        'warning',
        `rank 0 wrote ${r0.watchdogDumps} in-process watchdog dump(s): its heartbeat was silent > 180 s`,
        cadence.beat
          ? 'per-step beats are on, so this was a real stall'
          : `without per-step beats this also happens when log_every × step time > 180 s (contract §2.7); ${expect}`,
        { rank: 0 },
      ),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Processes: died, stopped, D state; HALT handling.

const STATE_TXT: Partial<Record<ProcState, string>> = {
  T: 'stopped (T)',
  t: 'traced (t)',
  D: 'in uninterruptible I/O (D)',
  Z: 'a zombie (Z)',
};

export function ruleProcesses(ctx: Ctx, si: StallInfo): Draft[] {
  const out: Draft[] = [];
  if (!ctx.procsKnown) return out;
  const aliveRanks = [...new Set(ctx.alive.map((r) => r.rank))].sort((x, y) => x - y);
  for (const d of si.dead) {
    const hb = ctx.ranks.find((r) => r.rank === d.rank)!;
    out.push(
      a(
        `rank-died:${hb.rank}`,
        'rank-died',
        'critical',
        `rank ${hb.rank} ${d.zombie ? 'is a zombie' : 'process is gone'} while rank(s) ${aliveRanks.join(',')} still run`,
        `heartbeat pid ${hb.pid ?? '?'}, last "${hb.lastMsg ?? '?'}" ${hb.lastTs === null ? '' : ago(ctx, hb.lastTs) + ' ago'} at step ${hb.lastStep ?? '?'}; the others will block in their next collective`,
        { rank: hb.rank, step: hb.lastStep ?? undefined, anomaly: 'rank_died', since: hb.lastTs ?? undefined },
      ),
    );
  }
  for (const r of ctx.alive) {
    const st = r.proc.state;
    if (st === 'T' || st === 't' || st === 'D') {
      const others = ctx.alive.filter((o) => o.rank !== r.rank).map((o) => `${o.rank}:${o.proc.state}`);
      // D while steps still advance is routine I/O (a checkpoint's fsync); it matters when the step is frozen
      out.push(
        a(
          `proc-state:${r.rank}`,
          'rank-state',
          si.overdue || st !== 'D' ? 'critical' : 'info',
          `rank ${r.rank} (pid ${r.proc.pid}) is ${STATE_TXT[st]}${others.length ? `; others ${others.join(' ')}` : ''}`,
          `${st === 'D' ? `wchan ${r.proc.wchan ?? '?'}; ` : ''}${st === 'T' ? 'a stopped rank never reaches its collective: SIGCONT it or halt the run; ' : ''}cpu ${pct(r.proc.cpuPct)}`,
          { rank: r.rank },
        ),
      );
    }
  }
  return out;
}

export function ruleHalt(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const h = ctx.run.control.halt;
  if (!h.present) return out;
  const r0 = ctx.ranks.find((r) => r.rank === 0);
  const boot = r0?.bootTs ?? null;
  const content = h.content?.trim() ? ` ("${h.content.trim()}")` : '';
  const notFile = h.content?.startsWith('[not a regular file') === true;
  if (notFile && !ctx.ended && !(ctx.procsKnown && ctx.alive.length === 0)) {
    out.push(
      a(
        'halt:not-a-file',
        'stale-halt',
        'critical',
        `.HALT is a directory, not a file: the trainer stops at its next step, and a relaunch into it stops at step 1`,
        'the trainer only asks whether .HALT exists; nsa-top will not remove a directory: remove it by hand once the run is stopped',
        { since: h.mtimeMs ?? undefined },
      ),
    );
  } else if (h.mtimeMs !== null && boot !== null && h.mtimeMs < boot - 1000 && !ctx.ended) {
    out.push(
      a(
        'halt:stale',
        'stale-halt',
        'critical',
        `stale .HALT${content} predates this launch: the trainer stops at step 1`,
        `.HALT modified ${ago(ctx, h.mtimeMs)} ago, rank 0 booted ${ago(ctx, boot)} ago; the trainer never deletes .HALT (contract §2.5): remove it (and .anomaly_type) before relaunching`,
        { since: boot },
      ),
    );
  } else if (ctx.ended || (ctx.procsKnown && ctx.alive.length === 0)) {
    out.push(
      a(
        'halt:left',
        'stale-halt',
        ctx.ended ? 'info' : 'warning',
        `.HALT${content} is still in the run dir: a relaunch into it would stop at step 1`,
        'the trainer never deletes .HALT; remove it (and .anomaly_type) before relaunching',
        { since: h.mtimeMs ?? undefined },
      ),
    );
  } else if (h.mtimeMs !== null && ctx.alive.length > 0 && (ctx.now - h.mtimeMs) / 1000 > ctx.t.haltGraceS) {
    out.push(
      a(
        'halt:stuck',
        'halt-not-honoured',
        'warning',
        `HALT requested ${ago(ctx, h.mtimeMs)} ago${content} but rank(s) ${ctx.alive.map((r) => r.rank).join(',')} still alive`,
        `ranks check .HALT once per micro-step, before the forward: a hung step never sees it; escalate (SIGINT, then SIGKILL) after a stack dump; grace ${dur(ctx.t.haltGraceS, 'precise')}`,
        { since: h.mtimeMs + ctx.t.haltGraceS * 1000 },
      ),
    );
  }
  return out;
}

/**
 * Artifacts nsa-top may not read (permission denied, or not a regular file): named, never passed
 * over in silence — whatever they hold is missing from every other verdict.
 */
export function ruleUnreadable(ctx: Ctx): Draft[] {
  const bad = Object.entries(ctx.run.files).filter(
    ([, f]) => f.lastError !== null && /^(EACCES|EPERM)\b/.test(f.lastError),
  );
  if (bad.length === 0) return [];
  const names = bad.map(([n]) => n);
  return [
    a(
      'files:unreadable',
      'unreadable-artifacts',
      'warning',
      `cannot read ${names.length} artifact${names.length > 1 ? 's' : ''}: ${names.slice(0, 6).join(', ')}${names.length > 6 ? ', …' : ''} (permission denied)`,
      `what ${names.length > 1 ? 'they hold is' : 'it holds is'} missing from every check; run nsa-top as the trainer's user, or make ${names.length > 1 ? 'them' : 'it'} readable`,
    ),
  ];
}

export function ruleAnomalyFile(ctx: Ctx): Draft[] {
  const an = ctx.run.control.anomaly;
  if (!an || an.type === 'nan_loss') return []; // nan_loss is reported by the loss rule
  const boot = ctx.ranks.find((r) => r.rank === 0)?.bootTs ?? null;
  if (an.mtimeMs !== null && boot !== null && an.mtimeMs < boot - 1000) {
    return [
      a(
        `anomaly-file:${an.type}`,
        'anomaly',
        'warning',
        `.anomaly_type "${an.type}" is left from an earlier run`,
        `written ${ago(ctx, an.mtimeMs)} ago, before this run booted ${ago(ctx, boot)} ago: read it, then remove it so a new anomaly is not confused with it`,
        { since: boot },
      ),
    ];
  }
  if (an.type.trim() === '') {
    return [
      a(
        'anomaly-file:empty',
        'anomaly',
        'warning',
        '.anomaly_type is empty: no anomaly named',
        'a bare touch, or a write cut short (a full disk): nsa-top names its own failed writes in .nsa-top/actions.jsonl and watchdog.jsonl',
        { since: an.mtimeMs ?? undefined },
      ),
    ];
  }
  return [
    a(
      `anomaly-file:${an.type}`,
      'anomaly',
      'critical',
      `.anomaly_type says "${an.type}"`,
      `written ${an.mtimeMs === null ? '' : ago(ctx, an.mtimeMs) + ' ago '}by the trainer or a watchdog${ctx.run.control.gateCollapseDetails ? `; gate_collapse_details.json: ${JSON.stringify(ctx.run.control.gateCollapseDetails)}` : ''}`,
      { anomaly: an.type, since: an.mtimeMs ?? undefined },
    ),
  ];
}

export function ruleExited(ctx: Ctx): Draft[] {
  if (!ctx.procsKnown || ctx.alive.length > 0 || ctx.launcherAlive || ctx.ended || ctx.ranks.length === 0) return [];
  if (ctx.run.control.halt.present) return [];
  const total = ctx.run.totalSteps;
  const step = ctx.run.step ?? 0;
  if (total !== null && step >= total) return [];
  const oom = ctx.run.log.oom ? '; the log shows CUDA out of memory' : '';
  return [
    a(
      'exited',
      'run-exited',
      'critical',
      `run ended at step ${step}${total ? ` of ${total}` : ''} without finishing or halting (no rank alive, no metrics.json)`,
      `newest heartbeat ${ctx.lastHeartbeatTs === null ? 'never' : ago(ctx, ctx.lastHeartbeatTs) + ' ago'}${oom}; a crash or a kill: see train.log`,
      { since: ctx.lastHeartbeatTs ?? undefined, step, anomaly: 'run_exited' },
    ),
  ];
}

// ---------------------------------------------------------------------------------------------
// Throughput

export function ruleThroughput(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const t = ctx.t;
  const pts = currentSegment(ctx.run.series.toksPerS);
  // every check below looks at most this far back: only the tail is copied out of the window
  const back = Math.max(t.flatlineN, t.rollingWindow + t.throughputDropN, 5);
  const vals = (pts.length > back ? pts.slice(-back) : pts).map((p) => p.value);
  // Flatline: toks/s <= 0 (the CSV rounds to an int: < 0.5 reads 0) on N consecutive records.
  if (vals.length >= t.flatlineN) {
    const tail = vals.slice(-t.flatlineN);
    if (tail.every((v) => v < 0.5)) {
      out.push(
        a(
          'throughput:flatline',
          'throughput-flatline',
          'critical',
          `throughput flat at ${sig(tail[tail.length - 1]!)} tok/s for ${t.flatlineN} records`,
          `toks_per_s < 0.5 on steps ${pts[pts.length - t.flatlineN]!.step}–${pts[pts.length - 1]!.step} (NSA_WATCH_FLATLINE_N=${t.flatlineN})`,
          {
            anomaly: 'throughput_flatline',
            step: pts[pts.length - 1]!.step,
            since: pts[pts.length - t.flatlineN]!.t ?? undefined,
          },
        ),
      );
    }
  }
  // Drop vs rolling median, held for throughputDropN records (a single eval dip is not a drop).
  const n = t.rollingWindow,
    k = t.throughputDropN;
  if (vals.length >= Math.min(n, 8) + k) {
    const base = median(vals.slice(Math.max(0, vals.length - k - n), vals.length - k))!;
    const recent = vals.slice(-k);
    if (base > 0 && recent.every((v) => v < (1 - t.throughputDropFrac) * base)) {
      const first = pts[pts.length - k]!;
      out.push(
        a(
          'throughput:drop',
          'throughput-drop',
          'warning',
          `throughput dropped to ${sig(recent[recent.length - 1]!)} tok/s from a rolling median of ${sig(base)}`,
          `last ${k} records (steps ${first.step}–${pts[pts.length - 1]!.step}) all below ${Math.round((1 - t.throughputDropFrac) * 100)} % of the median of the ${n} before`,
          { step: pts[pts.length - 1]!.step, since: first.t ?? undefined },
        ),
      );
    }
  }
  out.push(...rulePlausibility(ctx, vals));
  return out;
}

function rulePlausibility(ctx: Ctx, vals: number[]): Draft[] {
  const id = ctx.run.identity;
  const known = knownConfig(id.config);
  const model = id.model ?? known?.model ?? null;
  if (!model || vals.length < 3) return [];
  const seq = id.train?.seqLen ?? known?.seqLen ?? null;
  const tps = median(vals.slice(-5))!;
  if (!(tps > 0)) return [];
  const fpt = flopsPerToken(model, id.nsa ?? known?.nsa ?? null, seq);
  const achieved = tps * fpt;
  const world = Math.max(1, id.worldSize ?? 1);
  const dev = (id.device ?? ctx.run.metrics?.['device'] ?? '') as string;
  let peak: { flops: number; label: string } | null = null;
  let n = world;
  const gpuName = ctx.gpus[0]?.name ?? id.gpuName;
  const onCpu = /^cpu/i.test(dev) || (!gpuName && ctx.in.gpu?.status === 'no-nvidia-tools');
  if (onCpu) {
    if (ctx.in.hostCpus) {
      peak = cpuPeak(ctx.in.hostCpus);
      n = 1;
    }
  } else if (gpuName) {
    const p = gpuPeak(gpuName, id.dtype);
    if (p) {
      peak = p;
      n = ctx.gpus.length ? Math.min(ctx.gpus.length, world) || world : world;
    }
  }
  if (!peak) return [];
  const mfu = achieved / (peak.flops * n);
  const dims = `dim ${model.dim} × ${model.nLayers} layers, S=${seq ?? '?'}${id.model ? '' : ` (dims from the config name ${configBasename(id.config)})`}`;
  const why = `${sig(tps)} tok/s × ≈${sig(fpt / 1e6)} MFLOP/token (${dims}) = ${sig(achieved / 1e12)} TFLOP/s vs ${n} × ${peak.label} peak ${sig(peak.flops / 1e12)} TFLOP/s → MFU ${sig(mfu * 100)} %`;
  if (mfu > ctx.t.mfuImpossibleFrac) {
    return [
      a(
        'throughput:impossible',
        'throughput-plausibility',
        'critical',
        `throughput impossible for this model: ${sig(tps)} tok/s would be ${sig(mfu * 100)} % of the device peak`,
        `${why}; the run is not training the model it claims (toy config? wrong CONFIG?)`,
        { anomaly: 'implausible_throughput' },
      ),
    ];
  }
  const step = ctx.run.step ?? 0;
  if (!onCpu && mfu < ctx.t.mfuLowFrac && step >= 10) {
    return [
      a(
        'throughput:low',
        'throughput-plausibility',
        'warning',
        `throughput absurdly low: ${sig(tps)} tok/s is ${sig(mfu * 100)} % of the GPUs' peak`,
        `${why}; check the routing (NSA_PREFILL_BATCHED=${id.flags['NSA_PREFILL_BATCHED'] ?? 'unset'}, sequential prefill and packed selection run at ~11 tok/s, contract §8.1), GPU utilisation and DDP bucket settings`,
      ),
    ];
  }
  return [];
}

// ---------------------------------------------------------------------------------------------
// Run identity

/** env.json was read and parsed: only then does a missing CONFIG mean the toy default. */
function envJsonRead(ctx: Ctx): boolean {
  const f = ctx.run.files['env.json'];
  return !!f && f.records > 0 && f.parseErrors === 0;
}

export function ruleIdentity(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const id = ctx.run.identity;
  const launched = ctx.in.launched;
  const real = id.trainer === 'nsa-vibe';
  const cfg = id.config;
  if (launched?.config && cfg !== undefined) {
    const want = configBasename(launched.config),
      got = configBasename(cfg);
    if (want !== got) {
      out.push(
        a(
          'identity:config',
          'run-identity',
          'critical',
          `launched with config ${launched.config} but the run used ${cfg ?? 'the toy default (no CONFIG in env.json)'}`,
          'the trainer reads its config only from the CONFIG env var; --config is silently ignored (contract §0)',
          { anomaly: 'wrong_config' },
        ),
      );
    }
  } else if (real && cfg === null && ctx.run.exists && ctx.ranks.length > 0 && envJsonRead(ctx)) {
    out.push(
      a(
        'identity:no-config',
        'run-identity',
        'warning',
        'env.json has no CONFIG: the trainer loaded its toy default configs/train_showcase.yaml',
        'a 50k run once trained the toy model for 24 h this way (contract §8.4); export CONFIG=configs/<name>.yaml',
      ),
    );
  }
  if (launched?.flags) {
    for (const [k, v] of Object.entries(launched.flags)) {
      const got = id.flags[k];
      if (got !== undefined && got !== v) {
        out.push(
          a(
            `identity:flag:${k}`,
            'run-identity',
            'warning',
            `${k}=${got} in env.json, launched with ${k}=${v}`,
            'env.json records the environment the trainer actually saw',
          ),
        );
      } else if (got === undefined && Object.keys(id.flags).length > 0 && /^NSA_/.test(k)) {
        out.push(
          a(
            `identity:flag:${k}`,
            'run-identity',
            'warning',
            `${k}=${v} was asked for but is absent from env.json`,
            'the variable did not reach the trainer process',
          ),
        );
      }
    }
  }
  // The named config and the model disagree, or the toy model runs under a 125M name.
  const known = knownConfig(cfg);
  const model = id.model;
  const seq = id.train?.seqLen ?? null;
  const toy = isToyModel(model, seq) || (real && cfg === null && envJsonRead(ctx));
  const claimName = claims125m(cfg) ? cfg : claims125m(launched?.config) ? launched!.config! : null;
  if (model && known && !known.toy && (model.dim !== known.model.dim || model.nLayers !== known.model.nLayers)) {
    out.push(
      a(
        'identity:dims',
        'run-identity',
        'critical',
        `config ${configBasename(cfg)} names a dim ${known.model.dim} × ${known.model.nLayers}-layer model but the run has dim ${model.dim} × ${model.nLayers}`,
        'the run is not the model its name says',
        { anomaly: 'wrong_config' },
      ),
    );
  } else if (toy && claimName) {
    out.push(
      a(
        'identity:toy',
        'run-identity',
        'critical',
        `toy model (dim ${model?.dim ?? 128}, ${model?.nLayers ?? 1} layer, S=${seq ?? 128}) running under the 125M name ${configBasename(claimName)}`,
        `contract §8.4: CONFIG ${cfg ?? 'absent'}${ctx.run.checkpoints.length === 0 ? ', no checkpoints' : ''}${id.dtype ? `, dtype ${id.dtype}` : ''}`,
        { anomaly: 'wrong_config' },
      ),
    );
  } else if (!model && real) {
    // Dims unknown (the real trainer writes no config into out_dir): the other tells of §8.4.
    const ev = toyTells(ctx);
    if (ev.length >= 2 && (claimName || (ctx.run.totalSteps ?? 0) >= 5000)) {
      out.push(
        a(
          'identity:toy',
          'run-identity',
          claimName ? 'critical' : 'warning',
          `this looks like the toy config${claimName ? ` running under the 125M name ${configBasename(claimName)}` : ` on a ${ctx.run.totalSteps}-step run`}`,
          `contract §8.4 tells: ${ev.join('; ')}`,
          claimName ? { anomaly: 'wrong_config' } : {},
        ),
      );
    }
  }
  out.push(...ruleSyntheticData(ctx));
  return out;
}

/** The toy config's other fingerprints (contract §8.4) when the model dims are not known. */
function toyTells(ctx: Ctx): string[] {
  const id = ctx.run.identity;
  const out: string[] = [];
  const seq = id.train?.seqLen ?? null;
  if (seq !== null && seq <= 128) out.push(`seq_len ${seq}`);
  if (id.config === null && envJsonRead(ctx)) out.push('no CONFIG in env.json');
  const mem = ctx.run.lastProgress?.gpuMemReservedMiB ?? ctx.ranks.find((r) => r.rank === 0)?.memReservedMiB ?? null;
  if (mem !== null && mem < 200 && (ctx.run.step ?? 0) >= 10)
    out.push(`GPU memory reserved only ${Math.round(mem)} MiB`);
  if (id.dtype && /float32|fp32/i.test(id.dtype) && (id.gpuName || mem !== null))
    out.push(`dtype ${id.dtype} on a GPU`);
  if (id.train?.saveEvery === 0) out.push('save_every 0 (no checkpoints)');
  if (/\[boot\] loading config configs\/train_showcase\.yaml/.test(ctx.run.log.lines.join('\n')))
    out.push('train.log: "[boot] loading config configs/train_showcase.yaml"');
  return out;
}

function ruleSyntheticData(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const id = ctx.run.identity;
  const ds = (ctx.in.launched?.dataset ?? id.dataset ?? null)?.toLowerCase() ?? null;
  const logged = id.dataset?.toLowerCase() ?? null;
  const synthetic = logged === 'synthetic';
  const claimsReal = !!ds && ds !== 'synthetic';
  const d = ctx.run.data;
  const progressed = d.withFetch + d.withoutFetch > 0;
  if (claimsReal && progressed && (d.dtFetchAbsent || d.syntheticFallback)) {
    out.push(
      a(
        'data:synthetic-tell',
        'synthetic-data',
        'critical',
        `dataset says ${ds} but the run trains on random tokens${d.syntheticFallback ? ' (loader fell back to synthetic)' : ' (no dt_fetch_s in recent progress records)'}`,
        `${d.withFetch} progress records with dt_fetch_s, ${d.withoutFetch} without; a dead prefetch thread or --dataset fineweb_edu_local silently trains on random tokens (contract §8.6)`,
        { anomaly: 'synthetic_data' },
      ),
    );
  } else if (synthetic) {
    out.push(
      a(
        'data:synthetic',
        'synthetic-data',
        'warning',
        'training on synthetic random tokens (train.log: dataset=synthetic)',
        `loss cannot fall below ln(vocab) (${sig(Math.log(id.model?.vocab ?? 256), 4)}); loss and throughput say nothing about real data${d.dtFetchAbsent ? '; no dt_fetch_s in progress records' : ''}`,
        // the dataset is chosen at launch: true since this segment of the run started, not since
        // the cockpit noticed
        { since: ctx.run.segments.at(-1)?.startTs ?? undefined },
      ),
    );
  }
  // Loss pinned near ln(vocab): the random-data tell once the run is past its early steps.
  const vocab =
    id.model?.vocab ??
    (id.tokenizer === 'gpt2' ? 50257 : id.tokenizer === 'byte' || id.tokenizer === null ? 256 : null);
  const pts = currentSegment(ctx.run.series.loss);
  const last = pts[pts.length - 1];
  if (vocab && last && last.step >= ctx.t.lossPinnedMinStep && pts.length >= 10) {
    const lnV = Math.log(vocab);
    const tail = pts.slice(-Math.min(pts.length, ctx.t.rollingWindow)).map((p) => p.value);
    const med = median(tail)!;
    if (Math.abs(med - lnV) < ctx.t.lossPinnedEps && Math.min(...tail) > lnV - ctx.t.lossPinnedEps) {
      out.push(
        a(
          'loss:pinned-lnV',
          'synthetic-data',
          claimsReal && !synthetic ? 'critical' : 'warning',
          `loss pinned at ${sig(med, 4)} ≈ ln(${vocab}) = ${sig(lnV, 4)} at step ${last.step}: the model sees random tokens`,
          `median of the last ${tail.length} losses within ${ctx.t.lossPinnedEps} of ln(vocab); dataset ${ds ?? 'unknown'}`,
          { step: last.step, anomaly: claimsReal && !synthetic ? 'synthetic_data' : undefined },
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Loss

export function ruleLoss(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const run = ctx.run;
  const lp = run.lastProgress;
  const nonFinite =
    run.series.loss.nonFinite > 0 ||
    run.lastLossNonFinite === true ||
    run.log.fatalNonFinite ||
    run.control.anomaly?.type === 'nan_loss' ||
    (lp?.loss !== null && lp?.loss !== undefined && !Number.isFinite(lp.loss));
  if (nonFinite) {
    const why = [
      run.series.loss.nonFinite ? `${run.series.loss.nonFinite} non-finite loss record(s)` : null,
      run.log.fatalNonFinite ? 'train.log: "[train][FATAL] non-finite loss detected"' : null,
      run.control.anomaly?.type === 'nan_loss' ? '.anomaly_type = nan_loss' : null,
    ]
      .filter(Boolean)
      .join('; ');
    out.push(
      a(
        'loss:nonfinite',
        'loss-nonfinite',
        'critical',
        `loss went non-finite${run.step !== null ? ` after step ${run.step}` : ''}`,
        `${why || 'last progress loss is not finite'}; the NaN step itself is never logged (contract §8.5)`,
        { anomaly: 'nan_loss', step: run.step ?? undefined, since: run.control.anomaly?.mtimeMs ?? undefined },
      ),
    );
  }
  const pts = currentSegment(run.series.loss);
  if (pts.length >= 8) {
    const last = pts[pts.length - 1]!;
    const win = pts.slice(Math.max(0, pts.length - 1 - ctx.t.rollingWindow), pts.length - 1).map((p) => p.value);
    const med = median(win)!;
    if (med > 0 && last.value > ctx.t.lossExplodeFactor * med) {
      out.push(
        a(
          'loss:spike',
          'loss-spike',
          'critical',
          `loss exploding: ${sig(last.value, 4)} at step ${last.step}, ${sig(last.value / med)} × the rolling median ${sig(med, 4)}`,
          `window of the previous ${win.length} logged losses; threshold ${ctx.t.lossExplodeFactor} ×`,
          { step: last.step, anomaly: 'loss_spike', since: last.t ?? undefined },
        ),
      );
    } else if (med > 0 && last.value > med * (1 + ctx.t.lossSpikeFrac)) {
      out.push(
        a(
          'loss:spike',
          'loss-spike',
          'warning',
          `loss spike: ${sig(last.value, 4)} at step ${last.step} vs rolling median ${sig(med, 4)}`,
          `above median × ${1 + ctx.t.lossSpikeFrac} over the previous ${win.length} logged losses`,
          { step: last.step, since: last.t ?? undefined },
        ),
      );
    }
  }
  if (pts.length >= ctx.t.lossFlatN) {
    const tail = pts.slice(-ctx.t.lossFlatN);
    const vs = tail.map((p) => p.value);
    const range = Math.max(...vs) - Math.min(...vs);
    const med = median(vs)!;
    if (range < ctx.t.lossFlatEps * Math.max(1, Math.abs(med))) {
      out.push(
        a(
          'loss:flat',
          'loss-flat',
          'warning',
          `loss flat at ${sig(med, 5)} for ${ctx.t.lossFlatN} logs (steps ${tail[0]!.step}–${tail[tail.length - 1]!.step})`,
          `max − min = ${sig(range)}: the model is not updating (lr 0? frozen params? a constant batch?)`,
          { step: tail[tail.length - 1]!.step, since: tail[0]!.t ?? undefined },
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Gates (layer 0 in the real trainer; contract §6)

export interface GateRecord {
  step: number;
  t: number | null;
  entropy: number | null;
  max: number | null;
  collapse: number | null;
}

const gateMemo = new WeakMap<Series, { max: Series; collapse: Series; recs: GateRecord[] }>();

/** per-step gate records of the newest segment; memoised on the three series (new only when changed) */
export function gateRecords(ctx: Ctx): GateRecord[] {
  const s = ctx.run.series;
  const known = gateMemo.get(s.gateEntropy);
  if (known && known.max === s.gateMax && known.collapse === s.collapseFrac) return known.recs;
  const recs = computeGateRecords(s);
  gateMemo.set(s.gateEntropy, { max: s.gateMax, collapse: s.collapseFrac, recs });
  return recs;
}

function computeGateRecords(s: RunSnapshot['series']): GateRecord[] {
  const byStep = new Map<number, GateRecord>();
  // one number per (segment, step): steps stay far below 2^40 (no string per point)
  const key = (p: SeriesPoint) => p.segment * 2 ** 40 + p.step;
  const get = (p: SeriesPoint) => {
    let r = byStep.get(key(p));
    if (!r) {
      r = { step: p.step, t: p.t, entropy: null, max: null, collapse: null };
      byStep.set(key(p), r);
    }
    return r;
  };
  // the newest records are all any gate rule looks at (N consecutive; the frozen tail of ≤ 50)
  const tail = (x: readonly SeriesPoint[]) => x.slice(-64);
  for (const p of tail(currentSegment(s.gateEntropy))) get(p).entropy = p.value;
  for (const p of tail(currentSegment(s.gateMax))) get(p).max = p.value;
  for (const p of tail(currentSegment(s.collapseFrac))) get(p).collapse = p.value;
  return [...byStep.values()].sort((x, y) => x.step - y.step);
}

export function gateViolations(r: GateRecord, ctx: Ctx): string[] {
  const v: string[] = [];
  if (r.entropy !== null && r.entropy < ctx.t.gateEntropyMin)
    v.push(`entropy ${sig(r.entropy)} < ${ctx.t.gateEntropyMin}`);
  // gate_max_gate is one row's extreme among B·S·G rows: a healthy gate crosses 0.9 on some token long
  // before it collapses (the reference run: max 0.93 at entropy 0.88, collapse 0). It counts when the
  // entropy says the average row may be that peaked too (runbook: max_gate_mean < 0.9), or is unknown.
  const bound = maxGateEntropyBound(ctx.t.gateMaxThreshold);
  if (r.max !== null && r.max > ctx.t.gateMaxThreshold && (r.entropy === null || r.entropy < bound)) {
    v.push(
      `max gate ${sig(r.max)} > ${ctx.t.gateMaxThreshold}${r.entropy === null ? '' : ` with entropy ${sig(r.entropy)} < ${sig(bound)}`}`,
    );
  }
  if (r.collapse !== null && r.collapse > ctx.t.gateCollapseFrac)
    v.push(`collapse ${sig(r.collapse)} > ${ctx.t.gateCollapseFrac}`);
  return v;
}

export function ruleGates(ctx: Ctx): { alerts: Draft[]; haltIn: number | null } {
  const out: Draft[] = [];
  const recs = gateRecords(ctx);
  let haltIn: number | null = null;
  if (recs.length) {
    let k = 0;
    for (let i = recs.length - 1; i >= 0 && gateViolations(recs[i]!, ctx).length; i--) k++;
    const N = ctx.t.gateCollapseN;
    if (k > 0) {
      const last = recs[recs.length - 1]!,
        first = recs[recs.length - k]!;
      const v = gateViolations(last, ctx).join(', ');
      haltIn = Math.max(0, N - k);
      if (k >= N) {
        const g = ctx.run.gates;
        out.push(
          a(
            'gates:collapse',
            'gate-collapse',
            'critical',
            `gate collapse: ${v} on ${k} consecutive records (steps ${first.step}–${last.step})`,
            `watchdog rule: entropy < ${ctx.t.gateEntropyMin} or max > ${ctx.t.gateMaxThreshold} (with entropy < ${sig(maxGateEntropyBound(ctx.t.gateMaxThreshold))}) or collapse > ${ctx.t.gateCollapseFrac} for ${N} records (NSA_WATCH_GATE_*)${g?.branchShares ? `; shares [cmp, sel, win] = [${g.branchShares.map((x) => sig(x)).join(', ')}]` : ''}${ctx.run.identity.flags['NSA_FORCE_BRANCH'] ? `; NSA_FORCE_BRANCH=${ctx.run.identity.flags['NSA_FORCE_BRANCH']} forces a one-hot gate` : ''}`,
            { anomaly: 'gate_collapse', step: last.step, since: first.t ?? undefined },
          ),
        );
      } else {
        out.push(
          a(
            'gates:collapse',
            'gate-collapse',
            'info',
            `gates out of bounds on ${k} record(s): watchdog would halt in ${haltIn} more`,
            `${v} at step ${last.step}`,
            { step: last.step, since: first.t ?? undefined },
          ),
        );
      }
    }
    // Frozen at uniform (contract §8.8): passes every documented health check, learns nothing.
    const warm = ctx.run.identity.train?.warmupSteps ?? 0;
    const past = recs.filter((r) => r.step > warm && r.entropy !== null);
    const M = ctx.t.gateFrozenMinRecords;
    const shares = ctx.run.gates?.branchShares ?? null;
    if (past.length >= M && past[past.length - 1]!.step - warm >= ctx.t.gateFrozenMinSteps) {
      const tail = past.slice(-Math.max(M, Math.min(past.length, 50)));
      const allUniform = tail.every((r) => Math.abs(r.entropy! - LN3) < ctx.t.gateFrozenEntropyEps);
      const sharesUniform = !shares || shares.every((x) => Math.abs(x - 1 / 3) < ctx.t.gateFrozenShareEps);
      if (allUniform && sharesUniform) {
        const flags = ['NSA_STOPGRAD_GATES', 'NSA_FORCE_UNIFORM_GATE', 'NSA_GATE_COMPILE'].filter(
          (f) => ctx.run.identity.flags[f] === '1',
        );
        out.push(
          a(
            'gates:frozen',
            'gate-frozen',
            'warning',
            `gates frozen at uniform: entropy ≈ ln 3 on ${tail.length} records past warmup (steps ${tail[0]!.step}–${tail[tail.length - 1]!.step})`,
            `|entropy − ${sig(LN3, 5)}| < ${ctx.t.gateFrozenEntropyEps}${shares ? `, shares [${shares.map((x) => sig(x)).join(', ')}] within ${ctx.t.gateFrozenShareEps} of 1/3` : ''}; this passes every documented gate check but the gate learns nothing${flags.length ? `; ${flags.map((f) => f + '=1').join(', ')} set` : ' (NSA_STOPGRAD_GATES / NSA_FORCE_UNIFORM_GATE / NSA_GATE_COMPILE?)'}`,
            { step: tail[tail.length - 1]!.step, since: tail[0]!.t ?? undefined },
          ),
        );
      }
    }
  }
  return { alerts: out, haltIn };
}

// ---------------------------------------------------------------------------------------------
// Data loader

export function ruleData(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const d = ctx.run.data;
  const lp = ctx.run.lastProgress;
  const dt = d.lastDtFetchS ?? lp?.dtFetchS ?? null;
  const p95 = d.fetchP95Ms ?? lp?.fetchP95Ms ?? null;
  if ((dt !== null && dt > ctx.t.fetchSlowS) || (p95 !== null && p95 / 1000 > ctx.t.fetchSlowS)) {
    out.push(
      a(
        'data:slow',
        'data-loader',
        'warning',
        `data loader slow: ${dt !== null ? `dt_fetch ${dur(dt, 'precise')}` : ''}${dt !== null && p95 !== null ? ', ' : ''}${p95 !== null ? `fetch p95 ${sig(p95)} ms` : ''}`,
        `over ${dur(ctx.t.fetchSlowS, 'precise')}; steady state should be p95 < 100 ms (contract §5); HF streaming throttling (429) or a cold cache?`,
        { step: lp?.step },
      ),
    );
  }
  const fetches = currentSegment(ctx.run.series.dtFetchS)
    .slice(-5)
    .map((p) => p.value);
  const st = ctx.cadence.stepTimeS;
  if (fetches.length >= 3 && st !== null && st > 0) {
    const med = median(fetches)!;
    if (med > ctx.t.fetchDominateFrac * st && med > 0.01) {
      out.push(
        a(
          'data:dominates',
          'data-loader',
          'warning',
          `data fetch dominates the step: ${dur(med, 'precise')} of ${dur(st, 'precise')} per step (${Math.round((med / st) * 100)} %)`,
          `median dt_fetch_s of the last ${fetches.length} progress records vs median step time; the GPUs wait on the loader`,
          { step: lp?.step },
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Memory

export interface MemSample {
  step: number;
  mib: number;
}

export function leakOf(
  samples: MemSample[],
  t: Thresholds,
): { growth: number; slope: number; first: MemSample; last: MemSample; r2: number } | null {
  // drop the first samples (allocator warm-up), keep the last 60
  const s = samples.slice(Math.min(3, Math.floor(samples.length / 4))).slice(-60);
  if (s.length < t.leakMinPoints) return null;
  const span = s[s.length - 1]!.step - s[0]!.step;
  if (span < 5) return null;
  const fit = linfit(
    s.map((x) => x.step),
    s.map((x) => x.mib),
  );
  if (!fit) return null;
  const growth = fit.slope * span;
  const base = Math.max(1, s[0]!.mib);
  if (growth > t.leakMinMiB && growth > t.leakMinFrac * base && fit.r2 > 0.6) {
    return { growth, slope: fit.slope, first: s[0]!, last: s[s.length - 1]!, r2: fit.r2 };
  }
  return null;
}

export function ruleMemory(ctx: Ctx, perRank: Map<string, MemSample[]>): Draft[] {
  const out: Draft[] = [];
  const sources = new Map(perRank);
  // leakOf looks at the last 60 samples after a warm-up skip of at most 3: 64 give the same answer
  const seg = currentSegment(ctx.run.series.memReservedMiB);
  const hb = (seg.length > 64 ? seg.slice(-64) : seg).map((p) => ({ step: p.step, mib: p.value }));
  if (hb.length) sources.set('0:gpu_mem_reserved', hb);
  for (const [key, samples] of sources) {
    const [rank, src] = key.split(':');
    const l = leakOf(samples, ctx.t);
    if (!l) continue;
    out.push(
      a(
        `mem-leak:rank${rank}:${src}`,
        'memory-growth',
        'warning',
        `rank ${rank} memory growing ${sig(l.slope)} MiB/step (${src} ${Math.round(l.first.mib)} → ${Math.round(l.last.mib)} MiB over steps ${l.first.step}–${l.last.step})`,
        `least-squares slope over ${samples.length} samples, r² ${sig(l.r2, 2)}; growth ${Math.round(l.growth)} MiB > ${ctx.t.leakMinMiB} MiB and > ${ctx.t.leakMinFrac * 100} % of the start; "allocated/reserved flat; no creep" is the runbook's criterion`,
        { rank: Number(rank), step: l.last.step },
      ),
    );
  }
  for (const g of ctx.gpus) {
    if (g.memUsedMiB === null || g.memTotalMiB === null || g.memTotalMiB <= 0) continue;
    const f = g.memUsedMiB / g.memTotalMiB;
    if (f > ctx.t.gpuMemNearFrac) {
      out.push(
        a(
          `gpu-mem:${g.index}`,
          'gpu-memory',
          'warning',
          `GPU ${g.index} memory at ${Math.round(f * 100)} % (${g.memUsedMiB}/${g.memTotalMiB} MiB)`,
          `above ${Math.round(ctx.t.gpuMemNearFrac * 100)} %: the next allocation spike (eval, checkpoint) may OOM`,
        ),
      );
    }
  }
  if (ctx.run.log.oom) {
    out.push(
      a(
        'oom',
        'gpu-memory',
        'critical',
        'CUDA out of memory in the trainer log',
        'train.log contains "CUDA out of memory"',
        { anomaly: 'oom' },
      ),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// grad_norm: zero only means something where the trainer does not zero it itself (contract §1.5)

export function ruleGradNorm(ctx: Ctx): Draft[] {
  const lp = ctx.run.lastProgress;
  if (!lp || lp.gradNorm === null || lp.gradNorm !== 0) return [];
  const id = ctx.run.identity;
  const accum = id.train?.accum ?? 1;
  if (id.trainer === 'nsa-vibe' || id.trainer === 'unknown') {
    // The real trainer reads grad_norm after zero_grad on optimizer steps: 0.0 there is an artefact.
    if (accum <= 1 || lp.step % accum === 0) return [];
  }
  return [
    a(
      'grad:zero',
      'zero-grad',
      'warning',
      `grad_norm is 0 at step ${lp.step}`,
      id.trainer === 'nsa-vibe'
        ? `a mid-accumulation step (accum ${accum}), where the real trainer's grad_norm is meaningful: no gradient reaches the parameters`
        : 'no gradient reaches the parameters',
      { step: lp.step, anomaly: 'zero_grad' },
    ),
  ];
}

// ---------------------------------------------------------------------------------------------
// Hang verdicts: fused signals, only when the step is frozen

export function hangVerdicts(ctx: Ctx, si: StallInfo): HangVerdict[] {
  const v: HangVerdict[] = [];
  if (!si.hung) return v;
  const hbAge = ctx.lastHeartbeatTs === null ? null : (ctx.now - ctx.lastHeartbeatTs) / 1000;
  // One rank stopped (or, once the step is overdue, in D state) while the others wait.
  const odd = ctx.alive.filter(
    (r) => r.proc.state === 'T' || r.proc.state === 't' || (si.overdue && r.proc.state === 'D'),
  );
  if (odd.length === 1 && ctx.alive.length > 1) {
    const r = odd[0]!;
    v.push({
      kind: 'odd-rank',
      rank: r.rank,
      text: `rank ${r.rank} is the odd one out: ${STATE_TXT[r.proc.state]} while the others wait (${ctx.alive
        .filter((o) => o !== r)
        .map((o) => `rank ${o.rank} ${o.proc.state}`)
        .join(', ')})`,
    });
  } else if (si.oddRank !== null && oddRankFromDumps(ctx)?.rank === si.oddRank) {
    const o = oddRankFromDumps(ctx)!;
    v.push({
      kind: 'odd-rank',
      rank: o.rank,
      text: `rank ${o.rank} is the odd one out: its stack dump shows ${o.where} while the others are in ${o.others}`,
    });
  } else if (si.oddRank !== null) {
    const r = ctx.ranks.find((x) => x.rank === si.oddRank)!;
    const others = ctx.ranks.filter((x) => x.rank !== si.oddRank);
    v.push({
      kind: 'odd-rank',
      rank: si.oddRank,
      text: `rank ${si.oddRank} is the odd one out: its last beat is step ${r.lastStep ?? '?'} while rank(s) ${others.map((o) => `${o.rank}@${o.lastStep ?? '?'}`).join(', ')} moved on and wait in the collective`,
    });
  }
  if (!si.overdue) return v;
  // GPUs busy at idle power: NCCL kernels spinning in a collective.
  const spin = ctx.gpus.filter(
    (g) =>
      g.utilPct !== null &&
      g.utilPct >= ctx.t.spinUtilPct &&
      g.powerW !== null &&
      g.powerLimitW !== null &&
      g.powerW < ctx.t.spinPowerFrac * g.powerLimitW,
  );
  const gOdd = oddRankFromGpus(ctx);
  if (gOdd && !v.some((x) => x.kind === 'odd-rank')) {
    v.push({
      kind: 'odd-rank',
      rank: gOdd.rank,
      text: `rank ${gOdd.rank} is the odd one out: its GPU ${gOdd.gpu} is idle while the others spin in the collective (util ≈100 % at near-idle power)`,
    });
  }
  if (spin.length > 0 && (spin.length === ctx.gpus.length || gOdd)) {
    v.push({
      kind: 'collective-spin',
      text: `spinning in a collective: GPU ${spin.map((g) => g.index).join(',')} at ${spin.map((g) => `${g.utilPct}%/${g.powerW}W`).join(' ')} (util ≈100 % at near-idle power) with the step frozen ${dur(si.frozenS!, 'precise')}`,
    });
  }
  if (hbAge !== null && hbAge < si.overdueS) {
    v.push({
      kind: 'heartbeat-without-progress',
      text: `heartbeats still written (last ${dur(hbAge, 'precise')} ago) but the step has been frozen at ${ctx.run.step ?? 0} for ${dur(si.frozenS!, 'precise')}${ctx.ranks.some((r) => r.lastMsg === 'watchdog_dump') ? ' — only in-process watchdog dumps' : ''}`,
    });
  } else {
    v.push({
      kind: 'all-silent',
      text: `all ranks silent: no heartbeat for ${hbAge === null ? '?' : dur(hbAge, 'precise')}${ctx.procsKnown ? `, ${ctx.alive.length} process(es) alive` : ''}`,
    });
  }
  // CPU pegged on the ranks with no GPU spin: a Python-side slow step (sequential prefill, §8.1).
  const busy = ctx.alive.filter((r) => (r.proc.cpuPct ?? 0) >= 90);
  if (busy.length && !spin.length && odd.length === 0) {
    v.push({
      kind: 'slow-step',
      text: `rank(s) ${busy.map((r) => `${r.rank} at ${Math.round(r.proc.cpuPct!)} % CPU`).join(', ')}: a very slow step in Python looks exactly like a hang (NSA_PREFILL_BATCHED=${ctx.run.identity.flags['NSA_PREFILL_BATCHED'] ?? 'unset'}; contract §8.1)`,
    });
  }
  return v;
}
