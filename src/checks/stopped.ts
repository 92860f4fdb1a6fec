// How a stopped run's stop ended: one that needed SIGINT or SIGKILL after .HALT went unanswered is
// not a graceful halt — the ranks were stuck (a hang, a save that never ended) and the run may have
// lost its last steps. Critical, so `status` exits 1 and `report` is NO-GO at every phase. The fact
// comes from CheckInput.stopEscalation (gathered by src/trainer/control/stopfacts.ts). Pure.
import { clock, dur } from '../format.js';
import type { Ctx } from './context.js';
import type { Draft } from './rules/index.js';

export function ruleStopEscalated(ctx: Ctx): Draft[] {
  const sig = ctx.in.stopEscalation ?? null;
  if (!sig) return [];
  // only once the ranks are gone: while they live, the stop is still under way (HALTING)
  if (ctx.alive.length > 0 || ctx.launcherAlive) return [];
  const step = ctx.run.step ?? 0;
  const total = ctx.run.totalSteps;
  const last = ctx.lastHeartbeatTs;
  return [
    {
      id: 'stop:escalated',
      rule: 'stop-escalation',
      severity: 'critical',
      title: `stopped by ${sig}, not by .HALT: the ranks did not answer .HALT at step ${step}${total !== null ? ` of ${total}` : ''}`,
      detail: `${ctx.in.stopEscalationWhy ?? `${sig} sent after .HALT's grace`}; newest heartbeat ${last === null ? 'never' : `${clock(last)} (${dur((ctx.now - last) / 1000, 'precise')} ago)`}. A rank stuck in a step or a collective never sees .HALT: see the stack dumps and the log; the last steps may not be in a checkpoint`,
      step,
      ...(last !== null ? { since: last } : {}),
    },
  ];
}
