// The whole screen as lines: layout → panels (each inside its frame) → dialog overlay. Pure: the
// same CockpitState, view and size always give the same frame, exactly `cols` wide and rows − 1 tall.
import type { CockpitState } from '../cockpit/state.js';
import { type Dialog, dialogView } from './dialogs/index.js';
import { FOCUSABLE, layout, type Layout, MIN_COLS, MIN_ROWS, type PanelId, type Slot, TITLES } from './layout.js';
import { actionsPanel, alertBannerPanel, alertRowsWanted, alertsPanel, dumpsPanel, logPanel } from './panels/lists.js';
import { keyOf } from './keymap.js';
import { footerLine } from './panels/footer.js';
import { gatesPanel } from './panels/gates.js';
import { gpusPanel } from './panels/gpus.js';
import { hostRows } from './panels/host.js';
import { headerPanel, stateRole } from './panels/header.js';
import { ranksPanel, rankRows } from './panels/ranks.js';
import { trainingPanel } from './panels/training.js';
import { type Role } from './palette.js';
import { fit, type Line, lineWidth, strWidth, t } from './text.js';
import type { PanelFn, ViewState } from './view.js';

export const PANELS: Record<Exclude<PanelId, 'footer'>, PanelFn> = {
  header: headerPanel,
  banner: alertBannerPanel,
  gpus: gpusPanel,
  training: trainingPanel,
  gates: gatesPanel,
  ranks: ranksPanel,
  alerts: alertsPanel,
  log: logPanel,
  dumps: dumpsPanel,
  actions: actionsPanel,
};

export interface Frame {
  lines: Line[];
  layout: Layout;
}

function gpuRows(s: CockpitState): number {
  const g = s.gpu;
  const host = hostRows(s);
  // a multi-node view: one more line per node (its name over its devices, or why it has none)
  if (g?.status === 'ok') return g.devices.length * 2 + (g.nodes?.length ?? 0) + host;
  if (g?.status === 'not-answering')
    return 2 + (g.lastGood?.devices.length ?? 0) + (g.lastGood?.nodes?.length ?? 0) + host;
  return 1 + host;
}

const titleMemo = new Map<string, Line>();

interface TitleBar {
  slot: Slot;
  focused: boolean;
  note: string | undefined;
  more: number | undefined;
  s: CockpitState;
}

/** The top border with the panel titles; the same few bars come back every frame, so they are kept. */
function titleBar(b: TitleBar): Line {
  const { slot, focused, note, more, s } = b;
  const crit = slot.panels.includes('alerts') && s.alerts.some((a) => a.severity === 'critical');
  const key = `${slot.w}|${slot.panels.join(',')}|${slot.active}|${focused}|${note}|${more}|${s.alerts.length}|${crit}`;
  let bar = titleMemo.get(key);
  if (!bar) {
    if (titleMemo.size > 256) titleMemo.clear();
    bar = drawTitleBar(b);
    titleMemo.set(key, bar);
  }
  return bar;
}

function drawTitleBar({ slot, focused, note, more, s }: TitleBar): Line {
  const role: Role = focused ? 'focus' : 'dim';
  const parts: Line = [t('┌', role)];
  const texts = tabTexts(slot, s);
  slot.panels.forEach((p, i) => {
    if (i > 0) parts.push(t('│', 'dim'));
    const active = p === slot.active;
    const alertRole: Role | undefined =
      p === 'alerts' && s.alerts.some((a) => a.severity === 'critical') ? 'crit' : undefined;
    parts.push(
      t(texts[i]!, active ? (focused ? 'focus' : (alertRole ?? 'title')) : (alertRole ?? 'dim'), {
        bold: active,
        inverse: active && focused,
      }),
    );
  });
  if (note) parts.push(t(` ${note} `, 'dim'));
  if (more) parts.push(t(` ↓${more} `, 'dim'));
  const used = lineWidth(parts);
  const inner = slot.w - 1;
  if (used >= inner) return [...fit(parts, inner, false), t('┐', role)];
  return [...parts, t('─'.repeat(inner - used), role), t('┐', role)];
}

function drawSlot(
  out: Line[],
  outW: number[],
  slot: Slot,
  s: CockpitState,
  v: ViewState,
  now: number,
  renderMs: number | null,
  dialog: Dialog | null,
): void {
  // every row a slot puts is exactly slot.w wide: counted here, so the frame's rows need no
  // measuring again (a bordered row's body is fit to w already: not measured twice either)
  const put = (row: number, line: Line, fitted = false) => {
    if (row < slot.y || row >= slot.y + slot.h) return;
    append(out[row]!, fitted ? line : fit(line, slot.w));
    outW[row]! += slot.w;
  };
  if (slot.active === 'footer') {
    // a key that did nothing says so here for a moment, instead of the key hints
    // (the notice's deadline is on this machine's clock; `now` is the run host's)
    const n = v.notice && now - (s.clockOffsetMs ?? 0) < v.notice.until ? v.notice.text : null;
    put(slot.y, n !== null ? [t(n, 'warn')] : footerLine(s, slot.w, renderMs, dialog, now));
    return;
  }
  const focused = v.focus === slot.active;
  const fn = PANELS[slot.active];
  if (!slot.border) {
    const o = fn({ s, v, w: slot.w, h: slot.h, now, focused, zoomed: false });
    for (let i = 0; i < slot.h; i++) put(slot.y + i, o.lines[i] ?? []);
    return;
  }
  const w = slot.w - 2;
  const h = slot.h - 2;
  const o = h > 0 && w > 0 ? fn({ s, v, w, h, now, focused, zoomed: v.zoom === slot.active }) : { lines: [] as Line[] };
  const role: Role = focused ? 'focus' : 'dim';
  put(slot.y, titleBar({ slot, focused, note: o.note, more: o.more, s }));
  const side = focused ? SIDE_FOCUS : SIDE_DIM;
  for (let i = 0; i < h; i++) {
    const row = slot.y + 1 + i;
    if (row < slot.y || row >= slot.y + slot.h) continue;
    if (w <= 0) {
      put(row, [side, ...fit(o.lines[i] ?? [], w), side]);
      continue;
    }
    // the body between its borders, appended in place (no row built only to be copied)
    const r = out[row]!;
    r.push(side);
    append(r, fit(o.lines[i] ?? [], w));
    r.push(side);
    outW[row]! += slot.w;
  }
  if (slot.h >= 2) put(slot.y + slot.h - 1, bottomBorder(slot.w, role));
}

// A frame's borders are the same few segments every frame: made once (segments are never changed
// after they are made; the painter compares them by content).
const SIDE_FOCUS = t('│', 'focus');
const SIDE_DIM = t('│', 'dim');
const bottoms = new Map<string, Line>();
function bottomBorder(w: number, role: Role): Line {
  const key = `${w}${role}`;
  let l = bottoms.get(key);
  if (!l) {
    if (bottoms.size > 64) bottoms.clear();
    l = [t('└' + '─'.repeat(Math.max(0, w - 2)) + '┘', role)];
    bottoms.set(key, l);
  }
  return l;
}

/** `row.push(...segs)` without the spread's iterator (this runs for every row of every frame) */
function append(row: Line, segs: Line): void {
  for (let i = 0; i < segs.length; i++) row.push(segs[i]!);
}

/** Overlay a centred box onto already composed lines. */
function overlay(lines: Line[], cols: number, title: string, role: Role, body: Line[]): Line[] {
  const height = lines.length;
  const w = Math.min(cols - 4, Math.max(50, Math.min(100, Math.max(...body.map(lineWidth), strWidth(title)) + 4)));
  const inner = w - 2;
  const maxBody = Math.max(1, height - 4);
  const shown = body.slice(0, maxBody);
  const h = shown.length + 2;
  const y0 = Math.max(0, Math.floor((height - h) / 2));
  const x0 = Math.floor((cols - w) / 2);
  const box: Line[] = [];
  const tt = ` ${title} `;
  box.push([
    t('┏', role),
    t(tt, role, { bold: true, inverse: true }),
    t('━'.repeat(Math.max(0, inner - strWidth(tt))), role),
    t('┓', role),
  ]);
  for (const l of shown) box.push([t('┃', role), t(' '), ...fit(l, inner - 2), t(' '), t('┃', role)]);
  box.push([t('┗' + '━'.repeat(inner) + '┛', role)]);
  const out = lines.slice();
  box.forEach((b, i) => {
    const row = y0 + i;
    if (row >= height) return;
    out[row] = [...sliceLine(out[row]!, 0, x0), ...fit(b, w), ...sliceLine(out[row]!, x0 + w, cols)];
  });
  return out;
}

/** Columns [from, to) of a line. */
export function sliceLine(line: Line, from: number, to: number): Line {
  const out: Line = [];
  let x = 0;
  for (const s of line) {
    for (const ch of s.text) {
      const cw = strWidth(ch);
      if (x >= from && x + cw <= to) {
        const last = out[out.length - 1];
        if (last && last.role === s.role && last.bold === s.bold && last.inverse === s.inverse) last.text += ch;
        else out.push({ ...s, text: ch });
      } else if (x < from && x + cw > from) out.push({ text: ' '.repeat(x + cw - from) }); // a wide char cut in half
      x += cw;
    }
  }
  const w = lineWidth(out);
  if (w < to - from) out.push({ text: ' '.repeat(to - from - w) });
  return out;
}

function tooSmall(s: CockpitState, cols: number, rows: number): Line[] {
  const height = Math.max(1, rows - 1);
  const msg: Line[] = [
    [t('terminal too small', 'warn', { bold: true })],
    [t(`${cols}×${rows}, nsa-top needs ${MIN_COLS}×${MIN_ROWS}`, 'dim')],
    [t(` ${s.runState} `, stateRole(s), { inverse: true }), t(` step ${s.run.step ?? '–'}`)],
    [t(`${keyOf('quit')} quits`, 'dim')],
  ];
  const out: Line[] = [];
  for (let i = 0; i < height; i++) out.push(fit(msg[i] ?? [], cols));
  return out;
}

export function compose(
  s: CockpitState,
  v: ViewState,
  cols: number,
  rows: number,
  now: number,
  dialog: Dialog | null = null,
  renderMs: number | null = null,
): Frame {
  const inp = {
    cols,
    rows,
    focus: v.focus,
    zoom: v.zoom,
    gpuRows: gpuRows(s),
    rankRows: rankRows(s, now).reduce((n, r) => n + (r.why ? 2 : 1), 0) + (s.procs?.launcher ? 1 : 0),
  };
  let L = layout(inp);
  // the wide layout sizes the Alerts panel to the whole text of the alerts in force
  const al =
    L.kind === 'ok' && L.mode === 'wide' && s.alerts.length ? L.slots.find((sl) => sl.active === 'alerts') : undefined;
  if (al) L = layout({ ...inp, alertRows: alertRowsWanted(s, al.w - 2) });
  // a critical alert is always on screen: when the Alerts panel is not (another tab of its slot,
  // another panel zoomed), a banner under the header names it
  const crit = s.alerts.reduce((n, a) => n + (a.severity === 'critical' ? 1 : 0), 0);
  if (crit && L.kind === 'ok' && !L.slots.some((sl) => sl.active === 'alerts'))
    L = layout({ ...inp, bannerRows: Math.min(crit, rows >= 40 ? 2 : 1) });
  if (L.kind === 'too-small') return { lines: tooSmall(s, cols, rows), layout: L };
  const rowsOut: Line[] = Array.from({ length: L.height }, () => []);
  // slots are drawn left to right; within a row, cells are appended in x order
  const slots = [...L.slots].sort((a, b) => a.x - b.x || a.y - b.y);
  const rowsW = rowsOut.map(() => 0);
  for (const slot of slots) drawSlot(rowsOut, rowsW, slot, s, v, now, renderMs, dialog);
  let lines = rowsOut.map((segs, i) => (rowsW[i] === cols ? segs : fit(segs, cols, false)));
  if (dialog) {
    const dv = dialogView(dialog, s, now, Math.min(cols - 8, 96), Math.max(1, L.height - 4));
    lines = overlay(lines, cols, dialog.kind === 'help' ? 'Keys' : dv.title, dv.role, dv.lines);
  }
  return { lines, layout: L };
}

/**
 * The focusable panels that are on screen for this layout, in tab order: as the screen reads, the
 * columns left to right, each top to bottom, the tabs of a slot in their title's order.
 */
export function visiblePanels(L: Layout): PanelId[] {
  if (L.kind !== 'ok') return [];
  const slots = [...L.slots].sort((a, b) => a.x - b.x || a.y - b.y);
  return slots.flatMap((s) => s.panels).filter((p) => FOCUSABLE.includes(p));
}

const SUPERSCRIPT = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];

/** The number key that focuses a panel, as its title shows it (`Log⁶`, as btop marks its boxes), or ''. */
export function panelKeyMark(p: PanelId): string {
  const n = FOCUSABLE.indexOf(p) + 1;
  return n >= 1 && n <= 9 ? SUPERSCRIPT[n]! : '';
}

/** A panel's tab label in its slot's title bar: its title, its number key, and (Alerts) its count. */
export function tabLabel(p: PanelId, s: CockpitState): string {
  const title = `${TITLES[p]}${panelKeyMark(p)}`;
  return p === 'alerts' && s.alerts.length ? `${title}(${s.alerts.length})` : title;
}

/**
 * The text of each tab in a slot's title bar, as drawn (the pointer's hit test measures the same):
 * ` Alerts⁵(2) │ log⁶ │ dumps⁷ ` when it fits; else the tabs not shown lose their padding, then
 * their names but a letter — each keeps its number key.
 */
export function tabTexts(slot: Slot, s: CockpitState): string[] {
  const label = (p: PanelId) => (p === slot.active ? tabLabel(p, s) : tabLabel(p, s).toLowerCase());
  const active = (p: PanelId) => ` ${label(p)} `;
  const variants: string[][] = [
    slot.panels.map((p) => ` ${label(p)} `),
    slot.panels.map((p) => (p === slot.active ? active(p) : label(p))),
    slot.panels.map((p) => (p === slot.active ? active(p) : `${label(p).slice(0, 1)}${panelKeyMark(p)}`)),
  ];
  // the corner and the separators; the last variant stands, cut by the border if it must
  const fits = (v: string[]) => v.reduce((n, x) => n + strWidth(x), 0) + v.length - 1 <= slot.w - 2;
  return variants.find(fits) ?? variants[variants.length - 1]!;
}

/**
 * Tab order, zoomed or not: the panels as the screen reads at this size unzoomed (visiblePanels of
 * the normal layout), so Tab walks the zoomed panels in the order the operator sees them side by side.
 */
export function readingOrder(cols: number, rows: number): PanelId[] {
  return visiblePanels(layout({ cols, rows, focus: null, zoom: null, gpuRows: 0, rankRows: 0 }));
}
