// Which rank of the supervised trainer went first: the supervisor's own process record, the evidence
// that torchrun's failure summary lacks. torch 1.13's elastic agent reports the "first observed
// failure" by its error files' time, and a rank killed outright writes none: after kill -9 of rank 1
// its summary named "rank 0, exitcode 1" (the survivor, whose collective then failed). So while the
// trainer runs, the supervisor looks at its ranks (the launcher's descendants with RANK in their
// environment, proven by pid + start time) every few hundred ms and records the first look in which
// any of them was gone — with how it ended when its zombie was still there to read (/proc/PID/stat
// field 52, the wait status, until the launcher reaps it).
import { readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { listProcesses, parseStat, readProcs } from '../../remote/procs.js';
import type { LocalHost } from '../../remote/local/host.js';

export interface GoneRank {
  rank: number;
  pid: number;
  /** ms epoch of the look that found it gone */
  at: number;
  /** "SIGKILL", "exit 1": its wait status, read from its zombie; null when it was already reaped */
  how: string | null;
}

const SIGNAME = new Map(Object.entries(constants.signals).map(([name, n]) => [n as number, name]));

/** A wait status (waitpid(2), as /proc/PID/stat field 52 gives it) as one phrase. */
export function waitStatusText(status: number): string | null {
  if (!Number.isInteger(status) || status < 0) return null;
  const sig = status & 0x7f;
  if (sig === 0) return `exit ${(status >> 8) & 0xff}`;
  if (sig === 0x7f) return null; // stopped, not ended
  return SIGNAME.get(sig) ?? `signal ${sig}`;
}

/** /proc/PID/stat → state, start time and, for a zombie, how it ended (field 52; Linux ≥ 3.5). */
export function statEnd(line: string): { state: string; startTime: string; how: string | null } | null {
  const f = parseStat(line);
  if (!f) return null;
  const rest = line
    .slice(line.lastIndexOf(')') + 1)
    .trim()
    .split(/\s+/);
  const code = rest.length > 49 ? Number(rest[49]) : NaN;
  return {
    state: f.state,
    startTime: f.startTime,
    how: f.state === 'Z' && Number.isFinite(code) ? waitStatusText(code) : null,
  };
}

// signals a launcher sends the rest of the group once one rank failed: not the first failure
const CLOSING = new Set(['SIGTERM', 'SIGINT', 'SIGHUP']);

/**
 * The rank that went first, of the ranks one look found gone together: the only one; else the only
 * one ended by a signal other than a launcher's closing signals (a kill -9, a segfault); else null —
 * the look cannot tell which of them went first, and nsa-top says nothing better than the launcher.
 */
export function firstOf(batch: GoneRank[]): GoneRank | null {
  if (batch.length === 1) return batch[0]!;
  const hard = batch.filter((g) => g.how !== null && !g.how.startsWith('exit') && !CLOSING.has(g.how));
  return hard.length === 1 ? hard[0]! : null;
}

/** Watches one trainer's ranks until one is gone; `stop()` gives the rank that went first. */
export class RankWatch {
  private ranks = new Map<number, { rank: number; startTime: string }>();
  private gone: GoneRank[] | null = null;
  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  private lastFind = 0;
  private startedAt = Date.now();

  constructor(
    private readonly host: LocalHost,
    /** the supervisor's child: torchrun, or a one-process trainer */
    private readonly child: number,
    private readonly everyMs = 250,
    /** how often the launcher's descendants are looked for again once ranks are known */
    private readonly findEveryMs = 10_000,
    /** told each time the watch finds ranks it did not know: (rank, pid) */
    private readonly onFound: (found: { rank: number; pid: number }[]) => void = () => {},
  ) {}

  start(): this {
    this.startedAt = Date.now();
    this.timer = setInterval(() => void this.tick(), this.everyMs);
    this.timer.unref();
    return this;
  }

  /** Stops watching (after one last look); the rank that went first, or null. */
  async stop(): Promise<GoneRank | null> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
    if (!this.gone) await this.look();
    // one rank (a one-process trainer) has no "first" to tell: its exit says it all
    return this.gone && this.ranks.size >= 2 ? firstOf(this.gone) : null;
  }

  private async tick(): Promise<void> {
    if (this.busy || this.gone) return;
    this.busy = true;
    try {
      const now = Date.now();
      // every second while the launcher may still be spawning its ranks, then now and then (a one-
      // process trainer without RANK has none to find: no scan of the table every second for it)
      const soon = this.ranks.size === 0 && now - this.startedAt < 30_000;
      if (now - this.lastFind >= (soon ? 1000 : this.findEveryMs)) {
        this.lastFind = now;
        await this.find();
      }
      await this.look();
    } catch {
      /* a look that failed says nothing: the next one */
    } finally {
      this.busy = false;
    }
  }

  /**
   * The child's descendants whose environment names a RANK (the child itself when it has one): the
   * topmost one of each rank only — a rank's own children inherit its RANK (a `git` or compiler the
   * trainer runs, data-loader workers), and one of those ending is not the rank going.
   */
  private async find(): Promise<void> {
    const procs = await listProcesses(this.host);
    const kids = new Map<number, number[]>();
    for (const p of procs) kids.set(p.ppid, [...(kids.get(p.ppid) ?? []), p.pid]);
    const parent = new Map<number, number>();
    const all: number[] = [this.child];
    for (let i = 0; i < all.length; i++)
      for (const k of kids.get(all[i]!) ?? []) {
        parent.set(k, all[i]!);
        all.push(k);
      }
    const info = new Map((await readProcs(this.host, all)).map((p) => [p.pid, p]));
    const rankOf = (pid: number) => {
      const r = info.get(pid)?.env.RANK;
      return r !== undefined && /^\d+$/.test(r) ? Number(r) : null;
    };
    const known = new Set([...this.ranks.values()].map((r) => r.rank));
    const found: { rank: number; pid: number }[] = [];
    for (const pid of all) {
      const p = info.get(pid);
      const r = rankOf(pid);
      if (!p || r === null || known.has(r) || p.state === 'Z' || p.state === 'X') continue;
      let up = parent.get(pid);
      while (up !== undefined && rankOf(up) === null) up = parent.get(up);
      if (up !== undefined) continue; // a child of a rank
      known.add(r);
      this.ranks.set(pid, { rank: r, startTime: p.startTime });
      found.push({ rank: r, pid });
    }
    if (found.length) this.onFound(found.sort((a, b) => a.rank - b.rank));
  }

  /** one look at the known ranks' stat files; the first look that finds any gone is kept */
  private async look(): Promise<void> {
    if (this.gone || this.ranks.size === 0) return;
    const at = Date.now();
    const batch: GoneRank[] = [];
    for (const [pid, r] of this.ranks) {
      const line = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
      const s = line === null ? null : statEnd(line);
      if (s && s.startTime === r.startTime && s.state !== 'Z' && s.state !== 'X') continue;
      batch.push({ rank: r.rank, pid, at, how: s && s.startTime === r.startTime ? s.how : null });
    }
    if (batch.length) this.gone = batch;
  }
}
