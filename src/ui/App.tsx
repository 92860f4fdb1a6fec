// The Ink root. It composes three hooks and holds the view state (focus, zoom, scroll, chart
// options); it never reads a file or runs a command: data comes from the store (the collector),
// effects go through `actions`.
//
// Who does what, deliberately:
// - Ink owns the terminal's input side and the app's lifecycle: raw-mode keys (useKeys: the open
//   dialog's DIALOG_KEYS first, else the KEYMAP), focus and the view state, the dialogs and their
//   actions (useDialogs), quitting.
// - The painter (paint.ts) owns the output: useScreen composes a frame (compose.ts: panels, footer,
//   the dialog as an overlay) from the newest snapshot, the view and the open dialog, and the painter
//   writes the rows that changed — on every snapshot without a React render. Ink renders nothing
//   then; only with NSA_TOP_RENDER=ink (no painter) does Ink draw the frame below.
import { Box, Text, useApp } from 'ink';
import { useCallback, useRef, useState } from 'react';
import type { CockpitActions } from '../cockpit/actions.js';
import type { CockpitState } from '../cockpit/state.js';
import { lineToAnsi } from './ansi.js';
import { logPath, type LogSource, type PagerFn } from './logkeys.js';
import type { FramePainter } from './paint.js';
import type { ReplayControls } from './replaykeys.js';
import { useDialogs } from './useDialogs.js';
import { useKeys } from './useKeys.js';
import { type Store, useScreen } from './useScreen.js';
import { initialView, type ViewState } from './view.js';

export type { Store } from './useScreen.js';

export interface AppProps {
  store: Store;
  actions: CockpitActions;
  /** raw-mode keyboard available (stdin is a TTY) */
  interactive: boolean;
  noColor: boolean;
  /** last render time, measured by Ink's onRender; shown in the footer */
  renderMs: { current: number | null };
  onQuit?: () => void;
  /** milliseconds between clock ticks that refresh ages ("12s ago") */
  tickMs?: number;
  /** paint frames with this (row diffs) instead of Ink's own output; Ink then renders nothing */
  painter?: FramePainter;
  /** the Log's scroll-back, read from the file on demand (src/trainer/run/logback.ts) */
  logSource?: LogSource;
  /** `o`: a file in $PAGER with the cockpit suspended (src/commands/pager.ts) */
  pager?: PagerFn;
  /** `nsa-top replay`: the timeline's keys (the store is the replay's player) */
  replay?: ReplayControls;
}

export function App(p: AppProps) {
  const { exit } = useApp();
  const [view, setView] = useState<ViewState>(initialView);
  const viewRef = useRef(view);
  viewRef.current = view;
  const setViewNow = useCallback((fn: (v: ViewState) => ViewState) => {
    viewRef.current = fn(viewRef.current);
    setView(viewRef.current);
  }, []);
  // the newest snapshot: the screen keeps it current (without a React render), keys and dialogs read it
  const stateRef = useRef<CockpitState | null>(p.store.get());
  const dialogs = useDialogs(p.actions, stateRef);
  const screen = useScreen({ ...p, stateRef, view, viewRef, dialog: dialogs.dialog, dialogRef: dialogs.ref });

  const quit = useCallback(() => {
    // a pending halt request is not ours to drop: it is carried by a detached process
    p.onQuit?.();
    exit();
  }, [exit, p]);
  useKeys({
    active: p.interactive,
    actions: p.actions,
    stateRef,
    screen,
    dialogs,
    view: { ref: viewRef, set: setViewNow },
    redraw: () => {
      p.painter?.invalidate();
      screen.refresh();
    },
    quit,
    ...(p.replay ? { replay: p.replay } : {}),
    log: {
      store: p.store,
      ...(p.logSource ? { source: p.logSource } : {}),
      ...(p.pager ? { pager: p.pager } : {}),
      path: () => {
        const s = stateRef.current;
        return s ? logPath(s.run.runDir, s.run.log.file) : null;
      },
    },
  });

  if (p.painter) return null;
  if (!screen.frame) return <Text dimColor>nsa-top: reading the run…</Text>;
  return (
    <Box flexDirection="column">
      {screen.frame.lines.map((l, i) => (
        <Text key={i} wrap="truncate-end">
          {lineToAnsi(l, p.noColor)}
        </Text>
      ))}
    </Box>
  );
}
