// Footer: key hints from the keymap, and what nsa-top itself costs.
import type { CockpitState } from '../../cockpit/state.js';
import { pct } from '../format.js';
import { KEYMAP } from '../keymap.js';
import { fit, type Line, lineWidth, t } from '../text.js';

export function footerLine(s: CockpitState, w: number, renderMs: number | null): Line {
  const hints: Line = [];
  for (const b of KEYMAP) {
    if (!b.hint) continue;
    const key = b.keys.split(' / ')[0]!;
    const off = b.disabled?.(s) ?? null;
    if (b.dangerous && s.readOnly) {
      hints.push(t(key, 'dim'), t(` ${b.hint}:read-only `, 'dim'));
    } else if (off) {
      // a word on why; `?` gives the whole sentence
      hints.push(t(key, 'dim'), t(` ${b.hint}:off(${off.short}) `, 'dim'));
    } else {
      hints.push(t(key, 'accent', { bold: true }), t(` ${b.hint} `));
    }
  }
  const self = s.self;
  const cost: string[] = [];
  if (self.cpuPct != null) cost.push(`cpu ${pct(self.cpuPct, 1)}`);
  if (self.rssMiB != null) cost.push(`rss ${Math.round(self.rssMiB)}M`);
  const r = renderMs ?? self.renderMs;
  if (r != null) cost.push(`render ${r.toFixed(0)}ms`);
  if (self.telemetryLatencyMs != null) cost.push(`telem ${self.telemetryLatencyMs.toFixed(0)}ms`);
  const right: Line = cost.length
    ? [t(w >= 120 ? `nsa-top ${cost.join(' ')}` : cost.slice(0, 2).join(' '), 'dim')]
    : [];
  const rw = lineWidth(right);
  if (rw + 50 > w) return fit(hints, w);
  // the keys come first: nsa-top's own figures only where all the hints fit beside them
  const hw = lineWidth(hints);
  if (hw <= w && hw + 1 + rw > w) return fit(hints, w);
  return [...fit(hints, w - rw - 1), t(' '), ...right];
}
