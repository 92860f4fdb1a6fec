// The watchdog's Prometheus surface, pure: one observation (./observe.ts) and its judgement
// (Checker.evaluate) in, the text exposition format 0.0.4 out. Nothing here judges: every state, alert
// and threshold is the Evaluation's or the Thresholds in force, so a dashboard, an Alertmanager rule
// and the cockpit read the same verdict. `nsa-top watchdog --metrics-listen / --metrics-file` serves or
// writes what `renderMetrics` returns (./metrics-server.ts); docs/prometheus.md lists every metric.
//
// Naming (https://prometheus.io/docs/practices/naming/): prefix nsatop_, base units (_seconds,
// _bytes, _ratio, _watts, _celsius, _hertz), _total for counters, _info for identity (value 1). Labels
// are bounded: run and hostname on every run series, rank per rank (the world size), the alert's id,
// rule and severity (rules × ranks), the GPU's gpu/UUID/modelName as dcgm-exporter names them so the
// series join with DCGM_FI_*; never a step, a pid or a time. A multi-node run (--node) adds `host` —
// the node as the operator named it, bounded by the node list — on every per-rank and per-GPU series,
// and a GPU's `hostname` is its own node's machine.
import type { Evaluation, RunState, Severity, Thresholds } from '../checks/index.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { SupervisorState } from '../trainer/control/types.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

/** what the exporter reads of one observation (a subset of Observation, so a test can build one) */
export interface MetricsObservation {
  run: RunSnapshot;
  procs: RunProcesses | null;
  gpu: GpuTelemetry | null;
  supervisor: SupervisorState | null;
  haltGraceS: number;
  /** the poll brought fresh data */
  fresh: boolean;
  /** problems reading parts of the run this round */
  errors: string[];
}

/** the watchdog itself: its identity and how its looks went */
export interface ExporterSelf {
  version: string;
  /** the training host's name (the `hostname` label, lower-case as dcgm-exporter has it since PR #655) */
  hostname: string;
  /** rounds looked at, and rounds that failed (an exception: nothing judged) */
  observations: number;
  observationErrors: number;
  /** ms epoch of the newest round that observed the run (files read, processes listed) */
  lastGoodMs: number | null;
  /** how long the newest round took, ms */
  roundMs: number | null;
  /** stack dumps taken while this exporter watched (DumpCounter); absent: the dump files present */
  dumpsTaken?: number | null;
}

/**
 * nsatop_stack_dumps_total as a counter: the dump files present at the first round, plus every dump
 * that appears after it (a name not seen before, or more files than the round before — whichever
 * says more). A dump file removed, or its directory cleaned, never takes the count down; a watchdog
 * restart starts it again from the files present (Prometheus's rate() reads that as a counter reset).
 */
export class DumpCounter {
  private readonly seen = new Set<string>();
  private total: number | null = null;
  private present = 0;

  update(run: { dumps: readonly { name: string }[]; dumpsTotal?: number }): number {
    const present = run.dumpsTotal ?? run.dumps.length;
    let fresh = 0;
    for (const d of run.dumps)
      if (!this.seen.has(d.name)) {
        this.seen.add(d.name);
        fresh++;
      }
    this.total = this.total === null ? present : this.total + Math.max(fresh, present - this.present);
    this.present = present;
    return this.total;
  }
}

export const RUN_STATES: readonly RunState[] = [
  'STARTING',
  'RESTARTING',
  'RUNNING',
  'STALLED',
  'HALTING',
  'HALTED',
  'EXITED',
  'FINISHED',
  'NO TRAINER',
  'STALE',
];
const SEVERITIES: readonly Severity[] = ['critical', 'warning', 'info'];
const SUPERVISOR_STATES: readonly SupervisorState['state'][] = [
  'starting',
  'running',
  'backoff',
  'stopping',
  'halted',
  'exited',
  'failed',
];
const ACTIVE_SUPERVISOR = new Set<string>(['starting', 'running', 'backoff', 'stopping']);

type Labels = Record<string, string | number | null | undefined>;
type Kind = 'gauge' | 'counter';

const NEEDS_ESCAPE = /[\\"\n]/;

/** the machine in a node's label (user@box:port → box), lower-case like the `hostname` label */
export function machineOf(label: string): string {
  return label
    .replace(/^[^@]*@/, '')
    .replace(/:\d+$/, '')
    .replace(/^\[(.*)\]$/, '$1')
    .toLowerCase();
}

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
export function escapeLabel(v: string): string {
  // nearly every value has nothing to escape: one scan instead of three replaces
  if (!NEEDS_ESCAPE.test(v)) return v;
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** HELP text: backslash and newline escaped. */
export function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** A sample value: Go's ParseFloat reads NaN, +Inf, -Inf and JS's exponent form. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** Collects families in order; each family's HELP and TYPE once, its samples together. */
class Exposition {
  private readonly families = new Map<string, { help: string; kind: Kind; samples: string[] }>();

  add(name: string, kind: Kind, help: string, value: number | null | undefined, labels: Labels = {}): void {
    let f = this.families.get(name);
    if (!f) this.families.set(name, (f = { help, kind, samples: [] }));
    if (value === null || value === undefined) return;
    // (a label object is a literal: its own keys, in order; an absent or empty value is left out)
    let ls = '';
    for (const k in labels) {
      const v = labels[k];
      if (v === null || v === undefined || v === '') continue;
      ls += `${ls ? ',' : ''}${k}="${escapeLabel(String(v))}"`;
    }
    f.samples.push(`${name}${ls ? `{${ls}}` : ''} ${formatValue(value)}`);
  }

  text(): string {
    // one string grown in place (no array of every line, no spread, no join): rendered every round
    let out = '';
    for (const [name, f] of this.families) {
      // a family with no sample this round is left out whole (an unknown value is absent, never 0)
      if (f.samples.length === 0) continue;
      out += headOf(name, f.help, f.kind);
      for (const sample of f.samples) out += sample + '\n';
    }
    return out === '' ? '\n' : out;
  }
}

/** each family's HELP and TYPE lines, escaped once per process (help texts are literals: bounded) */
const heads = new Map<string, { help: string; kind: Kind; head: string }>();
function headOf(name: string, help: string, kind: Kind): string {
  const h = heads.get(name);
  if (h && h.help === help && h.kind === kind) return h.head;
  const head = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${kind}\n`;
  heads.set(name, { help, kind, head });
  return head;
}

const sec = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : ms / 1000);
const fin = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? null : v);
const MIB = 1024 * 1024;

/** The run's name for the `run` label: the run dir's basename (bounded: one per run). */
export function runName(run: RunSnapshot): string {
  return run.identity.name || run.runDir.split('/').filter(Boolean).pop() || run.runDir;
}

/**
 * Before any round: the watchdog's identity and its counts only (a scrape that comes before the first
 * look says the watchdog is up and has not looked yet, rather than nothing).
 */
export function renderSelfOnly(self: ExporterSelf, runLabel: string): string {
  const x = new Exposition();
  addSelf(x, self, { run: runLabel, hostname: self.hostname });
  return x.text();
}

function addSelf(x: Exposition, self: ExporterSelf, base: Labels): void {
  x.add('nsatop_build_info', 'gauge', "nsa-top's version (value 1)", 1, { version: self.version });
  x.add(
    'nsatop_watchdog_observations_total',
    'counter',
    'rounds the watchdog has looked at the run',
    self.observations,
    base,
  );
  x.add(
    'nsatop_watchdog_observation_errors_total',
    'counter',
    'rounds that failed (nothing judged that round)',
    self.observationErrors,
    base,
  );
  x.add(
    'nsatop_watchdog_last_observation_timestamp_seconds',
    'gauge',
    'when the watchdog last observed the run (files read, processes listed); old: it is blind',
    sec(self.lastGoodMs),
    base,
  );
  x.add(
    'nsatop_watchdog_round_duration_seconds',
    'gauge',
    "how long the watchdog's newest round took",
    sec(self.roundMs),
    base,
  );
}

/** The exposition of one round: observation + its evaluation, under the thresholds in force. */
export function renderMetrics(obs: MetricsObservation, ev: Evaluation, t: Thresholds, self: ExporterSelf): string {
  const x = new Exposition();
  const run = obs.run;
  const hostname = self.hostname;
  const base: Labels = { run: runName(run), hostname };
  addSelf(x, self, base);
  x.add(
    'nsatop_watchdog_observation_ok',
    'gauge',
    '1: the newest round read the run fresh and without errors; 0: the watchdog sees part of it or none (blind)',
    obs.fresh && obs.errors.length === 0 ? 1 : 0,
    base,
  );

  // ---- identity and state
  const id = run.identity;
  x.add('nsatop_run_info', 'gauge', 'the run being watched (value 1)', 1, {
    ...base,
    trainer: id.trainer,
    backend: id.backend,
    config: id.config,
    dataset: id.dataset,
    world_size: id.worldSize,
  });
  for (const s of RUN_STATES)
    x.add(
      'nsatop_run_state_info',
      'gauge',
      "the run's state as the cockpit shows it: 1 for the state in force, 0 for the others",
      s === ev.runState ? 1 : 0,
      { ...base, state: s },
    );

  // ---- training (rank 0's view, as every surface shows it)
  x.add('nsatop_train_step', 'gauge', 'the newest step logged', run.step, base);
  x.add('nsatop_train_steps', 'gauge', 'the steps the run was configured for', run.totalSteps, base);
  x.add(
    'nsatop_loss',
    'gauge',
    'the newest training loss (absent while non-finite: see nsatop_loss_non_finite)',
    fin(run.loss),
    base,
  );
  x.add('nsatop_loss_non_finite', 'gauge', '1: the newest loss was NaN or Inf', run.lastLossNonFinite ? 1 : 0, base);
  x.add('nsatop_learning_rate', 'gauge', 'the newest learning rate', fin(run.lr), base);
  x.add('nsatop_tokens_per_second', 'gauge', 'the newest throughput, tokens per second', fin(run.toksPerS), base);
  x.add(
    'nsatop_step_duration_seconds',
    'gauge',
    'median seconds per step over the recent window',
    fin(run.stepTimeS),
    base,
  );
  x.add('nsatop_eta_seconds', 'gauge', 'estimated seconds to the last step', fin(run.etaS), base);
  x.add(
    'nsatop_train_last_step_advance_timestamp_seconds',
    'gauge',
    'when the run-level step last advanced',
    sec(run.stepAdvancedTs),
    base,
  );
  x.add('nsatop_grad_norm', 'gauge', 'the newest gradient norm', fin(run.lastProgress?.gradNorm), base);
  x.add(
    'nsatop_data_fetch_seconds',
    'gauge',
    'the newest data-fetch time of a step (dt_fetch_s)',
    fin(run.data.lastDtFetchS),
    base,
  );
  x.add(
    'nsatop_stall_deadline_timestamp_seconds',
    'gauge',
    "when the watchdog's stall threshold is crossed if nothing advances (absent when the run is not live)",
    sec(ev.stallDeadline),
    base,
  );
  x.add(
    'nsatop_expected_heartbeat_interval_seconds',
    'gauge',
    "seconds between rank 0's heartbeats, from the run's own cadence",
    fin(ev.expectedIntervalS),
    base,
  );

  // ---- gates
  const g = run.gates;
  x.add(
    'nsatop_gate_entropy',
    'gauge',
    'mean gate entropy (nats; ln 3 is uniform over the 3 branches)',
    fin(g?.entropyMean),
    base,
  );
  x.add('nsatop_gate_max', 'gauge', 'the largest gate weight of any row', fin(g?.maxGate), base);
  x.add(
    'nsatop_gate_collapse_ratio',
    'gauge',
    'fraction of gate rows collapsed onto one branch',
    fin(g?.collapseFrac),
    base,
  );
  x.add(
    'nsatop_gate_halt_in_checks',
    'gauge',
    'gate records until the gate rule would halt the run (absent when not counting down)',
    ev.gateHaltIn,
    base,
  );

  // ---- alerts (the Evaluation's, clearing ones included, as the cockpit lists them)
  for (const level of SEVERITIES)
    x.add('nsatop_alerts', 'gauge', 'alerts in force by level', ev.alerts.filter((a) => a.severity === level).length, {
      ...base,
      level,
    });
  for (const a of ev.alerts)
    x.add(
      'nsatop_alert_active',
      'gauge',
      'an alert in force (1; 0 while it is clearing under hysteresis); id is the condition, bounded by rules × ranks',
      a.clearing === undefined ? 1 : 0,
      { ...base, id: a.id, rule: a.rule, severity: a.severity, rank: a.rank, anomaly: a.anomaly },
    );
  x.add(
    'nsatop_watchdog_act_on',
    'gauge',
    'critical alerts past the watchdog action threshold (what --halt acts on)',
    ev.actOn.length,
    base,
  );
  if (run.control.anomaly)
    x.add('nsatop_anomaly_info', 'gauge', "the run's .anomaly_type (value 1)", 1, {
      ...base,
      type: run.control.anomaly.type,
    });
  x.add(
    'nsatop_halt_requested',
    'gauge',
    '1: a .HALT file is present in the run dir',
    run.control.halt.present ? 1 : 0,
    base,
  );

  // ---- supervisor, restarts, dumps, checkpoints
  const sup = obs.supervisor;
  if (sup) {
    x.add(
      'nsatop_supervisor_up',
      'gauge',
      '1: the supervisor process lives (pid + start time); 0: its state says active but it is gone, or it has ended',
      !sup.supervisorGone && !!sup.supervisor && ACTIVE_SUPERVISOR.has(sup.state) ? 1 : 0,
      base,
    );
    for (const s of SUPERVISOR_STATES)
      x.add(
        'nsatop_supervisor_state_info',
        'gauge',
        "the supervisor's state: 1 for the state in force",
        s === sup.state ? 1 : 0,
        {
          ...base,
          state: s,
        },
      );
    x.add('nsatop_restarts_total', 'counter', 'restarts of the trainer by its supervisor', sup.restarts, base);
    x.add('nsatop_max_restarts', 'gauge', "the supervisor's restart budget", sup.maxRestarts, base);
  }
  x.add(
    'nsatop_stack_dumps_total',
    'counter',
    'stack dumps taken: the dump files present when the watchdog started, plus each one written since (removing a file never lowers it)',
    self.dumpsTaken ?? run.dumpsTotal ?? run.dumps.length,
    base,
  );
  const ckpts = run.checkpoints.filter((c) => c.complete);
  const newest = ckpts.reduce<(typeof ckpts)[number] | null>((m, c) => (!m || c.mtimeMs > m.mtimeMs ? c : m), null);
  x.add('nsatop_checkpoints', 'gauge', 'complete checkpoints in the run dir', ckpts.length, base);
  x.add(
    'nsatop_last_checkpoint_timestamp_seconds',
    'gauge',
    'when the newest complete checkpoint was written',
    sec(newest?.mtimeMs),
    base,
  );
  x.add('nsatop_last_checkpoint_step', 'gauge', 'the step of the newest complete checkpoint', newest?.step, base);

  // ---- thresholds in force (a dashboard draws them; an alert rule compares with them)
  x.add(
    'nsatop_threshold_stall_seconds',
    'gauge',
    'the stall threshold in force: max(floor, factor × cadence)',
    ev.stallThresholdS,
    base,
  );
  x.add(
    'nsatop_threshold_stall_floor_seconds',
    'gauge',
    'the stall floor (NSA_WATCH_HEARTBEAT_STALL_S, --stall)',
    t.stallFloorS,
    base,
  );
  x.add(
    'nsatop_threshold_gate_entropy_min',
    'gauge',
    'gate entropy below this counts (NSA_WATCH_GATE_ENTROPY_MIN)',
    t.gateEntropyMin,
    base,
  );
  x.add(
    'nsatop_threshold_gate_max',
    'gauge',
    'max gate above this counts (NSA_WATCH_GATE_MAX_THRESHOLD)',
    t.gateMaxThreshold,
    base,
  );
  x.add(
    'nsatop_threshold_gate_collapse_ratio',
    'gauge',
    'collapse fraction above this counts',
    t.gateCollapseFrac,
    base,
  );
  x.add(
    'nsatop_threshold_gate_collapse_checks',
    'gauge',
    'consecutive gate records that make a collapse (NSA_WATCH_GATE_COLLAPSE_N)',
    t.gateCollapseN,
    base,
  );
  x.add(
    'nsatop_threshold_flatline_records',
    'gauge',
    'consecutive zero-throughput records that make a flatline (NSA_WATCH_FLATLINE_N)',
    t.flatlineN,
    base,
  );
  x.add(
    'nsatop_threshold_throughput_drop_ratio',
    'gauge',
    'a throughput drop below (1 − this) × the rolling median counts',
    t.throughputDropFrac,
    base,
  );
  x.add('nsatop_threshold_halt_grace_seconds', 'gauge', "the run's grace after .HALT", obs.haltGraceS, base);
  x.add('nsatop_watchdog_interval_seconds', 'gauge', "the watchdog's poll interval", t.intervalS, base);

  // ---- per rank: every rank a heartbeat or the process table names (bounded by the world size)
  const ranks = new Set<number>(run.ranks.map((r) => r.rank));
  for (const r of obs.procs?.ranks ?? []) ranks.add(r.rank);
  const health = new Map(ev.ranks.map((r) => [r.rank, r.health]));
  // a multi-node run: each rank's node (absent on one host, and for a rank no process table names)
  const hostOf = new Map<number, string>();
  for (const r of obs.procs?.ranks ?? [])
    if (r.proc.host !== undefined && !hostOf.has(r.rank)) hostOf.set(r.rank, r.proc.host);
  for (const rank of [...ranks].sort((a, b) => a - b)) {
    const hb = run.ranks.find((r) => r.rank === rank);
    const procs = (obs.procs?.ranks ?? []).filter((p) => p.rank === rank);
    const live = procs.find((p) => p.proc.state !== 'Z' && p.proc.state !== 'X');
    const rl: Labels = { ...base, rank, host: hostOf.get(rank) };
    // no process table this round: up is unknown, so absent (never a false 0)
    if (obs.procs)
      x.add(
        'nsatop_rank_up',
        'gauge',
        '1: a proven process of this rank lives (pid + start time; a zombie is not); 0: none does',
        live ? 1 : 0,
        rl,
      );
    x.add(
      'nsatop_rank_healthy',
      'gauge',
      "1: the cockpit's Ranks panel shows this rank ok",
      health.has(rank) ? (health.get(rank) === 'ok' ? 1 : 0) : null,
      rl,
    );
    x.add('nsatop_rank_step', 'gauge', "the newest step in this rank's heartbeat", hb?.lastStep, rl);
    x.add(
      'nsatop_last_heartbeat_timestamp_seconds',
      'gauge',
      "when this rank's heartbeat last wrote a record",
      sec(hb?.lastTs),
      rl,
    );
    x.add(
      'nsatop_last_step_advance_timestamp_seconds',
      'gauge',
      "when this rank's step last advanced",
      sec(hb?.stepAdvancedTs),
      rl,
    );
    x.add(
      'nsatop_rank_stopped',
      'gauge',
      "1: this rank's process is stopped (T/t)",
      live ? (/^[Tt]$/.test(live.proc.state) ? 1 : 0) : null,
      rl,
    );
    x.add(
      'nsatop_rank_cpu_ratio',
      'gauge',
      "this rank's CPU use, cores (1 = one core busy)",
      live?.proc.cpuPct === null || live?.proc.cpuPct === undefined ? null : live.proc.cpuPct / 100,
      rl,
    );
    x.add(
      'nsatop_rank_resident_memory_bytes',
      'gauge',
      "this rank's resident memory",
      live?.proc.rssKiB === null || live?.proc.rssKiB === undefined ? null : live.proc.rssKiB * 1024,
      rl,
    );
    x.add(
      'nsatop_rank_gpu_memory_reserved_bytes',
      'gauge',
      "GPU memory this rank's allocator reserved (its heartbeat)",
      hb?.memReservedMiB === null || hb?.memReservedMiB === undefined ? null : hb.memReservedMiB * MIB,
      rl,
    );
  }

  // ---- straggler scores (the judge's StragglerView) and the operator's numbers (MFU, checkpoint age)
  for (const r of ev.straggler?.ranks ?? []) {
    const rl: Labels = { ...base, rank: r.rank, host: hostOf.get(r.rank) };
    x.add(
      'nsatop_rank_straggler_score',
      'gauge',
      "this rank's pace: the fastest rank's CPU over the window ÷ its own, × its share of looks not stopped (1 = as fast as the fastest)",
      r.score,
      rl,
    );
    x.add(
      'nsatop_rank_straggler_hold_ratio',
      'gauge',
      'share of looks in which this rank was working (or stopped) while every peer waited',
      r.holdPct === null ? null : r.holdPct / 100,
      rl,
    );
  }
  x.add(
    'nsatop_straggler_rank',
    'gauge',
    'the rank named as holding the others back (absent on a clean run)',
    ev.straggler?.straggler?.rank ?? null,
    base,
  );
  x.add(
    'nsatop_model_flops_utilization_ratio',
    'gauge',
    "model FLOPs utilisation: median tok/s × FLOPs per token ÷ the devices' dense peak (absent while the peak is unknown)",
    ev.numbers?.mfu?.value ?? null,
    base,
  );

  // ---- GPUs, labelled as dcgm-exporter labels DCGM_FI_* (gpu, UUID, modelName, hostname)
  const gpu = obs.gpu;
  x.add(
    'nsatop_gpu_telemetry_up',
    'gauge',
    '1: nvidia-smi answered this round; 0: it did not (or there is none)',
    gpu ? (gpu.status === 'ok' ? 1 : 0) : null,
    base,
  );
  if (gpu?.status === 'ok') {
    for (const d of gpu.devices) {
      const gl: Labels = {
        gpu: d.index,
        UUID: d.uuid,
        modelName: d.name,
        // a multi-node run: the GPU's own node (its machine as `hostname`, as dcgm-exporter there says it)
        hostname: d.host === undefined || d.host === 'local' ? hostname : machineOf(d.host),
        GPU_I_ID: d.mig ? d.mig.gpuInstance : null,
        run: base.run,
        host: d.host,
      };
      x.add(
        'nsatop_gpu_utilization_ratio',
        'gauge',
        'GPU utilisation (nvidia-smi utilization.gpu / 100)',
        d.utilPct === null ? null : d.utilPct / 100,
        gl,
      );
      x.add(
        'nsatop_gpu_memory_used_bytes',
        'gauge',
        'GPU memory used',
        d.memUsedMiB === null ? null : d.memUsedMiB * MIB,
        gl,
      );
      x.add(
        'nsatop_gpu_memory_total_bytes',
        'gauge',
        'GPU memory in all',
        d.memTotalMiB === null ? null : d.memTotalMiB * MIB,
        gl,
      );
      x.add('nsatop_gpu_power_watts', 'gauge', 'GPU power draw', fin(d.powerW), gl);
      x.add('nsatop_gpu_power_limit_watts', 'gauge', 'GPU power limit', fin(d.powerLimitW), gl);
      x.add('nsatop_gpu_temperature_celsius', 'gauge', 'GPU temperature', fin(d.tempC), gl);
      x.add(
        'nsatop_gpu_sm_clock_hertz',
        'gauge',
        'GPU SM clock',
        d.smClockMHz === null ? null : d.smClockMHz * 1e6,
        gl,
      );
    }
  }
  return x.text();
}
