// Where a mouse report points, on the frame on screen: the slot, the tab of its title bar, the line
// of its body. Pure: the frame's layout and the snapshot it was drawn from in, a place out.
import type { CockpitState } from '../cockpit/state.js';
import { tabTexts } from './compose.js';
import { FOCUSABLE, type Layout, type PanelId, type Slot } from './layout.js';
import { strWidth } from './text.js';

export interface Hit {
  slot: Slot;
  /** the panel pointed at: a tab of the title bar, else the slot's active panel */
  panel: PanelId;
  /** on the title bar (the top border) */
  title: boolean;
  /** the line of the panel's body (0: the first line inside the border); null on a border */
  line: number | null;
}

/** The focusable panel at a 0-based cell of the frame, or null (header, footer, outside). */
export function hitTest(L: Layout, s: CockpitState, x: number, y: number): Hit | null {
  if (L.kind !== 'ok') return null;
  const slot = L.slots.find((sl) => x >= sl.x && x < sl.x + sl.w && y >= sl.y && y < sl.y + sl.h);
  if (!slot || !FOCUSABLE.includes(slot.active)) return null;
  if (y === slot.y && slot.border) {
    // the title bar: "┌ Alerts(2) │ log │ dumps ..." — which tab's label is under the pointer
    let cx = slot.x + 1;
    const texts = tabTexts(slot, s);
    for (const [i, p] of slot.panels.entries()) {
      const w = strWidth(texts[i]!);
      if (x >= cx && x < cx + w) return { slot, panel: p, title: true, line: null };
      cx += w + 1; // the │ between tabs
    }
    return { slot, panel: slot.active, title: true, line: null };
  }
  const inside = slot.border ? x > slot.x && x < slot.x + slot.w - 1 && y < slot.y + slot.h - 1 : true;
  return { slot, panel: slot.active, title: false, line: inside ? y - slot.y - (slot.border ? 1 : 0) : null };
}
