// The failure injections (NSA_TOP_INJECT) as one rank sees them: which fire at which step, the
// steady ones (slow data, a leak) and the once-per-run-dir record of crash and hang.
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { forRank, formatInjection, type Injection } from '../inject.js';

export class RankInjections {
  private readonly inj: Injection[];
  /** extra wait per fetch */
  readonly slowMs: number;
  /** MiB leaked per step */
  readonly leakMb: number;
  /** compute-time factor of this rank (1: none): a straggler drill */
  readonly slowX: number;
  /** the first step of a gate collapse (Infinity: none) */
  readonly collapseFrom: number;
  private readonly leaked: Buffer[] = [];
  private readonly firedPath: string;

  constructor(
    all: Injection[],
    private readonly rank: number,
    world: number,
    dir: string,
  ) {
    const inj = forRank(all, rank);
    this.inj = inj;
    if (inj.length && (rank === 0 || world === 1 || inj.some((i) => i.rank === rank)))
      process.stderr.write(`[inject] rank ${rank}: ${inj.map(formatInjection).join(' ')}\n`);
    this.slowMs = inj.reduce((a, i) => a + (i.kind === 'slow-data' ? i.ms : 0), 0);
    this.leakMb = inj.reduce((a, i) => a + (i.kind === 'leak' ? i.mb : 0), 0);
    this.slowX = inj.reduce((a, i) => a * (i.kind === 'slow' ? i.x : 1), 1);
    this.collapseFrom = Math.min(
      ...inj.filter((i) => i.kind === 'gate-collapse').map((i) => (i as { step: number }).step),
    );
    // crash and hang fire once per run dir: a supervisor's restart resumes past them, so a drill shows
    // the recovery instead of the same failure again (.nsa-top-injected records what has fired).
    this.firedPath = join(dir, '.nsa-top-injected');
  }

  /** an injection of `kind` is set for step `s` */
  at(kind: string, s: number): boolean {
    return this.inj.some((i) => 'step' in i && i.kind === kind && i.step === s);
  }

  /** a crash or hang at step `s` that has not fired in this run dir yet (recorded as fired now) */
  firstTime(kind: string, s: number): boolean {
    const key = `${kind}@step=${s} rank=${this.rank}`;
    let fired = '';
    try {
      fired = readFileSync(this.firedPath, 'utf8');
    } catch {
      /* none yet */
    }
    if (fired.split('\n').includes(key)) {
      process.stderr.write(`[inject] ${kind}@step=${s} already fired on rank ${this.rank} in this run dir; skipped\n`);
      return false;
    }
    appendFileSync(this.firedPath, key + '\n');
    return true;
  }

  /**
   * Runs `compute` and then keeps the CPU busy for (slowX − 1) × its duration: the rank's step costs
   * slowX times the compute, as on a slower GPU or a throttled core — busy, never asleep, so the
   * process table shows it running while its peers wait in the all-reduce.
   */
  slowed<T>(compute: () => T): T {
    if (this.slowX <= 1) return compute();
    const t0 = performance.now();
    const v = compute();
    const until = performance.now() + (performance.now() - t0) * (this.slowX - 1);
    let x = 0;
    while (performance.now() < until) for (let i = 0; i < 1000; i++) x = (x * 1103515245 + 12345) % 2147483648;
    this.spun = x;
    return v;
  }

  /** the busy loop's last value (kept so the loop is not optimised away) */
  spun = 0;

  /** one step's leak */
  leak(): void {
    if (this.leakMb > 0) this.leaked.push(Buffer.alloc(Math.round(this.leakMb * 1024 * 1024), 1));
  }
}
