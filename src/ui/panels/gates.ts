// Gates: entropy, max gate and collapse fraction against the watchdog thresholds in force, branch
// shares, and how many more checks until the watchdog's gate rule would flag the run. Every colour and
// every threshold here is the evaluation's (src/checks: NSA_WATCH_GATE_* honoured).
import type { GateReading } from '../../checks/index.js';
import { chart, seriesPoints } from '../chart.js';
import { bar, num, pct } from '../format.js';
import { type Line, t } from '../text.js';
import type { PanelFn } from '../view.js';
import { HEALTH_ROLE } from './header.js';

const LN3 = Math.log(3);

const role = (r: GateReading | undefined) => (r ? HEALTH_ROLE[r.health] : undefined);
const limit = (r: GateReading | undefined) =>
  r ? `  flag ${r.bad}${r.key === 'collapse' ? `${num(r.limit * 100, 0)}%` : r.limit}` : '';

export const gatesPanel: PanelFn = ({ s, w, h }) => {
  const g = s.run.gates;
  if (!g) {
    const off = s.run.identity.flags['NSA_DISABLE_AUX_STATS'] === '1';
    return { lines: [[t(off ? 'no gate stats: NSA_DISABLE_AUX_STATS=1' : 'no gate stats yet', 'dim')]] };
  }
  const view = s.gates ?? null;
  const get = (k: GateReading['key']) => view?.readings.find((r) => r.key === k);
  const ent = get('entropy');
  const mx = get('maxGate');
  const col = get('collapse');
  const lines: Line[] = [];
  const e = g.entropyMean;
  lines.push([
    t('entropy '),
    t(num(e, 3), e == null ? 'dim' : role(ent), { bold: true }),
    t(` min ${num(g.entropyMin, 3)} /${LN3.toFixed(3)}`, 'dim'),
    t(limit(ent), 'dim'),
  ]);
  const cf = g.collapseFrac;
  lines.push([
    t('max gate '),
    t(num(g.maxGate, 3), role(mx)),
    t(limit(mx), 'dim'),
    t('  collapse '),
    t(pct(cf == null ? null : cf * 100, 1), role(col)),
    t(limit(col), 'dim'),
    t(`  step ${g.step}`, 'dim'),
  ]);
  if (g.branchShares) {
    const names = ['cmp', 'sel', 'win'];
    const bw = Math.max(3, Math.floor((w - 3 * 9) / 3));
    const l: Line = [];
    g.branchShares.forEach((v, i) => {
      l.push(t(`${names[i]} `, 'dim'), t(bar(v, bw), 'bar'), t(` ${(v * 100).toFixed(0).padStart(2)}% `));
    });
    lines.push(l);
  }
  if (view) {
    lines.push([
      t(view.watchdog.text, HEALTH_ROLE[view.watchdog.health], { bold: view.watchdog.health === 'critical' }),
    ]);
    if (view.uniform) lines.push([t(view.uniform, 'warn')]);
  }
  const rowsLeft = h - lines.length;
  if (rowsLeft >= MIN_CHART_ROWS) {
    const pts = seriesPoints(s.run.series.gateEntropy, 'recent');
    if (pts.length > 1) lines.push(...chart(pts, { w, h: rowsLeft - 1, threshold: ent?.limit, role: 'accent' }));
  }
  return { lines };
};

/** rows the entropy chart needs (a title row and four of plot): layout, not a judgement */
const MIN_CHART_ROWS = 5;
