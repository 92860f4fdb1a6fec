// The Host lines of the GPUs panel: RAM (used/total, available), swap, CPU %, load, and the disks of
// the run dir and of the checkpoints — the machine's own resources, local or over SSH
// (src/remote/hoststats.ts). Colours are the judge's: the host-mem / host-disk alerts (src/checks).
import type { CockpitState } from '../../cockpit/state.js';
import { bar } from '../format.js';
import type { Role } from '../palette.js';
import { type Line, t } from '../text.js';

const g = (mib: number) => (mib >= 1024 ? `${(mib / 1024).toFixed(1)}G` : `${Math.round(mib)}M`);

function alertRole(s: CockpitState, id: string): Role | undefined {
  const al = s.alerts.find((x) => x.id === id && x.clearing === undefined);
  return al ? (al.severity === 'critical' ? 'crit' : al.severity === 'warning' ? 'warn' : undefined) : undefined;
}

/** Host lines for a panel `w` wide (none before the first reading). */
export function hostLines(s: CockpitState, w: number): Line[] {
  const h = s.hostStats;
  if (!h) return [];
  const lines: Line[] = [];
  const barW = Math.max(4, Math.min(16, w - 40));
  const ram: Line = [t('RAM  ', 'title')];
  if (h.memTotalMiB !== null && h.memAvailMiB !== null) {
    const used = h.memTotalMiB - h.memAvailMiB;
    const role = alertRole(s, 'host-mem');
    ram.push(
      t(bar(used / h.memTotalMiB, barW), role ?? 'bar'),
      t(` ${g(used)}/${g(h.memTotalMiB)}`, role),
      t(` avail ${g(h.memAvailMiB)}`, role ?? 'dim'),
    );
  } else ram.push(t('not readable', 'dim'));
  if (h.swapTotalMiB !== null && h.swapFreeMiB !== null)
    ram.push(
      t(h.swapTotalMiB > 0 ? ` swap ${g(h.swapTotalMiB - h.swapFreeMiB)}/${g(h.swapTotalMiB)}` : ' no swap', 'dim'),
    );
  lines.push(ram);
  const cpu: Line = [t('CPU  ', 'title')];
  cpu.push(t(h.cpuPct === null ? '…' : `${String(Math.round(h.cpuPct)).padStart(3)}%`));
  if (h.load) cpu.push(t(` load ${h.load.map((x) => x.toFixed(2)).join(' ')}`, 'dim'));
  lines.push(cpu);
  for (const d of h.disks) {
    const role = alertRole(s, `host-disk:${d.role}`);
    const used = d.totalMiB > 0 ? 1 - d.availMiB / d.totalMiB : null;
    lines.push([
      t('disk ', 'title'),
      t(bar(used, barW), role ?? 'bar'),
      t(` ${g(d.availMiB)} free/${g(d.totalMiB)}`, role),
      t(` ${d.role}`, 'dim'),
    ]);
  }
  return lines;
}

/** rows the Host lines want (the layout sizes the GPUs slot with them) */
export function hostRows(s: CockpitState): number {
  return s.hostStats ? 2 + s.hostStats.disks.length : 0;
}
