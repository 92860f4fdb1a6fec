// One observation of a run: everything the judge (src/checks, Checker.evaluate) needs, gathered
// through a Host from a run resolved once at the edge. The cockpit's collector calls it on its timer;
// `status`, `watchdog` (--once and the loop) and `report` call it too, so every surface judges the
// same input and none can tell a different story: the snapshot, the proven rank processes (and their
// cwd), run.info, the supervisor's state *with its liveness* (pid + start time checked every round,
// not only when supervisor.json changes), the control requests and whether each carrier lives, the
// adoption record, the host's CPU count and the run's one halt grace.
//
// An Observer keeps what does not change between rounds (run.info, the grace, the CPU count) and
// caches files by their stat; a one-shot command makes one and calls observe() once.
import { access, readdir, stat } from 'node:fs/promises';
import { constants } from 'node:fs';
import { cpus } from 'node:os';
import { delimiter, join } from 'node:path';
import { launchedFromRunInfo } from '../checks/launched.js';
import { Checker, type CheckInput, type Evaluation, type Launched } from '../checks/index.js';
import { withLook, type Host } from '../remote/host.js';
import { HOST_FACTS_ARGV } from '../remote/firstasks.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { Actor, ControlRequest, SupervisorState } from '../trainer/control/types.js';
import { activeRequest, supervisorInCharge } from '../checks/control.js';
import { dumpClaims } from '../checks/dumplabels.js';
import { nodesSupervisor, requestMoot } from '../checks/supervisor.js';
import { HostStatsReader, type HostStats } from '../remote/hoststats.js';
import { dirname } from 'node:path';
import { haltGraceS, ownerAlive, readRequests, REQUESTS_FILE, takeOverRequest } from '../trainer/control/requests.js';
import type { ActionRecord } from '../trainer/control/types.js';
import { NSA_DIR, resolveRunDirs, type RunDirs } from '../trainer/run/rundirs.js';
import { readSupervisorFile, STATE_FILE, supervisorLiveness } from '../trainer/run/launchstate.js';
import { recordAdoption } from '../trainer/launch/adopt.js';
import { readNodeSupervisors, type NodeSupervisor } from '../trainer/run/nodesrecord.js';
import { readStopFacts, stopFactsKey, type StopFacts } from '../trainer/control/stopfacts.js';
import type { RunModel } from '../trainer/run/model.js';
import { findRunProcesses } from '../trainer/run/processes.js';
import { hintsFromRun } from '../trainer/run/ranks.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { openRunModelOf } from '../trainer/run/rundir.js';
import { lookAheadOf } from '../trainer/run/lookahead.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

export interface GpuSource {
  current(): GpuTelemetry | null;
}

/** The carrier of the request in force, and whether it lives (undefined: it could not be looked at). */
export interface CarrierView {
  request: ControlRequest;
  alive: boolean | undefined;
}

export interface Observation {
  /** exactly what the judge is given */
  input: CheckInput;
  dirs: RunDirs;
  run: RunSnapshot;
  procs: RunProcesses | null;
  gpu: GpuTelemetry | null;
  launched: Launched | undefined;
  /** supervisor.json judged against the process table this round (null: not a supervised run) */
  supervisor: SupervisorState | null;
  requests: ControlRequest[];
  carrier: CarrierView | null;
  hostCpus: number | undefined;
  haltGraceS: number;
  /** what recording the adoption of a hand-launched run said this round, if anything */
  adoptionNote: string | null;
  /** the poll brought fresh data (false: the last snapshot, the read failed) */
  fresh: boolean;
  /** problems reading parts of the run (each one phrase) */
  errors: string[];
  /** the newest take-over of an orphaned request this observer made, when it made one */
  takeOver: ActionRecord | null;
  /** how the run's stops went (halts, SIGINT/SIGKILL escalations, the watchdog's stalls, argv's dataset) */
  stop: StopFacts | null;
  /** the host's RAM, swap, CPU, load and the disks of the run dir and the checkpoints (null: not read yet) */
  hostStats: HostStats | null;
  /** a run launched with --node: each node's supervisor as its node showed it this round (null: not one) */
  nodeSupervisors: NodeSupervisor[] | null;
}

/** One observation and its evaluation by the observer's judge (`Observer.judged`). */
export type Judged = Observation & { ev: Evaluation };

export interface ObserverOptions {
  /** the run, resolved once at the edge (resolveRunDirsAt) */
  dirs: RunDirs;
  /** a run model already opened on dirs (else one is opened) */
  model?: RunModel;
  gpu?: GpuSource | null;
  /** record a hand-launched run's launch (src/trainer/launch/adopt) as this surface; null: never */
  adoptAs?: string | null;
  /**
   * Take over a request whose carrier died (a new `nsa-top agent`, audited), within the round that
   * sees it. Live cockpits and the watchdog's loop pass their actor; one-shot looks (status,
   * watchdog --once, report) never act.
   */
  takeOver?: { actor: Actor; readOnly?: boolean } | null;
  /** data older than this (a remote view: Host.viewAgeMs) is judged STALE, not judged afresh (default 10 s) */
  staleAfterMs?: number;
  /**
   * The judge of `judged()` rounds: a surface that looks again and again (the cockpit, the
   * watchdog) hands in its own and keeps it, so its hysteresis holds between rounds; a one-shot
   * look hands in one with its thresholds (default: the default thresholds).
   */
  checker?: Checker;
  /** a multi-node run (--node): the other nodes' ranks, merged into the process table (the host
   * above is the first node's, which reads the run dir) */
  nodes?: NodeProcesses | null;
}

/** What a round is asked (Observer.observe). */
interface RoundOptions {
  procsDue?: (run: RunSnapshot, prev: RunProcesses | null) => boolean;
  /** a round that does not read the table: the last table's ranks as they are now (the watchdog's
   *  look at each rank's own stat, ./rankrefresh.ts) */
  refreshProcs?: (procs: RunProcesses) => RunProcesses;
  waitHostStats?: boolean;
  /** the snapshot the caller's own poll of this observer's model just took, in the same look, with
   *  no checkpoint in it waiting to settle (a one-shot status): judged as it is, not polled again
   *  (over SSH a poll is a frame of the watch loop: 107–256 ms in traces of a kept `status --host`) */
  polled?: RunSnapshot;
  /** a look (Host.look) the caller holds the round in: what it reads after the round is answered
   * from the round's answers (the cockpit's action log) */
  look?: Host;
}

/** how long a failed take-over of one request waits before it is tried again */
const TAKEOVER_RETRY_MS = 15_000;

export class Observer {
  readonly host: Host;
  dirs: RunDirs;
  private model: RunModel | null;
  private opening: Promise<void> | null = null;
  private launched: Launched | undefined;
  private graceS = 0;
  private hostCpus: number | undefined;
  /** no nvidia-smi on the host (looked at once): a fact every surface judges with, telemetry or not */
  private noGpuTools: GpuTelemetry | null = null;
  private procs: RunProcesses | null = null;
  private procsPids = '';
  private supKey = '';
  /** the version of the out_dir's .nsa-top/run.json last judged */
  private pointerKey: string | null = null;
  private supFile: SupervisorState | null = null;
  private reqKey = '';
  private requests: ControlRequest[] = [];
  private rounds = 0;
  private taking: Promise<void> | null = null;
  private tookAt = new Map<string, number>();
  private lastTakeOver: ActionRecord | null = null;
  private stop: StopFacts | null = null;
  private stopAt = 0;
  /** the stop facts' files as they were when last read (stopFactsKey) */
  private stopKey: string | null = null;
  private hostStats: HostStatsReader;
  /** the judge of judged() rounds (ObserverOptions.checker) */
  readonly checker: Checker;

  constructor(
    host: Host,
    private readonly o: ObserverOptions,
  ) {
    this.host = host;
    this.dirs = o.dirs;
    this.model = o.model ?? null;
    this.hostStats = new HostStatsReader(host);
    this.checker = o.checker ?? new Checker();
  }

  /** One round (observe) and its evaluation: what every surface shows and acts on, from one call. */
  async judged(o: Parameters<Observer['observe']>[0] = {}): Promise<Judged> {
    const obs = await this.observe(o);
    return { ...obs, ev: this.checker.evaluate(obs.input) };
  }

  /** the run model (opened on the first round) */
  async runModel(): Promise<RunModel> {
    if (!this.model) this.model = await openRunModelOf(this.host, this.dirs);
    return this.model;
  }

  /** Opens the run (model, run.info, grace, CPU count) without a round: what it was launched with. */
  async ready(): Promise<{ launched: Launched | undefined; haltGraceS: number }> {
    await this.open();
    return { launched: this.launched, haltGraceS: this.graceS };
  }

  private open(host = this.host): Promise<void> {
    this.opening ??= this.openOnce(host);
    return this.opening;
  }

  private async openOnce(host: Host): Promise<void> {
    await this.runModel();
    try {
      const info = await host.readFile(join(this.dirs.runDir, 'run.info'), 256 * 1024);
      this.launched = launchedFromRunInfo(info.toString('utf8'));
    } catch {
      this.launched = undefined;
    }
    this.graceS = await haltGraceS(host, this.dirs.runDir).catch(() => 300);
    const facts = await hostFacts(host);
    this.hostCpus = facts.cpus;
    // one value, stamped when it was looked at (the collector emits on a changed GPU reading)
    if (facts.noNvidiaTools) this.noGpuTools = { status: 'no-nvidia-tools', at: this.host.now() };
  }

  /**
   * One round. `procsDue` says whether the process table is read this round (default: every round;
   * the cockpit reads it every few seconds, or at once when the heartbeats name new pids).
   */
  async observe(o: RoundOptions = {}): Promise<Observation> {
    // one look (Host.look): over SSH the round's records are stat'ed (the first round: read) in one
    // round trip, and each is asked once however many parts ask
    const host = o.look ?? this.host;
    const ahead = host.look ? lookAheadOf(this.dirs, this.rounds === 0 ? 'first' : 'again') : undefined;
    return withLook(host, ahead, (h) => this.round(h, o));
  }

  private async round(host: Host, o: RoundOptions): Promise<Observation> {
    await this.open(host);
    this.rounds++;
    const model = this.model!;
    const errors: string[] = [];
    let run: RunSnapshot;
    let fresh = false;
    // the data's age is taken with the data: a connection back by the time the round ends must not
    // make data read during the outage look fresh
    let dataAt: number | null = null;
    try {
      run = o.polled ?? (await model.poll(host));
      const age = host.viewAgeMs?.();
      if (age !== undefined && age !== null) dataAt = Date.now() - age;
      fresh = true;
    } catch (e) {
      errors.push(`reading the run: ${(e as Error).message}`);
      run = model.snapshot();
    }
    // the host's resources: the run dir's file system, and the checkpoints' when they are elsewhere —
    // asked now, beside the process table (over SSH one round trip less per look)
    const newestCkpt = run.checkpoints.reduce<(typeof run.checkpoints)[number] | undefined>(
      (a, c) => (!a || c.step > a.step ? c : a),
      undefined,
    );
    const hostStatsRead = this.hostStats
      .read(
        [
          { path: this.dirs.outDir, role: 'run dir' },
          ...(newestCkpt ? [{ path: dirname(newestCkpt.path), role: 'checkpoints' }] : []),
        ],
        { wait: o.waitHostStats },
      )
      .catch(() => null);
    const gpu: GpuTelemetry | null = this.o.gpu?.current() ?? this.noGpuTools;
    let adoptionNote: string | null = null;
    const hbPids = run.ranks.map((r) => `${r.rank}:${r.pid}`).join(',');
    if (
      !this.procs ||
      hbPids !== this.procsPids ||
      (o.procsDue ? o.procsDue(run, this.procs) : true) ||
      // a node of a multi-node run lost or back: its ranks marked stale, or read again, now
      this.o.nodes?.linksChanged() === true
    ) {
      this.procsPids = hbPids;
      try {
        const g = gpu && gpu.status === 'ok' ? gpu : null;
        // findRunProcesses never counts nsa-top's own tools (a cockpit, a watchdog, the supervisor),
        // and a heartbeat's pid only names a candidate: a rank proves itself (command, environ, start time)
        this.procs = await findRunProcesses(host, this.dirs.outDir, { ...hintsFromRun(run), gpu: g });
        // a multi-node run: every other node's ranks too, each on its own host (src/trainer/run/nodes.ts)
        if (this.o.nodes) this.procs = await this.o.nodes.merge(this.procs, this.dirs.outDir, hintsFromRun(run));
        // env.json's CONFIG is relative to the trainer's cwd: read it now, before judging
        const cwd = [
          ...this.procs.ranks.map((r) => r.proc),
          ...(this.procs.launcher ? [this.procs.launcher] : []),
        ].find((p) => p.cwd)?.cwd;
        if (cwd && model.setTrainerCwd(cwd) && fresh) run = await model.poll(host);
        if (this.o.adoptAs && !this.o.nodes)
          adoptionNote =
            (await recordAdoption(host, this.dirs, this.procs, this.o.adoptAs).catch(() => null))?.note ?? null;
      } catch (e) {
        errors.push(`process table: ${(e as Error).message}`);
      }
    } else if (o.refreshProcs) this.procs = o.refreshProcs(this.procs);
    const procs = this.procs;
    const supervisor = await this.supervisorState(host)
      .then(async (one) => one ?? (this.o.nodes ? await this.nodesSupervisor() : null))
      .catch((e: Error) => {
        errors.push(`supervisor.json: ${e.message}`);
        return null;
      });
    try {
      const st = await host.stat(join(this.dirs.outDir, NSA_DIR, REQUESTS_FILE));
      const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
      if (key !== this.reqKey) {
        this.requests = st ? await readRequests(host, this.dirs) : [];
        this.reqKey = key;
      }
    } catch (e) {
      errors.push(`requests.json: ${(e as Error).message}`);
    }
    const requests = this.requests;
    // the carrier of the request in force must be alive, or nothing will carry it out: looked at every round
    const active = activeRequest(requests);
    let carrier: CarrierView | null = null;
    if (active?.owner)
      carrier = { request: active, alive: await ownerAlive(host, active.owner).catch(() => undefined) };
    // …unless the run has ended and nothing of it runs: the request is moot (the judge says so),
    // and a new carrier would only fire it into whatever runs in this out_dir next
    const moot = requestMoot({
      ended: run.ended,
      procsKnown: !!procs,
      ranksAlive: procs ? procs.ranks.filter((r) => r.proc.state !== 'Z' && r.proc.state !== 'X').length : 0,
      launcherAlive: !!procs?.launcher && !['Z', 'X'].includes(procs.launcher.state),
    });
    if (carrier && carrier.alive === false && !moot) this.takeOver(carrier.request);
    // how the last stop went (a stop that needed SIGINT/SIGKILL is never "stopped by .HALT"): it
    // reads the action log and two more, so every 3 s once no rank lives, every 10 s while one does
    const ranksLive = !!procs && procs.ranks.some((r) => r.proc.state !== 'Z' && r.proc.state !== 'X');
    if (!this.stop || Date.now() - this.stopAt >= (ranksLive && !run.ended ? 10_000 : 3_000)) {
      // read again only when one of its files changed (a watchdog's decisions, an operator's halt)
      const key = await stopFactsKey(host, this.dirs.outDir, this.dirs.runDir).catch(() => null);
      if (!this.stop || key === null || key !== this.stopKey) {
        const got = await readStopFacts(host, this.dirs.outDir, this.dirs.runDir, this.dirs).catch(() => null);
        // a failed read keeps the last facts, and is read again next time
        if (got) this.stop = got;
        this.stopKey = got ? key : null;
      }
      this.stopAt = Date.now();
    }
    const hostStats = await hostStatsRead;
    // a node of a multi-node run that does not answer: STALE, "node B unreachable"
    const nodesView = this.o.nodes?.view() ?? null;
    const input: CheckInput = {
      now: run.hostNowMs || host.now(),
      ...(nodesView ? { view: nodesView } : viewOf(host, dataAt, this.o.staleAfterMs ?? 10_000)),
      hostStats,
      run,
      procs,
      gpu,
      launched: this.launched,
      supervisor,
      requests,
      requestOwnerAlive: carrier?.alive,
      hostCpus: this.hostCpus,
      haltGraceS: this.graceS,
      stopEscalation: this.stop?.stopEscalation ?? null,
      stopEscalationWhy: this.stop?.escalationWhy ?? null,
      dumpClaims: dumpClaims(this.stop?.dumpActions ?? []),
    };
    return {
      input,
      dirs: this.dirs,
      run,
      procs,
      gpu,
      launched: this.launched,
      supervisor,
      requests,
      carrier,
      hostCpus: this.hostCpus,
      haltGraceS: this.graceS,
      adoptionNote,
      fresh,
      errors,
      takeOver: this.lastTakeOver,
      stop: this.stop,
      hostStats,
      nodeSupervisors: this.o.nodes ? this.nodeSups : null,
    };
  }

  /** Waits for a take-over in flight (tests, and a watchdog that is about to exit). */
  async settled(): Promise<void> {
    if (this.taking) await this.taking;
  }

  /** Ask the process table afresh next round. */
  forgetProcs(): void {
    this.procs = null;
  }

  private async supervisorState(host: Host): Promise<SupervisorState | null> {
    let st = await host.stat(join(this.dirs.runDir, NSA_DIR, STATE_FILE));
    const ptr =
      !st && this.dirs.runDir === this.dirs.outDir && (host.kind === 'local' || this.rounds % 10 === 1)
        ? await host.stat(join(this.dirs.outDir, NSA_DIR, 'run.json'))
        : null;
    const ptrKey = ptr ? `${ptr.size}:${ptr.mtimeMs}:${ptr.ino}:${ptr.mode}` : null;
    // judged once per version of the file: a copy's pointer, not followed (pointers.ts), is not
    // re-read every round
    if (ptr && ptrKey !== this.pointerKey) {
      this.pointerKey = ptrKey;
      // a run started by hand and relaunched under a supervisor (src/trainer/launch/adopt) gets a
      // launcher dir of its own, named by .nsa-top/run.json in the out_dir: follow it
      const d = await resolveRunDirs(host, this.dirs.outDir);
      if (d.runDir !== this.dirs.runDir) {
        this.dirs = { ...this.dirs, runDir: d.runDir, supervised: true };
        st = await host.stat(join(this.dirs.runDir, NSA_DIR, STATE_FILE));
      }
    }
    const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
    if (key !== this.supKey) {
      this.supFile = st ? await readSupervisorFile(host, this.dirs.runDir) : null;
      this.supKey = key;
    }
    // liveness every round: a SIGKILLed supervisor never rewrites its file
    if (this.supFile && supervisorInCharge(this.supFile.state))
      return supervisorLiveness(host, this.supFile, this.dirs.runDir);
    return this.supFile;
  }

  /** a run launched with --node: each node's supervisor read on its own node, the one that needs
   *  the operator most is the run's (src/checks/supervisor.ts nodesSupervisor) */
  private nodeSups: NodeSupervisor[] | null = null;

  private async nodesSupervisor(): Promise<SupervisorState | null> {
    const nodes = this.o.nodes!;
    const sups = await readNodeSupervisors(this.host, this.dirs.runDir, (label) => nodes.set.reachable(label));
    this.nodeSups = sups;
    return sups ? nodesSupervisor(sups) : null;
  }

  private takeOver(req: ControlRequest): void {
    const t = this.o.takeOver;
    if (!t || t.readOnly || this.host.kind !== 'local' || this.taking) return;
    const key = `${req.id}:${req.owner?.pid}:${req.owner?.startTime}`;
    const last = this.tookAt.get(key);
    if (last !== undefined && Date.now() - last < TAKEOVER_RETRY_MS) return;
    this.tookAt.set(key, Date.now());
    this.taking = takeOverRequest(this.host, this.dirs, t.actor, req.id, { readOnly: t.readOnly })
      .then((rec) => {
        this.lastTakeOver = rec;
        // the next round reads the new owner at once
        this.reqKey = '';
      })
      .catch(() => {})
      .finally(() => {
        this.taking = null;
      });
  }
}

/** How old a remote view's data is (Host.viewAgeMs), for the judge; nothing for a local one. */
function viewOf(host: Host, dataAt: number | null, staleAfterMs: number): Pick<CheckInput, 'view'> {
  if (!host.viewAgeMs) return {};
  // no frame yet, or the read failed: as old as the newest frame
  const age = dataAt !== null ? Date.now() - dataAt : host.viewAgeMs();
  if (age === null) return {};
  const ageMs = Math.max(0, age);
  const c = host.connState();
  const cause =
    c.state === 'reconnecting'
      ? `host reconnecting, try ${c.attempt}${c.lastError ? `: ${c.lastError}` : ''}`
      : c.state === 'closed'
        ? 'host disconnected'
        : `nothing newer from ${host.label}'s watch loop`;
  return { view: { ageMs, staleAfterMs, cause } };
}

/**
 * What the judge needs to know of the host itself, looked at once per observer (per connection):
 * its CPU count (os.cpus locally; `getconf _NPROCESSORS_ONLN`, else `nproc`, over SSH) and whether
 * it has nvidia-smi at all (a PATH lookup locally, no process; over SSH both in one command).
 */
export async function hostFacts(host: Host): Promise<{ cpus: number | undefined; noNvidiaTools: boolean }> {
  if (host.kind === 'local') {
    let found = false;
    for (const d of (process.env.PATH ?? '').split(delimiter).filter(Boolean))
      if (
        await access(join(d, 'nvidia-smi'), constants.X_OK).then(
          () => true,
          () => false,
        )
      ) {
        found = true;
        break;
      }
    return { cpus: cpus().length || undefined, noNvidiaTools: !found };
  }
  try {
    const r = await host.exec([...HOST_FACTS_ARGV], { timeoutMs: 5000, quick: true });
    const [first, second] = r.stdout.trim().split('\n');
    const n = Number(first?.trim());
    return {
      cpus: Number.isInteger(n) && n > 0 ? n : undefined,
      noNvidiaTools: r.stdout.length > 0 && second?.trim() !== 'gpu-tools',
    };
  } catch {
    return { cpus: undefined, noNvidiaTools: false };
  }
}

/**
 * The reason behind an "empty" listing on this machine: names that readdir shows but that cannot
 * be looked at (a dir without search permission lists its names and nothing else).
 */
export async function whyNothingListed(host: Host, outDir: string): Promise<string | null> {
  if (host.kind !== 'local') return null;
  const names = await readdir(outDir).catch(() => null);
  if (!names || names.length === 0) return null;
  const err = await stat(join(outDir, names[0]!)).then(
    () => null,
    (e: NodeJS.ErrnoException) => e.code ?? e.message,
  );
  return err ? `cannot read run dir ${outDir}: its ${names.length} entries cannot be looked at (${err})` : null;
}
