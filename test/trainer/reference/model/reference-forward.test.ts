// An independent, deliberately naive float64 implementation of the NSA forward pass (nested
// arrays, one token at a time, straight from the paper's definitions and contract §6/§7.3), read
// from the model's own parameter layout. The optimized model must compute the same loss; this is
// what makes "true NSA" checkable beyond gradients being consistent with the forward.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createModel, Rng, type ModelConfig } from '../../../../src/trainer/reference/model/model.js';

type Vec = number[];
const dot = (a: Vec, b: Vec) => a.reduce((s, x, i) => s + x * b[i]!, 0);
const silu = (z: number) => z / (1 + Math.exp(-z));

function naiveLoss(
  cfg: ModelConfig,
  params: Float32Array,
  layout: { name: string; offset: number; shape: number[] }[],
  tokens: Uint8Array,
  B: number,
): number {
  const P = (name: string) => {
    const e = layout.find((x) => x.name === name)!;
    return (i: number, j = 0) => params[e.offset + i * (e.shape[1] ?? 1) + j]!;
  };
  const { dim: D, nHeads: H, nKvGroups: G, dK: dk, dV: dv, l, d, lSel, nSel, w, seqLen: S } = cfg;
  const hpg = H / G,
    dk2 = dk >> 1;
  const matvec = (x: Vec, W: (i: number, j: number) => number, n: number) =>
    Array.from({ length: n }, (_, j) => x.reduce((s, xi, i) => s + xi * W(i, j), 0));
  const rms = (x: Vec, wf: (i: number) => number) => {
    const s = 1 / Math.sqrt(x.reduce((a, v) => a + v * v, 0) / x.length + 1e-6);
    return x.map((v, i) => v * s * wf(i));
  };
  const rope = (x: Vec, t: number) => {
    const y = x.slice();
    for (let i = 0; i < dk / 2; i++) {
      const ang = Math.fround(t * Math.pow(10000, (-2 * i) / dk)),
        c = Math.cos(ang),
        s = Math.sin(ang);
      y[2 * i] = x[2 * i]! * c - x[2 * i + 1]! * s;
      y[2 * i + 1] = x[2 * i]! * s + x[2 * i + 1]! * c;
    }
    return y;
  };
  const attend = (q: Vec, keys: Vec[], vals: Vec[]) => {
    if (keys.length === 0) return { o: new Array<number>(dv).fill(0), p: [] as number[] };
    const sc = keys.map((k) => dot(q, k) / Math.sqrt(dk));
    const mx = Math.max(...sc);
    const e = sc.map((x) => Math.exp(x - mx));
    const z = e.reduce((a, b) => a + b, 0);
    const p = e.map((x) => x / z);
    const o = new Array<number>(dv).fill(0);
    p.forEach((pi, i) => vals[i]!.forEach((v, c) => (o[c]! += pi * v)));
    return { o, p };
  };
  let total = 0;
  for (let b = 0; b < B; b++) {
    const tok = Array.from(tokens.subarray(b * S, (b + 1) * S));
    let x: Vec[] = tok.map((t) => Array.from({ length: D }, (_, j) => P('embed')(t, j)));
    for (let li = 0; li < cfg.nLayers; li++) {
      const p = `layers.${li}.`;
      const h = x.map((r) => rms(r, (i) => P(p + 'attn_norm')(i)));
      const proj = (name: string, width: number) => h.map((r) => matvec(r, P(p + name), width));
      const q = proj('attn.wq', H * dk).map((r, t) =>
        Array.from({ length: H }, (_, hd) => rope(r.slice(hd * dk, (hd + 1) * dk), t)),
      );
      const perG = (m: Vec[], width: number, rot: boolean) =>
        m.map((r, t) =>
          Array.from({ length: G }, (_, g) =>
            rot ? rope(r.slice(g * width, (g + 1) * width), t) : r.slice(g * width, (g + 1) * width),
          ),
        );
      const kc = perG(proj('attn.wk_cmp', G * dk), dk, true),
        vc = perG(proj('attn.wv_cmp', G * dv), dv, false);
      const ks = perG(proj('attn.wk_sel', G * dk), dk, true),
        vs = perG(proj('attn.wv_sel', G * dv), dv, false);
      const kw = perG(proj('attn.wk_win', G * dk), dk, true),
        vw = perG(proj('attn.wv_win', G * dv), dv, false);
      const Sc = S < l ? 0 : Math.floor((S - l) / d) + 1;
      const pool = (src: Vec[][], name: string, width: number) =>
        Array.from({ length: Sc }, (_, i) =>
          Array.from({ length: G }, (_, g) =>
            Array.from({ length: width }, (_, c) => {
              let s = 0;
              for (let j = 0; j < l; j++) s += P(p + name)(j, g * width + c) * src[i * d + j]![g]![c]!;
              return s;
            }),
          ),
        );
      const kcmp = pool(kc, 'attn.pool_k', dk),
        vcmp = pool(vc, 'attn.pool_v', dv);
      const out: Vec[] = [];
      for (let t = 0; t < S; t++) {
        const o: Vec = [];
        const nc = t + 1 < l ? 0 : Math.floor((t + 1 - l) / d) + 1;
        for (let g = 0; g < G; g++) {
          const heads = Array.from({ length: hpg }, (_, hh) => g * hpg + hh);
          const qg = Array.from({ length: dk }, (_, c) => heads.reduce((s, hd) => s + q[t]![hd]![c]!, 0) / hpg);
          const hid = Array.from({ length: dk2 }, (_, j) =>
            silu(qg.reduce((s, v, i) => s + v * P(p + 'attn.gate.fc1_w')(i, j), 0) + P(p + 'attn.gate.fc1_b')(j)),
          );
          const zl = [0, 1, 2].map(
            (k) => hid.reduce((s, v, j) => s + v * P(p + 'attn.gate.fc2_w')(j, k), 0) + P(p + 'attn.gate.fc2_b')(k),
          );
          const zm = Math.max(...zl),
            ze = zl.map((z) => Math.exp(z - zm)),
            zs = ze.reduce((a, c) => a + c, 0);
          const gate = ze.map((e) => e / zs);
          // compressed branch + selection scores (Eq. 9 overlaps, Eq. 10 sum over the group)
          const nB = Math.ceil(S / lSel);
          const score = new Array<number>(nB).fill(0);
          const cmpOut = heads.map((hd) => {
            const r = attend(
              q[t]![hd]!,
              kcmp.slice(0, nc).map((kk) => kk[g]!),
              vcmp.slice(0, nc).map((vv) => vv[g]!),
            );
            r.p.forEach((pi, i) => {
              for (let j = 0; j < nB; j++) {
                const ov = Math.min(i * d + l, (j + 1) * lSel) - Math.max(i * d, j * lSel);
                if (ov > 0) score[j]! += (pi * ov) / l;
              }
            });
            return r.o;
          });
          const cur = Math.floor(t / lSel);
          const chosen = new Set([0, cur, Math.max(0, cur - 1)]);
          const cands = Array.from({ length: nB }, (_, j) => j)
            .filter((j) => (j + 1) * lSel <= t + 1 && !chosen.has(j))
            .sort((a, c) => score[c]! - score[a]! || a - c);
          for (const j of cands.slice(0, Math.max(0, nSel - chosen.size))) chosen.add(j);
          const selTok: number[] = [];
          for (let u = 0; u <= t; u++) if (chosen.has(Math.floor(u / lSel))) selTok.push(u);
          const winTok: number[] = [];
          for (let u = Math.max(0, t - w + 1); u <= t; u++) winTok.push(u);
          heads.forEach((hd, hi) => {
            const os = attend(
              q[t]![hd]!,
              selTok.map((u) => ks[u]![g]!),
              selTok.map((u) => vs[u]![g]!),
            ).o;
            const ow = attend(
              q[t]![hd]!,
              winTok.map((u) => kw[u]![g]!),
              winTok.map((u) => vw[u]![g]!),
            ).o;
            for (let c = 0; c < dv; c++)
              o[hd * dv + c] = gate[0]! * cmpOut[hi]![c]! + gate[1]! * os[c]! + gate[2]! * ow[c]!;
          });
        }
        out.push(o);
      }
      const attnOut = out.map((o) => matvec(o, P(p + 'attn.wo'), D));
      x = x.map((r, t) => r.map((v, j) => v + attnOut[t]![j]!));
      const h2 = x.map((r) => rms(r, (i) => P(p + 'mlp_norm')(i)));
      const mlp = h2.map((r) => matvec(matvec(r, P(p + 'mlp.fc1'), 4 * D).map(silu), P(p + 'mlp.fc2'), D));
      x = x.map((r, t) => r.map((v, j) => v + mlp[t]![j]!));
    }
    for (let t = 0; t < S - 1; t++) {
      const logits = matvec(
        rms(x[t]!, (i) => P('final_norm')(i)),
        P('head'),
        cfg.vocab,
      );
      const mx = Math.max(...logits);
      total += Math.log(logits.reduce((s, z) => s + Math.exp(z - mx), 0)) + mx - logits[tok[t + 1]!]!;
    }
  }
  return total / (B * (S - 1));
}

for (const cfg of [
  {
    vocab: 40,
    dim: 16,
    nLayers: 2,
    nHeads: 4,
    nKvGroups: 2,
    dK: 8,
    dV: 8,
    l: 4,
    d: 2,
    lSel: 4,
    nSel: 4,
    w: 6,
    seqLen: 30,
  },
  {
    vocab: 40,
    dim: 12,
    nLayers: 1,
    nHeads: 2,
    nKvGroups: 1,
    dK: 6,
    dV: 4,
    l: 5,
    d: 3,
    lSel: 6,
    nSel: 5,
    w: 4,
    seqLen: 33,
  },
] satisfies ModelConfig[]) {
  test(`the model's loss equals a naive float64 NSA forward (l=${cfg.l} d=${cfg.d} l_sel=${cfg.lSel} G=${cfg.nKvGroups})`, async () => {
    const m = await createModel(cfg, { seed: 17, kernels: 'js', f64: true });
    const rng = new Rng(4);
    for (let i = 0; i < m.params.length; i++) m.params[i] = m.params[i]! + 0.2 * rng.normal(); // make gates and pooling non-trivial
    const B = 2;
    const tokens = new Uint8Array(B * cfg.seqLen);
    for (let i = 0; i < tokens.length; i++) tokens[i] = Math.floor(rng.next() * cfg.vocab);
    const want = naiveLoss(cfg, m.params, m.layout, tokens, B);
    const got = m.forward(tokens, B).loss;
    assert.ok(Math.abs(got - want) < 1e-9, `model ${got} vs naive ${want}`);
    const wa = await createModel(cfg, { seed: 17, kernels: 'wasm' });
    wa.params.set(m.params);
    const gw = wa.forward(tokens, B).loss;
    assert.ok(Math.abs(gw - want) < 1e-4 * want, `wasm model ${gw} vs naive ${want}`);
  });
}
