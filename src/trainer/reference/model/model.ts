// The reference NSA language model: byte-level decoder-only transformer whose attention is Native
// Sparse Attention (arXiv 2502.11089) — compressed, selected and sliding-window branches mixed by a
// per-(token, KV group) softmax gate. Forward and backward are written by hand; the matmuls and the
// attention inner loops run in the kernels of ../kernels (WebAssembly SIMD or the JS twin).
//
// Unlike the nsa-vibe trainer (../../../../shared/contract.md §7.2-7.4) this implements NSA as
// specified: per-head RoPE on Q and K, a real compressed attention with learned pooling, selection
// scores from the *causal* compressed probabilities, the current partial block kept in the
// selection, and proper multi-key attention in every branch.
//
// Weights are stored [in, out] (y = x·W). Activations for one (batch, seqLen) live in one heap so
// the kernels read them without copies; the heap is sized once per batch size.
import { loadKernels, type Kernels } from '../kernels/index.js';

export interface ModelConfig {
  vocab: number;
  dim: number;
  nLayers: number;
  nHeads: number;
  nKvGroups: number;
  dK: number;
  dV: number;
  l: number;
  d: number;
  lSel: number;
  nSel: number;
  w: number;
  seqLen: number;
}
export interface GateStatsOut {
  entropyMean: number;
  entropyMin: number;
  maxGate: number;
  collapseFrac: number;
  branchShares: [number, number, number];
}
export interface SelStatsOut {
  kMean: number;
  kMax: number;
  rows: number;
  pctAtMax: number;
}
export interface StepStats {
  loss: number;
  gate: GateStatsOut;
  sel: SelStatsOut;
}
export type GateOverride = null | 'collapse' | 'uniform';
export interface LayoutEntry {
  name: string;
  offset: number;
  size: number;
  shape: number[];
  decay: boolean;
}

export interface Model {
  readonly cfg: ModelConfig;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly layout: LayoutEntry[];
  readonly kernels: 'wasm' | 'js';
  forwardBackward(tokens: Uint8Array, batch: number): StepStats;
  forward(tokens: Uint8Array, batch: number): StepStats;
  setGateOverride(mode: GateOverride): void;
  flopsPerToken(): number;
}

/** Test/diagnostic hooks beyond the public Model API. */
export interface ModelInternals extends Model {
  /** true: reuse the selection of the previous forward (same batch) instead of recomputing top-n */
  setSelectionFrozen(on: boolean): void;
  /** selected [start,end) token ranges of layer `layer` for row (b, t, group g) in the last forward */
  selectedRanges(layer: number, b: number, t: number, g: number): [number, number][];
  /** causal compressed-attention probabilities of layer `layer` for (b, t, head) in the last forward */
  cmpProbs(layer: number, b: number, t: number, head: number): Float64Array;
  /** final-norm hidden → logits of the last forward, row-major [batch·seqLen, vocab] (probabilities after a loss pass) */
  lastProbs(): Float64Array;
  /** gates [batch·seqLen·nKvGroups, 3] of layer `layer` in the last forward */
  lastGates(layer: number): Float64Array;
}

export function defaultModelConfig(): ModelConfig {
  return {
    vocab: 256,
    dim: 64,
    nLayers: 2,
    nHeads: 2,
    nKvGroups: 1,
    dK: 32,
    dV: 32,
    l: 16,
    d: 8,
    lSel: 16,
    nSel: 4,
    w: 64,
    seqLen: 128,
  };
}

export function validateConfig(c: ModelConfig): void {
  const ints: (keyof ModelConfig)[] = [
    'vocab',
    'dim',
    'nLayers',
    'nHeads',
    'nKvGroups',
    'dK',
    'dV',
    'l',
    'd',
    'lSel',
    'nSel',
    'w',
    'seqLen',
  ];
  for (const k of ints) {
    const v = c[k];
    if (!Number.isInteger(v) || v < 1)
      throw new Error(`model config: ${k} must be a positive integer (got ${String(v)})`);
  }
  if (c.nHeads % c.nKvGroups !== 0)
    throw new Error(`model config: nHeads (${c.nHeads}) must be a multiple of nKvGroups (${c.nKvGroups})`);
  if (c.dK % 2 !== 0) throw new Error(`model config: dK (${c.dK}) must be even (RoPE rotates pairs)`);
  if (c.d > c.l) throw new Error(`model config: compression stride d (${c.d}) must not exceed block length l (${c.l})`);
  if (c.seqLen < 2) throw new Error('model config: seqLen must be at least 2 (next-token targets)');
  if (c.vocab > 256) throw new Error('model config: vocab above 256 is not supported (byte-level tokens)');
}

export function buildLayout(c: ModelConfig): LayoutEntry[] {
  const out: LayoutEntry[] = [];
  let off = 0;
  const add = (name: string, shape: number[], decay: boolean) => {
    const size = shape.reduce((a, b) => a * b, 1);
    out.push({ name, offset: off, size, shape, decay });
    off += size;
  };
  const { dim: D, nHeads: H, nKvGroups: G, dK, dV, l } = c;
  const dk2 = Math.max(1, dK >> 1);
  add('embed', [c.vocab, D], true);
  for (let i = 0; i < c.nLayers; i++) {
    const p = `layers.${i}.`;
    add(p + 'attn_norm', [D], false);
    add(p + 'attn.wq', [D, H * dK], true);
    add(p + 'attn.wk_cmp', [D, G * dK], true);
    add(p + 'attn.wv_cmp', [D, G * dV], true);
    add(p + 'attn.wk_sel', [D, G * dK], true);
    add(p + 'attn.wv_sel', [D, G * dV], true);
    add(p + 'attn.wk_win', [D, G * dK], true);
    add(p + 'attn.wv_win', [D, G * dV], true);
    add(p + 'attn.pool_k', [l, G * dK], false);
    add(p + 'attn.pool_v', [l, G * dV], false);
    add(p + 'attn.gate.fc1_w', [dK, dk2], true);
    add(p + 'attn.gate.fc1_b', [dk2], false);
    add(p + 'attn.gate.fc2_w', [dk2, 3], true);
    add(p + 'attn.gate.fc2_b', [3], false);
    add(p + 'attn.wo', [H * dV, D], true);
    add(p + 'mlp_norm', [D], false);
    add(p + 'mlp.fc1', [D, 4 * D], true);
    add(p + 'mlp.fc2', [4 * D, D], true);
  }
  add('final_norm', [D], false);
  add('head', [D, c.vocab], true);
  return out;
}

/** Deterministic PRNG (mulberry32) with Box-Muller normals. */
export class Rng {
  private s: number;
  private spare: number | null = null;
  constructor(seed: number) {
    this.s = (seed >>> 0) ^ 0x9e3779b9;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  normal(): number {
    if (this.spare !== null) {
      const v = this.spare;
      this.spare = null;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
}

function initParams(c: ModelConfig, layout: LayoutEntry[], seed: number): Float32Array {
  const total = layout.reduce((a, e) => a + e.size, 0);
  const p = new Float32Array(total);
  const rng = new Rng(seed);
  for (const e of layout) {
    const v = p.subarray(e.offset, e.offset + e.size);
    const leaf = e.name.slice(e.name.lastIndexOf('.') + 1);
    if (e.name === 'embed') {
      for (let i = 0; i < v.length; i++) v[i] = rng.normal();
      continue;
    }
    if (e.name === 'head') {
      for (let i = 0; i < v.length; i++) v[i] = 0.02 * rng.normal();
      continue;
    }
    if (leaf.endsWith('norm')) {
      v.fill(1);
      continue;
    }
    if (leaf === 'pool_k' || leaf === 'pool_v') {
      v.fill(1 / c.l);
      continue;
    } // starts as the average
    if (leaf === 'fc2_b') {
      v.fill(0);
      continue;
    }
    if (leaf === 'fc2_w' && e.name.includes('.gate.')) {
      // xavier-uniform with gain 0.1: the gate starts near uniform (contract §6)
      const bound = 0.1 * Math.sqrt(6 / (e.shape[0]! + e.shape[1]!));
      for (let i = 0; i < v.length; i++) v[i] = (2 * rng.next() - 1) * bound;
      continue;
    }
    if (leaf === 'fc1_b') {
      const bound = 1 / Math.sqrt(c.dK);
      for (let i = 0; i < v.length; i++) v[i] = (2 * rng.next() - 1) * bound;
      continue;
    }
    // linear layers: PyTorch's default U(±1/√fan_in); residual outputs scaled down by √(2·layers)
    let bound = 1 / Math.sqrt(e.shape[0]!);
    if (leaf === 'wo' || (leaf === 'fc2' && e.name.includes('.mlp.'))) bound /= Math.sqrt(2 * c.nLayers);
    for (let i = 0; i < v.length; i++) v[i] = (2 * rng.next() - 1) * bound;
  }
  return p;
}

/** Number of compressed tokens visible to query t (contract §7.3). */
export function numCmp(t: number, l: number, d: number): number {
  return t + 1 < l ? 0 : Math.floor((t + 1 - l) / d) + 1;
}

interface LayerP {
  attnNorm: number;
  wq: number;
  wkc: number;
  wvc: number;
  wks: number;
  wvs: number;
  wkw: number;
  wvw: number;
  poolK: number;
  poolV: number;
  g1w: number;
  g1b: number;
  g2w: number;
  g2b: number;
  wo: number;
  mlpNorm: number;
  fc1: number;
  fc2: number;
}
/**
 * One attention branch of a layer: keys and values (`rows` rows per batch element), probabilities
 * (`pLen` per head and row), outputs, and the gradient buffers of keys and values.
 */
interface Branch {
  k: number;
  v: number;
  rows: number;
  p: number;
  pLen: number;
  o: number;
  dK: number;
  dV: number;
}

interface LayerA {
  xin: number;
  xn1: number;
  r1: number;
  q: number;
  kc: number;
  vc: number;
  ks: number;
  vs: number;
  kw: number;
  vw: number;
  kcmp: number;
  vcmp: number;
  qg: number;
  gh: number;
  ga: number;
  pc: number;
  ps: number;
  pw: number;
  sel: number;
  selN: number;
  gh3: number;
  oc: number;
  os: number;
  ow: number;
  o: number;
  xmid: number;
  xn2: number;
  r2: number;
  h: number;
  a: number;
  sg: number;
  gates: Float64Array;
  selK: Int32Array;
}

class NsaModel implements ModelInternals {
  readonly cfg: ModelConfig;
  readonly params: Float32Array;
  readonly grads: Float32Array;
  readonly layout: LayoutEntry[];
  readonly kernels: 'wasm' | 'js';
  private readonly k: Kernels;
  private override: GateOverride = null;
  private frozen = false;
  private readonly nParams: number;
  // derived sizes
  private readonly S: number;
  private readonly D: number;
  private readonly H: number;
  private readonly G: number;
  private readonly hpg: number;
  private readonly dk: number;
  private readonly dv: number;
  private readonly dk2: number;
  private readonly Ck: number;
  private readonly Cv: number;
  private readonly Sc: number;
  private readonly selCap: number;
  private readonly selTok: number;
  private readonly wEff: number;
  private readonly scale: number;
  private readonly ropeCos: Float64Array;
  private readonly ropeSin: Float64Array;
  /** for each compressed token i: selection blocks it overlaps and the Eq. 9 weight */
  private readonly ovStart: Int32Array;
  private readonly ovJ: Int32Array;
  private readonly ovW: Float64Array;
  private readonly nBlocks: number;
  // heap layout
  private pOff = 0;
  private gOff = 0;
  private ropeOff = 0;
  private wsOff = 0;
  private lp: LayerP[] = [];
  private B = 0;
  private la: LayerA[] = [];
  private fin = { xL: 0, xf: 0, rf: 0, logits: 0, lse: 0 };
  private zt = new Float64Array(0);
  private scr = {
    dx: 0,
    dxn: 0,
    dh: 0,
    dO: 0,
    dq: 0,
    dkc: 0,
    dvc: 0,
    dks: 0,
    dvs: 0,
    dkw: 0,
    dvw: 0,
    dkcmp: 0,
    dvcmp: 0,
    dqg: 0,
    dgh: 0,
    wt: 0,
    rng: 0,
  };
  private dgates = new Float64Array(0);
  private selScore = new Float64Array(0);
  private chosen = new Int32Array(0);

  constructor(cfg: ModelConfig, k: Kernels, seed: number) {
    validateConfig(cfg);
    this.cfg = { ...cfg };
    this.k = k;
    this.kernels = k.kind;
    this.layout = buildLayout(cfg);
    this.nParams = this.layout.reduce((a, e) => a + e.size, 0);
    this.params = initParams(cfg, this.layout, seed);
    this.grads = new Float32Array(this.nParams);
    const c = cfg;
    this.S = c.seqLen;
    this.D = c.dim;
    this.H = c.nHeads;
    this.G = c.nKvGroups;
    this.hpg = c.nHeads / c.nKvGroups;
    this.dk = c.dK;
    this.dv = c.dV;
    this.dk2 = Math.max(1, c.dK >> 1);
    this.Ck = this.G * this.dk;
    this.Cv = this.G * this.dv;
    this.Sc = this.S < c.l ? 0 : Math.floor((this.S - c.l) / c.d) + 1;
    this.selCap = Math.max(c.nSel, 3);
    this.selTok = this.selCap * c.lSel;
    this.wEff = Math.min(c.w, this.S);
    this.scale = 1 / Math.sqrt(this.dk);
    const half = this.dk >> 1;
    this.ropeCos = new Float64Array(this.S * half);
    this.ropeSin = new Float64Array(this.S * half);
    for (let t = 0; t < this.S; t++)
      for (let i = 0; i < half; i++) {
        const ang = Math.fround(t * Math.pow(10000, (-2 * i) / this.dk));
        this.ropeCos[t * half + i] = Math.cos(ang);
        this.ropeSin[t * half + i] = Math.sin(ang);
      }
    this.nBlocks = Math.ceil(this.S / c.lSel);
    const starts: number[] = [0],
      js: number[] = [],
      ws: number[] = [];
    for (let i = 0; i < this.Sc; i++) {
      const s = i * c.d,
        e = s + c.l;
      for (let j = Math.floor(s / c.lSel); j * c.lSel < e && j < this.nBlocks; j++) {
        const ov = Math.min(e, (j + 1) * c.lSel) - Math.max(s, j * c.lSel);
        if (ov > 0) {
          js.push(j);
          ws.push(ov / c.l);
        }
      }
      starts.push(js.length);
    }
    this.ovStart = Int32Array.from(starts);
    this.ovJ = Int32Array.from(js);
    this.ovW = Float64Array.from(ws);
    this.selScore = new Float64Array(this.nBlocks);
    this.chosen = new Int32Array(this.selCap + 3);
    this.layoutParams();
  }

  private layoutParams(): void {
    const base = this.k.base;
    this.pOff = base;
    this.gOff = base + ((this.nParams + 3) & ~3);
    this.ropeOff = this.gOff + ((this.nParams + 3) & ~3);
    const tab = this.S * (this.dk >> 1);
    this.wsOff = this.ropeOff + ((2 * tab + 3) & ~3);
    this.k.ensure(this.wsOff + 16);
    this.k.f.set(this.ropeCos, this.ropeOff);
    this.k.f.set(this.ropeSin, this.ropeOff + tab);
    const at = (name: string) => {
      const e = this.layout.find((x) => x.name === name);
      if (!e) throw new Error(`layout: ${name} missing`);
      return e.offset;
    };
    this.lp = [];
    for (let i = 0; i < this.cfg.nLayers; i++) {
      const p = `layers.${i}.`;
      this.lp.push({
        attnNorm: at(p + 'attn_norm'),
        wq: at(p + 'attn.wq'),
        wkc: at(p + 'attn.wk_cmp'),
        wvc: at(p + 'attn.wv_cmp'),
        wks: at(p + 'attn.wk_sel'),
        wvs: at(p + 'attn.wv_sel'),
        wkw: at(p + 'attn.wk_win'),
        wvw: at(p + 'attn.wv_win'),
        poolK: at(p + 'attn.pool_k'),
        poolV: at(p + 'attn.pool_v'),
        g1w: at(p + 'attn.gate.fc1_w'),
        g1b: at(p + 'attn.gate.fc1_b'),
        g2w: at(p + 'attn.gate.fc2_w'),
        g2b: at(p + 'attn.gate.fc2_b'),
        wo: at(p + 'attn.wo'),
        mlpNorm: at(p + 'mlp_norm'),
        fc1: at(p + 'mlp.fc1'),
        fc2: at(p + 'mlp.fc2'),
      });
    }
  }

  /** Lays out activations for batch B (only when B changes). */
  private workspace(B: number): void {
    if (B === this.B) return;
    this.B = 0; // invalid until the heap holds the new layout (ensure() may throw)
    const { S, D, H, G, dk, dv, dk2, Ck, Cv, Sc, selTok, wEff } = this;
    const M = B * S;
    let off = this.wsOff;
    const alloc = (n: number) => {
      const o = off;
      off += (Math.max(n, 1) + 3) & ~3;
      return o;
    };
    this.la = [];
    for (let i = 0; i < this.cfg.nLayers; i++) {
      this.la.push({
        xin: alloc(M * D),
        xn1: alloc(M * D),
        r1: alloc(M),
        q: alloc(M * H * dk),
        kc: alloc(M * Ck),
        vc: alloc(M * Cv),
        ks: alloc(M * Ck),
        vs: alloc(M * Cv),
        kw: alloc(M * Ck),
        vw: alloc(M * Cv),
        kcmp: alloc(B * Sc * Ck),
        vcmp: alloc(B * Sc * Cv),
        qg: alloc(M * G * dk),
        gh: alloc(M * G * dk2),
        ga: alloc(M * G * dk2),
        pc: alloc(M * H * Sc),
        ps: alloc(M * H * selTok),
        pw: alloc(M * H * wEff),
        sel: alloc(M * G * this.selCap * 2),
        selN: alloc(M * G),
        gh3: alloc(M * G * 3),
        oc: alloc(M * H * dv),
        os: alloc(M * H * dv),
        ow: alloc(M * H * dv),
        o: alloc(M * H * dv),
        xmid: alloc(M * D),
        xn2: alloc(M * D),
        r2: alloc(M),
        h: alloc(M * 4 * D),
        a: alloc(M * 4 * D),
        sg: alloc(M * 4 * D),
        gates: new Float64Array(M * G * 3),
        selK: new Int32Array(M * G),
      });
    }
    this.fin = { xL: alloc(M * D), xf: alloc(M * D), rf: alloc(M), logits: alloc(M * this.cfg.vocab), lse: alloc(M) };
    this.zt = new Float64Array(M);
    let wtMax = 0;
    for (const e of this.layout) if (e.shape.length === 2) wtMax = Math.max(wtMax, e.size);
    this.scr = {
      dx: alloc(M * D),
      dxn: alloc(M * D),
      dh: alloc(M * 4 * D),
      dO: alloc(M * H * dv),
      dq: alloc(M * H * dk),
      dkc: alloc(M * Ck),
      dvc: alloc(M * Cv),
      dks: alloc(M * Ck),
      dvs: alloc(M * Cv),
      dkw: alloc(M * Ck),
      dvw: alloc(M * Cv),
      dkcmp: alloc(B * Sc * Ck),
      dvcmp: alloc(B * Sc * Cv),
      dqg: alloc(M * G * dk),
      dgh: alloc(M * G * dk2),
      wt: alloc(wtMax),
      rng: alloc(8),
    };
    this.dgates = new Float64Array(M * G * 3);
    this.k.ensure(off + 16);
    this.B = B;
    this.frozen = false; // a frozen selection belongs to the old batch shape
  }

  setGateOverride(mode: GateOverride): void {
    this.override = mode;
  }
  setSelectionFrozen(on: boolean): void {
    this.frozen = on && this.B > 0;
  }

  flopsPerToken(): number {
    const c = this.cfg,
      { D, H, G, dk, dv, dk2, S } = this;
    const macs =
      c.vocab * D +
      c.nLayers * (D * (H * dk + 3 * G * dk + 3 * G * dv) + H * dv * D + 8 * D * D + G * (dk * dk2 + dk2 * 3));
    let keys = 0;
    for (let t = 0; t < S; t++) {
      const cur = Math.floor(t / c.lSel);
      const blocks = Math.min(Math.max(c.nSel, Math.min(3, cur + 1)), cur + 1);
      keys += Math.min(t + 1, c.w) + Math.min(t + 1, blocks * c.lSel) + numCmp(t, c.l, c.d);
    }
    keys /= S;
    return 6 * macs + c.nLayers * 6 * H * keys * (dk + dv);
  }

  forwardBackward(tokens: Uint8Array, batch: number): StepStats {
    return this.run(tokens, batch, true);
  }
  forward(tokens: Uint8Array, batch: number): StepStats {
    return this.run(tokens, batch, false);
  }

  selectedRanges(layer: number, b: number, t: number, g: number): [number, number][] {
    const L = this.la[layer];
    if (!L) throw new Error('no forward has run');
    const row = (b * this.S + t) * this.G + g;
    const n = this.k.i[L.selN + row]!;
    const out: [number, number][] = [];
    const base = L.sel + row * this.selCap * 2;
    for (let r = 0; r < n; r++) out.push([this.k.i[base + 2 * r]!, this.k.i[base + 2 * r + 1]!]);
    return out;
  }
  cmpProbs(layer: number, b: number, t: number, head: number): Float64Array {
    const L = this.la[layer];
    if (!L) throw new Error('no forward has run');
    const n = numCmp(t, this.cfg.l, this.cfg.d);
    const o = L.pc + ((b * this.S + t) * this.H + head) * this.Sc;
    return Float64Array.from(this.k.f.subarray(o, o + n));
  }
  lastProbs(): Float64Array {
    const M = this.B * this.S * this.cfg.vocab;
    return Float64Array.from(this.k.f.subarray(this.fin.logits, this.fin.logits + M));
  }
  lastGates(layer: number): Float64Array {
    return Float64Array.from(this.la[layer]!.gates);
  }

  // ---------------------------------------------------------------------------------------------
  private run(tokens: Uint8Array, B: number, train: boolean): StepStats {
    const c = this.cfg;
    if (!Number.isInteger(B) || B < 1) throw new Error(`batch must be a positive integer (got ${B})`);
    if (tokens.length !== B * this.S)
      throw new Error(`tokens: expected batch×seqLen = ${B * this.S} bytes, got ${tokens.length}`);
    this.workspace(B);
    const k = this.k;
    const f = k.f;
    const P = this.pOff;
    f.set(this.params, P);
    const { S, D } = this;
    const M = B * S;
    // embedding
    const x0 = this.la[0]?.xin ?? this.fin.xL;
    for (let r = 0; r < M; r++) {
      const tok = tokens[r]!;
      if (tok >= c.vocab) throw new Error(`token ${tok} at position ${r} is outside the vocabulary (${c.vocab})`);
      const src = P + tok * D,
        dst = x0 + r * D;
      for (let j = 0; j < D; j++) f[dst + j] = f[src + j]!;
    }
    for (let li = 0; li < c.nLayers; li++) {
      const out = li + 1 < c.nLayers ? this.la[li + 1]!.xin : this.fin.xL;
      this.layerForward(li, B, out);
    }
    // final norm, head, loss
    const lpHead = P + this.layout[this.layout.length - 1]!.offset;
    const lpFin = P + this.layout[this.layout.length - 2]!.offset;
    this.rmsForward(this.fin.xL, lpFin, this.fin.xf, this.fin.rf, M);
    const V = c.vocab;
    k.gemm(this.fin.xf, D, 1, lpHead, V, this.fin.logits, V, M, V, D, false);
    const nT = B * (S - 1);
    const lg = this.fin.logits,
      zt = this.zt;
    for (let r = 0; r < M; r++) zt[r] = r % S === S - 1 ? 0 : f[lg + r * V + tokens[r + 1]!]!;
    k.softmaxRows(lg, M, V, train ? 1 / nT : 1, this.fin.lse);
    const ff = k.f;
    let loss = 0;
    for (let r = 0; r < M; r++) {
      const o = lg + r * V;
      if (r % S === S - 1) {
        if (train) ff.fill(0, o, o + V);
        continue;
      }
      loss += ff[this.fin.lse + r]! - zt[r]!;
      if (train) {
        const tgt = o + tokens[r + 1]!;
        ff[tgt] = ff[tgt]! - 1 / nT;
      }
    }
    loss /= nT;
    const stats: StepStats = { loss, gate: this.gateStats(), sel: this.selStats() };
    if (train) {
      this.backward(tokens, B);
      const G0 = this.gOff;
      this.grads.set(k.f.subarray(G0, G0 + this.nParams));
    }
    return stats;
  }

  private gateStats(): GateStatsOut {
    const g = this.la[0]?.gates;
    if (!g || g.length === 0)
      return {
        entropyMean: Math.log(3),
        entropyMin: Math.log(3),
        maxGate: 1 / 3,
        collapseFrac: 0,
        branchShares: [1 / 3, 1 / 3, 1 / 3],
      };
    const rows = g.length / 3;
    let entSum = 0,
      entMin = Infinity,
      maxMax = 0,
      collapsed = 0,
      nan = false;
    const share = [0, 0, 0];
    for (let r = 0; r < rows; r++) {
      let ent = 0,
        mx = 0;
      for (let j = 0; j < 3; j++) {
        const p = g[r * 3 + j]!;
        if (Number.isNaN(p)) nan = true;
        if (p > 0) ent -= p * Math.log(p);
        if (p > mx) mx = p;
        share[j]! += p;
      }
      entSum += ent;
      if (ent < entMin) entMin = ent;
      if (mx > maxMax) maxMax = mx;
      if (ent < 0.1 && mx > 0.95) collapsed++;
    }
    // like torch's mean/min/max, a NaN gate (NaN weights) makes the statistics NaN, not plausible numbers
    if (nan) {
      entSum = NaN;
      entMin = NaN;
      maxMax = NaN;
    }
    return {
      entropyMean: entSum / rows,
      entropyMin: entMin,
      maxGate: maxMax,
      collapseFrac: collapsed / rows,
      branchShares: [share[0]! / rows, share[1]! / rows, share[2]! / rows],
    };
  }

  private selStats(): SelStatsOut {
    const ks = this.la[0]?.selK;
    if (!ks || ks.length === 0) return { kMean: 0, kMax: 0, rows: 0, pctAtMax: 0 };
    let sum = 0,
      mx = 0;
    for (let i = 0; i < ks.length; i++) {
      sum += ks[i]!;
      if (ks[i]! > mx) mx = ks[i]!;
    }
    let at = 0;
    for (let i = 0; i < ks.length; i++) if (ks[i] === mx) at++;
    return { kMean: sum / ks.length, kMax: mx, rows: ks.length, pctAtMax: at / ks.length };
  }

  // --- building blocks -------------------------------------------------------------------------
  private rmsForward(x: number, w: number, y: number, rinv: number, M: number): void {
    this.k.rmsFwd(x, w, y, rinv, M, this.D, 1e-6);
  }
  /** dx += ∂/∂x of y = rmsnorm(x)·w given dy; dw += … */
  private rmsBackward(x: number, rinv: number, w: number, dw: number, dy: number, dx: number, M: number): void {
    this.k.rmsBwd(x, rinv, w, dw, dy, dx, M, this.D);
  }
  private linear(x: number, W: number, y: number, M: number, K: number, N: number): void {
    this.k.gemm(x, K, 1, W, N, y, N, M, N, K, false);
  }
  /** dW += xᵀ·dy; dx (=|+=) dy·Wᵀ when dx ≥ 0 */
  private linearBackward(
    x: number,
    W: number,
    dW: number,
    dy: number,
    dx: number,
    M: number,
    K: number,
    N: number,
    accDx: boolean,
  ): void {
    const k = this.k;
    k.gemm(x, 1, K, dy, N, dW, N, K, N, M, true);
    if (dx >= 0) {
      k.transpose(W, K, N, this.scr.wt);
      k.gemm(dy, N, 1, this.scr.wt, K, dx, K, M, K, N, accDx);
    }
  }
  /** RoPE over interleaved pairs, per head of width dk, rows of `heads` heads; inverse for gradients */
  private rope(buf: number, M: number, heads: number, inverse: boolean): void {
    this.k.rope(buf, M, heads, this.dk, this.S, this.ropeOff, this.ropeOff + this.S * (this.dk >> 1), inverse);
  }

  // --- one block -------------------------------------------------------------------------------
  /** the three attention branches of a layer's activations, with their gradient buffers */
  private branchesOf(L: LayerA): { cmp: Branch; sel: Branch; win: Branch } {
    const sc = this.scr;
    const { S, Sc, selTok, wEff } = this;
    return {
      cmp: { k: L.kcmp, v: L.vcmp, rows: Sc, p: L.pc, pLen: Sc, o: L.oc, dK: sc.dkcmp, dV: sc.dvcmp },
      sel: { k: L.ks, v: L.vs, rows: S, p: L.ps, pLen: selTok, o: L.os, dK: sc.dks, dV: sc.dvs },
      win: { k: L.kw, v: L.vw, rows: S, p: L.pw, pLen: wEff, o: L.ow, dK: sc.dkw, dV: sc.dvw },
    };
  }

  /** every head of group g at row r (batch element b) attends branch `br` over `nr` ranges at `ranges` */
  private attendFwd(q: number, br: Branch, b: number, r: number, g: number, ranges: number, nr: number): void {
    const { H, hpg, dk, dv, Ck, Cv, scale } = this;
    const K = br.k + b * br.rows * Ck + g * dk,
      V = br.v + b * br.rows * Cv + g * dv;
    for (let hh = 0; hh < hpg; hh++) {
      const rh = r * H + g * hpg + hh;
      const P = br.p + rh * br.pLen,
        O = br.o + rh * dv;
      this.k.attnFwd(q + rh * dk, K, Ck, V, Cv, ranges, nr, dk, dv, scale, P, O);
    }
  }

  /** backward of attendFwd for one head, the branch weighted by `gate`; returns dO·O */
  private attendBwd(
    q: number,
    br: Branch,
    b: number,
    r: number,
    g: number,
    head: number,
    ranges: number,
    nr: number,
    gate: number,
  ): number {
    const { H, dk, dv, Ck, Cv, scale } = this;
    const ko = b * br.rows * Ck + g * dk,
      vo = b * br.rows * Cv + g * dv;
    const rh = r * H + head;
    const P = br.p + rh * br.pLen,
      O = br.o + rh * dv,
      dO = this.scr.dO + rh * dv,
      dq = this.scr.dq + rh * dk;
    const K = br.k + ko,
      V = br.v + vo,
      dK = br.dK + ko,
      dV = br.dV + vo;
    return this.k.attnBwd(q + rh * dk, K, Ck, V, Cv, ranges, nr, dk, dv, scale, gate, P, O, dO, dq, dK, dV);
  }

  private layerForward(li: number, B: number, xout: number): void {
    const c = this.cfg,
      k = this.k,
      P = this.pOff,
      lp = this.lp[li]!,
      L = this.la[li]!;
    const { S, D, H, G, hpg, dk, dv, dk2, Ck, Cv, Sc, selCap, wEff } = this;
    const M = B * S;
    this.rmsForward(L.xin, P + lp.attnNorm, L.xn1, L.r1, M);
    this.linear(L.xn1, P + lp.wq, L.q, M, D, H * dk);
    this.linear(L.xn1, P + lp.wkc, L.kc, M, D, Ck);
    this.linear(L.xn1, P + lp.wvc, L.vc, M, D, Cv);
    this.linear(L.xn1, P + lp.wks, L.ks, M, D, Ck);
    this.linear(L.xn1, P + lp.wvs, L.vs, M, D, Cv);
    this.linear(L.xn1, P + lp.wkw, L.kw, M, D, Ck);
    this.linear(L.xn1, P + lp.wvw, L.vw, M, D, Cv);
    this.rope(L.q, M, H, false);
    this.rope(L.kc, M, G, false);
    this.rope(L.ks, M, G, false);
    this.rope(L.kw, M, G, false);
    let f = k.f;
    // compressed tokens: learned per-position, per-channel pooling over each block of l
    k.poolFwd(L.kc, P + lp.poolK, L.kcmp, B, S, Sc, c.l, c.d, Ck);
    k.poolFwd(L.vc, P + lp.poolV, L.vcmp, B, S, Sc, c.l, c.d, Cv);
    // gate: GateMLP on the group-mean rotated query
    const MG = M * G;
    for (let r = 0; r < M; r++)
      for (let g = 0; g < G; g++) {
        const dst = L.qg + (r * G + g) * dk;
        for (let ch = 0; ch < dk; ch++) {
          let s = 0;
          for (let hh = 0; hh < hpg; hh++) s += f[L.q + r * H * dk + (g * hpg + hh) * dk + ch]!;
          f[dst + ch] = s / hpg;
        }
      }
    this.linear(L.qg, P + lp.g1w, L.gh, MG, dk, dk2);
    const gates = L.gates;
    for (let rg = 0; rg < MG; rg++) {
      const oh = L.gh + rg * dk2,
        oa = L.ga + rg * dk2;
      for (let j = 0; j < dk2; j++) {
        const z = f[oh + j]! + f[P + lp.g1b + j]!;
        f[oh + j] = z;
        f[oa + j] = z / (1 + Math.exp(-z));
      }
      if (this.override === 'uniform') {
        gates[rg * 3] = gates[rg * 3 + 1] = gates[rg * 3 + 2] = 1 / 3;
        continue;
      }
      if (this.override === 'collapse') {
        gates[rg * 3] = 0;
        gates[rg * 3 + 1] = 0;
        gates[rg * 3 + 2] = 1;
        continue;
      }
      let z0 = f[P + lp.g2b]!,
        z1 = f[P + lp.g2b + 1]!,
        z2 = f[P + lp.g2b + 2]!;
      for (let j = 0; j < dk2; j++) {
        const a = f[oa + j]!,
          w = P + lp.g2w + j * 3;
        z0 += a * f[w]!;
        z1 += a * f[w + 1]!;
        z2 += a * f[w + 2]!;
      }
      const mx = Math.max(z0, z1, z2);
      const e0 = Math.exp(z0 - mx),
        e1 = Math.exp(z1 - mx),
        e2 = Math.exp(z2 - mx),
        inv = 1 / (e0 + e1 + e2);
      gates[rg * 3] = e0 * inv;
      gates[rg * 3 + 1] = e1 * inv;
      gates[rg * 3 + 2] = e2 * inv;
    }
    // attention rows
    const iv = k.i;
    const rng = this.scr.rng;
    const nSel = c.nSel,
      lSel = c.lSel;
    const score = this.selScore;
    const chosen = this.chosen;
    const br = this.branchesOf(L);
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < S; t++) {
        const r = b * S + t;
        const nc = numCmp(t, c.l, c.d);
        const w0 = Math.max(0, t - wEff + 1);
        for (let g = 0; g < G; g++) {
          const rg = r * G + g;
          // compressed branch for every head of the group
          iv[rng] = 0;
          iv[rng + 1] = nc;
          this.attendFwd(L.q, br.cmp, b, r, g, rng, 1);
          // selection (Eq. 9 + Eq. 10), unless frozen
          const selBase = L.sel + rg * selCap * 2;
          if (!this.frozen) {
            f = k.f;
            const cur = Math.floor(t / lSel);
            score.fill(0);
            for (let hh = 0; hh < hpg; hh++) {
              const pc = L.pc + (r * H + g * hpg + hh) * Sc;
              for (let i = 0; i < nc; i++) {
                const p = f[pc + i]!;
                for (let q = this.ovStart[i]!; q < this.ovStart[i + 1]!; q++) score[this.ovJ[q]!] += p * this.ovW[q]!;
              }
            }
            let nch = 0;
            chosen[nch++] = 0;
            if (cur > 0) chosen[nch++] = cur;
            if (cur - 1 > 0) chosen[nch++] = cur - 1;
            const kRest = Math.max(0, nSel - nch);
            // candidates: blocks fully in the past ((j+1)·lSel ≤ t+1), not forced; ties → lower index
            for (let pick = 0; pick < kRest; pick++) {
              let best = -1,
                bestS = -Infinity;
              for (let j = 1; (j + 1) * lSel <= t + 1; j++) {
                if (j === cur || j === cur - 1) continue;
                let taken = false;
                for (let q = 0; q < nch; q++)
                  if (chosen[q] === j) {
                    taken = true;
                    break;
                  }
                if (taken) continue;
                if (score[j]! > bestS) {
                  bestS = score[j]!;
                  best = j;
                }
              }
              if (best < 0) break;
              chosen[nch++] = best;
            }
            for (let a = 1; a < nch; a++) {
              const v = chosen[a]!;
              let q = a - 1;
              while (q >= 0 && chosen[q]! > v) {
                chosen[q + 1] = chosen[q]!;
                q--;
              }
              chosen[q + 1] = v;
            }
            let nr = 0,
              kTot = 0,
              prevEnd = -1;
            for (let q = 0; q < nch; q++) {
              const j = chosen[q]!;
              const s = j * lSel,
                e = Math.min((j + 1) * lSel, t + 1);
              if (e <= s) continue;
              if (s === prevEnd) {
                iv[selBase + 2 * (nr - 1) + 1] = e;
              } else {
                iv[selBase + 2 * nr] = s;
                iv[selBase + 2 * nr + 1] = e;
                nr++;
              }
              kTot += e - s;
              prevEnd = e;
            }
            iv[L.selN + rg] = nr;
            L.selK[rg] = kTot;
          }
          const nrSel = iv[L.selN + rg]!;
          this.attendFwd(L.q, br.sel, b, r, g, selBase, nrSel);
          // sliding window
          iv[rng] = w0;
          iv[rng + 1] = t + 1;
          this.attendFwd(L.q, br.win, b, r, g, rng, 1);
        }
      }
    }
    // combine branches with the gates
    f = k.f;
    for (let i = 0; i < MG * 3; i++) f[L.gh3 + i] = gates[i]!;
    k.combine3(L.o, L.oc, L.os, L.ow, L.gh3, M, H, hpg, G, dv);
    // out projection + residual, then MLP
    this.linear(L.o, P + lp.wo, L.xmid, M, H * dv, D);
    k.addTo(L.xmid, L.xin, M * D);
    this.rmsForward(L.xmid, P + lp.mlpNorm, L.xn2, L.r2, M);
    this.linear(L.xn2, P + lp.fc1, L.h, M, D, 4 * D);
    k.siluFwd(L.h, L.a, L.sg, M * 4 * D);
    this.linear(L.a, P + lp.fc2, xout, M, 4 * D, D);
    k.addTo(xout, L.xmid, M * D);
  }

  // --- backward --------------------------------------------------------------------------------
  private backward(tokens: Uint8Array, B: number): void {
    const c = this.cfg,
      k = this.k,
      P = this.pOff,
      Gd = this.gOff;
    const { S, D } = this;
    const M = B * S,
      V = c.vocab;
    const f = k.f;
    f.fill(0, Gd, Gd + this.nParams);
    const headE = this.layout[this.layout.length - 1]!,
      finE = this.layout[this.layout.length - 2]!;
    const sc = this.scr;
    // head: dlogits are in fin.logits
    this.linearBackward(this.fin.xf, P + headE.offset, Gd + headE.offset, this.fin.logits, sc.dxn, M, D, V, false);
    f.fill(0, sc.dx, sc.dx + M * D);
    this.rmsBackward(this.fin.xL, this.fin.rf, P + finE.offset, Gd + finE.offset, sc.dxn, sc.dx, M);
    for (let li = c.nLayers - 1; li >= 0; li--) this.layerBackward(li, B);
    // embedding
    const ff = k.f;
    for (let r = 0; r < M; r++) {
      const dst = Gd + tokens[r]! * D,
        src = sc.dx + r * D;
      for (let j = 0; j < D; j++) ff[dst + j] = ff[dst + j]! + ff[src + j]!;
    }
  }

  private layerBackward(li: number, B: number): void {
    const c = this.cfg,
      k = this.k,
      P = this.pOff,
      Gd = this.gOff,
      lp = this.lp[li]!,
      L = this.la[li]!,
      sc = this.scr;
    const { S, D, H, G, hpg, dk, dv, dk2, Ck, Cv, Sc, selCap, wEff } = this;
    const M = B * S,
      MG = M * G;
    const f = k.f;
    // MLP: dx holds ∂L/∂xout; residual passes it to xmid unchanged
    this.linearBackward(L.a, P + lp.fc2, Gd + lp.fc2, sc.dx, sc.dh, M, 4 * D, D, false);
    k.siluBwd(sc.dh, L.h, L.sg, M * 4 * D);
    this.linearBackward(L.xn2, P + lp.fc1, Gd + lp.fc1, sc.dh, sc.dxn, M, D, 4 * D, false);
    this.rmsBackward(L.xmid, L.r2, P + lp.mlpNorm, Gd + lp.mlpNorm, sc.dxn, sc.dx, M);
    // attention output projection
    this.linearBackward(L.o, P + lp.wo, Gd + lp.wo, sc.dx, sc.dO, M, H * dv, D, false);
    f.fill(0, sc.dq, sc.dq + M * H * dk);
    f.fill(0, sc.dkc, sc.dkc + M * Ck);
    f.fill(0, sc.dvc, sc.dvc + M * Cv);
    f.fill(0, sc.dks, sc.dks + M * Ck);
    f.fill(0, sc.dvs, sc.dvs + M * Cv);
    f.fill(0, sc.dkw, sc.dkw + M * Ck);
    f.fill(0, sc.dvw, sc.dvw + M * Cv);
    f.fill(0, sc.dkcmp, sc.dkcmp + B * Sc * Ck);
    f.fill(0, sc.dvcmp, sc.dvcmp + B * Sc * Cv);
    const dg = this.dgates;
    dg.fill(0);
    const gates = L.gates,
      iv = k.i,
      rng = sc.rng;
    const br = this.branchesOf(L);
    for (let b = 0; b < B; b++)
      for (let t = 0; t < S; t++) {
        const r = b * S + t;
        const nc = numCmp(t, c.l, c.d),
          w0 = Math.max(0, t - wEff + 1);
        for (let g = 0; g < G; g++) {
          const rg = r * G + g;
          const g0 = gates[rg * 3]!,
            g1 = gates[rg * 3 + 1]!,
            g2 = gates[rg * 3 + 2]!;
          const selBase = L.sel + rg * selCap * 2,
            nrSel = iv[L.selN + rg]!;
          let d0 = 0,
            d1 = 0,
            d2 = 0;
          for (let hh = 0; hh < hpg; hh++) {
            const head = g * hpg + hh;
            iv[rng] = 0;
            iv[rng + 1] = nc;
            d0 += this.attendBwd(L.q, br.cmp, b, r, g, head, rng, 1, g0);
            d1 += this.attendBwd(L.q, br.sel, b, r, g, head, selBase, nrSel, g1);
            iv[rng] = w0;
            iv[rng + 1] = t + 1;
            d2 += this.attendBwd(L.q, br.win, b, r, g, head, rng, 1, g2);
          }
          dg[rg * 3] = d0;
          dg[rg * 3 + 1] = d1;
          dg[rg * 3 + 2] = d2;
        }
      }
    // gate MLP backward (no gradient while an override pins the gates)
    if (this.override === null) {
      const dgh = sc.dgh;
      for (let rg = 0; rg < MG; rg++) {
        const p0 = gates[rg * 3]!,
          p1 = gates[rg * 3 + 1]!,
          p2 = gates[rg * 3 + 2]!;
        const e0 = dg[rg * 3]!,
          e1 = dg[rg * 3 + 1]!,
          e2 = dg[rg * 3 + 2]!;
        const dot = p0 * e0 + p1 * e1 + p2 * e2;
        const z0 = p0 * (e0 - dot),
          z1 = p1 * (e1 - dot),
          z2 = p2 * (e2 - dot);
        const gb = Gd + lp.g2b;
        f[gb] = f[gb]! + z0;
        f[gb + 1] = f[gb + 1]! + z1;
        f[gb + 2] = f[gb + 2]! + z2;
        const oa = L.ga + rg * dk2,
          oh = L.gh + rg * dk2,
          od = dgh + rg * dk2;
        for (let j = 0; j < dk2; j++) {
          const wv = P + lp.g2w + j * 3,
            wg = Gd + lp.g2w + j * 3;
          const a = f[oa + j]!;
          f[wg] = f[wg]! + a * z0;
          f[wg + 1] = f[wg + 1]! + a * z1;
          f[wg + 2] = f[wg + 2]! + a * z2;
          const da = z0 * f[wv]! + z1 * f[wv + 1]! + z2 * f[wv + 2]!;
          const z = f[oh + j]!,
            s = 1 / (1 + Math.exp(-z));
          const dz = da * s * (1 + z * (1 - s));
          f[od + j] = dz;
          f[Gd + lp.g1b + j] = f[Gd + lp.g1b + j]! + dz;
        }
      }
      this.linearBackward(L.qg, P + lp.g1w, Gd + lp.g1w, dgh, sc.dqg, MG, dk, dk2, false);
      for (let r = 0; r < M; r++)
        for (let g = 0; g < G; g++) {
          const src = sc.dqg + (r * G + g) * dk;
          for (let hh = 0; hh < hpg; hh++) {
            const dst = sc.dq + (r * H + g * hpg + hh) * dk;
            for (let ch = 0; ch < dk; ch++) f[dst + ch] = f[dst + ch]! + f[src + ch]! / hpg;
          }
        }
    }
    // compressed pooling backward
    k.poolBwd(L.kc, P + lp.poolK, sc.dkcmp, sc.dkc, Gd + lp.poolK, B, S, Sc, c.l, c.d, Ck);
    k.poolBwd(L.vc, P + lp.poolV, sc.dvcmp, sc.dvc, Gd + lp.poolV, B, S, Sc, c.l, c.d, Cv);
    this.rope(sc.dq, M, H, true);
    this.rope(sc.dkc, M, G, true);
    this.rope(sc.dks, M, G, true);
    this.rope(sc.dkw, M, G, true);
    this.linearBackward(L.xn1, P + lp.wq, Gd + lp.wq, sc.dq, sc.dxn, M, D, H * dk, false);
    this.linearBackward(L.xn1, P + lp.wkc, Gd + lp.wkc, sc.dkc, sc.dxn, M, D, Ck, true);
    this.linearBackward(L.xn1, P + lp.wvc, Gd + lp.wvc, sc.dvc, sc.dxn, M, D, Cv, true);
    this.linearBackward(L.xn1, P + lp.wks, Gd + lp.wks, sc.dks, sc.dxn, M, D, Ck, true);
    this.linearBackward(L.xn1, P + lp.wvs, Gd + lp.wvs, sc.dvs, sc.dxn, M, D, Cv, true);
    this.linearBackward(L.xn1, P + lp.wkw, Gd + lp.wkw, sc.dkw, sc.dxn, M, D, Ck, true);
    this.linearBackward(L.xn1, P + lp.wvw, Gd + lp.wvw, sc.dvw, sc.dxn, M, D, Cv, true);
    this.rmsBackward(L.xin, L.r1, P + lp.attnNorm, Gd + lp.attnNorm, sc.dxn, sc.dx, M);
  }
}

export async function createModel(
  cfg: ModelConfig,
  opts: { seed: number; kernels?: 'wasm' | 'js' | 'auto'; f64?: boolean },
): Promise<ModelInternals> {
  validateConfig(cfg);
  const k = await loadKernels(opts.kernels ?? 'auto', { f64: opts.f64 });
  return new NsaModel(cfg, k, opts.seed);
}
