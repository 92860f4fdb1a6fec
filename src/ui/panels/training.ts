// Training: loss and tok/s charts on a step axis that survives resume; EMA toggle; recent ↔ whole run.
import { chart, ema, seriesPoints } from '../chart.js';
import { num, si } from '../format.js';
import { join, type Line, t } from '../text.js';
import type { PanelFn } from '../view.js';
import type { CockpitState } from '../../cockpit/state.js';
import { HEALTH_ROLE } from './header.js';

function nonFiniteRole(s: CockpitState) {
  const a = s.alerts.find((x) => x.id === 'loss:nonfinite');
  return a ? HEALTH_ROLE[a.severity] : 'dim';
}

export const trainingPanel: PanelFn = ({ s, v, w, h }) => {
  const r = s.run;
  let loss = seriesPoints(r.series.loss, v.chartRange);
  let tps = seriesPoints(r.series.toksPerS, v.chartRange);
  if (v.ema) {
    loss = ema(loss);
    tps = ema(tps);
  }
  const val = r.series.valLoss.recent.at(-1);
  const lossNow = loss.at(-1)?.value ?? r.loss;
  const top: Line = join([
    [t('loss '), t(num(lossNow, 4), 'info', { bold: true }), ...(v.ema ? [t(' ema', 'dim')] : [])],
    r.lr != null ? [t(`lr ${r.lr.toExponential(2)}`, 'dim')] : null,
    val ? [t(`val ${num(val.value, 4)} @${val.step}`, 'info')] : null,
    // a rate only while the evaluation says the run advances (the chart keeps the history)
    s.advancing === true && r.toksPerS != null ? [t(`${si(r.toksPerS)} tok/s`)] : null,
    // coloured by the loss rule's alert (the checks judge), the count is only a fact
    r.series.loss.nonFinite ? [t(`${r.series.loss.nonFinite} non-finite`, nonFiniteRole(s))] : null,
  ]);
  const lines: Line[] = [top];
  const note = `${v.ema ? 'EMA · ' : ''}${v.chartRange === 'all' ? 'whole run' : 'recent'}`;
  if (loss.length === 0) {
    lines.push([t(r.step == null ? 'no progress records yet' : 'no loss series yet', 'dim')]);
    return { lines, note };
  }
  const avail = h - 1;
  const both = avail >= 12 && tps.length > 0;
  const lossH = both ? Math.ceil((avail - 2) * 0.6) : avail - 1;
  lines.push(...chart(loss, { w, h: lossH, role: 'info' }));
  if (both) {
    lines.push([t('tok/s', 'dim')]);
    lines.push(...chart(tps, { w, h: avail - lossH - 3, role: 'ok' }));
  }
  return { lines, note };
};
