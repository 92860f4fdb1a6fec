// GPUs: memory bar, utilisation, power vs limit, temperature, and which ranks sit on each device.
// Fields a device does not report are left out (never shown as 0).
import type { CockpitState } from '../../cockpit/state.js';
import type { GpuDevice, GpuSample } from '../../remote/types.js';
import { bar, dur, mib } from '../format.js';
import type { Role } from '../palette.js';
import { clean, type Line, t } from '../text.js';
import type { PanelFn } from '../view.js';
import type { Health } from '../../checks/index.js';
import { HEALTH_ROLE } from './header.js';
import { hostLines } from './host.js';

function ranksOn(s: CockpitState, dev: GpuDevice): { rank: number; mem: number | null }[] {
  const out: { rank: number; mem: number | null }[] = [];
  for (const r of s.procs?.ranks ?? [])
    if (r.gpuUuid && r.gpuUuid === dev.uuid) out.push({ rank: r.rank, mem: r.gpuMemMiB });
  return out.sort((a, b) => a.rank - b.rank);
}

function deviceLines(s: CockpitState, g: GpuSample, w: number, stale: boolean): Line[] {
  const lines: Line[] = [];
  let node: string | undefined;
  for (const d of g.devices) {
    // a multi-node run: each node's devices under its name (device indexes are per node)
    if (d.host !== undefined && d.host !== node) lines.push([t(`on ${clean(d.host)}`, 'dim')]);
    node = d.host;
    const frac = d.memUsedMiB != null && d.memTotalMiB ? d.memUsedMiB / d.memTotalMiB : null;
    // colours are the evaluation's (src/checks); a device it did not judge (stale telemetry) stays plain
    const judged = stale ? undefined : s.gpuHealth?.find((x) => x.uuid === d.uuid);
    const role = (h: Health | undefined): Role | undefined => (h && h !== 'ok' ? HEALTH_ROLE[h] : undefined);
    const memRole: Role = role(judged?.mem) ?? 'bar';
    const barW = Math.max(4, Math.min(20, w - 52));
    const name = clean(d.name).replace(/^NVIDIA /, '');
    const l: Line = [
      t(`${d.mig ? `${d.index}m` : d.index} `, 'title'),
      t(name.slice(0, 14).padEnd(Math.min(14, name.length) + 1), 'dim'),
    ];
    if (frac != null)
      l.push(t(bar(frac, barW), stale ? 'dim' : memRole), t(` ${mib(d.memUsedMiB)}/${mib(d.memTotalMiB)}`));
    else if (d.memUsedMiB != null) l.push(t(`mem ${mib(d.memUsedMiB)}`));
    if (d.utilPct != null) l.push(t(` ${String(Math.round(d.utilPct)).padStart(3)}%`, role(judged?.util)));
    if (d.powerW != null)
      l.push(
        t(
          ` ${Math.round(d.powerW)}${d.powerLimitW != null ? `/${Math.round(d.powerLimitW)}` : ''}W`,
          role(judged?.power),
        ),
      );
    if (d.tempC != null) l.push(t(` ${Math.round(d.tempC)}°C`, role(judged?.temp)));
    if (d.invalid?.length) l.push(t(` invalid: ${d.invalid.join(', ')}`, 'warn'));
    const on = ranksOn(s, d);
    const rankTxt = on.map((r) => `r${r.rank}${r.mem != null ? ` ${mib(r.mem)}` : ''}`).join(' ');
    lines.push(l);
    if (rankTxt) lines.push([t('   ranks: ', 'dim'), t(rankTxt, 'info')]);
  }
  if (g.devices.length === 0) lines.push([t('nvidia-smi lists no devices', 'warn')]);
  // a multi-node run: the nodes whose GPUs are not in the list above, and why
  for (const n of g.nodes ?? [])
    if (n.status !== 'ok')
      lines.push([t(`${clean(n.host)}: ${clean(n.why ?? n.status)}`, n.status === 'no-nvidia-tools' ? 'dim' : 'warn')]);
  return lines;
}

export const gpusPanel: PanelFn = (a) => {
  const host = hostLines(a.s, a.w);
  const r = gpuLines(a);
  // a CPU-only host: the host's own resources first, they are what there is to watch
  if (a.s.gpu?.status === 'no-nvidia-tools' || !a.s.gpu) return { ...r, lines: [...host, ...r.lines] };
  // GPUs first; the host lines come before the GPUs' "ranks:" detail lines when rows are short
  let gl = r.lines;
  if (gl.length + host.length > a.h) gl = gl.filter((l) => l[0]?.text !== '   ranks: ');
  const room = Math.max(0, a.h - gl.length);
  return { ...r, lines: [...gl, ...host.slice(0, Math.max(room, Math.min(host.length, 1)))] };
};

const gpuLines: PanelFn = ({ s, w, h, now }) => {
  const g = s.gpu;
  if (!g) return { lines: [[t(s.replay ? 'no GPU history in this recording' : 'waiting for telemetry…', 'dim')]] };
  switch (g.status) {
    case 'no-nvidia-tools': {
      const lines: Line[] = [[t('no NVIDIA tools on this host (nvidia-smi not found)', 'dim')]];
      const mem = s.run.ranks.filter((r) => r.memReservedMiB != null);
      if (mem.length)
        lines.push([t('heartbeat mem: ', 'dim'), t(mem.map((r) => `r${r.rank} ${mib(r.memReservedMiB)}`).join(' '))]);
      return { lines };
    }
    case 'error':
      return { lines: [[t(`nvidia-smi error: ${clean(g.message)}`, 'crit')]] };
    case 'not-answering': {
      const lines: Line[] = [
        [t(`nvidia-smi not answering for ${dur((now - g.since) / 1000)}`, 'crit', { bold: true })],
      ];
      if (g.lastGood) {
        lines.push([t(`last good ${dur((now - g.lastGood.at) / 1000)} ago:`, 'dim')]);
        lines.push(...deviceLines(s, g.lastGood, w, true));
      }
      return { lines: lines.slice(0, h) };
    }
    case 'ok': {
      const lines = deviceLines(s, g, w, false);
      // drop the "ranks:" detail lines first when space is short
      const compact = lines.length > h ? lines.filter((l) => l[0]?.text !== '   ranks: ') : lines;
      return { lines: compact, note: `${g.devices.length} dev` };
    }
  }
};
