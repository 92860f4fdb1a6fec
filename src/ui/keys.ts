// Keys as data. A binding names its keys (`['d']`, `['ctrl+l']`, `['up', 'k']`); one matcher turns
// Ink's (input, key) into the binding, and the text the help screen, the footer, the dialogs and the
// README show is derived from the same names, so what is shown and what is matched cannot drift.
// A binding that cannot act says why (`disabled`), and that reason is what the footer, `?` and the
// refusal print.
import type { Key } from 'ink';
import { READ_ONLY_WHY } from '../checks/present.js';

/**
 * A key by name: one printable character (`d`, `?`, `G`), or a named key (`up`, `down`, `left`,
 * `right`, `pgup`, `pgdn`, `home`, `end`, `enter`, `esc`, `tab`, `backspace`), with optional
 * `ctrl+` / `shift+` in front.
 */
export type KeyName = string;

/** why a key does nothing now: a word for the footer hint, a sentence for `?` and the refusal */
export interface Disabled {
  short: string;
  why: string;
}

export interface Binding<C extends string = string, X = unknown> {
  command: C;
  keys: readonly KeyName[];
  /** how the keys are written when listing each would say less (`1–9`); absent: each key's name */
  label?: string;
  /** short label for the footer or the dialog's key line; absent: help only */
  hint?: string;
  help: string;
  /** why the command cannot act in context x (null: it can); absent: it always can */
  disabled?: (x: X) => Disabled | null;
}

const NAMED: Record<string, { test: (k: Partial<Key>) => boolean; show: string }> = {
  up: { test: (k) => !!k.upArrow, show: '↑' },
  down: { test: (k) => !!k.downArrow, show: '↓' },
  left: { test: (k) => !!k.leftArrow, show: '←' },
  right: { test: (k) => !!k.rightArrow, show: '→' },
  pgup: { test: (k) => !!k.pageUp, show: 'pgup' },
  pgdn: { test: (k) => !!k.pageDown, show: 'pgdn' },
  home: { test: (k) => !!k.home, show: 'home' },
  end: { test: (k) => !!k.end, show: 'end' },
  enter: { test: (k) => !!k.return, show: 'enter' },
  esc: { test: (k) => !!k.escape, show: 'esc' },
  tab: { test: (k) => !!k.tab, show: 'tab' },
  // terminals send DEL for the backspace key, which Ink reports as `delete`
  backspace: { test: (k) => !!k.backspace || !!k.delete, show: 'backspace' },
};

function parse(name: KeyName): { ctrl: boolean; shift: boolean; base: string } {
  const parts = name.length > 1 ? name.split('+') : [name];
  const base = parts.pop()!;
  if (base === '' || (base.length > 1 && !NAMED[base])) throw new Error(`unknown key name: ${name}`);
  return { ctrl: parts.includes('ctrl'), shift: parts.includes('shift'), base };
}

/** Whether Ink's (input, key) is the named key. */
export function isKey(name: KeyName, input: string, key: Partial<Key>): boolean {
  const n = parse(name);
  if (!!key.ctrl !== n.ctrl) return false;
  const named = NAMED[n.base];
  // Ink reports esc as meta too; a character carries its own case, so shift is the named keys' only
  if (named) return named.test(key) && (n.base === 'esc' || !key.meta) && !!key.shift === n.shift;
  return input === n.base && !key.meta;
}

// the footer writes the same few keys every frame: each is worked out once
const keyTexts = new Map<string, string>();

/** How a key is written: `ctrl+l` → `ctrl-l`, `up` → `↑`. */
export function keyText(name: KeyName): string {
  let text = keyTexts.get(name);
  if (text === undefined) {
    const n = parse(name);
    text = [...(n.ctrl ? ['ctrl'] : []), ...(n.shift ? ['shift'] : []), NAMED[n.base]?.show ?? n.base].join('-');
    // (a key the operator typed is named too: the cache stays small whatever they type)
    if (keyTexts.size > 256) keyTexts.clear();
    keyTexts.set(name, text);
  }
  return text;
}

/** How a binding's keys are written: `↑ / k`. */
export function keysText(b: Pick<Binding, 'keys' | 'label'>): string {
  return b.label ?? b.keys.map(keyText).join(' / ');
}

/** The first binding one of whose keys is this key press (disabled or not). */
export function bindingFor<B extends Binding<string, never>>(
  bindings: readonly B[],
  input: string,
  key: Partial<Key>,
): B | null {
  for (const b of bindings) if (b.keys.some((k) => isKey(k, input, key))) return b;
  return null;
}

/** The first binding of this key press that can act in context x (a disabled one lets the next try). */
export function enabledBindingFor<X, B extends Binding<string, X>>(
  bindings: readonly B[],
  x: X,
  input: string,
  key: Partial<Key>,
): B | null {
  for (const b of bindings) if (b.keys.some((k) => isKey(k, input, key)) && !b.disabled?.(x)) return b;
  return null;
}

/** The one read-only refusal: what the footer, `?`, a refused key and the action layer say. */
export const READ_ONLY: Disabled = { short: 'read-only', why: READ_ONLY_WHY };

/** A reason in the footer's form `off(<word>)`. */
export const off = (short: string, why: string): Disabled => ({ short: `off(${short})`, why });
