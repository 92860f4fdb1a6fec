// Model FLOPs per token and device peaks, for the throughput plausibility rule. Estimates, said
// as such: ≈ 6 × (matmul parameters) for forward + backward, plus the attention score/value terms
// over the keys NSA actually attends to (window + selected blocks + compressed tokens).
import type { ModelDims, NsaDims } from '../trainer/run/snapshot.js';

/** The nsa-vibe configs of contract §4.2, by basename without .yaml. */
export const KNOWN_CONFIGS: Record<string, { model: ModelDims; nsa: NsaDims; seqLen: number; toy: boolean }> = (() => {
  const m125 = (vocab: number) => ({ dim: 768, nLayers: 12, nHeads: 12, nKvGroups: 2, dK: 64, dV: 64, vocab });
  const nsa125: NsaDims = { l: 32, d: 16, lSel: 64, nSel: 16, w: 512 };
  const small = { dim: 256, nLayers: 6, nHeads: 8, nKvGroups: 2, dK: 32, dV: 32, vocab: 256 };
  const nsaSmall: NsaDims = { l: 16, d: 8, lSel: 32, nSel: 8, w: 256 };
  return {
    m7c_125m_2xa100_production: { model: m125(256), nsa: nsa125, seqLen: 2048, toy: false },
    m7c_125m_2xa100_production_tuned: { model: m125(256), nsa: nsa125, seqLen: 2048, toy: false },
    m7c_125m_80g: { model: m125(50257), nsa: nsa125, seqLen: 4096, toy: false },
    m7c_125m_40g: { model: m125(50257), nsa: nsa125, seqLen: 4096, toy: false },
    m7c_125m_24g: { model: m125(50257), nsa: nsa125, seqLen: 4096, toy: false },
    m7c_125m_1xa100_prod_v1: { model: m125(256), nsa: nsa125, seqLen: 2048, toy: false },
    m7c_125m_1xa100_production: { model: m125(256), nsa: nsa125, seqLen: 2048, toy: false },
    m7c_125m_fast_log: { model: m125(50257), nsa: nsa125, seqLen: 1024, toy: false },
    m7c_125m_2k_test: { model: m125(256), nsa: nsa125, seqLen: 2048, toy: false },
    m7c_3090_smoke: { model: small, nsa: nsaSmall, seqLen: 1024, toy: false },
    m7c_small_smoke: { model: small, nsa: nsaSmall, seqLen: 1024, toy: false },
    train_showcase: {
      model: { dim: 128, nLayers: 1, nHeads: 8, nKvGroups: 2, dK: 16, dV: 16, vocab: 256 },
      nsa: { l: 16, d: 8, lSel: 32, nSel: 8, w: 64 },
      seqLen: 128,
      toy: true,
    },
  };
})();

export function configBasename(path: string | null | undefined): string | null {
  if (!path) return null;
  const base = path.split(/[\\/]/).pop() ?? path;
  return base.replace(/\.ya?ml$/i, '');
}

export function knownConfig(path: string | null | undefined) {
  const b = configBasename(path);
  return b && Object.hasOwn(KNOWN_CONFIGS, b) ? KNOWN_CONFIGS[b]! : null;
}

/** A config name that says it is the 125M model (m7c_125m_*, "125m"). */
export function claims125m(path: string | null | undefined): boolean {
  const b = configBasename(path);
  return !!b && /125m/i.test(b);
}

/** The toy-config tell (contract §8.4): tiny width, one layer or a short context. */
export function isToyModel(model: ModelDims | null, seqLen: number | null): boolean {
  if (!model) return false;
  return model.dim <= 128 && (model.nLayers <= 1 || (seqLen !== null && seqLen <= 128));
}

/** Matmul parameters per layer (attention with per-branch K/V under GQA, gate MLP, MLP ≈ 8·dim²). */
export function estimateParams(m: ModelDims): { perLayer: number; head: number; embedding: number; total: number } {
  const q = m.dim * m.nHeads * m.dK;
  const kv = 3 * m.dim * m.nKvGroups * (m.dK + m.dV);
  const o = m.nHeads * m.dV * m.dim;
  const gate = m.dK * Math.floor(m.dK / 2) + Math.floor(m.dK / 2) * 3;
  const mlp = 8 * m.dim * m.dim;
  const perLayer = q + kv + o + gate + mlp;
  const head = m.dim * m.vocab;
  const embedding = m.dim * m.vocab;
  return { perLayer, head, embedding, total: perLayer * m.nLayers + head + embedding };
}

/** Keys a query attends to in NSA at context length S (window + selected + compressed). */
export function attendedKeys(nsa: NsaDims | null, seqLen: number): number {
  if (!nsa) return seqLen / 2; // dense causal attention averages S/2 keys
  const win = Math.min(seqLen, nsa.w);
  const sel = Math.min(seqLen, nsa.nSel * nsa.lSel);
  const cmp = nsa.d > 0 ? seqLen / nsa.d : 0;
  return Math.min(seqLen, win + sel) + cmp;
}

/** ≈ FLOPs per trained token (forward + backward). */
export function flopsPerToken(m: ModelDims, nsa: NsaDims | null, seqLen: number | null): number {
  const p = estimateParams(m);
  const dense = 6 * (p.perLayer * m.nLayers + p.head);
  const keys = attendedKeys(nsa, seqLen ?? 1024);
  const attn = 12 * m.nLayers * m.nHeads * m.dK * keys;
  return dense + attn;
}

export interface DevicePeak {
  /** dense peak, FLOP/s per device, at the run's precision */
  flops: number;
  label: string;
}

// Dense tensor-core peaks (no sparsity), TFLOP/s: [bf16/fp16, tf32/fp32-path].
const GPU_PEAKS: [RegExp, number, number, string][] = [
  [/H100.*PCIe/i, 756, 378, 'H100 PCIe'],
  // the H200 and GH200 have the H100 SXM's tensor cores (more and faster memory, the same peaks)
  [/GH200/i, 989, 495, 'GH200'],
  [/H200/i, 989, 495, 'H200'],
  [/H100/i, 989, 495, 'H100 SXM'],
  [/A100/i, 312, 156, 'A100'],
  [/L40S/i, 362, 183, 'L40S'],
  [/L40/i, 181, 90, 'L40'],
  [/A6000|RTX 6000 Ada/i, 155, 77, 'RTX A6000'],
  [/A10G/i, 70, 35, 'A10G'],
  [/A10\b/i, 125, 62, 'A10'],
  [/L4\b/i, 121, 60, 'L4'],
  [/4090/i, 165, 83, 'RTX 4090'],
  [/3090/i, 71, 36, 'RTX 3090'],
  [/V100/i, 125, 16, 'V100'],
  [/T4\b/i, 65, 8, 'T4'],
];

/** Peak of one GPU by name at the given dtype; null when the device is not in the table. */
export function gpuPeak(name: string | null | undefined, dtype: string | null | undefined): DevicePeak | null {
  if (!name) return null;
  const fp32 = !!dtype && /float32|fp32/i.test(dtype);
  for (const [re, half, single, label] of GPU_PEAKS) {
    if (re.test(name)) return { flops: (fp32 ? single : half) * 1e12, label: `${label} ${fp32 ? 'tf32' : 'bf16'}` };
  }
  return null;
}

/** A generous CPU upper bound: ~100 GFLOP/s per core (AVX2 FMA fp32 at 3 GHz). */
export function cpuPeak(cores: number): DevicePeak {
  return { flops: cores * 100e9, label: `${cores} CPU cores (≤100 GFLOP/s each)` };
}
