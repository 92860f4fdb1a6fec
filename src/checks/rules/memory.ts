// Memory: leaks per rank.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Ctx } from '../context.js';
import { type Thresholds } from '../thresholds.js';
import { sig } from '../../format.js';
import { currentSegment, linfitOf } from '../stats.js';
import { type Draft, a } from './common.js';

// Memory

export interface MemSample {
  step: number;
  mib: number;
}

export function leakOf(
  samples: MemSample[],
  t: Thresholds,
): { growth: number; slope: number; first: MemSample; last: MemSample; r2: number } | null {
  // drop the first samples (allocator warm-up), keep the last 60 — read in place: the judge asks
  // every source every round, and copying the window into three arrays was a sixth of its garbage
  const lo = Math.max(Math.min(3, Math.floor(samples.length / 4)), samples.length - 60);
  const n = samples.length - lo;
  if (n < t.leakMinPoints) return null;
  const first = samples[lo]!;
  const last = samples[samples.length - 1]!;
  const span = last.step - first.step;
  if (span < 5) return null;
  const fit = linfitOf(
    n,
    (i) => samples[lo + i]!.step,
    (i) => samples[lo + i]!.mib,
  );
  if (!fit) return null;
  const growth = fit.slope * span;
  const base = Math.max(1, first.mib);
  if (growth > t.leakMinMiB && growth > t.leakMinFrac * base && fit.r2 > 0.6) {
    return { growth, slope: fit.slope, first, last, r2: fit.r2 };
  }
  return null;
}

export function ruleMemory(ctx: Ctx, perRank: Map<string, MemSample[]>): Draft[] {
  const out: Draft[] = [];
  const sources = new Map(perRank);
  // leakOf looks at the last 60 samples after a warm-up skip of at most 3: 64 give the same answer
  const seg = currentSegment(ctx.run.series.memReservedMiB);
  const hb = (seg.length > 64 ? seg.slice(-64) : seg).map((p) => ({ step: p.step, mib: p.value }));
  if (hb.length) sources.set('0:gpu_mem_reserved', hb);
  for (const [key, samples] of sources) {
    const [rank, src] = key.split(':');
    const l = leakOf(samples, ctx.t);
    if (!l) continue;
    out.push(
      a(
        `mem-leak:rank${rank}:${src}`,
        'memory-growth',
        'warning',
        `rank ${rank} memory growing ${sig(l.slope)} MiB/step (${src} ${Math.round(l.first.mib)} → ${Math.round(l.last.mib)} MiB over steps ${l.first.step}–${l.last.step})`,
        `least-squares slope over ${samples.length} samples, r² ${sig(l.r2, 2)}; growth ${Math.round(l.growth)} MiB > ${ctx.t.leakMinMiB} MiB and > ${ctx.t.leakMinFrac * 100} % of the start; "allocated/reserved flat; no creep" is the runbook's criterion`,
        { rank: Number(rank), step: l.last.step },
      ),
    );
  }
  for (const g of ctx.gpus) {
    if (g.memUsedMiB === null || g.memTotalMiB === null || g.memTotalMiB <= 0) continue;
    const f = g.memUsedMiB / g.memTotalMiB;
    if (f > ctx.t.gpuMemNearFrac) {
      out.push(
        a(
          `gpu-mem:${g.index}`,
          'gpu-memory',
          'warning',
          `GPU ${g.index} memory at ${Math.round(f * 100)} % (${g.memUsedMiB}/${g.memTotalMiB} MiB)`,
          `above ${Math.round(ctx.t.gpuMemNearFrac * 100)} %: the next allocation spike (eval, checkpoint) may OOM`,
        ),
      );
    }
  }
  if (ctx.run.log.oom) {
    out.push(
      a(
        'oom',
        'gpu-memory',
        'critical',
        'CUDA out of memory in the trainer log',
        'train.log contains "CUDA out of memory"',
        { anomaly: 'oom' },
      ),
    );
  }
  return out;
}
