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

export interface Kernels {
  readonly kind: KernelKind;
  /** float view over the whole heap */
  f: FloatHeap;
  /** int32 view (same addresses as f for wasm; a parallel array for JS) */
  i: Int32Array;
  /** first element offset callers may use */
  readonly base: number;
  /** make the heap hold at least `elems` elements (may replace f and i) */
  ensure(elems: number): void;
  /** C[M,N] (+)= A·B with A(i,k) = f[a + i·sai + k·sak], B row-major (ldb), C row-major (ldc) */
  gemm(a: number, sai: number, sak: number, b: number, ldb: number, c: number, ldc: number, M: number, N: number, K: number, accumulate: boolean): void;
  /** dst[cols,rows] = src[rows,cols]ᵀ */
  transpose(src: number, rows: number, cols: number, dst: number): void;
  /** SiLU forward over n values: sg ← σ(h), a ← h·σ(h) */
  siluFwd(h: number, a: number, sg: number, n: number): void;
  /** SiLU backward: dh ← dh·σ·(1 + h·(1 − σ)) */
  siluBwd(dh: number, h: number, sg: number, n: number): void;
  /** row-wise softmax of x[rows,n] in place times scale; f[lse + r] ← log Σ exp(x[r,:]) */
  softmaxRows(x: number, rows: number, n: number, scale: number, lse: number): void;
  /** softmax(q·Kᵀ·scale) over keys in [start,end) ranges (int pairs at i[ranges..]); P ← probs, O ← P·V */
  attnFwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, P: number, O: number): void;
  /** backward of attnFwd for a branch weighted by gate gs; accumulates dq, dK, dV; returns dO·O */
  attnBwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, gs: number,
    P: number, O: number, dO: number, dq: number, dK: number, dV: number): number;
}

// lib "ES2023" without DOM carries no WebAssembly typings, so declare the little we use.
interface WasmMemory { readonly buffer: ArrayBuffer; grow(pages: number): number }
type WasmModule = object;
interface WasmApi {
  Module: new (bytes: Uint8Array) => WasmModule;
  Instance: new (mod: WasmModule, imports: object) => { exports: unknown };
}
const WA = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;

/** Elements reserved at the bottom of the wasm heap for the module's own static data. */
const WASM_BASE = 65536 / 4;
const PAGE_ELEMS = 65536 / 4;

interface WasmExports {
  memory: WasmMemory;
  gemm(a: number, sai: number, sak: number, b: number, ldb: number, c: number, ldc: number, M: number, N: number, K: number, acc: number): void;
  transpose(src: number, rows: number, cols: number, dst: number): void;
  silu_fwd(h: number, a: number, sg: number, n: number): void;
  silu_bwd(dh: number, h: number, sg: number, n: number): void;
  softmax_rows(x: number, rows: number, n: number, scale: number, lse: number): void;
  attn_fwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, P: number, O: number): void;
  attn_bwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, gs: number,
    P: number, O: number, dO: number, dq: number, dK: number, dV: number): number;
}

let wasmModule: WasmModule | null | undefined;
let wasmError = '';

/** Where kernels.wasm is looked for: next to this file (source tree) or next to the bundle (dist/). */
function wasmCandidates(): string[] {
  const out: string[] = [];
  try { out.push(fileURLToPath(new URL('./kernels.wasm', import.meta.url))); } catch { /* not a file URL */ }
  try { out.push(fileURLToPath(new URL('../src/trainer/reference/kernels/kernels.wasm', import.meta.url))); } catch { /* ignore */ }
  return out;
}

function compileWasm(path?: string): WasmModule | null {
  if (path !== undefined) {
    if (!WA) { wasmError = 'this JavaScript engine has no WebAssembly'; return null; }
    try { return new WA.Module(readFileSync(path)); } catch (e) { wasmError = `kernels.wasm at ${path} unusable (${(e as Error).message})`; return null; }
  }
  if (wasmModule !== undefined) return wasmModule;
  wasmModule = null;
  if (!WA) { wasmError = 'this JavaScript engine has no WebAssembly'; return null; }
  for (const p of wasmCandidates()) {
    let bytes: Buffer;
    try { bytes = readFileSync(p); } catch { continue; }
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

/** Why wasm kernels are unavailable ('' when they are). */
export function wasmUnavailableReason(): string {
  compileWasm();
  return wasmModule ? '' : wasmError;
}

class WasmKernels implements Kernels {
  readonly kind = 'wasm' as const;
  readonly base = WASM_BASE;
  f: Float32Array;
  i: Int32Array;
  private readonly x: WasmExports;
  constructor(mod: WasmModule) {
    this.x = new WA!.Instance(mod, {}).exports as unknown as WasmExports;
    this.f = new Float32Array(this.x.memory.buffer);
    this.i = new Int32Array(this.x.memory.buffer);
  }
  ensure(elems: number): void {
    const have = this.x.memory.buffer.byteLength / 4;
    if (elems > have) this.x.memory.grow(Math.ceil((elems - have) / PAGE_ELEMS));
    if (this.f.buffer !== this.x.memory.buffer || this.f.length === 0) {
      this.f = new Float32Array(this.x.memory.buffer);
      this.i = new Int32Array(this.x.memory.buffer);
    }
  }
  gemm(a: number, sai: number, sak: number, b: number, ldb: number, c: number, ldc: number, M: number, N: number, K: number, accumulate: boolean): void {
    this.x.gemm(a * 4, sai, sak, b * 4, ldb, c * 4, ldc, M, N, K, accumulate ? 1 : 0);
  }
  transpose(src: number, rows: number, cols: number, dst: number): void {
    this.x.transpose(src * 4, rows, cols, dst * 4);
  }
  siluFwd(h: number, a: number, sg: number, n: number): void { this.x.silu_fwd(h * 4, a * 4, sg * 4, n); }
  siluBwd(dh: number, h: number, sg: number, n: number): void { this.x.silu_bwd(dh * 4, h * 4, sg * 4, n); }
  softmaxRows(x: number, rows: number, n: number, scale: number, lse: number): void { this.x.softmax_rows(x * 4, rows, n, scale, lse * 4); }
  attnFwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, P: number, O: number): void {
    this.x.attn_fwd(q * 4, K * 4, ldk, V * 4, ldv, ranges * 4, nr, dk, dv, scale, P * 4, O * 4);
  }
  attnBwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, gs: number,
    P: number, O: number, dO: number, dq: number, dK: number, dV: number): number {
    return this.x.attn_bwd(q * 4, K * 4, ldk, V * 4, ldv, ranges * 4, nr, dk, dv, scale, gs, P * 4, O * 4, dO * 4, dq * 4, dK * 4, dV * 4);
  }
}

/** Plain-JS twin of the wasm kernels (same loop order; arithmetic in double, stored to the heap type). */
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
  gemm(a: number, sai: number, sak: number, b: number, ldb: number, c: number, ldc: number, M: number, N: number, K: number, accumulate: boolean): void {
    const f = this.f;
    // pack A row-major and B transposed so every inner loop is a contiguous dot product
    if (this.ap.length < M * K) this.ap = new Float64Array(M * K);
    if (this.bt.length < N * K) this.bt = new Float64Array(N * K);
    const ap = this.ap, bt = this.bt;
    for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) ap[i * K + k] = f[a + i * sai + k * sak]!;
    for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) bt[j * K + k] = f[b + k * ldb + j]!;
    let i = 0;
    for (; i + 2 <= M; i += 2) {
      const a0 = i * K, a1 = a0 + K, c0 = c + i * ldc, c1 = c0 + ldc;
      let j = 0;
      for (; j + 2 <= N; j += 2) {
        const b0 = j * K, b1 = b0 + K;
        let s00 = 0, s01 = 0, s10 = 0, s11 = 0;
        for (let k = 0; k < K; k++) {
          const x0 = ap[a0 + k]!, x1 = ap[a1 + k]!, y0 = bt[b0 + k]!, y1 = bt[b1 + k]!;
          s00 += x0 * y0; s01 += x0 * y1; s10 += x1 * y0; s11 += x1 * y1;
        }
        if (accumulate) { s00 += f[c0 + j]!; s01 += f[c0 + j + 1]!; s10 += f[c1 + j]!; s11 += f[c1 + j + 1]!; }
        f[c0 + j] = s00; f[c0 + j + 1] = s01; f[c1 + j] = s10; f[c1 + j + 1] = s11;
      }
      for (; j < N; j++) {
        const b0 = j * K;
        let s0 = 0, s1 = 0;
        for (let k = 0; k < K; k++) { const y = bt[b0 + k]!; s0 += ap[a0 + k]! * y; s1 += ap[a1 + k]! * y; }
        if (accumulate) { s0 += f[c0 + j]!; s1 += f[c1 + j]!; }
        f[c0 + j] = s0; f[c1 + j] = s1;
      }
    }
    for (; i < M; i++) {
      const a0 = i * K, c0 = c + i * ldc;
      for (let j = 0; j < N; j++) {
        const b0 = j * K;
        let s0 = 0;
        for (let k = 0; k < K; k++) s0 += ap[a0 + k]! * bt[b0 + k]!;
        f[c0 + j] = accumulate ? s0 + f[c0 + j]! : s0;
      }
    }
  }
  transpose(src: number, rows: number, cols: number, dst: number): void {
    const f = this.f;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) f[dst + c * rows + r] = f[src + r * cols + c];
  }
  siluFwd(h: number, a: number, sg: number, n: number): void {
    const f = this.f;
    for (let i = 0; i < n; i++) { const z = f[h + i]!, s = 1 / (1 + Math.exp(-z)); f[sg + i] = s; f[a + i] = z * s; }
  }
  siluBwd(dh: number, h: number, sg: number, n: number): void {
    const f = this.f;
    for (let i = 0; i < n; i++) { const z = f[h + i]!, s = f[sg + i]!; f[dh + i] = f[dh + i]! * s * (1 + z * (1 - s)); }
  }
  softmaxRows(x: number, rows: number, n: number, scale: number, lse: number): void {
    const f = this.f;
    for (let r = 0; r < rows; r++) {
      const o = x + r * n;
      let mx = -Infinity;
      for (let j = 0; j < n; j++) if (f[o + j]! > mx) mx = f[o + j]!;
      let sum = 0;
      for (let j = 0; j < n; j++) { const e = Math.exp(f[o + j]! - mx); f[o + j] = e; sum += e; }
      f[lse + r] = mx + Math.log(sum);
      const sc = scale / sum;
      for (let j = 0; j < n; j++) f[o + j] = f[o + j]! * sc;
    }
  }
  attnFwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, P: number, O: number): void {
    const f = this.f, iv = this.i;
    let n = 0;
    let mx = -Infinity;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r], e = iv[ranges + 2 * r + 1];
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
    for (let i = 0; i < n; i++) { const e = Math.exp(f[P + i] - mx); f[P + i] = e; sum += e; }
    const inv = 1 / sum;
    n = 0;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r], e = iv[ranges + 2 * r + 1];
      for (let t = s; t < e; t++) {
        const pv = f[P + n] * inv;
        f[P + n] = pv;
        const vp = V + t * ldv;
        for (let c = 0; c < dv; c++) f[O + c] += pv * f[vp + c];
        n++;
      }
    }
  }
  attnBwd(q: number, K: number, ldk: number, V: number, ldv: number, ranges: number, nr: number, dk: number, dv: number, scale: number, gs: number,
    P: number, O: number, dO: number, dq: number, dK: number, dV: number): number {
    const f = this.f, iv = this.i;
    let dgate = 0;
    for (let c = 0; c < dv; c++) dgate += f[dO + c] * f[O + c];
    const D = gs * dgate;
    let n = 0;
    for (let r = 0; r < nr; r++) {
      const s = iv[ranges + 2 * r], e = iv[ranges + 2 * r + 1];
      for (let t = s; t < e; t++) {
        const p = f[P + n];
        const ko = K + t * ldk, vo = V + t * ldv, dko = dK + t * ldk, dvo = dV + t * ldv;
        let dpr = 0;
        for (let c = 0; c < dv; c++) dpr += f[dO + c] * f[vo + c];
        const dp = gs * dpr;
        const pg = p * gs;
        for (let c = 0; c < dv; c++) f[dvo + c] += pg * f[dO + c];
        const ds = p * (dp - D) * scale;
        for (let c = 0; c < dk; c++) { f[dq + c] += ds * f[ko + c]; f[dko + c] += ds * f[q + c]; }
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
export async function loadKernels(mode: 'wasm' | 'js' | 'auto' = 'auto', opts: { f64?: boolean; wasmPath?: string } = {}): Promise<Kernels> {
  if (opts.f64) {
    if (mode === 'wasm') throw new Error('f64 heaps exist only for the JS kernels');
    return new JsKernels(true);
  }
  if (mode === 'js') return new JsKernels(false);
  const mod = compileWasm(opts.wasmPath);
  if (mod) {
    try {
      return new WasmKernels(mod);
    } catch (e) {
      wasmError = `kernels.wasm did not instantiate (${(e as Error).message})`;
    }
  }
  if (mode === 'wasm') throw new Error(`WebAssembly kernels unavailable: ${wasmError}`);
  return new JsKernels(false);
}
