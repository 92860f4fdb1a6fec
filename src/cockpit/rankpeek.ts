// Between two reads of the whole process table (the cockpit reads it every 5 s: a scan of every
// trainer-looking process, ~5 ms of CPU on the real trainer's box), each rank the last table proved
// has its own /proc/PID/stat read every round: one small read each locally (~0.1 ms of CPU), one
// `cat` in the watch loop over SSH. (The launcher is not looked at: a stopped launcher holds no rank
// back, and one that dies is seen in the ranks or at the next table.) When one of them no longer runs as the table said (stopped: T/t, dead: gone, a zombie,
// or its pid now another process's), or runs again after it had stopped, the collector reads the
// whole table that same round, so the judge names a stopped rank within a round (the project's
// promise: within 2 s; the last drill took 3.5 s, and up to 5 s, at the 5 s cadence).
import type { Host } from '../remote/host.js';
import { parseStat } from '../remote/procs.js';
import { ProcStatFds } from '../remote/local/statfds.js';
import type { ProcInfo, RunProcesses } from '../remote/types.js';

type Life = 'runs' | 'stopped' | 'dead';

function life(state: string): Life {
  if (state === 'T' || state === 't') return 'stopped';
  if (state === 'Z' || state === 'X') return 'dead';
  return 'runs';
}

/** The processes of the last table worth a look: this host's ranks (another node's are not this host's). */
export function peekTargets(procs: RunProcesses | null): ProcInfo[] {
  if (!procs) return [];
  return procs.ranks.map((r) => r.proc).filter((p) => !p.host && Number.isInteger(p.pid) && p.pid > 1);
}

/** Whether the stat lines now (pid → line; a pid missing: no such process) tell another life than the table did. */
export function lifeChanged(was: readonly ProcInfo[], now: ReadonlyMap<number, string>): boolean {
  for (const p of was) {
    const line = now.get(p.pid);
    const f = line ? parseStat(line) : null;
    const is: Life = !f || f.startTime !== p.startTime ? 'dead' : life(f.state);
    if (is !== life(p.state)) return true;
  }
  return false;
}

/** the proven ranks' /proc/PID/stat, kept open between rounds (../remote/local/statfds.ts): one
 *  pread a rank a round, not an open, a read and a close */
const rankFds = new ProcStatFds();

/** Reads the targets' /proc/PID/stat now (one read each locally; one quick command over SSH). */
async function statLines(host: Host, pids: number[]): Promise<Map<number, string>> {
  // locally in place, each rank's file kept open: a promise and a file handle per rank every round
  // cost more than the read, and so did opening the path again
  if (host.kind === 'local' && process.platform === 'linux') return rankFds.lines(pids);
  const out = new Map<number, string>();
  if (host.kind === 'local') {
    await Promise.all(
      pids.map(async (pid) => {
        const b = await host.readFile(`/proc/${pid}/stat`, 4096).catch(() => null);
        if (b && b.length) out.set(pid, b.toString('utf8').trim());
      }),
    );
    return out;
  }
  const r = await host.exec(['cat', ...pids.map((p) => `/proc/${p}/stat`)], { timeoutMs: 3000, quick: true });
  // a look that did not happen is not a process gone (cat names each missing file, and fails)
  if (r.timedOut || (r.code !== 0 && !/No such file/.test(r.stderr))) throw new Error('no answer');
  for (const line of r.stdout.split('\n')) {
    const f = parseStat(line);
    if (f && pids.includes(f.pid)) out.set(f.pid, line);
  }
  return out;
}

/**
 * Whether a rank the last table proved has stopped, died or run again since: the collector then
 * reads the whole table this round. False when there is nothing to look at; a failed look says
 * nothing (the table's own cadence stands).
 */
export async function provenChanged(host: Host, procs: RunProcesses | null): Promise<boolean> {
  const was = peekTargets(procs);
  if (was.length === 0) return false;
  try {
    return lifeChanged(was, await statLines(host, [...new Set(was.map((p) => p.pid))]));
  } catch {
    return false;
  }
}
