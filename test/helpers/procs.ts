// Test helper: the processes a test started, found by a path they all carry in their command line.
import { readdirSync, readFileSync } from 'node:fs';

/** pids whose command line names `dir` */
export function procsUnder(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) out.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return out;
}
