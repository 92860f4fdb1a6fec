// Hot kernels of the reference NSA trainer, compiled by scripts/build-wasm.mjs with
// `asc --enable simd -O3`. Every pointer is a byte offset into this module's exported memory;
// every stride/size is in f32 elements. The JS side (../index.ts) lays out all buffers and owns the
// memory; these functions never allocate. ../index.ts holds a plain-JS twin of each function with
// the same arithmetic order, used when WebAssembly SIMD is unavailable.

// C[M,N] (+)= A[M,K] · B[K,N], where A(i,k) is at a + 4·(i·sai + k·sak) (so A may be read
// transposed) and B is row-major with leading dimension ldb. Register-blocked 4 rows × 8 columns.
export function gemm(a: usize, sai: i32, sak: i32, b: usize, ldb: i32, c: usize, ldc: i32, M: i32, N: i32, K: i32, accumulate: i32): void {
  const sai4 = (<usize>sai) << 2, sak4 = (<usize>sak) << 2, ldb4 = (<usize>ldb) << 2, ldc4 = (<usize>ldc) << 2;
  let i = 0;
  for (; i + 4 <= M; i += 4) {
    const a0 = a + <usize>i * sai4, a1 = a0 + sai4, a2 = a1 + sai4, a3 = a2 + sai4;
    const c0 = c + <usize>i * ldc4, c1 = c0 + ldc4, c2 = c1 + ldc4, c3 = c2 + ldc4;
    let j = 0;
    for (; j + 8 <= N; j += 8) {
      let x00 = f32x4.splat(0), x01 = f32x4.splat(0), x10 = f32x4.splat(0), x11 = f32x4.splat(0);
      let x20 = f32x4.splat(0), x21 = f32x4.splat(0), x30 = f32x4.splat(0), x31 = f32x4.splat(0);
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) {
        const b0 = v128.load(pb), b1 = v128.load(pb, 16);
        let s = f32x4.splat(load<f32>(a0 + off));
        x00 = f32x4.add(x00, f32x4.mul(s, b0)); x01 = f32x4.add(x01, f32x4.mul(s, b1));
        s = f32x4.splat(load<f32>(a1 + off));
        x10 = f32x4.add(x10, f32x4.mul(s, b0)); x11 = f32x4.add(x11, f32x4.mul(s, b1));
        s = f32x4.splat(load<f32>(a2 + off));
        x20 = f32x4.add(x20, f32x4.mul(s, b0)); x21 = f32x4.add(x21, f32x4.mul(s, b1));
        s = f32x4.splat(load<f32>(a3 + off));
        x30 = f32x4.add(x30, f32x4.mul(s, b0)); x31 = f32x4.add(x31, f32x4.mul(s, b1));
        off += sak4; pb += ldb4;
      }
      const jo = (<usize>j) << 2;
      if (accumulate) {
        x00 = f32x4.add(x00, v128.load(c0 + jo)); x01 = f32x4.add(x01, v128.load(c0 + jo, 16));
        x10 = f32x4.add(x10, v128.load(c1 + jo)); x11 = f32x4.add(x11, v128.load(c1 + jo, 16));
        x20 = f32x4.add(x20, v128.load(c2 + jo)); x21 = f32x4.add(x21, v128.load(c2 + jo, 16));
        x30 = f32x4.add(x30, v128.load(c3 + jo)); x31 = f32x4.add(x31, v128.load(c3 + jo, 16));
      }
      v128.store(c0 + jo, x00); v128.store(c0 + jo, x01, 16);
      v128.store(c1 + jo, x10); v128.store(c1 + jo, x11, 16);
      v128.store(c2 + jo, x20); v128.store(c2 + jo, x21, 16);
      v128.store(c3 + jo, x30); v128.store(c3 + jo, x31, 16);
    }
    for (; j + 4 <= N; j += 4) {
      let x0 = f32x4.splat(0), x1 = f32x4.splat(0), x2 = f32x4.splat(0), x3 = f32x4.splat(0);
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) {
        const b0 = v128.load(pb);
        x0 = f32x4.add(x0, f32x4.mul(f32x4.splat(load<f32>(a0 + off)), b0));
        x1 = f32x4.add(x1, f32x4.mul(f32x4.splat(load<f32>(a1 + off)), b0));
        x2 = f32x4.add(x2, f32x4.mul(f32x4.splat(load<f32>(a2 + off)), b0));
        x3 = f32x4.add(x3, f32x4.mul(f32x4.splat(load<f32>(a3 + off)), b0));
        off += sak4; pb += ldb4;
      }
      const jo = (<usize>j) << 2;
      if (accumulate) {
        x0 = f32x4.add(x0, v128.load(c0 + jo)); x1 = f32x4.add(x1, v128.load(c1 + jo));
        x2 = f32x4.add(x2, v128.load(c2 + jo)); x3 = f32x4.add(x3, v128.load(c3 + jo));
      }
      v128.store(c0 + jo, x0); v128.store(c1 + jo, x1); v128.store(c2 + jo, x2); v128.store(c3 + jo, x3);
    }
    for (; j < N; j++) {
      let s0: f32 = 0, s1: f32 = 0, s2: f32 = 0, s3: f32 = 0;
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) {
        const bv = load<f32>(pb);
        s0 += load<f32>(a0 + off) * bv; s1 += load<f32>(a1 + off) * bv;
        s2 += load<f32>(a2 + off) * bv; s3 += load<f32>(a3 + off) * bv;
        off += sak4; pb += ldb4;
      }
      const jo = (<usize>j) << 2;
      if (accumulate) { s0 += load<f32>(c0 + jo); s1 += load<f32>(c1 + jo); s2 += load<f32>(c2 + jo); s3 += load<f32>(c3 + jo); }
      store<f32>(c0 + jo, s0); store<f32>(c1 + jo, s1); store<f32>(c2 + jo, s2); store<f32>(c3 + jo, s3);
    }
  }
  for (; i < M; i++) {
    const a0 = a + <usize>i * sai4;
    const c0 = c + <usize>i * ldc4;
    let j = 0;
    for (; j + 8 <= N; j += 8) {
      let x00 = f32x4.splat(0), x01 = f32x4.splat(0);
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) {
        const s = f32x4.splat(load<f32>(a0 + off));
        x00 = f32x4.add(x00, f32x4.mul(s, v128.load(pb))); x01 = f32x4.add(x01, f32x4.mul(s, v128.load(pb, 16)));
        off += sak4; pb += ldb4;
      }
      const jo = (<usize>j) << 2;
      if (accumulate) { x00 = f32x4.add(x00, v128.load(c0 + jo)); x01 = f32x4.add(x01, v128.load(c0 + jo, 16)); }
      v128.store(c0 + jo, x00); v128.store(c0 + jo, x01, 16);
    }
    for (; j + 4 <= N; j += 4) {
      let x0 = f32x4.splat(0);
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) {
        x0 = f32x4.add(x0, f32x4.mul(f32x4.splat(load<f32>(a0 + off)), v128.load(pb)));
        off += sak4; pb += ldb4;
      }
      const jo = (<usize>j) << 2;
      if (accumulate) x0 = f32x4.add(x0, v128.load(c0 + jo));
      v128.store(c0 + jo, x0);
    }
    for (; j < N; j++) {
      let s0: f32 = 0;
      let pb = b + ((<usize>j) << 2);
      let off: usize = 0;
      for (let k = 0; k < K; k++) { s0 += load<f32>(a0 + off) * load<f32>(pb); off += sak4; pb += ldb4; }
      const jo = (<usize>j) << 2;
      if (accumulate) s0 += load<f32>(c0 + jo);
      store<f32>(c0 + jo, s0);
    }
  }
}

// dst[cols,rows] = src[rows,cols]ᵀ
export function transpose(src: usize, rows: i32, cols: i32, dst: usize): void {
  for (let r = 0; r < rows; r++) {
    const sr = src + ((<usize>(r * cols)) << 2);
    for (let c = 0; c < cols; c++) store<f32>(dst + ((<usize>(c * rows + r)) << 2), load<f32>(sr + ((<usize>c) << 2)));
  }
}

@inline function dot(x: usize, y: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) { const o = (<usize>i) << 2; acc = f32x4.add(acc, f32x4.mul(v128.load(x + o), v128.load(y + o))); }
  let s: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) { const o = (<usize>i) << 2; s += load<f32>(x + o) * load<f32>(y + o); }
  return s;
}

// y[0..n) += alpha·x[0..n)
@inline function axpy(alpha: f32, x: usize, y: usize, n: i32): void {
  const av = f32x4.splat(alpha);
  let i = 0;
  for (; i + 4 <= n; i += 4) { const o = (<usize>i) << 2; v128.store(y + o, f32x4.add(v128.load(y + o), f32x4.mul(av, v128.load(x + o)))); }
  for (; i < n; i++) { const o = (<usize>i) << 2; store<f32>(y + o, load<f32>(y + o) + alpha * load<f32>(x + o)); }
}

// e^x for four lanes: x = k·ln2 + r with |r| ≤ ln2/2, e^r by a degree-6 polynomial (relative error
// ≈2e-7), 2^k by building the exponent bits. Inputs are clamped to [-87.3, 88.0] (no inf/denormals).
@inline function exp4(x: v128): v128 {
  x = f32x4.min(f32x4.max(x, f32x4.splat(-87.3)), f32x4.splat(88.0));
  const kf = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.4426950408889634)));
  let r = f32x4.sub(x, f32x4.mul(kf, f32x4.splat(0.693145751953125)));
  r = f32x4.sub(r, f32x4.mul(kf, f32x4.splat(1.428606765330187e-6)));
  let p = f32x4.splat(1.0 / 720.0);
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.0 / 120.0));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.0 / 24.0));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.0 / 6.0));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(0.5));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.0));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(1.0));
  const ki = i32x4.trunc_sat_f32x4_s(kf);
  const scale = i32x4.shl(i32x4.add(ki, i32x4.splat(127)), 23);
  return f32x4.mul(p, scale);
}

@inline function exp1(x: f32): f32 {
  return f32x4.extract_lane(exp4(f32x4.splat(x)), 0);
}

// a = z·σ(z), sg = σ(z) for n values of h (SiLU forward, keeping σ for the backward)
export function silu_fwd(h: usize, a: usize, sg: usize, n: i32): void {
  const one = f32x4.splat(1);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = (<usize>i) << 2;
    const z = v128.load(h + o);
    const s = f32x4.div(one, f32x4.add(one, exp4(f32x4.neg(z))));
    v128.store(sg + o, s);
    v128.store(a + o, f32x4.mul(z, s));
  }
  for (; i < n; i++) {
    const o = (<usize>i) << 2;
    const z = load<f32>(h + o);
    const s: f32 = 1 / (1 + exp1(-z));
    store<f32>(sg + o, s);
    store<f32>(a + o, z * s);
  }
}

// dh ← dh · σ(z)·(1 + z·(1 − σ(z)))
export function silu_bwd(dh: usize, h: usize, sg: usize, n: i32): void {
  const one = f32x4.splat(1);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = (<usize>i) << 2;
    const z = v128.load(h + o), s = v128.load(sg + o);
    v128.store(dh + o, f32x4.mul(v128.load(dh + o), f32x4.mul(s, f32x4.add(one, f32x4.mul(z, f32x4.sub(one, s))))));
  }
  for (; i < n; i++) {
    const o = (<usize>i) << 2;
    const z = load<f32>(h + o), s = load<f32>(sg + o);
    store<f32>(dh + o, load<f32>(dh + o) * s * (1 + z * (1 - s)));
  }
}

// Row-wise softmax of x[rows, n] in place, multiplied by `scale`; lse[r] = log Σ exp(x[r,:]).
export function softmax_rows(x: usize, rows: i32, n: i32, scale: f32, lse: usize): void {
  for (let r = 0; r < rows; r++) {
    const row = x + ((<usize>(r * n)) << 2);
    let mx: f32 = -Infinity;
    for (let j = 0; j < n; j++) { const v = load<f32>(row + ((<usize>j) << 2)); if (v > mx) mx = v; }
    const mv = f32x4.splat(mx);
    let acc = f32x4.splat(0);
    let j = 0;
    for (; j + 4 <= n; j += 4) {
      const o = (<usize>j) << 2;
      const e = exp4(f32x4.sub(v128.load(row + o), mv));
      v128.store(row + o, e);
      acc = f32x4.add(acc, e);
    }
    let sum: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
    for (; j < n; j++) { const o = (<usize>j) << 2; const e = exp1(load<f32>(row + o) - mx); store<f32>(row + o, e); sum += e; }
    store<f32>(lse + ((<usize>r) << 2), mx + Mathf.log(sum));
    const sv = f32x4.splat(scale / sum);
    j = 0;
    for (; j + 4 <= n; j += 4) { const o = (<usize>j) << 2; v128.store(row + o, f32x4.mul(v128.load(row + o), sv)); }
    const ss: f32 = scale / sum;
    for (; j < n; j++) { const o = (<usize>j) << 2; store<f32>(row + o, load<f32>(row + o) * ss); }
  }
}

// Four dot products x·y0 … x·y3 over n floats, returned as the lanes of one vector.
@inline function dot4(x: usize, y0: usize, y1: usize, y2: usize, y3: usize, n: i32): v128 {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = (<usize>i) << 2;
    const xv = v128.load(x + o);
    a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(y0 + o)));
    a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(y1 + o)));
    a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(y2 + o)));
    a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(y3 + o)));
  }
  const u = f32x4.add(f32x4.shuffle(a0, a1, 0, 4, 1, 5), f32x4.shuffle(a0, a1, 2, 6, 3, 7));
  const w = f32x4.add(f32x4.shuffle(a2, a3, 0, 4, 1, 5), f32x4.shuffle(a2, a3, 2, 6, 3, 7));
  let r = f32x4.add(f32x4.shuffle(u, w, 0, 1, 4, 5), f32x4.shuffle(u, w, 2, 3, 6, 7));
  if (i < n) {
    let s0: f32 = 0, s1: f32 = 0, s2: f32 = 0, s3: f32 = 0;
    for (; i < n; i++) {
      const o = (<usize>i) << 2;
      const xs = load<f32>(x + o);
      s0 += xs * load<f32>(y0 + o); s1 += xs * load<f32>(y1 + o); s2 += xs * load<f32>(y2 + o); s3 += xs * load<f32>(y3 + o);
    }
    let t = f32x4.splat(s0);
    t = f32x4.replace_lane(t, 1, s1); t = f32x4.replace_lane(t, 2, s2); t = f32x4.replace_lane(t, 3, s3);
    r = f32x4.add(r, t);
  }
  return r;
}

// One query row against the keys listed as [start,end) token ranges (i32 pairs at `ranges`).
// Key token t lives at K + 4·t·ldk (V likewise). Writes the softmax probabilities to P (one per
// key, in range order) and O[0..dv) = Σ P·V. With no keys, O = 0.
export function attn_fwd(q: usize, K: usize, ldk: i32, V: usize, ldv: i32, ranges: usize, nr: i32, dk: i32, dv: i32, scale: f32, P: usize, O: usize): void {
  let n = 0;
  let mx: f32 = -Infinity;
  let mxv = f32x4.splat(-Infinity);
  const sv = f32x4.splat(scale);
  const ldk4 = (<usize>ldk) << 2, ldv4 = (<usize>ldv) << 2;
  for (let r = 0; r < nr; r++) {
    const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
    let kp = K + <usize>s * ldk4;
    let t = s;
    for (; t + 4 <= e; t += 4) {
      const sc = f32x4.mul(dot4(q, kp, kp + ldk4, kp + 2 * ldk4, kp + 3 * ldk4, dk), sv);
      v128.store(P + ((<usize>n) << 2), sc);
      mxv = f32x4.max(mxv, sc);
      n += 4; kp += 4 * ldk4;
    }
    for (; t < e; t++) {
      const sc = dot(q, kp, dk) * scale;
      store<f32>(P + ((<usize>n) << 2), sc);
      if (sc > mx) mx = sc;
      n++; kp += ldk4;
    }
  }
  mx = max(max(mx, max(f32x4.extract_lane(mxv, 0), f32x4.extract_lane(mxv, 1))), max(f32x4.extract_lane(mxv, 2), f32x4.extract_lane(mxv, 3)));
  for (let i = 0; i < dv; i++) store<f32>(O + ((<usize>i) << 2), 0);
  if (n == 0) return;
  const mv = f32x4.splat(mx);
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const p = P + ((<usize>i) << 2);
    const e = exp4(f32x4.sub(v128.load(p), mv));
    v128.store(p, e);
    acc = f32x4.add(acc, e);
  }
  let sum: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
  for (; i < n; i++) { const p = P + ((<usize>i) << 2); const e = exp1(load<f32>(p) - mx); store<f32>(p, e); sum += e; }
  const inv: f32 = 1 / sum;
  const iv = f32x4.splat(inv);
  i = 0;
  for (; i + 4 <= n; i += 4) { const p = P + ((<usize>i) << 2); v128.store(p, f32x4.mul(v128.load(p), iv)); }
  for (; i < n; i++) { const p = P + ((<usize>i) << 2); store<f32>(p, load<f32>(p) * inv); }
  // O = Σ p·V, a column chunk at a time with the chunk held in registers
  let c = 0;
  for (; c + 16 <= dv; c += 16) {
    let o0 = f32x4.splat(0), o1 = f32x4.splat(0), o2 = f32x4.splat(0), o3 = f32x4.splat(0);
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let vp = V + <usize>s * ldv4 + ((<usize>c) << 2);
      for (let t = s; t < e; t++) {
        const pv = f32x4.splat(load<f32>(pn));
        o0 = f32x4.add(o0, f32x4.mul(pv, v128.load(vp)));
        o1 = f32x4.add(o1, f32x4.mul(pv, v128.load(vp, 16)));
        o2 = f32x4.add(o2, f32x4.mul(pv, v128.load(vp, 32)));
        o3 = f32x4.add(o3, f32x4.mul(pv, v128.load(vp, 48)));
        pn += 4; vp += ldv4;
      }
    }
    const op = O + ((<usize>c) << 2);
    v128.store(op, o0); v128.store(op, o1, 16); v128.store(op, o2, 32); v128.store(op, o3, 48);
  }
  for (; c + 4 <= dv; c += 4) {
    let o0 = f32x4.splat(0);
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let vp = V + <usize>s * ldv4 + ((<usize>c) << 2);
      for (let t = s; t < e; t++) { o0 = f32x4.add(o0, f32x4.mul(f32x4.splat(load<f32>(pn)), v128.load(vp))); pn += 4; vp += ldv4; }
    }
    v128.store(O + ((<usize>c) << 2), o0);
  }
  for (; c < dv; c++) {
    let o: f32 = 0;
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let vp = V + <usize>s * ldv4 + ((<usize>c) << 2);
      for (let t = s; t < e; t++) { o += load<f32>(pn) * load<f32>(vp); pn += 4; vp += ldv4; }
    }
    store<f32>(O + ((<usize>c) << 2), o);
  }
}

// Backward of attn_fwd for a branch output scaled by gate value gs (the branch contributes
// gs·O to the combined output, dO is the gradient of the combined output). Accumulates into dq,
// dK, dV (same strides as K, V). Returns dO·O, the gradient of the gate value gs.
// P is consumed: it holds the score gradients afterwards.
export function attn_bwd(q: usize, K: usize, ldk: i32, V: usize, ldv: i32, ranges: usize, nr: i32, dk: i32, dv: i32, scale: f32, gs: f32,
                         P: usize, O: usize, dO: usize, dq: usize, dK: usize, dV: usize): f32 {
  const dgate = dot(dO, O, dv);
  const D = gs * dgate;
  const ldk4 = (<usize>ldk) << 2, ldv4 = (<usize>ldv) << 2;
  const gsv = f32x4.splat(gs), Dv = f32x4.splat(D), scv = f32x4.splat(scale);
  // pass 1: dV_t += p·gs·dO and ds = p·(gs·dO·V_t − D)·scale, stored over P
  let n = 0;
  for (let r = 0; r < nr; r++) {
    const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
    let vo = <usize>s * ldv4;
    let t = s;
    for (; t + 4 <= e; t += 4) {
      const pp = P + ((<usize>n) << 2);
      const pv = v128.load(pp);
      const dp = f32x4.mul(gsv, dot4(dO, V + vo, V + vo + ldv4, V + vo + 2 * ldv4, V + vo + 3 * ldv4, dv));
      axpy(f32x4.extract_lane(pv, 0) * gs, dO, dV + vo, dv);
      axpy(f32x4.extract_lane(pv, 1) * gs, dO, dV + vo + ldv4, dv);
      axpy(f32x4.extract_lane(pv, 2) * gs, dO, dV + vo + 2 * ldv4, dv);
      axpy(f32x4.extract_lane(pv, 3) * gs, dO, dV + vo + 3 * ldv4, dv);
      v128.store(pp, f32x4.mul(f32x4.mul(pv, f32x4.sub(dp, Dv)), scv));
      n += 4; vo += 4 * ldv4;
    }
    for (; t < e; t++) {
      const pp = P + ((<usize>n) << 2);
      const p = load<f32>(pp);
      const dp = gs * dot(dO, V + vo, dv);
      axpy(p * gs, dO, dV + vo, dv);
      store<f32>(pp, p * (dp - D) * scale);
      n++; vo += ldv4;
    }
  }
  // pass 2: dq += Σ ds·K_t (chunk of dq in registers), dK_t += ds·q
  let c = 0;
  for (; c + 16 <= dk; c += 16) {
    const co = (<usize>c) << 2;
    const q0 = v128.load(q + co), q1 = v128.load(q + co, 16), q2 = v128.load(q + co, 32), q3 = v128.load(q + co, 48);
    let a0 = v128.load(dq + co), a1 = v128.load(dq + co, 16), a2 = v128.load(dq + co, 32), a3 = v128.load(dq + co, 48);
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let ko = <usize>s * ldk4 + co;
      for (let t = s; t < e; t++) {
        const ds = f32x4.splat(load<f32>(pn));
        const kp = K + ko, dkp = dK + ko;
        a0 = f32x4.add(a0, f32x4.mul(ds, v128.load(kp)));
        a1 = f32x4.add(a1, f32x4.mul(ds, v128.load(kp, 16)));
        a2 = f32x4.add(a2, f32x4.mul(ds, v128.load(kp, 32)));
        a3 = f32x4.add(a3, f32x4.mul(ds, v128.load(kp, 48)));
        v128.store(dkp, f32x4.add(v128.load(dkp), f32x4.mul(ds, q0)));
        v128.store(dkp, f32x4.add(v128.load(dkp, 16), f32x4.mul(ds, q1)), 16);
        v128.store(dkp, f32x4.add(v128.load(dkp, 32), f32x4.mul(ds, q2)), 32);
        v128.store(dkp, f32x4.add(v128.load(dkp, 48), f32x4.mul(ds, q3)), 48);
        pn += 4; ko += ldk4;
      }
    }
    v128.store(dq + co, a0); v128.store(dq + co, a1, 16); v128.store(dq + co, a2, 32); v128.store(dq + co, a3, 48);
  }
  for (; c + 4 <= dk; c += 4) {
    const co = (<usize>c) << 2;
    const q0 = v128.load(q + co);
    let a0 = v128.load(dq + co);
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let ko = <usize>s * ldk4 + co;
      for (let t = s; t < e; t++) {
        const ds = f32x4.splat(load<f32>(pn));
        a0 = f32x4.add(a0, f32x4.mul(ds, v128.load(K + ko)));
        v128.store(dK + ko, f32x4.add(v128.load(dK + ko), f32x4.mul(ds, q0)));
        pn += 4; ko += ldk4;
      }
    }
    v128.store(dq + co, a0);
  }
  for (; c < dk; c++) {
    const co = (<usize>c) << 2;
    const qs = load<f32>(q + co);
    let a: f32 = load<f32>(dq + co);
    let pn = P;
    for (let r = 0; r < nr; r++) {
      const s = load<i32>(ranges + ((<usize>r) << 3)), e = load<i32>(ranges + ((<usize>r) << 3), 4);
      let ko = <usize>s * ldk4 + co;
      for (let t = s; t < e; t++) {
        const ds = load<f32>(pn);
        a += ds * load<f32>(K + ko);
        store<f32>(dK + ko, load<f32>(dK + ko) + ds * qs);
        pn += 4; ko += ldk4;
      }
    }
    store<f32>(dq + co, a);
  }
  return dgate;
}

// ---- elementwise / per-row helpers (keep the model's JS loops out of the hot path) ----------

// y[r,:] = x[r,:]·rinv[r]·w, rinv[r] = 1/√(mean(x[r,:]²) + eps)
export function rms_fwd(x: usize, w: usize, y: usize, rinv: usize, M: i32, D: i32, eps: f32): void {
  for (let r = 0; r < M; r++) {
    const xo = x + ((<usize>(r * D)) << 2), yo = y + ((<usize>(r * D)) << 2);
    const s: f32 = 1 / Mathf.sqrt(dot(xo, xo, D) / <f32>D + eps);
    store<f32>(rinv + ((<usize>r) << 2), s);
    const sv = f32x4.splat(s);
    let j = 0;
    for (; j + 4 <= D; j += 4) { const o = (<usize>j) << 2; v128.store(yo + o, f32x4.mul(f32x4.mul(v128.load(xo + o), sv), v128.load(w + o))); }
    for (; j < D; j++) { const o = (<usize>j) << 2; store<f32>(yo + o, load<f32>(xo + o) * s * load<f32>(w + o)); }
  }
}

// dx += s·w⊙dy − s³·x·(Σ w⊙dy⊙x)/D;  dw += dy⊙x·s   (per row r, s = rinv[r])
export function rms_bwd(x: usize, rinv: usize, w: usize, dw: usize, dy: usize, dx: usize, M: i32, D: i32): void {
  for (let r = 0; r < M; r++) {
    const ro = (<usize>(r * D)) << 2;
    const xo = x + ro, dyo = dy + ro, dxo = dx + ro;
    const s = load<f32>(rinv + ((<usize>r) << 2));
    let acc = f32x4.splat(0);
    let j = 0;
    for (; j + 4 <= D; j += 4) { const o = (<usize>j) << 2; acc = f32x4.add(acc, f32x4.mul(f32x4.mul(v128.load(w + o), v128.load(dyo + o)), v128.load(xo + o))); }
    let dt: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3);
    for (; j < D; j++) { const o = (<usize>j) << 2; dt += load<f32>(w + o) * load<f32>(dyo + o) * load<f32>(xo + o); }
    const c3: f32 = (s * s * s * dt) / <f32>D;
    const sv = f32x4.splat(s), cv = f32x4.splat(c3);
    j = 0;
    for (; j + 4 <= D; j += 4) {
      const o = (<usize>j) << 2;
      const xv = v128.load(xo + o), dv = v128.load(dyo + o);
      v128.store(dxo + o, f32x4.add(v128.load(dxo + o), f32x4.sub(f32x4.mul(sv, f32x4.mul(v128.load(w + o), dv)), f32x4.mul(cv, xv))));
      v128.store(dw + o, f32x4.add(v128.load(dw + o), f32x4.mul(f32x4.mul(dv, xv), sv)));
    }
    for (; j < D; j++) {
      const o = (<usize>j) << 2;
      const xv = load<f32>(xo + o), dv = load<f32>(dyo + o);
      store<f32>(dxo + o, load<f32>(dxo + o) + s * load<f32>(w + o) * dv - c3 * xv);
      store<f32>(dw + o, load<f32>(dw + o) + dv * xv * s);
    }
  }
}

// RoPE over interleaved pairs of rows [M, heads·dk]; row r is position r % S; tables cs/sn [S, dk/2].
// inverse rotates by −angle (the gradient of the forward rotation).
export function rope(buf: usize, M: i32, heads: i32, dk: i32, S: i32, cs: usize, sn: usize, inverse: i32): void {
  const half = dk >> 1;
  const width = heads * dk;
  for (let r = 0; r < M; r++) {
    const t = r % S;
    const co = cs + ((<usize>(t * half)) << 2), so = sn + ((<usize>(t * half)) << 2);
    for (let h = 0; h < heads; h++) {
      const o = buf + ((<usize>(r * width + h * dk)) << 2);
      for (let i = 0; i < half; i++) {
        const p = o + ((<usize>i) << 3);
        const x0 = load<f32>(p), x1 = load<f32>(p, 4);
        const c = load<f32>(co + ((<usize>i) << 2));
        let s = load<f32>(so + ((<usize>i) << 2));
        if (inverse) s = -s;
        store<f32>(p, x0 * c - x1 * s);
        store<f32>(p, x0 * s + x1 * c, 4);
      }
    }
  }
}

// dst[0..n) += src[0..n)
export function add_to(dst: usize, src: usize, n: i32): void {
  axpy(1, src, dst, n);
}

// o[r,head,:] = Σ_b gates[r,g(head),b]·O_b[r,head,:] for the three branches
export function combine3(o: usize, oc: usize, os: usize, ow: usize, gates: usize, M: i32, H: i32, hpg: i32, G: i32, dv: i32): void {
  for (let r = 0; r < M; r++) {
    for (let head = 0; head < H; head++) {
      const gp = gates + ((<usize>((r * G + head / hpg) * 3)) << 2);
      const g0 = f32x4.splat(load<f32>(gp)), g1 = f32x4.splat(load<f32>(gp, 4)), g2 = f32x4.splat(load<f32>(gp, 8));
      const base = (<usize>((r * H + head) * dv)) << 2;
      let j = 0;
      for (; j + 4 <= dv; j += 4) {
        const q = base + ((<usize>j) << 2);
        v128.store(o + q, f32x4.add(f32x4.add(f32x4.mul(g0, v128.load(oc + q)), f32x4.mul(g1, v128.load(os + q))), f32x4.mul(g2, v128.load(ow + q))));
      }
      for (; j < dv; j++) {
        const q = base + ((<usize>j) << 2);
        store<f32>(o + q, f32x4.extract_lane(g0, 0) * load<f32>(oc + q) + f32x4.extract_lane(g1, 0) * load<f32>(os + q) + f32x4.extract_lane(g2, 0) * load<f32>(ow + q));
      }
    }
  }
}

// Compressed tokens: out[b,i,:] = Σ_{j<l} pool[j,:] ⊙ x[b, i·d + j, :]   (rows of width C)
export function pool_fwd(x: usize, pool: usize, out: usize, B: i32, S: i32, Sc: i32, l: i32, d: i32, C: i32): void {
  for (let b = 0; b < B; b++) for (let i = 0; i < Sc; i++) {
    const oo = out + ((<usize>((b * Sc + i) * C)) << 2);
    for (let c = 0; c < C; c++) store<f32>(oo + ((<usize>c) << 2), 0);
    for (let j = 0; j < l; j++) {
      const xo = x + ((<usize>((b * S + i * d + j) * C)) << 2), po = pool + ((<usize>(j * C)) << 2);
      let c = 0;
      for (; c + 4 <= C; c += 4) { const q = (<usize>c) << 2; v128.store(oo + q, f32x4.add(v128.load(oo + q), f32x4.mul(v128.load(po + q), v128.load(xo + q)))); }
      for (; c < C; c++) { const q = (<usize>c) << 2; store<f32>(oo + q, load<f32>(oo + q) + load<f32>(po + q) * load<f32>(xo + q)); }
    }
  }
}

// Backward of pool_fwd: dx[b, i·d+j] += pool[j] ⊙ dout[b,i];  dpool[j] += x[b, i·d+j] ⊙ dout[b,i]
export function pool_bwd(x: usize, pool: usize, dout: usize, dx: usize, dpool: usize, B: i32, S: i32, Sc: i32, l: i32, d: i32, C: i32): void {
  for (let b = 0; b < B; b++) for (let i = 0; i < Sc; i++) {
    const go = dout + ((<usize>((b * Sc + i) * C)) << 2);
    for (let j = 0; j < l; j++) {
      const ro = (<usize>((b * S + i * d + j) * C)) << 2, po = pool + ((<usize>(j * C)) << 2), gpo = dpool + ((<usize>(j * C)) << 2);
      let c = 0;
      for (; c + 4 <= C; c += 4) {
        const q = (<usize>c) << 2;
        const g = v128.load(go + q);
        v128.store(dx + ro + q, f32x4.add(v128.load(dx + ro + q), f32x4.mul(v128.load(po + q), g)));
        v128.store(gpo + q, f32x4.add(v128.load(gpo + q), f32x4.mul(v128.load(x + ro + q), g)));
      }
      for (; c < C; c++) {
        const q = (<usize>c) << 2;
        const g = load<f32>(go + q);
        store<f32>(dx + ro + q, load<f32>(dx + ro + q) + load<f32>(po + q) * g);
        store<f32>(gpo + q, load<f32>(gpo + q) + load<f32>(x + ro + q) * g);
      }
    }
  }
}
