// RunState is a judgement, so it is derived here from the same context the rules use.
// Order of evidence: liveness first (a run with a living rank is never HALTED/FINISHED/EXITED, even
// when metrics.json is written), then whether it advances (a stopped, dead or overdue rank leaves
// RUNNING at once: the watchdog's 180 s floor governs what it does, not what the operator sees).
import { isToolProcess } from '../trainer/run/ranks.js';
import type { BootPhase } from './boot.js';
import type { Ctx } from './context.js';
import { exitHang, oddRankFromDumps, oddRankFromGpus, overdueAfterS, type StallInfo } from './rules/index.js';
import { onHost } from './rules/processes.js';
import { clock, dur } from '../format.js';
import type { Culprit, Health, RunState } from './types.js';

export interface StateVerdict {
  state: RunState;
  why: string;
  /** the rank to look at when the evidence names one (stopped, dead, lagging, a dump) */
  culprit: Culprit | null;
}

/** A run some process still drives (the trainer may be stuck, but it is there). */
export const LIVE_STATES: ReadonlySet<RunState> = new Set(['STARTING', 'RESTARTING', 'RUNNING', 'STALLED', 'HALTING']);
/** A run between processes, by design: a launch or a supervised restart booting (checks/boot.ts). */
export const BOOT_STATES: ReadonlySet<RunState> = new Set(['STARTING', 'RESTARTING']);
/** A run that is over: no rank lives (STALE says nothing either way). */
export const ENDED_STATES: ReadonlySet<RunState> = new Set(['FINISHED', 'HALTED', 'EXITED', 'NO TRAINER']);

/** How each state is to be shown (the UI maps it to a colour). */
export const STATE_HEALTH: Record<RunState, Health> = {
  STARTING: 'info',
  RESTARTING: 'info',
  RUNNING: 'ok',
  STALLED: 'critical',
  HALTING: 'warning',
  HALTED: 'warning',
  EXITED: 'critical',
  FINISHED: 'ok',
  'NO TRAINER': 'critical',
  STALE: 'warning',
};

const STATE_TXT: Record<string, string> = { T: 'stopped (T)', t: 'traced (t)', D: 'in uninterruptible I/O (D)' };

export function deriveRunState(ctx: Ctx, si: StallInfo, boot: BootPhase | null = null): StateVerdict {
  const run = ctx.run;
  const v = (state: RunState, why: string, culprit: Culprit | null = null): StateVerdict => ({ state, why, culprit });
  // a launch or a supervised restart booting: what it is and how long it has waited; STALLED once
  // the boot outlasts what a boot takes here
  const booting = (b: BootPhase): StateVerdict => v(b.over ? 'STALLED' : b.state, b.text);
  if (!run.exists) return v('NO TRAINER', run.error ? `run dir unreadable: ${run.error}` : 'run dir does not exist');
  const step = run.step ?? 0;
  const total =
    run.totalSteps ?? (typeof run.metrics?.['steps'] === 'number' ? (run.metrics['steps'] as number) : null);
  const of = total !== null ? ` of ${total}` : '';
  const halt = run.control.halt;
  const r0boot = ctx.freshLaunch?.since ?? ctx.ranks.find((r) => r.rank === 0)?.bootTs ?? null;
  const staleHalt = halt.present && halt.mtimeMs !== null && r0boot !== null && halt.mtimeMs < r0boot - 1000;
  const haltTxt = halt.content?.trim() ? ` (${halt.content.trim()})` : '';
  const hbAge = ctx.lastHeartbeatTs === null ? null : (ctx.now - ctx.lastHeartbeatTs) / 1000;
  const nan = run.control.anomaly?.type === 'nan_loss' || run.log.fatalNonFinite;

  const unknownAlive = ctx.procsKnown
    ? (ctx.in.procs!.unknown ?? []).filter((p) => !isToolProcess(p) && p.state !== 'Z' && p.state !== 'X').length
    : 0;
  const ranksTxt = ctx.alive.map((r) => r.rank).join(',');
  const anyAlive = ctx.procsKnown && (ctx.alive.length > 0 || unknownAlive > 0 || ctx.launcherAlive);
  // No process table (a report on a copied dir, a host that cannot list processes): heartbeats speak.
  const hbLive = !ctx.procsKnown && !ctx.ended && hbAge !== null && hbAge < ctx.cadence.thresholdS;

  if (anyAlive || hbLive) {
    const who = anyAlive
      ? ctx.alive.length
        ? `rank(s) ${ranksTxt} still alive`
        : ctx.launcherAlive
          ? `launcher pid ${ctx.in.procs!.launcher!.pid} still alive`
          : `${unknownAlive} trainer process(es) still alive`
      : 'heartbeats still arriving';
    const hung = si.hung ? hungCulprit(ctx, si) : null;
    const hungTxt = hung ? `; ${hung.why}` : '';
    const ended = total !== null && step >= total ? `reached step ${step}${of}` : `stopped at step ${step}${of}`;
    // the loop is over and a rank lives on past the exit grace: a hang, .HALT or not
    const stuck = exitHang(ctx);
    if (stuck)
      return v(
        'STALLED',
        `${ended}, metrics.json written ${dur(stuck.forS, 'precise')} ago; ${who}: the exit is hung`,
        hung,
      );
    if (halt.present && !staleHalt) {
      const ago = halt.mtimeMs !== null ? ` ${dur((ctx.now - halt.mtimeMs) / 1000, 'precise')} ago` : '';
      return v('HALTING', `.HALT${haltTxt} requested${ago}; ${who}${hungTxt}`, hung);
    }
    if (ctx.ended) return v('HALTING', `${ended}, metrics.json written; ${who}${hungTxt}`, hung);
    if (nan) return v('HALTING', `aborting on a non-finite loss after step ${step}${of}; ${who}${hungTxt}`, hung);
    if (run.log.haltSeen) return v('HALTING', `the trainer saw .HALT at step ${step}${of}; ${who}${hungTxt}`, hung);
    if (boot) return booting(boot);
    if (ctx.ranks.length === 0 || (step === 0 && !si.hung)) {
      if (ctx.launcherAlive && ctx.alive.length === 0)
        return v('STARTING', `launcher pid ${ctx.in.procs!.launcher!.pid} alive, no rank step yet`);
      const boot = r0boot !== null ? `booted ${dur((ctx.now - r0boot) / 1000, 'precise')} ago` : 'no heartbeat yet';
      return v('STARTING', `${ctx.alive.length ? `rank(s) ${ranksTxt} alive, ` : ''}${boot}, no step yet`);
    }
    if (si.hung) return stalled(ctx, si, hung);
    if (anyAlive && ctx.alive.length === 0)
      return v('RUNNING', `step ${step}${of}; ${who}, rank processes not identified`);
    // a routine pause (checkpoint save, eval) the trainer takes after step N's heartbeat: not overdue yet
    const overCadence = si.frozenS !== null && si.frozenS > overdueAfterS(ctx);
    if (si.pause && overCadence)
      return v(
        'RUNNING',
        `step ${step}${of}; ${si.pause.what} for ${dur(si.frozenS!, 'precise')} (overdue after ${dur(si.pause.allowS, 'precise')})`,
      );
    return v('RUNNING', `step ${step}${of}${hbAge !== null ? `, last heartbeat ${dur(hbAge, 'precise')} ago` : ''}`);
  }

  // No rank lives (or, without a process table, none has written lately): the run has stopped —
  // unless its supervisor is restarting it.
  // A stop that needed SIGINT/SIGKILL is named as such: the ranks did not answer .HALT.
  const esc = ctx.in.stopEscalation ?? null;
  const escWhy = ctx.in.stopEscalationWhy ? ` (${ctx.in.stopEscalationWhy})` : '';
  const killed = (what: string) =>
    `stopped by ${esc} at step ${step}${of}: ${halt.present ? `.HALT${haltTxt}` : 'the stop request'} went unanswered${escWhy}${what}`;
  if (boot) return booting(boot);
  if (ctx.ended) {
    if (total !== null && step >= total) return v('FINISHED', `reached step ${step}${of}; metrics.json written`);
    if (nan) return v('HALTED', `aborted on a non-finite loss after step ${step}${of} (nan_loss)`);
    if (esc) return v('HALTED', killed(''));
    if (halt.present) return v('HALTED', `stopped by .HALT${haltTxt} at step ${step}${of}`);
    return v('HALTED', `stopped at step ${step}${of}; metrics.json written`);
  }
  if (ctx.procsKnown) {
    if (ctx.ranks.length === 0) return v('NO TRAINER', 'no rank processes and no heartbeat in the run dir');
    if (esc && (halt.present || total === null || step < total)) return v('HALTED', killed(' (no metrics.json)'));
    if (halt.present && !staleHalt)
      return v('HALTED', `ranks gone after .HALT${haltTxt} at step ${step}${of} (no metrics.json)`);
    if (total !== null && step >= total)
      return v('FINISHED', `reached step ${step}${of}; ranks gone (no metrics.json)`);
    return v(
      'EXITED',
      `ranks gone at step ${step}${of} without metrics.json${hbAge !== null ? `; last heartbeat ${dur(hbAge, 'precise')} ago` : ''}${run.log.oom ? '; CUDA OOM in the log' : ''}`,
    );
  }
  // Process table unknown and no fresh heartbeat.
  if (ctx.ranks.length === 0) return v('NO TRAINER', 'no heartbeat in the run dir and no process information');
  if (si.hung) return stalled(ctx, si, hungCulprit(ctx, si));
  return v(
    'NO TRAINER',
    `no recent heartbeat (${hbAge === null ? 'never' : dur(hbAge, 'precise') + ' ago'}) and no process information`,
  );
}

/** The rank the evidence names when the run does not advance, with the evidence in one phrase. */
export function hungCulprit(ctx: Ctx, si: StallInfo): Culprit | null {
  const stopped = si.stopped[0];
  if (stopped)
    return {
      rank: stopped.rank,
      why: `rank ${stopped.rank}${onHost(stopped.proc)} (pid ${stopped.proc.pid}) is ${STATE_TXT[stopped.proc.state]}: it never reaches its next collective`,
    };
  const dead = si.dead[0];
  if (dead)
    return {
      rank: dead.rank,
      why: `rank ${dead.rank} ${dead.zombie ? 'is a zombie' : 'process is gone'}: the others block in their next collective`,
    };
  if (!si.overdue) return null;
  const d = ctx.alive.find((r) => r.proc.state === 'D');
  if (d && ctx.alive.length > 1)
    return {
      rank: d.rank,
      why: `rank ${d.rank}${onHost(d.proc)} (pid ${d.proc.pid}) is ${STATE_TXT.D} (wchan ${d.proc.wchan ?? '?'})`,
    };
  if (si.oddRank !== null) {
    const rank = si.oddRank;
    const r = ctx.ranks.find((x) => x.rank === rank);
    const others = ctx.ranks.filter((x) => x.rank !== rank && x.lastStep !== null);
    if (r?.lastStep != null && others.length && others.every((o) => o.lastStep! > r.lastStep!)) {
      return {
        rank,
        why: `rank ${rank} lags: its last beat is step ${r.lastStep}, rank(s) ${others.map((o) => `${o.rank}@${o.lastStep}`).join(', ')}`,
      };
    }
    const dump = oddRankFromDumps(ctx);
    if (dump?.rank === rank)
      return { rank, why: `rank ${rank}'s stack dump shows ${dump.where} while the others are in ${dump.others}` };
    const g = oddRankFromGpus(ctx);
    if (g?.rank === rank)
      return { rank, why: `rank ${rank}'s GPU ${g.gpu} is idle while the others spin in the collective` };
    return { rank, why: `rank ${rank} is behind the others` };
  }
  if (si.stalledRanks.length === 1) {
    const r = ctx.ranks.find((x) => x.rank === si.stalledRanks[0]);
    return {
      rank: si.stalledRanks[0]!,
      why: `rank ${si.stalledRanks[0]} heartbeat silent${r?.lastTs != null ? ` ${dur((ctx.now - r.lastTs) / 1000, 'precise')}` : ''}`,
    };
  }
  return null;
}

function stalled(ctx: Ctx, si: StallInfo, culprit: Culprit | null): StateVerdict {
  const step = ctx.run.step ?? 0;
  const frozen =
    si.frozenS !== null ? `no step advance for ${dur(si.frozenS, 'precise')} at step ${step}` : `no step at ${step}`;
  const proc =
    (ctx.procsKnown ? '' : '; process table unknown') +
    (si.pause && si.overdue
      ? `; at a save/eval step (${si.pause.what}), past the ${dur(si.pause.allowS, 'precise')} allowed for it`
      : '');
  if (culprit) return { state: 'STALLED', why: `${culprit.why}; ${frozen}${proc}`, culprit };
  if (ctx.ranks.length === 1)
    return { state: 'STALLED', why: `rank ${ctx.ranks[0]!.rank}: ${frozen}${proc}`, culprit: null };
  const hbAge = ctx.lastHeartbeatTs === null ? null : (ctx.now - ctx.lastHeartbeatTs) / 1000;
  if (hbAge !== null && hbAge < si.overdueS) {
    return {
      state: 'STALLED',
      why: `${frozen} while heartbeats still arrive (last ${dur(hbAge, 'precise')} ago)${proc}`,
      culprit: null,
    };
  }
  const since = ctx.lastHeartbeatTs ?? ctx.lastAdvanceTs;
  return {
    state: 'STALLED',
    why: `all ranks silent since ${since !== null ? `${clock(since)} (${dur((ctx.now - since) / 1000, 'precise')} ago)` : 'boot'}; ${frozen}${proc}`,
    culprit: null,
  };
}

/** STALE: the data the state was judged on is too old (the host unreachable, a poll stuck). */
export function staleVerdict(last: { state: RunState; why: string } | null, ageS: number, cause: string): StateVerdict {
  const seen = last && last.state !== 'STALE' ? `; last seen ${last.state}` : '';
  return { state: 'STALE', why: `no fresh data for ${dur(ageS, 'precise')} (${cause})${seen}`, culprit: null };
}
