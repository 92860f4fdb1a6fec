// Loss and grad_norm.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Ctx } from '../context.js';
import { sig } from '../../format.js';
import { currentSegment, median } from '../stats.js';
import { type Draft, a } from './common.js';

// Loss

export function ruleLoss(ctx: Ctx): Draft[] {
  const out: Draft[] = [];
  const run = ctx.run;
  const lp = run.lastProgress;
  const nonFinite =
    run.series.loss.nonFinite > 0 ||
    run.lastLossNonFinite === true ||
    run.log.fatalNonFinite ||
    run.control.anomaly?.type === 'nan_loss' ||
    // a NaN only one source holds (training.csv, TensorBoard or a heartbeat) counts as well
    Object.values(run.lossNonFiniteBySource ?? {}).some((n) => n > 0) ||
    (lp?.loss !== null && lp?.loss !== undefined && !Number.isFinite(lp.loss));
  if (nonFinite) {
    const why = [
      run.series.loss.nonFinite ? `${run.series.loss.nonFinite} non-finite loss record(s)` : null,
      run.log.fatalNonFinite ? 'train.log: "[train][FATAL] non-finite loss detected"' : null,
      run.control.anomaly?.type === 'nan_loss' ? '.anomaly_type = nan_loss' : null,
      ...(['csv', 'tb', 'heartbeat'] as const)
        .filter((k) => run.lossNonFiniteBySource?.[k])
        .map((k) => `${run.lossNonFiniteBySource![k]} non-finite loss value(s) in ${k}`),
    ]
      .filter(Boolean)
      .join('; ');
    out.push(
      a(
        'loss:nonfinite',
        'loss-nonfinite',
        'critical',
        `loss went non-finite${run.step !== null ? ` after step ${run.step}` : ''}`,
        `${why || 'last progress loss is not finite'}; the NaN step itself is never logged (contract §8.5)`,
        { anomaly: 'nan_loss', step: run.step ?? undefined, since: run.control.anomaly?.mtimeMs ?? undefined },
      ),
    );
  }
  const pts = currentSegment(run.series.loss);
  if (pts.length >= 8) {
    const last = pts[pts.length - 1]!;
    const win = pts.slice(Math.max(0, pts.length - 1 - ctx.t.rollingWindow), pts.length - 1).map((p) => p.value);
    const med = median(win)!;
    if (med > 0 && last.value > ctx.t.lossExplodeFactor * med) {
      out.push(
        a(
          'loss:spike',
          'loss-spike',
          'critical',
          `loss exploding: ${sig(last.value, 4)} at step ${last.step}, ${sig(last.value / med)} × the rolling median ${sig(med, 4)}`,
          `window of the previous ${win.length} logged losses; threshold ${ctx.t.lossExplodeFactor} ×`,
          { step: last.step, anomaly: 'loss_spike', since: last.t ?? undefined },
        ),
      );
    } else if (med > 0 && last.value > med * (1 + ctx.t.lossSpikeFrac)) {
      out.push(
        a(
          'loss:spike',
          'loss-spike',
          'warning',
          `loss spike: ${sig(last.value, 4)} at step ${last.step} vs rolling median ${sig(med, 4)}`,
          `above median × ${1 + ctx.t.lossSpikeFrac} over the previous ${win.length} logged losses`,
          { step: last.step, since: last.t ?? undefined },
        ),
      );
    }
  }
  if (pts.length >= ctx.t.lossFlatN) {
    const tail = pts.slice(-ctx.t.lossFlatN);
    const vs = tail.map((p) => p.value);
    const range = Math.max(...vs) - Math.min(...vs);
    const med = median(vs)!;
    if (range < ctx.t.lossFlatEps * Math.max(1, Math.abs(med))) {
      out.push(
        a(
          'loss:flat',
          'loss-flat',
          'warning',
          `loss flat at ${sig(med, 5)} for ${ctx.t.lossFlatN} logs (steps ${tail[0]!.step}–${tail[tail.length - 1]!.step})`,
          `max − min = ${sig(range)}: the model is not updating (lr 0? frozen params? a constant batch?)`,
          { step: tail[tail.length - 1]!.step, since: tail[0]!.t ?? undefined },
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// grad_norm: zero only means something where the trainer does not zero it itself (contract §1.5)

export function ruleGradNorm(ctx: Ctx): Draft[] {
  const lp = ctx.run.lastProgress;
  if (!lp || lp.gradNorm === null || lp.gradNorm !== 0) return [];
  const id = ctx.run.identity;
  const accum = id.train?.accum ?? 1;
  if (id.trainer === 'nsa-vibe' || id.trainer === 'unknown') {
    // The real trainer reads grad_norm after zero_grad on optimizer steps: 0.0 there is an artefact.
    if (accum <= 1 || lp.step % accum === 0) return [];
  }
  return [
    a(
      'grad:zero',
      'zero-grad',
      'warning',
      `grad_norm is 0 at step ${lp.step}`,
      id.trainer === 'nsa-vibe'
        ? `a mid-accumulation step (accum ${accum}), where the real trainer's grad_norm is meaningful: no gradient reaches the parameters`
        : 'no gradient reaches the parameters',
      { step: lp.step, anomaly: 'zero_grad' },
    ),
  ];
}
