// Which actions fit the run's state, and why not when one does not: one verdict for the cockpit's
// keys (src/ui/keymap.ts, the halt dialog) and the headless commands (`nsa-top halt | stop | dump |
// relaunch`), so a script is refused what the cockpit refuses, with the same words. Read-only mode is
// refused earlier, by the action layer (src/trainer/control/audit.ts). Pure.
import type { SupervisorState } from '../trainer/control/types.js';
import { supervisorInCharge } from './control.js';
import { ENDED_STATES, LIVE_STATES } from './runstate.js';
import type { RunState } from './types.js';

export interface ActionInput {
  runState: RunState;
  runStateWhy: string;
  /** rank processes running (zombies excluded); null: the process table is not known */
  ranksAlive: number | null;
  /** a .HALT is in the run dir */
  haltPresent: boolean;
  /** a halt-after-checkpoint request is pending or under way (requests.json) */
  requestActive: boolean;
  supervisor: Pick<SupervisorState, 'state' | 'supervisor' | 'supervisorGone'> | null;
  /** seconds since the newest heartbeat record of any rank (null: none): a run that still writes one
   *  is not "nothing to halt", whatever the process table could prove */
  heartbeatAgeS?: number | null;
  /** the steps a FINISHED run trained (its total, else its last step; null: unknown) */
  stepsReached?: number | null;
  /** the total a relaunch asks for (`relaunch --steps N`; null: none asked) */
  relaunchSteps?: number | null;
}

/** a heartbeat younger than this keeps a halt on offer even when no rank process could be proven */
const FRESH_HEARTBEAT_S = 10;

/** Seconds since the newest heartbeat of any rank of a snapshot, at `nowMs` (null: none). */
export function newestHeartbeatAgeS(ranks: readonly { lastTs: number | null }[], nowMs: number): number | null {
  let newest: number | null = null;
  for (const r of ranks) if (r.lastTs !== null && (newest === null || r.lastTs > newest)) newest = r.lastTs;
  return newest === null ? null : Math.max(0, (nowMs - newest) / 1000);
}

/** ok, or refused with a short word (the footer's `off(…)`) and one line saying why. */
export interface Verdict {
  ok: boolean;
  short: string;
  why: string;
}

export interface ActionVerdicts {
  /** d, `nsa-top dump`: SIGUSR1 to every rank */
  dump: Verdict;
  /** h → n, `nsa-top halt`: write .HALT now (and, in the cockpit, track it and offer escalation) */
  haltNow: Verdict;
  /** h → c, `nsa-top halt --after-checkpoint`: .HALT once the next complete checkpoint is written */
  haltAfterCheckpoint: Verdict;
  /** `nsa-top stop`: the supervisor's .HALT → SIGINT → SIGKILL escalation */
  stop: Verdict;
  /** r, `nsa-top relaunch`: start the run again from its newest complete checkpoint */
  relaunch: Verdict;
}

const OK: Verdict = { ok: true, short: '', why: '' };
const no = (short: string, why: string): Verdict => ({ ok: false, short, why });

export function actionVerdicts(x: ActionInput): ActionVerdicts {
  const is = `the run is ${x.runState} (${x.runStateWhy})`;
  const dump = x.ranksAlive === 0 ? no('no ranks', `no rank process is running (the run is ${x.runState})`) : OK;

  let haltNow = OK;
  // a request in force, or a .HALT the ranks have not obeyed yet: h shows it (cancel, escalation)
  const writing = x.heartbeatAgeS != null && x.heartbeatAgeS < FRESH_HEARTBEAT_S;
  if (!x.requestActive && !(x.haltPresent && (x.ranksAlive ?? 0) > 0) && !writing && ENDED_STATES.has(x.runState))
    haltNow = no(x.runState, `${is}: nothing to halt`);

  let haltAfterCheckpoint = haltNow;
  if (haltAfterCheckpoint.ok && !x.requestActive) {
    if (x.runState === 'STALLED')
      haltAfterCheckpoint = no(
        'STALLED',
        `${is}: a stalled run writes no checkpoint, so "after the next checkpoint" would wait forever — halt now, then SIGINT/SIGKILL after the grace`,
      );
    else if (x.runState === 'HALTING' || x.haltPresent)
      haltAfterCheckpoint = no(
        'HALTING',
        `${x.haltPresent ? 'a .HALT is already in the run dir' : is}: the ranks stop at their next step, before any further checkpoint`,
      );
  }

  const stop = haltNow;

  const relaunch = relaunchVerdict(x, is);
  return { dump, haltNow, haltAfterCheckpoint, stop, relaunch };
}

/**
 * A FINISHED run that a relaunch would fit once it is given a step count past what it trained
 * (`relaunch --steps N`; the cockpit's r asks for N): `past` is the steps it trained (null: unknown).
 * null when no step count is wanted, or when one would not make the relaunch fit.
 */
export function relaunchWantsSteps(x: ActionInput): { past: number | null } | null {
  if (x.runState !== 'FINISHED' || x.relaunchSteps != null) return null;
  const is = `the run is ${x.runState} (${x.runStateWhy})`;
  if (relaunchVerdict(x, is).ok) return null;
  return relaunchVerdict({ ...x, relaunchSteps: Number.MAX_SAFE_INTEGER }, is).ok
    ? { past: x.stepsReached ?? null }
    : null;
}

function relaunchVerdict(x: ActionInput, is: string): Verdict {
  let relaunch = OK;
  // a trainer whose supervisor died runs on unsupervised: a relaunch re-adopts it (no second copy)
  const orphan = !!x.supervisor?.supervisorGone && (x.ranksAlive ?? 0) > 0;
  if (LIVE_STATES.has(x.runState) && !orphan)
    relaunch = no(x.runState, `${is}: relaunch stops nothing — halt it first`);
  else if (
    x.runState === 'FINISHED' &&
    !(x.relaunchSteps != null && (x.stepsReached == null || x.relaunchSteps > x.stepsReached))
  ) {
    // the trainer would resume at its last step, find nothing left to train and exit: every
    // restart of the supervisor burnt on a run that is done
    const n = x.stepsReached != null ? ` (N > ${x.stepsReached})` : '';
    relaunch = no(
      'FINISHED',
      x.relaunchSteps != null
        ? `${is}: --steps ${x.relaunchSteps} is not past the ${x.stepsReached} steps it trained — ask for more${n}`
        : `${is}: it trained all its steps — a relaunch would stop at once; train longer with: nsa-top relaunch RUN_DIR --steps N${n}`,
    );
  } else if (x.supervisor && !x.supervisor.supervisorGone && supervisorInCharge(x.supervisor.state))
    relaunch = no(
      `supervisor ${x.supervisor.state}`,
      `its supervisor (pid ${x.supervisor.supervisor?.pid ?? '?'}) is ${x.supervisor.state}${x.supervisor.state === 'backoff' ? ': it restarts the trainer itself' : ''}`,
    );

  return relaunch;
}
