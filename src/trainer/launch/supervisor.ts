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
import { escalate, recordAction, requestHalt, type RankTarget } from '../control/actions.js';
import { RequestOwner } from '../control/requests.js';
import { createOwnSync, NSA_DIR, openOwnAppendSync, removeOwnSync } from '../control/ownfiles.js';
import { LOCK_FILE, nsaDir, readLaunchPlan, readSupervisorState, STOP_FILE, writeStateLocal } from './state.js';

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
}

function supervisorActor(reason: string): Actor {
  return { user: `nsa-top supervisor (${reason})`, tty: null, tmux: null, host: 'local', pid: process.pid };
}

interface ChildResult {
  code: number | null;
  signal: string | null;
}

export async function runSupervisor(runDir: string, opts: { resume: boolean }): Promise<number> {
  const host = new LocalHost();
  const plan = await readLaunchPlan(host, runDir);
  if (!plan) {
    process.stderr.write(`supervise: ${runDir}: no .nsa-top/launch.json — start runs with nsa-top launch\n`);
    return 2;
  }
  const me = await readProc(host, process.pid).catch(() => null);
  // One supervisor per run: two relaunches at once (two cockpits) must not start two trainers.
  const lockPath = join(nsaDir(runDir), LOCK_FILE);
  const lockErr = await takeLock(host, runDir, { pid: process.pid, startTime: me?.startTime ?? '' });
  if (lockErr) {
    process.stderr.write(`supervise: ${lockErr}\n`);
    return 4;
  }
  const prev = await readSupervisorState(host, runDir);
  const st: SupervisorState = {
    runDir,
    profile: plan.profile,
    supervisor: { pid: process.pid, startTime: me?.startTime ?? '' },
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
    phase: prev?.phase === 'train' || opts.resume ? 'train' : plan.smoke ? 'smoke' : 'train',
    note: null,
  };
  const save = (patch: Partial<SupervisorState> = {}) => {
    Object.assign(st, patch, { updatedAt: Date.now() });
    writeStateLocal(runDir, st);
  };
  const trainLog = openOwnAppendSync(runDir, 'train.log', { launcher: true });
  const say = (msg: string, fd = trainLog) => {
    const line = `[nsa-top supervisor] ${new Date().toISOString()} ${msg}\n`;
    try {
      writeSync(fd, line);
    } catch {
      /* log unwritable: keep supervising */
    }
    process.stdout.write(line);
  };
  const stopPath = join(nsaDir(runDir), STOP_FILE);
  // a stop request left from an earlier supervisor of this run does not apply to this one
  if (existsSync(stopPath)) removeOwnSync(runDir, `${NSA_DIR}/${STOP_FILE}`);
  let stop: StopRequest | null = null;
  let current: { pid: number; startTime: string; done: Promise<ChildResult> } | null = null;
  let escalating: Promise<void> | null = null;

  const haltPath = join(plan.outDir, '.HALT');
  /** true when the child exited within ms (the timer never outlives the wait) */
  const waitDone = (ms: number): Promise<boolean> => {
    const c = current;
    if (!c) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      void c.done.then(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  };

  /** rank processes: descendants of the child (torchrun / launcher), or the child itself */
  const rankTargets = async (withLauncher: boolean): Promise<RankTarget[]> => {
    if (!current) return [];
    const c = current;
    const procs = await listProcesses(host).catch(() => []);
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
      const info = await readProc(host, t.pid).catch(() => null);
      const r = info?.env.RANK;
      if (info && info.startTime === t.startTime && r !== undefined && /^\d+$/.test(r)) t.rank = Number(r);
    }
    if (!c.startTime) c.startTime = (await readProc(host, c.pid).catch(() => null))?.startTime ?? '';
    if (out.length === 0 || withLauncher)
      out.push({ rank: out.length === 0 ? 0 : -1, pid: c.pid, startTime: c.startTime });
    return out;
  };

  const doEscalate = async (req: StopRequest) => {
    if (!current) return;
    save({ state: 'stopping', note: `stop requested by ${req.who.user}: ${req.reason}` });
    say(
      `stop requested by ${req.who.user} (${req.reason}): writing .HALT, then SIGINT after ${dur(plan.stop.halt_grace_s)}, SIGKILL ${dur(plan.stop.sigint_grace_s)} later`,
    );
    await requestHalt(host, runDir, 'now', req.who);
    if (await waitDone(plan.stop.halt_grace_s * 1000)) return;
    const ranks = await rankTargets(false);
    say(
      `ranks still running ${dur(plan.stop.halt_grace_s)} after .HALT: SIGINT to ${ranks.map((r) => r.pid).join(', ')}`,
    );
    await escalate(host, runDir, ranks, 'SIGINT', req.who);
    if (await waitDone(plan.stop.sigint_grace_s * 1000)) return;
    const all = await rankTargets(true);
    say(`still running ${dur(plan.stop.sigint_grace_s)} after SIGINT: SIGKILL to ${all.map((r) => r.pid).join(', ')}`);
    await escalate(host, runDir, all, 'SIGKILL', req.who);
    await waitDone(10_000);
  };

  const requestStop = (req: StopRequest) => {
    if (stop) return;
    stop = req;
    if (current && !escalating) escalating = doEscalate(req).finally(() => (escalating = null));
  };

  // durable requests (halt after the next checkpoint): this supervisor carries them while it lives;
  // once one has written .HALT, the stop escalation takes over (grace, SIGINT, SIGKILL, logged)
  const owner = new RequestOwner(
    host,
    runDir,
    plan.outDir,
    { kind: 'supervisor', pid: process.pid, startTime: me?.startTime ?? '' },
    {
      say: (m) => say(m),
      alive: async () => current !== null || st.state === 'backoff' || st.state === 'starting',
      onHaltWritten: (req) =>
        requestStop({
          ts: Date.now(),
          who: req.who,
          reason: `halt after checkpoint: ${req.checkpoint?.path ?? 'new checkpoint'} written`,
        }),
    },
  );
  let owning: Promise<number> | null = null;
  let lastOwnerTick = 0;
  const stopPoll = setInterval(() => {
    if (!owning && Date.now() - lastOwnerTick >= 1000) {
      lastOwnerTick = Date.now();
      owning = owner.tick().finally(() => (owning = null));
    }
    if (stop) return;
    const raw = readSmall(stopPath);
    if (raw === null) return;
    try {
      const j = JSON.parse(raw) as StopRequest;
      requestStop({
        ts: j.ts ?? Date.now(),
        who: j.who ?? supervisorActor('stop.json'),
        reason: j.reason ?? 'stop requested',
      });
    } catch {
      requestStop({ ts: Date.now(), who: supervisorActor('stop.json'), reason: 'stop requested (unreadable request)' });
    }
  }, 500);
  process.on('SIGHUP', () => {
    /* the session we came from is gone: keep supervising */
  });
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () =>
      requestStop({ ts: Date.now(), who: supervisorActor(`received ${sig}`), reason: `supervisor received ${sig}` }),
    );
  }

  /** Waits until a process this supervisor did not start (an adopted trainer) is gone. */
  const watchGone = (pid: number, startTime: string): Promise<ChildResult> =>
    new Promise((resolve) => {
      const t = setInterval(() => {
        void readProc(host, pid)
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

  /**
   * The trainer runs in its own session and process group (setsid), its output straight into the
   * log file: no pty whose hang-up would kill it, no pipe that breaks, when this supervisor dies
   * (SIGKILL, OOM killer, a reboot of nothing but node). A later supervisor re-adopts it.
   */
  const runChild = (argv: string[], env: Record<string, string>, cwd: string, logFd: number): Promise<ChildResult> => {
    const [file, ...args] = argv;
    const childEnv: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) childEnv[k] = v;
    Object.assign(childEnv, env);
    let p: import('node:child_process').ChildProcess;
    try {
      p = spawn(file!, args, { cwd, env: childEnv, detached: true, stdio: ['ignore', logFd, logFd] });
    } catch (e) {
      say(`could not start ${file}: ${(e as Error).message}`, logFd);
      return Promise.resolve({ code: 127, signal: null });
    }
    const done = new Promise<ChildResult>((resolve) => {
      p.once('error', (e) => {
        if (p.pid === undefined) {
          say(`could not start ${file}: ${e.message}`, logFd);
          resolve({ code: 127, signal: null });
        }
      });
      p.once('exit', (exitCode, signal) =>
        resolve({ code: signal ? null : exitCode, signal: signal ? `signal ${signal}` : null }),
      );
    });
    if (p.pid === undefined) return done;
    return track(p.pid, done, argv);
  };

  /** Makes pid the current trainer: recorded in supervisor.json with its start time. */
  const track = (
    pid: number,
    done: Promise<ChildResult>,
    argv: string[] | null,
    startTime = '',
  ): Promise<ChildResult> => {
    const child = { pid, startTime, done };
    current = child;
    if (!startTime)
      void readProc(host, pid)
        .then((info) => {
          if (info && current === child) {
            child.startTime = info.startTime;
            save({ child: { pid, startTime: info.startTime } });
          }
        })
        .catch(() => {});
    save({ child: { pid, startTime }, ...(argv ? { lastCommand: argv } : {}) });
    if (stop && !escalating) escalating = doEscalate(stop).finally(() => (escalating = null));
    return done.then(async (r) => {
      if (escalating) await escalating;
      current = null;
      return r;
    });
  };

  // A trainer left running by an earlier supervisor of this run (killed, or the box's node died):
  // adopt it instead of starting a second copy into the same out_dir.
  let adopt: { pid: number; startTime: string } | null = null;
  if (prev?.child?.startTime && prev.supervisor?.pid !== process.pid) {
    const live = await readProc(host, prev.child.pid).catch(() => null);
    if (live && live.startTime === prev.child.startTime && live.state !== 'Z' && live.state !== 'X') adopt = prev.child;
  }

  let code = 0;
  try {
    say(
      `supervising profile ${plan.profile} in ${runDir} (out_dir ${plan.outDir}), restarts ≤ ${plan.restart.max_restarts}`,
    );
    if (adopt && st.phase === 'smoke') {
      // an earlier supervisor's smoke run is still going: never two at once
      say(`the smoke run of an earlier supervisor (pid ${adopt.pid}) is still running: waiting for it to end`);
      await watchGone(adopt.pid, adopt.startTime);
      adopt = null;
    }
    // --- smoke phase
    if (st.phase === 'smoke' && plan.smoke) {
      const s = plan.smoke;
      const smokeLog = openOwnAppendSync(dirname(s.log), basename(s.log), { launcher: true });
      save({ state: 'running', note: `smoke phase: ${s.command.join(' ')}` });
      say(`smoke: ${s.command.join(' ')} (log ${s.log})`);
      let timedOut = false;
      const timer = setTimeout(() => {
        // not via .HALT: that file belongs to the real run's out_dir
        timedOut = true;
        say(`smoke still running after ${dur(s.timeoutS)}: SIGINT, then SIGKILL`);
        const who = supervisorActor('smoke timeout');
        void (async () => {
          await escalate(host, runDir, await rankTargets(true), 'SIGINT', who);
          if (!(await waitDone(10_000))) await escalate(host, runDir, await rankTargets(true), 'SIGKILL', who);
        })();
      }, s.timeoutS * 1000);
      const r = await runChild(s.command, s.env, s.cwd, smokeLog);
      clearTimeout(timer);
      closeSync(smokeLog);
      const ok = r.code === 0 && !stop && !timedOut;
      const how = timedOut ? `timed out after ${dur(s.timeoutS)}` : `exit ${r.code ?? r.signal}`;
      say(`smoke ${ok ? 'passed' : `failed (${how})`}`);
      if (stop) {
        save({
          state: 'halted',
          child: null,
          note: `stopped during the smoke phase by ${(stop as StopRequest).who.user}`,
        });
        return 0;
      }
      if (!ok && s.required) {
        save({
          state: 'failed',
          child: null,
          note: `smoke failed (${how}); the real run was not started — see ${s.log}`,
        });
        return 1;
      }
      save({ phase: 'train', child: null });
    }
    // --- the real run, with restarts
    let attempt = 0;
    for (;;) {
      if (stop) {
        const req = stop as StopRequest;
        save({ state: 'halted', child: null, note: `stopped by ${req.who.user} before a restart` });
        await recordAction(host, runDir, {
          ts: Date.now(),
          who: req.who,
          action: 'halt',
          target: { runDir },
          result: 'ok',
          detail: `stop requested while no trainer ran (${req.reason}): not restarted`,
        }).catch(() => {});
        break;
      }
      const adopting = attempt === 0 ? adopt : null;
      const halt = adopting ? null : readSmall(haltPath);
      if (halt !== null) {
        const note =
          attempt === 0
            ? `stale .HALT in ${plan.outDir} ("${halt.trim()}"): the trainer would stop at step 1. Not started. Remove it with: nsa-top relaunch ${runDir} --remove-stale-halt`
            : `.HALT present ("${halt.trim()}"): not restarted`;
        say(note);
        save({ state: attempt === 0 ? 'failed' : 'halted', child: null, note });
        code = attempt === 0 ? 3 : 0;
        break;
      }
      let resumeFrom: string | null = null;
      if (!adopting && (attempt > 0 || opts.resume)) {
        const pick = await pickResumeCheckpoint(host, plan.outDir, {
          logFiles: [...(plan.adopted?.stdout ? [plan.adopted.stdout] : []), join(runDir, 'train.log')],
        });
        for (const w of pick.skipped) say(`checkpoint ${w}`);
        for (const w of pick.warnings) say(`warning: ${w}`);
        resumeFrom = pick.found?.path ?? null;
        say(
          pick.found
            ? `resuming from ${pick.found.path} (step ${pick.found.step}): ${pick.found.why}`
            : 'no complete checkpoint: starting from scratch',
        );
      }
      const argv = [...plan.command, ...(resumeFrom ? [plan.resumeFlag, resumeFrom] : [])];
      const anomalyPath = join(plan.outDir, '.anomaly_type');
      let anomalyBefore = mtimeOf(anomalyPath); // an old .anomaly_type (kept as evidence) is not this run's
      let r: ChildResult;
      if (adopting) {
        const info = await readProc(host, adopting.pid).catch(() => null);
        const startedMs = info?.startedAtMs ?? null;
        // what the adopted trainer wrote before we looked is its own
        if (anomalyBefore !== null && startedMs !== null && anomalyBefore > startedMs) anomalyBefore = null;
        const note = `adopted the running trainer (pid ${adopting.pid}) of an earlier supervisor${prev?.supervisor ? ` (pid ${prev.supervisor.pid}, gone)` : ''}`;
        save({ state: 'running', resumeFrom: prev?.resumeFrom ?? null, note });
        say(`${note}: not starting a second copy`);
        r = await track(adopting.pid, watchGone(adopting.pid, adopting.startTime), null, adopting.startTime);
        r = adoptedResult(plan.outDir, startedMs);
      } else {
        // which weights each start begins from: restarts that never move it forward are judged in src/checks
        const starts = [
          ...(st.startCheckpoints ?? []),
          { at: Date.now(), path: resumeFrom, mtimeMs: resumeFrom ? mtimeOf(resumeFrom) : null },
        ].slice(-50);
        save({
          state: 'running',
          resumeFrom,
          backoffUntil: null,
          startCheckpoints: starts,
          note: attempt === 0 ? null : `restart ${st.restarts} of ${plan.restart.max_restarts}`,
        });
        say(`start: ${argv.join(' ')}`);
        r = await runChild(argv, plan.env, plan.cwd, trainLog);
      }
      st.exitCodes.push({ at: Date.now(), code: r.code, signal: r.signal });
      if (st.exitCodes.length > 200) st.exitCodes.splice(0, st.exitCodes.length - 200);
      save({ child: null, lastCause: r.signal ?? `exit ${r.code}` });
      say(`trainer exited: ${r.signal ?? `code ${r.code}`}`);
      if (stop) {
        const req = stop as StopRequest;
        save({
          state: 'halted',
          note: req.who.user.startsWith('nsa-top supervisor')
            ? `stopped: ${req.reason}`
            : `stopped by ${req.who.user} (${req.reason})`,
        });
        break;
      }
      const anomalyNow = mtimeOf(anomalyPath);
      const anomaly =
        anomalyNow !== null && anomalyNow !== anomalyBefore ? (readSmall(anomalyPath)?.trim() ?? null) : null;
      const haltNow = readSmall(haltPath);
      if (anomaly === 'nan_loss' || (haltNow !== null && /nan_loss/.test(haltNow))) {
        const note = 'NaN abort (.anomaly_type nan_loss): not restarted — a restart would resume into the same blow-up';
        say(note);
        save({ state: 'halted', note });
        break;
      }
      if (haltNow !== null) {
        const note = `HALT ("${haltNow.trim()}"): not restarted`;
        say(note);
        save({ state: 'halted', note });
        break;
      }
      if (r.code === 0 && r.signal === null) {
        save({ state: 'exited', note: 'trainer finished (exit 0)' });
        break;
      }
      if (st.restarts >= plan.restart.max_restarts) {
        const n = plan.restart.max_restarts;
        const note = `trainer failed (${r.signal ?? `exit ${r.code}`}) and ${n === 0 ? 'the profile allows no restarts' : n === 1 ? 'its 1 restart is used up' : `all ${n} restarts are used up`}`;
        say(note);
        save({ state: 'failed', note });
        // the launch or relaunch that started this supervisor did not lead to training: say so
        await recordAction(host, runDir, {
          ts: Date.now(),
          who: supervisorActor('gave up'),
          action: opts.resume ? 'relaunch' : 'launch',
          target: { runDir, exitCodes: st.exitCodes.slice(-(n + 1)) },
          result: 'failed',
          detail: `supervisor gave up: ${note}; see ${join(runDir, 'train.log')}`,
        }).catch(() => {});
        code = 1;
        break;
      }
      const backoffS = Math.min(
        plan.restart.backoff_max_s,
        plan.restart.backoff_s * plan.restart.backoff_factor ** st.restarts,
      );
      save({
        state: 'backoff',
        restarts: st.restarts + 1,
        backoffUntil: Date.now() + backoffS * 1000,
        note: `trainer failed (${r.signal ?? `exit ${r.code}`}); restart ${st.restarts + 1} of ${plan.restart.max_restarts} in ${dur(backoffS)}`,
      });
      say(st.note!);
      const until = Date.now() + backoffS * 1000;
      while (Date.now() < until && !stop) await sleep(Math.min(250, until - Date.now()));
      attempt++;
    }
  } finally {
    clearInterval(stopPoll);
    if (owning) await owning;
    await owner.release(`the supervisor ended (${st.state}${st.note ? `: ${st.note}` : ''})`);
    say(`supervisor done: ${st.state}${st.note ? ` — ${st.note}` : ''}`);
    closeSync(trainLog);
    try {
      if (JSON.parse(readSmall(lockPath) ?? '{}').pid === process.pid) removeOwnSync(runDir, `${NSA_DIR}/${LOCK_FILE}`);
    } catch {
      /* not ours, or gone */
    }
  }
  return code;
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
