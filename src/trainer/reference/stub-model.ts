// TEMPORARY stand-in with the model API (a byte bigram table with exact gradients), used only until
// src/trainer/reference/model lands; it lets the runtime be built and tested first.
export interface ModelConfig { vocab: number; dim: number; nLayers: number; nHeads: number; nKvGroups: number; dK: number; dV: number; l: number; d: number; lSel: number; nSel: number; w: number; seqLen: number }
export interface StepStats { loss: number; gate: { entropyMean: number; entropyMin: number; maxGate: number; collapseFrac: number; branchShares: [number, number, number] }; sel: { kMean: number; kMax: number; rows: number; pctAtMax: number } }
export interface Model {
  readonly cfg: ModelConfig;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly layout: { name: string; offset: number; size: number; shape: number[]; decay: boolean }[];
  readonly kernels: 'wasm' | 'js';
  forwardBackward(tokens: Uint8Array, batch: number): StepStats;
  forward(tokens: Uint8Array, batch: number): StepStats;
  setGateOverride(mode: null | 'collapse' | 'uniform'): void;
  flopsPerToken(): number;
}

export async function createModel(cfg: ModelConfig, opts: { seed: number; kernels?: 'wasm' | 'js' | 'auto' }): Promise<Model> {
  const V = cfg.vocab;
  const params = new Float32Array(V * V);
  let s = opts.seed >>> 0 || 1;
  for (let i = 0; i < params.length; i++) {
    s = (s * 1664525 + 1013904223) >>> 0;
    params[i] = ((s / 2 ** 32) - 0.5) * 0.02;
  }
  const grads = new Float32Array(params.length);
  let override: null | 'collapse' | 'uniform' = null;
  const run = (tokens: Uint8Array, batch: number, grad: boolean): StepStats => {
    const T = tokens.length / batch;
    if (grad) grads.fill(0);
    let loss = 0;
    let n = 0;
    const p = new Float64Array(V);
    for (let b = 0; b < batch; b++) {
      for (let t = 0; t + 1 < T; t++) {
        const x = tokens[b * T + t]!;
        const y = tokens[b * T + t + 1]!;
        const row = x * V;
        let mx = -Infinity;
        for (let j = 0; j < V; j++) mx = Math.max(mx, params[row + j]!);
        let z = 0;
        for (let j = 0; j < V; j++) z += p[j] = Math.exp(params[row + j]! - mx);
        loss += -(params[row + y]! - mx - Math.log(z));
        n++;
        if (grad) for (let j = 0; j < V; j++) grads[row + j]! += p[j]! / z - (j === y ? 1 : 0);
      }
    }
    if (grad) for (let i = 0; i < grads.length; i++) grads[i]! /= n;
    const collapsed = override === 'collapse';
    return {
      loss: loss / n,
      gate: collapsed
        ? { entropyMean: 0.01, entropyMin: 0, maxGate: 1, collapseFrac: 1, branchShares: [0, 0, 1] }
        : { entropyMean: 1.0984, entropyMin: 1.097, maxGate: 0.357, collapseFrac: 0, branchShares: [0.332, 0.335, 0.333] },
      sel: { kMean: 48, kMax: 64, rows: batch * T, pctAtMax: 0.5 },
    };
  };
  return {
    cfg,
    params,
    grads,
    layout: [{ name: 'bigram.weight', offset: 0, size: V * V, shape: [V, V], decay: true }],
    kernels: 'js',
    forwardBackward: (t, b) => run(t, b, true),
    forward: (t, b) => run(t, b, false),
    setGateOverride: (m) => {
      override = m;
    },
    flopsPerToken: () => 6 * V,
  };
}

export function defaultModelConfig(): ModelConfig {
  return { vocab: 256, dim: 64, nLayers: 2, nHeads: 2, nKvGroups: 1, dK: 32, dV: 32, l: 16, d: 8, lSel: 16, nSel: 4, w: 32, seqLen: 128 };
}

export class AdamW {
  private t = 0;
  private m: Float32Array;
  private v: Float32Array;
  private b1: number;
  private b2: number;
  private eps: number;
  constructor(n: number, private opts: { beta1?: number; beta2?: number; eps?: number; weightDecay: number; decayMask: Uint8Array }) {
    this.m = new Float32Array(n);
    this.v = new Float32Array(n);
    this.b1 = opts.beta1 ?? 0.9;
    this.b2 = opts.beta2 ?? 0.999;
    this.eps = opts.eps ?? 1e-8;
  }
  step(params: Float32Array, grads: Float32Array, lr: number): void {
    this.t++;
    const c1 = 1 - this.b1 ** this.t;
    const c2 = 1 - this.b2 ** this.t;
    for (let i = 0; i < params.length; i++) {
      const g = grads[i]!;
      this.m[i] = this.b1 * this.m[i]! + (1 - this.b1) * g;
      this.v[i] = this.b2 * this.v[i]! + (1 - this.b2) * g * g;
      if (this.opts.decayMask[i]) params[i]! -= lr * this.opts.weightDecay * params[i]!;
      params[i]! -= (lr * (this.m[i]! / c1)) / (Math.sqrt(this.v[i]! / c2) + this.eps);
    }
  }
  exportState(): { t: number; m: Float32Array; v: Float32Array } {
    return { t: this.t, m: this.m, v: this.v };
  }
  importState(s: { t: number; m: Float32Array; v: Float32Array }): void {
    this.t = s.t;
    this.m.set(s.m);
    this.v.set(s.v);
  }
}

export function lrAt(step: number, s: { lr: number; warmupSteps: number; totalSteps: number; minLr?: number }): number {
  const min = s.minLr ?? 0;
  if (step < s.warmupSteps) return (s.lr * (step + 1)) / s.warmupSteps;
  const p = Math.min(1, (step - s.warmupSteps) / Math.max(1, s.totalSteps - s.warmupSteps));
  return min + 0.5 * (s.lr - min) * (1 + Math.cos(Math.PI * p));
}

export function clipGradNorm(grads: Float32Array, maxNorm: number): number {
  let s = 0;
  for (let i = 0; i < grads.length; i++) s += grads[i]! * grads[i]!;
  const n = Math.sqrt(s);
  if (maxNorm > 0 && n > maxNorm) {
    const k = maxNorm / (n + 1e-6);
    for (let i = 0; i < grads.length; i++) grads[i]! *= k;
  }
  return n;
}
