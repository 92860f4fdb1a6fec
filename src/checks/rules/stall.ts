// Liveness: stall per rank and for the run, and the hang verdicts fused from it.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { RankProc } from '../../remote/types.js';
import type { SeriesPoint, StackDump } from '../../trainer/run/snapshot.js';
import type { HangVerdict } from '../types.js';
import type { Ctx } from '../context.js';
import { dur, sig } from '../../format.js';
import { currentSegment } from '../stats.js';
import { claimedRank, dumpPlace, dumpTimeMs, type DumpClaim } from '../dumplabels.js';
import { type Draft, a, ago } from './common.js';
import { STATE_TXT } from './processes.js';

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
  const pauses = recentPauses(
    ctx,
    n,
    (a, b) =>
      ((saveStep !== null || !!writing) && saveEvery > 0 && Math.ceil(a / saveEvery) * saveEvery < b) ||
      (evalStep !== null && a % evalEvery === 0),
  );
  const measuredS = pauses.length ? Math.max(...pauses) : null;
  const base = overdueAfterS(ctx);
  const allowS =
    measuredS === null
      ? cadence.thresholdS
      : Math.min(cadence.thresholdS, Math.max(base, base + ctx.t.pauseFactor * measuredS));
  return { what: parts.join(', then '), step: saveStep ?? n, allowS, measuredS };
}

/**
 * The last three pauses `kind(a, b)` names between consecutive timed points of the current segment
 * at or below step `n` (s: the gap less the run's usual time for those steps), newest first. Walked
 * from the newest timed point back (the whole window only when it holds fewer: this runs every round
 * near a save, over up to 2000 points). training.csv (preferred for loss) has no timestamps: the
 * first series whose current segment has two points that carry them.
 */
function recentPauses(ctx: Ctx, n: number, kind: (a: number, b: number) => boolean): number[] {
  const run = ctx.run;
  let pts: readonly SeriesPoint[] = [];
  for (const ser of [
    run.series.loss,
    run.series.toksPerS,
    run.series.gateEntropy,
    run.series.dtFetchS,
    run.series.memReservedMiB,
  ]) {
    const seg = currentSegment(ser);
    let timed = 0;
    for (let i = seg.length - 1; i >= 0 && timed < 2; i--) if (seg[i]!.t !== null) timed++;
    if (timed >= 2) {
      pts = seg;
      break;
    }
  }
  const st = ctx.cadence.stepTimeS ?? 0;
  const pauses: number[] = [];
  let b: SeriesPoint | null = null;
  for (let i = pts.length - 1; i >= 0 && pauses.length < 3; i--) {
    const a = pts[i]!;
    if (a.t === null) continue;
    if (b !== null && b.step > a.step && b.step <= n && kind(a.step, b.step))
      pauses.push(Math.max(0, (b.t! - a.t!) / 1000 - (b.step - a.step) * st));
    b = a;
  }
  return pauses;
}

/** The longest of the run's last three checkpoint saves as the heartbeats measured them (s), or null. */
export function longestSaveS(ctx: Ctx): number | null {
  const every = ctx.run.identity.train?.saveEvery ?? 0;
  if (every <= 0) return null;
  const p = recentPauses(ctx, Infinity, (a, b) => Math.ceil(a / every) * every < b);
  return p.length ? Math.max(...p) : null;
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

const NO_CLAIMS: ReadonlyMap<string, DumpClaim> = new Map();

/**
 * Stack dumps taken since the step froze, newest per rank: when every rank but one shows the same
 * place (waiting in the collective) and one shows another, that one is the odd one out. A dump
 * that names no rank (the real trainer's) counts for the rank nsa-top's dump record claimed it for
 * (CheckInput.dumpClaims).
 */
export function oddRankFromDumps(ctx: Ctx): { rank: number; where: string; others: string } | null {
  const since = ctx.lastAdvanceTs ?? 0;
  const newest = new Map<number, StackDump>();
  const claims = ctx.in.dumpClaims ?? NO_CLAIMS;
  for (const d of ctx.run.dumps) {
    // the dump's own rank (the reference trainer), else the one nsa-top's dump record claimed it for
    const rank = claimedRank(d, claims);
    if (rank === null || dumpTimeMs(d) < since) continue;
    const prev = newest.get(rank);
    if (!prev || dumpTimeMs(d) > dumpTimeMs(prev)) newest.set(rank, d);
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
