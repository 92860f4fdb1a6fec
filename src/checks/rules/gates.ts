// Gates (layer 0 in the real trainer; contract §6).
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { RunSnapshot, Series, SeriesPoint } from '../../trainer/run/snapshot.js';
import type { Ctx } from '../context.js';
import { maxGateEntropyBound } from '../thresholds.js';
import { sig } from '../../format.js';
import { currentSegment } from '../stats.js';
import { type Draft, LN3, a } from './common.js';

// Gates (layer 0 in the real trainer; contract §6)

export interface GateRecord {
  step: number;
  t: number | null;
  entropy: number | null;
  max: number | null;
  collapse: number | null;
}

const gateMemo = new WeakMap<Series, { max: Series; collapse: Series; recs: GateRecord[] }>();

/** per-step gate records of the newest segment; memoised on the three series (new only when changed) */
export function gateRecords(ctx: Ctx): GateRecord[] {
  const s = ctx.run.series;
  const known = gateMemo.get(s.gateEntropy);
  if (known && known.max === s.gateMax && known.collapse === s.collapseFrac) return known.recs;
  const recs = computeGateRecords(s);
  gateMemo.set(s.gateEntropy, { max: s.gateMax, collapse: s.collapseFrac, recs });
  return recs;
}

function computeGateRecords(s: RunSnapshot['series']): GateRecord[] {
  const byStep = new Map<number, GateRecord>();
  // one number per (segment, step): steps stay far below 2^40 (no string per point)
  const key = (p: SeriesPoint) => p.segment * 2 ** 40 + p.step;
  const get = (p: SeriesPoint) => {
    let r = byStep.get(key(p));
    if (!r) {
      r = { step: p.step, t: p.t, entropy: null, max: null, collapse: null };
      byStep.set(key(p), r);
    }
    return r;
  };
  // the newest records are all any gate rule looks at (N consecutive; the frozen tail of ≤ 50)
  const tail = (x: readonly SeriesPoint[]) => x.slice(-64);
  for (const p of tail(currentSegment(s.gateEntropy))) get(p).entropy = p.value;
  for (const p of tail(currentSegment(s.gateMax))) get(p).max = p.value;
  for (const p of tail(currentSegment(s.collapseFrac))) get(p).collapse = p.value;
  return [...byStep.values()].sort((x, y) => x.step - y.step);
}

export function gateViolations(r: GateRecord, ctx: Ctx): string[] {
  const v: string[] = [];
  if (r.entropy !== null && r.entropy < ctx.t.gateEntropyMin)
    v.push(`entropy ${sig(r.entropy)} < ${ctx.t.gateEntropyMin}`);
  // gate_max_gate is one row's extreme among B·S·G rows: a healthy gate crosses 0.9 on some token long
  // before it collapses (the reference run: max 0.93 at entropy 0.88, collapse 0). It counts when the
  // entropy says the average row may be that peaked too (runbook: max_gate_mean < 0.9), or is unknown.
  const bound = maxGateEntropyBound(ctx.t.gateMaxThreshold);
  if (r.max !== null && r.max > ctx.t.gateMaxThreshold && (r.entropy === null || r.entropy < bound)) {
    v.push(
      `max gate ${sig(r.max)} > ${ctx.t.gateMaxThreshold}${r.entropy === null ? '' : ` with entropy ${sig(r.entropy)} < ${sig(bound)}`}`,
    );
  }
  if (r.collapse !== null && r.collapse > ctx.t.gateCollapseFrac)
    v.push(`collapse ${sig(r.collapse)} > ${ctx.t.gateCollapseFrac}`);
  return v;
}

export function ruleGates(ctx: Ctx): { alerts: Draft[]; haltIn: number | null } {
  const out: Draft[] = [];
  const recs = gateRecords(ctx);
  let haltIn: number | null = null;
  if (recs.length) {
    let k = 0;
    for (let i = recs.length - 1; i >= 0 && gateViolations(recs[i]!, ctx).length; i--) k++;
    const N = ctx.t.gateCollapseN;
    if (k > 0) {
      const last = recs[recs.length - 1]!,
        first = recs[recs.length - k]!;
      const v = gateViolations(last, ctx).join(', ');
      haltIn = Math.max(0, N - k);
      if (k >= N) {
        const g = ctx.run.gates;
        out.push(
          a(
            'gates:collapse',
            'gate-collapse',
            'critical',
            `gate collapse: ${v} on ${k} consecutive records (steps ${first.step}–${last.step})`,
            `watchdog rule: entropy < ${ctx.t.gateEntropyMin} or max > ${ctx.t.gateMaxThreshold} (with entropy < ${sig(maxGateEntropyBound(ctx.t.gateMaxThreshold))}) or collapse > ${ctx.t.gateCollapseFrac} for ${N} records (NSA_WATCH_GATE_*)${g?.branchShares ? `; shares [cmp, sel, win] = [${g.branchShares.map((x) => sig(x)).join(', ')}]` : ''}${ctx.run.identity.flags['NSA_FORCE_BRANCH'] ? `; NSA_FORCE_BRANCH=${ctx.run.identity.flags['NSA_FORCE_BRANCH']} forces a one-hot gate` : ''}`,
            { anomaly: 'gate_collapse', step: last.step, since: first.t ?? undefined },
          ),
        );
      } else {
        out.push(
          a(
            'gates:collapse',
            'gate-collapse',
            'info',
            `gates out of bounds on ${k} record(s): watchdog would halt in ${haltIn} more`,
            `${v} at step ${last.step}`,
            { step: last.step, since: first.t ?? undefined },
          ),
        );
      }
    }
    // Frozen at uniform (contract §8.8): passes every documented health check, learns nothing.
    const warm = ctx.run.identity.train?.warmupSteps ?? 0;
    const past = recs.filter((r) => r.step > warm && r.entropy !== null);
    const M = ctx.t.gateFrozenMinRecords;
    const shares = ctx.run.gates?.branchShares ?? null;
    if (past.length >= M && past[past.length - 1]!.step - warm >= ctx.t.gateFrozenMinSteps) {
      const tail = past.slice(-Math.max(M, Math.min(past.length, 50)));
      const allUniform = tail.every((r) => Math.abs(r.entropy! - LN3) < ctx.t.gateFrozenEntropyEps);
      const sharesUniform = !shares || shares.every((x) => Math.abs(x - 1 / 3) < ctx.t.gateFrozenShareEps);
      if (allUniform && sharesUniform) {
        const flags = ['NSA_STOPGRAD_GATES', 'NSA_FORCE_UNIFORM_GATE', 'NSA_GATE_COMPILE'].filter(
          (f) => ctx.run.identity.flags[f] === '1',
        );
        out.push(
          a(
            'gates:frozen',
            'gate-frozen',
            'warning',
            `gates frozen at uniform: entropy ≈ ln 3 on ${tail.length} records past warmup (steps ${tail[0]!.step}–${tail[tail.length - 1]!.step})`,
            `|entropy − ${sig(LN3, 5)}| < ${ctx.t.gateFrozenEntropyEps}${shares ? `, shares [${shares.map((x) => sig(x)).join(', ')}] within ${ctx.t.gateFrozenShareEps} of 1/3` : ''}; this passes every documented gate check but the gate learns nothing${flags.length ? `; ${flags.map((f) => f + '=1').join(', ')} set` : ' (NSA_STOPGRAD_GATES / NSA_FORCE_UNIFORM_GATE / NSA_GATE_COMPILE?)'}`,
            { step: tail[tail.length - 1]!.step, since: tail[0]!.t ?? undefined },
          ),
        );
      }
    }
  }
  return { alerts: out, haltIn };
}
