// The looping watchdog's ranks between two reads of the whole process table, on its own host: each
// rank the last table proved is looked at every round in its own /proc/PID/stat and wchan (two small
// synchronous reads a rank: ~0.1 ms of CPU a round for 2 ranks, against ~4 ms for a table; the
// kernel answers them from the task struct, as the table reads them, src/remote/local/procs.ts) and
// handed to the judge as it is now — state, wait channel, CPU % since the last look, RSS — with what
// the table proved kept (pid + start time, argv, environ, rank). So a rank the judge sees is never
// older than a round, while the table itself (every trainer-looking process on the box, then the
// proof of each) is read only on a slow cadence (./peekcadence.ts). A rank whose life changed since
// the table (stopped, dead, a zombie, its pid another process's; or running again) is not refreshed:
// the table is read that same round (./rankpeek.ts lifeChanged), as it is for new pids in the
// heartbeats (a restart).
import type { Host } from '../remote/host.js';
import { auxv } from '../remote/local/procs.js';
import { ProcStatFds } from '../remote/local/statfds.js';
import { parseStat } from '../remote/procs.js';
import type { ProcInfo, RunProcesses } from '../remote/types.js';
import { lifeChanged, peekTargets } from './rankpeek.js';

/** What one look at the proven ranks saw. */
export interface RankLook {
  /** a rank runs otherwise than the table said: read the table this round */
  changed: boolean;
  /** the table the look was taken against, refreshed with what it saw (the same object when
   *  `procs` is not the table looked at) */
  apply(procs: RunProcesses): RunProcesses;
}

export class RankRefresher {
  /** the previous look's CPU ticks per process (pid:startTime), for CPU % between looks */
  private ticks = new Map<string, { ticks: number; atMs: number }>();
  private sys: { clkTck: number; pageSize: number } | null = null;
  /** each rank's stat and wchan kept open between looks (../remote/local/statfds.ts): a pread each */
  private readonly statFds = new ProcStatFds('stat');
  private readonly wchanFds = new ProcStatFds('wchan');

  /**
   * Looks at the ranks of `procs` (the last table, or the last refreshed one). null: nothing to
   * look at this way (another host, no table yet, no local rank): the caller keeps the table's cadence.
   */
  look(host: Host, procs: RunProcesses | null, now = Date.now()): RankLook | null {
    if (host.kind !== 'local' || !procs) return null;
    const was = peekTargets(procs);
    if (was.length === 0) return null;
    const stats = this.statFds.lines(was.map((p) => p.pid));
    if (lifeChanged(was, stats)) {
      this.ticks.clear();
      return { changed: true, apply: (p) => p };
    }
    const sys = (this.sys ??= auxv());
    const fresh = new Map<number, ProcInfo>();
    const wchans = this.wchanFds.lines(was.map((p) => p.pid));
    const next = new Map<string, { ticks: number; atMs: number }>();
    for (const p of was) {
      // a rank the table already saw dead, and gone now (a zombie reaped): kept as the table saw it
      const line = stats.get(p.pid);
      const f = line ? parseStat(line) : null;
      if (!f) continue;
      const key = `${p.pid}:${p.startTime}`;
      const ticks = f.utime + f.stime;
      // the previous look, else the table's own reading (its CPU total when it was read)
      const prev =
        this.ticks.get(key) ??
        (p.cpuTotalS != null ? { ticks: Math.round(p.cpuTotalS * sys.clkTck), atMs: procs.at } : undefined);
      let cpuPct = p.cpuPct;
      // looks closer than 200 ms would be noise at 10 ms a tick: the last figure stands
      if (prev && now - prev.atMs >= 200) {
        cpuPct = Math.max(0, ((ticks - prev.ticks) / sys.clkTck / ((now - prev.atMs) / 1000)) * 100);
        next.set(key, { ticks, atMs: now });
      } else if (prev) next.set(key, prev);
      else next.set(key, { ticks, atMs: now });
      const w = wchans.get(p.pid) ?? '';
      fresh.set(p.pid, {
        ...p,
        state: f.state,
        cpuPct,
        rssKiB: Math.round((f.rssPages * sys.pageSize) / 1024),
        wchan: w === '' || w === '0' ? null : w,
        cpuTotalS: ticks / sys.clkTck,
        ageS: p.ageS != null ? p.ageS + (now - procs.at) / 1000 : p.ageS,
      });
    }
    this.ticks = next;
    return {
      changed: false,
      apply: (t) =>
        t !== procs
          ? t
          : {
              ...t,
              at: now,
              ranks: t.ranks.map((r) => {
                const p = fresh.get(r.proc.pid);
                return p && !r.proc.host ? { ...r, proc: p } : r;
              }),
            },
    };
  }
}
