// What every rule needs, computed once per evaluation from the input: cadence, the stall threshold,
// liveness of the rank processes, the GPUs of the run. Pure.
import type { ViewAge } from './view.js';
import type { GpuDevice, GpuTelemetry, ProcInfo, RankProc, RunProcesses } from '../remote/types.js';
import type { HostStats } from '../remote/hoststats.js';
import type { RankHeartbeat, RunSnapshot, Series } from '../trainer/run/snapshot.js';
import type { ControlRequest, SupervisorState } from '../trainer/control/types.js';
import { isToolProcess } from '../trainer/run/ranks.js';
import { currentSegment, median } from './stats.js';
import type { Thresholds } from './thresholds.js';
import type { DumpClaim } from './dumplabels.js';

export interface Launched {
  config?: string | null;
  flags?: Record<string, string>;
  dataset?: string | null;
}

export interface CheckInput {
  /** ms epoch (host clock) */
  now: number;
  run: RunSnapshot;
  procs: RunProcesses | null;
  gpu: GpuTelemetry | null;
  /** the host's RAM, swap, CPU, load and disks (src/remote/hoststats.ts); absent: not read */
  hostStats?: HostStats | null;
  /** what the run was launched with, when known (from run.info / the supervisor): to catch a wrong CONFIG */
  launched?: Launched;
  /** CPU cores of the training host, for the CPU throughput upper bound (optional) */
  hostCpus?: number;
  /** the supervisor's published state (.nsa-top/supervisor.json), for supervised runs */
  supervisor?: SupervisorState | null;
  /** durable control requests (.nsa-top/requests.json) */
  requests?: ControlRequest[];
  /** whether the process carrying the active request is alive (pid + start time); undefined: not looked */
  requestOwnerAlive?: boolean;
  /**
   * How the newest stop ended when nsa-top had to signal the ranks after .HALT went unanswered
   * (actions.jsonl escalations, the supervisor's log, supervisor.json lastCause — gathered by
   * src/trainer/control/stopfacts.ts readStopFacts): a stop that needed SIGINT or SIGKILL is never
   * "stopped by .HALT". null/undefined: no escalation known.
   */
  stopEscalation?: 'SIGINT' | 'SIGKILL' | null;
  /** one phrase of evidence for stopEscalation (who, when, how long after .HALT) */
  stopEscalationWhy?: string | null;
  /**
   * How old the data is (a remote view: time since the host's last answer) and when that is too old
   * to judge: past it the evaluation is STALE, judged as of the data (src/checks/view.ts). Absent:
   * the data was read just now (a local run).
   */
  view?: ViewAge;
  /** the run's grace after .HALT, s (its profile's stop.halt_grace_s): overrides thresholds.haltGraceS,
   *  so the alert and the halt window count the same grace */
  haltGraceS?: number;
  /**
   * Which stack dump file is which rank's, from nsa-top's dump records (./dumplabels.ts dumpClaims):
   * the real trainer's `stackdump_<sec>.txt` names no rank, so the odd-rank rule reads the claim.
   */
  dumpClaims?: ReadonlyMap<string, DumpClaim>;
}

export interface Cadence {
  /** median seconds per step (null before two steps) */
  stepTimeS: number | null;
  logEvery: number | null;
  /** per-step `beat` records are written (NSA_HEARTBEAT_EVERY=1 or the reference trainer asked to) */
  beat: boolean;
  /** expected seconds between rank-0 heartbeats */
  expectedS: number | null;
  /** stall threshold, s: max(floor, factor × expected) */
  thresholdS: number;
}

export interface Ctx {
  in: CheckInput;
  run: RunSnapshot;
  t: Thresholds;
  now: number;
  cadence: Cadence;
  /** whether the process table is known */
  procsKnown: boolean;
  /** rank processes that are alive (not zombie/dead) */
  alive: RankProc[];
  /** the launcher (torchrun / nsa-top train) is alive: ranks may be starting or being restarted */
  launcherAlive: boolean;
  /** newest heartbeat of any rank, ms */
  lastHeartbeatTs: number | null;
  /** when the run-level step last advanced (or the boot when no step yet), ms */
  lastAdvanceTs: number | null;
  /** the run has written metrics.json after its last heartbeat (and no launch has begun since) */
  ended: boolean;
  /**
   * A launch the run's files do not show yet: every live process of the run (ranks, launcher)
   * started after the run's newest record — a relaunch whose ranks are still importing torch (the
   * real trainer on CPU: seconds before its boot record). The metrics.json, step and heartbeats in
   * the dir are the stopped run's. `since`: the earliest of those starts. null otherwise.
   */
  freshLaunch: { since: number } | null;
  /** GPUs this run uses (all devices when the mapping is unknown), when telemetry is ok */
  gpus: GpuDevice[];
  ranks: RankHeartbeat[];
}

function beatOn(run: RunSnapshot): boolean {
  if (run.identity.flags['NSA_HEARTBEAT_EVERY'] === '1') return true;
  return run.ranks.some(
    (r) => (r.events?.['beat'] ?? 0) > 0 || r.lastMsg === 'beat' || (r.rank > 0 && (r.lastStep ?? 0) > 0),
  );
}

/** per loss series, with the toks/s series it was read beside: the log interval and step time
 *  its points say (a snapshot's series is never edited: the same objects, the same answer) */
const fromSeries = new WeakMap<
  Series,
  { toks: Series | undefined; logEvery: number | null; stepTimeS: number | null }
>();

/** The log interval (median steps between records) and step time (median s a step) of the
 *  current segment's last 200 loss records, else its toks/s records; null where they cannot say. */
function seriesCadence(run: RunSnapshot): { logEvery: number | null; stepTimeS: number | null } {
  const loss = run.series.loss as Series | undefined;
  const toks = run.series.toksPerS as Series | undefined;
  const known = loss ? fromSeries.get(loss) : undefined;
  if (known && known.toks === toks) return known;
  const lossPts = currentSegment(loss);
  const pts = (lossPts.length >= 2 ? lossPts : currentSegment(toks)).slice(-200);
  let logEvery: number | null = null;
  let stepTimeS: number | null = null;
  if (pts.length >= 2) {
    const dSteps: number[] = [];
    const perStep: number[] = [];
    for (let i = 1; i < pts.length; i++) {
      const a = pts[i - 1]!,
        b = pts[i]!;
      const ds = b.step - a.step;
      if (ds <= 0) continue;
      dSteps.push(ds);
      if (a.t !== null && b.t !== null && b.t > a.t) perStep.push((b.t - a.t) / 1000 / ds);
    }
    if (dSteps.length) logEvery = median(dSteps.slice(1).length ? dSteps.slice(1) : dSteps);
    if (perStep.length) stepTimeS = median(perStep);
  }
  const out = { toks, logEvery, stepTimeS };
  if (loss) fromSeries.set(loss, out);
  return out;
}

export function cadenceOf(run: RunSnapshot, t: Thresholds): Cadence {
  let stepTimeS = run.stepTimeS && run.stepTimeS > 0 ? run.stepTimeS : null;
  let logEvery = run.identity.train?.logEvery ?? null;
  if (logEvery === null || stepTimeS === null) {
    const s = seriesCadence(run);
    if (logEvery === null) logEvery = s.logEvery;
    if (stepTimeS === null) stepTimeS = s.stepTimeS;
  }
  const beat = beatOn(run);
  const expectedS = stepTimeS === null ? null : beat ? stepTimeS : stepTimeS * Math.max(1, logEvery ?? 1);
  const thresholdS = Math.max(t.stallFloorS, expectedS === null ? 0 : t.stallCadenceFactor * expectedS);
  return { stepTimeS, logEvery, beat, expectedS, thresholdS };
}

/**
 * Heartbeat files of this launch: a relaunch with fewer ranks into the same dir leaves the old
 * ranks' files behind, booted long before rank 0's current boot — they are not ranks of this run.
 */
export function currentLaunchRanks(ranks: RankHeartbeat[]): RankHeartbeat[] {
  const sorted = [...ranks].sort((a, b) => a.rank - b.rank);
  const boot0 = sorted.find((r) => r.rank === 0)?.bootTs ?? null;
  if (boot0 === null) return sorted;
  return sorted.filter(
    (r) => r.rank === 0 || r.bootTs === null || r.bootTs >= boot0 - 600_000 || (r.lastTs ?? 0) >= boot0,
  );
}

/** how far a process's start time may be off the records' clock, where the host does not say (ms) */
const START_SLACK_MS = 2000;

/**
 * The earliest start of `procs` when every one of them started after `newest` (the run's newest
 * record, ms): none of them has written anything yet. A process that writes records started before
 * its own, so a run whose processes are writing never qualifies. null: some process is older, a
 * start time is unknown, or there is no record to compare with.
 */
function launchSince(procs: ProcInfo[], newest: number | null): { since: number } | null {
  if (newest === null || procs.length === 0) return null;
  let since = Infinity;
  for (const p of procs) {
    const s = p.startedAtMs;
    if (typeof s !== 'number' || s - (p.startedAtSlackMs ?? START_SLACK_MS) <= newest) return null;
    since = Math.min(since, s);
  }
  return { since };
}

export function buildCtx(input: CheckInput, base: Thresholds): Ctx {
  const t =
    input.haltGraceS !== undefined && Number.isFinite(input.haltGraceS) && input.haltGraceS >= 0
      ? { ...base, haltGraceS: input.haltGraceS }
      : base;
  const run = input.run;
  const procsKnown = !!input.procs && !input.procs.error;
  const alive = procsKnown
    ? input.procs!.ranks.filter((r) => r.proc.state !== 'Z' && r.proc.state !== 'X' && !isToolProcess(r.proc))
    : [];
  let lastHeartbeatTs: number | null = null;
  let bootTs: number | null = null;
  for (const r of run.ranks) {
    if (r.lastTs !== null && (lastHeartbeatTs === null || r.lastTs > lastHeartbeatTs)) lastHeartbeatTs = r.lastTs;
    if (r.bootTs !== null && (bootTs === null || r.bootTs > bootTs)) bootTs = r.bootTs;
  }
  let lastAdvanceTs = run.stepAdvancedTs ?? run.lastProgress?.ts ?? null;
  // With per-step beats a rank's own step moves every step, between the log steps that move the run's.
  for (const r of run.ranks)
    if (r.stepAdvancedTs !== null && (lastAdvanceTs === null || r.stepAdvancedTs > lastAdvanceTs))
      lastAdvanceTs = r.stepAdvancedTs;
  if (bootTs !== null && (lastAdvanceTs === null || bootTs > lastAdvanceTs)) lastAdvanceTs = bootTs;
  const launcherAlive =
    procsKnown &&
    !!input.procs!.launcher &&
    !['Z', 'X'].includes(input.procs!.launcher.state) &&
    !isToolProcess(input.procs!.launcher);
  const freshLaunch = procsKnown
    ? launchSince(
        [...alive.map((r) => r.proc), ...(launcherAlive ? [input.procs!.launcher!] : [])],
        lastHeartbeatTs ?? run.lastProgress?.ts ?? null,
      )
    : null;
  if (freshLaunch && (lastAdvanceTs === null || freshLaunch.since > lastAdvanceTs)) lastAdvanceTs = freshLaunch.since;
  let gpus: GpuDevice[] = [];
  if (input.gpu && input.gpu.status === 'ok') {
    const uuids = new Set(alive.map((r) => r.gpuUuid).filter((u): u is string => !!u));
    gpus = uuids.size ? input.gpu.devices.filter((d) => uuids.has(d.uuid)) : input.gpu.devices;
  }
  return {
    in: input,
    run,
    t,
    now: input.now,
    cadence: cadenceOf(run, t),
    procsKnown,
    alive,
    launcherAlive,
    lastHeartbeatTs,
    lastAdvanceTs,
    ended: run.ended && !freshLaunch,
    freshLaunch,
    gpus,
    ranks: currentLaunchRanks(run.ranks),
  };
}
