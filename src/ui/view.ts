// The UI's own state (focus, zoom, scroll, chart options) and the panel signature.
import type { CockpitState } from '../cockpit/state.js';
import type { PanelId } from './layout.js';
import type { LogPage } from '../trainer/run/logback.js';
import type { Search, TextPanel } from './search.js';
import type { Line } from './text.js';

export interface ViewState {
  focus: PanelId;
  zoom: PanelId | null;
  /** per panel: lines scrolled away from the natural end (newest) */
  scroll: Partial<Record<PanelId, number>>;
  ema: boolean;
  /** charts: the recent window at full resolution, or the whole run */
  chartRange: 'recent' | 'all';
  /** the selected alert of the Alerts panel (AlertEntry.key; absent: the first) */
  alertSel?: string | null;
  /** the rank selected in the Ranks panel (↑/↓ there, or a click): `d` dumps it alone; null: none */
  rankSel?: number | null;
  /** a word in the footer for a moment (a key that does nothing here), until the ms epoch `until` */
  notice?: { text: string; until: number } | null;
  /** Log scrolled back: the byte offset of its top line (it holds still while the log grows); null: live */
  logAnchor?: number | null;
  /** the Log's scroll-back as last read from the file (src/trainer/run/logback.ts) */
  logPage?: LogPage | null;
  /** Log and Dumps: columns scrolled right (←/→) */
  hscroll?: Partial<Record<TextPanel, number>>;
  /** the search typed with `/` (Log or Dumps) */
  search?: Search | null;
}

export const initialView = (): ViewState => ({
  focus: 'training',
  zoom: null,
  scroll: {},
  ema: false,
  chartRange: 'recent',
});

export interface PanelCtx {
  s: CockpitState;
  v: ViewState;
  /** inner size (inside the border) */
  w: number;
  h: number;
  now: number;
  focused: boolean;
  zoomed: boolean;
}

export interface PanelOut {
  lines: Line[];
  /** appended to the title, e.g. "EMA · last 200 steps" */
  note?: string;
  /** how many more lines exist than were shown (for the scroll hint) */
  more?: number;
}

export type PanelFn = (c: PanelCtx) => PanelOut;

/** Slice `items` for a scroll offset counted from the natural start; clamps. */
export function scrollSlice<T>(items: T[], h: number, offset: number): { shown: T[]; offset: number; more: number } {
  const max = Math.max(0, items.length - h);
  const off = Math.min(Math.max(0, offset), max);
  return { shown: items.slice(off, off + h), offset: off, more: max - off };
}
