// A rank's stop signals: the first SIGTERM/SIGINT asks for a checkpoint at the end of the step, a
// second exits at once. Waits that might never end (a hung peer, an injected hang) are guarded:
// once a stop signal has arrived, the wait gets a short grace, then is abandoned.
import { CollectiveAborted } from '../comm.js';

const SIGNUM: Record<string, number> = { SIGINT: 2, SIGTERM: 15 };

/** the exit code of a process ended by `sig` */
export function signalExitCode(sig: string | null): number {
  return 128 + (SIGNUM[sig ?? 'SIGTERM'] ?? 15);
}

export class StopSignals {
  /** the first stop signal received, or null */
  signal: string | null = null;
  private readonly listeners = new Set<() => void>();
  private readonly onStop = (sig: NodeJS.Signals): void => {
    if (this.signal) {
      process.stderr.write(`[train] rank ${this.rank}: second ${sig} — exiting at once\n`);
      process.exit(signalExitCode(sig));
    }
    this.signal = sig;
    if (this.speaks) this.out(`[train] ${sig} received — checkpointing at the end of this step, then exiting.`);
    for (const l of [...this.listeners]) l();
  };

  constructor(
    private readonly rank: number,
    /** this rank says what it does on stdout */
    private readonly speaks: boolean,
    private readonly out: (line: string) => void,
  ) {}

  install(): void {
    process.on('SIGTERM', this.onStop);
    process.on('SIGINT', this.onStop);
  }

  uninstall(): void {
    process.off('SIGTERM', this.onStop);
    process.off('SIGINT', this.onStop);
  }

  /** `p`, abandoned (CollectiveAborted) `graceMs` after a stop signal */
  async guarded<X>(p: Promise<X>, graceMs: number): Promise<X> {
    let timer: NodeJS.Timeout | undefined;
    let onStop: () => void = () => {};
    const intr = new Promise<never>((_, reject) => {
      onStop = () => {
        timer = setTimeout(() => reject(new CollectiveAborted(`${this.signal} while waiting`, 'signal')), graceMs);
      };
      if (this.signal) onStop();
      else this.listeners.add(onStop);
    });
    try {
      return await Promise.race([p, intr]);
    } finally {
      clearTimeout(timer);
      this.listeners.delete(onStop);
    }
  }
}
