// The headless commands (`halt`, `stop`, `dump`, `relaunch`) refuse what the cockpit refuses, with
// the same words: the run is judged as `status` judges it (with its supervisor and requests), and the
// judge's actionVerdicts (src/checks/actions.ts) — the verdict the cockpit's keys read — says whether
// the action fits the run's state. A refusal is exit 3, like every refusal of these commands.
import {
  actionVerdicts,
  Checker,
  newestHeartbeatAgeS,
  thresholdsFromEnv,
  unjudgeable,
  type ActionVerdicts,
  type Evaluation,
  type Verdict,
} from '../checks/index.js';
import type { Host } from '../remote/host.js';
import type { ActionKind } from '../trainer/control/types.js';
import { activeRequest, procRunning } from '../checks/control.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import { resolveRunDirsAt } from '../trainer/run/rundir.js';
import { Observer } from '../cockpit/observe.js';
import type { RunProcesses } from '../remote/types.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { report } from './control-cli.js';

/** The verdicts on the run's state; null when the dir cannot be judged (the action says why itself). */
export async function headlessVerdicts(
  host: Host,
  dir: string | RunDirs,
  /** nodes: a multi-node run (--node), every node's ranks in the one observation */
  o: { relaunchSteps?: number | null; nodes?: NodeProcesses } = {},
): Promise<{ verdicts: ActionVerdicts; ev: Evaluation; procs: RunProcesses | null } | null> {
  const dirs = typeof dir === 'string' ? await resolveRunDirsAt(host, dir) : dir;
  // the one observation every surface judges (supervisor with its liveness, requests, CPU count, grace)
  const obs = await new Observer(host, {
    dirs,
    checker: new Checker(thresholdsFromEnv(process.env)),
    ...(o.nodes ? { nodes: o.nodes } : {}),
  }).judged();
  if (unjudgeable(obs.run, dirs.outDir)) return null;
  const ev = obs.ev;
  const verdicts = actionVerdicts({
    runState: ev.runState,
    runStateWhy: ev.runStateWhy,
    ranksAlive: obs.procs ? obs.procs.ranks.filter((r) => procRunning(r.proc)).length : null,
    haltPresent: obs.run.control.halt.present,
    requestActive: !!activeRequest(obs.requests),
    supervisor: obs.supervisor,
    heartbeatAgeS: newestHeartbeatAgeS(obs.run.ranks, obs.input.now),
    stepsReached: obs.run.totalSteps ?? obs.run.step,
    relaunchSteps: o.relaunchSteps ?? null,
  });
  return { verdicts, ev, procs: obs.procs };
}

/** The action's verdict, or null when it fits (or the run cannot be judged). */
export async function refusedByState(
  host: Host,
  dir: string | RunDirs,
  action: keyof ActionVerdicts,
  o: { relaunchSteps?: number | null; nodes?: NodeProcesses } = {},
): Promise<Verdict | null> {
  const v = await headlessVerdicts(host, dir, o);
  return v && !v.verdicts[action].ok ? v.verdicts[action] : null;
}

/** Prints a state refusal the way the command prints any outcome (nothing is logged: nothing was
 *  done, as when the cockpit's key is off); returns its exit code (3). */
export function reportRefusal(
  cmd: string,
  json: boolean,
  o: { action: ActionKind; runDir: string },
  v: Verdict,
): number {
  return report(cmd, json, {
    action: o.action,
    target: { runDir: o.runDir, state: v.short },
    result: 'refused',
    detail: v.why,
  });
}
