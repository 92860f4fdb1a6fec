// The App's dialogs: the one open (if any), opening them, running the actions they start, and their
// keys (declared beside each dialog in dialogs/, gathered in DIALOG_KEYS, which the dialogs also show). Effects go through
// `actions` only; their outcome lands in the dialog that asked, if it is still that one.
import { type Key, useStdout } from 'ink';
import { type RefObject, useCallback, useEffect, useRef, useState } from 'react';
import type { CockpitActions } from '../cockpit/actions.js';
import type { CockpitState } from '../cockpit/state.js';
import { activeRequest } from '../checks/present.js';
import {
  type Dialog,
  type DialogOf,
  dialogBindingFor,
  helpMaxScroll,
  parseSteps,
  relaunchDialog,
  typing,
} from './dialogs/index.js';
import { haltAfterCheckpointDisabled, relaunchWantsStepsOf, stateVerdicts } from './keymap.js';
import { dropsKey, GUARD_MS, guardedOpening } from './typeahead.js';

export interface Dialogs {
  dialog: Dialog | null;
  /** the dialog as the next key sees it (keys can arrive faster than React re-renders) */
  ref: RefObject<Dialog | null>;
  set(d: Dialog | null): void;
  refuse(what: string, why: string): void;
  openHelp(): void;
  /** `d`: dump every rank (rank null), or the one selected; the dialog shows which, the progress and the outcome */
  openDump(rank: number | null): void;
  /** `h`: a request in force or a .HALT already there is shown (cancel, escalation); else the question */
  openHalt(): void;
  /** `r`: what a relaunch would do, or why it cannot work, is said before anything is asked */
  openRelaunch(): void;
  /** a key while a dialog is open */
  onKey(input: string, key: Partial<Key>, quit: () => void): void;
}

/** the dialog with its signalling keys armed, if it is still the opening the timer was for */
function arm(d: Dialog, opening: string): Dialog {
  if (guardedOpening(d) !== opening) return d;
  return d.kind === 'halt-choose' || d.kind === 'halt-track' ? { ...d, armed: true } : d;
}

/** the relaunch dialog's field being typed into at its stage */
function inputField(d: DialogOf<'relaunch'>): 'stepsInput' | 'input' | 'haltInput' {
  return d.stage === 'steps' ? 'stepsInput' : d.stage === 'confirm' ? 'input' : 'haltInput';
}

const failed = (e: Error) => ({ ok: false, result: 'failed' as const, detail: e.message });

export function useDialogs(actions: CockpitActions, stateRef: RefObject<CockpitState | null>): Dialogs {
  const [dialog, setDialog] = useState<Dialog | null>(null);
  const ref = useRef<Dialog | null>(null);
  ref.current = dialog;
  const set = (d: Dialog | null) => {
    ref.current = d;
    setDialog(d);
  };
  /** change the open dialog, whatever it has become by now (an action's outcome arriving) */
  const update = useCallback((fn: (d: Dialog) => Dialog | null) => setDialog((d) => (d ? fn(d) : d)), []);
  const refuse = (what: string, why: string) => set({ kind: 'refused', what, why });
  const { stdout } = useStdout();

  // a dialog that can signal or halt arms its keys GUARD_MS after it was drawn (typeahead.ts). This
  // effect runs after the screen's layout effect has painted the dialog, so the wait starts on screen.
  const opening = guardedOpening(dialog);
  useEffect(() => {
    if (opening === null) return;
    const t = setTimeout(() => update((d) => arm(d, opening)), GUARD_MS);
    return () => clearTimeout(t);
  }, [opening, update]);

  /** the help scrolled by `delta` lines (a page: the rows its body has), within what it holds */
  const scrollHelp = (d: DialogOf<'help'>, page: number) => {
    const s = stateRef.current;
    if (!s) return;
    // as compose sizes it: the frame is rows − 1 tall, the box takes 4 of them
    const room = Math.max(1, (stdout.rows || 24) - 5);
    const max = helpMaxScroll(s, Math.min((stdout.columns || 80) - 8, 96), room);
    const delta = Math.abs(page) === 1 ? page : Math.sign(page) * Math.max(1, room - 2);
    set({ ...d, scroll: Math.max(0, Math.min(max, (d.scroll ?? 0) + delta)) });
  };

  const openDump = (rank: number | null) => {
    const startedAt = Date.now();
    const mine = (d: Dialog): d is Extract<Dialog, { kind: 'dump' }> => d.kind === 'dump' && d.startedAt === startedAt;
    const ranks = rank === null ? null : [rank];
    set({ kind: 'dump', startedAt, ranks, progress: [], result: null, error: null });
    actions
      .dump(
        (line) => update((d) => (mine(d) ? { ...d, progress: [...d.progress, line].slice(-20) } : d)),
        ranks ? { ranks } : undefined,
      )
      .then(
        (result) => update((d) => (mine(d) ? { ...d, result } : d)),
        (e: Error) => update((d) => (mine(d) ? { ...d, error: e.message } : d)),
      );
  };

  const track = (mode: 'now' | 'after-checkpoint', startedAt: number): Dialog => ({
    kind: 'halt-track',
    mode,
    startedAt,
    startStep: stateRef.current?.run.step ?? null,
    result: null,
    escalation: null,
    killArmed: false,
  });

  const startHalt = (mode: 'now' | 'after-checkpoint') => {
    const startedAt = Date.now();
    set(track(mode, startedAt));
    const mine = (d: Dialog): d is Extract<Dialog, { kind: 'halt-track' }> =>
      d.kind === 'halt-track' && d.startedAt === startedAt;
    actions.halt(mode).then(
      (result) => update((d) => (mine(d) ? { ...d, result } : d)),
      (e: Error) => update((d) => (mine(d) ? { ...d, result: failed(e) } : d)),
    );
  };

  const openHalt = () => {
    const st = stateRef.current;
    const req = st ? activeRequest(st.requests) : null;
    if (req) set(track('after-checkpoint', req.ts));
    else if (st?.run.control.halt.present) set(track('now', st.run.control.halt.mtimeMs ?? Date.now()));
    else set({ kind: 'halt-choose', startedAt: Date.now() });
  };

  const startEscalate = (sig: 'SIGINT' | 'SIGKILL') => {
    update((d) => (d.kind === 'halt-track' ? { ...d, escalation: { sig, result: null }, killArmed: false } : d));
    actions.escalate(sig).then(
      (result) => update((d) => (d.kind === 'halt-track' ? { ...d, escalation: { sig, result } } : d)),
      (e: Error) => update((d) => (d.kind === 'halt-track' ? { ...d, escalation: { sig, result: failed(e) } } : d)),
    );
  };

  const startCancel = () => {
    actions.cancelHalt().then(
      (result) => update((d) => (d.kind === 'halt-track' ? { ...d, result } : d)),
      (e: Error) => update((d) => (d.kind === 'halt-track' ? { ...d, result: failed(e) } : d)),
    );
  };

  const startRelaunch = (removeStaleHalt: boolean) => {
    const cur = ref.current;
    const steps = cur?.kind === 'relaunch' ? cur.steps : null;
    update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'running', removeHalt: removeStaleHalt } : d));
    actions.relaunch({ removeStaleHalt, ...(steps != null ? { steps } : {}) }).then(
      (result) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', result } : d)),
      (e: Error) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', error: e.message } : d)),
    );
  };

  /** `r`: a FINISHED run that a step count would make fit asks for it first (the judge's verdict) */
  const openRelaunch = () => {
    const st = stateRef.current;
    if (st && relaunchWantsStepsOf(st)) return set(relaunchDialog('steps'));
    checkRelaunch(null);
  };

  /** what a relaunch (to `steps`, when asked) would do, or why it cannot work, before the name is typed */
  const checkRelaunch = (steps: number | null) => {
    const fresh = relaunchDialog('confirm', undefined, steps);
    const prep = actions.prepareRelaunch;
    if (!prep) return set(fresh);
    set({ ...fresh, stage: 'checking', info: null });
    prep.call(actions, steps).then(
      (info) => {
        const d = ref.current;
        if (d?.kind !== 'relaunch' || d.stage !== 'checking') return;
        if (info.refusal) refuse('relaunch', info.refusal);
        else set({ ...d, stage: 'confirm', info });
      },
      (e: Error) => update((d) => (d.kind === 'relaunch' ? { ...d, stage: 'done', error: e.message } : d)),
    );
  };

  /** the relaunch dialog's typed answer: the steps (a FINISHED run), the run name, then "remove" or "keep" for a stale .HALT */
  const relaunchInput = (d: DialogOf<'relaunch'>, typed: string, submit: boolean) => {
    const field = inputField(d);
    const value = (d[field] + typed).slice(0, 200);
    if (!submit) {
      if (typed) set({ ...d, [field]: value, error: null });
      return;
    }
    const s = stateRef.current;
    if (d.stage === 'steps') {
      const p = parseSteps(value);
      if ('error' in p) return set({ ...d, stepsInput: value, error: p.error });
      // past the steps it trained? the judge's verdict, in the words `nsa-top relaunch --steps N` gives
      const v = s ? stateVerdicts(s, p.n).relaunch : null;
      if (v && !v.ok) return set({ ...d, stepsInput: value, error: v.why });
      return checkRelaunch(p.n);
    }
    if (d.stage === 'confirm') {
      if (value !== s?.run.identity.name)
        return set({ ...d, input: value, error: `"${value}" is not the run name; nothing done` });
      if (s.run.control.halt.present) set({ ...d, input: value, stage: 'halt-confirm', error: null });
      else startRelaunch(false);
    } else if (value === 'remove') startRelaunch(true);
    else if (value === 'keep') startRelaunch(false);
    else set({ ...d, haltInput: value, error: 'type "remove" or "keep"' });
  };

  const onKey = (input: string, key: Partial<Key>, quit: () => void) => {
    const d = ref.current;
    if (!d) return;
    const b = dialogBindingFor({ s: stateRef.current, d, now: Date.now() }, input, key);
    // type-ahead: a signalling key that came before the dialog was on screen is dropped, and said so
    if ((d.kind === 'halt-choose' || d.kind === 'halt-track') && dropsKey(d, b?.command))
      return set({ ...d, ignored: (d.ignored ?? 0) + 1 });
    switch (b?.command) {
      case 'quit':
        return quit();
      case 'close':
        return set(null);
      case 'halt-now':
        return startHalt('now');
      case 'halt-after-checkpoint': {
        // the judge's verdict: a stalled run writes no checkpoint, so this would wait forever
        const no = stateRef.current ? haltAfterCheckpointDisabled(stateRef.current) : null;
        return no ? refuse('halt after the next checkpoint', no.why) : startHalt('after-checkpoint');
      }
      case 'cancel-request':
        return startCancel();
      case 'sigint':
        return startEscalate('SIGINT');
      case 'sigkill':
        // SIGKILL needs a second press
        if (d.kind === 'halt-track') {
          if (d.killArmed) startEscalate('SIGKILL');
          else set({ ...d, killArmed: true });
        }
        return;
      case 'erase':
        if (d.kind === 'relaunch') {
          const field = inputField(d);
          set({ ...d, [field]: d[field].slice(0, -1), error: null });
        }
        return;
      case 'submit':
        if (d.kind === 'relaunch') relaunchInput(d, '', true);
        return;
      case 'line-up':
      case 'line-down':
      case 'page-up':
      case 'page-down':
        if (d.kind === 'help')
          scrollHelp(d, { 'line-up': -1, 'line-down': 1, 'page-up': -2, 'page-down': 2 }[b.command]);
        return;
      case undefined:
        // typed or pasted text; a chunk may carry the Enter too ("621\r")
        if (d.kind === 'relaunch' && typing(d))
          relaunchInput(d, key.ctrl || key.meta ? '' : input.replace(/[\x00-\x1f\x7f]/g, ''), /[\r\n]/.test(input));
        return;
    }
  };

  return {
    dialog,
    ref,
    set,
    refuse,
    openHelp: () => set({ kind: 'help' }),
    openDump,
    openHalt,
    openRelaunch,
    onKey,
  };
}
