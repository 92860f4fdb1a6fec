// What every dialog shares: the dialog values the App holds (useDialogs), their commands and keys'
// shape, the keys every dialog has (ctrl-c, close), and the small pieces their views draw with.
import type { CockpitState } from '../../cockpit/state.js';
import type { ActionOutcome, DumpOutcome, RelaunchInfo } from '../../cockpit/actions.js';
import { type Binding, type Disabled, keyText, off } from '../keys.js';
import type { Role } from '../palette.js';
import { type Line, t } from '../text.js';

/**
 * A dialog that can signal or halt takes its confirming keys only once it has been on screen a
 * moment (src/ui/typeahead.ts): keys typed before that are dropped and counted here, for the dialog
 * to say so.
 */
export interface TypeAhead {
  /** on screen for the guard window: its signalling keys act (false/absent: they are dropped) */
  armed?: boolean;
  /** signalling keys dropped because they came before the dialog was on screen */
  ignored?: number;
}

export type Dialog =
  | { kind: 'help'; /** lines scrolled down */ scroll?: number }
  | { kind: 'refused'; what: string; why: string }
  | {
      kind: 'dump';
      startedAt: number;
      /** the ranks asked for (the one selected in Ranks); null: every rank */
      ranks: number[] | null;
      progress: string[];
      result: DumpOutcome | null;
      error: string | null;
    }
  | ({ kind: 'halt-choose'; startedAt: number } & TypeAhead)
  | ({
      kind: 'halt-track';
      mode: 'now' | 'after-checkpoint';
      startedAt: number;
      startStep: number | null;
      result: ActionOutcome | null;
      escalation: { sig: 'SIGINT' | 'SIGKILL'; result: ActionOutcome | null } | null;
      /** SIGKILL needs a second key press */
      killArmed: boolean;
    } & TypeAhead)
  | {
      kind: 'relaunch';
      /**
       * steps: a FINISHED run — how many steps to train to (as `relaunch --steps N`), asked first;
       * checking: asking what a relaunch would do, before anything is typed
       */
      stage: 'steps' | 'checking' | 'confirm' | 'halt-confirm' | 'running' | 'done';
      /** the step count as typed, and as taken (null: none asked; the run trains to its own total) */
      stepsInput: string;
      steps: number | null;
      input: string;
      haltInput: string;
      removeHalt: boolean;
      result: ActionOutcome | null;
      error: string | null;
      info?: RelaunchInfo | null;
    };

export type DialogCommand =
  | 'close'
  | 'quit'
  | 'halt-now'
  | 'halt-after-checkpoint'
  | 'cancel-request'
  | 'sigint'
  | 'sigkill'
  | 'submit'
  | 'erase'
  | 'line-up'
  | 'line-down'
  | 'page-up'
  | 'page-down';

export type DialogOf<K extends Dialog['kind']> = Extract<Dialog, { kind: K }>;
/** what a dialog key is judged on: the run (null before the first snapshot), the dialog, the time */
export interface DialogCtx<K extends Dialog['kind'] = Dialog['kind']> {
  s: CockpitState | null;
  d: DialogOf<K>;
  now: number;
}
export type DialogBinding<K extends Dialog['kind'] = Dialog['kind']> = Binding<DialogCommand, DialogCtx<K>>;

export const unless = (cond: boolean, why: string): Disabled | null => (cond ? null : off(why, why));

/** the relaunch dialog is asking: what is typed is the answer */
export const typing = (d: DialogOf<'relaunch'>): boolean =>
  d.stage === 'steps' || d.stage === 'confirm' || d.stage === 'halt-confirm';

/** Ctrl-C quits from any dialog, but at a question it takes the safe default: no action, the question closes. */
export const QUIT: Binding<DialogCommand, { d: Dialog }> = {
  command: 'quit',
  keys: ['ctrl+c'],
  help: 'in any dialog: quit nsa-top (at a question, halt or relaunch, it answers no instead)',
  disabled: ({ d }) =>
    d.kind === 'halt-choose' || (d.kind === 'relaunch' && typing(d)) ? off('question', 'it answers no') : null,
};
export const CLOSE_READ: Binding<DialogCommand> = {
  command: 'close',
  keys: ['esc', '?', 'q', 'enter'],
  hint: 'closes',
  help: 'in the help or a refusal: close it',
};
/**
 * The dialogs' keys: App acts on them, the dialogs show them, the README lists them. The first binding
 * of the key that is not disabled acts; a key none can take does nothing (the relaunch question
 * takes it as typed text).
 */

/** A dialog's binding for a command (the first; for its key and hint on screen). */
export function dk<K extends Dialog['kind']>(
  list: readonly DialogBinding<K>[],
  command: DialogCommand,
): DialogBinding<K> {
  return list.find((b) => b.command === command)!;
}

/** `n halt now (.HALT)`: a binding's first key, bold, and its hint. */
export function hintOf(b: Binding<string, never>, hint = b.hint ?? '', role?: Role): Line {
  return [t(keyText(b.keys[0]!), 'accent', { bold: true }), t(` ${hint}`, role)];
}

export interface DialogView {
  title: string;
  role: Role;
  lines: Line[];
}

export const input = (label: string, value: string): Line => [
  t(label),
  t(value, 'title', { bold: true }),
  t('▏', 'accent'),
];
