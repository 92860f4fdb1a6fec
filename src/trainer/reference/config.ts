// The reference trainer's run configuration, in the real trainer's YAML shape (contract §4):
// model / nsa / data / runtime / train sections. A YAML file (--config) is read first, flags
// override it, and the merged result is written back to <out>/config.yaml.
import { readFileSync } from 'node:fs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { z } from 'zod';

export interface RunConfig {
  model: { dim: number; n_layers: number; n_heads: number; n_kv_groups: number; d_k: number; d_v: number };
  nsa: { l: number; d: number; l_sel: number; n_sel: number; w: number; phi: 'avg' };
  data: { tokenizer: 'byte'; dataset: string; path: string | null; val_fraction: number };
  runtime: { device: 'cpu'; precision: 'fp32'; gradient_checkpointing: false; kernels: 'auto' | 'wasm' | 'js' };
  train: {
    steps: number;
    seq_len: number;
    batch_size: number;
    accumulate_grad_batches: 1;
    lr: number;
    min_lr: number;
    lr_schedule: 'cosine';
    warmup_steps: number;
    weight_decay: number;
    grad_clip: number;
    log_every: number;
    eval_every: number;
    save_every: number;
    seed: number;
    out_dir: string;
  };
}

export function defaultRunConfig(): RunConfig {
  return {
    // Sized for a 2-core CPU: dim 64, 2 layers, 2 heads (one KV group), seq 128, batch 8.
    model: { dim: 64, n_layers: 2, n_heads: 2, n_kv_groups: 1, d_k: 32, d_v: 32 },
    // seq 128: compressed blocks of 16 (stride 8), 4 of 8 selection blocks of 16, window 64.
    nsa: { l: 16, d: 8, l_sel: 16, n_sel: 4, w: 64, phi: 'avg' },
    data: { tokenizer: 'byte', dataset: 'pride-and-prejudice', path: null, val_fraction: 0.05 },
    runtime: { device: 'cpu', precision: 'fp32', gradient_checkpointing: false, kernels: 'auto' },
    train: {
      steps: 2000,
      seq_len: 128,
      batch_size: 8,
      accumulate_grad_batches: 1,
      lr: 3e-3,
      min_lr: 3e-4,
      lr_schedule: 'cosine',
      warmup_steps: 20,
      weight_decay: 0.01,
      grad_clip: 1.0,
      log_every: 5,
      eval_every: 50,
      save_every: 50,
      seed: 1337,
      out_dir: 'artifacts/reference',
    },
  };
}

const int = (min: number) => z.number().int().min(min);
const num = z.number().finite();

// Keys the real trainer's configs carry that mean nothing here; accepted without a word.
const IGNORED: Record<string, string[]> = {
  model: [],
  nsa: [],
  data: [],
  runtime: [
    'use_flash',
    'use_triton_sel',
    'compile_cmp_win',
    'sel_triton_min_L',
    'fa2_enabled',
    'fa2_min_len_win',
    'fa2_min_len_cmp',
  ],
  train: ['max_grad_norm'],
};

const sectionSchemas = {
  model: z
    .object({ dim: int(1), n_layers: int(1), n_heads: int(1), n_kv_groups: int(1), d_k: int(2), d_v: int(1) })
    .partial(),
  nsa: z.object({ l: int(1), d: int(1), l_sel: int(1), n_sel: int(1), w: int(1), phi: z.string() }).partial(),
  data: z
    .object({
      tokenizer: z.string(),
      dataset: z.string(),
      path: z.string().nullable(),
      val_fraction: num.min(0.001).max(0.5),
    })
    .partial(),
  runtime: z
    .object({
      device: z.string(),
      precision: z.string(),
      gradient_checkpointing: z.boolean(),
      kernels: z.enum(['auto', 'wasm', 'js']),
    })
    .partial(),
  train: z
    .object({
      steps: int(1),
      seq_len: int(8),
      batch_size: int(1),
      accumulate_grad_batches: int(1),
      lr: num.positive(),
      min_lr: num.min(0),
      lr_schedule: z.string(),
      warmup_steps: int(0),
      weight_decay: num.min(0),
      grad_clip: num.min(0),
      log_every: int(1),
      eval_every: int(0),
      save_every: int(0),
      seed: z.number().int(),
      out_dir: z.string(),
    })
    .partial(),
};

export class ConfigError extends Error {}

/** Reads a YAML config in the real trainer's shape; returns the overrides it makes and warnings. */
export function readConfigFile(path: string): { overrides: DeepPartial<RunConfig>; warnings: string[] } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`config ${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  return parseConfigObject(doc ?? {}, path);
}

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? Partial<T[K]> : T[K] };

export function parseConfigObject(
  doc: unknown,
  where: string,
): { overrides: DeepPartial<RunConfig>; warnings: string[] } {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new ConfigError(`config ${where}: expected a mapping with model/nsa/data/runtime/train sections`);
  const warnings: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [section, value] of Object.entries(doc as Record<string, unknown>)) {
    if (!(section in sectionSchemas)) {
      warnings.push(`[config] ignoring unknown section '${section}' in ${where}`);
      continue;
    }
    if (value === null || value === undefined) continue;
    if (typeof value !== 'object' || Array.isArray(value))
      throw new ConfigError(`config ${where}: '${section}' must be a mapping`);
    const schema = sectionSchemas[section as keyof typeof sectionSchemas];
    const known = new Set(Object.keys(schema.shape));
    const picked: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (known.has(k)) picked[k] = v;
      else if (
        !IGNORED[section]!.includes(k) &&
        !(section === 'nsa' && k === 'phi') &&
        !(section === 'train' && k === 'lr_schedule')
      )
        warnings.push(`[config] ignoring unknown key ${section}.${k} in ${where}`);
    }
    const r = schema.safeParse(picked);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      throw new ConfigError(`config ${where}: ${section}.${issue.path.join('.')}: ${issue.message}`);
    }
    out[section] = r.data;
  }
  return { overrides: out as DeepPartial<RunConfig>, warnings };
}

export function mergeConfig(base: RunConfig, over: DeepPartial<RunConfig>): RunConfig {
  const cfg = structuredClone(base) as unknown as Record<string, Record<string, unknown>>;
  for (const [section, values] of Object.entries(over)) {
    if (!values) continue;
    for (const [k, v] of Object.entries(values as Record<string, unknown>)) if (v !== undefined) cfg[section]![k] = v;
  }
  return cfg as unknown as RunConfig;
}

/** Checks the merged config; returns notes to print (ignored settings) or throws ConfigError. */
export function validateConfig(raw: RunConfig): { cfg: RunConfig; notes: string[] } {
  const cfg = structuredClone(raw);
  const notes: string[] = [];
  const m = cfg.model;
  const n = cfg.nsa;
  const t = cfg.train;
  const fail = (msg: string): never => {
    throw new ConfigError(`config: ${msg}`);
  };
  if (m.n_heads % m.n_kv_groups !== 0)
    fail(`model.n_heads (${m.n_heads}) must be a multiple of model.n_kv_groups (${m.n_kv_groups})`);
  if (m.d_k % 2 !== 0) fail(`model.d_k (${m.d_k}) must be even (RoPE)`);
  if (n.l % n.d !== 0) fail(`nsa.d (${n.d}) must divide nsa.l (${n.l})`);
  if (n.l_sel % n.d !== 0) fail(`nsa.d (${n.d}) must divide nsa.l_sel (${n.l_sel})`);
  if (t.seq_len < n.l) fail(`train.seq_len (${t.seq_len}) must be at least nsa.l (${n.l})`);
  if ((cfg.data.tokenizer as string) !== 'byte')
    fail(`data.tokenizer '${cfg.data.tokenizer}' is not supported: the reference trainer is byte-level`);
  if ((t.accumulate_grad_batches as number) !== 1)
    fail(
      `train.accumulate_grad_batches=${t.accumulate_grad_batches} is not supported by the reference trainer (use 1)`,
    );
  if ((cfg.runtime.device as string) !== 'cpu') {
    notes.push(`[config] runtime.device=${cfg.runtime.device} ignored: the reference trainer runs on the CPU`);
    cfg.runtime.device = 'cpu';
  }
  if ((cfg.runtime.precision as string) !== 'fp32') {
    notes.push(`[config] runtime.precision=${cfg.runtime.precision} ignored: the reference trainer computes in fp32`);
    cfg.runtime.precision = 'fp32';
  }
  if ((cfg.runtime.gradient_checkpointing as boolean) !== false) {
    notes.push('[config] runtime.gradient_checkpointing ignored (off)');
    cfg.runtime.gradient_checkpointing = false;
  }
  if ((n.phi as string) !== 'avg') {
    notes.push(`[config] nsa.phi=${n.phi} ignored: pooling is learned-weighted average`);
    n.phi = 'avg';
  }
  if ((t.lr_schedule as string) !== 'cosine') {
    notes.push(`[config] train.lr_schedule=${t.lr_schedule} ignored: warmup then cosine`);
    t.lr_schedule = 'cosine';
  }
  if (t.min_lr > t.lr) t.min_lr = t.lr;
  return { cfg, notes };
}

export function configToYaml(cfg: RunConfig): string {
  return (
    "# Written by nsa-top train (the reference NSA trainer); same shape as the nsa-vibe trainer's configs.\n" +
    stringifyYaml(cfg, { lineWidth: 0 })
  );
}

/** The model/nsa part that a checkpoint fixes; a resumed run must keep it. */
export function architectureOf(cfg: RunConfig): Record<string, number> {
  return {
    'model.dim': cfg.model.dim,
    'model.n_layers': cfg.model.n_layers,
    'model.n_heads': cfg.model.n_heads,
    'model.n_kv_groups': cfg.model.n_kv_groups,
    'model.d_k': cfg.model.d_k,
    'model.d_v': cfg.model.d_v,
    'nsa.l': cfg.nsa.l,
    'nsa.d': cfg.nsa.d,
    'nsa.l_sel': cfg.nsa.l_sel,
    'nsa.n_sel': cfg.nsa.n_sel,
    'nsa.w': cfg.nsa.w,
    'train.seq_len': cfg.train.seq_len,
  };
}
