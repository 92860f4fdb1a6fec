// The writers of <run>/.nsa-top/supervisor.json (SupervisorState) and <run>/.nsa-top/launch.json (the
// resolved LaunchPlan): written atomically (temp + rename) by the supervisor and launch, each with
// the run dir's identity (`dirId`). Their readers live a floor below, in run/launchstate.ts, where
// control/ and run/ read them too; everyone imports them from there.
import { join } from 'node:path';
import type { SupervisorState } from '../control/types.js';
import type { LaunchPlan } from './profiles.js';
import { writeOwnAtomicSync } from '../control/ownfiles.js';
import { NSA_DIR } from '../run/rundirs.js';
import { dirIdSync } from '../run/pointers.js';
import { PLAN_FILE, STATE_FILE } from '../run/launchstate.js';

/** how `nsa-top supervise` learns its run dir (kept out of argv, see launch.ts) */
export const SUPERVISE_ENV = 'NSA_TOP_SUPERVISE_RUN_DIR';

/** a multi-node relaunch's one checkpoint for every node ('' = none), for the supervisor's first start */
export const RESUME_FROM_ENV = 'NSA_TOP_RESUME_FROM';

export function nsaDir(runDir: string): string {
  return join(runDir, NSA_DIR);
}

/**
 * Local atomic write of <dir>/.nsa-top/<name>: readers never see a half-written file, and neither
 * .nsa-top nor the file is followed when it is a link (src/trainer/control/ownfiles.ts).
 */
export function writeJsonAtomic(dir: string, name: string, value: unknown): void {
  writeOwnAtomicSync(dir, `${NSA_DIR}/${name}`, `${JSON.stringify(value, null, 2)}\n`);
}

export function writeStateLocal(runDir: string, s: SupervisorState): void {
  writeJsonAtomic(runDir, STATE_FILE, { ...s, runDir, dirId: dirIdSync(runDir) });
}

/** The plan, with the identity of the dir it was written for (a copy's plan is not followed). */
export function writePlanLocal(runDir: string, plan: LaunchPlan): void {
  writeJsonAtomic(runDir, PLAN_FILE, { ...plan, dirId: dirIdSync(runDir) });
}
