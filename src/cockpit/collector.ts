// The collector: the one non-UI module that assembles CockpitState. It polls the run (RunModel),
// the process table and GPU telemetry on an interval, runs the Checker, reads the action log and
// the supervisor's state through the Host, measures nsa-top's own cost, and emits a new
// CockpitState only when something the screen shows has changed.
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { Checker, STATE_HEALTH, staleVerdict, thresholdsFromEnv } from '../checks/index.js';
import type { Host } from '../remote/host.js';
import type { RunProcesses } from '../remote/types.js';
import type { ActionRecord, Actor } from '../trainer/control/types.js';
import { readActions } from '../trainer/control/actions.js';
import { stepsAtRisk } from '../checks/control.js';
import { ACTIONS_FILE } from '../trainer/control/audit.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import { resolveRunDirsAt } from '../trainer/run/rundir.js';
import { join } from 'node:path';
import { dur } from '../format.js';
import { Observer, type GpuSource } from './observe.js';
import { provenChanged } from './rankpeek.js';
import { evaluationFields, type CockpitState } from './state.js';

export type { GpuSource } from './observe.js';

export interface CollectorOptions {
  host: Host;
  /** the run dir as given (a supervised launcher dir or the trainer's out_dir) */
  runDir: string;
  /** the run resolved at the edge (resolveRunDirsAt); else resolved from runDir on the first round */
  dirs?: RunDirs;
  /** who takes over a halt request whose carrier died (a cockpit on the training box, not read-only) */
  actor?: Actor | null;
  intervalMs?: number;
  readOnly?: boolean;
  gpu?: GpuSource | null;
  /** actions.jsonl records kept (newest) */
  actionLimit?: number;
  /** the process table is read at most this often (default 5000 ms; each read runs a command) */
  procsIntervalMs?: number;
  /** data older than this (no successful poll, or a poll stuck) is shown as STALE (default max(3 × interval, 5 s)) */
  staleAfterMs?: number;
  /** a multi-node run (--node): the other nodes' ranks, merged by the observation */
  nodes?: NodeProcesses | null;
  /** the journal's status, one line (src/journal): "recording to …", "recording by pid N", "not recording: …" */
  journal?: () => string;
}

type Listener = (s: CockpitState) => void;

/** CPU seconds this process has used (all its threads). */
function cpuSelfSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function changeKey(s: CockpitState): string {
  const r = s.run;
  const files = Object.entries(r.files)
    .map(([k, f]) => `${k}:${f.size}:${f.records}`)
    .join(',');
  const procs = s.procs
    ? `${s.procs.ranks.map((p) => `${p.rank}:${p.proc.pid}:${p.proc.state}:${Math.round(p.proc.cpuPct ?? -1)}:${Math.round((p.proc.rssKiB ?? 0) / 10240)}`).join(',')}|${s.procs.launcher?.pid ?? ''}|${s.procs.error ?? ''}`
    : 'none';
  // the Host lines coarsely (CPU % and load ride along with the next change): a reading that moves
  // little redraws nothing — an idle run's cockpit stays still
  const h = s.hostStats;
  const hostKey = h
    ? [
        Math.round((h.memAvailMiB ?? -1) / 256),
        Math.round((h.swapFreeMiB ?? -1) / 256),
        h.disks.map((d) => Math.round(d.availMiB / 1024)).join(','),
      ].join(':')
    : 'none';
  const gpu = `${s.gpu ? `${s.gpu.status}:${s.gpu.at}` : 'none'}|host ${hostKey}`;
  const alerts = s.alerts.map((a) => `${a.id}:${a.severity}:${a.title}:${a.clearing ?? ''}`).join(',');
  return [
    files,
    r.exists,
    r.error,
    r.step,
    r.dumps.length,
    r.checkpoints.map((c) => `${c.step}${c.complete ? '+' : ''}`).join(','),
    r.control.halt.present,
    procs,
    gpu,
    alerts,
    s.alertHistory?.length,
    s.alertHistory?.[0]?.cleared,
    s.runState,
    s.runStateWhy,
    s.gateHaltIn,
    s.actions.length,
    s.actions.at(-1)?.ts,
    s.supervisor?.updatedAt,
    s.supervisor?.state,
    (s.requests ?? []).map((q) => `${q.id}:${q.state}:${q.updatedAt}`).join(','),
    JSON.stringify(s.conn),
    s.collectError,
    s.journal,
    s.noStepSinceMs,
    s.advancing,
    s.rankHealth?.map((r) => `${r.rank}:${r.health}:${r.why}`).join(','),
  ].join('|');
}

export class Collector {
  readonly intervalMs: number;
  private readonly host: Host;
  private readonly runDir: string;
  /** the one observation (./observe.ts): the same input status, watchdog and report judge */
  private observer: Observer | null = null;
  private readonly checker = new Checker(thresholdsFromEnv(process.env));
  private readonly listeners = new Set<Listener>();
  private readonly roundListeners = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = true;
  private state: CockpitState | null = null;
  private lastKey = '';
  private cpuMark: { at: number; cpu: number } | null = null;
  private pySpy: boolean | null = null;
  private ticking: Promise<void> | null = null;
  private procsAt = 0;
  private actionsKey = '';
  /** wall ms of the last poll that brought fresh data (the host reachable) */
  private lastFreshAt: number | null = null;
  private tickStartedAt: number | null = null;
  private staleTimer: NodeJS.Timeout | null = null;
  /** the last state judged on fresh data (what STALE says was last seen) */
  private lastFresh: { state: CockpitState['runState']; why: string } | null = null;
  /** ms the last tick took (reading files, process table, checks) */
  lastTickMs: number | null = null;
  ticks = 0;
  emits = 0;

  constructor(private readonly o: CollectorOptions) {
    this.host = o.host;
    this.runDir = o.runDir;
    this.intervalMs = Math.max(200, o.intervalMs ?? 1000);
  }

  /** Read the process table on the next tick (an action changed it) and tick soon. */
  refreshSoon(): void {
    this.procsAt = 0;
    if (!this.stopped) this.schedule(100);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.loop(), ms);
  }

  private async loop(): Promise<void> {
    this.timer = null;
    if (this.stopped) return;
    const t0 = Date.now();
    try {
      await this.tick();
    } catch {
      /* collect() never throws on data problems; a bug here must not kill the cockpit */
    }
    if (this.stopped || this.timer) return;
    this.schedule(Math.max(50, this.intervalMs - (Date.now() - t0)));
  }

  get(): CockpitState | null {
    return this.state;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Called at the end of every round, a new state or not, and each second while a round hangs: the
   * screen's ages ride on it (src/ui/useScreen.ts) instead of a timer of their own.
   */
  onRound(fn: () => void): () => void {
    this.roundListeners.add(fn);
    return () => this.roundListeners.delete(fn);
  }

  /** One collection round now (also used by tests and the one-frame non-TTY mode). */
  async tick(): Promise<CockpitState> {
    if (this.ticking) await this.ticking;
    let done!: () => void;
    this.ticking = new Promise<void>((r) => (done = r));
    try {
      return await this.collect();
    } finally {
      this.ticking = null;
      done();
    }
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.unwatchStuck();
  }

  get staleAfterMs(): number {
    return this.o.staleAfterMs ?? Math.max(3 * this.intervalMs, 5000);
  }

  /** While a collection round hangs past the stale limit, say STALE (with its age) on the last state. */
  private checkStuck(): void {
    const prev = this.state;
    if (!prev || this.tickStartedAt === null) return;
    const wall = Date.now();
    if (wall - this.tickStartedAt < this.staleAfterMs) return;
    const age = this.lastFreshAt === null ? (wall - this.tickStartedAt) / 1000 : (wall - this.lastFreshAt) / 1000;
    const conn = this.host.connState();
    this.emitIfChanged(this.staleState(prev, age, `${connCause(conn) ?? 'the host does not answer'}`, conn));
  }

  private staleState(s: CockpitState, ageS: number, cause: string, conn: CockpitState['conn']): CockpitState {
    const v = staleVerdict(this.lastFresh, ageS, cause);
    return {
      ...s,
      at: s.at,
      conn,
      runState: v.state,
      runStateWhy: v.why,
      stateHealth: STATE_HEALTH[v.state],
      advancing: false,
      noStepSinceMs: null,
    };
  }

  private emitIfChanged(state: CockpitState): boolean {
    const key = changeKey(state);
    const changed = key !== this.lastKey;
    this.lastKey = key;
    this.state = state;
    if (changed) {
      this.emits++;
      for (const l of this.listeners) l(state);
    }
    return changed;
  }

  private async collect(): Promise<CockpitState> {
    const t0 = Date.now();
    this.tickStartedAt = t0;
    // a poll stuck on a dropped connection must not leave a live-looking frame on screen: a round
    // that outlasts the stale limit says STALE, and its age each second after (and the ages on
    // screen keep counting meanwhile). The timer lives only while a round is in flight: an idle 1 Hz
    // timer costs a running cockpit about what drawing does. It is due after the next round would
    // be: node keeps one system timer for the earliest, and a timer cleared before it is due still
    // wakes the process then unless an earlier one was set after it (the next round is)
    if (!this.stopped)
      this.staleTimer = setTimeout(() => {
        this.staleTimer = setInterval(() => this.hung(), 1000);
        this.hung();
      }, this.intervalMs * 1.5);
    try {
      return await this.collectRound(t0);
    } finally {
      this.tickStartedAt = null;
      this.unwatchStuck();
      for (const l of this.roundListeners) l();
    }
  }

  private hung(): void {
    this.checkStuck();
    for (const l of this.roundListeners) l();
  }

  private unwatchStuck(): void {
    // (clearTimeout clears an interval too)
    if (this.staleTimer) clearTimeout(this.staleTimer);
    this.staleTimer = null;
  }

  private async collectRound(t0: number): Promise<CockpitState> {
    this.ticks++;
    if (!this.observer) {
      // the run resolved once (at the edge when the caller did it): the observation is handed it
      const dirs = this.o.dirs ?? (await resolveRunDirsAt(this.host, this.runDir));
      this.observer = new Observer(this.host, {
        dirs,
        gpu: this.o.gpu ?? null,
        adoptAs: 'cockpit',
        // a gap in a remote view longer than this is STALE to the judge too (never a frozen step)
        staleAfterMs: this.staleAfterMs,
        takeOver: this.o.actor ? { actor: this.o.actor, readOnly: this.o.readOnly === true } : null,
        // the cockpit's judge: its hysteresis holds between rounds
        checker: this.checker,
        nodes: this.o.nodes ?? null,
      });
      void this.probePySpy();
    }
    const prev = this.state;
    // each proven rank's own /proc/PID/stat every round (./rankpeek.ts, ~0.1 ms a rank): one that
    // stopped, died or runs again has the whole table read this round, so it is named within a round
    if (this.procsAt !== 0 && (await provenChanged(this.host, prev?.procs ?? null))) this.procsAt = 0;
    // one look for the round (Host.look): over SSH the action log's stat is answered with the round's
    const look = this.host.look?.();
    // the process table is read every few seconds (each read runs a command), or at once when
    // the run may have changed under it
    const obs = await this.observer.judged({
      look,
      procsDue: (run) => {
        const due =
          this.procsAt === 0 ||
          Date.now() - this.procsAt >= (this.o.procsIntervalMs ?? 5000) ||
          // metrics.json just written: look at the processes now (HALTING until none lives)
          (run.ended && !prev?.run.ended) ||
          // stopping, or a named culprit whose run moves again (SIGCONT): the process table tells first
          (prev?.runState === 'HALTING' && Date.now() - this.procsAt >= 1000) ||
          (prev?.culprit != null && run.step !== prev.run.step);
        if (due) this.procsAt = Date.now();
        return due;
      },
    });
    const { run, gpu, supervisor, requests, fresh } = obs;
    const procs: RunProcesses | null = obs.procs;
    const errors = [...obs.errors];
    const outDir = obs.dirs.outDir;
    const now = this.host.now();
    let actions: ActionRecord[] = this.state?.actions ?? [];
    try {
      // re-read the action log only when it changed (a stat per tick instead of a read)
      const st = await (look ?? this.host).stat(join(outDir, NSA_DIR, ACTIONS_FILE));
      const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
      if (key !== this.actionsKey) {
        actions = st ? await readActions(look ?? this.host, obs.dirs, this.o.actionLimit ?? 100) : [];
        this.actionsKey = key;
      }
    } catch (e) {
      errors.push(`actions.jsonl: ${(e as Error).message}`);
    }
    look?.end();
    const ev = obs.ev;
    const risk = stepsAtRisk(run);
    const wall = Date.now();
    let cpuPct: number | null = this.state?.self.cpuPct ?? null;
    let rssMiB: number | null = this.state?.self.rssMiB ?? null;
    // sampled every few seconds: the footer's figures need no more, and getrusage is not free
    if (!this.cpuMark || wall - this.cpuMark.at >= 4500) {
      const cpu = cpuSelfSeconds();
      if (this.cpuMark) cpuPct = (100 * (cpu - this.cpuMark.cpu)) / ((wall - this.cpuMark.at) / 1000);
      this.cpuMark = { at: wall, cpu };
      rssMiB = process.memoryUsage.rss() / 1048576;
    }
    this.lastTickMs = Date.now() - t0;
    const gpuLatency = gpu && gpu.status === 'ok' ? gpu.latencyMs : null;
    const conn = this.host.connState();
    const cause = connCause(conn);
    // the judge said STALE: the data in hand is older than the stale limit (a gap in our view)
    const blind = ev.runState === 'STALE';
    const viewAgeMs = obs.input.view?.ageMs ?? null;
    if (fresh && cause === null && !blind) this.lastFreshAt = wall - (viewAgeMs ?? 0);
    const state: CockpitState = {
      at: now,
      clockOffsetMs: this.host.now() - Date.now(),
      hostLabel: this.host.label,
      conn,
      readOnly: this.o.readOnly === true,
      run,
      ...evaluationFields(ev),
      // data older than a refresh is labelled with its age (before it is old enough to be STALE)
      ...(!blind && viewAgeMs !== null && viewAgeMs > this.intervalMs * 1.5
        ? { runStateWhy: `${ev.runStateWhy} · data ${dur(viewAgeMs / 1000, 'precise')} old` }
        : {}),
      gpu,
      hostStats: obs.hostStats,
      procs,
      alertHistory: ev.history,
      actions,
      supervisor,
      requests,
      haltGraceS: obs.haltGraceS,
      self: {
        cpuPct,
        rssMiB,
        renderMs: this.state?.self.renderMs ?? null,
        telemetryLatencyMs: gpuLatency ?? this.lastTickMs,
      },
      stepsAtRisk: { steps: risk.lost, lastCheckpointStep: risk.lastCheckpointStep, savesOnHalt: risk.savesOnHalt },
      caps: { pySpy: this.pySpy },
      collectError: errors.length ? errors.join('; ') : null,
      ...(this.o.journal ? { journal: this.o.journal() } : {}),
    };
    // Data older than the stale limit (the host unreachable, polls failing): STALE with its age,
    // never the last live-looking verdict.
    const ageMs = this.lastFreshAt === null ? null : wall - this.lastFreshAt;
    if (cause !== null || (ageMs !== null && ageMs > this.staleAfterMs) || (!fresh && this.lastFreshAt === null)) {
      // the judge's own cause when it said STALE (a node of a multi-node run unreachable) outlasts the limit
      const judged = blind ? obs.input.view?.cause : undefined;
      const out = this.staleState(state, (ageMs ?? 0) / 1000, cause ?? judged ?? errors[0] ?? 'no data', conn);
      this.emitIfChanged(out);
      return out;
    }
    if (blind) {
      this.emitIfChanged(state);
      return state;
    }
    this.lastFresh = { state: state.runState, why: state.runStateWhy };
    this.emitIfChanged(state);
    return state;
  }

  private async probePySpy(): Promise<void> {
    try {
      const r = await this.host.exec(['sh', '-c', 'command -v py-spy'], { timeoutMs: 3000, quick: true });
      this.pySpy = r.code === 0 && r.stdout.trim().length > 0;
    } catch {
      this.pySpy = false;
    }
  }
}

/** Why the host's data cannot be fresh, from its connection state; null when it can. */
function connCause(c: CockpitState['conn']): string | null {
  if (c.state === 'reconnecting') return `host reconnecting, try ${c.attempt}${c.lastError ? `: ${c.lastError}` : ''}`;
  if (c.state === 'closed') return 'host disconnected';
  return null;
}
