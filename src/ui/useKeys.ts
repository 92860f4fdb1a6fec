// The App's input dispatch: a key goes to the open dialog (its DIALOG_KEYS), else to the main
// screen's KEYMAP. A command that cannot act now opens a refusal that says why (its `disabled`), the
// same words the footer and `?` show. View changes (focus, zoom, scroll, the alert picked) are made
// at once, so that a key arriving before React re-renders sees them.
import { useInput } from 'ink';
import { type RefObject, useEffect, useMemo } from 'react';
import type { CockpitActions } from '../cockpit/actions.js';
import type { CockpitState } from '../cockpit/state.js';
import { visiblePanels } from './compose.js';
import { off } from './keys.js';
import { type Command, commandFor } from './keymap.js';
import { FOCUSABLE, type PanelId } from './layout.js';
import { type LogSource, logKeys, type PagerFn } from './logkeys.js';
import type { Store } from './useScreen.js';
import { alertEntries, selectedAlert } from './panels/lists.js';
import type { Dialogs } from './useDialogs.js';
import type { Screen } from './useScreen.js';
import type { ViewState } from './view.js';

/** Panels whose natural end is the bottom (scrolling up reveals older lines). */
const BOTTOM_ANCHORED: PanelId[] = ['log'];

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

  const move = (delta: number) => {
    const f = view.ref.current.focus;
    if (f === 'alerts') return selectAlert((i) => i + delta);
    if (f === 'log') return logk.scroll(delta);
    const sign = BOTTOM_ANCHORED.includes(f) ? -1 : 1;
    view.set((v) => ({ ...v, scroll: { ...v.scroll, [f]: Math.max(0, (v.scroll[f] ?? 0) + sign * delta) } }));
  };
  /** scroll the focused panel to its start (end: false) or its end */
  const toEnd = (end: boolean) => {
    if (view.ref.current.focus === 'alerts') return selectAlert(() => (end ? Infinity : 0));
    if (view.ref.current.focus === 'log') return end ? logk.bottom() : logk.top();
    view.set((v) => ({
      ...v,
      scroll: { ...v.scroll, [v.focus]: BOTTOM_ANCHORED.includes(v.focus) === end ? 0 : 1e9 },
    }));
  };
  const focus = (delta: number) => {
    // zoomed, tab walks every panel (each in turn fills the screen)
    const shown = screen.shown();
    const visible = view.ref.current.zoom ? FOCUSABLE : shown ? visiblePanels(shown.layout) : [];
    if (visible.length === 0) return;
    const i = visible.indexOf(view.ref.current.focus);
    const n = (i + delta + visible.length) % visible.length;
    view.set((v) => ({ ...v, focus: visible[n]!, zoom: v.zoom ? visible[n]! : null }));
  };

  const page = () => Math.max(1, screen.size.rows - 10);
  /** what each command of the main screen does (a command judged on the run gets its snapshot) */
  const run: Record<Command, (s: CockpitState | null) => void> = {
    quit: () => o.quit(),
    help: () => dialogs.openHelp(),
    redraw: () => o.redraw(),
    dump: () => dialogs.openDump(),
    halt: () => dialogs.openHalt(),
    relaunch: () => dialogs.openRelaunch(),
    ack: (s) => s && ackAlert(s),
    'focus-next': () => focus(1),
    'focus-prev': () => focus(-1),
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
    clear: () => logk.clear(),
    'scroll-left': () => logk.side(-8),
    'scroll-right': () => logk.side(8),
    pager: () => logk.open(),
    'chart-range': () => view.set((v) => ({ ...v, chartRange: v.chartRange === 'recent' ? 'all' : 'recent' })),
  };

  useInput(
    (input, key) => {
      if (dialogs.ref.current) return dialogs.onKey(input, key, o.quit);
      if (logk.typing(input, key)) return;
      const b = commandFor(input, key);
      if (!b) return;
      const s = stateRef.current;
      // a command judged on the run waits for the first snapshot of it
      const why = b.disabled ? (s ? b.disabled(s) : off('no data', 'the run has not been read yet')) : null;
      if (why) return dialogs.refuse(b.command, why.why);
      run[b.command](s);
    },
    { isActive: o.active },
  );
}
