// Thresholds of every rule, with the real watchdog's defaults (contract §2.8) and its NSA_WATCH_*
// environment names honoured, so an operator's existing tuning carries over.
import { DEFAULT_HALT_GRACE_S } from '../trainer/control/types.js';

export interface Thresholds {
  /** heartbeat/step stall floor, s (NSA_WATCH_HEARTBEAT_STALL_S, real default 180) */
  stallFloorS: number;
  /** a stall is `stallCadenceFactor` × the run's own expected heartbeat interval, never below the floor */
  stallCadenceFactor: number;
  /** the step is overdue once it is `lateFactor` × its expected interval late (never sooner than
   *  `lateFloorS`, never later than the stall threshold): the state leaves RUNNING and a hang is
   *  visible in seconds, while the stall floor still keeps the watchdog from acting on slow steps */
  lateFactor: number;
  lateFloorS: number;
  /** at a checkpoint-save or eval step the trainer writes no heartbeat while it saves/evaluates: the
   *  step is overdue only after lateness + `pauseFactor` × the longest such pause measured earlier in
   *  the run (the stall threshold when none was measured yet), never later than the stall threshold */
  pauseFactor: number;
  /** a boot (rank 0's `boot` record → its first step) may take `bootFactor` × the longest boot of the
   *  run's earlier segments, never less than `bootFloorS`: while it holds, a launch or a supervised
   *  restart is STARTING / RESTARTING (no stall, no "run ended"); past it, STALLED */
  bootFactor: number;
  bootFloorS: number;
  /** … and the first boot of a run (nothing measured yet: dataset download, compile, NCCL init) */
  bootFirstS: number;
  /** toks/s <= 0 on this many consecutive records (NSA_WATCH_FLATLINE_N, real default 4) */
  flatlineN: number;
  /** gate entropy below this (NSA_WATCH_GATE_ENTROPY_MIN, 0.2) */
  gateEntropyMin: number;
  /** max gate above this (NSA_WATCH_GATE_MAX_THRESHOLD, 0.9). The trainer exports the max over all
   *  B·S·G gate rows of each row's max (one row's extreme), so it counts only while the mean entropy
   *  is low enough for the average row to be that peaked: see maxGateEntropyBound */
  gateMaxThreshold: number;
  /** collapse fraction above this (hard-coded 0.5 in the real watchdog) */
  gateCollapseFrac: number;
  /** on this many consecutive gate records (NSA_WATCH_GATE_COLLAPSE_N, 3) */
  gateCollapseN: number;
  /** "gates frozen at uniform": |entropy − ln 3| below this on every recent record (contract §8.8) */
  gateFrozenEntropyEps: number;
  /** … and branch shares within this of 1/3 */
  gateFrozenShareEps: number;
  /** … over at least this many gate records past warmup */
  gateFrozenMinRecords: number;
  /** … and only this many steps past warmup: a learning gate starts near uniform (gain-0.1 init)
   *  and at lr 3e-4 is still within 1e-3 of ln 3 after 200 steps on the real trainer; the contract's
   *  frozen case was still there at step 1,740 */
  gateFrozenMinSteps: number;
  /** throughput drop: recent median below (1 − this) × rolling median */
  throughputDropFrac: number;
  /** records in the rolling window (throughput median, loss spike window) */
  rollingWindow: number;
  /** the drop must hold for this many consecutive records (an eval dip is one record) */
  throughputDropN: number;
  /** loss spike: above median + this × median (warning); exploding: above `lossExplodeFactor` × median (critical) */
  lossSpikeFrac: number;
  lossExplodeFactor: number;
  /** loss flat for N logs: max − min below lossFlatEps × max(1, |median|) */
  lossFlatN: number;
  lossFlatEps: number;
  /** synthetic tell: loss within this of ln(vocab) … */
  lossPinnedEps: number;
  /** … after this step */
  lossPinnedMinStep: number;
  /** data loader: dt_fetch_s or fetch_p95 over this many seconds */
  fetchSlowS: number;
  /** … or fetch time above this fraction of the step time */
  fetchDominateFrac: number;
  /** memory growth: flag when the fitted growth over the window exceeds both of these */
  leakMinMiB: number;
  leakMinFrac: number;
  /** points needed to fit a slope */
  leakMinPoints: number;
  /** GPU memory used / total above this */
  gpuMemNearFrac: number;
  /** host RAM (src/checks/rules/hostres.ts): warning / critical when the fitted consumption would
   *  exhaust MemAvailable within this many seconds (NSA_TOP_HOST_MEM_WARN_S / _CRIT_S) … */
  hostMemWarnS: number;
  hostMemCritS: number;
  /** … the consumption counts only once it has held this long, in the newest half of it too
   *  (NSA_TOP_HOST_MEM_TREND_S): a trainer's boot fills RAM for tens of seconds, then levels off */
  hostMemTrendS: number;
  /** … or when MemAvailable is below this share of MemTotal */
  hostMemLowWarnFrac: number;
  hostMemLowCritFrac: number;
  /** the disk of the run dir / checkpoints: time-to-full (NSA_TOP_DISK_FULL_WARN_S / _CRIT_S) … */
  diskFullWarnS: number;
  diskFullCritS: number;
  /** … or free space below this share of the file system */
  diskLowWarnFrac: number;
  diskLowCritFrac: number;
  /** HALT requested but ranks still alive after this many seconds: the same grace the halt window
   *  and escalation use (one value per run: its profile's stop.halt_grace_s, which the observation
   *  passes in as CheckInput.haltGraceS; this default only for a bare evaluation) */
  haltGraceS: number;
  /** metrics.json written (the trainer left its loop) and a rank still alive this many seconds later:
   *  the exit is hung (NSA_WATCH_EXIT_GRACE_S) */
  exitGraceS: number;
  /** utilisation at or above this with power near idle → spinning in a collective */
  spinUtilPct: number;
  /** "power near idle": below this fraction of the power limit */
  spinPowerFrac: number;
  /** MFU below this on a GPU is "absurdly low" (fraction, 0.002 = 0.2 %) */
  mfuLowFrac: number;
  /** MFU above this is impossible (fraction of the dense peak) */
  mfuImpossibleFrac: number;
  /** straggler (src/checks/straggler.ts): a rank whose score (fastest rank's compute / its own) stays
   *  under stragglerScore over at least stragglerSamples process-table looks within stragglerWindowS
   *  is named; it stays named until it climbs back over stragglerClearScore. A clean 2-rank reference
   *  run scores ~0.95–1, slow@x=1.5 ~0.7; the real trainer on a loaded CPU box dipped to 0.81 over 5
   *  looks once (rank 0 logs every step), and so did a clean 100-step reference run beside the test
   *  suite (rank 0 logs, evaluates and saves): the score's 99 % upper bound must be under it too */
  stragglerScore: number;
  stragglerClearScore: number;
  stragglerSamples: number;
  stragglerWindowS: number;
  /** … or a rank found working while every peer waits in at least this % of ≥ 2 × stragglerSamples
   *  looks (and 3× as often as any peer): the state evidence of a rank starved of CPU */
  stragglerHoldPct: number;
  /** a look counts only when some rank uses at least this much CPU (a hung or idle run has no pace) */
  stragglerBusyFloorPct: number;
  /** watchdog poll interval, s (NSA_WATCH_INTERVAL_S, real default 30) */
  intervalS: number;
  /** hysteresis: an alert clears only after its condition has been absent on this many consecutive
   *  evaluations … */
  alertClearChecks: number;
  /** … and for this many seconds (a lower severity of the same alert counts as absent) */
  alertClearS: number;
  /** cleared alerts kept for the timeline */
  alertHistoryMax: number;
  /** watchdog touches .HALT on a critical anomaly (NSA_WATCH_HALT; the real code defaults to 1) */
  halt: boolean;
}

export const DEFAULT_THRESHOLDS: Readonly<Thresholds> = Object.freeze({
  stallFloorS: 180,
  stallCadenceFactor: 3,
  lateFactor: 10,
  lateFloorS: 15,
  pauseFactor: 3,
  bootFactor: 3,
  bootFloorS: 120,
  bootFirstS: 600,
  flatlineN: 4,
  gateEntropyMin: 0.2,
  gateMaxThreshold: 0.9,
  gateCollapseFrac: 0.5,
  gateCollapseN: 3,
  gateFrozenEntropyEps: 1e-3,
  gateFrozenShareEps: 0.01,
  gateFrozenMinRecords: 10,
  gateFrozenMinSteps: 1000,
  throughputDropFrac: 0.5,
  rollingWindow: 20,
  throughputDropN: 3,
  lossSpikeFrac: 0.5,
  lossExplodeFactor: 3,
  lossFlatN: 20,
  lossFlatEps: 1e-4,
  lossPinnedEps: 0.25,
  lossPinnedMinStep: 200,
  fetchSlowS: 5,
  fetchDominateFrac: 0.5,
  leakMinMiB: 64,
  leakMinFrac: 0.1,
  leakMinPoints: 8,
  gpuMemNearFrac: 0.95,
  hostMemWarnS: 3600,
  hostMemCritS: 900,
  hostMemTrendS: 30,
  hostMemLowWarnFrac: 0.1,
  hostMemLowCritFrac: 0.03,
  diskFullWarnS: 6 * 3600,
  diskFullCritS: 1800,
  diskLowWarnFrac: 0.05,
  diskLowCritFrac: 0.01,
  haltGraceS: DEFAULT_HALT_GRACE_S,
  exitGraceS: 60,
  spinUtilPct: 95,
  spinPowerFrac: 0.35,
  mfuLowFrac: 0.002,
  mfuImpossibleFrac: 1.0,
  stragglerScore: 0.85,
  stragglerClearScore: 0.92,
  stragglerSamples: 5,
  stragglerWindowS: 120,
  stragglerHoldPct: 50,
  stragglerBusyFloorPct: 5,
  intervalS: 30,
  alertClearChecks: 3,
  alertClearS: 30,
  alertHistoryMax: 200,
  halt: false,
});

/**
 * The highest mean gate entropy (nats) that the average row's max gate above `maxT` allows. A row of 3
 * whose max is p has entropy at most f(p) = −p ln p − (1−p) ln((1−p)/2) (the rest split evenly); f is
 * concave and falling on [1/3, 1], so by Jensen a mean row max above maxT gives a mean entropy below
 * f(maxT). At or above f(maxT) (0.394 for 0.9) the typical row is not that peaked, whatever one row's
 * max is: a healthy gate that has learned to prefer a branch on some tokens is not a collapse.
 */
export function maxGateEntropyBound(maxT: number): number {
  if (!(maxT > 1 / 3)) return Math.log(3);
  if (maxT >= 1) return 0;
  return -maxT * Math.log(maxT) - (1 - maxT) * Math.log((1 - maxT) / 2);
}

function num(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min) throw new Error(`${name}=${JSON.stringify(raw)}: expected a number >= ${min}`);
  return v;
}

/**
 * Thresholds from the environment. The real watchdog's names are honoured (NSA_WATCH_HEARTBEAT_STALL_S,
 * NSA_WATCH_FLATLINE_N, NSA_WATCH_GATE_ENTROPY_MIN, NSA_WATCH_GATE_MAX_THRESHOLD,
 * NSA_WATCH_GATE_COLLAPSE_N, NSA_WATCH_INTERVAL_S, NSA_WATCH_HALT); a few of ours use the same prefix
 * (NSA_WATCH_GATE_COLLAPSE_FRAC, NSA_WATCH_HALT_GRACE_S, NSA_WATCH_EXIT_GRACE_S, NSA_WATCH_FETCH_SLOW_S); the host's resource
 * rules read NSA_TOP_HOST_MEM_WARN_S/_CRIT_S and NSA_TOP_DISK_FULL_WARN_S/_CRIT_S. A malformed value
 * is an error naming the variable, not a silent default.
 */
export function thresholdsFromEnv(env: NodeJS.ProcessEnv, base: Partial<Thresholds> = {}): Thresholds {
  const t: Thresholds = { ...DEFAULT_THRESHOLDS, ...base };
  const set = <K extends keyof Thresholds>(k: K, v: Thresholds[K] | undefined) => {
    if (v !== undefined) t[k] = v;
  };
  set('stallFloorS', num(env, 'NSA_WATCH_HEARTBEAT_STALL_S', 0.1));
  set('flatlineN', num(env, 'NSA_WATCH_FLATLINE_N', 1));
  set('gateEntropyMin', num(env, 'NSA_WATCH_GATE_ENTROPY_MIN', 0));
  set('gateMaxThreshold', num(env, 'NSA_WATCH_GATE_MAX_THRESHOLD', 0));
  set('gateCollapseN', num(env, 'NSA_WATCH_GATE_COLLAPSE_N', 1));
  set('gateCollapseFrac', num(env, 'NSA_WATCH_GATE_COLLAPSE_FRAC', 0));
  set('haltGraceS', num(env, 'NSA_WATCH_HALT_GRACE_S', 0));
  set('exitGraceS', num(env, 'NSA_WATCH_EXIT_GRACE_S', 0));
  set('fetchSlowS', num(env, 'NSA_WATCH_FETCH_SLOW_S', 0));
  set('hostMemWarnS', num(env, 'NSA_TOP_HOST_MEM_WARN_S', 0));
  set('hostMemCritS', num(env, 'NSA_TOP_HOST_MEM_CRIT_S', 0));
  set('hostMemTrendS', num(env, 'NSA_TOP_HOST_MEM_TREND_S', 0));
  set('diskFullWarnS', num(env, 'NSA_TOP_DISK_FULL_WARN_S', 0));
  set('diskFullCritS', num(env, 'NSA_TOP_DISK_FULL_CRIT_S', 0));
  const iv = num(env, 'NSA_WATCH_INTERVAL_S', 0);
  if (iv !== undefined) t.intervalS = Math.max(0.05, iv);
  const halt = env.NSA_WATCH_HALT;
  if (halt !== undefined && halt.trim() !== '') {
    if (!/^(0|1|true|false|yes|no)$/i.test(halt.trim()))
      throw new Error(`NSA_WATCH_HALT=${JSON.stringify(halt)}: expected 0 or 1`);
    t.halt = /^(1|true|yes)$/i.test(halt.trim());
  }
  return t;
}
