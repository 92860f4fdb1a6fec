// Launch, relaunch and stop a supervised run — the cockpit's `r` key and the launch/relaunch
// commands call these. Every run gets artifacts/train_runs/<profile>_<YYYYmmdd-HHMMSS>/ with
// run.info (what exactly was started, on what) and train.log; the supervisor is a detached process
// in its own session, so the caller can go away.
import { dur } from '../../format.js';
import { mkdirSync, rmdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Host } from '../../remote/host.js';
import { verifyProcess } from '../../remote/procs.js';
import { InputError } from '../../errors.js';
import { parseInjection } from '../reference/inject.js';
import {
  settledAdoptionFacts,
  type AdoptionFacts,
  notRecordedAdvice,
  planFromAdoption,
  readAdoptionFile,
  withoutResume,
  type AdoptionRecord,
} from './adopt.js';
import { pickResumeCheckpoint, type ResumePick } from '../run/checkpoints.js';
import {
  ACTIVE_REQUEST_STATES,
  type ActionRecord,
  type Actor,
  type SupervisorState,
  supervisorInCharge,
  supervisorRestarts,
} from '../control/types.js';
import { currentActor, readOnlyMode, removeStaleHalt, requestHalt, type ControlOptions } from '../control/actions.js';
import { audited, READ_ONLY_REFUSAL, type AuditContext, type Outcome } from '../control/audit.js';
import {
  chooseConfig,
  gitCommitOf,
  loadProfiles,
  queryGpus,
  readConfigOutDir,
  resolveLaunchPlan,
  runDirBase,
  trainerCwd,
  trainerRepo,
  type LaunchPlan,
} from './profiles.js';
import { createOwn, ensureOwnDirsSync, ReadOnlyError, removeOwn, writeOwnAtomic } from '../control/ownfiles.js';
import { NSA_DIR, resolveRunDirs, runDirsOf, type RunDirs, type RunRef } from '../run/rundirs.js';
import { spawnSelfDetached } from '../control/detached.js';
import { nsaDir, SUPERVISE_ENV, writeJsonAtomic, writePlanLocal, writeStateLocal } from './state.js';
import {
  readLaunchPlan,
  readLaunchPlanFile,
  readSupervisorState,
  readSupervisorStateFile,
  STOP_FILE,
  SUPERVISOR_LOG,
} from '../run/launchstate.js';
import { dirIdSync } from '../run/pointers.js';
import { CARRY_ENV, ownerAlive, readRequests } from '../control/requests.js';
import { type RequestFateJudge, settleRequestsForRelaunch } from '../control/relaunchreqs.js';
import { ALLOW_ENV, describeWillRun, planPhases, type WillRun } from './willrun.js';

export { readSupervisorState } from '../run/launchstate.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function stamp(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

function q(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** run.info: the real launcher's `key: value` lines, extended with everything needed to redo the run. */
export function runInfoText(plan: LaunchPlan, startedAt: Date): string {
  const lines = [
    `run_dir: ${plan.runDir}`,
    `profile: ${plan.profile}`,
    `trainer: ${plan.trainer}`,
    `started: ${startedAt.toISOString()}`,
    `cwd: ${plan.cwd}`,
    `command: ${plan.command.map(q).join(' ')}`,
    `config: ${plan.config ?? '(none)'}${plan.configWhy ? `  # ${plan.configWhy}` : ''}`,
    `gpus: ${plan.gpus.count} (max_mem=${plan.gpus.maxMemMiB ?? '?'}MB)${plan.gpus.error ? `  # ${plan.gpus.error}` : plan.gpus.source === 'none' ? '  # no nvidia-smi' : ''}`,
    `procs: ${plan.procs}${plan.masterPort ? ` (torchrun --master_port=${plan.masterPort})` : ''}`,
    `out_dir: ${plan.outDir}`,
    `git_commit: ${plan.gitCommit ?? '(not a git checkout)'}`,
    `restart: max_restarts=${plan.restart.max_restarts} backoff_s=${plan.restart.backoff_s} factor=${plan.restart.backoff_factor} max_s=${plan.restart.backoff_max_s}`,
    `stop: halt_grace_s=${plan.stop.halt_grace_s} sigint_grace_s=${plan.stop.sigint_grace_s}`,
  ];
  if (plan.smoke) lines.push(`smoke: ${plan.smoke.command.map(q).join(' ')}  # log ${plan.smoke.log}`);
  for (const [k, v] of Object.entries(plan.env).sort(([a], [b]) => (a < b ? -1 : 1))) lines.push(`env: ${k}=${q(v)}`);
  for (const w of plan.warnings) lines.push(`warning: ${w}`);
  return `${lines.join('\n')}\n`;
}

/**
 * `allow`: for a relaunch, the programs the operator confirmed by name (the supervisor checks the
 * plan it reads again, see willrun.ts); null for a launch, whose plan is the operator's profile.
 */
export function spawnSupervisor(
  runDir: string,
  resume: boolean,
  allow: readonly string[] | null,
  carried: readonly string[] = [],
  extraEnv: Record<string, string> = {},
): number {
  return spawnSelfDetached(['supervise', ...(resume ? ['--resume'] : [])], {
    root: runDir,
    log: `${NSA_DIR}/${SUPERVISOR_LOG}`,
    cwd: runDir,
    env: {
      [SUPERVISE_ENV]: runDir,
      ...(allow ? { [ALLOW_ENV]: allow.join('\n') } : {}),
      ...(carried.length ? { [CARRY_ENV]: carried.join('\n') } : {}),
      ...extraEnv,
    },
    what: 'the supervisor process',
  });
}

/** Waits until the supervisor has written its state (or has died trying). */
export async function awaitSupervisor(
  host: Host,
  runDir: string,
  pid: number,
  timeoutMs = 15000,
): Promise<SupervisorState | null> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const s = await readSupervisorState(host, runDir);
    if (s?.supervisor?.pid === pid) return s;
    try {
      process.kill(pid, 0);
    } catch {
      return readSupervisorState(host, runDir);
    }
    await sleep(100);
  }
  return null;
}

async function readSmall(host: Host, path: string): Promise<string | null> {
  try {
    return (await host.readFile(path, 4096)).toString('utf8');
  } catch {
    return null;
  }
}

/**
 * What a .HALT in `outDir` says, or null when there is none. One that is not a regular file (a
 * directory stops the real trainer too: it only asks whether the name exists) or cannot be read
 * still counts: it blocks a launch like a stale one.
 */
export async function haltText(host: Host, outDir: string): Promise<string | null> {
  const path = join(outDir, '.HALT');
  const st = await host.stat(path).catch(() => undefined);
  if (st === null) return null;
  if (st && !st.isFile) return `not a regular file: ${st.isDir ? 'a directory' : 'a special file'} — remove it by hand`;
  const text = await readSmall(host, path);
  return text ?? 'present but unreadable';
}

/** Why `prog` cannot be started from `cwd`, or null when it can. */
export async function missingProgram(host: Host, prog: string, cwd: string): Promise<string | null> {
  if (prog.includes('/')) {
    const st = await host.stat(prog.startsWith('/') ? prog : join(cwd, prog)).catch(() => null);
    return st?.isFile ? null : `${prog}: no such program`;
  }
  const r = await host.exec(['sh', '-c', 'command -v "$1"', 'sh', prog], { timeoutMs: 5000, cwd }).catch(() => null);
  if (r && r.code === 0 && r.stdout.trim()) return null;
  const hint =
    prog === 'python' || prog === 'torchrun'
      ? " (activate the trainer's venv first, e.g. source .venv/bin/activate, or set python:/torchrun: in the profile)"
      : '';
  return `${prog} is not on PATH${hint}`;
}

export interface LaunchOptions {
  profile: string;
  profilesFile?: string;
  cwd: string;
  steps?: number;
  extraArgs?: string[];
  /** the judge's verdict on an earlier run's request left in a shared out_dir (src/checks/carry.ts
   *  relaunchRequestFate, never carried by a launch); none: left as it is, claimed by no supervisor */
  judgeRequest?: RequestFateJudge;
}

/** Validates every `--inject SPEC` / `--inject=SPEC` of a reference trainer's arguments (InputError, exit 2). */
export function injectionsOf(args: readonly string[]): void {
  const end = args.indexOf('--');
  const words = end < 0 ? args : args.slice(0, end);
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    const spec = w === '--inject' ? words[++i] : w.startsWith('--inject=') ? w.slice('--inject='.length) : null;
    if (spec === null) continue;
    if (spec === undefined) throw new InputError('--inject needs a SPEC (e.g. hang@step=40). Nothing was started.');
    try {
      parseInjection(spec);
    } catch (e) {
      throw new InputError(`${(e as Error).message}. Nothing was started.`);
    }
  }
}

export async function launchRun(
  host: Host,
  opts: LaunchOptions,
): Promise<{ runDir: string; outDir: string; supervisorPid: number; requests: string[] }> {
  if (host.kind !== 'local')
    throw new InputError(
      'launch starts the supervisor on this machine: run `nsa-top launch` on the training box itself',
    );
  if (readOnlyMode()) throw new InputError(`launch refused: ${READ_ONLY_REFUSAL} (NSA_TOP_READ_ONLY=1)`);
  const actor = await currentActor(host);
  const cwd = resolve(opts.cwd);
  const file = await loadProfiles(host, opts.profilesFile);
  const profile = file.profiles[opts.profile];
  if (!profile)
    throw new InputError(
      `unknown profile '${opts.profile}' (known: ${Object.keys(file.profiles).join(', ')}; nsa-top profiles lists them)`,
    );
  // the reference trainer's --inject specs, read as it will read them: a bad one is refused here,
  // before a run dir exists — not by a trainer the supervisor would restart into the same error
  if (profile.trainer === 'reference') injectionsOf(opts.extraArgs ?? []);
  const gpus = await queryGpus(host);
  // like train_m7c_prime.sh: artifacts/train_runs/ next to the trainer's own artifacts
  const base = runDirBase(profile, cwd);
  // everything that can be checked before anything is created
  const tcwd = trainerCwd(profile, cwd);
  if (profile.trainer === 'nsa-vibe' && !profile.command) {
    const script = profile.script.startsWith('/') ? profile.script : join(tcwd, profile.script);
    if (!(await host.stat(script).catch(() => null))?.isFile)
      throw new InputError(
        `profile ${opts.profile}: ${script} not found — run from the nsa-vibe checkout or set repo: in the profile. Nothing was started.`,
      );
  }
  let configOutDir: string | null = null;
  if (profile.trainer === 'nsa-vibe' && !profile.out_dir) {
    const { config } = chooseConfig(profile, gpus);
    if (config) {
      const r = await readConfigOutDir(host, tcwd, config);
      if (r.error)
        throw new InputError(
          `profile ${opts.profile}: config ${r.error} — is the trainer repo right (repo: ${tcwd})? Nothing was started.`,
        );
      configOutDir = r.outDir;
    }
  }
  const program = resolveLaunchPlan({
    profileName: opts.profile,
    profile,
    presets: file.presets,
    gpus,
    runDir: join(base, 'probe'),
    cwd,
    configOutDir,
    steps: opts.steps,
  }).command[0]!;
  const missing = await missingProgram(host, program, tcwd);
  if (missing) throw new InputError(`profile ${opts.profile}: ${missing}. Nothing was started.`);
  await host.mkdirp(base);
  const started = new Date();
  let runDir = join(base, `${opts.profile}_${stamp(started)}`);
  for (let i = 2; ; i++) {
    try {
      mkdirSync(runDir); // exclusive: two launches in the same second get distinct dirs
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || i > 50) throw e;
      runDir = join(base, `${opts.profile}_${stamp(started)}-${i}`);
    }
  }
  const plan = resolveLaunchPlan({
    profileName: opts.profile,
    profile,
    presets: file.presets,
    gpus,
    runDir,
    cwd,
    configOutDir,
    steps: opts.steps,
    extraArgs: opts.extraArgs,
  });
  plan.gitCommit = await gitCommitOf(host, trainerRepo(plan));
  if (plan.outDir !== runDir) {
    // a shared out_dir (the real trainer's configs fix it): never two trainers writing into it
    const other = await resolveRunDirs(host, plan.outDir);
    if (other.supervised && other.runDir !== runDir) {
      const ost = await readSupervisorState(host, other.runDir);
      if (ost && supervisorInCharge(ost.state) && (await supervisorAlive(host, ost))) {
        try {
          rmdirSync(runDir); // still empty: nothing written yet
        } catch {
          /* keep it */
        }
        throw new InputError(
          `${plan.outDir} is being written by the run ${other.runDir} (supervisor pid ${ost.supervisor!.pid}, ${ost.state}): stop it first (nsa-top attach, h) — nothing was started`,
        );
      }
    }
  }
  await host.mkdirp(plan.outDir);
  writePlanLocal(runDir, plan);
  // the launcher dir was made just now (exclusive mkdir); the out_dir may be a fresh one
  await createOwn(host, runDir, 'run.info', runInfoText(plan, started), { fresh: true, launcher: true });
  if (plan.outDir !== runDir) {
    await writeOwnAtomic(
      host,
      plan.outDir,
      `${NSA_DIR}/run.json`,
      // the out_dir's identity: a copy of it keeps this file, and must not follow it (pointers.ts)
      `${JSON.stringify({ runDir, outDir: plan.outDir, outDirId: dirIdSync(plan.outDir), profile: plan.profile, started: started.toISOString() }, null, 2)}\n`,
      { fresh: true },
    );
  }
  const stale = { note: null as string | null };
  const settled: string[] = [];
  const rec = await audited(
    host,
    runDir,
    { actor, action: 'launch', target: { runDir, profile: plan.profile } },
    async (): Promise<Outcome> => {
      const halt = await haltText(host, plan.outDir);
      if (halt !== null) {
        const note = `stale .HALT in ${plan.outDir} ("${halt.trim()}"): the trainer would stop at step 1`;
        stale.note = note;
        writeStateLocal(runDir, {
          runDir,
          profile: plan.profile,
          supervisor: null,
          child: null,
          state: 'failed',
          restarts: 0,
          maxRestarts: plan.restart.max_restarts,
          exitCodes: [],
          lastCommand: [],
          resumeFrom: null,
          updatedAt: Date.now(),
          outDir: plan.outDir,
          phase: plan.smoke ? 'smoke' : 'train',
          note: `${note}; not started`,
        });
        return { result: 'refused', detail: `${note}; nothing started`, target: { halt: halt.trim() } };
      }
      // an earlier run's request in a shared out_dir is moot once nothing of that run runs: ended
      // (audited) so that it never halts this run
      if (opts.judgeRequest) {
        const reqs = await settleRequestsForRelaunch(host, await runDirsOf(host, runDir), actor, {
          carry: false,
          judgeRequest: opts.judgeRequest,
          by: 'launch',
        });
        settled.push(...reqs.settled.map((x) => `request ${x.line}`));
      }
      const pid = spawnSupervisor(runDir, false, null);
      const st = await awaitSupervisor(host, runDir, pid);
      const target = { outDir: plan.outDir, supervisorPid: pid, command: plan.command };
      if (st?.supervisor?.pid === pid)
        return {
          result: 'ok',
          detail: `profile ${plan.profile}: ${plan.command.join(' ')}${settled.map((l) => `; ${l}`).join('')}`,
          target,
        };
      return {
        result: 'failed',
        detail: `the supervisor did not come up; see ${join(nsaDir(runDir), SUPERVISOR_LOG)}`,
        target,
      };
    },
  );
  if (stale.note !== null)
    throw new InputError(
      `${stale.note}. Nothing was started (run dir ${runDir} prepared).\n` +
        `Check that no earlier run is still stopping, then: nsa-top relaunch ${runDir} --remove-stale-halt`,
      3,
    );
  const pid = rec.target.supervisorPid as number | undefined;
  if (rec.result !== 'ok' || pid === undefined)
    throw new InputError(
      pid === undefined
        ? `launch failed: ${rec.detail}`
        : `the supervisor (pid ${pid}) did not come up; see ${join(nsaDir(runDir), SUPERVISOR_LOG)}`,
      1,
    );
  return { runDir, outDir: plan.outDir, supervisorPid: pid, requests: settled };
}

/**
 * The supervisor's state plus whether its process is alive. `stale` = the file says it is active
 * but the process is gone (killed, machine rebooted): the run is not supervised any more.
 */
export async function supervisorStatus(
  host: Host,
  run: RunRef,
): Promise<{ state: SupervisorState | null; alive: boolean; stale: boolean }> {
  const state = await readSupervisorState(host, run);
  const alive = await supervisorAlive(host, state);
  return { state, alive, stale: supervisorInCharge(state?.state) && !alive };
}

/** The last `supervise: …` error line of the supervisor log, if any. */
async function supervisorError(host: Host, runDir: string): Promise<string | null> {
  const path = join(nsaDir(runDir), SUPERVISOR_LOG);
  const st = await host.stat(path).catch(() => null);
  if (!st) return null;
  const tail = (await host.readRange(path, Math.max(0, st.size - 4096)).catch(() => Buffer.alloc(0))).toString('utf8');
  const lines = tail.split('\n').filter((l) => l.startsWith('supervise: '));
  return lines.length ? lines[lines.length - 1]!.slice('supervise: '.length) : null;
}

/**
 * true when the recorded supervisor process is still the same process (pid + start time) and alive:
 * not a zombie — a SIGKILLed supervisor is one until it is reaped, and `stop` a second after the kill
 * relied on it ("the supervisor writes .HALT")
 */
export async function supervisorAlive(host: Host, st: SupervisorState | null): Promise<boolean> {
  if (!st?.supervisor || !st.supervisor.startTime) return false;
  return ownerAlive(host, st.supervisor).catch(() => false);
}

/**
 * After stop.json is written: the supervisor's word that it took the stop (its state `stopping`,
 * or `halted` when no trainer ran), within `ms` (it looks every 0.5 s). 'died' when it is no longer
 * alive meanwhile: nothing will write .HALT for this stop.
 */
async function supervisorTookStop(
  host: Host,
  runDir: string,
  st: SupervisorState,
  ms = 2500,
): Promise<'taken' | 'pending' | 'died'> {
  for (const until = Date.now() + ms; ;) {
    const now = await readSupervisorStateFile(host, runDir).catch(() => null);
    const s = now?.state;
    if (s && s.supervisor?.pid === st.supervisor?.pid && (s.state === 'stopping' || s.state === 'halted'))
      return 'taken';
    if (!(await supervisorAlive(host, st))) return 'died';
    if (Date.now() > until) return 'pending';
    await sleep(100);
  }
}

/** One line of an adopted run's preflight (src/checks/preflight.ts PreflightLine): a FAIL blocks the relaunch. */
export interface RelaunchCheck {
  check: string;
  status: 'PASS' | 'WARN' | 'FAIL' | 'INFO';
  text: string;
  fix?: string;
}

/**
 * The verdict on an adopted run's relaunch, handed down by the caller (src/checks/preflight.ts
 * judgeAdoption): the trainer gathers the facts, the judge decides. Without one an adopted run is
 * never relaunched.
 */
export type AdoptionJudge = (rec: AdoptionRecord, facts: AdoptionFacts) => RelaunchCheck[];

export interface RelaunchPrep {
  runDir: string;
  outDir: string;
  /** why a relaunch cannot work, with what to do instead (null: it can) */
  refusal: string | null;
  /** the run was started by hand: what nsa-top recorded while it ran */
  adopted: AdoptionRecord | null;
  /** an adopted run's preflight (a FAIL is the refusal) */
  preflight: RelaunchCheck[];
  /** the checkpoint the relaunch will resume from, and why (null: starts fresh, never ran) */
  pick: ResumePick | null;
  /** what will run (command, cwd, every variable set), to show before confirming (willrun.ts) */
  willRun: WillRun | null;
  /** a broken adoption record or plan: bad input, not a state of the run (the CLI exits 2) */
  badRecord?: string;
  /** pointer files not believed (a copy's, a planted one): named, not followed */
  notFollowed: string[];
  /**
   * the supervisor is gone and its trainer runs on: the relaunch starts a new supervisor that adopts
   * this process (nothing is restarted, no checkpoint is picked); null otherwise
   */
  readopt: { pid: number; startTime: string } | null;
}

/**
 * Everything a relaunch needs to know before anyone is asked to confirm it: can it work at all
 * (supervised, or adopted with a record), is anything still running, and which checkpoint it
 * resumes from and why. The CLI and the cockpit's dialog show this first.
 */
export async function prepareRelaunch(
  host: Host,
  run: RunRef,
  opts: {
    allowCommand?: readonly string[];
    judgeAdoption?: AdoptionJudge;
    /** `relaunch --steps N`: what will run is the recorded command with its --steps set to N */
    steps?: number;
  } = {},
): Promise<RelaunchPrep> {
  const stepped = <T extends { command: string[] }>(p: T): T =>
    opts.steps === undefined ? p : { ...p, command: withSteps(p.command, opts.steps).command };
  const dirs = await runDirsOf(host, run);
  const runDir = dirs.runDir;
  const outDir = dirs.outDir;
  const prep: RelaunchPrep = {
    runDir,
    outDir,
    refusal: null,
    adopted: null,
    preflight: [],
    pick: null,
    willRun: null,
    notFollowed: [],
    readopt: null,
  };
  const planRead = await readLaunchPlanFile(host, runDir);
  const plan = planRead.plan;
  const recRead = await readAdoptionFile(host, outDir);
  const rec = recRead.record;
  for (const p of [dirs.pointerProblem, planRead.problem, recRead.problem])
    if (p && !prep.notFollowed.includes(p)) prep.notFollowed.push(p);
  if (recRead.bad && !plan) {
    prep.badRecord = recRead.problem!;
    prep.refusal = recRead.problem!;
    return prep;
  }
  const st = plan ? await readSupervisorState(host, dirs) : null;
  // a run started by hand after the last supervised one (a shared out_dir): its command is the one to redo
  const handLaunchedSince =
    !!rec && !!plan && rec.recordedAt > (st?.updatedAt ?? 0) && !(await supervisorAlive(host, st));
  if (plan && !handLaunchedSince) {
    const supAlive = await supervisorAlive(host, st);
    if (supAlive && st && supervisorInCharge(st.state))
      prep.refusal = `the supervisor (pid ${st.supervisor!.pid}) is still ${st.state}: stop the run first`;
    else if (st?.child?.startTime && (await verifyProcess(host, st.child).catch(() => false))) {
      if (supAlive) {
        prep.refusal = `the trainer (pid ${st.child.pid}) is still running: stop it first`;
        return prep;
      }
      // its supervisor is gone and it runs on: relaunch() starts a new supervisor that adopts it
      // (never a second copy), which restarts it with the plan's command if it dies: the same check
      prep.readopt = st.child;
      prep.willRun = describeWillRun(planPhases(stepped({ ...plan, smoke: null })), { allow: opts.allowCommand });
      prep.refusal =
        prep.willRun.refusal &&
        `the trainer (pid ${st.child.pid}) runs unsupervised; a new supervisor would restart it with what is refused: ${prep.willRun.refusal}`;
      return prep;
    }
    const neverRan = (st?.exitCodes.length ?? 0) === 0 && !st?.child;
    if (!neverRan)
      prep.pick = await pickResumeCheckpoint(host, outDir, {
        logFiles: [...(plan.adopted?.stdout ? [plan.adopted.stdout] : []), join(runDir, 'train.log')],
      });
    prep.willRun = describeWillRun(planPhases(stepped(neverRan ? plan : { ...plan, smoke: null })), {
      allow: opts.allowCommand,
      resume: prep.pick?.found ? { flag: plan.resumeFlag, path: prep.pick.found.path } : null,
    });
    prep.refusal ??= prep.willRun.refusal && `what it would run is refused: ${prep.willRun.refusal}`;
    return prep;
  }
  prep.pick = await pickResumeCheckpoint(host, outDir, { logFiles: rec?.stdout ? [rec.stdout] : [] });
  if (!rec) {
    // a planted or copied launch.json is named, never run: it is why nothing can be relaunched
    const named = prep.notFollowed.length ? `${prep.notFollowed.join('; ')}. ` : '';
    prep.refusal = `${named}${notRecordedAdvice(outDir, prep.pick.found?.path ?? null)}`;
    return prep;
  }
  // (the GPUs are asked at the relaunch itself: they do not change what runs)
  const adoptedPlan = planFromAdoption(rec, '(a new run dir in .nsa-top/supervised/)', {
    count: 0,
    memTotalMiB: [],
    maxMemMiB: null,
    source: 'none',
    error: null,
  });
  prep.willRun = describeWillRun(planPhases(stepped(adoptedPlan)), {
    allow: opts.allowCommand,
    resume: prep.pick.found ? { flag: adoptedPlan.resumeFlag, path: prep.pick.found.path } : null,
  });
  prep.adopted = rec;
  if (!opts.judgeAdoption) {
    prep.refusal = 'an adopted run is relaunched only after its preflight, and none was given (nsa-top bug)';
    return prep;
  }
  prep.preflight = opts.judgeAdoption(rec, await settledAdoptionFacts(host, rec));
  const fails = prep.preflight.filter((l) => l.status === 'FAIL');
  if (fails.length)
    prep.refusal = `preflight: ${fails.map((l) => `${l.text}${l.fix ? ` (${l.fix})` : ''}`).join('; ')}`;
  else if (prep.willRun.refusal) prep.refusal = `what it would run is refused: ${prep.willRun.refusal}`;
  return prep;
}

/** What a relaunch does to a trainer whose supervisor died (RelaunchPrep.readopt), in one line. */
export function describeReadopt(r: { pid: number }): string {
  return `re-adopts the running trainer (pid ${r.pid}): a new supervisor watches it and restarts it if it dies; nothing is restarted now`;
}

/** One line: which checkpoint a relaunch resumes from, and why. */
export function describePick(pick: ResumePick | null): string {
  if (!pick) return 'first start (the run had never run)';
  if (!pick.found) return 'no complete checkpoint: from scratch';
  const f = pick.found;
  return `resuming from ${f.path} (step ${f.step}): ${f.why}`;
}

/**
 * An adopted run gets a launcher dir of its own inside its out_dir's .nsa-top/ (plan, run.info,
 * train.log, supervisor state) and the out_dir a pointer to it, like a launched real-trainer run.
 */
async function materializeAdopted(host: Host, rec: AdoptionRecord): Promise<string> {
  // .nsa-top/supervised/ inside the run: made (or found) as real directories, never through a link
  const base = ensureOwnDirsSync(rec.outDir, `${NSA_DIR}/supervised`);
  const started = new Date();
  let runDir = join(base, `${basename(rec.outDir)}_${stamp(started)}`);
  for (let i = 2; ; i++) {
    try {
      mkdirSync(runDir);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || i > 50) throw e;
      runDir = join(base, `${basename(rec.outDir)}_${stamp(started)}-${i}`);
    }
  }
  const plan = planFromAdoption(rec, runDir, await queryGpus(host));
  plan.gitCommit = await gitCommitOf(host, trainerRepo(plan));
  writePlanLocal(runDir, plan);
  await createOwn(host, runDir, 'run.info', runInfoText(plan, started), { fresh: true, launcher: true });
  writeJsonAtomic(rec.outDir, 'run.json', {
    runDir,
    outDir: rec.outDir,
    outDirId: dirIdSync(rec.outDir),
    profile: plan.profile,
    started: started.toISOString(),
    adoptedFrom: rec.launcher.pid,
  });
  return runDir;
}

/**
 * Starts the run again under a new supervisor, resuming from the newest complete checkpoint (the
 * newest weights: see pickResumeCheckpoint). A run nsa-top did not start is relaunched from what
 * was recorded while it ran (src/trainer/launch/adopt.ts), after its preflight. A .HALT present is
 * removed only with opts.removeStaleHalt (the operator confirmed), logged with its content;
 * otherwise the relaunch is refused and says how.
 */
export async function relaunch(
  host: Host,
  run: RunRef,
  actor: Actor,
  opts: ControlOptions & {
    removeStaleHalt: boolean;
    watchMs?: number;
    allowCommand?: readonly string[];
    judgeAdoption?: AdoptionJudge;
    /** train to this many steps (a FINISHED run is relaunched only with more: src/checks/actions.ts) */
    steps?: number;
    /** carry the old run's requests in force into the new supervisor (else a moot one is ended) */
    carryRequests?: boolean;
    /** the judge's verdict on each old request (src/checks/carry.ts relaunchRequestFate); none: each
     *  is left as it is (and the new supervisor claims none of them) */
    judgeRequest?: RequestFateJudge;
  },
): Promise<ActionRecord> {
  // resolved once (or handed down resolved): the record, the checks and the start read one run
  const dirs = await runDirsOf(host, run);
  return audited(
    host,
    dirs,
    { actor, action: 'relaunch', target: { runDir: dirs.runDir, outDir: dirs.outDir } },
    (ctx) => relaunchEffect(host, dirs, actor, opts, ctx),
    opts,
  );
}

async function relaunchEffect(
  host: Host,
  dirs: RunDirs,
  actor: Actor,
  opts: ControlOptions & {
    removeStaleHalt: boolean;
    watchMs?: number;
    allowCommand?: readonly string[];
    judgeAdoption?: AdoptionJudge;
    steps?: number;
    carryRequests?: boolean;
    judgeRequest?: RequestFateJudge;
  },
  ctx: AuditContext,
): Promise<Outcome> {
  let runDir = dirs.runDir;
  const outDir = dirs.outDir;
  /** an outcome; after an adopted run got its run dir, the record names that one */
  const mk = (result: ActionRecord['result'], detail: string, target: Record<string, unknown> = {}): Outcome => ({
    result,
    detail,
    target: { runDir, ...target },
  });
  if (host.kind !== 'local')
    return mk('refused', 'relaunch starts the supervisor on the training box: run `nsa-top relaunch` there');
  const prep = await prepareRelaunch(host, dirs, {
    allowCommand: opts.allowCommand,
    judgeAdoption: opts.judgeAdoption,
    ...(opts.steps !== undefined ? { steps: opts.steps } : {}),
  });
  // a supervised run whose supervisor is gone while its trainer runs on (its own session): a new
  // supervisor adopts it — never a second copy into the same out_dir
  const child = prep.readopt;
  if (child && !prep.refusal) {
    // its requests in force are this very trainer's: untouched (the new supervisor may carry them)
    const inForce = (await readRequests(host, dirs)).filter((r) => ACTIVE_REQUEST_STATES.includes(r.state));
    const reqNote = inForce
      .map((r) => `; request ${r.id} (${r.who.user}, ${r.state}): in force, its trainer still runs; untouched`)
      .join('');
    const pid = spawnSupervisor(runDir, true, opts.allowCommand ?? []);
    const up = await awaitSupervisor(host, runDir, pid);
    if (up?.supervisor?.pid !== pid) {
      const why = await supervisorError(host, runDir);
      return mk(
        'failed',
        `the trainer (pid ${child.pid}) still runs unsupervised, and a new supervisor (pid ${pid}) did not come up${why ? `: ${why}` : ''}`,
        { supervisorPid: pid },
      );
    }
    return mk(
      'ok',
      `re-adopted the running trainer (pid ${child.pid}): a new supervisor (pid ${pid}) watches it; nothing was restarted${reqNote}`,
      {
        supervisorPid: pid,
        adopted: child,
        ...(inForce.length ? { requests: inForce.map(({ id }) => ({ id, fate: 'keep' })) } : {}),
      },
    );
  }
  if (prep.refusal) return mk('refused', prep.refusal);
  const halt = await haltText(host, outDir);
  if (halt !== null) {
    if (!opts.removeStaleHalt)
      return mk(
        'refused',
        `.HALT present ("${halt.trim()}"): the trainer would stop at step 1. Confirm its removal: nsa-top relaunch ${runDir} --remove-stale-halt`,
        { halt: halt.trim() },
      );
    const rm = await removeStaleHalt(host, dirs, actor, opts);
    if (rm.result !== 'ok') return mk('failed', `could not remove .HALT: ${rm.detail}`);
  }
  if (prep.adopted) runDir = await materializeAdopted(host, prep.adopted);
  // --steps N: the plan's command trains to N from now on (every later restart too)
  let stepsNote = '';
  if (opts.steps !== undefined) {
    const plan = await readLaunchPlan(host, runDir);
    if (!plan) return mk('failed', `--steps ${opts.steps}: no launch plan to change in ${nsaDir(runDir)}`);
    const r = withSteps(plan.command, opts.steps);
    writePlanLocal(runDir, { ...plan, command: r.command });
    stepsNote = `; steps ${r.was ?? '(the config’s)'} → ${opts.steps}`;
  }
  try {
    await removeOwn(host, runDir, `${NSA_DIR}/${STOP_FILE}`);
  } catch {
    /* none */
  }
  // a run refused at launch (stale .HALT) never ran: its first start is a fresh one, like launch
  const pick = prep.pick;
  const hbPath = join(outDir, 'heartbeat_rank0.jsonl');
  const hbBefore = (await host.stat(hbPath).catch(() => null))?.size ?? 0;
  // the old run's requests: a moot one is ended (audited), never fired into the new run; carried
  // ones (--carry-requests) are the only older ones the new supervisor claims
  const reqs = await settleRequestsForRelaunch(host, dirs, actor, {
    ...opts,
    carry: !!opts.carryRequests,
    judgeRequest:
      opts.judgeRequest ??
      (() => ({ fate: 'keep', why: 'left as it is (no judge given); not claimed by the new supervisor' })),
  });
  const reqNote = reqs.settled.map((x) => `; request ${x.line}`).join('');
  const reqTarget = reqs.settled.length ? { requests: reqs.settled.map(({ id, fate }) => ({ id, fate })) } : {};
  // said before the new segment can boot, so every view puts the operator's relaunch before the
  // restart it causes (the result is known only once the trainer steps, seconds later)
  await ctx.progress('started', `starting a supervisor: ${describePick(pick)}`, { runDir });
  const pid = spawnSupervisor(runDir, pick !== null, opts.allowCommand ?? [], reqs.carried);
  const up = await awaitSupervisor(host, runDir, pid);
  if (up?.supervisor?.pid !== pid) {
    const why = await supervisorError(host, runDir);
    if (why && /another supervisor/.test(why))
      return mk('refused', `${why}: relaunched by someone else a moment ago`, { supervisorPid: pid });
    return mk(
      'failed',
      `the supervisor (pid ${pid}) did not come up${why ? `: ${why}` : ''}; see ${join(nsaDir(runDir), SUPERVISOR_LOG)}`,
      { supervisorPid: pid },
    );
  }
  const from = `${prep.adopted ? `adopted (started by hand: ${withoutResume(prep.adopted.launcher.argv).join(' ')}); ` : ''}${describePick(pick)}`;
  const extra = [
    ...(pick?.skipped.length ? [`skipped: ${pick.skipped.join('; ')}`] : []),
    ...(pick?.warnings ?? []).map((w) => `warning: ${w}`),
  ];
  // a trainer that dies at once (a usage error, a finished run) is a failed relaunch, not a success
  const watchUntil = Date.now() + (opts.watchMs ?? 4000);
  while (Date.now() < watchUntil) {
    const now = await readSupervisorState(host, runDir);
    if (
      now &&
      now.supervisor?.pid === pid &&
      ['backoff', 'failed'].includes(now.state) &&
      (now.exitCodes.length > (up.exitCodes?.length ?? 0) || now.state === 'failed')
    ) {
      const last = now.exitCodes.at(-1);
      return mk(
        'failed',
        `${from}; but the trainer exited at once (${now.lastCause ?? (last ? (last.signal ?? `exit ${last.code}`) : now.state)}): ${now.note ?? now.state}; see ${join(runDir, 'train.log')}`,
        {
          supervisorPid: pid,
          resumeFrom: pick?.found?.path ?? null,
          supervisorState: now.state,
        },
      );
    }
    // the trainer logged a training step since the relaunch (both trainers log step 1): it is training
    if (now?.state === 'running' && (await progressSince(host, hbPath, hbBefore))) break;
    await sleep(250);
  }
  return mk(
    'ok',
    `${from}${stepsNote}${extra.length ? `; ${extra.join('; ')}` : ''}${halt !== null ? `; removed .HALT ("${halt.trim()}")` : ''}${reqNote}`,
    {
      ...reqTarget,
      supervisorPid: pid,
      resumeFrom: pick?.found?.path ?? null,
      resumeStep: pick?.found?.step ?? null,
      resumeSegment: pick?.found?.segment ?? null,
      adopted: prep.adopted
        ? { launcherPid: prep.adopted.launcher.pid, recordedAt: prep.adopted.recordedAt }
        : undefined,
    },
  );
}

/** A trainer command with its `--steps` set to n (the last one given wins, as argparse reads it). */
export function withSteps(command: readonly string[], n: number): { command: string[]; was: string | null } {
  const out = [...command];
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i] === '--steps' && i + 1 < out.length) {
      const was = out[i + 1]!;
      out[i + 1] = String(n);
      return { command: out, was };
    }
    if (out[i]!.startsWith('--steps=')) {
      const was = out[i]!.slice('--steps='.length);
      out[i] = `--steps=${n}`;
      return { command: out, was };
    }
  }
  return { command: [...out, '--steps', String(n)], was: null };
}

/** Whether a `progress` heartbeat was appended to `path` after byte `from`. */
async function progressSince(host: Host, path: string, from: number): Promise<boolean> {
  const size = (await host.stat(path).catch(() => null))?.size ?? 0;
  if (size <= from) return false;
  const buf = await host.readRange(path, Math.max(from, size - 64 * 1024), size).catch(() => Buffer.alloc(0));
  return /"msg":\s*"progress"/.test(buf.toString('utf8'));
}

/**
 * Stop a run: .HALT → wait → SIGINT → SIGKILL. A live supervisor carries the escalation out (it
 * outlives the caller) and logs each step with this actor; without one, .HALT is written here and
 * the caller escalates with control.escalate() if the ranks do not stop.
 */
export async function stopRun(
  host: Host,
  run: RunRef,
  actor: Actor,
  /** escalating: the caller carries the escalation itself when no supervisor does (`nsa-top stop`) */
  opts: ControlOptions & { reason?: string; escalating?: boolean } = {},
): Promise<ActionRecord> {
  const dirs = await runDirsOf(host, run);
  const { runDir, pointerProblem } = dirs;
  return audited(
    host,
    dirs,
    { actor, action: 'halt', target: { runDir, ...(opts.reason ? { reason: opts.reason } : {}) } },
    async (): Promise<Outcome> => {
      const stRead = await readSupervisorStateFile(host, runDir);
      // a copy's (or a planted) pointer is never followed: the stop acts on this dir only, and says so
      const notFollowed = [pointerProblem, stRead.problem].filter((x): x is string => !!x);
      const said = notFollowed.length ? ` (${notFollowed.join('; ')})` : '';
      const st = stRead.state ? await readSupervisorState(host, dirs) : null;
      let unasked: string | null = null;
      // proven before anything relies on it: pid + start time, and not a zombie
      const live = !!st && supervisorRestarts(st.state) && (await supervisorAlive(host, st));
      if (live) {
        try {
          await writeOwnAtomic(
            host,
            runDir,
            `${NSA_DIR}/${STOP_FILE}`,
            `${JSON.stringify({ ts: Date.now(), who: actor, reason: opts.reason ?? 'stop requested' })}\n`,
          );
        } catch (e) {
          // a stop is a halt: a supervisor that cannot be asked (a tampered .nsa-top) does not block
          // it — .HALT is written here instead (fail open), and read-only still refuses below
          if (e instanceof ReadOnlyError) throw e;
          unasked = (e as Error).message;
        }
      }
      // the supervisor's word before ours: it takes a stop within its 0.5 s look, or it died meanwhile
      const took = st && live && unasked === null ? await supervisorTookStop(host, runDir, st) : null;
      if (st && (took === 'taken' || took === 'pending')) {
        const plan = await readLaunchPlan(host, runDir);
        const g = plan
          ? ` (SIGINT after ${dur(plan.stop.halt_grace_s)}, SIGKILL ${dur(plan.stop.sigint_grace_s)} later)`
          : '';
        const pid = st.supervisor!.pid;
        return {
          result: 'started',
          detail:
            took === 'taken'
              ? `stop requested: the supervisor (pid ${pid}) took it: it writes .HALT and escalates${g}; each step is logged`
              : `stop requested: the supervisor (pid ${pid}, alive) has not taken it up yet; when it does it writes .HALT and escalates${g}; each step is logged`,
          target: { supervisorPid: pid },
          unrecorded: 'the supervisor records each step of the stop (.HALT, SIGINT, SIGKILL) as this actor',
        };
      }
      const rec = await requestHalt(host, runDir, 'now', actor, opts);
      const sup = st?.supervisor ? `the supervisor (pid ${st.supervisor.pid})` : 'the supervisor';
      const escalateHint = opts.escalating
        ? 'this command escalates (SIGINT, then SIGKILL) if the ranks do not stop'
        : 'nothing escalates it: if the ranks do not stop, escalate (SIGINT, then SIGKILL)';
      return {
        result: rec.result,
        detail:
          unasked !== null
            ? `the supervisor could not be asked to stop (${unasked}): ${rec.detail}; it does not escalate this one: ${escalateHint}`
            : took === 'died'
              ? `${sup} died before it took the stop: nsa-top wrote .HALT itself (${rec.detail}); ${escalateHint}`
              : st && (supervisorRestarts(stRead.state!.state) || st.supervisorGone)
                ? `${sup} is not alive (pid + start time checked): nsa-top wrote .HALT itself (${rec.detail})${said}; ${escalateHint}`
                : `${rec.detail}; no live supervisor${said}: ${opts.escalating ? escalateHint : 'if the ranks do not stop, escalate (SIGINT, then SIGKILL)'}`,
        target: {
          ...rec.target,
          ...(took === 'died' || st?.supervisorGone ? { supervisorGone: st?.supervisor ?? null } : {}),
        },
        unrecorded: 'requestHalt recorded the .HALT itself',
      };
    },
    opts,
  );
}
