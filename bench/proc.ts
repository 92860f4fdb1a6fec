// What the benches sample of a process they started, from /proc: its CPU time, its own and that of
// the children it has waited for (a cockpit's or watchdog's commands), and its resident memory; and
// the machine's load average, printed beside every figure because the box is shared.
import { readFileSync } from 'node:fs';

const TICK = 100; // clock ticks per second (Linux USER_HZ)

export interface ProcSample {
  /** CPU seconds of the process itself (utime + stime) */
  self: number;
  /** CPU seconds of its waited-for children (cutime + cstime) */
  children: number;
  /** self + children */
  all: number;
  /** resident memory, MiB */
  rssMiB: number;
}

/** One sample of `pid`; null once it is gone. */
export function procSample(pid: number): ProcSample | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm may hold spaces and parentheses: the fields start after the last ')'; f[0] is field 3
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
    const self = (Number(f[11]) + Number(f[12])) / TICK;
    const children = (Number(f[13]) + Number(f[14])) / TICK;
    return { self, children, all: self + children, rssMiB: rss };
  } catch {
    return null;
  }
}

/** the 1, 5 and 15 minute load averages, as /proc/loadavg writes them */
export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}
