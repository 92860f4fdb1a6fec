// The help (every key, and why any is off now) and a refusal: read, then closed.
import type { CockpitState } from '../../cockpit/state.js';
import { keysText } from '../keys.js';
import { KEYMAP } from '../keymap.js';
import { clean, type Line, t, wrap } from '../text.js';
import { CLOSE_READ, type DialogBinding, type DialogOf, type DialogView, dk, QUIT } from './common.js';

export const HELP_KEYS: readonly DialogBinding<'help'>[] = [QUIT, CLOSE_READ];
export const REFUSED_KEYS: readonly DialogBinding<'refused'>[] = [QUIT, CLOSE_READ];

export function helpView(s: CockpitState, W: number): DialogView {
  const lines: Line[] = [];
  const said = new Set<string>();
  for (const b of KEYMAP) {
    const off = b.disabled?.(s) ?? null;
    lines.push([
      t(keysText(b).padEnd(12), 'accent', { bold: true }),
      t(b.help),
      ...(off ? [t(`  ${off.short}`, 'warn')] : []),
    ]);
    // why it does nothing, once per reason (read-only silences four keys with one sentence)
    if (off && !said.has(off.why)) {
      said.add(off.why);
      lines.push(
        ...wrap(`disabled now: ${clean(off.why)}`, Math.max(20, W - 16)).map((l) => [t(' '.repeat(12)), t(l, 'warn')]),
      );
    }
  }
  lines.push([]);
  lines.push([
    t(
      `${keysText(dk(HELP_KEYS, 'close'))} closes. Dangerous actions are audited in <run>/.nsa-top/actions.jsonl.`,
      'dim',
    ),
  ]);
  return { title: 'Keys', role: 'info', lines };
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
