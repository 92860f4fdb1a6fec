// A rank's start: the boot lines and env.json, the model, the data lanes of this rank, the
// optimizer, and a resume from a checkpoint (step count, schedule, optimizer and data position).
import { join } from 'node:path';
import type { Comm } from '../comm.js';
import { loadCorpus, LaneSampler, shareOf, type Corpus } from '../data.js';
import { AdamW, createModel, type Model } from '../model-api.js';
import { modelConfigOf } from '../model-config.js';
import { readCheckpoint } from '../checkpoint.js';
import type { RunSpec } from '../spec.js';
import { Heartbeat, envJson, writeJson } from '../writers.js';

export const out = (line: string): void => void process.stdout.write(line + '\n');

/** Bytes per training sequence handed to the model (it predicts bytes 2..seq_len from their prefixes). */
export function windowOf(seqLen: number): number {
  return seqLen;
}

/** What a rank trains with, once booted. */
export interface Rank {
  spec: RunSpec;
  rank: number;
  world: number;
  dir: string;
  T: RunSpec['cfg']['train'];
  model: Model;
  /** parameter count */
  n: number;
  hb: Heartbeat;
  corpus: Corpus;
  window: number;
  /** this rank's lanes of the global batch */
  share: { start: number; count: number };
  sampler: LaneSampler;
  opt: AdamW;
  sched: { lr: number; warmupSteps: number; totalSteps: number; minLr: number };
  /** the step training starts after (the checkpoint's on a resume, else 0) */
  startStep: number;
}

export async function bootRank(spec: RunSpec, comm: Comm): Promise<Rank> {
  const { rank, world } = comm;
  const dir = spec.outDir;
  const cfg = spec.cfg;
  const T = cfg.train;
  out(`[boot] loading config ${spec.configPath}`);
  out(`[boot] effective config: S=${T.seq_len} B=${T.batch_size} accum=1 gc=off`);
  if (rank === 0) for (const n of spec.notes) out(n);
  writeJson(join(dir, 'env.json'), envJson(spec.configPath));
  if (world > 1 && rank === 0)
    out(
      `[ddp] process group ready | backend=ipc world_size=${world} timeout_min=${Number(process.env.NSA_PG_TIMEOUT_MIN ?? 15)}`,
    );

  const model: Model = await createModel(modelConfigOf(spec.cfg), { seed: T.seed, kernels: spec.kernels });
  const n = model.params.length;
  if (rank === 0) out(`[train] reference NSA model: ${n.toLocaleString('en-US')} parameters, kernels=${model.kernels}`);
  const hb = new Heartbeat(dir, rank);
  hb.write(0, 'boot', { phase: 'start' });

  const corpus = loadCorpus(spec.dataPath, cfg.data.val_fraction, spec.datasetName);
  const window = windowOf(T.seq_len);
  const share = shareOf(T.batch_size, world, rank);
  const sampler = new LaneSampler(corpus.train, T.batch_size, window, window - 1, share.start, share.count);
  out(`[train] dataset=${corpus.name} tokenizer=byte`);
  if (rank === 0) out('[train] gradient_checkpointing=off');
  if (rank === 0 && spec.dataPath && spec.datasetName !== 'pride-and-prejudice')
    out(`[train] reading local dataset: ${spec.dataPath}`);

  const decayMask = new Uint8Array(n);
  for (const l of model.layout) if (l.decay) decayMask.fill(1, l.offset, l.offset + l.size);
  const opt = new AdamW(n, { weightDecay: T.weight_decay, decayMask });
  const sched = { lr: T.lr, warmupSteps: T.warmup_steps, totalSteps: T.steps, minLr: T.min_lr };
  const r: Rank = { spec, rank, world, dir, T, model, n, hb, corpus, window, share, sampler, opt, sched, startStep: 0 };
  if (spec.resumePath) r.startStep = await resume(r, spec.resumePath);
  return r;
}

/** loads the checkpoint into the model, the optimizer and (when the data still matches) the sampler; returns its step */
async function resume(r: Rank, path: string): Promise<number> {
  const ck = await readCheckpoint(path);
  if (ck.header.n_params !== r.n)
    throw new Error(`checkpoint ${path} has ${ck.header.n_params} parameters; the model has ${r.n}`);
  r.model.params.set(ck.params);
  r.opt.importState({ t: ck.header.optimizer.t, m: ck.m, v: ck.v });
  if (ck.header.data.lanes === r.T.batch_size && ck.header.data.train_bytes === r.corpus.train.length)
    r.sampler.pos = { cursor: ck.header.data.cursor, epoch: ck.header.data.epoch };
  else if (r.rank === 0)
    out(
      '[train] note: the global batch or the data changed since the checkpoint; data restarts at the beginning of the corpus',
    );
  out(`[train] resumed from ${path}`);
  return ck.header.step;
}
