// CockpitState: the one value the UI draws. Assembled by the collector from the run snapshot,
// telemetry, the process table, the checks and the action log. Plain data only.
import type { ClearedAlert, Evaluation } from '../checks/index.js';
import type { ConnState } from '../remote/host.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { HostStats } from '../remote/hoststats.js';
import type { ActionRecord, ControlRequest, SupervisorState } from '../trainer/control/types.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

export type { RunState } from '../checks/types.js';

/** The part of a CockpitState that is the evaluation, copied as it is (the collector and tests use it). */
export function evaluationFields(ev: Evaluation) {
  return {
    runState: ev.runState,
    runStateWhy: ev.runStateWhy,
    alerts: ev.alerts,
    verdicts: ev.verdicts,
    gateHaltIn: ev.gateHaltIn,
    stateHealth: ev.stateHealth,
    culprit: ev.culprit,
    advancing: ev.advancing,
    noStepSinceMs: ev.noStepSinceMs,
    rankHealth: ev.ranks,
    gates: ev.gates,
    gpuHealth: ev.gpus,
    dumpOdd: ev.dumpOdd,
    straggler: ev.straggler,
    numbers: ev.numbers,
  };
}

/**
 * The judgements of the evaluation (src/checks) that panels present as they are (see Evaluation for
 * what each means). Optional so a hand-built state still draws; the collector always sets them.
 */
type Judged = Omit<ReturnType<typeof evaluationFields>, 'runState' | 'runStateWhy' | 'alerts' | 'verdicts'>;

export interface CockpitState extends Partial<Judged> {
  /** when this state was judged, ms epoch on the run host's clock */
  at: number;
  /**
   * the run host's clock minus ours, ms (0 locally; over SSH measured at connect): the screen counts
   * ages ("12s ago") on the host's clock, the one every file time is written in
   */
  clockOffsetMs?: number;
  hostLabel: string;
  conn: ConnState;
  readOnly: boolean;
  run: RunSnapshot;
  runState: Evaluation['runState'];
  /** why runState is what it is, one line */
  runStateWhy: string;
  gpu: GpuTelemetry | null;
  /** the host's RAM, swap, CPU, load and disks (the GPUs panel's Host lines); absent: not read */
  hostStats?: HostStats | null;
  procs: RunProcesses | null;
  alerts: Evaluation['alerts'];
  /** the Checker's timeline of cleared alerts, newest first (absent: none kept) */
  alertHistory?: ClearedAlert[];
  verdicts: Evaluation['verdicts'];
  actions: ActionRecord[];
  supervisor: SupervisorState | null;
  /** durable control requests (<out_dir>/.nsa-top/requests.json), oldest first; absent: not read */
  requests?: ControlRequest[];
  /** seconds the ranks get after .HALT before SIGINT/SIGKILL are offered (the profile's stop.halt_grace_s) */
  haltGraceS?: number;
  self: { cpuPct: number | null; rssMiB: number | null; renderMs: number | null; telemetryLatencyMs: number | null };
  /** steps since the newest complete checkpoint (what a halt now would lose) */
  stepsAtRisk?: { steps: number | null; lastCheckpointStep: number | null; savesOnHalt?: boolean } | null;
  /** what the host can do: py-spy installed (null: not probed yet) */
  caps?: { pySpy: boolean | null };
  /** the run's journal as this cockpit records it (docs/journal.md): "recording to …", "recording by pid N (…)", "not recording: why" */
  journal?: string;
  /** the last collection problem (a failed poll, an unreadable actions log), one line */
  collectError?: string | null;
  /**
   * `nsa-top replay`: this state is a recorded moment, not the run now — the header says REPLAY and
   * the moment, the footer draws the timeline, every action is refused (src/replay/player.ts)
   */
  replay?: ReplayView;
}

/** Where a replay stands: the moment shown on its span, the markers, playback. */
export interface ReplayView {
  /** the moment shown (ms epoch, the run host's clock) */
  at: number;
  span: { start: number; end: number };
  /** oldest first (src/replay/source.ts ReplayMarker) */
  markers: { at: number; kind: string; label: string }[];
  playing: boolean;
  /** recorded seconds per wall second */
  speed: number;
  /** where the history came from, one line */
  origin: string;
  /** the run, as the refusals name it */
  run: string;
}
