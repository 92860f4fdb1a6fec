// CockpitState: the one value the UI draws. Assembled by the collector from the run snapshot,
// telemetry, the process table, the checks and the action log. Plain data only.
import type {
  Alert,
  ClearedAlert,
  Culprit,
  GatesView,
  GpuHealth,
  HangVerdict,
  Health,
  RankHealth,
  RunState,
} from '../checks/types.js';
import type { ConnState } from '../remote/host.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { ActionRecord, ControlRequest, SupervisorState } from '../trainer/control/types.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

export type { RunState } from '../checks/types.js';

export interface CockpitState {
  at: number;
  hostLabel: string;
  conn: ConnState;
  readOnly: boolean;
  run: RunSnapshot;
  runState: RunState;
  /** why runState is what it is, one line */
  runStateWhy: string;
  gpu: GpuTelemetry | null;
  procs: RunProcesses | null;
  alerts: Alert[];
  /** the Checker's timeline of cleared alerts, newest first (absent: none kept) */
  alertHistory?: ClearedAlert[];
  verdicts: HangVerdict[];
  actions: ActionRecord[];
  supervisor: SupervisorState | null;
  /** durable control requests (<out_dir>/.nsa-top/requests.json), oldest first; absent: not read */
  requests?: ControlRequest[];
  /** seconds the ranks get after .HALT before SIGINT/SIGKILL are offered (the profile's stop.halt_grace_s) */
  haltGraceS?: number;
  self: { cpuPct: number | null; rssMiB: number | null; renderMs: number | null; telemetryLatencyMs: number | null };
  /** from the Checker: the watchdog's gate rule would halt the run in this many more checks (null: it would not) */
  gateHaltIn?: number | null;
  /** steps since the newest complete checkpoint (what a halt now would lose) */
  stepsAtRisk?: { steps: number | null; lastCheckpointStep: number | null; savesOnHalt?: boolean } | null;
  /** what the host can do: py-spy installed (null: not probed yet) */
  caps?: { pySpy: boolean | null };
  /** the last collection problem (a failed poll, an unreadable actions log), one line */
  collectError?: string | null;
  // Judgements from the evaluation (src/checks) that panels present as they are. Optional so a
  // hand-built state still draws; the collector always sets them (evaluationFields).
  /** how the state is to be shown */
  stateHealth?: Health;
  /** the rank the evidence names when the run does not advance */
  culprit?: Culprit | null;
  /** rate and ETA mean something only while the run advances */
  advancing?: boolean;
  /** "no step for …" since this ms epoch; null when not to be said */
  noStepSinceMs?: number | null;
  rankHealth?: RankHealth[];
  gates?: GatesView | null;
  gpuHealth?: GpuHealth[];
  /** the odd rank of the dumps since the step froze, as the rule found it */
  dumpOdd?: { rank: number; where: string; others: string } | null;
}

type EvalLike = {
  runState: RunState;
  runStateWhy: string;
  alerts: Alert[];
  verdicts: HangVerdict[];
  gateHaltIn: number | null;
  stateHealth: Health;
  culprit: Culprit | null;
  advancing: boolean;
  noStepSinceMs: number | null;
  ranks: RankHealth[];
  gates: GatesView | null;
  gpus: GpuHealth[];
  dumpOdd: { rank: number; where: string; others: string } | null;
};

/** The part of a CockpitState that is the evaluation, copied as it is (the collector and tests use it). */
export function evaluationFields(
  ev: EvalLike,
): Pick<
  CockpitState,
  | 'runState'
  | 'runStateWhy'
  | 'alerts'
  | 'verdicts'
  | 'gateHaltIn'
  | 'stateHealth'
  | 'culprit'
  | 'advancing'
  | 'noStepSinceMs'
  | 'rankHealth'
  | 'gates'
  | 'gpuHealth'
  | 'dumpOdd'
> {
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
  };
}
