// The run config's model/nsa/train.seq_len sections as the model's ModelConfig.
import type { RunConfig } from './config.js';
import type { ModelConfig } from './model-api.js';

export function modelConfigOf(cfg: RunConfig): ModelConfig {
  const { model: m, nsa: n, train: t } = cfg;
  return {
    vocab: 256,
    dim: m.dim,
    nLayers: m.n_layers,
    nHeads: m.n_heads,
    nKvGroups: m.n_kv_groups,
    dK: m.d_k,
    dV: m.d_v,
    l: n.l,
    d: n.d,
    lSel: n.l_sel,
    nSel: n.n_sel,
    w: n.w,
    seqLen: t.seq_len,
  };
}
