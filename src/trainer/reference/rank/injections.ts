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

  /** one step's leak */
  leak(): void {
    if (this.leakMb > 0) this.leaked.push(Buffer.alloc(Math.round(this.leakMb * 1024 * 1024), 1));
  }
}
