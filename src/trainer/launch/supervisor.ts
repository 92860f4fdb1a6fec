// The supervisor: `nsa-top supervise RUN_DIR [--resume]`, started detached (own session, stdio to
// .nsa-top/supervisor.log) by `nsa-top launch` / relaunch, so quitting the cockpit or losing SSH
// never stops training. It runs the trainer in its own session (setsid) with its output straight
// into train.log — no pty, whose hang-up would kill the trainer when the supervisor dies — so a
// supervisor killed outright leaves training running, and the next one (relaunch, attach) adopts
// the live trainer instead of starting a second copy. It keeps .nsa-top/supervisor.json current, restarts a crashed trainer from the
// newest COMPLETE checkpoint with backoff (like torchrun --max-restarts), and never restarts after a
// deliberate HALT or a NaN abort. A stop request (.nsa-top/stop.json, written by stopRun) or
// SIGTERM/SIGINT to the supervisor escalates: .HALT → wait → SIGINT → SIGKILL, each step logged.
import { dur } from '../../format.js';
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { basename, dirname, join } from 'node:path';
import { LocalHost, notRegular, READ_FLAGS } from '../../remote/local/host.js';
import { listProcesses, readProc, verifyProcess } from '../../remote/procs.js';
import { pickResumeCheckpoint } from '../run/checkpoints.js';
import type { Actor, SupervisorState } from '../control/types.js';
import { escalate, requestHalt, type RankTarget } from '../control/actions.js';
import { auditedEvent } from '../control/audit.js';
import { CARRY_ENV, RequestOwner } from '../control/requests.js';
import { createOwnSync, NSA_DIR, openOwnAppendSync, removeOwnSync } from '../control/ownfiles.js';
import { ALLOW_ENV, describeWillRun, planPhases } from './willrun.js';
import { RankWatch } from './rankwatch.js';
import { nsaDir, RESUME_FROM_ENV, writeStateLocal } from './state.js';
import { LOCK_FILE, readLaunchPlan, readSupervisorState, STOP_FILE } from '../run/launchstate.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The first 4 KiB of a control file (.HALT, .anomaly_type), opened non-blocking: a FIFO planted
 * under that name must not freeze the supervisor. A non-regular one (a FIFO, a directory) counts as
 * present, as it does for the trainer, which only asks whether the path exists.
 */
function readSmall(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch {
    return null;
  }
  try {
    const why = notRegular(fstatSync(fd));
    if (why) return `(${why})`;
    const buf = Buffer.alloc(4096);
    return buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

function mtimeOf(path: string): number | null {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return null;
  }
}

export interface StopRequest {
  ts: number;
  who: Actor;
  reason: string;
  /**
   * A multi-node launch that failed on another node (src/trainer/launch/nodeabort.ts): this node's
   * torchrun waits for a rendezvous that cannot complete, and SIGINT does not end it there (torch
   * 1.13's agent blocks in the store's wait). Nothing has trained: SIGKILL now, no .HALT (which
   * would refuse the next launch into the out_dir).
   */
  abort?: boolean;
}

function supervisorActor(reason: string): Actor {
  return { user: `nsa-top supervisor (${reason})`, tty: null, tmux: null, host: 'local', pid: process.pid };
}

interface ChildResult {
  code: number | null;
  signal: string | null;
}

/** Reads the plan, takes the run's lock and supervises; the exit code of `nsa-top supervise`. */
/** May a supervisor claim an old request (src/checks/carry.ts supervisorMayClaim, handed down)? */
export type ClaimJudge = (x: {
  requestTs: number;
  launchedAt: number;
  carried: boolean;
  adoptedLiveTrainer: boolean;
}) => boolean;

export async function runSupervisor(runDir: string, opts: { resume: boolean; mayClaim: ClaimJudge }): Promise<number> {
  // an older request is an earlier run's: claimed only if the relaunch carried it (src/checks/carry.ts)
  const launchedAt = Date.now();
  const carried = new Set((process.env[CARRY_ENV] ?? '').split('\n').filter(Boolean));
  delete process.env[CARRY_ENV]; // not the trainer's business
  const host = new LocalHost();
  const plan = await readLaunchPlan(host, runDir);
  if (!plan) {
    process.stderr.write(`supervise: ${runDir}: no .nsa-top/launch.json — start runs with nsa-top launch\n`);
    return 2;
  }
  // started by a relaunch: the plan read now is checked again, as the relaunch checked it (a file
  // changed in between must not run what was refused)
  const allow = process.env[ALLOW_ENV];
  delete process.env[ALLOW_ENV]; // not the trainer's business
  // a multi-node relaunch: the one checkpoint chosen for every node ('' = none: from scratch)
  const resumeFrom = process.env[RESUME_FROM_ENV];
  delete process.env[RESUME_FROM_ENV];
  if (allow !== undefined) {
    const seen = describeWillRun(planPhases(opts.resume ? { ...plan, smoke: null } : plan), {
      allow: allow.split('\n').filter(Boolean),
    });
    if (seen.refusal) {
      process.stderr.write(`supervise: relaunch refused: ${seen.refusal}\n`);
      return 2;
    }
  }
  const me = await readProc(host, process.pid).catch(() => null);
  // One supervisor per run: two relaunches at once (two cockpits) must not start two trainers.
  const lockErr = await takeLock(host, runDir, { pid: process.pid, startTime: me?.startTime ?? '' });
  if (lockErr) {
    process.stderr.write(`supervise: ${lockErr}\n`);
    return 4;
  }
  const prev = await readSupervisorState(host, runDir);
  return new Supervisor(host, runDir, plan, prev, me?.startTime ?? '', opts.resume, {
    launchedAt,
    carried,
    judge: opts.mayClaim,
    resumeFrom,
  }).run();
}

type Plan = NonNullable<Awaited<ReturnType<typeof readLaunchPlan>>>;
type Child = { pid: number; startTime: string; done: Promise<ChildResult> };
/** what to do after the trainer exited: stop supervising with this exit code, or start it again */
type AfterExit = { end: number } | 'restart';

/**
 * One supervisor's life, along its seams: starting the trainer (runChild, track, adopting a live
 * one), the watch loop (train), stop requests and their escalation (requestStop, escalate), the
 * decision after each exit (afterExit: stop, give up, or back off and restart from the newest
 * complete checkpoint) and the bookkeeping when it ends (finish).
 */
class Supervisor {
  private readonly st: SupervisorState;
  private readonly trainLog: number;
  private readonly stopPath: string;
  private readonly haltPath: string;
  private readonly anomalyPath: string;
  private readonly owner: RequestOwner;
  private stop: StopRequest | null = null;
  private current: Child | null = null;
  private escalating: Promise<void> | null = null;
  private owning: Promise<number> | null = null;
  private lastOwnerTick = 0;
  private stopPoll: NodeJS.Timeout | null = null;
  /** .anomaly_type's mtime when the trainer started: an older one (kept as evidence) is not this run's */
  private anomalyBefore: number | null = null;
  /** the checkpoint a multi-node relaunch chose for every node (RESUME_FROM_ENV), until taken */
  private forcedResume: string | undefined;
  /** this supervisor re-adopted a live trainer of the run: its requests in force are this trainer's */
  private adoptedLive = false;
  /** the running trainer's ranks, watched for the one that goes first */
  private watch: RankWatch | null = null;

  constructor(
    private readonly host: LocalHost,
    private readonly runDir: string,
    private readonly plan: Plan,
    private readonly prev: SupervisorState | null,
    startTime: string,
    private readonly resume: boolean,
    claim: { launchedAt: number; carried: ReadonlySet<string>; judge: ClaimJudge; resumeFrom?: string },
  ) {
    this.st = {
      runDir,
      profile: plan.profile,
      supervisor: { pid: process.pid, startTime },
      child: null,
      state: 'starting',
      restarts: 0,
      maxRestarts: plan.restart.max_restarts,
      exitCodes: prev?.exitCodes ?? [],
      startCheckpoints: prev?.startCheckpoints ?? [],
      lastCommand: prev?.lastCommand ?? [],
      resumeFrom: null,
      updatedAt: Date.now(),
      outDir: plan.outDir,
      phase: prev?.phase === 'train' || resume ? 'train' : plan.smoke ? 'smoke' : 'train',
      note: null,
    };
    this.forcedResume = claim.resumeFrom;
    this.trainLog = openOwnAppendSync(runDir, 'train.log', { launcher: true });
    this.stopPath = join(nsaDir(runDir), STOP_FILE);
    this.haltPath = join(plan.outDir, '.HALT');
    this.anomalyPath = join(plan.outDir, '.anomaly_type');
    // durable requests (halt after the next checkpoint): this supervisor carries them while it lives;
    // once one has written .HALT, the stop escalation takes over (grace, SIGINT, SIGKILL, logged)
    this.owner = new RequestOwner(
      host,
      runDir,
      plan.outDir,
      { kind: 'supervisor', pid: process.pid, startTime },
      {
        say: (m) => this.say(m),
        alive: async () => this.current !== null || this.st.state === 'backoff' || this.st.state === 'starting',
        mayClaim: (req) =>
          claim.judge({
            requestTs: req.ts,
            launchedAt: claim.launchedAt,
            carried: claim.carried.has(req.id),
            adoptedLiveTrainer: this.adoptedLive,
          }),
        onHaltWritten: (req) =>
          this.requestStop({
            ts: Date.now(),
            who: req.who,
            reason: `halt after checkpoint: ${req.checkpoint?.path ?? 'new checkpoint'} written`,
          }),
      },
    );
  }

  private save(patch: Partial<SupervisorState> = {}): void {
    Object.assign(this.st, patch, { updatedAt: Date.now() });
    writeStateLocal(this.runDir, this.st);
  }

  private say(msg: string, fd = this.trainLog): void {
    const line = `[nsa-top supervisor] ${new Date().toISOString()} ${msg}\n`;
    try {
      writeSync(fd, line);
    } catch {
      /* log unwritable: keep supervising */
    }
    process.stdout.write(line);
  }

  async run(): Promise<number> {
    // a stop request left from an earlier supervisor of this run does not apply to this one
    if (existsSync(this.stopPath)) removeOwnSync(this.runDir, `${NSA_DIR}/${STOP_FILE}`);
    let adopt = await this.liveEarlierTrainer();
    this.adoptedLive = adopt !== null; // known before the first request tick (listen)
    this.listen();
    try {
      this.say(
        `supervising profile ${this.plan.profile} in ${this.runDir} (out_dir ${this.plan.outDir}), restarts ≤ ${this.plan.restart.max_restarts}`,
      );
      if (adopt && this.st.phase === 'smoke') {
        // an earlier supervisor's smoke run is still going: never two at once
        this.say(`the smoke run of an earlier supervisor (pid ${adopt.pid}) is still running: waiting for it to end`);
        await this.watchGone(adopt.pid, adopt.startTime);
        adopt = null;
      }
      if (this.st.phase === 'smoke' && this.plan.smoke) {
        const end = await this.smoke(this.plan.smoke);
        if (end !== null) return end;
      }
      return await this.train(adopt);
    } finally {
      await this.finish();
    }
  }

  // ------------------------------------------------------------------ stop requests, escalation

  /** stop.json (polled with the request owner's tick), SIGTERM/SIGINT to the supervisor */
  private listen(): void {
    this.stopPoll = setInterval(() => {
      if (!this.owning && Date.now() - this.lastOwnerTick >= 1000) {
        this.lastOwnerTick = Date.now();
        this.owning = this.owner.tick().finally(() => (this.owning = null));
      }
      if (this.stop) return;
      const raw = readSmall(this.stopPath);
      if (raw === null) return;
      try {
        const j = JSON.parse(raw) as StopRequest;
        this.requestStop({
          ts: j.ts ?? Date.now(),
          who: j.who ?? supervisorActor('stop.json'),
          reason: j.reason ?? 'stop requested',
          ...(j.abort === true ? { abort: true } : {}),
        });
      } catch {
        this.requestStop({
          ts: Date.now(),
          who: supervisorActor('stop.json'),
          reason: 'stop requested (unreadable request)',
        });
      }
    }, 500);
    process.on('SIGHUP', () => {
      /* the session we came from is gone: keep supervising */
    });
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () =>
        this.requestStop({
          ts: Date.now(),
          who: supervisorActor(`received ${sig}`),
          reason: `supervisor received ${sig}`,
        }),
      );
    }
  }

  private requestStop(req: StopRequest): void {
    if (this.stop) return;
    this.stop = req;
    this.escalateIfRunning();
  }

  private escalateIfRunning(): void {
    if (this.stop && this.current && !this.escalating)
      this.escalating = this.escalate(this.stop).finally(() => (this.escalating = null));
  }

  /** .HALT → halt_grace_s → SIGINT to the ranks → sigint_grace_s → SIGKILL to all, each step logged */
  private async escalate(req: StopRequest): Promise<void> {
    if (!this.current) return;
    const { halt_grace_s: haltGrace, sigint_grace_s: sigintGrace } = this.plan.stop;
    this.save({ state: 'stopping', note: `stop requested by ${req.who.user}: ${req.reason}` });
    if (req.abort) {
      const all = await this.rankTargets(true);
      this.say(
        `stop requested by ${req.who.user} (${req.reason}): the launch did not come up on every node, nothing has trained: SIGKILL to ${all.map((r) => r.pid).join(', ')} now, no .HALT`,
      );
      await escalate(this.host, this.runDir, all, 'SIGKILL', req.who, { reason: req.reason });
      await this.waitDone(10_000);
      return;
    }
    this.say(
      `stop requested by ${req.who.user} (${req.reason}): writing .HALT, then SIGINT after ${dur(haltGrace)}, SIGKILL ${dur(sigintGrace)} later`,
    );
    await requestHalt(this.host, this.runDir, 'now', req.who, { reason: req.reason });
    if (await this.waitDone(haltGrace * 1000)) return;
    const ranks = await this.rankTargets(false);
    this.say(`ranks still running ${dur(haltGrace)} after .HALT: SIGINT to ${ranks.map((r) => r.pid).join(', ')}`);
    await escalate(this.host, this.runDir, ranks, 'SIGINT', req.who, { reason: req.reason });
    if (await this.waitDone(sigintGrace * 1000)) return;
    const all = await this.rankTargets(true);
    this.say(`still running ${dur(sigintGrace)} after SIGINT: SIGKILL to ${all.map((r) => r.pid).join(', ')}`);
    await escalate(this.host, this.runDir, all, 'SIGKILL', req.who, { reason: req.reason });
    await this.waitDone(10_000);
  }

  /** true when the child exited within ms (the timer never outlives the wait) */
  private waitDone(ms: number): Promise<boolean> {
    const c = this.current;
    if (!c) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      void c.done.then(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  /** rank processes: descendants of the child (torchrun / launcher), or the child itself */
  private async rankTargets(withLauncher: boolean): Promise<RankTarget[]> {
    if (!this.current) return [];
    const c = this.current;
    const procs = await listProcesses(this.host).catch(() => []);
    const kids = new Map<number, typeof procs>();
    for (const p of procs) {
      const arr = kids.get(p.ppid) ?? [];
      arr.push(p);
      kids.set(p.ppid, arr);
    }
    const out: RankTarget[] = [];
    const walk = (pid: number) => {
      for (const k of kids.get(pid) ?? []) {
        out.push({ rank: out.length, pid: k.pid, startTime: k.startTime, state: k.state });
        walk(k.pid);
      }
    };
    walk(c.pid);
    // the rank numbers in the action log should be the trainer's own (RANK in the environment)
    for (const t of out) {
      const info = await readProc(this.host, t.pid).catch(() => null);
      const r = info?.env.RANK;
      if (info && info.startTime === t.startTime && r !== undefined && /^\d+$/.test(r)) t.rank = Number(r);
    }
    if (!c.startTime) c.startTime = (await readProc(this.host, c.pid).catch(() => null))?.startTime ?? '';
    if (out.length === 0 || withLauncher)
      out.push({ rank: out.length === 0 ? 0 : -1, pid: c.pid, startTime: c.startTime });
    return out;
  }

  // ------------------------------------------------------------------ starting the trainer

  /** A trainer left running by an earlier supervisor of this run (killed, or the box's node died). */
  private async liveEarlierTrainer(): Promise<{ pid: number; startTime: string } | null> {
    const prev = this.prev;
    if (!prev?.child?.startTime || prev.supervisor?.pid === process.pid) return null;
    const live = await readProc(this.host, prev.child.pid).catch(() => null);
    return live && live.startTime === prev.child.startTime && live.state !== 'Z' && live.state !== 'X'
      ? prev.child
      : null;
  }

  /** Waits until a process this supervisor did not start (an adopted trainer) is gone. */
  private watchGone(pid: number, startTime: string): Promise<ChildResult> {
    return new Promise((resolve) => {
      const t = setInterval(() => {
        void readProc(this.host, pid)
          .then((p) => {
            if (!p || p.startTime !== startTime || p.state === 'Z' || p.state === 'X') {
              clearInterval(t);
              // not our child: its exit status is not ours to read (see adoptedResult)
              resolve({ code: null, signal: null });
            }
          })
          .catch(() => {});
      }, 1000);
    });
  }

  /**
   * The trainer runs in its own session and process group (setsid), its output straight into the
   * log file: no pty whose hang-up would kill it, no pipe that breaks, when this supervisor dies
   * (SIGKILL, OOM killer, a reboot of nothing but node). A later supervisor re-adopts it.
   */
  private runChild(argv: string[], env: Record<string, string>, cwd: string, logFd: number): Promise<ChildResult> {
    const [file, ...args] = argv;
    const childEnv: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) childEnv[k] = v;
    Object.assign(childEnv, env);
    let p: import('node:child_process').ChildProcess;
    try {
      p = spawn(file!, args, { cwd, env: childEnv, detached: true, stdio: ['ignore', logFd, logFd] });
    } catch (e) {
      this.say(`could not start ${file}: ${(e as Error).message}`, logFd);
      return Promise.resolve({ code: 127, signal: null });
    }
    const done = new Promise<ChildResult>((resolve) => {
      p.once('error', (e) => {
        if (p.pid === undefined) {
          this.say(`could not start ${file}: ${e.message}`, logFd);
          resolve({ code: 127, signal: null });
        }
      });
      p.once('exit', (exitCode, signal) =>
        resolve({ code: signal ? null : exitCode, signal: signal ? `signal ${signal}` : null }),
      );
    });
    if (p.pid === undefined) return done;
    return this.track(p.pid, done, argv);
  }

  /** Makes pid the current trainer: recorded in supervisor.json with its start time. */
  private track(pid: number, done: Promise<ChildResult>, argv: string[] | null, startTime = ''): Promise<ChildResult> {
    const child: Child = { pid, startTime, done };
    this.current = child;
    if (!startTime)
      void readProc(this.host, pid)
        .then((info) => {
          if (info && this.current === child) {
            child.startTime = info.startTime;
            this.save({ child: { pid, startTime: info.startTime } });
          }
        })
        .catch(() => {});
    this.save({ child: { pid, startTime }, ...(argv ? { lastCommand: argv } : {}) });
    this.escalateIfRunning();
    return done.then(async (r) => {
      if (this.escalating) await this.escalating;
      this.current = null;
      return r;
    });
  }

  // ------------------------------------------------------------------ the smoke phase

  /** Runs the profile's smoke command; an exit code when supervising ends here, null to go on. */
  private async smoke(s: NonNullable<Plan['smoke']>): Promise<number | null> {
    const smokeLog = openOwnAppendSync(dirname(s.log), basename(s.log), { launcher: true });
    this.save({ state: 'running', note: `smoke phase: ${s.command.join(' ')}` });
    this.say(`smoke: ${s.command.join(' ')} (log ${s.log})`);
    let timedOut = false;
    const timer = setTimeout(() => {
      // not via .HALT: that file belongs to the real run's out_dir
      timedOut = true;
      this.say(`smoke still running after ${dur(s.timeoutS)}: SIGINT, then SIGKILL`);
      const who = supervisorActor('smoke timeout');
      void (async () => {
        await escalate(this.host, this.runDir, await this.rankTargets(true), 'SIGINT', who);
        if (!(await this.waitDone(10_000)))
          await escalate(this.host, this.runDir, await this.rankTargets(true), 'SIGKILL', who);
      })();
    }, s.timeoutS * 1000);
    const r = await this.runChild(s.command, s.env, s.cwd, smokeLog);
    clearTimeout(timer);
    closeSync(smokeLog);
    const ok = r.code === 0 && !this.stop && !timedOut;
    const how = timedOut ? `timed out after ${dur(s.timeoutS)}` : `exit ${r.code ?? r.signal}`;
    this.say(`smoke ${ok ? 'passed' : `failed (${how})`}`);
    if (this.stop) {
      this.save({ state: 'halted', child: null, note: `stopped during the smoke phase by ${this.stop.who.user}` });
      return 0;
    }
    if (!ok && s.required) {
      this.save({
        state: 'failed',
        child: null,
        note: `smoke failed (${how}); the real run was not started — see ${s.log}`,
      });
      return 1;
    }
    this.save({ phase: 'train', child: null });
    return null;
  }

  // ------------------------------------------------------------------ the real run, with restarts

  /** Starts (or adopts) the trainer, and again after each failure while restarts are left. */
  private async train(adopt: { pid: number; startTime: string } | null): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      if (this.stop) {
        const req = this.stop;
        this.save({ state: 'halted', child: null, note: `stopped by ${req.who.user} before a restart` });
        await auditedEvent(
          this.host,
          this.runDir,
          { actor: req.who, action: 'halt', target: { runDir: this.runDir } },
          { result: 'ok', detail: `stop requested while no trainer ran (${req.reason}): not restarted` },
        );
        return 0;
      }
      const adopting = attempt === 0 ? adopt : null;
      const halt = adopting ? null : readSmall(this.haltPath);
      if (halt !== null) {
        const note =
          attempt === 0
            ? `stale .HALT in ${this.plan.outDir} ("${halt.trim()}"): the trainer would stop at step 1. Not started. Remove it with: nsa-top relaunch ${this.runDir} --remove-stale-halt`
            : `.HALT present ("${halt.trim()}"): not restarted`;
        this.say(note);
        this.save({ state: attempt === 0 ? 'failed' : 'halted', child: null, note });
        return attempt === 0 ? 3 : 0;
      }
      const r = adopting ? await this.adoptRunning(adopting) : await this.start(attempt);
      const first = (await this.watch?.stop()) ?? null;
      this.watch = null;
      this.st.exitCodes.push({ at: Date.now(), code: r.code, signal: r.signal });
      if (this.st.exitCodes.length > 200) this.st.exitCodes.splice(0, this.st.exitCodes.length - 200);
      this.save({ child: null, lastCause: r.signal ?? `exit ${r.code}`, firstGone: first });
      this.say(
        `trainer exited: ${r.signal ?? `code ${r.code}`}${first ? ` (rank ${first.rank}, pid ${first.pid}, went first${first.how ? `: ${first.how}` : ''})` : ''}`,
      );
      const next = await this.afterExit(r);
      if (next !== 'restart') return next.end;
    }
  }

  /** Starts the trainer, from the newest complete checkpoint on a restart or a relaunch. */
  private async start(attempt: number): Promise<ChildResult> {
    const resumeFrom = attempt > 0 || this.resume ? await this.pickResume() : null;
    const argv = [...this.plan.command, ...(resumeFrom ? [this.plan.resumeFlag, resumeFrom] : [])];
    this.anomalyBefore = mtimeOf(this.anomalyPath);
    // which weights each start begins from: restarts that never move it forward are judged in src/checks
    const starts = [
      ...(this.st.startCheckpoints ?? []),
      { at: Date.now(), path: resumeFrom, mtimeMs: resumeFrom ? mtimeOf(resumeFrom) : null },
    ].slice(-50);
    this.save({
      state: 'running',
      resumeFrom,
      backoffUntil: null,
      startCheckpoints: starts,
      note: attempt === 0 ? null : `restart ${this.st.restarts} of ${this.plan.restart.max_restarts}`,
    });
    this.say(`start: ${argv.join(' ')}`);
    const done = this.runChild(argv, this.plan.env, this.plan.cwd, this.trainLog);
    if (this.current) this.watchRanks(this.current.pid);
    return done;
  }

  /** Which rank goes first, seen here (every 250 ms): a launcher's own summary can name the wrong one. */
  private watchRanks(launcher: number): void {
    this.watch = new RankWatch(this.host, launcher, 250, 10_000, (found) =>
      this.say(`watching rank ${found.map((f) => `${f.rank} (pid ${f.pid})`).join(', ')}`),
    ).start();
  }

  private async pickResume(): Promise<string | null> {
    // a multi-node relaunch chose one checkpoint for every node: the first start takes it (later
    // restarts pick the newest again, as every node's supervisor does from the shared out_dir)
    const forced = this.forcedResume;
    this.forcedResume = undefined;
    if (forced !== undefined) {
      this.say(
        forced
          ? `resuming from ${forced}: the checkpoint the multi-node relaunch chose for every node`
          : 'no complete checkpoint (the multi-node relaunch found none): starting from scratch',
      );
      return forced || null;
    }
    const pick = await pickResumeCheckpoint(this.host, this.plan.outDir, {
      logFiles: [...(this.plan.adopted?.stdout ? [this.plan.adopted.stdout] : []), join(this.runDir, 'train.log')],
    });
    for (const w of pick.skipped) this.say(`checkpoint ${w}`);
    for (const w of pick.warnings) this.say(`warning: ${w}`);
    this.say(
      pick.found
        ? `resuming from ${pick.found.path} (step ${pick.found.step}): ${pick.found.why}`
        : 'no complete checkpoint: starting from scratch',
    );
    return pick.found?.path ?? null;
  }

  /** Watches the trainer an earlier supervisor left running until it ends. */
  private async adoptRunning(adopting: { pid: number; startTime: string }): Promise<ChildResult> {
    this.anomalyBefore = mtimeOf(this.anomalyPath);
    const info = await readProc(this.host, adopting.pid).catch(() => null);
    const startedMs = info?.startedAtMs ?? null;
    // what the adopted trainer wrote before we looked is its own
    if (this.anomalyBefore !== null && startedMs !== null && this.anomalyBefore > startedMs) this.anomalyBefore = null;
    const prev = this.prev;
    const note = `adopted the running trainer (pid ${adopting.pid}) of an earlier supervisor${prev?.supervisor ? ` (pid ${prev.supervisor.pid}, gone)` : ''}`;
    // the restart budget lives in the run's files, not in a supervisor's memory: the restarts an
    // earlier supervisor of this very trainer used stay used (else each re-adoption would reset it)
    const used = Math.max(this.st.restarts, typeof prev?.restarts === 'number' ? prev.restarts : 0);
    // the trainer it watches is in the same write as the word that it adopted it: a reader never
    // sees "running, adopted" with no child (a test caught that in-between file under load)
    this.save({ state: 'running', resumeFrom: prev?.resumeFrom ?? null, note, restarts: used, child: adopting });
    this.say(`${note}: not starting a second copy`);
    // which rank goes first, seen as for a trainer it started (its ranks are the adopted launcher's
    // descendants): without it a re-adopted run's crash was told by torchrun's summary alone
    this.watchRanks(adopting.pid);
    await this.track(adopting.pid, this.watchGone(adopting.pid, adopting.startTime), null, adopting.startTime);
    return adoptedResult(this.plan.outDir, startedMs);
  }

  /** After the trainer exited: a stop, a NaN abort, a HALT or a clean finish end it; a crash restarts while restarts are left. */
  private async afterExit(r: ChildResult): Promise<AfterExit> {
    const st = this.st;
    if (this.stop) {
      const req = this.stop;
      this.save({
        state: 'halted',
        note: req.who.user.startsWith('nsa-top supervisor')
          ? `stopped: ${req.reason}`
          : `stopped by ${req.who.user} (${req.reason})`,
      });
      return { end: 0 };
    }
    const anomalyNow = mtimeOf(this.anomalyPath);
    const anomaly =
      anomalyNow !== null && anomalyNow !== this.anomalyBefore ? (readSmall(this.anomalyPath)?.trim() ?? null) : null;
    const haltNow = readSmall(this.haltPath);
    if (anomaly === 'nan_loss' || (haltNow !== null && /nan_loss/.test(haltNow))) {
      const note = 'NaN abort (.anomaly_type nan_loss): not restarted — a restart would resume into the same blow-up';
      this.say(note);
      this.save({ state: 'halted', note });
      return { end: 0 };
    }
    if (haltNow !== null) {
      const note = `HALT ("${haltNow.trim()}"): not restarted`;
      this.say(note);
      this.save({ state: 'halted', note });
      return { end: 0 };
    }
    if (r.code === 0 && r.signal === null) {
      this.save({ state: 'exited', note: 'trainer finished (exit 0)' });
      return { end: 0 };
    }
    const n = this.plan.restart.max_restarts;
    if (st.restarts >= n) {
      const note = `trainer failed (${r.signal ?? `exit ${r.code}`}) and ${n === 0 ? 'the profile allows no restarts' : n === 1 ? 'its 1 restart is used up' : `all ${n} restarts are used up`}`;
      this.say(note);
      this.save({ state: 'failed', note });
      // the launch or relaunch that started this supervisor did not lead to training: say so
      await auditedEvent(
        this.host,
        this.runDir,
        {
          actor: supervisorActor('gave up'),
          action: this.resume ? 'relaunch' : 'launch',
          target: { runDir: this.runDir, exitCodes: st.exitCodes.slice(-(n + 1)) },
        },
        { result: 'failed', detail: `supervisor gave up: ${note}; see ${join(this.runDir, 'train.log')}` },
      );
      return { end: 1 };
    }
    const backoffS = Math.min(
      this.plan.restart.backoff_max_s,
      this.plan.restart.backoff_s * this.plan.restart.backoff_factor ** st.restarts,
    );
    this.save({
      state: 'backoff',
      restarts: st.restarts + 1,
      backoffUntil: Date.now() + backoffS * 1000,
      note: `trainer failed (${r.signal ?? `exit ${r.code}`}); restart ${st.restarts + 1} of ${n} in ${dur(backoffS)}`,
    });
    this.say(st.note!);
    const until = Date.now() + backoffS * 1000;
    while (Date.now() < until && !this.stop) await sleep(Math.min(250, until - Date.now()));
    return 'restart';
  }

  // ------------------------------------------------------------------ the end

  /** Ends the requests it carries, says how it ended, closes the log, gives the lock back. */
  private async finish(): Promise<void> {
    const st = this.st;
    if (this.stopPoll) clearInterval(this.stopPoll);
    if (this.owning) await this.owning;
    await this.owner.release(`the supervisor ended (${st.state}${st.note ? `: ${st.note}` : ''})`);
    this.say(`supervisor done: ${st.state}${st.note ? ` — ${st.note}` : ''}`);
    closeSync(this.trainLog);
    try {
      if (JSON.parse(readSmall(join(nsaDir(this.runDir), LOCK_FILE)) ?? '{}').pid === process.pid)
        removeOwnSync(this.runDir, `${NSA_DIR}/${LOCK_FILE}`);
    } catch {
      /* not ours, or gone */
    }
  }
}

/**
 * How an adopted trainer ended. It was not our child, so its exit status is gone; what it left
 * says: both trainers write metrics.json when they end gracefully (finished, HALT, NaN abort), and
 * a crash or a kill leaves none.
 */
function adoptedResult(outDir: string, startedMs: number | null): ChildResult {
  const m = mtimeOf(join(outDir, 'metrics.json'));
  if (m !== null && (startedMs === null || m >= startedMs)) return { code: 0, signal: null };
  return {
    code: null,
    signal:
      'an unknown signal or error (adopted trainer: its exit status is not ours to read, and it wrote no metrics.json)',
  };
}

/** Exclusive lock file holding pid + start time; a holder that is no longer alive is replaced. */
async function takeLock(
  host: LocalHost,
  runDir: string,
  me: { pid: number; startTime: string },
): Promise<string | null> {
  const rel = `${NSA_DIR}/${LOCK_FILE}`;
  const path = join(runDir, rel);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      createOwnSync(runDir, rel, `${JSON.stringify(me)}\n`);
      return null;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return `cannot create ${path}: ${(e as Error).message}`;
    }
    let holder: { pid?: unknown; startTime?: unknown } = {};
    try {
      holder = JSON.parse(readSmall(path) ?? '{}');
    } catch {
      /* half-written by a racing taker: look again */
      await sleep(100);
      continue;
    }
    if (typeof holder.pid === 'number' && typeof holder.startTime === 'string' && holder.pid !== me.pid) {
      if (await verifyProcess(host, { pid: holder.pid, startTime: holder.startTime }).catch(() => false))
        return `another supervisor (pid ${holder.pid}) already runs this run`;
    }
    try {
      removeOwnSync(runDir, rel); // stale: its supervisor is gone
    } catch {
      /* someone else removed it */
    }
  }
  return `could not take ${path}`;
}
