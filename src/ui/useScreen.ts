// The App's screen: the newest snapshot, the terminal size, and the frames drawn from them. With
// the frame painter (the default), a new snapshot is composed and painted straight from the store's
// callback: React re-renders only when the operator does something (a key, a dialog, a resize). The
// cockpit redraws every second for days; keeping React's reconciliation out of that path is a good
// part of what keeps its own cost under half a percent of a core. Without a painter (NSA_TOP_RENDER=ink)
// each snapshot re-renders and Ink draws the frame.
import { useStdout } from 'ink';
import { type RefObject, useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import type { CockpitState } from '../cockpit/state.js';
import { compose, type Frame } from './compose.js';
import type { Dialog } from './dialogs/index.js';
import type { FramePainter } from './paint.js';
import type { ViewState } from './view.js';

export interface Store {
  get(): CockpitState | null;
  subscribe(fn: (s: CockpitState) => void): () => void;
  /** called at the end of each of the store's rounds, a new state or not (the collector) */
  onRound?(fn: () => void): () => void;
  /** ms between the store's rounds */
  readonly intervalMs?: number;
}

export interface Screen {
  size: { cols: number; rows: number };
  /** the frame Ink draws this render (null with a painter, or before the first snapshot) */
  frame: Frame | null;
  /** the frame on screen now: the painter's last, else this render's */
  shown(): Frame | null;
  /** draw again now (ctrl-l: after painter.invalidate) */
  refresh(): void;
}

export function useScreen(o: {
  store: Store;
  /** where the newest snapshot is kept (null until the first): the painter path draws it without a React render */
  stateRef: RefObject<CockpitState | null>;
  painter?: FramePainter;
  renderMs: { current: number | null };
  tickMs?: number;
  view: ViewState;
  viewRef: RefObject<ViewState>;
  dialog: Dialog | null;
  dialogRef: RefObject<Dialog | null>;
}): Screen {
  const { stdout } = useStdout();
  const { painter, renderMs, store } = o;
  const { stateRef } = o;
  // Ink's own output path re-renders on every snapshot instead
  const [, setRenders] = useState(0);
  const [size, setSize] = useState({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  const sizeRef = useRef(size);
  sizeRef.current = size;
  const frameRef = useRef<Frame | null>(null);
  const { viewRef, dialogRef } = o;

  /** painter path: compose the newest snapshot with the current view and paint the changed rows */
  const draw = useCallback(() => {
    const s = stateRef.current;
    if (!painter || !s) return;
    const { cols, rows } = sizeRef.current;
    const f = compose(s, viewRef.current, cols, rows, hostNow(s), dialogRef.current, renderMs.current);
    frameRef.current = f;
    const t0 = performance.now();
    painter.paint(f.lines, cols, rows);
    renderMs.current = performance.now() - t0;
  }, [painter, renderMs, stateRef, viewRef, dialogRef]);
  const refresh = useCallback(() => {
    if (painter) draw();
    else setRenders((n) => n + 1);
  }, [draw, painter]);

  // the ages' clock (below): a new state pushes it back
  const tick = useRef<(() => void) | null>(null);
  const drawnAt = useRef(0);
  useEffect(
    () =>
      store.subscribe((s) => {
        stateRef.current = s;
        drawnAt.current = Date.now();
        refresh();
        tick.current?.();
      }),
    [store, stateRef, refresh],
  );
  useEffect(() => {
    const onResize = () => setSize({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
  }, [stdout]);
  useEffect(() => {
    // ages ("12s ago") must keep counting when nothing arrives (a stalled run), but a frame per
    // new state is enough while data flows. So one timer, pushed back by each new state: while
    // states come every round it never fires (an idle 1 Hz timer woke the process each second
    // for nothing, and cost about as much as drawing the frames). With half a period of slack, so
    // a round that comes a little late is not drawn twice: the first frame without a new state
    // comes 1.5 periods after the last one (the interval it replaces took up to 1.9), then one a period
    const every = o.tickMs ?? 1000;
    // a store with rounds at least as often (the collector, every second): the ages ride on its
    // rounds, a frame at the end of a round that brought no new state — no timer at all (a timer
    // pushed back before it is due still wakes the process when it would have been: node keeps
    // one system timer, set for the earliest)
    if (store.onRound && (store.intervalMs ?? Infinity) <= every)
      return store.onRound(() => {
        if (Date.now() - drawnAt.current < every * 0.9) return;
        drawnAt.current = Date.now();
        refresh();
      });
    let t: NodeJS.Timeout | null = null;
    const fire = () => {
      refresh();
      t = setTimeout(fire, every);
    };
    const push = () => {
      if (t) clearTimeout(t);
      t = setTimeout(fire, every * 1.5);
    };
    push();
    tick.current = push;
    return () => {
      if (t) clearTimeout(t);
      tick.current = null;
    };
  }, [o.tickMs, refresh, store]);

  // a key, a dialog or a resize changed what is drawn: draw now (painter path)
  useLayoutEffect(() => draw(), [o.view, o.dialog, size, draw]);
  const state = stateRef.current;
  const frame =
    !painter && state ? compose(state, o.view, size.cols, size.rows, hostNow(state), o.dialog, renderMs.current) : null;
  const shown = () => (painter ? frameRef.current : frame);
  return { size, frame, shown, refresh };
}

/** now on the run host's clock: every age on screen is measured in the clock its file times are in */
function hostNow(s: CockpitState): number {
  return Date.now() + (s.clockOffsetMs ?? 0);
}
