// Data loader.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Ctx } from '../context.js';
import { dur, sig } from '../../format.js';
import { currentSegment, median } from '../stats.js';
import { type Draft, a } from './common.js';

// Data loader

export function ruleData(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const d = ctx.run.data;
  const lp = ctx.run.lastProgress;
  const dt = d.lastDtFetchS ?? lp?.dtFetchS ?? null;
  const p95 = d.fetchP95Ms ?? lp?.fetchP95Ms ?? null;
  if ((dt !== null && dt > ctx.t.fetchSlowS) || (p95 !== null && p95 / 1000 > ctx.t.fetchSlowS)) {
    out.push(
      a(
        'data:slow',
        'data-loader',
        'warning',
        `data loader slow: ${dt !== null ? `dt_fetch ${dur(dt, 'precise')}` : ''}${dt !== null && p95 !== null ? ', ' : ''}${p95 !== null ? `fetch p95 ${sig(p95)} ms` : ''}`,
        `over ${dur(ctx.t.fetchSlowS, 'precise')}; steady state should be p95 < 100 ms (contract §5); HF streaming throttling (429) or a cold cache?`,
        { step: lp?.step },
      ),
    );
  }
  const fetches = currentSegment(ctx.run.series.dtFetchS)
    .slice(-5)
    .map((p) => p.value);
  const st = ctx.cadence.stepTimeS;
  if (fetches.length >= 3 && st !== null && st > 0) {
    const med = median(fetches)!;
    if (med > ctx.t.fetchDominateFrac * st && med > 0.01) {
      out.push(
        a(
          'data:dominates',
          'data-loader',
          'warning',
          `data fetch dominates the step: ${dur(med, 'precise')} of ${dur(st, 'precise')} per step (${Math.round((med / st) * 100)} %)`,
          `median dt_fetch_s of the last ${fetches.length} progress records vs median step time; the GPUs wait on the loader`,
          { step: lp?.step },
        ),
      );
    }
  }
  return out;
}
