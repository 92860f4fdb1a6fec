// The WebAssembly SIMD kernels and their plain-JS twins compute the same thing, including the
// scalar tails of sizes that are not multiples of the vector width; 'auto' falls back to JS when the
// module cannot be used, and 'wasm' then says why.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKernels, type Kernels } from '../../../../src/trainer/reference/kernels/index.js';
import { Rng } from '../../../../src/trainer/reference/model/model.js';

function fill(k: Kernels, off: number, n: number, rng: Rng, scale = 1) {
  for (let i = 0; i < n; i++) k.f[off + i] = scale * rng.normal();
}
function maxRel(a: Kernels, b: Kernels, off: number, n: number): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < n; i++) {
    num = Math.max(num, Math.abs(a.f[off + i]! - b.f[off + i]!));
    den = Math.max(den, Math.abs(a.f[off + i]!));
  }
  return den === 0 ? num : num / den;
}

test('wasm gemm matches JS for plain, transposed-A and accumulating products at odd sizes', async () => {
  const w = await loadKernels('wasm'),
    j = await loadKernels('js');
  assert.equal(w.kind, 'wasm');
  for (const [M, N, K] of [
    [7, 13, 5],
    [4, 8, 1],
    [33, 67, 19],
    [1, 3, 64],
  ] as const) {
    for (const transA of [false, true]) {
      for (const k of [w, j]) k.ensure(k.base + 3 * 8192);
      const a = w.base,
        b = a + 4096,
        c = b + 4096;
      for (const k of [w, j]) {
        const rng = new Rng(M * 31 + N);
        fill(k, a, M * K, rng);
        fill(k, b, K * N, rng);
        fill(k, c, M * N, rng);
      }
      for (const k of [w, j]) {
        if (transA) k.gemm(a, 1, M, b, N, c, N, M, N, K, true);
        else k.gemm(a, K, 1, b, N, c, N, M, N, K, true);
      }
      assert.ok(maxRel(j, w, c, M * N) < 1e-5, `gemm ${M}×${N}×${K} transA=${transA}`);
      // and against a direct triple loop
      const rng = new Rng(M * 31 + N);
      const A = Array.from({ length: M * K }, () => rng.normal()),
        Bm = Array.from({ length: K * N }, () => rng.normal()),
        C0 = Array.from({ length: M * N }, () => rng.normal());
      for (let i = 0; i < M; i++)
        for (let jj = 0; jj < N; jj++) {
          let s = C0[i * N + jj]!;
          for (let kk = 0; kk < K; kk++) s += (transA ? A[kk * M + i]! : A[i * K + kk]!) * Bm[kk * N + jj]!;
          assert.ok(Math.abs(s - w.f[c + i * N + jj]!) < 1e-4 * (1 + Math.abs(s)));
        }
    }
  }
});

for (const [dk, dv, ld] of [
  [6, 10, 14],
  [32, 36, 40],
  [21, 19, 23],
] as const)
  test(`wasm attention rows (dk ${dk}, dv ${dv}), softmax and SiLU match JS`, async () => {
    const w = await loadKernels('wasm'),
      j = await loadKernels('js');
    const T = 40;
    const q = w.base,
      K = q + 48,
      V = K + T * ld,
      P = V + T * ld,
      O = P + 64,
      dO = O + 48,
      dq = dO + 48,
      dK = dq + 48,
      dV = dK + T * ld,
      rg = dV + T * ld;
    for (const k of [w, j]) {
      k.ensure(rg + 4096);
      const rng = new Rng(5);
      fill(k, q, dk, rng);
      fill(k, K, T * ld, rng);
      fill(k, V, T * ld, rng);
      fill(k, dO, dv, rng);
      k.f.fill(0, dq, dq + 48);
      k.f.fill(0, dK, rg);
      k.i[rg] = 0;
      k.i[rg + 1] = 5;
      k.i[rg + 2] = 9;
      k.i[rg + 3] = 9;
      k.i[rg + 4] = 17;
      k.i[rg + 5] = 30; // includes an empty range
    }
    for (const k of [w, j]) k.attnFwd(q, K, ld, V, ld, rg, 3, dk, dv, 0.4, P, O);
    let psum = 0;
    for (let i = 0; i < 18; i++) psum += w.f[P + i]!;
    assert.ok(Math.abs(psum - 1) < 1e-6, 'probabilities over the 18 keys sum to 1');
    assert.ok(maxRel(j, w, P, 18) < 1e-5 && maxRel(j, w, O, dv) < 1e-5);
    const dg = [w, j].map((k) => k.attnBwd(q, K, ld, V, ld, rg, 3, dk, dv, 0.4, 0.7, P, O, dO, dq, dK, dV));
    assert.ok(Math.abs(dg[0]! - dg[1]!) < 1e-5 * Math.abs(dg[1]!));
    for (const [off, n] of [
      [P, 18],
      [O, dv],
      [dq, dk],
      [dK, T * ld],
      [dV, T * ld],
    ] as const)
      assert.ok(maxRel(j, w, off, n) < 1e-5);
    // no keys: zero output, no gradient
    for (const k of [w, j]) {
      k.f.fill(0, dq, dq + 48);
      k.attnFwd(q, K, ld, V, ld, rg, 0, dk, dv, 0.4, P, O);
      assert.equal(k.attnBwd(q, K, ld, V, ld, rg, 0, dk, dv, 0.4, 1, P, O, dO, dq, dK, dV), 0);
    }
    for (let i = 0; i < dv; i++) assert.equal(w.f[O + i], 0);

    const x = w.base,
      lse = x + 7 * 261,
      h = lse + 16,
      a = h + 103,
      sg = a + 103,
      dh = sg + 103;
    for (const k of [w, j]) {
      const rng = new Rng(8);
      fill(k, x, 7 * 261, rng, 6);
      fill(k, h, 103, rng, 4);
      fill(k, dh, 103, rng);
      k.softmaxRows(x, 7, 261, 0.5, lse);
      k.siluFwd(h, a, sg, 103);
      k.siluBwd(dh, h, sg, 103);
    }
    for (const [off, n] of [
      [x, 7 * 261],
      [lse, 7],
      [a, 103],
      [sg, 103],
      [dh, 103],
    ] as const)
      assert.ok(maxRel(j, w, off, n) < 2e-6, `offset ${off - w.base}`);
  });

test("'auto' falls back to the JS kernels when kernels.wasm is unusable; 'wasm' refuses with the reason", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-kernels-'));
  try {
    const bad = join(dir, 'kernels.wasm');
    writeFileSync(bad, 'not a wasm module');
    assert.equal((await loadKernels('auto', { wasmPath: bad })).kind, 'js');
    assert.equal((await loadKernels('auto', { wasmPath: join(dir, 'missing.wasm') })).kind, 'js');
    await assert.rejects(loadKernels('wasm', { wasmPath: bad }), /WebAssembly kernels unavailable: .*unusable/);
    assert.equal((await loadKernels('auto')).kind, 'wasm', 'the shipped module loads on this machine');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('wasm RMSNorm, RoPE, pooling, gate combine and residual add match JS at odd widths', async () => {
  const w = await loadKernels('wasm'),
    j = await loadKernels('js');
  const M = 9,
    D = 11,
    S = 5,
    heads = 3,
    dk = 6,
    B = 2,
    Sc = 3,
    l = 3,
    d = 2,
    C = 7,
    H = 4,
    hpg = 2,
    G = 2,
    dv = 5;
  const x = w.base,
    wt = x + 128,
    y = wt + 16,
    rinv = y + 128,
    dy = rinv + 16,
    dx = dy + 128,
    dw = dx + 128;
  const rb = dw + 16,
    cs = rb + M * heads * dk,
    sn = cs + S * 3;
  const px = sn + 16,
    pool = px + B * S * C,
    pout = pool + l * C,
    pdout = pout + B * Sc * C,
    pdx = pdout + B * Sc * C,
    pdpool = pdx + B * S * C;
  const o = pdpool + l * C,
    oc = o + M * H * dv,
    os = oc + M * H * dv,
    ow = os + M * H * dv,
    gates = ow + M * H * dv,
    end = gates + M * G * 3;
  for (const k of [w, j]) {
    k.ensure(end + 16);
    const rng = new Rng(21);
    fill(k, x, M * D, rng);
    fill(k, wt, D, rng);
    fill(k, dy, M * D, rng);
    fill(k, dx, M * D, rng);
    fill(k, dw, D, rng);
    fill(k, rb, M * heads * dk, rng);
    for (let t = 0; t < S; t++)
      for (let i = 0; i < 3; i++) {
        k.f[cs + t * 3 + i] = Math.cos(t * 0.7 ** i);
        k.f[sn + t * 3 + i] = Math.sin(t * 0.7 ** i);
      }
    fill(k, px, B * S * C, rng);
    fill(k, pool, l * C, rng);
    fill(k, pdout, B * Sc * C, rng);
    fill(k, pdx, B * S * C, rng);
    fill(k, pdpool, l * C, rng);
    fill(k, oc, 3 * M * H * dv, rng);
    for (let r = 0; r < M * G; r++) {
      const a = rng.next(),
        b = rng.next() * (1 - a);
      k.f[gates + 3 * r] = a;
      k.f[gates + 3 * r + 1] = b;
      k.f[gates + 3 * r + 2] = 1 - a - b;
    }
    k.rmsFwd(x, wt, y, rinv, M, D, 1e-6);
    k.rmsBwd(x, rinv, wt, dw, dy, dx, M, D);
    k.rope(rb, M, heads, dk, S, cs, sn, false);
    k.poolFwd(px, pool, pout, B, S, Sc, l, d, C);
    k.poolBwd(px, pool, pdout, pdx, pdpool, B, S, Sc, l, d, C);
    k.combine3(o, oc, os, ow, gates, M, H, hpg, G, dv);
    k.addTo(dx, y, M * D);
  }
  for (const [name, off, n] of [
    ['rms y', y, M * D],
    ['rms rinv', rinv, M],
    ['rms dx + add', dx, M * D],
    ['rms dw', dw, D],
    ['rope', rb, M * heads * dk],
    ['pool out', pout, B * Sc * C],
    ['pool dx', pdx, B * S * C],
    ['pool dpool', pdpool, l * C],
    ['combine', o, M * H * dv],
  ] as const) {
    assert.ok(maxRel(j, w, off, n) < 1e-5, name);
  }
  // RoPE then its inverse restores the input
  const before = Float64Array.from(w.f.subarray(rb, rb + M * heads * dk));
  w.rope(rb, M, heads, dk, S, cs, sn, false);
  w.rope(rb, M, heads, dk, S, cs, sn, true);
  for (let i = 0; i < before.length; i++) assert.ok(Math.abs(w.f[rb + i]! - before[i]!) < 1e-5);
});
