// A run between processes: a supervised restart (the supervisor backing off, or its new trainer
// booting) or a launch whose ranks have not stepped yet. Neither is a stall or an ended run, so the
// state is RESTARTING / STARTING with the supervisor's own words and how long it has waited — until
// the boot outlasts what the run's own history says a boot takes (Thresholds.boot*), then STALLED.
// Pure.
import { dur } from '../format.js';
import type { Ctx } from './context.js';
import type { Draft, StallInfo } from './rules/index.js';
import { supervisorRestarts } from './control.js';
import { isToolProcess } from '../trainer/run/ranks.js';
import type { SupervisorState } from '../trainer/control/types.js';

export interface BootPhase {
  state: 'STARTING' | 'RESTARTING';
  /** ms epoch the wait is counted from (the trainer's start, else rank 0's boot); null: not known */
  since: number | null;
  /** seconds waited so far; null when `since` is not known */
  waitedS: number | null;
  /** how long a boot may take here, s, and why that long */
  budgetS: number;
  budgetWhy: string;
  /** the supervisor is backing off: no trainer runs, and the supervisor says when the next one starts */
  backoff: boolean;
  /** booting longer than the budget: the state is STALLED */
  over: boolean;
  /** ranks of the trainer before this boot whose process is gone: not dead ranks of this one */
  replaced: number[];
  /** one line, operator language: what is happening and for how long */
  text: string;
}

/** how long after a rank's death its launcher (torchrun) may take to end the group and exit, s */
export const TEARDOWN_S = 30;

/**
 * How long a boot may take: `bootFactor` × the longest boot (a `boot` record to the segment's first
 * step) of the run's earlier segments, never under `bootFloorS`; `bootFirstS` when none was measured.
 */
export function bootBudget(ctx: Ctx): { budgetS: number; why: string; measuredS: number | null } {
  const t = ctx.t;
  const boots = ctx.run.segments
    .filter((s) => s.bootTs != null && s.firstStepTs != null && s.firstStepTs >= s.bootTs)
    .map((s) => (s.firstStepTs! - s.bootTs!) / 1000);
  if (boots.length === 0)
    return {
      budgetS: t.bootFirstS,
      why: `no earlier boot measured: a first boot may take ${dur(t.bootFirstS)}`,
      measuredS: null,
    };
  const longest = Math.max(...boots.slice(-20));
  const budgetS = Math.max(t.bootFloorS, t.bootFactor * longest);
  return {
    budgetS,
    why: `allowed ${dur(budgetS)} = max(${dur(t.bootFloorS)}, ${t.bootFactor} × the ${dur(longest, 'precise')} the longest earlier boot took)`,
    measuredS: longest,
  };
}

/** The run has stepped after `ts` (ms epoch): rank 0, whose step is the run's (any rank without a
 *  rank-0 heartbeat). Another rank's first beat alone does not end a boot. */
function steppedSince(ctx: Ctx, ts: number): boolean {
  const r0 = ctx.ranks.filter((r) => r.rank === 0);
  return (r0.length ? r0 : ctx.ranks).some(
    (r) => r.lastStep !== null && r.stepAdvancedTs !== null && r.stepAdvancedTs > ts,
  );
}

/** The run is stopping on purpose (a .HALT, a NaN abort, metrics.json): not a boot. */
function stopping(ctx: Ctx): boolean {
  const c = ctx.run.control;
  const r0boot = ctx.freshLaunch?.since ?? ctx.ranks.find((r) => r.rank === 0)?.bootTs ?? null;
  const freshHalt = c.halt.present && !(c.halt.mtimeMs !== null && r0boot !== null && c.halt.mtimeMs < r0boot - 1000);
  return ctx.ended || freshHalt || c.anomaly?.type === 'nan_loss' || ctx.run.log.fatalNonFinite || ctx.run.log.haltSeen;
}

/**
 * The boot in progress, or null when the run is not between processes. A supervised restart: the
 * supervisor (alive) has seen the trainer exit and is backing off, starting, or running a new trainer
 * that has not stepped since. A launch: ranks (or the launcher) alive and no rank has stepped since
 * rank 0's boot. A stopped or dead rank is a fault, not a boot (the stall rules name it).
 */
export function bootPhase(ctx: Ctx, si: StallInfo): BootPhase | null {
  if (!ctx.run.exists || stopping(ctx) || si.stopped.length > 0) return null;
  const sup = ctx.in.supervisor ?? null;
  const driving = !!sup && !sup.supervisorGone && supervisorRestarts(sup.state);
  const lastExit = sup?.exitCodes.length ? sup.exitCodes[sup.exitCodes.length - 1]! : null;
  const r0 = ctx.ranks.find((r) => r.rank === 0) ?? null;
  // A rank "dead" whose last heartbeat predates this boot belongs to the trainer before it (its
  // replacement is not up yet, or not proven yet); a rank that died after it is a fault.
  const restarting = driving && !!lastExit && sup!.restarts > 0 && !steppedSince(ctx, lastExit.at);
  // A rank died while its launcher lives, under a supervisor with restarts left: torchrun ends the
  // rest of the group and exits (it looks every 0.1 s on torch 2.x, every 5 s on 1.x), then the
  // supervisor restarts it. Seen on an H100 (real trainer, torch 2.11): 2 s of STALLED with a
  // critical "rank 0 process is gone" before the supervisor's RESTARTING. A restart under way, not
  // a hang — for TEARDOWN_S after the dead rank's last beat; a launcher that has not ended the group
  // by then is not going to, and the dead rank is the hang it looks like.
  // Every rank gone and the launcher still up (torchrun has ended the group and is exiting: seen on
  // the CPU real trainer, one round of "RUNNING, rank processes not identified" between the two) is
  // the same teardown: every rank that wrote a heartbeat is the one being replaced — unless a
  // trainer-like process nsa-top could not prove lives (then the ranks may be alive, unidentified).
  const unidentified = (ctx.in.procs?.unknown ?? []).some(
    (p) => !isToolProcess(p) && p.state !== 'Z' && p.state !== 'X',
  );
  const allGone =
    ctx.procsKnown && ctx.alive.length === 0 && !unidentified && ctx.ranks.length > 0 && !ctx.ended
      ? ctx.ranks.map((r) => ({ rank: r.rank }))
      : [];
  const gone = si.dead.length > 0 ? si.dead : allGone;
  // Not a fresh launch (checks/context.ts): the ranks gone are the stopped run's, and every live
  // process of the run — its launcher among them — started after their last word (a relaunch's).
  if (
    driving &&
    !restarting &&
    !ctx.freshLaunch &&
    sup!.state === 'running' &&
    sup!.restarts < sup!.maxRestarts &&
    ctx.launcherAlive &&
    gone.length > 0
  ) {
    // the group's last sign of life: the newest beat of any rank (a rank of the real trainer without
    // NSA_HEARTBEAT_EVERY wrote only its boot record, minutes ago; the others block in the next
    // collective soon after it dies, so the run's newest beat bounds when the group broke)
    const lasts = ctx.ranks.map((r) => r.lastTs).filter((t): t is number => t !== null);
    const since = lasts.length ? Math.max(...lasts) : null;
    if (since !== null && ctx.now - since < TEARDOWN_S * 1000) {
      const dead = gone.map((d) => d.rank);
      return {
        state: 'RESTARTING',
        since,
        waitedS: Math.max(0, (ctx.now - since) / 1000),
        budgetS: TEARDOWN_S,
        budgetWhy: `a launcher ends its group within ${TEARDOWN_S} s of a rank's death`,
        backoff: false,
        over: false,
        replaced: dead,
        text: `rank ${dead.join(',')} process gone: the launcher (pid ${ctx.in.procs?.launcher?.pid ?? '?'}) ends the group and the supervisor (pid ${sup!.supervisor?.pid ?? '?'}) restarts it (${sup!.restarts} of ${sup!.maxRestarts} restarts used)`,
      };
    }
  }
  // (a launch whose processes have written nothing yet: the heartbeats in the dir are the old run's)
  const fresh = ctx.freshLaunch;
  const bootAt = restarting ? lastExit!.at : (fresh?.since ?? r0?.bootTs ?? null);
  const replaced: number[] = [];
  for (const d of si.dead) {
    const hb = ctx.ranks.find((r) => r.rank === d.rank);
    if (bootAt === null || d.rank === 0 || hb?.lastTs == null || hb.lastTs >= bootAt) return null;
    replaced.push(d.rank);
  }
  const budget = bootBudget(ctx);
  const anyAlive = ctx.procsKnown && (ctx.alive.length > 0 || ctx.launcherAlive);
  const waited = (since: number | null) => (since === null ? null : Math.max(0, (ctx.now - since) / 1000));
  const mk = (state: BootPhase['state'], since: number | null, backoff: boolean, head: string): BootPhase => {
    const w = waited(since);
    const over = !backoff && w !== null && w > budget.budgetS;
    const how = backoff
      ? w !== null
        ? `; waiting ${dur(w, 'precise')}`
        : ''
      : w !== null
        ? `; booting for ${dur(w, 'precise')}${over ? ` — longer than a boot takes here (${budget.why})` : ''}`
        : '';
    return {
      state,
      since,
      waitedS: w,
      budgetS: budget.budgetS,
      budgetWhy: budget.why,
      backoff,
      over,
      replaced,
      text: `${head}${how}`,
    };
  };

  // A supervised restart: the supervisor saw the trainer exit and restarts it.
  if (restarting && lastExit) {
    const exit = sup!.lastCause ?? lastExit.signal ?? `exit ${lastExit.code}`;
    const rank = causeRank(sup!, lastExit.at, crashedRank(ctx.run.log.lines));
    const cause = rank ? `${rank.text} (the trainer's ${exit}${rank.said})` : exit;
    if (sup!.state === 'backoff') {
      const left = sup!.backoffUntil != null ? Math.max(0, (sup!.backoffUntil - ctx.now) / 1000) : null;
      return mk(
        'RESTARTING',
        lastExit.at,
        true,
        `supervisor: ${sup!.note ?? `trainer failed (${exit}); restart ${sup!.restarts} of ${sup!.maxRestarts}`}${rank ? ` — ${rank.text}${rank.said}` : ''}${left !== null && left > 0 ? ` (due in ${dur(left, 'precise')})` : ''}`,
      );
    }
    // the new trainer's start: the newest start the supervisor recorded after that exit
    const started = (sup!.startCheckpoints ?? []).filter((s) => s.at >= lastExit.at).map((s) => s.at);
    const since = started.length ? Math.max(...started) : lastExit.at;
    return mk(
      'RESTARTING',
      since,
      false,
      `restart ${sup!.restarts} of ${sup!.maxRestarts} after ${cause}${sup!.note && !/^restart \d+ of \d+$/.test(sup!.note) ? ` (${sup!.note})` : ''}`,
    );
  }

  // The trainer is gone and its supervisor, alive and with restarts left, has not said so yet (it
  // records the exit, then backs off): a restart, not an ended run. With none left it gives up.
  const nothingAlive = ctx.procsKnown && ctx.alive.length === 0 && !ctx.launcherAlive;
  if (driving && sup!.state === 'running' && nothingAlive && ctx.ranks.length > 0 && sup!.restarts < sup!.maxRestarts)
    return mk(
      'RESTARTING',
      ctx.lastHeartbeatTs,
      true,
      `the trainer is gone; its supervisor (pid ${sup!.supervisor?.pid ?? '?'}) restarts it (${sup!.restarts} of ${sup!.maxRestarts} restarts used)`,
    );

  // A launch in progress: something of the run is alive and no rank has stepped since rank 0's boot.
  const supStarting = driving && sup!.state === 'starting';
  if (!anyAlive && !supStarting) return null;
  const noStepYet =
    ctx.ranks.length === 0 ||
    !!fresh ||
    (r0 !== null && r0.bootTs !== null && r0.lastStep === null && !steppedSince(ctx, r0.bootTs));
  if (!noStepYet) return null;
  const starts = sup && !sup.supervisorGone ? (sup.startCheckpoints ?? []).map((s) => s.at) : [];
  const since = fresh
    ? fresh.since
    : (r0?.bootTs ?? (starts.length ? Math.max(...starts) : null) ?? launcherStart(ctx) ?? earliestRankStart(ctx));
  const who = ctx.alive.length
    ? `rank(s) ${ctx.alive.map((r) => r.rank).join(',')} alive`
    : ctx.launcherAlive
      ? `launcher pid ${ctx.in.procs!.launcher!.pid} alive`
      : 'the supervisor is starting the trainer';
  return mk(
    'STARTING',
    since,
    false,
    `${who}, no step yet${fresh || r0?.bootTs == null ? ' (no boot record yet)' : ''}`,
  );
}

/**
 * The rank the supervisor saw go first (supervisor.json firstGone) when it belongs to the trainer
 * that exited at `exitAt`: seen after that trainer's start and no later than 5 s past its exit.
 * null: none seen, or it is an earlier trainer's (a file written by an older supervisor).
 */
export function firstGoneOf(sup: SupervisorState, exitAt: number): NonNullable<SupervisorState['firstGone']> | null {
  const g = sup.firstGone;
  const starts = (sup.startCheckpoints ?? []).map((s) => s.at).filter((at) => at <= exitAt);
  const since = starts.length ? Math.max(...starts) : -Infinity;
  return !g || g.at > exitAt + 5000 || g.at < since ? null : g;
}

/**
 * The rank to name for the last trainer's exit: the one the supervisor saw go first
 * (supervisor.json firstGone, by its own process looks) over the launcher's summary, which can name
 * the wrong one (torch 1.13's agent reports the first error file, and a rank killed outright writes
 * none: "exitcode 1 of rank 0" after rank 1 was SIGKILLed). Where the two differ the launcher's
 * words are kept as "torchrun says: …" (`said`, with its leading "; ").
 */
export function causeRank(
  sup: SupervisorState,
  exitAt: number,
  logged: { rank: number; how: string } | null,
): { rank: number; text: string; said: string } | null {
  const g = firstGoneOf(sup, exitAt);
  if (!g) return logged ? { rank: logged.rank, text: `${logged.how} of rank ${logged.rank}`, said: '' } : null;
  const agree = !!logged && logged.rank === g.rank;
  const how = g.how ?? (agree ? logged.how : null);
  const said = logged && !(agree && logged.how === how) ? `; torchrun says: ${logged.how} of rank ${logged.rank}` : '';
  const on = g.node !== undefined ? ` on node ${g.node}` : '';
  return { rank: g.rank, text: `rank ${g.rank}${on} went first${how ? ` (${how})` : ''}`, said };
}

/**
 * The rank whose death ended the last trainer, from its launcher's words in the log (the reference
 * launcher: "rank 1 (pid 123) exited with signal SIGKILL"; torchrun: "rank : 1" and "exitcode : -9"),
 * looked for only in the output of the trainer before the newest supervisor start.
 */
export function crashedRank(lines: readonly string[]): { rank: number; how: string } | null {
  let i = lines.length - 1;
  // past the new trainer's output, back to the supervisor's "trainer exited" line
  while (i >= 0 && !/\[nsa-top supervisor\] \S+ trainer exited:/.test(lines[i]!)) i--;
  let tRank: number | null = null;
  let tCode: number | null = null;
  for (; i >= 0; i--) {
    const l = lines[i]!;
    if (/\[nsa-top supervisor\] \S+ start:/.test(l)) break;
    const ref = /\brank (\d+) \(pid \d+\) exited with (?:signal (\w+)|code (-?\d+))/.exec(l);
    if (ref) return { rank: Number(ref[1]), how: ref[2] ?? `exit ${ref[3]}` };
    const tr = /^\s*rank\s*:\s*(\d+)/.exec(l);
    if (tr && tRank === null) tRank = Number(tr[1]);
    const tc = /^\s*exitcode\s*:\s*(-?\d+)/.exec(l);
    if (tc && tCode === null) tCode = Number(tc[1]);
  }
  if (tRank === null || tCode === null) return null;
  return { rank: tRank, how: tCode < 0 ? (SIGNAMES[-tCode] ?? `signal ${-tCode}`) : `exit ${tCode}` };
}

const SIGNAMES: Record<number, string> = { 2: 'SIGINT', 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };

function launcherStart(ctx: Ctx): number | null {
  return ctx.launcherAlive ? (ctx.in.procs!.launcher!.startedAtMs ?? null) : null;
}

function earliestRankStart(ctx: Ctx): number | null {
  const ts = ctx.alive.map((r) => r.proc.startedAtMs).filter((x): x is number => typeof x === 'number');
  return ts.length ? Math.min(...ts) : null;
}

/** Ids of the alerts a boot in progress makes untrue: nothing steps or lives yet, by design (and a
 *  rank of the trainer it replaces is gone, not dead). */
export function heldByBoot(boot: BootPhase, id: string): boolean {
  const died = /^rank-died:(\d+)$/.exec(id);
  if (died) return boot.replaced.includes(Number(died[1]));
  return id === 'stall:run' || id.startsWith('stall:rank') || id === 'exited';
}

/** A boot that outlasts its budget: critical, and the watchdog acts on it as on a stall. */
export function ruleBoot(boot: BootPhase | null): Draft[] {
  if (!boot?.over || boot.since === null) return [];
  const what = boot.state === 'RESTARTING' ? 'the restarted trainer' : 'the launch';
  return [
    {
      id: 'boot:overdue',
      rule: 'heartbeat-stall',
      severity: 'critical',
      title: `${what} has not stepped after ${dur(boot.waitedS, 'precise')} of boot`,
      detail: `${boot.text}; ${boot.budgetWhy}. A boot stuck in NCCL init, a data loader or a download never reaches step 1: dump the ranks (d), then halt`,
      since: boot.since + boot.budgetS * 1000,
      anomaly: 'heartbeat_stall',
    },
  ];
}
