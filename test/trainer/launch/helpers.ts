// Shared by the supervisor tests: waiting on real processes and reading what a trainer wrote.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** test/trainer/launch/fake-trainer.mjs: a one-process trainer that follows the contract's rules */
export const FAKE_TRAINER = fileURLToPath(new URL('./fake-trainer.mjs', import.meta.url));

/** Polls `f` every 100 ms until it gives a truthy value; throws naming `what` after `ms`. */
export async function until<T>(
  what: string,
  f: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  ms = 45000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The step of rank 0's newest complete heartbeat line (0 before the first). */
export function lastStep(outDir: string): number {
  const p = join(outDir, 'heartbeat_rank0.jsonl');
  if (!existsSync(p)) return 0;
  // a line the trainer is still writing is not a record yet (read mid-write, it failed a test under load)
  const lines = readFileSync(p, 'utf8').split('\n').slice(0, -1);
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      return (JSON.parse(lines[i]!) as { step: number }).step;
    } catch {
      /* cut short: the one before */
    }
  }
  return 0;
}

/** A profiles file in `dir` whose profile `fake` runs the fake trainer (short restart and stop graces). */
export function profilesFile(dir: string, extra = ''): string {
  const f = join(dir, 'profiles.yaml');
  writeFileSync(
    f,
    `profiles:
  fake:
    trainer: reference
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FAKE_TRAINER)}]
    procs: 1
    steps: 100000
    save_every: 10
    restart: { max_restarts: 2, backoff_s: 0.2, backoff_factor: 1 }
    stop: { halt_grace_s: 2, sigint_grace_s: 1.5 }
${extra}`,
  );
  return f;
}
