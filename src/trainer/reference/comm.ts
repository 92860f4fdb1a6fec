// The data-parallel "all-reduce" of the reference trainer. With one rank it is the identity; with
// several, each rank sends its contribution to the launcher over the child_process IPC channel
// (advanced serialization, so Float32Arrays travel as bytes), the launcher averages and answers every
// rank with the same result. Control flags (HALT seen, stop signal, non-finite loss) ride along, so
// every rank takes the same decision at the same step.

export interface Contribution {
  step: number;
  /** local gradient already multiplied by `weight` (the local batch size) */
  grads: Float32Array;
  weight: number;
  /** local mean loss */
  loss: number;
  tokens: number;
  halt: boolean;
  stop: boolean;
  nan: boolean;
}

export interface Reduced {
  step: number;
  /** weighted mean gradient */
  grads: Float32Array;
  loss: number;
  tokens: number;
  halt: boolean;
  stop: boolean;
  nan: boolean;
}

export class CollectiveAborted extends Error {
  constructor(
    why: string,
    readonly reason: 'peer' | 'signal' | 'launcher-gone',
  ) {
    super(why);
  }
}

export interface Comm {
  readonly rank: number;
  readonly world: number;
  allreduce(c: Contribution): Promise<Reduced>;
  close(): void;
}

export class LocalComm implements Comm {
  readonly rank = 0;
  readonly world = 1;
  async allreduce(c: Contribution): Promise<Reduced> {
    const g = c.grads;
    if (c.weight !== 1) for (let i = 0; i < g.length; i++) g[i]! /= c.weight;
    return { step: c.step, grads: g, loss: c.loss, tokens: c.tokens, halt: c.halt, stop: c.stop, nan: c.nan };
  }
  close(): void {}
}

// ---- messages over the IPC channel
export type ToRank = { t: 'spec'; spec: unknown } | { t: 'reduced'; r: Reduced } | { t: 'abort'; why: string };
export type ToLauncher =
  | { t: 'ready'; rank: number; pid: number }
  | { t: 'reduce'; rank: number; c: Contribution }
  | { t: 'finished'; rank: number; how: string };

export class IpcComm implements Comm {
  private waiter: { resolve: (r: Reduced) => void; reject: (e: Error) => void } | null = null;
  private queued: Reduced[] = [];
  private broken: CollectiveAborted | null = null;

  constructor(
    readonly rank: number,
    readonly world: number,
  ) {
    process.on('message', (m: ToRank) => {
      if (m.t === 'reduced') {
        if (this.waiter) {
          const w = this.waiter;
          this.waiter = null;
          w.resolve(m.r);
        } else this.queued.push(m.r);
      } else if (m.t === 'abort') this.fail(new CollectiveAborted(m.why, 'peer'));
    });
    process.on('disconnect', () => this.fail(new CollectiveAborted('the launcher went away', 'launcher-gone')));
  }

  private fail(e: CollectiveAborted): void {
    if (!this.broken) this.broken = e;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(e);
    }
  }

  async allreduce(c: Contribution): Promise<Reduced> {
    if (this.broken) throw this.broken;
    const q = this.queued.shift();
    if (q) return q;
    const reply = new Promise<Reduced>((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
    const msg: ToLauncher = { t: 'reduce', rank: this.rank, c };
    process.send!(msg);
    return await reply;
  }

  send(m: ToLauncher): void {
    if (process.connected) process.send!(m);
  }

  close(): void {
    if (process.connected) process.disconnect();
  }
}

/** Launcher side: combines one contribution per rank into the reply all ranks get. */
export function combine(cs: Contribution[]): Reduced {
  const n = cs[0]!.grads.length;
  const out = new Float32Array(n);
  let w = 0;
  let loss = 0;
  let tokens = 0;
  for (const c of cs) {
    const g = c.grads;
    for (let i = 0; i < n; i++) out[i]! += g[i]!;
    w += c.weight;
    loss += c.loss * c.weight;
    tokens += c.tokens;
  }
  for (let i = 0; i < n; i++) out[i]! /= w;
  return {
    step: cs[0]!.step,
    grads: out,
    loss: loss / w,
    tokens,
    halt: cs.some((c) => c.halt),
    stop: cs.some((c) => c.stop),
    nan: cs.some((c) => c.nan),
  };
}
