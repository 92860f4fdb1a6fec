// Processes: died, stopped, D state; HALT handling; unreadable and anomaly files; exits.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { ProcState } from '../../remote/types.js';
import type { Ctx } from '../context.js';
import { dur, pct } from '../../format.js';
import { type Draft, a, ago } from './common.js';
import { longestSaveS, StallInfo } from './stall.js';

// Processes: died, stopped, D state; HALT handling.

export const STATE_TXT: Partial<Record<ProcState, string>> = {
  T: 'stopped (T)',
  t: 'traced (t)',
  D: 'in uninterruptible I/O (D)',
  Z: 'a zombie (Z)',
};

/** ` on HOST` for a process of a multi-node view (ProcInfo.host), else '' */
export function onHost(p: { host?: string }): string {
  return p.host ? ` on ${p.host}` : '';
}

export function ruleProcesses(ctx: Ctx, si: StallInfo): Draft[] {
  const out: Draft[] = [];
  if (!ctx.procsKnown) return out;
  const aliveRanks = [...new Set(ctx.alive.map((r) => r.rank))].sort((x, y) => x - y);
  for (const d of si.dead) {
    const hb = ctx.ranks.find((r) => r.rank === d.rank)!;
    out.push(
      a(
        `rank-died:${hb.rank}`,
        'rank-died',
        'critical',
        `rank ${hb.rank} ${d.zombie ? 'is a zombie' : 'process is gone'} while rank(s) ${aliveRanks.join(',')} still run`,
        `heartbeat pid ${hb.pid ?? '?'}, last "${hb.lastMsg ?? '?'}" ${hb.lastTs === null ? '' : ago(ctx, hb.lastTs) + ' ago'} at step ${hb.lastStep ?? '?'}; the others will block in their next collective`,
        { rank: hb.rank, step: hb.lastStep ?? undefined, anomaly: 'rank_died', since: hb.lastTs ?? undefined },
      ),
    );
  }
  for (const r of ctx.alive) {
    const st = r.proc.state;
    if (st === 'T' || st === 't' || st === 'D') {
      const others = ctx.alive.filter((o) => o.rank !== r.rank).map((o) => `${o.rank}:${o.proc.state}`);
      // D while steps still advance is routine I/O (a checkpoint's fsync); it matters when the step is frozen
      out.push(
        a(
          `proc-state:${r.rank}`,
          'rank-state',
          si.overdue || st !== 'D' ? 'critical' : 'info',
          `rank ${r.rank}${onHost(r.proc)} (pid ${r.proc.pid}) is ${STATE_TXT[st]}${others.length ? `; others ${others.join(' ')}` : ''}`,
          `${st === 'D' ? `wchan ${r.proc.wchan ?? '?'}; ` : ''}${st === 'T' ? 'a stopped rank never reaches its collective: SIGCONT it or halt the run; ' : ''}cpu ${pct(r.proc.cpuPct)}`,
          { rank: r.rank },
        ),
      );
    }
  }
  return out;
}

/**
 * The rank-state alerts the process table proves untrue now, to go to the timeline at once instead
 * of through the hysteresis of a condition that merely flickered: the table shows the rank running
 * (SIGCONT after a SIGSTOP) or gone (then its own alert says so). Last seen, an open cockpit kept
 * "rank 1 (pid …) is stopped (T)" critical for 29 s after SIGCONT while its header said RUNNING.
 */
export function refutedByTable(ctx: Ctx, si: StallInfo): Set<string> {
  const out = new Set<string>();
  if (!ctx.procsKnown) return out;
  for (const r of ctx.alive)
    if (r.proc.state !== 'T' && r.proc.state !== 't' && r.proc.state !== 'D') out.add(`proc-state:${r.rank}`);
  for (const d of si.dead) out.add(`proc-state:${d.rank}`);
  return out;
}

export function ruleHalt(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const h = ctx.run.control.halt;
  if (!h.present) return out;
  const r0 = ctx.ranks.find((r) => r.rank === 0);
  const boot = r0?.bootTs ?? null;
  const content = h.content?.trim() ? ` ("${h.content.trim()}")` : '';
  const notFile = h.content?.startsWith('[not a regular file') === true;
  if (notFile && !ctx.ended && !(ctx.procsKnown && ctx.alive.length === 0)) {
    out.push(
      a(
        'halt:not-a-file',
        'stale-halt',
        'critical',
        `.HALT is a directory, not a file: the trainer stops at its next step, and a relaunch into it stops at step 1`,
        'the trainer only asks whether .HALT exists; nsa-top will not remove a directory: remove it by hand once the run is stopped',
        { since: h.mtimeMs ?? undefined },
      ),
    );
  } else if (h.mtimeMs !== null && boot !== null && h.mtimeMs < boot - 1000 && !ctx.ended) {
    out.push(
      a(
        'halt:stale',
        'stale-halt',
        'critical',
        `stale .HALT${content} predates this launch: the trainer stops at step 1`,
        `.HALT modified ${ago(ctx, h.mtimeMs)} ago, rank 0 booted ${ago(ctx, boot)} ago; the trainer never deletes .HALT (contract §2.5): remove it (and .anomaly_type) before relaunching`,
        { since: boot },
      ),
    );
  } else if (ctx.ended || (ctx.procsKnown && ctx.alive.length === 0)) {
    out.push(
      a(
        'halt:left',
        'stale-halt',
        ctx.ended ? 'info' : 'warning',
        `.HALT${content} is still in the run dir: a relaunch into it would stop at step 1`,
        'the trainer never deletes .HALT; remove it (and .anomaly_type) before relaunching',
        { since: h.mtimeMs ?? undefined },
      ),
    );
  } else if (h.mtimeMs !== null && ctx.alive.length > 0 && (ctx.now - h.mtimeMs) / 1000 > ctx.t.haltGraceS) {
    out.push(
      a(
        'halt:stuck',
        'halt-not-honoured',
        'warning',
        `HALT requested ${ago(ctx, h.mtimeMs)} ago${content} but rank(s) ${ctx.alive.map((r) => r.rank).join(',')} still alive`,
        `ranks check .HALT once per micro-step, before the forward: a hung step never sees it; escalate (SIGINT, then SIGKILL) after a stack dump; grace ${dur(ctx.t.haltGraceS, 'precise')}`,
        { since: h.mtimeMs + ctx.t.haltGraceS * 1000 },
      ),
    );
  }
  return out;
}

/**
 * Artifacts nsa-top may not read (permission denied, or not a regular file): named, never passed
 * over in silence — whatever they hold is missing from every other verdict.
 */
export function ruleUnreadable(ctx: Ctx): Draft[] {
  const bad = Object.entries(ctx.run.files).filter(
    ([, f]) => f.lastError !== null && /^(EACCES|EPERM)\b/.test(f.lastError),
  );
  if (bad.length === 0) return [];
  const names = bad.map(([n]) => n);
  return [
    a(
      'files:unreadable',
      'unreadable-artifacts',
      'warning',
      `cannot read ${names.length} artifact${names.length > 1 ? 's' : ''}: ${names.slice(0, 6).join(', ')}${names.length > 6 ? ', …' : ''} (permission denied)`,
      `what ${names.length > 1 ? 'they hold is' : 'it holds is'} missing from every check; run nsa-top as the trainer's user, or make ${names.length > 1 ? 'them' : 'it'} readable`,
    ),
  ];
}

export function ruleAnomalyFile(ctx: Ctx): Draft[] {
  const an = ctx.run.control.anomaly;
  if (!an || an.type === 'nan_loss') return []; // nan_loss is reported by the loss rule
  const boot = ctx.ranks.find((r) => r.rank === 0)?.bootTs ?? null;
  if (an.mtimeMs !== null && boot !== null && an.mtimeMs < boot - 1000) {
    return [
      a(
        `anomaly-file:${an.type}`,
        'anomaly',
        'warning',
        `.anomaly_type "${an.type}" is left from an earlier run`,
        `written ${ago(ctx, an.mtimeMs)} ago, before this run booted ${ago(ctx, boot)} ago: read it, then remove it so a new anomaly is not confused with it`,
        { since: boot },
      ),
    ];
  }
  if (an.type.trim() === '') {
    return [
      a(
        'anomaly-file:empty',
        'anomaly',
        'warning',
        '.anomaly_type is empty: no anomaly named',
        'a bare touch, or a write cut short (a full disk): nsa-top names its own failed writes in .nsa-top/actions.jsonl and watchdog.jsonl',
        { since: an.mtimeMs ?? undefined },
      ),
    ];
  }
  return [
    a(
      `anomaly-file:${an.type}`,
      'anomaly',
      'critical',
      `.anomaly_type says "${an.type}"`,
      `written ${an.mtimeMs === null ? '' : ago(ctx, an.mtimeMs) + ' ago '}by the trainer or a watchdog${ctx.run.control.gateCollapseDetails ? `; gate_collapse_details.json: ${JSON.stringify(ctx.run.control.gateCollapseDetails)}` : ''}`,
      { anomaly: an.type, since: an.mtimeMs ?? undefined },
    ),
  ];
}

/**
 * The trainer wrote metrics.json (it left its training loop: finished, halted or aborted) and a rank
 * still lives `exitGraceS` later: its exit is hung. Seen live on the real trainer (2 ranks, gloo, a
 * .HALT written while rank 0 saved its step-40 checkpoint): rank 1 had begun step 41 and waited in
 * its all-reduce; rank 0 then saw .HALT, wrote metrics.json and waited for rank 1. Both lived on;
 * the header said HALTING with only an info alert until rank 1's own watchdog wrote, 3 minutes
 * later. Each rank checks .HALT on its own, so a halt during a save can split the group.
 */
export function exitHang(ctx: Ctx): { since: number; forS: number; allowS: number } | null {
  const at = ctx.run.metricsMtimeMs;
  if (!ctx.ended || !ctx.procsKnown || ctx.alive.length === 0 || at == null) return null;
  const forS = (ctx.now - at) / 1000;
  // after metrics.json rank 0 saves the final weights (--save): as long as a checkpoint takes here
  const save = longestSaveS(ctx);
  const allowS = Math.max(ctx.t.exitGraceS, save === null ? 0 : ctx.t.pauseFactor * save);
  return forS > allowS ? { since: at + allowS * 1000, forS, allowS } : null;
}

export function ruleExitHang(ctx: Ctx): Draft[] {
  const h = exitHang(ctx);
  if (!h) return [];
  const step = ctx.run.step;
  return [
    a(
      'exit:hung',
      'exit-hung',
      'critical',
      `the trainer wrote metrics.json${step !== null ? ` at step ${step}` : ''} ${dur(h.forS, 'precise')} ago but rank(s) ${ctx.alive.map((r) => r.rank).join(',')} still alive: its exit is hung`,
      `a rank that left the loop waits for one that did not (each rank checks .HALT on its own: a halt during a save can split the group); dump the stacks, then stop it (SIGINT, then SIGKILL: nsa-top stop); allowed ${dur(h.allowS, 'precise')} after metrics.json (the final weights' save: ${ctx.t.pauseFactor} × the longest checkpoint save here, at least ${dur(ctx.t.exitGraceS, 'precise')})`,
      { since: h.since, step: step ?? undefined },
    ),
  ];
}

export function ruleExited(ctx: Ctx): Draft[] {
  if (!ctx.procsKnown || ctx.alive.length > 0 || ctx.launcherAlive || ctx.ended || ctx.ranks.length === 0) return [];
  if (ctx.run.control.halt.present) return [];
  const total = ctx.run.totalSteps;
  const step = ctx.run.step ?? 0;
  if (total !== null && step >= total) return [];
  const oom = ctx.run.log.oom ? '; the log shows CUDA out of memory' : '';
  return [
    a(
      'exited',
      'run-exited',
      'critical',
      `run ended at step ${step}${total ? ` of ${total}` : ''} without finishing or halting (no rank alive, no metrics.json)`,
      `newest heartbeat ${ctx.lastHeartbeatTs === null ? 'never' : ago(ctx, ctx.lastHeartbeatTs) + ' ago'}${oom}; a crash or a kill: see train.log`,
      { since: ctx.lastHeartbeatTs ?? undefined, step, anomaly: 'run_exited' },
    ),
  ];
}
