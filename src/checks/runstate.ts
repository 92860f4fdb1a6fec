// RunState is a judgement, so it is derived here from the same context the rules use.
import type { RunState } from '../cockpit/state.js';
import { isToolProcess } from '../remote/procs.js';
import type { Ctx } from './context.js';
import type { StallInfo } from './rules.js';
import { fmtS } from './stats.js';

export function deriveRunState(ctx: Ctx, si: StallInfo): { state: RunState; why: string } {
  const run = ctx.run;
  if (!run.exists) return { state: 'NO TRAINER', why: run.error ? `run dir unreadable: ${run.error}` : 'run dir does not exist' };
  const step = run.step ?? 0;
  const total = run.totalSteps ?? (typeof run.metrics?.['steps'] === 'number' ? (run.metrics['steps'] as number) : null);
  const of = total !== null ? ` of ${total}` : '';
  const halt = run.control.halt;
  const r0boot = ctx.ranks.find((r) => r.rank === 0)?.bootTs ?? null;
  const staleHalt = halt.present && halt.mtimeMs !== null && r0boot !== null && halt.mtimeMs < r0boot - 1000;
  const haltTxt = halt.content?.trim() ? ` (${halt.content.trim()})` : '';
  const hbAge = ctx.lastHeartbeatTs === null ? null : (ctx.now - ctx.lastHeartbeatTs) / 1000;
  const nan = run.control.anomaly?.type === 'nan_loss' || run.log.fatalNonFinite;

  if (ctx.ended) {
    if (total !== null && step >= total) return { state: 'FINISHED', why: `reached step ${step}${of}; metrics.json written` };
    if (nan) return { state: 'HALTED', why: `aborted on a non-finite loss after step ${step}${of} (nan_loss)` };
    if (halt.present) return { state: 'HALTED', why: `stopped by .HALT${haltTxt} at step ${step}${of}` };
    return { state: 'HALTED', why: `stopped at step ${step}${of}; metrics.json written` };
  }
  const unknownAlive = ctx.procsKnown ? (ctx.in.procs!.unknown ?? []).filter((p) => !isToolProcess(p) && p.state !== 'Z').length : 0;
  const ranksTxt = ctx.alive.map((r) => r.rank).join(',');
  if (ctx.procsKnown && ctx.alive.length === 0 && unknownAlive === 0 && ctx.launcherAlive) {
    const l = ctx.in.procs!.launcher!;
    if (ctx.ranks.length === 0 || step === 0) return { state: 'STARTING', why: `launcher pid ${l.pid} alive, no rank step yet` };
    if (halt.present && !staleHalt) return { state: 'HALTING', why: `.HALT${haltTxt} requested; launcher pid ${l.pid} still alive, no rank process seen` };
    if (si.runStalled) return stalled(ctx, si);
    return { state: 'RUNNING', why: `step ${step}${of}; launcher pid ${l.pid} alive, rank processes not identified` };
  }
  if (ctx.procsKnown && ctx.alive.length === 0 && unknownAlive === 0) {
    if (ctx.ranks.length === 0) return { state: 'NO TRAINER', why: 'no rank processes and no heartbeat in the run dir' };
    if (halt.present && !staleHalt) return { state: 'HALTED', why: `ranks gone after .HALT${haltTxt} at step ${step}${of} (no metrics.json)` };
    if (total !== null && step >= total) return { state: 'FINISHED', why: `reached step ${step}${of}; ranks gone (no metrics.json)` };
    return {
      state: 'EXITED',
      why: `ranks gone at step ${step}${of} without metrics.json${hbAge !== null ? `; last heartbeat ${fmtS(hbAge)} ago` : ''}${run.log.oom ? '; CUDA OOM in the log' : ''}`,
    };
  }
  const alive = ctx.procsKnown;
  if (alive || (hbAge !== null && hbAge < ctx.cadence.thresholdS)) {
    if (halt.present && !staleHalt) {
      const ago = halt.mtimeMs !== null ? ` ${fmtS((ctx.now - halt.mtimeMs) / 1000)} ago` : '';
      return { state: 'HALTING', why: `.HALT${haltTxt} requested${ago}; ${alive ? `rank(s) ${ranksTxt || '?'} still alive` : 'heartbeats still arriving'}` };
    }
    if (si.runStalled) return stalled(ctx, si);
    if (ctx.ranks.length === 0 || step === 0) {
      const boot = r0boot !== null ? `booted ${fmtS((ctx.now - r0boot) / 1000)} ago` : 'no heartbeat yet';
      return { state: 'STARTING', why: `${alive ? `rank(s) ${ranksTxt || '?'} alive, ` : ''}${boot}, no step yet` };
    }
    return { state: 'RUNNING', why: `step ${step}${of}${hbAge !== null ? `, last heartbeat ${fmtS(hbAge)} ago` : ''}` };
  }
  // Process table unknown and no fresh heartbeat.
  if (ctx.ranks.length === 0) return { state: 'NO TRAINER', why: 'no heartbeat in the run dir and no process information' };
  if (si.runStalled) return stalled(ctx, si);
  return { state: 'NO TRAINER', why: `no recent heartbeat (${hbAge === null ? 'never' : fmtS(hbAge) + ' ago'}) and no process information` };
}

function stalled(ctx: Ctx, si: StallInfo): { state: RunState; why: string } {
  const odd = ctx.alive.find((r) => r.proc.state === 'T' || r.proc.state === 't' || r.proc.state === 'D');
  const rank = odd?.rank ?? si.oddRank ?? (si.stalledRanks.length === 1 ? si.stalledRanks[0]! : null);
  const who = rank !== null ? `rank ${rank}` : ctx.ranks.length === 1 ? `rank ${ctx.ranks[0]!.rank}` : 'all ranks';
  const step = ctx.run.step ?? 0;
  return { state: 'STALLED', why: `${who}: no step advance for ${fmtS(si.frozenS ?? 0)} at step ${step} (threshold ${fmtS(ctx.cadence.thresholdS)})${ctx.procsKnown ? '' : '; process table unknown'}` };
}
