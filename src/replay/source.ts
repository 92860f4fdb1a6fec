// What `nsa-top replay` plays: a run's history as the cockpit drew it (or as its files still tell
// it), one CockpitState per moment. Two sources fill it: nsa-top's own journal
// (<out_dir>/.nsa-top/journal*, what a cockpit or watchdog observed and judged) and, for a run nsa-top
// never watched, the trainer's own files read as they stood at each moment. The replay cockpit draws
// the states with the same panels as a live one and refuses every action.
import type { CockpitState } from '../cockpit/state.js';

/** one moment worth jumping to on the replay's timeline */
export interface ReplayMarker {
  /** ms epoch on the run host's clock */
  at: number;
  kind: 'alert' | 'clear' | 'action' | 'dump' | 'state' | 'checkpoint' | 'restart';
  /** one line, e.g. "critical step-frozen: rank 1", "halt by alice", "RUNNING → STALLED" */
  label: string;
}

export interface ReplaySource {
  /** where the history came from, one line ("journal, 3 files, 41 MB" / "trainer files only") */
  readonly origin: string;
  /** the first and last moment with history, ms epoch on the run host's clock */
  readonly span: { start: number; end: number };
  /** oldest first */
  readonly markers: ReplayMarker[];
  /** what this source cannot show, one phrase each (e.g. "no GPU history: trainer files only") */
  readonly missing: string[];
  /** the cockpit's state as it was at `at` (the newest moment at or before it) */
  stateAt(at: number): Promise<CockpitState>;
}
