// When a surface that looks every second (the watchdog's loop) reads the process table again. The
// table proves the ranks and shows a stopped (T), stuck (D) or dead one; reading it is the costliest
// part of a round on a busy box (a stat and wchan of every trainer-looking process). While the run
// visibly advances — a new step or a new heartbeat record since the last round, RUNNING, no alert —
// every rank is evidently stepping (a rank that stops holds the others at the next collective, so
// the step freezes), and the table is read every `everyMs`. The round after the step or the
// heartbeats stand still, or anything else is in view, it is read again, so a stopped rank is named
// within a round of the step freezing: as soon as with a read every round.
import type { Evaluation } from '../checks/index.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

/** A run the process table need not be read for this round: stepping, not ended, and RUNNING with
 *  no alert the round before (`prev`: that round's judgement, null: none yet). */
export function runCalm(run: RunSnapshot, prev: Pick<Evaluation, 'runState' | 'alerts'> | null): boolean {
  return run.step !== null && !run.ended && prev !== null && prev.runState === 'RUNNING' && prev.alerts.length === 0;
}

export class ProcsCadence {
  private readAt = 0;
  private lastStep: number | null | undefined = undefined;
  private lastBeat: number | null | undefined = undefined;

  constructor(private readonly everyMs = 5000) {}

  /** Whether this round reads the table: `prev` is the last round's judgement (null: none yet). */
  due(run: RunSnapshot, prev: Pick<Evaluation, 'runState' | 'alerts'> | null, now = Date.now()): boolean {
    const beat = newestBeat(run);
    const moved = this.lastStep !== undefined && (run.step !== this.lastStep || beat !== this.lastBeat);
    this.lastStep = run.step;
    this.lastBeat = beat;
    const calm = moved && runCalm(run, prev) && now >= this.readAt && now - this.readAt < this.everyMs;
    if (!calm) this.readAt = now;
    return !calm;
  }

  /** the table was read for another reason (new pids): the cadence counts from now */
  read(now = Date.now()): void {
    this.readAt = now;
  }
}

function newestBeat(run: RunSnapshot): number | null {
  let t: number | null = null;
  for (const r of run.ranks) if (r.lastTs !== null && (t === null || r.lastTs > t)) t = r.lastTs;
  return t;
}
