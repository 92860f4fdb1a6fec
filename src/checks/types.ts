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
