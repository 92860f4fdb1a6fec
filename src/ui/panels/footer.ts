// Footer: key hints from the keymap (or, while a dialog is open and takes the keys, the dialog's),
// and what nsa-top itself costs.
import type { CockpitState } from '../../cockpit/state.js';
import { type Dialog, type DialogBinding, DIALOG_KEYS } from '../dialogs/index.js';
import { keyText } from '../keys.js';
import { pct } from '../format.js';
import { KEYMAP } from '../keymap.js';
import { fit, type Line, lineWidth, t } from '../text.js';
import { timelineLine } from './timeline.js';
import { dropsKey } from '../typeahead.js';

/** the keys of the open dialog that can act now: the main screen's do nothing until it closes */
function dialogHints(s: CockpitState, d: Dialog, now: number): Line {
  const hints: Line = [t('dialog: ', 'dim')];
  for (const b of DIALOG_KEYS[d.kind] as readonly DialogBinding[])
    // a signalling key is not offered before the dialog has been on screen a moment (typeahead.ts)
    if (b.hint && !b.disabled?.({ s, d, now }) && !dropsKey(d, b.command))
      hints.push(t(keyText(b.keys[0]!), 'accent', { bold: true }), t(` ${b.hint} `));
  return hints;
}

// The main screen's hints are the same line frame after frame until a verdict changes: made once
// for each set of verdicts (segments are never changed after they are made; callers copy them).
const hintsMemo = new Map<string, Line>();

function mainHints(s: CockpitState): Line {
  const offs: (string | null)[] = [];
  let memoKey = '';
  for (const b of KEYMAP) {
    if (!b.hint) continue;
    const off = b.disabled?.(s)?.short ?? null;
    offs.push(off);
    memoKey += off === null ? '\u0001' : `${off}\u0000`;
  }
  let hints = hintsMemo.get(memoKey);
  if (hints) return hints;
  hints = [];
  let i = 0;
  for (const b of KEYMAP) {
    if (!b.hint) continue;
    const key = keyText(b.keys[0]!);
    const off = offs[i++];
    // off: a word on why; `?` gives the whole sentence
    if (off != null) hints.push(t(key, 'dim'), t(` ${b.hint}:${off} `, 'dim'));
    else hints.push(t(key, 'accent', { bold: true }), t(` ${b.hint} `));
  }
  if (hintsMemo.size > 64) hintsMemo.clear();
  hintsMemo.set(memoKey, hints);
  return hints;
}

export function footerLine(
  s: CockpitState,
  w: number,
  renderMs: number | null,
  dialog: Dialog | null = null,
  now = Date.now(),
): Line {
  // a replay's footer is its timeline (the action keys are refused; `?` lists every key)
  if (s.replay && !dialog) return timelineLine(s.replay, w);
  const hints: Line = dialog ? dialogHints(s, dialog, now) : mainHints(s);
  const self = s.self;
  const cost: string[] = [];
  if (self.cpuPct != null) cost.push(`cpu ${pct(self.cpuPct, 1)}`);
  if (self.rssMiB != null) cost.push(`rss ${Math.round(self.rssMiB)}M`);
  const r = renderMs ?? self.renderMs;
  if (r != null) cost.push(`render ${r.toFixed(0)}ms`);
  if (self.telemetryLatencyMs != null) cost.push(`telem ${self.telemetryLatencyMs.toFixed(0)}ms`);
  // the journal: "rec" when this cockpit records, "rec:pid N" when another does (docs/journal.md)
  if (s.journal) {
    const by = /^recording by pid (\d+)/.exec(s.journal)?.[1];
    cost.push(s.journal.startsWith('recording to') ? 'rec' : by ? `rec:pid ${by}` : 'no rec');
  }
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
