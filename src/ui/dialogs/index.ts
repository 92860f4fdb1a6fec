// Dialogs: what an action needs from the operator (a choice, a typed confirmation) and what it did
// (progress, per-rank results), one file per dialog with its keys beside its view. The App owns the
// dialog value (useDialogs); this index gathers each dialog's keys (DIALOG_KEYS), which useDialogs acts
// on, the dialogs and the footer show, and the README lists, and picks the view for a dialog.
import type { Key } from 'ink';
import type { CockpitState } from '../../cockpit/state.js';
import { enabledBindingFor } from '../keys.js';
import type { Dialog, DialogBinding, DialogCtx, DialogView } from './common.js';
import { dumpView, DUMP_KEYS } from './dump.js';
import { haltChooseView, haltTrackView, HALT_CHOOSE_KEYS, HALT_TRACK_KEYS } from './halt.js';
import { helpMaxScroll as helpMaxScrollOf, helpView, HELP_KEYS, refusedView, REFUSED_KEYS } from './help.js';
import { relaunchView, RELAUNCH_KEYS } from './relaunch.js';

export type { Dialog, DialogBinding, DialogCommand, DialogCtx, DialogOf, DialogView } from './common.js';
export { typing } from './common.js';
export { escalationGate, trackedRequest } from './halt.js';
export { parseSteps, relaunchDialog } from './relaunch.js';

/**
 * The dialogs' keys: App acts on them, the dialogs show them, the README lists them. The first binding
 * of the key that is not disabled acts; a key none can take does nothing (the relaunch question
 * takes it as typed text).
 */
export const DIALOG_KEYS: { readonly [K in Dialog['kind']]: readonly DialogBinding<K>[] } = {
  help: HELP_KEYS,
  refused: REFUSED_KEYS,
  dump: DUMP_KEYS,
  'halt-choose': HALT_CHOOSE_KEYS,
  'halt-track': HALT_TRACK_KEYS,
  relaunch: RELAUNCH_KEYS,
};

/** The dialog's binding for a key press that can act now, or null (the key does nothing here). */
export function dialogBindingFor(x: DialogCtx, input: string, key: Partial<Key>): DialogBinding | null {
  return enabledBindingFor(DIALOG_KEYS[x.d.kind] as readonly DialogBinding[], x, input, key);
}

/** Every dialog binding once, in order; one that every dialog has (ctrl-c) last. */
export function dialogBindings(): DialogBinding[] {
  const lists = Object.values(DIALOG_KEYS) as (readonly DialogBinding[])[];
  const everywhere = (b: DialogBinding) => lists.every((l) => l.includes(b));
  const out: DialogBinding[] = [];
  for (const l of lists) for (const b of l) if (!out.includes(b) && !everywhere(b)) out.push(b);
  for (const b of lists[0]!) if (everywhere(b)) out.push(b);
  return out;
}

/** The most the help (with every dialog's keys) can be scrolled down with `room` rows for its body. */
export function helpMaxScroll(s: CockpitState, W: number, room: number): number {
  return helpMaxScrollOf(s, W, room, dialogBindings());
}

/** `room`: the rows the dialog's body may take (the help scrolls within them) */
export function dialogView(d: Dialog, s: CockpitState, now: number, width: number, room = Infinity): DialogView {
  switch (d.kind) {
    case 'help':
      return helpView(s, width, room, d.scroll ?? 0, dialogBindings());
    case 'refused':
      return refusedView(d, width);
    case 'dump':
      return dumpView(d, now);
    case 'halt-choose':
      return haltChooseView(s, width, d);
    case 'halt-track':
      return haltTrackView(d, s, now, width);
    case 'relaunch':
      return relaunchView(d, s, width);
  }
}
