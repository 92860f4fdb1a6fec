// Kernel loader for the reference trainer: WebAssembly SIMD (kernels.wasm, built from
// assembly/kernels.ts) with a plain-JS twin of every function, chosen automatically.
//
// All buffers live in one heap: for wasm, the module's exported memory; for JS, an ordinary
// ArrayBuffer (or, for gradient checks, a Float64Array). Offsets passed to kernels are in
// 4-byte *elements* of that heap (`f[off]` for floats, `i[off]` for int32 ranges), so model code
// is identical for both back ends. `ensure()` may grow the heap, which replaces `f` and `i`:
// never keep views across an ensure() call.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export type KernelKind = 'wasm' | 'js';
export type FloatHeap = Float32Array | Float64Array;

/**
 * The kernels: the heap, and the compute functions whose signatures (and docs) the plain-JS twin
 * defines (JsKernels below); the wasm kernels reach the same functions through WASM_ABI.
 */
export type Kernels = KernelHeap & Pick<JsKernels, KernelFn>;

export interface KernelHeap {
  readonly kind: KernelKind;
  /** float view over the whole heap */
  f: FloatHeap;
  /** int32 view (same addresses as f for wasm; a parallel array for JS) */
  i: Int32Array;
  /** first element offset callers may use */
  readonly base: number;
  /** make the heap hold at least `elems` elements (may replace f and i) */
  ensure(elems: number): void;
}

// lib "ES2023" without DOM carries no WebAssembly typings, so declare the little we use.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
type WasmModule = object;
interface WasmApi {
  Module: new (bytes: Uint8Array) => WasmModule;
  Instance: new (mod: WasmModule, imports: object) => { exports: unknown };
}
const WA = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;

/** Elements reserved at the bottom of the wasm heap for the module's own static data. */
const WASM_BASE = 65536 / 4;
const PAGE_ELEMS = 65536 / 4;

/** A wasm export: heap byte offsets and numbers in, a number (or nothing) out. */
type WasmFn = (...args: number[]) => number | undefined;
interface WasmExports {
  memory: WasmMemory;
  [name: string]: WasmFn | WasmMemory;
}

/** The compute functions of Kernels (everything but the heap). */
type KernelFn = Exclude<keyof JsKernels, keyof KernelHeap>;

/**
 * How each kernel reaches its wasm export: the export's name, and per argument 'p' a heap offset
 * (elements here, bytes there), 'n' a number passed as is, 'b' a boolean passed as 0/1.
 */
const WASM_ABI: Record<KernelFn, readonly [exportName: string, args: string]> = {
  gemm: ['gemm', 'pnnpnpnnnnb'],
  transpose: ['transpose', 'pnnp'],
  siluFwd: ['silu_fwd', 'pppn'],
  siluBwd: ['silu_bwd', 'pppn'],
  softmaxRows: ['softmax_rows', 'pnnnp'],
  rmsFwd: ['rms_fwd', 'ppppnnn'],
  rmsBwd: ['rms_bwd', 'ppppppnn'],
  rope: ['rope', 'pnnnnppb'],
  addTo: ['add_to', 'ppn'],
  combine3: ['combine3', 'pppppnnnnn'],
  poolFwd: ['pool_fwd', 'pppnnnnnn'],
  poolBwd: ['pool_bwd', 'pppppnnnnnn'],
  attnFwd: ['attn_fwd', 'ppnpnpnnnnpp'],
  attnBwd: ['attn_bwd', 'ppnpnpnnnnnpppppp'],
};

/** the kernel `name` as a call of its wasm export */
function wasmCall(x: WasmExports, name: KernelFn): (...args: (number | boolean)[]) => number | undefined {
  const [exportName, kinds] = WASM_ABI[name];
  const fn = x[exportName];
  if (typeof fn !== 'function') throw new Error(`kernels.wasm exports no ${exportName}`);
  const ptrs = [...kinds].flatMap((c, k) => (c === 'p' ? [k] : []));
  const bools = [...kinds].flatMap((c, k) => (c === 'b' ? [k] : []));
  return (...args) => {
    for (const k of ptrs) args[k] = (args[k] as number) * 4;
    for (const k of bools) args[k] = args[k] ? 1 : 0;
    return fn(...(args as number[]));
  };
}

let wasmModule: WasmModule | null | undefined;
let wasmError = '';

/** Where kernels.wasm is looked for: next to this file (source tree) or next to the bundle (dist/). */
function wasmCandidates(): string[] {
  const out: string[] = [];
  try {
    out.push(fileURLToPath(new URL('./kernels.wasm', import.meta.url)));
  } catch {
    /* not a file URL */
  }
  try {
    out.push(fileURLToPath(new URL('../src/trainer/reference/kernels/kernels.wasm', import.meta.url)));
  } catch {
    /* ignore */
  }
  return out;
}

function compileWasm(path?: string): WasmModule | null {
  if (path !== undefined) {
    if (!WA) {
      wasmError = 'this JavaScript engine has no WebAssembly';
      return null;
    }
    try {
      return new WA.Module(readFileSync(path));
    } catch (e) {
      wasmError = `kernels.wasm at ${path} unusable (${(e as Error).message})`;
      return null;
    }
  }
  if (wasmModule !== undefined) return wasmModule;
  wasmModule = null;
  if (!WA) {
    wasmError = 'this JavaScript engine has no WebAssembly';
    return null;
  }
  for (const p of wasmCandidates()) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(p);
    } catch {
      continue;
    }
    try {
      wasmModule = new WA.Module(bytes);
      return wasmModule;
    } catch (e) {
      wasmError = `kernels.wasm at ${p} did not compile (${(e as Error).message})`;
      return null;
    }
  }
  wasmError = 'kernels.wasm not found';
  return null;
}

/** The heap of the wasm kernels; the kernels themselves are its exports, wrapped per WASM_ABI (wasmKernels). */
class WasmHeap {
  readonly kind = 'wasm' as const;
  readonly base = WASM_BASE;
  f: Float32Array;
  i: Int32Array;
  constructor(readonly x: WasmExports) {
    this.f = new Float32Array(this.x.memory.buffer);
    this.i = new Int32Array(this.x.memory.buffer);
  }
  ensure(elems: number): void {
    const have = this.x.memory.buffer.byteLength / 4;
    if (elems > have) {
      try {
        this.x.memory.grow(Math.ceil((elems - have) / PAGE_ELEMS));
      } catch (e) {
        throw new Error(
          `the model needs ${Math.ceil((elems * 4) / 2 ** 20)} MB of WebAssembly memory, more than it can have (${(e as Error).message}); ` +
            'use a smaller batch, seq_len or model, or --kernels js',
        );
      }
    }
    if (this.f.buffer !== this.x.memory.buffer || this.f.length === 0) {
      this.f = new Float32Array(this.x.memory.buffer);
      this.i = new Int32Array(this.x.memory.buffer);
    }
  }
}

function wasmKernels(mod: WasmModule): Kernels {
  const heap = new WasmHeap(new WA!.Instance(mod, {}).exports as unknown as WasmExports);
  const k = heap as WasmHeap & Record<KernelFn, unknown>;
  for (const name of Object.keys(WASM_ABI) as KernelFn[]) k[name] = wasmCall(heap.x, name);
  return k as unknown as Kernels;
}

/** Plain-JS twin of the wasm kernels (same loop order; arithmetic in double, stored to the heap type). */
/** the geometry of a compression pool: batch, sequence, compressed length, block l, stride d, row width */
/** one attention branch's operands: a query row, keys and values with their strides, the key ranges, dims and scale */
type AttnOperands = [
  q: number,
  K: number,
  ldk: number,
  V: number,
  ldv: number,
  ranges: number,
  nr: number,
  dk: number,
  dv: number,
  scale: number,
];

type PoolGeometry = [B: number, S: number, Sc: number, l: number, d: number, C: number];

class JsKernels implements Kernels {
  readonly kind = 'js' as const;
  readonly base = WASM_BASE;
  f: FloatHeap;
  i: Int32Array;
  private readonly f64: boolean;
  constructor(f64: boolean) {
    this.f64 = f64;
    this.f = f64 ? new Float64Array(WASM_BASE * 2) : new Float32Array(WASM_BASE * 2);
    this.i = new Int32Array(WASM_BASE * 2);
  }
  ensure(elems: number): void {
    if (elems <= this.f.length) return;
    const n = Math.ceil(elems / PAGE_ELEMS) * PAGE_ELEMS;
    const f = this.f64 ? new Float64Array(n) : new Float32Array(n);
    f.set(this.f);
    const i = new Int32Array(n);
    i.set(this.i);
    this.f = f;
    this.i = i;
  }
  private ap = new Float64Array(0);
  private bt = new Float64Array(0);
  /** C[M,N] (+)= A·B with A(i,k) = f[a + i·sai + k·sak], B row-major (ldb), C row-major (ldc) */
  gemm(
    a: number,
    sai: number,
    sak: number,
    b: number,
    ldb: number,
    c: number,
    ldc: number,
    M: number,
    N: number,
    K: number,
    accumulate: boolean,
  ): void {
    const f = this.f;
    // pack A row-major and B transposed so every inner loop is a contiguous dot product
    if (this.ap.length < M * K) this.ap = new Float64Array(M * K);
    if (this.bt.length < N * K) this.bt = new Float64Array(N * K);
    const ap = this.ap,
      bt = this.bt;
    for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) ap[i * K + k] = f[a + i * sai + k * sak]!;
    for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) bt[j * K + k] = f[b + k * ldb + j]!;
    let i = 0;
    for (; i + 2 <= M; i += 2) {
      const a0 = i * K,
        a1 = a0 + K,
        c0 = c + i * ldc,
        c1 = c0 + ldc;
      let j = 0;
      for (; j + 2 <= N; j += 2) {
        const b0 = j * K,
          b1 = b0 + K;
        let s00 = 0,
          s01 = 0,
          s10 = 0,
          s11 = 0;
        for (let k = 0; k < K; k++) {
          const x0 = ap[a0 + k]!,
            x1 = ap[a1 + k]!,
            y0 = bt[b0 + k]!,
            y1 = bt[b1 + k]!;
          s00 += x0 * y0;
          s01 += x0 * y1;
          s10 += x1 * y0;
          s11 += x1 * y1;
        }
        if (accumulate) {
          s00 += f[c0 + j]!;
          s01 += f[c0 + j + 1]!;
          s10 += f[c1 + j]!;
          s11 += f[c1 + j + 1]!;
        }
        f[c0 + j] = s00;
        f[c0 + j + 1] = s01;
        f[c1 + j] = s10;
        f[c1 + j + 1] = s11;
      }
      for (; j < N; j++) {
        const b0 = j * K;
        let s0 = 0,
          s1 = 0;
        for (let k = 0; k < K; k++) {
          const y = bt[b0 + k]!;
          s0 += ap[a0 + k]! * y;
          s1 += ap[a1 + k]! * y;
        }
        if (accumulate) {
          s0 += f[c0 + j]!;
          s1 += f[c1 + j]!;
        }
        f[c0 + j] = s0;
        f[c1 + j] = s1;
      }
    }
    for (; i < M; i++) {
      const a0 = i * K,
        c0 = c + i * ldc;
      for (let j = 0; j < N; j++) {
        const b0 = j * K;
        let s0 = 0;
        for (let k = 0; k < K; k++) s0 += ap[a0 + k]! * bt[b0 + k]!;
        f[c0 + j] = accumulate ? s0 + f[c0 + j]! : s0;
      }
    }
  }
  /** dst[cols,rows] = src[rows,cols]ᵀ */
  transpose(src: number, rows: number, cols: number, dst: number): void {
    const f = this.f;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) f[dst + c * rows + r] = f[src + r * cols + c];
  }
  /** y[r,:] = x[r,:]·rinv[r]·w with rinv[r] = 1/√(mean(x[r,:]²)+eps) */
  rmsFwd(x: number, w: number, y: number, rinv: number, M: number, D: number, eps: number): void {
    const f = this.f;
    for (let r = 0; r < M; r++) {
      const o = x + r * D,
        oy = y + r * D;
      let ss = 0;
      for (let j = 0; j < D; j++) ss += f[o + j]! * f[o + j]!;
      const s = 1 / Math.sqrt(ss / D + eps);
      f[rinv + r] = s;
      for (let j = 0; j < D; j++) f[oy + j] = f[o + j]! * s * f[w + j]!;
    }
  }
  /** backward of rmsFwd: dx += …, dw += … */
  rmsBwd(x: number, rinv: number, w: number, dw: number, dy: number, dx: number, M: number, D: number): void {
    const f = this.f;
    for (let r = 0; r < M; r++) {
      const o = x + r * D,
        od = dy + r * D,
        ox = dx + r * D;
      const s = f[rinv + r]!;
      let dot = 0;
      for (let j = 0; j < D; j++) dot += f[w + j]! * f[od + j]! * f[o + j]!;
      const c3 = (s * s * s * dot) / D;
      for (let j = 0; j < D; j++) {
        f[ox + j] = f[ox + j]! + s * f[w + j]! * f[od + j]! - c3 * f[o + j]!;
        f[dw + j] = f[dw + j]! + f[od + j]! * f[o + j]! * s;
      }
    }
  }
  /** RoPE on interleaved pairs of rows [M, heads·dk] at positions r % S, tables cs/sn [S, dk/2]; inverse = −angle */
  rope(buf: number, M: number, heads: number, dk: number, S: number, cs: number, sn: number, inverse: boolean): void {
    const f = this.f,
      half = dk >> 1,
      width = heads * dk;
    for (let r = 0; r < M; r++) {
      const tb = (r % S) * half;
      for (let h = 0; h < heads; h++) {
        const o = buf + r * width + h * dk;
        for (let i = 0; i < half; i++) {
          const x0 = f[o + 2 * i]!,
            x1 = f[o + 2 * i + 1]!,
            c = f[cs + tb + i]!,
            s = inverse ? -f[sn + tb + i]! : f[sn + tb + i]!;
          f[o + 2 * i] = x0 * c - x1 * s;
          f[o + 2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  }
  /** dst[0..n) += src[0..n) */
  addTo(dst: number, src: number, n: number): void {
    const f = this.f;
    for (let i = 0; i < n; i++) f[dst + i] = f[dst + i]! + f[src + i]!;
  }
  /** o[r,h,:] = Σ_b gates[r,g(h),b]·O_b[r,h,:] over the three branches (gates [M·G, 3]) */
  combine3(
    o: number,
    oc: number,
    os: number,
    ow: number,
    gates: number,
    M: number,
    H: number,
    hpg: number,
    G: number,
    dv: number,
  ): void {
    const f = this.f;
    for (let r = 0; r < M; r++)
      for (let head = 0; head < H; head++) {
        const gp = gates + (r * G + Math.floor(head / hpg)) * 3;
        const g0 = f[gp]!,
          g1 = f[gp + 1]!,
          g2 = f[gp + 2]!;
        const b = (r * H + head) * dv;
        for (let j = 0; j < dv; j++) f[o + b + j] = g0 * f[oc + b + j]! + g1 * f[os + b + j]! + g2 * f[ow + b + j]!;
      }
  }
  /** out[b,i,:] = Σ_{j<l} pool[j,:] ⊙ x[b, i·d+j, :] (rows of width C) */
  poolFwd(x: number, pool: number, out: number, ...g: PoolGeometry): void {
    const [B, S, Sc, l, d, C] = g;
    const f = this.f;
    for (let b = 0; b < B; b++)
      for (let i = 0; i < Sc; i++) {
        const oo = out + (b * Sc + i) * C;
        for (let c = 0; c < C; c++) f[oo + c] = 0;
        for (let j = 0; j < l; j++) {
          const xo = x + (b * S + i * d + j) * C,
            po = pool + j * C;
          for (let c = 0; c < C; c++) f[oo + c] = f[oo + c]! + f[po + c]! * f[xo + c]!;
        }
      }
  }
  /** backward of poolFwd: dx += …, dpool += … */
  poolBwd(x: number, pool: number, dout: number, dx: number, dpool: number, ...g: PoolGeometry): void {
    const [B, S, Sc, l, d, C] = g;
    const f = this.f;
    for (let b = 0; b < B; b++)
      for (let i = 0; i < Sc; i++) {
        const go = dout + (b * Sc + i) * C;
        for (let j = 0; j < l; j++) {
          const ro = (b * S + i * d + j) * C,
            po = pool + j * C,
            gpo = dpool + j * C;
          for (let c = 0; c < C; c++) {
            const g = f[go + c]!;
            f[dx + ro + c] = f[dx + ro + c]! + f[po + c]! * g;
            f[gpo + c] = f[gpo + c]! + f[x + ro + c]! * g;
          }
        }
      }
  }
  /** SiLU forward over n values: sg ← σ(h), a ← h·σ(h) */
  siluFwd(h: number, a: number, sg: number, n: number): void {
    const f = this.f;
    for (let i = 0; i < n; i++) {
      const z = f[h + i]!,
        s = 1 / (1 + Math.exp(-z));
      f[sg + i] = s;
      f[a + i] = z * s;
    }
  }
  /** SiLU backward: dh ← dh·σ·(1 + h·(1 − σ)) */
  siluBwd(dh: number, h: number, sg: number, n: number): void {
    const f = this.f;
    for (let i = 0; i < n; i++) {
      const z = f[h + i]!,
        s = f[sg + i]!;
      f[dh + i] = f[dh + i]! * s * (1 + z * (1 - s));
    }
  }
  /** row-wise softmax of x[rows,n] in place times scale; f[lse + r] ← log Σ exp(x[r,:]) */
  softmaxRows(x: number, rows: number, n: number, scale: number, lse: number): void {
    const f = this.f;
    for (let r = 0; r < rows; r++) {
      const o = x + r * n;
      let mx = -Infinity;
      for (let j = 0; j < n; j++) if (f[o + j]! > mx) mx = f[o + j]!;
      let sum = 0;
      for (let j = 0; j < n; j++) {
        const e = Math.exp(f[o + j]! - mx);
        f[o + j] = e;
        sum += e;
      }
      f[lse + r] = mx + Math.log(sum);
      const sc = scale / sum;
      for (let j = 0; j < n; j++) f[o + j] = f[o + j]! * sc;
    }
  }
  /** softmax(q·Kᵀ·scale) over keys in [start,end) ranges (int pairs at i[ranges..]); P ← probs, O ← P·V */
  attnFwd(...a: [...AttnOperands, P: number, O: number]): void {
    const [q, K, ldk, V, ldv, ranges, nr, dk, dv, scale, P, O] = a;
    const f = this.f,
      iv = this.i;
    let n = 0;
    let mx = -Infinity;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r],
        e = iv[ranges + 2 * r + 1];
      for (let t = s; t < e; t++) {
        const kp = K + t * ldk;
        let acc = 0;
        for (let c = 0; c < dk; c++) acc += f[q + c] * f[kp + c];
        const sc = acc * scale;
        f[P + n] = sc;
        if (sc > mx) mx = sc;
        n++;
      }
    }
    for (let c = 0; c < dv; c++) f[O + c] = 0;
    if (n === 0) return;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.exp(f[P + i] - mx);
      f[P + i] = e;
      sum += e;
    }
    const inv = 1 / sum;
    n = 0;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r],
        e = iv[ranges + 2 * r + 1];
      for (let t = s; t < e; t++) {
        const pv = f[P + n] * inv;
        f[P + n] = pv;
        const vp = V + t * ldv;
        for (let c = 0; c < dv; c++) f[O + c] += pv * f[vp + c];
        n++;
      }
    }
  }
  /** backward of attnFwd for a branch weighted by gate gs; accumulates dq, dK, dV; returns dO·O. Consumes P (overwritten by score gradients). */
  attnBwd(
    ...a: [...AttnOperands, gs: number, P: number, O: number, dO: number, dq: number, dK: number, dV: number]
  ): number {
    const [q, K, ldk, V, ldv, ranges, nr, dk, dv, scale, gs, P, O, dO, dq, dK, dV] = a;
    const f = this.f,
      iv = this.i;
    let dgate = 0;
    for (let c = 0; c < dv; c++) dgate += f[dO + c] * f[O + c];
    const D = gs * dgate;
    let n = 0;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r],
        e = iv[ranges + 2 * r + 1];
      for (let t = s; t < e; t++) {
        const p = f[P + n];
        const ko = K + t * ldk,
          vo = V + t * ldv,
          dko = dK + t * ldk,
          dvo = dV + t * ldv;
        let dpr = 0;
        for (let c = 0; c < dv; c++) dpr += f[dO + c] * f[vo + c];
        const dp = gs * dpr;
        const pg = p * gs;
        for (let c = 0; c < dv; c++) f[dvo + c] += pg * f[dO + c];
        const ds = p * (dp - D) * scale;
        f[P + n] = ds; // P is consumed, as in the wasm kernel
        for (let c = 0; c < dk; c++) {
          f[dq + c] += ds * f[ko + c];
          f[dko + c] += ds * f[q + c];
        }
        n++;
      }
    }
    return dgate;
  }
}

/**
 * Loads kernels. 'auto' picks wasm when kernels.wasm is present and this engine runs WebAssembly
 * SIMD, else JS. 'wasm' fails with a clear error when it cannot. `f64` (JS only) makes the heap
 * Float64Array — for finite-difference gradient checks. `wasmPath` overrides where the module is
 * read from (tests of the fallback).
 */
export async function loadKernels(
  mode: 'wasm' | 'js' | 'auto' = 'auto',
  opts: { f64?: boolean; wasmPath?: string } = {},
): Promise<Kernels> {
  if (opts.f64) {
    if (mode === 'wasm') throw new Error('f64 heaps exist only for the JS kernels');
    return new JsKernels(true);
  }
  if (mode === 'js') return new JsKernels(false);
  const mod = compileWasm(opts.wasmPath);
  if (mod) {
    try {
      return wasmKernels(mod);
    } catch (e) {
      wasmError = `kernels.wasm did not instantiate (${(e as Error).message})`;
    }
  }
  if (mode === 'wasm') throw new Error(`WebAssembly kernels unavailable: ${wasmError}`);
  return new JsKernels(false);
}
