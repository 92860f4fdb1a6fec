// Judgements produced by src/checks. The TUI, `nsa-top watchdog` and `nsa-top report` all use
// the same rules, so they can never disagree.

export type Severity = 'info' | 'warning' | 'critical';

export interface Alert {
  /** stable id of the condition (rule + subject), e.g. "stall:rank1" — used to keep `since` */
  id: string;
  rule: string;
  severity: Severity;
  /** one line, operator language: "rank 1 heartbeat silent 212 s (expected every 20 s)" */
  title: string;
  /** why: the numbers and the threshold */
  detail: string;
  /** ms epoch when the condition was first seen (kept across evaluations while it holds) */
  since: number;
  step?: number;
  rank?: number;
  /** anomaly name as the real watchdog would write it into .anomaly_type, when there is one */
  anomaly?: string;
  /**
   * Hysteresis: the condition has not been seen since this time (ms epoch). The alert stays, as it
   * was last seen, until it has stayed clear for Thresholds.alertClearChecks evaluations and
   * alertClearS seconds, so a flickering condition does not flap. Nothing acts on a clearing alert.
   */
  clearing?: number;
}

/** An alert whose condition cleared (kept by the Checker, newest first, bounded). */
export interface ClearedAlert extends Alert {
  /** ms epoch when the condition was first seen clear (the end of the episode) */
  cleared: number;
}

export interface HangVerdict {
  kind: 'collective-spin' | 'odd-rank' | 'heartbeat-without-progress' | 'all-silent' | 'slow-step';
  rank?: number;
  text: string;
}

/** The run's state: a judgement of src/checks, shown by every surface. STALE: the data is too old to judge.
 *  STARTING: a launch booting (no step yet); RESTARTING: its supervisor restarting it after an exit. */
export type RunState =
  | 'STARTING'
  | 'RESTARTING'
  | 'RUNNING'
  | 'STALLED'
  | 'HALTING'
  | 'HALTED'
  | 'EXITED'
  | 'FINISHED'
  | 'NO TRAINER'
  | 'STALE';

/** How a state, a rank or a gate reading is to be coloured: the checks decide, the UI maps it to a colour. */
export type Health = 'ok' | 'info' | 'warning' | 'critical';

/** One rank's health and the reason, for the Ranks panel (and the halt dialog). */
export interface RankHealth {
  rank: number;
  health: Health;
  /** one line when the health is not ok (or a verdict names the rank); null when nothing to say */
  why: string | null;
}

/** One gate statistic against the threshold in force (NSA_WATCH_GATE_* honoured). */
export interface GateReading {
  key: 'entropy' | 'maxGate' | 'collapse';
  value: number | null;
  /** the threshold in force and which side of it is bad */
  limit: number;
  bad: '<' | '>';
  health: Health;
}

/** The Gates panel's judgements: each reading, the watchdog countdown, the uniform-gate note. */
export interface GatesView {
  readings: GateReading[];
  /** "watchdog would halt in k checks" / "gate rules clear" */
  watchdog: { text: string; health: Health };
  /** the gate-frozen-at-uniform note when the rule holds, else null */
  uniform: string | null;
}

/** The culprit of a not-advancing run, when the evidence names one. */
export interface Culprit {
  rank: number;
  why: string;
}

/** One GPU's readings judged (the GPUs panel colours them as said). */
export interface GpuHealth {
  uuid: string;
  mem: Health;
  util: Health;
  power: Health;
  temp: Health;
}
