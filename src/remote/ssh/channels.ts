// Channel rationing: a server allows ~10 channels per connection (OpenSSH's MaxSessions), and
// every exec, stream and the watch loop holds one. Callers wait in line for a free one until their
// deadline; a channel of a dead connection is not counted against the new one (generations).
import { SshConnectError } from './connection.js';

export class ChannelLimiter {
  private open = 0;
  /** bumped per connection */
  private gen = 0;
  private readonly waiters: (() => void)[] = [];
  /** channels handed out since the host was made (stats) */
  opened = 0;

  constructor(
    private readonly max: number,
    private readonly label: string,
  ) {}

  /** A new connection: nothing open on it yet; whoever waited tries again. */
  reset(): void {
    this.gen++;
    this.open = 0;
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits for a free channel until `deadline`; resolves the generation to hand back to release(). */
  async acquire(deadline: number): Promise<number> {
    while (this.open >= this.max) {
      const left = deadline - Date.now();
      if (left <= 0) throw new SshConnectError(`no free SSH channel on ${this.label} (${this.max} in use)`);
      await new Promise<void>((r) => {
        const wake = () => {
          clearTimeout(t);
          r();
        };
        // a waiter that timed out leaves the queue: release() must wake a live one, not a dead one
        const t = setTimeout(
          () => {
            const i = this.waiters.indexOf(wake);
            if (i >= 0) this.waiters.splice(i, 1);
            r();
          },
          Math.min(left, 1000),
        );
        this.waiters.push(wake);
      });
    }
    this.open++;
    this.opened++;
    return this.gen;
  }

  release(gen: number): void {
    if (gen !== this.gen) return;
    this.open = Math.max(0, this.open - 1);
    this.waiters.shift()?.();
  }
}
