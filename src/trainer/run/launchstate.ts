// <run>/.nsa-top/supervisor.json (SupervisorState) and <run>/.nsa-top/launch.json (the resolved
// LaunchPlan), read through a Host by anyone (control/ and run/ included, so they live on this
// floor; launch/state.ts writes them). Both carry the run dir's identity (`dirId`) and are believed
// only through pointers.ts: owned by the user, not group/world-writable, written for this very dir
// (a copy's are not followed).
import type { Host } from '../../remote/host.js';
import { parseStat, readProc, verifyProcess } from '../../remote/procs.js';
import { statLinesLocal } from '../../remote/local/procs.js';
import type { SupervisorState } from '../control/types.js';
import type { LaunchPlan } from '../launch/profiles.js';
import { NSA_DIR, runDirsOf, type RunRef } from './rundirs.js';
import { forThisDir, readOwnPointer, readPointerFile } from './pointers.js';
import { supervisorInCharge } from './phase.js';

export const STATE_FILE = 'supervisor.json';
export const PLAN_FILE = 'launch.json';
export const STOP_FILE = 'stop.json';
export const SUPERVISOR_LOG = 'supervisor.log';
export const LOCK_FILE = 'supervisor.lock';

/** supervisor.json as believed (see pointers.ts), or null and why not (null when absent). */
export async function readSupervisorStateFile(
  host: Host,
  runDir: string,
): Promise<{ state: SupervisorState | null; problem: string | null }> {
  const r = await readOwnPointer(host, runDir, STATE_FILE, 'runDir');
  const s = r.json as SupervisorState | null;
  if (!s || typeof s.state !== 'string') return { state: null, problem: r.problem };
  return { state: s, problem: null };
}

/**
 * The supervisor's state; `run` is the run resolved at the edge, or a dir still to resolve (the
 * launcher dir or the trainer's out_dir). A file that says
 * starting/running/backoff/stopping is believed only while its supervisor (pid + start time) lives:
 * a supervisor killed with SIGKILL never rewrites it, so a dead one reads as 'failed', with
 * `supervisorGone` and a note saying whether its trainer still runs (a relaunch re-adopts it).
 */
export async function readSupervisorState(host: Host, run: RunRef): Promise<SupervisorState | null> {
  const { runDir } = await runDirsOf(host, run);
  return supervisorLiveness(host, await readSupervisorFile(host, runDir), runDir);
}

/**
 * supervisor.json of a launcher dir as written (no liveness check; believed only when nsa-top wrote
 * it for this very dir: pointers.ts): cache it by the file's stat.
 */
export async function readSupervisorFile(host: Host, runDir: string): Promise<SupervisorState | null> {
  return (await readSupervisorStateFile(host, runDir)).state;
}

/** pid + start time, and not a zombie (a SIGKILLed supervisor is one until it is reaped: dead all the same) */
/** Whether the process (pid + start time) lives, not a zombie: one look every round can afford. */
export async function livesAs(host: Host, p: { pid: number; startTime: string }): Promise<boolean> {
  // locally its /proc/PID/stat alone, read in place: readProc would also read its cwd, status,
  // command line and environ through the thread pool, every round of a supervised run's cockpit
  const local = host.kind === 'local' && process.platform === 'linux' && Number.isInteger(p.pid) && p.pid > 0;
  const info = local ? parseStat(statLinesLocal([p.pid]).get(p.pid) ?? '') : await readProc(host, p.pid);
  return !!info && info.startTime === String(p.startTime) && info.state !== 'Z' && info.state !== 'X';
}

/**
 * The file's word checked against the process table: a state that says starting/running/backoff/
 * stopping is believed only while its supervisor (pid + start time) lives. Cheap enough to run on
 * every collection round (one /proc read locally, one command over SSH), so a SIGKILLed supervisor is
 * seen within a round although its file never changes again.
 */
export async function supervisorLiveness(
  host: Host,
  s: SupervisorState | null,
  runDir: string,
): Promise<SupervisorState | null> {
  if (!s) return null;
  if (supervisorInCharge(s.state) && s.supervisor && /^\d+$/.test(String(s.supervisor.startTime))) {
    if (!(await livesAs(host, s.supervisor).catch(() => true))) {
      const child = s.child?.startTime ? await verifyProcess(host, s.child).catch(() => false) : false;
      const was = s.state;
      return {
        ...s,
        state: 'failed',
        supervisorGone: true,
        note: child
          ? `the supervisor (pid ${s.supervisor.pid}) is gone (it said ${was}); its trainer (pid ${s.child!.pid}) still runs unsupervised — nsa-top relaunch ${runDir} re-adopts it`
          : `the supervisor (pid ${s.supervisor.pid}) is gone (it said ${was}), and so is its trainer`,
      };
    }
  }
  return s;
}

export async function readLaunchPlan(host: Host, runDir: string): Promise<LaunchPlan | null> {
  return (await readLaunchPlanFile(host, runDir)).plan;
}

/** launch.json as a plan, when believed (see pointers.ts); else null and why (null: absent, or an adoption record). */
export async function readLaunchPlanFile(
  host: Host,
  runDir: string,
): Promise<{ plan: LaunchPlan | null; problem: string | null }> {
  const r = await readPointerFile(host, runDir, PLAN_FILE);
  // an adoption record (src/trainer/launch/adopt.ts) shares the name in an out_dir: it is not a plan
  if (r.json?.kind === 'adopted') return { plan: null, problem: null };
  if (!r.json) return { plan: null, problem: r.problem };
  const p = r.json as unknown as LaunchPlan;
  if (p.version !== 1 || !Array.isArray(p.command) || !p.command.every((x) => typeof x === 'string'))
    return { plan: null, problem: `${r.path}: not a launch plan; not followed` };
  const why = await forThisDir(
    host,
    runDir,
    `${NSA_DIR}/${PLAN_FILE}`,
    p.runDir,
    (r.json as { dirId?: unknown }).dirId,
    'was written for another run',
  );
  return why ? { plan: null, problem: why } : { plan: p, problem: null };
}
