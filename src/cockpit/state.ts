// CockpitState: the one value the UI draws. Assembled by the collector from the run snapshot,
// telemetry, the process table, the checks and the action log. Plain data only.
import type { Alert, ClearedAlert, HangVerdict } from '../checks/types.js';
import type { ConnState } from '../remote/host.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { ActionRecord, ControlRequest, SupervisorState } from '../trainer/control-types.js';
import type { RunSnapshot } from '../trainer/snapshot.js';

export type RunState = 'STARTING' | 'RUNNING' | 'STALLED' | 'HALTING' | 'HALTED' | 'EXITED' | 'FINISHED' | 'NO TRAINER';

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
}
