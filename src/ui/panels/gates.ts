// Gates: entropy against the watchdog threshold, max gate, collapse fraction, branch shares, and
// how many more checks until the watchdog's gate rule would halt the run.
import { chart, seriesPoints } from '../chart.js';
import { bar, num } from '../format.js';
import { type Line, t } from '../text.js';
import type { PanelFn } from '../view.js';

/** Watchdog defaults (contract §10 fact 6). */
export const GATE_ENTROPY_MIN = 0.2;
export const GATE_MAX_MAX = 0.9;
export const COLLAPSE_MAX = 0.5;
const LN3 = Math.log(3);

export const gatesPanel: PanelFn = ({ s, w, h }) => {
  const g = s.run.gates;
  if (!g) {
    const off = s.run.identity.flags['NSA_DISABLE_AUX_STATS'] === '1';
    return { lines: [[t(off ? 'no gate stats: NSA_DISABLE_AUX_STATS=1' : 'no gate stats yet', 'dim')]] };
  }
  const lines: Line[] = [];
  const e = g.entropyMean;
  const eRole = e == null ? 'dim' : e < GATE_ENTROPY_MIN ? 'crit' : e < 0.5 ? 'warn' : 'ok';
  lines.push([
    t('entropy '),
    t(num(e, 3), eRole, { bold: true }),
    t(` min ${num(g.entropyMin, 3)} /${LN3.toFixed(3)}`, 'dim'),
    t(`  halt<${GATE_ENTROPY_MIN}`, 'dim'),
  ]);
  const mg = g.maxGate;
  const cf = g.collapseFrac;
  lines.push([
    t('max gate '),
    t(num(mg, 3), mg != null && mg > GATE_MAX_MAX ? 'crit' : undefined),
    t('  collapse '),
    t(cf == null ? '–' : `${(cf * 100).toFixed(1)}%`, cf != null && cf > COLLAPSE_MAX ? 'crit' : undefined),
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
  const k = s.gateHaltIn;
  if (k != null) lines.push([t(`watchdog would halt in ${k} check${k === 1 ? '' : 's'}`, 'crit', { bold: true })]);
  else lines.push([t('watchdog: gate rules clear', 'ok')]);
  if (e != null && e > LN3 - 0.005 && (s.run.step ?? 0) > 100) lines.push([t('≈ uniform gate: is it learning? (contract §8.8)', 'warn')]);
  const left = h - lines.length;
  if (left >= 5) {
    const pts = seriesPoints(s.run.series.gateEntropy, 'recent');
    if (pts.length > 1) lines.push(...chart(pts, { w, h: left - 1, threshold: GATE_ENTROPY_MIN, role: 'accent' }));
  }
  return { lines };
};
