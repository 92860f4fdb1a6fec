// The stack dump: progress while the ranks are signalled one by one, then each rank's outcome.
import { dur } from '../format.js';
import { keyText } from '../keys.js';
import type { Role } from '../palette.js';
import { clean, type Line, t } from '../text.js';
import { type DialogBinding, type DialogOf, type DialogView, dk, QUIT, unless } from './common.js';

export const DUMP_KEYS: readonly DialogBinding<'dump'>[] = [
  QUIT,
  { command: 'close', keys: ['esc'], hint: 'closes', help: 'in the stack dump: close it (the dump goes on)' },
  {
    command: 'close',
    keys: ['enter', 'q'],
    hint: 'closes',
    help: 'in the stack dump, once done: close it',
    disabled: ({ d }) => unless(!!(d.result || d.error), 'the dump is still running'),
  },
];

export function dumpView(d: DialogOf<'dump'>, now: number): DialogView {
  // which ranks first: one selected in Ranks is dumped alone, and the window says so before anything else
  const which = d.ranks
    ? `rank ${d.ranks.join(', ')} only — selected in the Ranks panel (esc there drops the selection: d dumps every rank)`
    : 'every rank of the run';
  const lines: Line[] = [[t(which, d.ranks ? 'accent' : 'dim', { bold: !!d.ranks })]];
  lines.push(...d.progress.slice(-6).map((p): Line => [t(clean(p), 'dim')]));
  if (d.error) lines.push([t(`failed: ${clean(d.error)}`, 'crit')]);
  if (d.result) {
    for (const r of d.result.results) {
      const role: Role = r.outcome === 'dumped' ? 'ok' : 'crit';
      const what =
        r.outcome === 'dumped'
          ? `dumped → ${r.file ?? ''}`
          : r.outcome === 'refused'
            ? `refused: ${r.why ?? ''}`
            : // the action's own words: "no stack written (lost) — why"
              (r.why ?? 'no stack written (lost)');
      lines.push([
        t(r.rank >= 0 ? `rank ${r.rank} ` : 'not a rank ', 'title'),
        // a multi-node run: the node the pid lives on (pids are per node)
        t(`${r.host !== undefined ? `on ${clean(r.host)} ` : ''}pid ${r.pid ?? '–'} `, 'dim'),
        t(clean(what), role),
      ]);
    }
    // a node that could not be reached and whose ranks are not known: said, never left out
    for (const n of d.result.outOfReach ?? [])
      lines.push([t(`${clean(n.why)}: its ranks are not known, none signalled there`, 'crit')]);
    if (d.result.results.some((r) => r.outcome !== 'dumped')) {
      if (d.result.pySpy)
        lines.push([
          t('py-spy is installed: `py-spy dump --pid PID` reads a stuck rank without its cooperation', 'info'),
        ]);
      else
        lines.push([
          t('py-spy is not installed (pip install py-spy) — it can read a rank that ignores SIGUSR1', 'dim'),
        ]);
    }
    lines.push([t(`the Dumps panel shows the set · ${keyText(dk(DUMP_KEYS, 'close').keys[0]!)} closes`, 'dim')]);
  } else if (!d.error)
    lines.push([
      t(
        d.ranks
          ? `sending SIGUSR1 to rank ${d.ranks.join(', ')} and waiting for its dump… ${dur((now - d.startedAt) / 1000)}`
          : `sending SIGUSR1 to one rank at a time (the next once the previous one's dump is there)… ${dur((now - d.startedAt) / 1000)}`,
        'info',
      ),
    ]);
  return {
    title: d.ranks ? `Stack dump of rank ${d.ranks.join(', ')}` : 'Stack dump',
    role: d.error ? 'crit' : 'info',
    lines,
  };
}
