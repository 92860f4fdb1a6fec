// The App's input dispatch: a key goes to the open dialog (its DIALOG_KEYS), else to the main
// screen's KEYMAP. A command that cannot act now opens a refusal that says why (its `disabled`), the
// same words the footer and `?` show. View changes (focus, zoom, scroll, the alert picked) are made
// at once, so that a key arriving before React re-renders sees them.
import { type Key, useInput, useStdin } from 'ink';
import { type RefObject, useEffect, useMemo, useRef } from 'react';
import type { CockpitActions } from '../cockpit/actions.js';
import type { CockpitState } from '../cockpit/state.js';
import { readingOrder, visiblePanels } from './compose.js';
import { KeyReader, type MouseEvent } from './input.js';
import { keyText, off } from './keys.js';
import { type Command, commandFor, keyOf, PANEL_NUMBERS } from './keymap.js';
import type { PanelId } from './layout.js';
import { type LogSource, logKeys, type PagerFn } from './logkeys.js';
import type { Store } from './useScreen.js';
import { alertEntries, selectedAlert } from './panels/lists.js';
import { rankBody } from './panels/ranks.js';
import { type ReplayControls, replayBindingFor, runReplayCommand } from './replaykeys.js';
import { hitTest } from './pointer.js';
import type { Dialogs } from './useDialogs.js';
import type { Screen } from './useScreen.js';
import type { ViewState } from './view.js';

/** Panels whose natural end is the bottom (scrolling up reveals older lines). */
const BOTTOM_ANCHORED: PanelId[] = ['log'];
/** lines a wheel notch scrolls */
const WHEEL_LINES = 3;
/** how long a key that does nothing is named in the footer */
const NOTICE_MS = 3000;

/** A key as the operator pressed it, for "no action on …": `/`, `←`, `ctrl-x`. */
export function keyWord(input: string, key: Partial<Key>): string {
  const named: [keyof Key, string][] = [
    ['upArrow', 'up'],
    ['downArrow', 'down'],
    ['leftArrow', 'left'],
    ['rightArrow', 'right'],
    ['pageUp', 'pgup'],
    ['pageDown', 'pgdn'],
    ['home', 'home'],
    ['end', 'end'],
    ['return', 'enter'],
    ['escape', 'esc'],
    ['tab', 'tab'],
    ['backspace', 'backspace'],
    ['delete', 'backspace'],
  ];
  const n = named.find(([f]) => key[f]);
  const base = n ? n[1] : [...input].length === 1 && input >= ' ' ? input : null;
  if (base === null) return 'that key';
  // Ink marks esc as meta too; any other key with meta came with alt
  const alt = key.meta && !key.escape ? 'alt-' : '';
  return alt + keyText(`${key.ctrl ? 'ctrl+' : ''}${key.shift && n ? 'shift+' : ''}${base}`);
}

export interface ViewControl {
  ref: RefObject<ViewState>;
  /** change the view now: the next key sees it */
  set(fn: (v: ViewState) => ViewState): void;
}

export function useKeys(o: {
  active: boolean;
  actions: CockpitActions;
  stateRef: RefObject<CockpitState | null>;
  screen: Screen;
  dialogs: Dialogs;
  view: ViewControl;
  redraw: () => void;
  quit: () => void;
  /** the Log's scroll-back reader, the pager, and the log's path (Log and Dumps keys: logkeys.ts) */
  log?: { source?: LogSource; pager?: PagerFn; path(): string | null; store: Store };
  /** `nsa-top replay`: its timeline keys (replaykeys.ts) come before the main screen's */
  replay?: ReplayControls;
}): void {
  const { actions, stateRef, screen, dialogs, view } = o;
  const logk = useMemo(
    () =>
      logKeys({
        view,
        stateRef,
        size: (p) => {
          const sl = screen.shown()?.layout;
          const slot = sl?.kind === 'ok' ? sl.slots.find((x) => x.active === p) : undefined;
          return slot ? { w: slot.w - 2, h: slot.h - 2 } : null;
        },
        ...(o.log?.source ? { source: o.log.source } : {}),
        ...(o.log?.pager ? { pager: o.log.pager } : {}),
        logPath: () => o.log?.path() ?? null,
        refuse: dialogs.refuse,
        redraw: o.redraw,
      }),
    // one controller for the App's life: what it reads goes through refs
    [],
  );
  // a scrolled-back Log counts the lines written since each snapshot (how far behind live it is)
  useEffect(() => o.log?.store.subscribe(() => logk.onSnapshot()), [o.log?.store, logk]);
  useEffect(() => o.log?.source?.subscribe(() => logk.onPage()), [o.log?.source, logk]);

  /** Alerts panel: ↑/↓ pick an entry of the timeline (kept by key, so a new alert does not move it) */
  const selectAlert = (to: (i: number) => number): void => {
    const s = stateRef.current;
    if (!s) return;
    const es = alertEntries(s);
    if (es.length === 0) return;
    view.set((v) => ({
      ...v,
      alertSel: es[Math.max(0, Math.min(es.length - 1, to(selectedAlert(es, v.alertSel))))]!.key,
    }));
  };

  /** `a`: the selected alert when the Alerts panel has focus, else the first unacknowledged critical */
  const ackAlert = (s: CockpitState): void => {
    const es = alertEntries(s);
    const target =
      view.ref.current.focus === 'alerts'
        ? (es[selectedAlert(es, view.ref.current.alertSel)]?.alert ?? null)
        : (es.find((e) => e.cleared === null && e.alert.severity === 'critical' && e.acks.length === 0)?.alert ?? null);
    if (!target)
      return dialogs.refuse('ack', 'no alert to acknowledge here: tab to the Alerts panel and pick one with ↑/↓');
    const ref = { id: target.id, since: target.since, severity: target.severity, title: target.title };
    actions.ack(ref).then(
      (r) => {
        if (!r.ok) dialogs.refuse('ack', r.detail);
      },
      (e: Error) => dialogs.refuse('ack', e.message),
    );
  };

  /** the Ranks panel's body on screen now: its lines' ranks, and how many body lines it shows */
  const ranksOnScreen = () => {
    const s = stateRef.current;
    const L = screen.shown()?.layout;
    const slot = L?.kind === 'ok' ? L.slots.find((sl) => sl.active === 'ranks') : undefined;
    if (!s || !slot) return null;
    const { owners, rows } = rankBody(s, slot.w - 2, Date.now());
    // the border (2) and the column header (1)
    const shows = Math.max(1, slot.h - 3);
    // the offset the panel draws with (scrollSlice clamps it the same way)
    const offset = (scroll: number | undefined) =>
      Math.min(Math.max(0, scroll ?? 0), Math.max(0, owners.length - shows));
    return { owners, rows, shows, offset };
  };

  /** Ranks panel: ↑/↓ (or a click) select a rank, kept on screen; `d` then dumps it alone */
  const selectRank = (to: (i: number) => number) => {
    const r = ranksOnScreen();
    if (!r || r.rows.length === 0) return;
    const cur = r.rows.findIndex((x) => x.rank === view.ref.current.rankSel);
    // the first press selects the first rank
    const i = cur < 0 ? 0 : Math.max(0, Math.min(r.rows.length - 1, to(cur)));
    pickRank(r.rows[i]!.rank);
  };
  const pickRank = (rank: number | null) => {
    const r = ranksOnScreen();
    view.set((v) => {
      if (rank === null || !r) return { ...v, rankSel: rank };
      const line = r.owners.indexOf(rank);
      const off = r.offset(v.scroll.ranks);
      const scrolled = line < off ? line : line >= off + r.shows ? line - r.shows + 1 : off;
      return { ...v, rankSel: rank, scroll: { ...v.scroll, ranks: Math.max(0, scrolled) } };
    });
  };

  /** scroll a panel (the focused one by default) by delta lines; in Alerts and Ranks ↑/↓ pick an entry */
  const move = (delta: number, panel: PanelId = view.ref.current.focus, pick = true) => {
    const f = panel;
    if (pick && f === 'alerts') return selectAlert((i) => i + delta);
    if (pick && f === 'ranks') return selectRank((i) => i + delta);
    if (f === 'log') return logk.scroll(delta);
    const sign = BOTTOM_ANCHORED.includes(f) ? -1 : 1;
    view.set((v) => ({ ...v, scroll: { ...v.scroll, [f]: Math.max(0, (v.scroll[f] ?? 0) + sign * delta) } }));
  };
  /** scroll the focused panel to its start (end: false) or its end */
  const toEnd = (end: boolean) => {
    if (view.ref.current.focus === 'alerts') return selectAlert(() => (end ? Infinity : 0));
    if (view.ref.current.focus === 'ranks') return selectRank(() => (end ? Infinity : 0));
    if (view.ref.current.focus === 'log') return end ? logk.bottom() : logk.top();
    view.set((v) => ({
      ...v,
      scroll: { ...v.scroll, [v.focus]: BOTTOM_ANCHORED.includes(v.focus) === end ? 0 : 1e9 },
    }));
  };
  const focus = (delta: number) => {
    // zoomed, tab walks every panel (each in turn fills the screen) in the order the screen reads unzoomed
    const shown = screen.shown();
    const visible = view.ref.current.zoom
      ? readingOrder(screen.size.cols, screen.size.rows)
      : shown
        ? visiblePanels(shown.layout)
        : [];
    if (visible.length === 0) return;
    const i = visible.indexOf(view.ref.current.focus);
    const n = (i + delta + visible.length) % visible.length;
    view.set((v) => ({ ...v, focus: visible[n]!, zoom: v.zoom ? visible[n]! : null }));
  };

  /** `1`–`9`: the panel of that number (zoomed: it takes the screen) */
  const focusNumber = (input: string) => {
    const p = PANEL_NUMBERS[Number(input) - 1];
    if (!p) return notice(`no panel ${input} — ${keyOf('help')} for help`);
    view.set((v) => ({ ...v, focus: p, zoom: v.zoom ? p : null }));
  };
  const notice = (text: string) => view.set((v) => ({ ...v, notice: { text, until: Date.now() + NOTICE_MS } }));

  /** a click focuses the panel under it (a tab of a title bar: that tab) and picks a rank; the wheel scrolls */
  const onMouse = (m: MouseEvent) => {
    if (dialogs.ref.current) return; // a dialog takes the keys; the mouse does nothing under it
    const L = screen.shown()?.layout;
    const s = stateRef.current;
    if (!L || !s) return;
    const hit = hitTest(L, s, m.x - 1, m.y - 1);
    if (!hit) return;
    if (m.kind === 'wheel-up' || m.kind === 'wheel-down') {
      // the panel under the pointer scrolls, whichever has the focus; a wheel never picks a rank
      const delta = m.kind === 'wheel-up' ? -WHEEL_LINES : WHEEL_LINES;
      return move(delta, hit.panel, hit.panel === 'alerts');
    }
    if (m.kind !== 'press' || m.button !== 0) return;
    view.set((v) => ({ ...v, focus: hit.panel, zoom: v.zoom ? hit.panel : null }));
    if (hit.panel === 'ranks' && hit.line !== null && hit.line >= 1) {
      const r = ranksOnScreen();
      const rank = r?.owners[r.offset(view.ref.current.scroll.ranks) + hit.line - 1];
      // a click on the selected rank drops the selection
      if (rank != null) pickRank(rank === view.ref.current.rankSel ? null : rank);
    }
  };

  const page = () => Math.max(1, screen.size.rows - 10);
  /** what each command of the main screen does (a command judged on the run gets its snapshot) */
  const run: Record<Command, (s: CockpitState | null) => void> = {
    quit: () => o.quit(),
    help: () => dialogs.openHelp(),
    redraw: () => o.redraw(),
    dump: () => dialogs.openDump(view.ref.current.rankSel ?? null),
    halt: () => dialogs.openHalt(),
    relaunch: () => dialogs.openRelaunch(),
    ack: (s) => s && ackAlert(s),
    'focus-next': () => focus(1),
    'focus-prev': () => focus(-1),
    'focus-panel': () => {}, // by its digit: below
    zoom: () => view.set((v) => ({ ...v, zoom: v.zoom ? null : v.focus })),
    'scroll-up': () => move(-1),
    'scroll-down': () => move(1),
    'page-up': () => move(-page()),
    'page-down': () => move(page()),
    top: () => toEnd(false),
    bottom: () => toEnd(true),
    ema: () => view.set((v) => ({ ...v, ema: !v.ema })),
    search: () => logk.startSearch(view.ref.current.focus),
    'search-next': () => logk.next(),
    'search-prev': () => logk.prev(),
    // esc: the search first, then the rank selection
    clear: () => {
      if (!logk.clear()) view.set((v) => ({ ...v, rankSel: null }));
    },
    'scroll-left': () => logk.side(-8),
    'scroll-right': () => logk.side(8),
    pager: () => logk.open(),
    'chart-range': () => view.set((v) => ({ ...v, chartRange: v.chartRange === 'recent' ? 'all' : 'recent' })),
  };

  const reader = useRef(new KeyReader());
  const onKey = (input: string, key: Partial<Key>) => {
    if (dialogs.ref.current) return dialogs.onKey(input, key, o.quit);
    // a search being typed after `/` takes the keys (logkeys.ts)
    if (logk.typing(input, key)) return;
    const rb = o.replay ? replayBindingFor(input, key) : null;
    if (rb) return runReplayCommand(o.replay!, rb.command);
    const b = commandFor(input, key);
    if (!b) return notice(`no action on '${keyWord(input, key)}' — ${keyOf('help')} for help`);
    const s = stateRef.current;
    // a command judged on the run waits for the first snapshot of it
    const why = b.disabled ? (s ? b.disabled(s) : off('no data', 'the run has not been read yet')) : null;
    if (why) return dialogs.refuse(b.command, why.why);
    if (b.command === 'focus-panel') return focusNumber(input);
    run[b.command](s);
  };

  // What Ink parsed each key from, heard just before useInput's own handler (listeners run in the
  // order they were added, and this one is added first): Esc and a punctuation key read in one chunk
  // ("\x1b?") reach useInput as the bare key, without the meta flag Esc and a letter get, so only the
  // raw sequence says an Esc came first (KeyReader.read).
  const { internal_eventEmitter: inkInput } = useStdin();
  const raw = useRef('');
  useEffect(() => {
    if (!o.active) return;
    const heard = (data: string) => void (raw.current = data);
    inkInput.on('input', heard);
    return () => void inkInput.removeListener('input', heard);
  }, [o.active, inkInput]);

  useInput(
    (input, key) => {
      // every key of a burst, in order ("jjjjj", five tabs in one write, a mouse report between keys)
      for (const ev of reader.current.read(input, key, raw.current))
        if (ev.kind === 'mouse') onMouse(ev.mouse);
        else onKey(ev.input, ev.key);
    },
    { isActive: o.active },
  );
}
