// Plain data produced by src/remote (GPU telemetry, the process table of a run).
// `null` always means "unknown / not reported by this device" — never 0.

export interface GpuDevice {
  index: number;
  name: string;
  uuid: string;
  /** MIG instance id when this row is a MIG device, else null */
  mig: { gpuInstance: number; computeInstance: number; parentUuid: string } | null;
  memUsedMiB: number | null;
  memTotalMiB: number | null;
  utilPct: number | null;
  powerW: number | null;
  powerLimitW: number | null;
  tempC: number | null;
  smClockMHz: number | null;
  memClockMHz: number | null;
  /** values nvidia-smi printed out of any possible range (e.g. "util 250%"): shown as invalid, kept null above */
  invalid?: string[];
  /** the node it is on, as the operator named it (a multi-node view, --node); absent: the one host */
  host?: string;
}

export interface GpuComputeApp {
  pid: number;
  gpuUuid: string;
  usedMemMiB: number | null;
}

export type GpuTelemetry =
  | { status: 'no-nvidia-tools'; at: number }
  | { status: 'not-answering'; since: number; at: number; lastGood: GpuSample | null }
  | { status: 'error'; message: string; at: number }
  | ({ status: 'ok' } & GpuSample);

export interface GpuSample {
  at: number;
  devices: GpuDevice[];
  apps: GpuComputeApp[];
  /** how long the last query took, ms */
  latencyMs: number;
  /** a multi-node view (--node): how each node's nvidia-smi answered (src/remote/nodegpus.ts) */
  nodes?: NodeGpuStatus[];
}

/** One node's GPU telemetry in a multi-node view, in one phrase. */
export interface NodeGpuStatus {
  host: string;
  status: GpuTelemetry['status'] | 'unreachable';
  /** why not ok, one line (null: ok) */
  why: string | null;
}

export type ProcState = 'R' | 'S' | 'D' | 'T' | 't' | 'Z' | 'I' | 'X' | '?';

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** process start time in clock ticks since boot (/proc/PID/stat field 22) or an equivalent
   * stable token from `ps -o lstart`; pid + startTime identifies a process across pid reuse */
  startTime: string;
  state: ProcState;
  cpuPct: number | null;
  /** CPU seconds used since the process started (utime + stime), and its age by the host's uptime:
   *  a one-look CPU share (the straggler view's "since start" when no interval is known yet) */
  cpuTotalS?: number | null;
  ageS?: number | null;
  rssKiB: number | null;
  wchan: string | null;
  argv: string[];
  /** RANK / LOCAL_RANK / WORLD_SIZE (GROUP_RANK: torchrun's node rank) when readable from /proc/PID/environ */
  env: {
    RANK?: string;
    LOCAL_RANK?: string;
    WORLD_SIZE?: string;
    GROUP_RANK?: string;
    NSA_TOP_RUN_DIR?: string;
    CONFIG?: string;
  };
  /** the node it runs on, as the operator named it (a multi-node view, --node); absent: the one host */
  host?: string;
  /** its node does not answer now: what is shown is that node's last answer, of this time (ms epoch,
   *  this machine's clock); absent while its node answers */
  unseenSinceMs?: number;
  /** process name (/proc/PID/stat comm) */
  comm?: string;
  /** working directory (physical path) when readable */
  cwd?: string | null;
  /** host wall time (ms epoch) the process started, derived from boot time + startTime */
  startedAtMs?: number | null;
  /** how far startedAtMs may be off (ms): small when the host's clock was read beside its uptime */
  startedAtSlackMs?: number;
  /** NSpid from /proc/PID/status when the process lives in a nested pid namespace (a container):
   * its pid here first, its pid inside the container last */
  nsPid?: number[] | null;
}

/** A process that something named as a trainer of the run (a heartbeat's pid, a path in its argv)
 * but that gave no proof of it: never signalled, and `why` says what was missing. */
export interface UnprovenProc {
  pid: number;
  startTime: string | null;
  /** the rank a heartbeat gave it, when a heartbeat named it */
  rank: number | null;
  argv: string[];
  why: string;
  /** the node where it was looked at (a multi-node view) */
  host?: string;
  /** tied to the run by its command and environment only (no record names it): proven only by
   * descent from the run's launcher or from what nsa-top's supervisor started */
  envOnly?: true;
}

export interface RankProc {
  rank: number;
  localRank: number | null;
  proc: ProcInfo;
  /** GPU memory of this pid from compute-apps, MiB */
  gpuMemMiB: number | null;
  gpuUuid: string | null;
  /** how the rank number was learned */
  source: 'environ' | 'argv' | 'heartbeat-pid';
}

export interface RunProcesses {
  at: number;
  launcher: ProcInfo | null;
  ranks: RankProc[];
  /** processes that look like trainers of this run but whose rank could not be told */
  unknown: ProcInfo[];
  /** named as trainers (heartbeat pid, argv) without proof; absent when none */
  unproven?: UnprovenProc[];
  error?: string;
}
