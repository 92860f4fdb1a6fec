// What a relaunch does with the durable requests (requests.json) of the run it starts again, and
// which of them a new supervisor may claim. Pure. A halt after checkpoint is made for the ranks that
// ran when it was asked: once nothing of that run runs it is moot, and a carrier that fires it into
// the relaunched run halts a run nobody asked to halt. So a relaunch ends it (audited), unless the
// operator asked to carry it into the new run; a request still in force while ranks run is untouched.
import { requestMoot } from './supervisor.js';

export type RelaunchFate = 'end' | 'carry' | 'keep';

/** The fate of one request in force (pending, or .HALT written) when its run is relaunched. */
export function relaunchRequestFate(x: {
  /** the operator asked to carry the run's requests into the relaunch (`--carry-requests`) */
  carry: boolean;
  /** the old run's process table was read (unknown: nothing is ended, nothing carried) */
  procsKnown: boolean;
  ranksAlive: number;
  launcherAlive: boolean;
}): { fate: RelaunchFate; why: string } {
  if (!x.procsKnown)
    return { fate: 'keep', why: "the run's processes could not be read: left as it is (no new supervisor claims it)" };
  if (x.ranksAlive > 0 || x.launcherAlive)
    return {
      fate: 'keep',
      why: `in force: ${x.ranksAlive > 0 ? `${x.ranksAlive} rank${x.ranksAlive === 1 ? '' : 's'}` : 'the launcher'} of its run still running; untouched`,
    };
  // the relaunch is the proof the run is over: nothing of it runs (requestMoot with ended: true)
  if (!requestMoot({ ended: true, procsKnown: true, ranksAlive: x.ranksAlive, launcherAlive: x.launcherAlive }))
    return { fate: 'keep', why: 'in force' };
  if (x.carry)
    return {
      fate: 'carry',
      why: 'carried into the relaunch as asked: .HALT once a complete checkpoint written after the request is there (one already there, e.g. the one it resumes from, halts the new run at once)',
    };
  return {
    fate: 'end',
    why: 'moot: its run ended and nothing of it runs; ended so that it cannot halt the new run',
  };
}

/**
 * May a new supervisor claim this request? Only one made after the supervisor started, one the
 * relaunch handed it (carried, by id), or — when it re-adopted the live trainer the request was made
 * for — one still in force for that very trainer. Never an old request of an earlier run.
 */
export function supervisorMayClaim(x: {
  requestTs: number;
  /** when this supervisor started (ms epoch, the same host clock the request was stamped with) */
  launchedAt: number;
  carried: boolean;
  adoptedLiveTrainer: boolean;
}): boolean {
  return x.requestTs >= x.launchedAt || x.carried || x.adoptedLiveTrainer;
}

/**
 * May an `nsa-top agent` claim a request nobody alive carries? Not while the run has a live
 * supervisor (pid + start time, not a zombie): the supervisor is its run's carrier and claims every
 * request of its run within a second (supervisorMayClaim), so one it leaves is an earlier run's —
 * kept by a relaunch or a launch that could not tell whether its run still ran — and an agent that
 * took it over would write .HALT into a run nobody asked to halt. Without a live supervisor (a run
 * started by hand, or one whose supervisor died) the agent is the carrier.
 */
export function agentMayClaim(x: {
  /** the run's supervisor, when it lives and carries requests (in charge) */
  supervisor: { pid: number } | null;
}): { ok: true } | { ok: false; why: string } {
  if (!x.supervisor) return { ok: true };
  return {
    ok: false,
    why: `the run's live supervisor (pid ${x.supervisor.pid}) carries its requests and did not claim this one (made before it started and not carried into it: an earlier run's)`,
  };
}
