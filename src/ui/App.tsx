// The Ink root. Holds the view state (focus, zoom, scroll, chart options) and the open dialog;
// draws compose()'s lines; turns keys into commands through the keymap. It never reads a file or
// runs a command: data comes from the store (the collector), effects go through `actions`.
//
// With the frame painter (the default), a new snapshot is composed and painted straight from the
// store's callback: React re-renders only when the operator does something (a key, a dialog, a
// resize). The cockpit redraws every second for days; keeping React's reconciliation out of
// that path is a good part of what keeps its own cost under half a percent of a core.
import { Box, Text, useApp, useInput, useStdout, type Key } from 'ink';
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { type CockpitActions, READ_ONLY_WHY } from '../cockpit/actions.js';
import type { CockpitState } from '../cockpit/state.js';
import { lineToAnsi } from './ansi.js';
import type { FramePainter } from './paint.js';
import { compose, type Frame, visiblePanels } from './compose.js';
import { type Dialog, escalationGate, trackedRequest } from './dialog.js';
import { bindingOf, commandFor, type Command } from './keymap.js';
import { activeRequest } from '../trainer/control/types.js';
import { FOCUSABLE, type PanelId } from './layout.js';
import { alertEntries, selectedAlert } from './panels/lists.js';
import { initialView, type ViewState } from './view.js';

export interface Store {
  get(): CockpitState | null;
  subscribe(fn: (s: CockpitState) => void): () => void;
}

export interface AppProps {
  store: Store;
  actions: CockpitActions;
  /** raw-mode keyboard available (stdin is a TTY) */
  interactive: boolean;
  noColor: boolean;
  /** last render time, measured by Ink's onRender; shown in the footer */
  renderMs: { current: number | null };
  onQuit?: () => void;
  /** seconds between clock ticks that refresh ages ("12 s ago") */
  tickMs?: number;
  /** paint frames with this (row diffs) instead of Ink's own output; Ink then renders nothing */
  painter?: FramePainter;
}

/** Panels whose natural end is the bottom (scrolling up reveals older lines). */
const BOTTOM_ANCHORED: PanelId[] = ['log'];

export function App(p: AppProps) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  // the newest snapshot lives in a ref: the painter path draws it without a React render
  const stateRef = useRef<CockpitState | null>(p.store.get());
  // Ink's own output path (NSA_TOP_RENDER=ink) re-renders on every snapshot instead
  const [, setRenders] = useState(0);
  const [view, setView] = useState<ViewState>(initialView);
  const [dialog, setDialog] = useState<Dialog | null>(null);
  const [size, setSize] = useState({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  const dialogRef = useRef<Dialog | null>(null);
  dialogRef.current = dialog;
  const viewRef = useRef(view);
  viewRef.current = view;
  const sizeRef = useRef(size);
  sizeRef.current = size;
  const frameRef = useRef<Frame | null>(null);

  /** painter path: compose the newest snapshot with the current view and paint the changed rows */
  const draw = useCallback(() => {
    const s = stateRef.current;
    if (!p.painter || !s) return;
    const { cols, rows } = sizeRef.current;
    const f = compose(s, viewRef.current, cols, rows, Date.now(), dialogRef.current, p.renderMs.current);
    frameRef.current = f;
    const t0 = performance.now();
    p.painter.paint(f.lines, cols, rows);
    p.renderMs.current = performance.now() - t0;
  }, [p.painter, p.renderMs]);
  const refresh = useCallback(() => {
    if (p.painter) draw();
    else setRenders((n) => n + 1);
  }, [draw, p.painter]);

  const lastData = useRef(0);
  useEffect(
    () =>
      p.store.subscribe((s) => {
        lastData.current = Date.now();
        stateRef.current = s;
        refresh();
      }),
    [p.store, refresh],
  );
  useEffect(() => {
    const onResize = () => setSize({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
  }, [stdout]);
  useEffect(() => {
    // ages ("12 s ago") must keep counting when nothing arrives (a stalled run), but a frame per
    // new state is enough while data flows
    const every = p.tickMs ?? 1000;
    const t = setInterval(() => {
      if (Date.now() - lastData.current >= every * 0.9) refresh();
    }, every);
    return () => clearInterval(t);
  }, [p.tickMs, refresh]);

  // a key, a dialog or a resize changed what is drawn: draw now (painter path)
  useLayoutEffect(() => draw(), [view, dialog, size, draw]);
  const state = stateRef.current;
  const frame = p.painter
    ? frameRef.current
    : state
      ? compose(state, view, size.cols, size.rows, Date.now(), dialog, p.renderMs.current)
      : null;

  const update = useCallback((fn: (d: Dialog) => Dialog | null) => setDialog((d) => (d ? fn(d) : d)), []);

  const quit = useCallback(() => {
    // a pending halt request is not ours to drop: it is carried by a detached process
    p.onQuit?.();
    exit();
  }, [exit, p]);

  const startDump = useCallback(() => {
    const startedAt = Date.now();
    setDialog({ kind: 'dump', startedAt, progress: [], result: null, error: null });
    p.actions
      .dump((line) =>
        update((d) =>
          d.kind === 'dump' && d.startedAt === startedAt ? { ...d, progress: [...d.progress, line].slice(-20) } : d,
        ),
      )
      .then(
        (result) => update((d) => (d.kind === 'dump' && d.startedAt === startedAt ? { ...d, result } : d)),
        (e: Error) => update((d) => (d.kind === 'dump' && d.startedAt === startedAt ? { ...d, error: e.message } : d)),
      );
  }, [p.actions, update]);

  const startHalt = useCallback(
    (mode: 'now' | 'after-checkpoint') => {
      const startedAt = Date.now();
      setDialog({
        kind: 'halt-track',
        mode,
        startedAt,
        startStep: stateRef.current?.run.step ?? null,
        result: null,
        escalation: null,
        killArmed: false,
      });
      const mine = (d: Dialog) => d.kind === 'halt-track' && d.startedAt === startedAt;
      p.actions.halt(mode).then(
        (result) => update((d) => (mine(d) && d.kind === 'halt-track' ? { ...d, result } : d)),
        (e: Error) =>
          update((d) =>
            mine(d) && d.kind === 'halt-track'
              ? { ...d, result: { ok: false, result: 'failed', detail: e.message } }
              : d,
          ),
      );
    },
    [p.actions, update],
  );

  const startEscalate = useCallback(
    (sig: 'SIGINT' | 'SIGKILL') => {
      update((d) => (d.kind === 'halt-track' ? { ...d, escalation: { sig, result: null }, killArmed: false } : d));
      p.actions.escalate(sig).then(
        (result) => update((d) => (d.kind === 'halt-track' ? { ...d, escalation: { sig, result } } : d)),
        (e: Error) =>
          update((d) =>
            d.kind === 'halt-track'
              ? { ...d, escalation: { sig, result: { ok: false, result: 'failed', detail: e.message } } }
              : d,
          ),
      );
    },
    [p.actions, update],
  );

  const startCancel = useCallback(() => {
    p.actions.cancelHalt().then(
      (result) => update((d) => (d.kind === 'halt-track' ? { ...d, result } : d)),
      (e: Error) =>
        update((d) =>
          d.kind === 'halt-track' ? { ...d, result: { ok: false, result: 'failed', detail: e.message } } : d,
        ),
    );
  }, [p.actions, update]);

  const startRelaunch = useCallback(
    (removeStaleHalt: boolean) => {
      update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'running', removeHalt: removeStaleHalt } : d));
      p.actions.relaunch({ removeStaleHalt }).then(
        (result) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', result } : d)),
        (e: Error) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', error: e.message } : d)),
      );
    },
    [p.actions, update],
  );

  // keys can arrive faster than React re-renders: the next key must see this key's dialog
  const setDialogNow = (d: Dialog | null) => {
    dialogRef.current = d;
    setDialog(d);
  };

  const dialogKey = (input: string, key: Partial<Key>, d: Dialog): void => {
    const esc = !!key.escape;
    switch (d.kind) {
      case 'help':
      case 'refused':
        if (esc || input === '?' || input === 'q' || key.return) setDialogNow(null);
        return;
      case 'dump':
        if (esc || ((d.result || d.error) && (key.return || input === 'q'))) setDialogNow(null);
        return;
      case 'halt-choose':
        if (esc) setDialogNow(null);
        else if (input === 'n') startHalt('now');
        else if (input === 'c') startHalt('after-checkpoint');
        return;
      case 'halt-track': {
        if (esc) {
          setDialogNow(null);
          return;
        }
        const st = stateRef.current;
        if (
          input === 'x' &&
          st &&
          d.mode === 'after-checkpoint' &&
          trackedRequest(st, d.startedAt)?.state === 'pending'
        ) {
          startCancel();
          return;
        }
        // SIGINT/SIGKILL only once .HALT exists and the ranks have had their grace
        if (!st || (escalationGate(st, Date.now()) !== null && !d.escalation)) return;
        if (input === 'i') startEscalate('SIGINT');
        else if (input === 'K') {
          if (d.killArmed) startEscalate('SIGKILL');
          else setDialogNow({ ...d, killArmed: true });
        }
        return;
      }
      case 'relaunch': {
        if (esc) {
          setDialogNow(null);
          return;
        }
        if (d.stage === 'done') {
          if (key.return || input === 'q') setDialogNow(null);
          return;
        }
        if (d.stage === 'running' || d.stage === 'checking') return;
        const field = d.stage === 'confirm' ? 'input' : 'haltInput';
        if (key.backspace || key.delete) {
          setDialogNow({ ...d, [field]: d[field].slice(0, -1), error: null });
          return;
        }
        // typed or pasted text; a chunk may carry the Enter too ("621\r")
        const typed = key.ctrl || key.meta ? '' : input.replace(/[\x00-\x1f\x7f]/g, '');
        const value = (d[field] + typed).slice(0, 200);
        const submit = !!key.return || /[\r\n]/.test(input);
        if (!submit) {
          if (typed) setDialogNow({ ...d, [field]: value, error: null });
          return;
        }
        if (d.stage === 'confirm') {
          if (value !== stateRef.current?.run.identity.name) {
            setDialogNow({ ...d, input: value, error: `"${value}" is not the run name; nothing done` });
            return;
          }
          if (stateRef.current?.run.control.halt.present)
            setDialogNow({ ...d, input: value, stage: 'halt-confirm', error: null });
          else startRelaunch(false);
        } else if (value === 'remove') startRelaunch(true);
        else if (value === 'keep') startRelaunch(false);
        else setDialogNow({ ...d, haltInput: value, error: 'type "remove" or "keep"' });
        return;
      }
    }
  };

  // keys can arrive faster than React re-renders: the next key must see this key's view (focus,
  // selection), as it must see its dialog
  const setViewNow = (fn: (v: ViewState) => ViewState) => {
    viewRef.current = fn(viewRef.current);
    setView(viewRef.current);
  };

  /** Alerts panel: ↑/↓ pick an entry of the timeline (kept by key, so a new alert does not move it) */
  const selectAlert = (to: (i: number) => number): void => {
    const s = stateRef.current;
    if (!s) return;
    const es = alertEntries(s);
    if (es.length === 0) return;
    setViewNow((v) => ({
      ...v,
      alertSel: es[Math.max(0, Math.min(es.length - 1, to(selectedAlert(es, v.alertSel))))]!.key,
    }));
  };

  /** `a`: the selected alert when the Alerts panel has focus, else the first unacknowledged critical */
  const ackAlert = (): void => {
    const s = stateRef.current;
    if (!s) return;
    let target = null;
    const view = viewRef.current;
    if (view.focus === 'alerts') {
      const es = alertEntries(s);
      target = es.length ? es[selectedAlert(es, view.alertSel)]!.alert : null;
    } else {
      target =
        alertEntries(s).find((e) => e.cleared === null && e.alert.severity === 'critical' && e.acks.length === 0)
          ?.alert ?? null;
    }
    if (!target) {
      setDialog({
        kind: 'refused',
        what: 'ack',
        why: 'no alert to acknowledge here: tab to the Alerts panel and pick one with ↑/↓',
      });
      return;
    }
    const ref = { id: target.id, since: target.since, severity: target.severity, title: target.title };
    p.actions.ack(ref).then(
      (r) => {
        if (!r.ok) setDialog({ kind: 'refused', what: 'ack', why: r.detail });
      },
      (e: Error) => setDialog({ kind: 'refused', what: 'ack', why: e.message }),
    );
  };

  const runCommand = (c: Command, dangerous: boolean): void => {
    if (dangerous && p.actions.readOnly) {
      setDialog({ kind: 'refused', what: c, why: READ_ONLY_WHY });
      return;
    }
    const off = stateRef.current ? (bindingOf(c).disabled?.(stateRef.current) ?? null) : null;
    if (off) {
      setDialog({ kind: 'refused', what: c, why: off.why });
      return;
    }
    // zoomed, tab walks every panel (each in turn fills the screen)
    const shown = p.painter ? frameRef.current : frame;
    const visible = viewRef.current.zoom ? FOCUSABLE : shown ? visiblePanels(shown.layout) : [];
    const move = (delta: number) => {
      const f = viewRef.current.focus;
      if (f === 'alerts') return selectAlert((i) => i + delta);
      const sign = BOTTOM_ANCHORED.includes(f) ? -1 : 1;
      setViewNow((v) => ({ ...v, scroll: { ...v.scroll, [f]: Math.max(0, (v.scroll[f] ?? 0) + sign * delta) } }));
    };
    const page = Math.max(1, size.rows - 10);
    switch (c) {
      case 'quit':
        quit();
        return;
      case 'help':
        setDialog({ kind: 'help' });
        return;
      case 'redraw':
        p.painter?.invalidate();
        refresh();
        return;
      case 'dump':
        startDump();
        return;
      case 'halt': {
        // a request in force (from any cockpit or script) or a .HALT already there: show it, offer cancel/escalation
        const st = stateRef.current;
        const req = st ? activeRequest(st.requests) : null;
        if (req)
          setDialog({
            kind: 'halt-track',
            mode: 'after-checkpoint',
            startedAt: req.ts,
            startStep: st?.run.step ?? null,
            result: null,
            escalation: null,
            killArmed: false,
          });
        else if (st?.run.control.halt.present)
          setDialog({
            kind: 'halt-track',
            mode: 'now',
            startedAt: st.run.control.halt.mtimeMs ?? Date.now(),
            startStep: st.run.step ?? null,
            result: null,
            escalation: null,
            killArmed: false,
          });
        else setDialog({ kind: 'halt-choose', startedAt: Date.now() });
        return;
      }
      case 'relaunch': {
        const prep = p.actions.prepareRelaunch;
        if (!prep) {
          setDialog({
            kind: 'relaunch',
            stage: 'confirm',
            input: '',
            haltInput: '',
            removeHalt: false,
            result: null,
            error: null,
          });
          return;
        }
        // what a relaunch would do — or why it cannot work — is said before anything is asked
        setDialogNow({
          kind: 'relaunch',
          stage: 'checking',
          input: '',
          haltInput: '',
          removeHalt: false,
          result: null,
          error: null,
          info: null,
        });
        prep.call(p.actions).then(
          (info) => {
            if (dialogRef.current?.kind !== 'relaunch' || dialogRef.current.stage !== 'checking') return;
            if (info.refusal) setDialogNow({ kind: 'refused', what: 'relaunch', why: info.refusal });
            else setDialogNow({ ...dialogRef.current, stage: 'confirm', info });
          },
          (e: Error) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', error: e.message } : d)),
        );
        return;
      }
      case 'focus-next':
      case 'focus-prev': {
        if (visible.length === 0) return;
        const i = visible.indexOf(viewRef.current.focus);
        const n = (i + (c === 'focus-next' ? 1 : -1) + visible.length) % visible.length;
        setViewNow((v) => ({ ...v, focus: visible[n]!, zoom: v.zoom ? visible[n]! : null }));
        return;
      }
      case 'zoom':
        setViewNow((v) => ({ ...v, zoom: v.zoom ? null : v.focus }));
        return;
      case 'scroll-up':
        move(-1);
        return;
      case 'scroll-down':
        move(1);
        return;
      case 'page-up':
        move(-page);
        return;
      case 'page-down':
        move(page);
        return;
      case 'ack':
        ackAlert();
        return;
      case 'top':
        if (viewRef.current.focus === 'alerts') return selectAlert(() => 0);
        setViewNow((v) => ({ ...v, scroll: { ...v.scroll, [v.focus]: BOTTOM_ANCHORED.includes(v.focus) ? 1e9 : 0 } }));
        return;
      case 'bottom':
        if (viewRef.current.focus === 'alerts') return selectAlert(() => Infinity);
        setViewNow((v) => ({ ...v, scroll: { ...v.scroll, [v.focus]: BOTTOM_ANCHORED.includes(v.focus) ? 0 : 1e9 } }));
        return;
      case 'ema':
        setView((v) => ({ ...v, ema: !v.ema }));
        return;
      case 'chart-range':
        setView((v) => ({ ...v, chartRange: v.chartRange === 'recent' ? 'all' : 'recent' }));
        return;
    }
  };

  useInput(
    (input, key) => {
      const d = dialogRef.current;
      if (d) {
        if (key.ctrl && input === 'c') {
          // at a question, Ctrl-C takes the safe default: no action, the question closes
          if (
            d.kind === 'halt-choose' ||
            (d.kind === 'relaunch' && (d.stage === 'confirm' || d.stage === 'halt-confirm'))
          ) {
            setDialogNow(null);
            return;
          }
          return quit();
        }
        dialogKey(input, key, d);
        return;
      }
      const b = commandFor(input, key);
      if (b) runCommand(b.command, !!b.dangerous);
    },
    { isActive: p.interactive },
  );

  if (p.painter) return null;
  if (!frame) return <Text dimColor>nsa-top: reading the run…</Text>;
  return (
    <Box flexDirection="column">
      {frame.lines.map((l, i) => (
        <Text key={i} wrap="truncate-end">
          {lineToAnsi(l, p.noColor)}
        </Text>
      ))}
    </Box>
  );
}
