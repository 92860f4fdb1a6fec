// Where each panel goes for a terminal size. Pure: (cols, rows, view) → rectangles that tile the
// frame without overlapping. The frame is rows − 1 tall (a frame as tall as the terminal makes Ink
// clear the screen every frame).

export type PanelId =
  'header' | 'banner' | 'gpus' | 'training' | 'gates' | 'ranks' | 'alerts' | 'log' | 'dumps' | 'actions' | 'footer';

/** Focus order (tab). */
export const FOCUSABLE: PanelId[] = ['training', 'gates', 'gpus', 'ranks', 'alerts', 'log', 'dumps', 'actions'];

export const TITLES: Record<PanelId, string> = {
  header: 'Run',
  banner: '',
  gpus: 'GPUs · Host',
  training: 'Training',
  gates: 'Gates',
  ranks: 'Ranks',
  alerts: 'Alerts',
  log: 'Log',
  dumps: 'Dumps',
  actions: 'Actions',
  footer: '',
};

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** One slot on screen. A slot with several panels shows one of them (tabs in its title). */
export interface Slot extends Rect {
  panels: PanelId[];
  active: PanelId;
  border: boolean;
}

export type Layout =
  | { kind: 'too-small'; cols: number; rows: number; need: { cols: number; rows: number } }
  | { kind: 'ok'; cols: number; height: number; slots: Slot[]; mode: 'compact' | 'wide' | 'huge' | 'zoom' };

export const MIN_COLS = 80;
// 23, not 24: an 80x24 terminal running tmux (its status line takes a row) gives an 80x23 pane,
// and that is where operators run nsa-top
export const MIN_ROWS = 23;

interface ColSpec {
  w: number;
  /** panels top to bottom: fixed height, or 0 for a share of what's left */
  items: { panels: PanelId[]; h: number }[];
}

function stack(x: number, y: number, height: number, col: ColSpec, focus: PanelId | null): Slot[] {
  const fixed = col.items.reduce((a, it) => a + it.h, 0);
  const flex = col.items.filter((it) => it.h === 0).length;
  let free = Math.max(0, height - fixed);
  const slots: Slot[] = [];
  let cy = y;
  let flexLeft = flex;
  col.items.forEach((it, i) => {
    let h = it.h;
    if (h === 0) {
      h = Math.floor(free / flexLeft);
      free -= h;
      flexLeft--;
    }
    if (i === col.items.length - 1) h = y + height - cy; // last one takes the remainder
    const active = focus && it.panels.includes(focus) ? focus : it.panels[0]!;
    slots.push({ x, y: cy, w: col.w, h, panels: it.panels, active, border: true });
    cy += h;
  });
  return slots;
}

export interface LayoutInput {
  cols: number;
  rows: number;
  focus: PanelId | null;
  zoom: PanelId | null;
  /** rows wanted by GPUs / ranks panels (devices, ranks) */
  gpuRows: number;
  rankRows: number;
  /** rows under the header for the critical-alert banner (0: none) */
  bannerRows?: number;
  /** rows the alerts in force want at full text (the wide layout grows their panel for them) */
  alertRows?: number;
}

export const HEADER_H = 3;
export const FOOTER_H = 1;

export function layout(inp: LayoutInput): Layout {
  const { cols, rows, focus, zoom } = inp;
  if (cols < MIN_COLS || rows < MIN_ROWS)
    return { kind: 'too-small', cols, rows, need: { cols: MIN_COLS, rows: MIN_ROWS } };
  const height = rows - 1;
  const bannerH = Math.max(0, Math.min(inp.bannerRows ?? 0, 2));
  const top = HEADER_H + bannerH;
  const mid = height - top - FOOTER_H;
  const header: Slot = { x: 0, y: 0, w: cols, h: HEADER_H, panels: ['header'], active: 'header', border: false };
  const footer: Slot = {
    x: 0,
    y: height - FOOTER_H,
    w: cols,
    h: FOOTER_H,
    panels: ['footer'],
    active: 'footer',
    border: false,
  };
  const banner: Slot[] = bannerH
    ? [{ x: 0, y: HEADER_H, w: cols, h: bannerH, panels: ['banner'], active: 'banner', border: false }]
    : [];
  if (zoom) {
    return {
      kind: 'ok',
      cols,
      height,
      mode: 'zoom',
      slots: [header, ...banner, { x: 0, y: top, w: cols, h: mid, panels: [zoom], active: zoom, border: true }, footer],
    };
  }
  const gpuH = Math.max(4, Math.min(inp.gpuRows + 2, 10));
  const rankH = Math.max(4, Math.min(inp.rankRows + 3, 14));
  let cs: ColSpec[];
  let mode: 'compact' | 'wide' | 'huge';
  if (cols >= 180 && rows >= 50) {
    mode = 'huge';
    const w1 = Math.floor(cols * 0.4);
    const w2 = Math.floor(cols * 0.3);
    cs = [
      {
        w: w1,
        items: [
          { panels: ['training'], h: Math.floor(mid * 0.6) },
          { panels: ['log'], h: 0 },
        ],
      },
      {
        w: w2,
        items: [
          { panels: ['gpus'], h: gpuH },
          { panels: ['gates'], h: 12 },
          { panels: ['ranks'], h: rankH },
          { panels: ['alerts'], h: 0 },
        ],
      },
      {
        w: cols - w1 - w2,
        items: [
          { panels: ['dumps'], h: Math.floor(mid * 0.6) },
          { panels: ['actions'], h: 0 },
        ],
      },
    ];
  } else if (cols >= 120 && rows >= 36) {
    mode = 'wide';
    const w1 = Math.floor(cols / 2);
    // alerts get the rows their whole text wants, from 8 up to half of what gpus and ranks leave
    const alertH = Math.max(8, Math.min((inp.alertRows ?? 0) + 2, Math.floor((mid - gpuH - rankH) / 2)));
    cs = [
      {
        w: w1,
        items: [
          { panels: ['training'], h: Math.floor(mid * 0.5) },
          { panels: ['gates'], h: 9 },
          { panels: ['log'], h: 0 },
        ],
      },
      {
        w: cols - w1,
        items: [
          { panels: ['gpus'], h: gpuH },
          { panels: ['ranks'], h: rankH },
          { panels: ['alerts'], h: alertH },
          { panels: ['dumps', 'actions'], h: 0 },
        ],
      },
    ];
  } else {
    mode = 'compact';
    const w1 = Math.floor(cols * 0.55);
    const rh = Math.min(rankH, Math.floor(mid / 2) - 1);
    cs = [
      {
        w: w1,
        items: [
          { panels: ['training'], h: mid - rh },
          { panels: ['ranks'], h: 0 },
        ],
      },
      {
        w: cols - w1,
        items: [
          { panels: ['gates'], h: 6 },
          { panels: ['gpus'], h: Math.min(gpuH, 5) },
          { panels: ['alerts', 'log', 'dumps', 'actions'], h: 0 },
        ],
      },
    ];
  }
  const slots: Slot[] = [header, ...banner];
  let x = 0;
  for (const c of cs) {
    slots.push(...stack(x, top, mid, c, focus));
    x += c.w;
  }
  slots.push(footer);
  return { kind: 'ok', cols, height, mode, slots };
}
