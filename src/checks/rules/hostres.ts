// The host's own resources: RAM running out, the run's disk filling. Pure: the samples are the
// readings the observation carried (CheckInput.hostStats, src/remote/hoststats.ts), kept by the
// Checker in a HostSeries between evaluations.
//
// One alert per cause: host RAM is one alert (`host-mem`) whose severity rises from warning to
// critical as the time to exhaustion shrinks — never a warning and a critical side by side — and
// the ranks whose own RSS grows are named in it rather than alerted again on their own.
import type { Ctx } from '../context.js';
import type { HostStats } from '../../remote/hoststats.js';
import { linfit } from '../stats.js';
import type { Severity } from '../types.js';
import { type Draft, a } from './common.js';

interface Sample {
  at: number;
  mib: number;
}

/** RAM is fitted over this window (a leak is steady) … */
const MEM_WINDOW_MS = 120_000;
/** … disks over a longer one (checkpoints land in bursts) */
const DISK_WINDOW_MS = 600_000;
const MAX_SAMPLES = 400;

/** The host readings seen, by time (host clock). */
export class HostSeries {
  readonly mem: Sample[] = [];
  readonly disks = new Map<string, Sample[]>();
  latest: HostStats | null = null;

  add(s: HostStats | null | undefined): void {
    if (!s) return;
    if (this.latest && s.at <= this.latest.at) {
      if (s.at < this.latest.at)
        this.clear(); // another host, or its clock went back
      else return; // the same reading again (over SSH it is refreshed every few seconds)
    }
    this.latest = s;
    if (s.memAvailMiB !== null) push(this.mem, { at: s.at, mib: s.memAvailMiB }, MEM_WINDOW_MS);
    for (const d of s.disks) {
      let arr = this.disks.get(d.role);
      if (!arr) this.disks.set(d.role, (arr = []));
      push(arr, { at: s.at, mib: d.availMiB }, DISK_WINDOW_MS);
    }
  }

  clear(): void {
    this.mem.length = 0;
    this.disks.clear();
    this.latest = null;
  }
}

function push(arr: Sample[], s: Sample, windowMs: number): void {
  arr.push(s);
  while (arr.length > MAX_SAMPLES || (arr.length > 2 && s.at - arr[0]!.at > windowMs)) arr.shift();
}

/** "~4m", "~45s", "~2h10m": an estimate, said as one */
export function roughDur(s: number): string {
  if (!Number.isFinite(s)) return '∞';
  if (s < 90) return `~${Math.max(1, Math.round(s))}s`;
  if (s < 5400) return `~${Math.round(s / 60)}m`;
  const h = Math.floor(s / 3600);
  return `~${h}h${String(Math.round((s - h * 3600) / 60)).padStart(2, '0')}m`;
}

const gib = (mib: number) => (mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`);

/**
 * How fast free memory is falling (MiB/s, > 0 when consumed), from a least-squares fit of the
 * window's readings; null when too few readings, a span shorter than `minSpanS`, no steady trend, or
 * a trend that did not hold in the newest half of the span (a boot that filled RAM, then levelled off).
 */
export function memConsumption(
  samples: readonly Sample[],
  minSpanS = 5,
): { rate: number; r2: number; spanS: number } | null {
  const fitOf = (xs: readonly Sample[]) => {
    if (xs.length < 5) return null;
    const spanS = (xs[xs.length - 1]!.at - xs[0]!.at) / 1000;
    if (spanS < Math.max(2.5, minSpanS / 2)) return null;
    const t0 = xs[0]!.at;
    const fit = linfit(
      xs.map((x) => (x.at - t0) / 1000),
      xs.map((x) => x.mib),
    );
    return fit ? { rate: -fit.slope, r2: fit.r2, spanS } : null;
  };
  const all = fitOf(samples);
  if (!all || all.spanS < minSpanS || all.r2 < 0.6) return null;
  // the newest half must be consuming too, at no less than half the whole window's rate
  const mid = samples[samples.length - 1]!.at - (all.spanS * 1000) / 2;
  const recent = fitOf(samples.filter((x) => x.at >= mid));
  if (!recent || recent.rate < all.rate / 2) return null;
  return all;
}

/** Disk: net space used per second over the window (bursty: first to last, not a fit). */
export function diskConsumption(samples: readonly Sample[]): { rate: number; spanS: number } | null {
  if (samples.length < 3) return null;
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const spanS = (last.at - first.at) / 1000;
  if (spanS < 30) return null;
  return { rate: (first.mib - last.mib) / spanS, spanS };
}

export function ruleHostResources(ctx: Ctx, series: HostSeries): Draft[] {
  const s = series.latest;
  if (!s) return [];
  const t = ctx.t;
  const out: Draft[] = [];
  // RAM
  if (s.memAvailMiB !== null && s.memTotalMiB !== null && s.memTotalMiB > 0) {
    const avail = s.memAvailMiB;
    const frac = avail / s.memTotalMiB;
    const use = memConsumption(series.mem, t.hostMemTrendS);
    // a trend worth naming: at least 1 MiB/s
    const tte = use && use.rate >= 1 ? avail / use.rate : null;
    let sev: Severity | null = null;
    if ((tte !== null && tte <= t.hostMemCritS) || frac < t.hostMemLowCritFrac) sev = 'critical';
    else if ((tte !== null && tte <= t.hostMemWarnS) || frac < t.hostMemLowWarnFrac) sev = 'warning';
    if (sev) {
      const left = `${gib(avail)} of ${gib(s.memTotalMiB)} available`;
      const swap =
        s.swapTotalMiB && s.swapFreeMiB !== null
          ? `; swap ${gib(s.swapTotalMiB - s.swapFreeMiB)} of ${gib(s.swapTotalMiB)} used`
          : '; no swap';
      out.push(
        a(
          'host-mem',
          'host-memory',
          sev,
          tte !== null
            ? `host RAM runs out in ${roughDur(tte)} at +${use!.rate >= 10 ? Math.round(use!.rate) : use!.rate.toFixed(1)} MiB/s (${left})`
            : `host RAM low: ${left} (${Math.round(frac * 100)} %)`,
          (tte !== null
            ? `MemAvailable falls ${use!.rate.toFixed(1)} MiB/s (least-squares over the last ${Math.round(use!.spanS)} s, r² ${use!.r2.toFixed(2)}); critical within ${roughDur(t.hostMemCritS)} of running out, warning within ${roughDur(t.hostMemWarnS)}`
            : `below ${Math.round((sev === 'critical' ? t.hostMemLowCritFrac : t.hostMemLowWarnFrac) * 100)} % of MemTotal`) +
            `${swap}; when it runs out the kernel's OOM killer ends a process — likely a rank`,
        ),
      );
    }
  }
  // disks of the run dir and the checkpoints
  for (const d of s.disks) {
    if (d.totalMiB <= 0) continue;
    const frac = d.availMiB / d.totalMiB;
    const use = diskConsumption(series.disks.get(d.role) ?? []);
    const ttf = use && use.rate > 0.05 ? d.availMiB / use.rate : null;
    let sev: Severity | null = null;
    if ((ttf !== null && ttf <= t.diskFullCritS) || frac < t.diskLowCritFrac) sev = 'critical';
    else if ((ttf !== null && ttf <= t.diskFullWarnS) || frac < t.diskLowWarnFrac) sev = 'warning';
    if (!sev) continue;
    const where = `${d.role} disk${d.mount ? ` (${d.mount})` : ''}`;
    out.push(
      a(
        `host-disk:${d.role}`,
        'disk-space',
        sev,
        `${where} ${Math.round((1 - frac) * 100)} % full, ${gib(d.availMiB)} free` +
          (ttf !== null ? `; full in ${roughDur(ttf)} at +${use!.rate.toFixed(1)} MiB/s` : ''),
        `${d.path}: ${gib(d.availMiB)} of ${gib(d.totalMiB)} free` +
          (use
            ? `; ${use.rate > 0 ? 'used' : 'freed'} ${Math.abs(use.rate).toFixed(2)} MiB/s over ${Math.round(use.spanS)} s`
            : '') +
          "; a full disk fails the next checkpoint and log write — nsa-top never deletes training artifacts (the trainer's own retention does)",
      ),
    );
  }
  return out;
}

/** a rank's own memory growth (process RSS, rss_mib): the same cause as host RAM running out */
export function isRankRssLeak(id: string): boolean {
  return id.startsWith('mem-leak:') && (id.endsWith(':process RSS') || id.endsWith(':rss_mib'));
}

/**
 * One alert per cause: with host RAM alerted, the ranks whose process memory grows are the same
 * story — they are named in `host-mem` and not alerted again on their own. (GPU memory growth is
 * another cause and stays.)
 */
export function foldIntoHostMem(drafts: Draft[]): Draft[] {
  const host = drafts.find((d) => d.id === 'host-mem');
  if (!host) return drafts;
  const rankLeak = (d: Draft) => d.rule === 'memory-growth' && isRankRssLeak(d.id);
  const folded = drafts.filter(rankLeak);
  if (folded.length === 0) return drafts;
  const merged: Draft = {
    ...host,
    detail: `${host.detail}; growing: ${folded.map((d) => d.title).join('; ')}`,
  };
  return drafts.filter((d) => !rankLeak(d)).map((d) => (d === host ? merged : d));
}
