// The supervisor and durable requests on screen: judgements on .nsa-top/supervisor.json (restarts,
// backoff, giving up, restart storms, restarts that do not move the checkpoint forward — the
// detectors nvrx-watch has) and the control request in force (requests.json). Pure.
import { clock, dur } from '../format.js';
import { activeRequest, supervisorInCharge, supervisorRestarts } from './control.js';
import { firstGoneOf } from './boot.js';
import type { Ctx } from './context.js';
import type { Draft } from './rules/index.js';
import type { SupervisorState } from '../trainer/control/types.js';

/** exits within this window count towards a restart storm */
export const STORM_WINDOW_MS = 10 * 60_000;
/** this many trainer exits within STORM_WINDOW_MS is a storm */
export const STORM_EXITS = 3;
/** this many consecutive starts from the same checkpoint (path and mtime) is "not advancing" */
export const NO_PROGRESS_STARTS = 3;

/**
 * An alert that makes others untrue at once, not after hysteresis: once the supervisor is known dead,
 * "supervisor restarted the trainer" (or its backoff) is not a condition that is clearing, it is
 * wrong — an open cockpit must not keep saying it beside the critical.
 */
export const SUPERSEDES: Readonly<Record<string, readonly string[]>> = {
  'supervisor:dead': ['supervisor:restarted', 'supervisor:backoff', 'supervisor:gave-up'],
};

/**
 * The supervisor the judge weighs for a run launched on several nodes (`launch --node`: one
 * supervisor per node, each read on its own node): the one that most needs the operator — gone
 * (pid + start time checked on its node), then given up, then restarting, then stopping, then
 * running — with its note and pid naming the node ("node B: …"), so a dead supervisor on node B is
 * the same critical as on one host. null when no node's supervisor has a state (a node out of reach
 * is the view's STALE, not the supervisor's).
 */
export function nodesSupervisor(
  sups: readonly { label: string; state: SupervisorState | null }[],
): SupervisorState | null {
  const weight = (s: SupervisorState) =>
    s.supervisorGone
      ? 0
      : s.state === 'failed'
        ? 1
        : s.state === 'backoff' || s.state === 'starting'
          ? 2
          : s.state === 'stopping'
            ? 3
            : s.state === 'running'
              ? 4
              : 5;
  const known = sups.filter((x): x is { label: string; state: SupervisorState } => x.state !== null);
  if (known.length === 0) return null;
  const pick = known.reduce((a, b) => (weight(b.state) < weight(a.state) ? b : a));
  if (known.length === 1) return pick.state;
  const st = pick.state;
  return { ...st, firstGone: nodesFirstGone(known), note: `node ${pick.label}: ${st.note ?? st.state}` };
}

// signals a launcher sends the rest of its ranks once one failed (src/trainer/launch/rankwatch.ts)
const CLOSING = new Set(['SIGTERM', 'SIGINT', 'SIGHUP']);

/**
 * The rank that went first over all nodes: each node's supervisor sees only its own ranks, so after
 * kill -9 of rank 1 on node B, node A's saw rank 0 go (exit 1, its collective broken) — a little
 * later. Of each node's first-gone rank of its last exit: the only one a hard signal ended, else
 * the earliest (each by its own node's clock), named with its node.
 */
function nodesFirstGone(
  known: readonly { label: string; state: SupervisorState }[],
): NonNullable<SupervisorState['firstGone']> | null {
  const seen = known.flatMap(({ label, state }) => {
    const last = state.exitCodes.at(-1);
    const g = last ? firstGoneOf(state, last.at) : null;
    return g ? [{ ...g, node: label }] : [];
  });
  if (!seen.length) return null;
  const hard = seen.filter((g) => g.how !== null && !g.how.startsWith('exit') && !CLOSING.has(g.how));
  return hard.length === 1 ? hard[0]! : seen.reduce((a, b) => (b.at < a.at ? b : a));
}

/** The alerts an alert makes untrue at once: SUPERSEDES, and a moot request's orphan critical. */
export function supersededBy(id: string): readonly string[] {
  if (id.startsWith('request-moot:')) return [`request-orphan:${id.slice('request-moot:'.length)}`];
  if (id.startsWith('request-unclaimed:')) return [`request-orphan:${id.slice('request-unclaimed:'.length)}`];
  return SUPERSEDES[id] ?? [];
}

/**
 * The run has ended and nothing of it runs: metrics.json written after the last heartbeat (HALTED,
 * FINISHED), and — where the process table is known — no rank and no launcher alive. A halt request
 * is then moot; while a rank runs, it is still in force.
 */
function runOver(ctx: Ctx): boolean {
  return requestMoot({
    ended: ctx.ended,
    procsKnown: ctx.procsKnown,
    ranksAlive: ctx.alive.length,
    launcherAlive: ctx.launcherAlive,
  });
}

/**
 * A halt request is moot once its run has ended and nothing of it runs (see runOver): the judge
 * closes its orphan critical, and no observer hands it to a new carrier (src/cockpit/observe.ts).
 */
export function requestMoot(x: {
  ended: boolean;
  procsKnown: boolean;
  ranksAlive: number;
  launcherAlive: boolean;
}): boolean {
  return x.ended && (!x.procsKnown || (x.ranksAlive === 0 && !x.launcherAlive));
}

function cause(c: { code: number | null; signal: string | null }): string {
  return c.signal ?? `exit ${c.code}`;
}

/** `hung`: the evidence says the run does not advance (StallInfo.hung): no checkpoint will come */
export function ruleSupervisor(ctx: Ctx, hung = false): Draft[] {
  const out: Draft[] = [];
  const sup = ctx.in.supervisor;
  if (sup) {
    const last = sup.exitCodes.length ? sup.exitCodes[sup.exitCodes.length - 1]! : null;
    const lastCause = sup.lastCause ?? (last ? cause(last) : null);
    const budget = `${sup.restarts} of ${sup.maxRestarts} restart${sup.maxRestarts === 1 ? '' : 's'} used`;
    if (sup.supervisorGone) {
      // killed outright (SIGKILL, OOM killer): its file still says it runs, and nothing will restart a crash
      out.push({
        id: 'supervisor:dead',
        rule: 'supervisor',
        severity: ctx.ended ? 'warning' : 'critical',
        title: `supervisor dead (pid ${sup.supervisor?.pid ?? '?'} gone): crashes will not be restarted`,
        // no `since` from the file: it was written when the supervisor last changed state, not when it
        // died (nothing tells that); the alert runs from the round that found it gone
        detail: `${sup.note ?? ''}${sup.note ? '. ' : ''}its state file was last written at ${clock(sup.updatedAt)}; ${budget}${lastCause ? `; last exit: ${lastCause}` : ''}. nsa-top relaunch RUN (or attach) starts a new supervisor, which re-adopts a live trainer.`,
      });
    } else if (sup.state === 'failed') {
      out.push({
        id: 'supervisor:gave-up',
        rule: 'supervisor',
        severity: 'critical',
        title: `supervisor gave up: ${sup.note ?? 'the trainer failed'}`,
        detail: `${budget}${lastCause ? `; last exit: ${lastCause}` : ''}. Nothing is training. Fix the cause, then relaunch (r, or nsa-top relaunch).`,
        since: sup.updatedAt,
      });
    } else if (sup.state === 'backoff') {
      const left = sup.backoffUntil ? Math.max(0, Math.round((sup.backoffUntil - ctx.now) / 1000)) : null;
      out.push({
        id: 'supervisor:backoff',
        rule: 'supervisor',
        severity: 'warning',
        title: `trainer ${lastCause ? `failed (${lastCause})` : 'failed'}: restart ${sup.restarts} of ${sup.maxRestarts}${left !== null ? ` in ${dur(left)}` : ''}`,
        detail: `${sup.note ?? ''}${sup.backoffUntil ? ` (due ${clock(sup.backoffUntil)})` : ''}`.trim(),
        since: last?.at ?? sup.updatedAt,
      });
    } else if (sup.restarts > 0 && (sup.state === 'running' || sup.state === 'starting')) {
      out.push({
        id: 'supervisor:restarted',
        rule: 'supervisor',
        severity: 'info',
        title: `supervisor restarted the trainer: ${budget}`,
        detail:
          `${lastCause ? `last exit: ${lastCause}` : ''}${sup.resumeFrom ? `; resumed from ${sup.resumeFrom}` : ''}`.replace(
            /^; /,
            '',
          ),
        since: last?.at ?? sup.updatedAt,
      });
    }
    // restart storm: many exits in a short window (only failures count: exit 0 ends supervision)
    const recent = sup.exitCodes.filter(
      (e) => ctx.now - e.at <= STORM_WINDOW_MS && !(e.code === 0 && e.signal === null),
    );
    if (recent.length >= STORM_EXITS) {
      out.push({
        id: 'supervisor:storm',
        rule: 'supervisor',
        severity: 'warning',
        title: `restart storm: the trainer failed ${recent.length} times in ${dur(STORM_WINDOW_MS / 1000)}`,
        detail: `exits: ${recent.map((e) => `${clock(e.at)} ${cause(e)}`).join(', ')} — restarting does not fix this; look at train.log`,
        since: recent[0]!.at,
      });
    }
    // restarts that resume from the same checkpoint every time: no training survives between them
    const starts = sup.startCheckpoints ?? [];
    if (starts.length >= NO_PROGRESS_STARTS) {
      const tail = starts.slice(-NO_PROGRESS_STARTS);
      const first = tail[0]!;
      if (tail.every((x) => x.path === first.path && x.mtimeMs === first.mtimeMs)) {
        let n = 0;
        for (
          let i = starts.length - 1;
          i >= 0 && starts[i]!.path === first.path && starts[i]!.mtimeMs === first.mtimeMs;
          i--
        )
          n++;
        out.push({
          id: 'supervisor:no-progress',
          rule: 'supervisor',
          severity: 'warning',
          title: `${n - 1} restarts without the checkpoint advancing`,
          detail: `every start since ${clock(first.at)} resumed from ${first.path ?? 'no checkpoint (from scratch)'}: the trainer dies before its next save`,
          since: first.at,
        });
      }
    }
  }
  const req = activeRequest(ctx.in.requests);
  if (req) {
    const owner = req.owner ? `${req.owner.kind} pid ${req.owner.pid}` : 'no owner yet';
    if (req.owner && ctx.in.requestOwnerAlive === false && runOver(ctx)) {
      // nothing will write .HALT, and nothing is left to halt: closed as moot, saying why (its
      // orphan critical goes to the timeline at once: supersededBy)
      out.push({
        id: `request-moot:${req.id}`,
        rule: 'request',
        severity: 'info',
        title: `the halt request of ${req.who.user} is moot: the run ended before it fired (nothing left to halt)`,
        detail: `its carrier (${owner}) is gone and the run has stopped: metrics.json was written after the last heartbeat${ctx.procsKnown ? ' and no rank or launcher process runs' : ''}. It stays in requests.json as ${req.state}; nsa-top halt RUN --cancel clears it`,
        since: req.updatedAt,
      });
      return out;
    }
    // its carrier died and the run has a live supervisor of its own that did not claim it: an
    // earlier run's request, which no agent takes over (agentMayClaim) — it will not fire
    const live = ctx.in.supervisor;
    if (
      req.owner &&
      ctx.in.requestOwnerAlive === false &&
      live?.supervisor &&
      !live.supervisorGone &&
      supervisorRestarts(live.state) &&
      (live.supervisor.pid !== req.owner.pid || live.supervisor.startTime !== req.owner.startTime)
    ) {
      out.push({
        id: `request-unclaimed:${req.id}`,
        rule: 'request',
        severity: 'warning',
        title: `the halt request of ${req.who.user} (${clock(req.ts)}) will not fire: its carrier (${owner}) is gone and the run's supervisor (pid ${live.supervisor.pid}) does not carry it`,
        detail: `the supervisor claims only requests made after it started or carried into it (relaunch --carry-requests): this one is an earlier run's, and no agent takes it over. nsa-top halt RUN --cancel clears it; nsa-top halt RUN --after-checkpoint asks anew for this run`,
        since: req.updatedAt,
      });
      return out;
    }
    if (req.owner && ctx.in.requestOwnerAlive === false) {
      out.push({
        id: `request-orphan:${req.id}`,
        rule: 'request',
        severity: 'critical',
        title: `the halt request of ${req.who.user} has lost its carrier (${owner} is gone): nothing will write .HALT`,
        detail: `a live cockpit or watchdog on the training box hands it to a new agent within a round, as does nsa-top halt RUN --after-checkpoint; h then x, or nsa-top halt RUN --cancel, drops it`,
        since: req.updatedAt,
      });
      return out;
    }
    if (req.state === 'pending' && hung) {
      const stopEscalates = !!sup && !sup.supervisorGone && supervisorInCharge(sup.state);
      // a hung run writes no checkpoint: the request waits for one that will not come
      out.push({
        id: `request:${req.id}`,
        rule: 'request',
        severity: 'warning',
        title: `the halt after the next checkpoint requested by ${req.who.user} at ${clock(req.ts)} cannot fire: the run is stalled and writes no checkpoint`,
        // the way that escalates: `nsa-top halt` writes .HALT only; the supervisor's stop and the
        // cockpit's halt window go on to SIGINT and SIGKILL
        detail: `${req.note} (carried by ${owner}). Halt now instead (h → n${stopEscalates ? ', or nsa-top stop RUN: the supervisor writes .HALT, then SIGINT, then SIGKILL after the grace' : ': its halt window offers SIGINT, then SIGKILL, after the grace; nsa-top halt RUN writes .HALT only'}): a hung rank may never see .HALT; x in the halt window, or nsa-top halt RUN --cancel, drops the request`,
        since: req.ts,
      });
      return out;
    }
    out.push({
      id: `request:${req.id}`,
      rule: 'request',
      severity: 'info',
      title:
        req.state === 'pending'
          ? `halt after the next checkpoint requested by ${req.who.user} at ${clock(req.ts)}`
          : `halting: ${req.note}`,
      detail: `${req.note} (carried by ${owner}; h shows it and can cancel it, or nsa-top halt RUN --cancel)`,
      since: req.ts,
    });
  }
  return out;
}
