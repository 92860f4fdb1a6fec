// The zod schemas the readers' hand-written checks (src/trainer/run/readers/shape.ts and
// parseHeartbeatLine) replaced, kept as their reference: the property tests hold both to the same
// answers. zod stays out of src/trainer/run: its bundle cost `nsa-top status` more than half a bare
// node start to load.
import { z } from 'zod';
import type { EnvJson, MetricsJson } from '../../../src/trainer/run/readers/jsonfiles.js';
import type { TrainerConfig } from '../../../src/trainer/run/readers/config.js';
import type { HeartbeatRecord } from '../../../src/trainer/run/readers/heartbeat.js';

export const HeartbeatRecordSchema = z.looseObject({
  ts: z.number().refine(Number.isFinite, 'ts must be finite'),
  msg: z.string(),
  step: z.number().int().nonnegative().optional(),
  rank: z.number().int().nonnegative().optional(),
  pid: z.number().int().optional(),
  iso: z.string().optional(),
});
type ZHeartbeatRecord = z.infer<typeof HeartbeatRecordSchema>;

export const EnvJsonSchema = z.looseObject({
  time: z.string().optional().catch(undefined),
  python: z.string().optional().catch(undefined),
  torch: z.string().optional().catch(undefined),
  cuda_available: z.boolean().optional().catch(undefined),
  cuda_device_count: z.number().optional().catch(undefined),
  gpu_name: z.string().optional().catch(undefined),
  cuda_capability: z.array(z.number()).optional().catch(undefined),
  distributed_backend: z.string().optional().catch(undefined),
  implementation: z.string().optional().catch(undefined),
  /** nsa-top's reference trainer marks its runs with "nsa-top-reference" */
  trainer: z.string().optional().catch(undefined),
  env: z.record(z.string(), z.unknown()).optional().catch(undefined),
});
type ZEnvJson = z.infer<typeof EnvJsonSchema>;

export const MetricsJsonSchema = z.looseObject({
  device: z.string().optional(),
  dtype: z.string().optional(),
  steps: z.number().optional(),
  seq_len: z.number().optional(),
  batch_global: z.number().optional(),
  lr: z.number().optional(),
  loss_first: z.unknown().optional(),
  loss_last: z.unknown().optional(),
  backend: z.string().optional(),
});
type ZMetricsJson = z.infer<typeof MetricsJsonSchema>;

const num = z.number().optional().catch(undefined);
const str = z.string().optional().catch(undefined);

export const TrainerConfigSchema = z.looseObject({
  model: z
    .looseObject({ dim: num, n_layers: num, n_heads: num, n_kv_groups: num, d_k: num, d_v: num, vocab_size: num })
    .optional()
    .catch(undefined),
  nsa: z.looseObject({ l: num, d: num, l_sel: num, n_sel: num, w: num, phi: str }).optional().catch(undefined),
  data: z.looseObject({ tokenizer: str }).optional().catch(undefined),
  runtime: z.looseObject({ device: str, precision: str }).optional().catch(undefined),
  train: z
    .looseObject({
      steps: num,
      seq_len: num,
      batch_size: num,
      accumulate_grad_batches: num,
      lr: num,
      warmup_steps: num,
      log_every: num,
      eval_every: num,
      save_every: num,
      out_dir: str,
    })
    .optional()
    .catch(undefined),
});
type ZTrainerConfig = z.infer<typeof TrainerConfigSchema>;

// the hand-written types are the schemas' types (each assignable to the other)
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const typesAgree: [
  Same<ZHeartbeatRecord, HeartbeatRecord>,
  Same<ZEnvJson, EnvJson>,
  Same<ZMetricsJson, MetricsJson>,
  Same<ZTrainerConfig, TrainerConfig>,
] = [true, true, true, true];
