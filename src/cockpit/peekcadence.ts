// When the looping watchdog reads the whole process table. A full read is the costliest part of a
// calm round (a stat of every process on the box, then the proof of each trainer-looking one: ~4 ms
// of CPU here, more on a busy box). Between reads, each rank the last table proved is looked at in
// its own /proc/PID/stat every round (./rankrefresh.ts on the watchdog's own host; ./rankpeek.ts
// over SSH), and a rank that stopped, died or runs again has the table read that same round; new
// pids in the heartbeats (a restart) have it read at once by the Observer.
// - The ranks refreshed every round (the watchdog's own host): the table every 15 s while the run is
//   RUNNING with no alert and a step, whether or not the step moved since the last round (a rank that
//   stops is seen in its stat; one stuck in D or waiting is seen in its refreshed state and wait
//   channel; the straggler view gets a fresh look every round). Before, the table was read every
//   round the step stood still — every round of a run that logs less often than the watchdog looks,
//   as real runs do: ~0.3 % of a core at 1 Hz.
// - Not refreshed (another host): ProcsCadence's rules (./procsdue.ts) at the same 15 s: every round
//   the step or the heartbeats stand still.
// Anything in view (not RUNNING, an alert, the run ended, no step yet) reads the table every round.
import type { Evaluation } from '../checks/index.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import { ProcsCadence, runCalm } from './procsdue.js';

/** the table while the run is RUNNING with nothing in view */
export const CALM_TABLE_MS = 15_000;

export class PeekedCadence {
  private readonly cadence: ProcsCadence;
  private readAt = 0;

  constructor(private readonly calmMs = CALM_TABLE_MS) {
    this.cadence = new ProcsCadence(calmMs);
  }

  /**
   * Whether this round reads the table: `prev` is the last round's judgement (null: none yet),
   * `lifeChanged` what this round's look at the proven ranks said, `refreshed` whether that look
   * refreshes the ranks this round (RankRefresher) — else ProcsCadence's rules.
   */
  due(
    run: RunSnapshot,
    prev: Pick<Evaluation, 'runState' | 'alerts'> | null,
    lifeChanged: boolean,
    refreshed: boolean,
    now = Date.now(),
  ): boolean {
    // asked every round, so it keeps count of the step and the heartbeats
    const steps = this.cadence.due(run, prev, now);
    const calm =
      !lifeChanged &&
      runCalm(run, prev) &&
      now >= this.readAt &&
      now - this.readAt < this.calmMs &&
      (refreshed || !steps);
    if (calm) return false;
    this.readAt = now;
    this.cadence.read(now);
    return true;
  }
}
