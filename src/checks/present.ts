// What the panels show as a judgement — per-rank health, gate readings against the thresholds in
// force — derived here from the same context, alerts and verdicts, so a panel never judges twice.
import type { Ctx } from './context.js';
import { gateViolations, type StallInfo } from './rules/index.js';
import { dur } from '../format.js';

import { BOOT_STATES, LIVE_STATES } from './runstate.js';

/** the colour of a run state (for a state built without an evaluation), and which states are live or over */
export { BOOT_STATES, ENDED_STATES, LIVE_STATES, STATE_HEALTH } from './runstate.js';
export {
  actionVerdicts,
  newestHeartbeatAgeS,
  relaunchWantsSteps,
  type ActionInput,
  type ActionVerdicts,
  type Verdict,
} from './actions.js';
/** which dump is which rank's, where it says the rank is, when it was written (./dumplabels.ts) */
export {
  claimedRank,
  dumpClaims,
  dumpPlace,
  dumpTimeMs,
  mainThreadFrames,
  operatorDumpSets,
  type DumpClaim,
  type DumpSetRank,
} from './dumplabels.js';
/** the control verdicts the halt window and the keys show (src/checks/control.ts) */
export {
  activeRequest,
  alertAcks,
  DEFAULT_HALT_GRACE_S,
  escalationBlocked,
  procRunning,
  READ_ONLY_WHY,
  supervisorInCharge,
} from './control.js';
import type {
  Alert,
  Culprit,
  GateReading,
  GatesView,
  GpuHealth,
  HangVerdict,
  Health,
  RankHealth,
  RunState,
} from './types.js';

const ORDER: Record<Health, number> = { ok: 0, info: 1, warning: 2, critical: 3 };
const worse = (a: Health, b: Health): Health => (ORDER[b] > ORDER[a] ? b : a);

export function rankHealth(
  ctx: Ctx,
  si: StallInfo,
  state: RunState,
  alerts: readonly Alert[],
  verdicts: readonly HangVerdict[],
  culprit: Culprit | null,
): RankHealth[] {
  const ids = new Set<number>();
  for (const r of ctx.run.ranks) ids.add(r.rank);
  for (const r of ctx.in.procs?.ranks ?? []) ids.add(r.rank);
  const current = new Set(ctx.ranks.map((r) => r.rank));
  // by rank once: a run of thousands of ranks must not cost ranks² finds a refresh
  const procOf = byRank(ctx.in.procs?.ranks ?? []);
  const hbOf = byRank(ctx.run.ranks);
  const verdictOf = byRank(verdicts.filter((v): v is HangVerdict & { rank: number } => v.rank != null));
  const alertsOf = new Map<number, Alert[]>();
  for (const a of alerts) if (a.rank != null) alertsOf.set(a.rank, [...(alertsOf.get(a.rank) ?? []), a]);
  const out: RankHealth[] = [];
  for (const rank of [...ids].sort((a, b) => a - b)) {
    let health: Health = 'ok';
    let why: string | null = null;
    const raise = (h: Health, w: string | null) => {
      if (ORDER[h] > ORDER[health] || (why === null && w !== null && h === health)) {
        health = worse(health, h);
        why = w ?? why;
      }
    };
    const proc = procOf.get(rank) ?? null;
    const hb = hbOf.get(rank) ?? null;
    if (!current.has(rank) && !proc) {
      out.push({ rank, health: 'ok', why: 'heartbeat file left by an earlier launch' });
      continue;
    }
    // the most specific evidence first: the verdict naming the rank, then the state's culprit, then alerts
    const verdict = verdictOf.get(rank);
    if (verdict) raise('critical', verdict.text);
    if (culprit?.rank === rank) raise('critical', culprit.why);
    for (const a of alertsOf.get(rank) ?? []) raise(a.severity === 'info' ? 'info' : a.severity, a.title);
    const st = proc?.proc.state;
    if (st === 'Z' || st === 'X') raise('critical', `process is ${st === 'Z' ? 'a zombie' : 'dead'}`);
    // a rank's own per-step heartbeat overdue by the run's cadence (rank 0 always beats; others only with beats)
    // (not while booting: a booting rank has no step to beat for)
    const booting = BOOT_STATES.has(state);
    if (
      !booting &&
      si.live &&
      hb?.lastTs != null &&
      (rank === 0 || ctx.cadence.beat) &&
      ctx.cadence.expectedS !== null
    ) {
      const age = (ctx.now - hb.lastTs) / 1000;
      if (age > si.overdueS)
        raise(
          'warning',
          `heartbeat silent ${dur(age, 'precise')} (usually every ${dur(ctx.cadence.expectedS, 'precise')})`,
        );
    }
    if (ctx.procsKnown && !proc && LIVE_STATES.has(state))
      raise(booting ? 'info' : 'warning', state === 'RESTARTING' ? 'no process: being restarted' : 'no process');
    out.push({ rank, health, why });
  }
  return out;
}

export function gatesView(ctx: Ctx, haltIn: number | null, alerts: readonly Alert[]): GatesView | null {
  const g = ctx.run.gates;
  if (!g) return null;
  const collapse = alerts.find((a) => a.id === 'gates:collapse');
  const badHealth: Health = collapse?.severity === 'critical' ? 'critical' : 'warning';
  const rec = { step: g.step, t: null, entropy: g.entropyMean, max: g.maxGate, collapse: g.collapseFrac };
  const viol = gateViolations(rec, ctx);
  const reading = (
    key: GateReading['key'],
    value: number | null,
    limit: number,
    bad: '<' | '>',
    tag: string,
  ): GateReading => ({
    key,
    value,
    limit,
    bad,
    health: value === null ? 'ok' : viol.some((v) => v.startsWith(tag)) ? badHealth : 'ok',
  });
  const readings = [
    reading('entropy', g.entropyMean, ctx.t.gateEntropyMin, '<', 'entropy'),
    reading('maxGate', g.maxGate, ctx.t.gateMaxThreshold, '>', 'max gate'),
    reading('collapse', g.collapseFrac, ctx.t.gateCollapseFrac, '>', 'collapse'),
  ];
  let watchdog: GatesView['watchdog'];
  if (haltIn === null) watchdog = { text: 'watchdog: gate rules clear', health: 'ok' };
  else if (haltIn === 0 || collapse?.severity === 'critical')
    watchdog = {
      text: `watchdog gate rule met (${ctx.t.gateCollapseN} consecutive records): it flags gate_collapse`,
      health: 'critical',
    };
  else
    watchdog = {
      text: `watchdog would flag gate_collapse in ${haltIn} more check${haltIn === 1 ? '' : 's'}`,
      health: 'warning',
    };
  const frozen = alerts.find((a) => a.id === 'gates:frozen');
  return { readings, watchdog, uniform: frozen ? frozen.title : null };
}

/** What a halt now would cost, said from the evaluation: a hung rank never sees .HALT, so a trainer
 *  that saves on HALT saves nothing then — the ranks must be killed. */
export function haltOutlook(
  ev: { runState: RunState; culprit: Culprit | null },
  risk: { lastCheckpointStep: number | null; steps: number | null; savesOnHalt?: boolean; step?: number | null } | null,
): { text: string; health: Health } | null {
  const lost = risk?.steps ?? null;
  const ck = risk?.lastCheckpointStep ?? null;
  if (ev.runState === 'STALLED' || ev.culprit) {
    const who = ev.culprit ? ev.culprit.why : 'the step is frozen';
    const since = ck !== null ? `since the checkpoint at step ${ck}` : 'there is no complete checkpoint';
    // savesOnHalt counts nothing lost; the steps since the checkpoint are what a kill loses
    const killLoses = risk?.savesOnHalt && risk.step != null ? Math.max(0, risk.step - (ck ?? 0)) : lost;
    return {
      text: `${who}: .HALT will not be seen and no checkpoint is written; stopping needs escalation (SIGINT/SIGKILL) and loses ${killLoses ?? '?'} step${killLoses === 1 ? '' : 's'} (${since})`,
      health: 'critical',
    };
  }
  if (risk?.savesOnHalt)
    return { text: 'halting now loses nothing: this trainer saves a checkpoint when it sees .HALT', health: 'ok' };
  if (lost !== null)
    return {
      text: `halting now loses ${lost} step${lost === 1 ? '' : 's'} (the nsa-vibe trainer writes no checkpoint on HALT)`,
      health: lost > 0 ? 'warning' : 'ok',
    };
  return null;
}

/** GPU readings: memory near full (the memory rule's threshold critical, 85 % a warning), an idle
 *  GPU, power at its limit (throttling), temperature near the throttle points. */
export const GPU_MEM_WARN_FRAC = 0.85;
export const GPU_IDLE_UTIL_PCT = 10;
export const GPU_POWER_CAP_FRAC = 0.98;
export const GPU_TEMP_WARN_C = 78;
export const GPU_TEMP_CRIT_C = 85;

export function gpuHealth(ctx: Ctx): GpuHealth[] {
  const g = ctx.in.gpu;
  if (!g || g.status !== 'ok') return [];
  return g.devices.map((d) => {
    const frac = d.memUsedMiB != null && d.memTotalMiB ? d.memUsedMiB / d.memTotalMiB : null;
    return {
      uuid: d.uuid,
      mem:
        frac === null ? 'ok' : frac > ctx.t.gpuMemNearFrac ? 'critical' : frac > GPU_MEM_WARN_FRAC ? 'warning' : 'ok',
      util: d.utilPct != null && d.utilPct < GPU_IDLE_UTIL_PCT ? 'warning' : 'ok',
      power:
        d.powerW != null && d.powerLimitW ? (d.powerW > GPU_POWER_CAP_FRAC * d.powerLimitW ? 'warning' : 'ok') : 'ok',
      temp:
        d.tempC == null
          ? 'ok'
          : d.tempC >= GPU_TEMP_CRIT_C
            ? 'critical'
            : d.tempC >= GPU_TEMP_WARN_C
              ? 'warning'
              : 'ok',
    };
  });
}

/** The first entry per rank, as `find` would pick it. */
function byRank<T extends { rank: number }>(xs: readonly T[]): Map<number, T> {
  const m = new Map<number, T>();
  for (const x of xs) if (!m.has(x.rank)) m.set(x.rank, x);
  return m;
}
