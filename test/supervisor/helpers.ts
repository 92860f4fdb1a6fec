// Shared by the supervisor tests: waiting on real processes and reading what a trainer wrote.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Polls `f` every 100 ms until it gives a truthy value; throws naming `what` after `ms`. */
export async function until<T>(what: string, f: () => Promise<T | null | undefined | false> | T | null | undefined | false, ms = 45000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The step of rank 0's newest heartbeat line (0 before the first). */
export function lastStep(outDir: string): number {
  const p = join(outDir, 'heartbeat_rank0.jsonl');
  if (!existsSync(p)) return 0;
  const lines = readFileSync(p, 'utf8').trim().split('\n');
  return JSON.parse(lines.at(-1)!).step as number;
}
