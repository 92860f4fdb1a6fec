// No dangerous choice from type-ahead. Keys arrive in bursts (a fast typist, a paste, a laggy SSH
// link flushing several keys at once, tmux send-keys), and every key of a burst is handled in order
// (input.ts) — which is what makes `jjjjj` scroll five lines, and what would make `hn` open the halt
// question and answer it before it was ever on screen. So a dialog that can signal or halt (the halt
// question, the halt window) takes its signalling keys only once it has been drawn and stayed on
// screen for GUARD_MS: a human reads a question before answering it; type-ahead does not. Keys
// dropped so are counted and the dialog says so; every other key (esc, ctrl-c, the main screen's
// keys) acts as it arrives. Pure: useDialogs holds the clock and the dialog.
import type { Dialog, DialogCommand } from './dialogs/common.js';

/** how long a guarded dialog is on screen before its signalling keys act (ms): under a human's reading time */
export const GUARD_MS = 250;

/** the dialog commands that signal, halt or drop a halt request: never taken from type-ahead */
export const GUARDED: ReadonlySet<DialogCommand> = new Set<DialogCommand>([
  'halt-now',
  'halt-after-checkpoint',
  'cancel-request',
  'sigint',
  'sigkill',
]);

/**
 * Which opening of a guarded dialog this is ("halt-choose@<ms>"), or null for a dialog that cannot
 * signal. The halt window that follows the question is a new opening (it is a new question: i, K, x).
 */
export function guardedOpening(d: Dialog | null): string | null {
  if (!d) return null;
  if (d.kind === 'halt-choose' || d.kind === 'halt-track') return `${d.kind}@${d.startedAt}`;
  return null;
}

/** Whether a key bound to `command` must be dropped in dialog `d` (not yet armed). */
export function dropsKey(d: Dialog, command: DialogCommand | undefined): boolean {
  if (command === undefined || !GUARDED.has(command)) return false;
  if (d.kind !== 'halt-choose' && d.kind !== 'halt-track') return false;
  return d.armed !== true;
}

/** What the dialog says about keys it dropped, or null when none was. */
export function ignoredText(n: number | undefined): string | null {
  if (!n) return null;
  return `ignored ${n} key${n === 1 ? '' : 's'} typed before the dialog opened — press again to act`;
}

/** The line a guarded dialog shows until its keys act. */
export const OPENING_TEXT = 'reading… (keys typed before this was on screen are ignored)';
