// The help (every key, and why any is off now) and a refusal: read, then closed.
import type { CockpitState } from '../../cockpit/state.js';
import { keysText } from '../keys.js';
import { KEYMAP } from '../keymap.js';
import { REPLAY_KEYS } from '../replaykeys.js';
import { clean, type Line, t, wrap } from '../text.js';
import { CLOSE_READ, type DialogBinding, type DialogOf, type DialogView, dk, QUIT } from './common.js';

const HELP_UP: DialogBinding<'help'> = { command: 'line-up', keys: ['up', 'k'], help: 'in the help: scroll up' };
const HELP_DOWN: DialogBinding<'help'> = {
  command: 'line-down',
  keys: ['down', 'j'],
  help: 'in the help: scroll down',
};
const HELP_PGUP: DialogBinding<'help'> = { command: 'page-up', keys: ['pgup'], help: 'in the help: a page up' };
const HELP_PGDN: DialogBinding<'help'> = {
  command: 'page-down',
  keys: ['pgdn'],
  help: 'in the help: a page down',
};
export const HELP_KEYS: readonly DialogBinding<'help'>[] = [QUIT, CLOSE_READ, HELP_UP, HELP_DOWN, HELP_PGUP, HELP_PGDN];
export const REFUSED_KEYS: readonly DialogBinding<'refused'>[] = [QUIT, CLOSE_READ];

/** A key and what it does, the text wrapped under itself (nothing is cut at 80 columns). */
function keyLines(keys: string, help: string, W: number, off: string | null = null): Line[] {
  const text = wrap(clean(help), Math.max(20, W - 16 - (off ? off.length + 2 : 0)));
  const pad = ' '.repeat(12);
  // keys too long for their column get a line of their own
  const own = keys.length >= 12;
  const out: Line[] = own ? [[t(keys, 'accent', { bold: true })]] : [];
  text.forEach((l, i) =>
    out.push([
      t(i === 0 && !own ? keys.padEnd(12) : pad, 'accent', { bold: true }),
      t(l),
      ...(off && i === text.length - 1 ? [t(`  ${off}`, 'warn')] : []),
    ]),
  );
  return out;
}

/**
 * Every line of the help, before it is fitted to the screen: the main screen's keys, then the
 * dialogs' (`dialogKeys`, from DIALOG_KEYS: the halt question's n and c, the halt window's x, i and
 * K, the relaunch dialog's typing), so that every key nsa-top takes is in it.
 */
function helpLines(s: CockpitState, W: number, dialogKeys: readonly DialogBinding[]): Line[] {
  const lines: Line[] = [];
  const said = new Set<string>();
  // a replay's timeline keys first (src/ui/replaykeys.ts)
  if (s.replay) {
    for (const b of REPLAY_KEYS) lines.push([t(keysText(b).padEnd(12), 'accent', { bold: true }), t(b.help)]);
    lines.push([]);
  }
  for (const b of KEYMAP) {
    const off = b.disabled?.(s) ?? null;
    lines.push(...keyLines(keysText(b), b.help, W, off?.short ?? null));
    // why it does nothing, once per reason (read-only silences four keys with one sentence)
    if (off && !said.has(off.why)) {
      said.add(off.why);
      lines.push(
        ...wrap(`disabled now: ${clean(off.why)}`, Math.max(20, W - 16)).map((l) => [t(' '.repeat(12)), t(l, 'warn')]),
      );
    }
  }
  if (dialogKeys.length) {
    lines.push([]);
    lines.push([t('In the dialogs', 'title', { bold: true })]);
    for (const b of dialogKeys) lines.push(...keyLines(keysText(b), b.help, W));
  }
  lines.push([]);
  lines.push([t('Dangerous actions are audited in <run>/.nsa-top/actions.jsonl.', 'dim')]);
  return lines;
}

/** The most the help can be scrolled down with `room` rows for its body. */
export function helpMaxScroll(
  s: CockpitState,
  W: number,
  room: number,
  dialogKeys: readonly DialogBinding[] = [],
): number {
  return Math.max(0, helpLines(s, W, dialogKeys).length - Math.max(1, room - 1));
}

/**
 * The help in `room` rows (the dialog's body): as many keys as fit from the scroll offset, and a
 * last line that is always there, saying how to scroll and how to close (q), at 80×24 too.
 */
export function helpView(
  s: CockpitState,
  W: number,
  room = Infinity,
  scroll = 0,
  dialogKeys: readonly DialogBinding[] = [],
): DialogView {
  const all = helpLines(s, W, dialogKeys);
  const rows = Math.max(1, room - 1);
  const off = Math.max(0, Math.min(scroll, all.length - rows));
  const shown = all.slice(off, off + rows);
  const close = `${keysText(dk(HELP_KEYS, 'close'))} closes`;
  const more = all.length > rows;
  const at = more ? `lines ${off + 1}–${off + shown.length} of ${all.length} · ↑↓ pgup pgdn scroll · ` : '';
  return { title: 'Keys', role: 'info', lines: [...shown, [t(at, 'dim'), t(close, 'accent', { bold: true })]] };
}

export function refusedView(d: DialogOf<'refused'>, W: number): DialogView {
  return {
    title: `${d.what}: refused`,
    role: 'warn',
    lines: [
      ...wrap(clean(d.why), W - 4).map((l): Line => [t(l, 'warn')]),
      [],
      [t(`${keysText(dk(REFUSED_KEYS, 'close'))} closes`, 'dim')],
    ],
  };
}
