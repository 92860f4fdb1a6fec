// The in-process watchdog (contract §1.12), done right: it watches this rank's step progress, not
// its heartbeat writes, so ranks >= 1 and long log intervals raise no false alarms; a rank stuck
// for > 180 s (NSA_TOP_WATCHDOG_STALL_S) writes watchdog_stackdump_* and a watchdog_dump record,
// checked every 30 s (NSA_TOP_WATCHDOG_POLL_S), again every stall interval while it lasts.
import { writeWatchdogDump, type ActivityStack } from '../activity.js';
import type { Rank } from './setup.js';

export class Watchdog {
  private lastAdvance = Date.now() / 1000;
  private readonly timer: NodeJS.Timeout;

  constructor(r: Rank, act: ActivityStack) {
    const stallS = Number(process.env.NSA_TOP_WATCHDOG_STALL_S ?? 180);
    const pollS = Number(process.env.NSA_TOP_WATCHDOG_POLL_S ?? 30);
    const { dir, rank, hb } = r;
    this.timer = setInterval(
      () => {
        const now = Date.now() / 1000;
        if (now - this.lastAdvance <= stallS) return;
        try {
          const p = writeWatchdogDump(dir, rank, act, this.lastAdvance);
          hb.write(0, 'watchdog_dump', { path: p });
          process.stderr.write(
            `[watchdog] rank ${rank}: no step for ${(now - this.lastAdvance).toFixed(0)} s — dumped ${p}\n`,
          );
        } catch (err) {
          process.stderr.write(`[watchdog] rank ${rank}: dump failed: ${(err as Error).message}\n`);
        }
        this.lastAdvance = now;
      },
      Math.max(0.05, pollS) * 1000,
    );
    this.timer.unref();
  }

  /** a step completed */
  advanced(): void {
    this.lastAdvance = Date.now() / 1000;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
