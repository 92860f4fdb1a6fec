// The collector: the one non-UI module that assembles CockpitState. It polls the run (RunModel),
// the process table and GPU telemetry on an interval, runs the Checker, reads the action log and
// the supervisor's state through the Host, measures nsa-top's own cost, and emits a new
// CockpitState only when something the screen shows has changed.
import { join } from 'node:path';
import { Checker, STATE_HEALTH, staleVerdict, thresholdsFromEnv, type Launched } from '../checks/index.js';
import { launchedFromRunInfo } from '../checks/launched.js';
import type { Host } from '../remote/host.js';
import { findRunProcesses } from '../trainer/run/processes.js';
import { hintsFromRun } from '../trainer/run/ranks.js';
import { recordAdoption } from '../trainer/run/adopt.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import {
  activeRequest,
  type ActionRecord,
  type ControlRequest,
  type SupervisorState,
} from '../trainer/control/types.js';
import { haltGraceS, ownerAlive, readRequests, REQUESTS_FILE } from '../trainer/control/requests.js';
import { ACTIONS_FILE, readActions, stepsAtRisk } from '../trainer/control/actions.js';
import type { RunModel } from '../trainer/run/model.js';
import { openRunModel } from '../trainer/run/rundir.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import { NSA_DIR, resolveRunDirs } from '../trainer/launch/rundirs.js';
import { evaluationFields, type CockpitState } from './state.js';

export interface GpuSource {
  current(): GpuTelemetry | null;
}

export interface CollectorOptions {
  host: Host;
  /** the run dir as given (a supervised launcher dir or the trainer's out_dir) */
  runDir: string;
  intervalMs?: number;
  readOnly?: boolean;
  gpu?: GpuSource | null;
  readSupervisorState?: (host: Host, runDir: string) => Promise<SupervisorState | null>;
  /** actions.jsonl records kept (newest) */
  actionLimit?: number;
  /** the process table is read at most this often (default 5000 ms; each read runs a command) */
  procsIntervalMs?: number;
  /** data older than this (no successful poll, or a poll stuck) is shown as STALE (default max(3 × interval, 5 s)) */
  staleAfterMs?: number;
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
  const gpu = s.gpu ? `${s.gpu.status}:${s.gpu.at}` : 'none';
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
    s.noStepSinceMs,
    s.advancing,
    s.rankHealth?.map((r) => `${r.rank}:${r.health}:${r.why}`).join(','),
  ].join('|');
}

export class Collector {
  readonly intervalMs: number;
  private readonly host: Host;
  private readonly runDir: string;
  private outDir: string | null = null;
  private model: RunModel | null = null;
  private readonly checker = new Checker(thresholdsFromEnv(process.env));
  private readonly listeners = new Set<Listener>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = true;
  private state: CockpitState | null = null;
  private lastKey = '';
  private cpuMark: { at: number; cpu: number } | null = null;
  private pySpy: boolean | null = null;
  private ticking: Promise<void> | null = null;
  private procsAt = 0;
  private procsPids = '';
  private actionsKey = '';
  private supervisorKey = '';
  /** the version of the out_dir's .nsa-top/run.json last judged (pointers.ts) */
  private pointerKey: string | null = null;
  private requestsKey = '';
  private ownerCheck: { key: string; at: number; alive: boolean | undefined } | null = null;
  private graceS: number | undefined;
  private launcherDir: string | null = null;
  private launched: Launched | undefined;
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
    // a poll stuck on a dropped connection must not leave a live-looking frame on screen
    this.staleTimer = setInterval(() => this.checkStuck(), 1000);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.staleTimer) clearInterval(this.staleTimer);
    this.staleTimer = null;
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
    try {
      return await this.collectRound(t0);
    } finally {
      this.tickStartedAt = null;
    }
  }

  private async collectRound(t0: number): Promise<CockpitState> {
    this.ticks++;
    const errors: string[] = [];
    if (!this.model) {
      // one way of opening a run (launcher dir → out_dir, the launcher's train.log), shared with status/report
      const opened = await openRunModel(this.host, this.runDir);
      this.model = opened.model;
      this.outDir = opened.outDir;
      this.launcherDir = opened.runDir;
      try {
        const info = await this.host.readFile(join(opened.runDir, 'run.info'), 256 * 1024);
        this.launched = launchedFromRunInfo(info.toString('utf8'));
      } catch {
        this.launched = undefined;
      }
      void this.probePySpy();
      this.graceS = await haltGraceS(this.host, opened.runDir).catch(() => undefined);
    }
    let run: RunSnapshot;
    let fresh = false;
    try {
      run = await this.model.poll();
      fresh = true;
    } catch (e) {
      errors.push(`reading the run: ${(e as Error).message}`);
      run = this.model.snapshot();
    }
    const gpu = this.o.gpu?.current() ?? null;
    let procs: RunProcesses | null = this.state?.procs ?? null;
    const hbPids = run.ranks.map((r) => `${r.rank}:${r.pid}`).join(',');
    // metrics.json just written: look at the processes now (HALTING until none lives)
    const procsDue =
      !procs ||
      Date.now() - this.procsAt >= (this.o.procsIntervalMs ?? 5000) ||
      hbPids !== this.procsPids ||
      (run.ended && !this.state?.run.ended) ||
      // stopping, or a named culprit whose run moves again (SIGCONT): the process table tells first
      (this.state?.runState === 'HALTING' && Date.now() - this.procsAt >= 1000) ||
      (this.state?.culprit != null && run.step !== this.state.run.step);
    if (procsDue)
      try {
        this.procsAt = Date.now();
        this.procsPids = hbPids;
        const g = gpu && gpu.status === 'ok' ? gpu : null;
        // findRunProcesses never counts nsa-top's own tools (this cockpit, a watchdog, the supervisor),
        // and a heartbeat's pid only names a candidate: a rank proves itself (command, environ, start time)
        procs = await findRunProcesses(this.host, this.outDir!, { ...hintsFromRun(run), gpu: g });
        // env.json's CONFIG is relative to the trainer's cwd: the run model reads it from the next poll
        const cwd = [...procs.ranks.map((r) => r.proc), ...(procs.launcher ? [procs.launcher] : [])].find(
          (p) => p.cwd,
        )?.cwd;
        if (cwd) this.model.setTrainerCwd(cwd);
        // a live run nsa-top did not start: record its launch once, for a later relaunch (src/trainer/run/adopt)
        void recordAdoption(this.host, this.outDir!, procs, 'cockpit').catch(() => {});
      } catch (e) {
        errors.push(`process table: ${(e as Error).message}`);
      }
    const now = this.host.now();
    let actions: ActionRecord[] = this.state?.actions ?? [];
    try {
      // re-read the action log only when it changed (a stat per tick instead of a read)
      const st = await this.host.stat(join(this.outDir!, NSA_DIR, ACTIONS_FILE));
      const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
      if (key !== this.actionsKey) {
        actions = st ? await readActions(this.host, this.runDir, this.o.actionLimit ?? 100) : [];
        this.actionsKey = key;
      }
    } catch (e) {
      errors.push(`actions.jsonl: ${(e as Error).message}`);
    }
    let supervisor: SupervisorState | null = this.state?.supervisor ?? null;
    if (this.o.readSupervisorState) {
      try {
        // re-read only when supervisor.json changed
        let st = await this.host.stat(join(this.launcherDir!, NSA_DIR, 'supervisor.json'));
        const ptr =
          !st && this.launcherDir === this.outDir && (this.host.kind === 'local' || this.ticks % 10 === 0)
            ? await this.host.stat(join(this.outDir!, NSA_DIR, 'run.json'))
            : null;
        const ptrKey = ptr ? `${ptr.size}:${ptr.mtimeMs}:${ptr.ino}:${ptr.mode}` : null;
        // judged once per version of the file: a copy's pointer, not followed, is not re-read every tick
        if (ptr && ptrKey !== this.pointerKey) {
          this.pointerKey = ptrKey;
          // a run started by hand and relaunched under a supervisor (src/trainer/run/adopt) gets a
          // launcher dir of its own, named by .nsa-top/run.json in the out_dir: follow it
          const d = await resolveRunDirs(this.host, this.outDir!);
          if (d.runDir !== this.launcherDir) {
            this.launcherDir = d.runDir;
            st = await this.host.stat(join(this.launcherDir, NSA_DIR, 'supervisor.json'));
          }
        }
        const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
        if (key !== this.supervisorKey) {
          supervisor = st ? await this.o.readSupervisorState(this.host, this.runDir) : null;
          this.supervisorKey = key;
        }
      } catch {
        supervisor = null;
      }
    }
    let requests: ControlRequest[] = this.state?.requests ?? [];
    try {
      // re-read only when requests.json changed
      const st = await this.host.stat(join(this.outDir!, NSA_DIR, REQUESTS_FILE));
      const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
      if (key !== this.requestsKey) {
        requests = st ? await readRequests(this.host, this.outDir!) : [];
        this.requestsKey = key;
      }
    } catch (e) {
      errors.push(`requests.json: ${(e as Error).message}`);
    }
    // the carrier of a request in force must be alive, or nothing will carry it out
    const active = activeRequest(requests);
    let requestOwnerAlive: boolean | undefined;
    if (active?.owner) {
      // looked at every 5 s (a read of /proc/PID/stat; a command over SSH), or when the owner changes
      const key = `${active.owner.pid}:${active.owner.startTime}`;
      if (this.ownerCheck?.key !== key || Date.now() - this.ownerCheck.at >= 5000)
        this.ownerCheck = {
          key,
          at: Date.now(),
          alive: await ownerAlive(this.host, active.owner).catch(() => undefined),
        };
      requestOwnerAlive = this.ownerCheck.alive;
    }
    const ev = this.checker.evaluate({
      now,
      run,
      procs,
      gpu,
      launched: this.launched,
      supervisor,
      requests,
      requestOwnerAlive,
    });
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
    if (fresh && cause === null) this.lastFreshAt = wall;
    const state: CockpitState = {
      at: now,
      hostLabel: this.host.label,
      conn,
      readOnly: this.o.readOnly === true,
      run,
      ...evaluationFields(ev),
      gpu,
      procs,
      alertHistory: ev.history,
      actions,
      supervisor,
      requests,
      haltGraceS: this.graceS,
      self: {
        cpuPct,
        rssMiB,
        renderMs: this.state?.self.renderMs ?? null,
        telemetryLatencyMs: gpuLatency ?? this.lastTickMs,
      },
      stepsAtRisk: { steps: risk.lost, lastCheckpointStep: risk.lastCheckpointStep, savesOnHalt: risk.savesOnHalt },
      caps: { pySpy: this.pySpy },
      collectError: errors.length ? errors.join('; ') : null,
    };
    // Data older than the stale limit (the host unreachable, polls failing): STALE with its age,
    // never the last live-looking verdict.
    const ageMs = this.lastFreshAt === null ? null : wall - this.lastFreshAt;
    if (cause !== null || (ageMs !== null && ageMs > this.staleAfterMs) || (!fresh && this.lastFreshAt === null)) {
      const out = this.staleState(state, (ageMs ?? 0) / 1000, cause ?? errors[0] ?? 'no data', conn);
      this.emitIfChanged(out);
      return out;
    }
    this.lastFresh = { state: state.runState, why: state.runStateWhy };
    this.emitIfChanged(state);
    return state;
  }

  private async probePySpy(): Promise<void> {
    try {
      const r = await this.host.exec(['sh', '-c', 'command -v py-spy'], { timeoutMs: 3000 });
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
