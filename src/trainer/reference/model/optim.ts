// AdamW with decoupled weight decay (applied only where decayMask is 1 — the matrices), a linear
// warmup + cosine learning-rate schedule, and global-norm gradient clipping.

export interface AdamWOptions {
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay: number;
  decayMask: Uint8Array;
}

export class AdamW {
  private readonly n: number;
  private readonly b1: number;
  private readonly b2: number;
  private readonly eps: number;
  private readonly wd: number;
  private readonly mask: Uint8Array;
  private t = 0;
  private m: Float32Array;
  private v: Float32Array;

  constructor(n: number, opts: AdamWOptions) {
    if (!Number.isInteger(n) || n < 0)
      throw new Error(`AdamW: parameter count must be a non-negative integer (got ${n})`);
    if (opts.decayMask.length !== n)
      throw new Error(`AdamW: decayMask has ${opts.decayMask.length} entries, expected ${n}`);
    this.n = n;
    this.b1 = opts.beta1 ?? 0.9;
    this.b2 = opts.beta2 ?? 0.95;
    this.eps = opts.eps ?? 1e-8;
    this.wd = opts.weightDecay;
    this.mask = opts.decayMask;
    this.m = new Float32Array(n);
    this.v = new Float32Array(n);
  }

  /** One update: p ← p − lr·(m̂/(√v̂+eps) + wd·p·mask). */
  step(params: Float32Array, grads: Float32Array, lr: number): void {
    if (params.length !== this.n || grads.length !== this.n)
      throw new Error(`AdamW: expected ${this.n} params/grads, got ${params.length}/${grads.length}`);
    this.t++;
    const { b1, b2, eps, m, v, mask } = this;
    const c1 = 1 / (1 - Math.pow(b1, this.t));
    const c2 = 1 / (1 - Math.pow(b2, this.t));
    const decay = lr * this.wd;
    for (let i = 0; i < this.n; i++) {
      const g = grads[i]!;
      const mi = b1 * m[i]! + (1 - b1) * g;
      const vi = b2 * v[i]! + (1 - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      let p = params[i]!;
      if (mask[i]) p -= decay * p;
      params[i] = p - (lr * (mi * c1)) / (Math.sqrt(vi * c2) + eps);
    }
  }

  /** Copies of the moments and the step count (for checkpoints). */
  exportState(): { t: number; m: Float32Array; v: Float32Array } {
    return { t: this.t, m: this.m.slice(), v: this.v.slice() };
  }

  importState(s: { t: number; m: Float32Array; v: Float32Array }): void {
    if (s.m.length !== this.n || s.v.length !== this.n)
      throw new Error(`AdamW: state holds ${s.m.length}/${s.v.length} entries, expected ${this.n}`);
    if (!Number.isInteger(s.t) || s.t < 0) throw new Error(`AdamW: bad step count ${s.t}`);
    this.t = s.t;
    this.m = Float32Array.from(s.m);
    this.v = Float32Array.from(s.v);
  }
}

/**
 * Learning rate for optimizer step `step` (counted from 1): linear warmup from lr/warmupSteps to lr
 * over the first warmupSteps steps, then a cosine from lr down to minLr (default 0) at totalSteps;
 * minLr after that.
 */
export function lrAt(step: number, s: { lr: number; warmupSteps: number; totalSteps: number; minLr?: number }): number {
  const minLr = s.minLr ?? 0;
  const st = Math.max(step, 0);
  if (s.warmupSteps > 0 && st <= s.warmupSteps) return (s.lr * st) / s.warmupSteps;
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const prog = Math.min(1, Math.max(0, (st - s.warmupSteps) / span));
  return minLr + (s.lr - minLr) * 0.5 * (1 + Math.cos(Math.PI * prog));
}

/** Scales grads in place so their global L2 norm is at most maxNorm; returns the pre-clip norm. */
export function clipGradNorm(grads: Float32Array, maxNorm: number): number {
  let ss = 0;
  for (let i = 0; i < grads.length; i++) ss += grads[i]! * grads[i]!;
  const norm = Math.sqrt(ss);
  if (maxNorm > 0 && Number.isFinite(norm) && norm > maxNorm) {
    const s = maxNorm / (norm + 1e-6);
    for (let i = 0; i < grads.length; i++) grads[i] = grads[i]! * s;
  }
  return norm;
}
