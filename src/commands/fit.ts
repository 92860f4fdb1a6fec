// The headless commands (`halt`, `stop`, `dump`, `relaunch`) refuse what the cockpit refuses, with
// the same words: the run is judged as `status` judges it (with its supervisor and requests), and the
// judge's actionVerdicts (src/checks/actions.ts) — the verdict the cockpit's keys read — says whether
// the action fits the run's state. A refusal is exit 3, like every refusal of these commands.
import {
  actionVerdicts,
  Checker,
  thresholdsFromEnv,
  type ActionVerdicts,
  type Evaluation,
  type Verdict,
} from '../checks/index.js';
import type { Host } from '../remote/host.js';
import { activeRequest, procRunning, type ActionKind } from '../trainer/control/types.js';
import { readRequests } from '../trainer/control/requests.js';
import { readSupervisorState } from '../trainer/launch/state.js';
import { openRunModel } from '../trainer/run/rundir.js';
import { judge, readLaunched, unjudgeable } from './judge.js';
import { report } from './control-cli.js';

/** The verdicts on the run's state; null when the dir cannot be judged (the action says why itself). */
export async function headlessVerdicts(
  host: Host,
  dir: string,
): Promise<{ verdicts: ActionVerdicts; ev: Evaluation } | null> {
  const { model, outDir, runDir } = await openRunModel(host, dir);
  const snap = await model.poll();
  if (unjudgeable(snap, outDir)) return null;
  const [supervisor, requests, launched] = await Promise.all([
    readSupervisorState(host, runDir).catch(() => null),
    readRequests(host, runDir).catch(() => []),
    readLaunched(host, runDir),
  ]);
  const j = await judge(host, outDir, model, snap, {
    checker: new Checker(thresholdsFromEnv(process.env)),
    gpu: null,
    launched,
    supervisor,
    requests,
  });
  const verdicts = actionVerdicts({
    runState: j.ev.runState,
    runStateWhy: j.ev.runStateWhy,
    ranksAlive: j.procs ? j.procs.ranks.filter((r) => procRunning(r.proc)).length : null,
    haltPresent: j.run.control.halt.present,
    requestActive: !!activeRequest(requests),
    supervisor,
  });
  return { verdicts, ev: j.ev };
}

/** The action's verdict, or null when it fits (or the run cannot be judged). */
export async function refusedByState(host: Host, dir: string, action: keyof ActionVerdicts): Promise<Verdict | null> {
  const v = await headlessVerdicts(host, dir);
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
