// Throughput and its plausibility.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Ctx } from '../context.js';
import { mfuOf } from '../numbers.js';
import { sig } from '../../format.js';
import { currentSegment, median } from '../stats.js';
import { type Draft, a } from './common.js';

// Throughput

export function ruleThroughput(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const t = ctx.t;
  const pts = currentSegment(ctx.run.series.toksPerS);
  // every check below looks at most this far back: only the tail is copied out of the window
  const back = Math.max(t.flatlineN, t.rollingWindow + t.throughputDropN, 5);
  const vals = (pts.length > back ? pts.slice(-back) : pts).map((p) => p.value);
  // Flatline: toks/s <= 0 (the CSV rounds to an int: < 0.5 reads 0) on N consecutive records.
  if (vals.length >= t.flatlineN) {
    const tail = vals.slice(-t.flatlineN);
    if (tail.every((v) => v < 0.5)) {
      out.push(
        a(
          'throughput:flatline',
          'throughput-flatline',
          'critical',
          `throughput flat at ${sig(tail[tail.length - 1]!)} tok/s for ${t.flatlineN} records`,
          `toks_per_s < 0.5 on steps ${pts[pts.length - t.flatlineN]!.step}–${pts[pts.length - 1]!.step} (NSA_WATCH_FLATLINE_N=${t.flatlineN})`,
          {
            anomaly: 'throughput_flatline',
            step: pts[pts.length - 1]!.step,
            since: pts[pts.length - t.flatlineN]!.t ?? undefined,
          },
        ),
      );
    }
  }
  // Drop vs rolling median, held for throughputDropN records (a single eval dip is not a drop).
  const n = t.rollingWindow,
    k = t.throughputDropN;
  if (vals.length >= Math.min(n, 8) + k) {
    const base = median(vals.slice(Math.max(0, vals.length - k - n), vals.length - k))!;
    const recent = vals.slice(-k);
    if (base > 0 && recent.every((v) => v < (1 - t.throughputDropFrac) * base)) {
      const first = pts[pts.length - k]!;
      out.push(
        a(
          'throughput:drop',
          'throughput-drop',
          'warning',
          `throughput dropped to ${sig(recent[recent.length - 1]!)} tok/s from a rolling median of ${sig(base)}`,
          `last ${k} records (steps ${first.step}–${pts[pts.length - 1]!.step}) all below ${Math.round((1 - t.throughputDropFrac) * 100)} % of the median of the ${n} before`,
          { step: pts[pts.length - 1]!.step, since: first.t ?? undefined },
        ),
      );
    }
  }
  out.push(...rulePlausibility(ctx, vals));
  return out;
}

function rulePlausibility(ctx: Ctx, vals: number[]): Draft[] {
  // the one MFU arithmetic (src/checks/numbers.ts), which the header and status show too
  const m = mfuOf(ctx, vals);
  if (!m || m.value === null) return [];
  const { value: mfu, toksPerS: tps, arithmetic: why, onCpu } = m;
  if (mfu > ctx.t.mfuImpossibleFrac) {
    return [
      a(
        'throughput:impossible',
        'throughput-plausibility',
        'critical',
        `throughput impossible for this model: ${sig(tps)} tok/s would be ${sig(mfu * 100)} % of the device peak`,
        `${why}; the run is not training the model it claims (toy config? wrong CONFIG?)`,
        { anomaly: 'implausible_throughput' },
      ),
    ];
  }
  const step = ctx.run.step ?? 0;
  if (!onCpu && mfu < ctx.t.mfuLowFrac && step >= 10) {
    return [
      a(
        'throughput:low',
        'throughput-plausibility',
        'warning',
        `throughput absurdly low: ${sig(tps)} tok/s is ${sig(mfu * 100)} % of the GPUs' peak`,
        `${why}; check the routing (NSA_PREFILL_BATCHED=${ctx.run.identity.flags['NSA_PREFILL_BATCHED'] ?? 'unset'}, sequential prefill and packed selection run at ~11 tok/s, contract §8.1), GPU utilisation and DDP bucket settings`,
      ),
    ];
  }
  return [];
}
