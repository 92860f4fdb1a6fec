// Turns `nsa-top train` arguments into one resolved RunSpec (config merged from defaults, checkpoint,
// --config and flags; out dir checked; resume target chosen). The launcher resolves it once and hands
// the same spec to every rank.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { TrainArgs } from './args.js';
import { newestCompleteCheckpoint, readCheckpoint, verifyCheckpoint } from './checkpoint.js';
import {
  ConfigError,
  architectureOf,
  defaultRunConfig,
  mergeConfig,
  readConfigFile,
  validateConfig,
  type DeepPartial,
  type RunConfig,
} from './config.js';
import { LaneSampler, loadCorpus } from './data.js';
import type { Injection } from './inject.js';
import { validateModelConfig } from './model-api.js';
import { modelConfigOf } from './model-config.js';

export interface RunSpec {
  cfg: RunConfig;
  /** absolute */
  outDir: string;
  /** what `[boot] loading config` prints and env CONFIG holds: --config, else <out>/config.yaml */
  configPath: string;
  resumePath: string | null;
  dataPath: string;
  datasetName: string;
  injections: Injection[];
  heartbeatEvery: boolean;
  /** --keep-checkpoints: rank 0 keeps the newest N checkpoints it wrote (0: all) */
  keepCheckpoints: number;
  kernels: 'wasm' | 'js' | 'auto';
  world: number;
  /** lines to print at boot (rank 0 / the single process) */
  notes: string[];
}

export const DEFAULT_DATASET = 'pride-and-prejudice';

function truthy(v: string | undefined): boolean {
  return v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.toLowerCase());
}

export async function resolveSpec(args: TrainArgs, packageRoot: string): Promise<RunSpec> {
  const notes: string[] = [];
  let fileOver: DeepPartial<RunConfig> = {};
  if (args.config) {
    const r = readConfigFile(args.config);
    fileOver = r.overrides;
    notes.push(...r.warnings);
  }
  const outDir = resolve(args.out ?? fileOver.train?.out_dir ?? defaultRunConfig().train.out_dir);

  // Which checkpoint, if any.
  let resumePath: string | null = null;
  if (args.resume === 'auto') {
    const r = await newestCompleteCheckpoint(outDir);
    for (const s of r.skipped) notes.push(`[train] skipping incomplete checkpoint ${s.path}: ${s.why}`);
    resumePath = r.path;
    if (!resumePath) notes.push(`[train] --resume: no complete checkpoint in ${outDir}; starting at step 1`);
  } else if (args.resume !== null) {
    const p = resolve(args.resume);
    const v = await verifyCheckpoint(p);
    if (!v.ok) throw new ConfigError(`--resume ${args.resume}: ${v.why}`);
    resumePath = p;
  }

  let base = defaultRunConfig();
  let ckptStep = 0;
  if (resumePath) {
    const ck = await readCheckpoint(resumePath);
    base = mergeConfig(base, ck.header.config as DeepPartial<RunConfig>);
    ckptStep = ck.header.step;
  }
  let cfg = mergeConfig(base, fileOver);
  const t = cfg.train;
  if (args.steps !== null) t.steps = args.steps;
  if (args.saveEvery !== null) t.save_every = args.saveEvery;
  if (args.logEvery !== null) t.log_every = args.logEvery;
  if (args.evalEvery !== null) t.eval_every = args.evalEvery;
  if (args.seqLen !== null) t.seq_len = args.seqLen;
  if (args.batchSize !== null) t.batch_size = args.batchSize;
  if (args.lr !== null) t.lr = args.lr;
  if (args.seed !== null) t.seed = args.seed;
  if (args.kernels !== null) cfg.runtime.kernels = args.kernels;
  t.out_dir = outDir;
  if (args.data !== null) {
    cfg.data.path = resolve(args.data);
    cfg.data.dataset = basename(args.data).replace(/\.(txt|jsonl|json)$/i, '');
  }
  const v = validateConfig(cfg);
  cfg = v.cfg;
  notes.push(...v.notes);
  try {
    validateModelConfig(modelConfigOf(cfg));
  } catch (err) {
    throw new ConfigError(`config: ${(err as Error).message}`);
  }

  if (resumePath) {
    const ck = await readCheckpoint(resumePath);
    const was = architectureOf(mergeConfig(defaultRunConfig(), ck.header.config as DeepPartial<RunConfig>));
    const now = architectureOf(cfg);
    const diffs = Object.keys(was).filter((k) => was[k] !== now[k]);
    if (diffs.length)
      throw new ConfigError(
        `--resume: the checkpoint was trained with ${diffs.map((k) => `${k}=${was[k]}`).join(', ')}; this run asks for ${diffs.map((k) => `${k}=${now[k]}`).join(', ')}`,
      );
    if (cfg.train.steps <= ckptStep)
      throw new ConfigError(
        `--resume: ${resumePath} is at step ${ckptStep}, and train.steps is ${cfg.train.steps}; pass --steps N with N > ${ckptStep} to train further`,
      );
  } else if (args.resume === null) {
    // Starting fresh over a complete checkpoint of an earlier run would overwrite it: refuse. Logs of
    // an attempt that never reached a checkpoint are appended to (a new segment, as the real trainer does).
    const complete = await newestCompleteCheckpoint(outDir);
    if (complete.path)
      throw new ConfigError(
        `${outDir} already holds checkpoints of an earlier run (${basename(complete.path)}); pass --resume to continue it, or choose another --out`,
      );
    if (existsSync(join(outDir, 'training.csv')))
      notes.push(
        `[train] note: ${outDir} has training.csv of an earlier attempt without a complete checkpoint; starting at step 1 and appending`,
      );
  }

  const haltPath = join(outDir, '.HALT');
  if (existsSync(haltPath)) {
    let content = '';
    try {
      content = readFileSync(haltPath, 'utf8').trim();
    } catch {
      /* unreadable: still stale */
    }
    throw new ConfigError(
      `${haltPath} exists${content ? ` ('${content}')` : ''}: a stale .HALT would stop this run at once; remove it (and .anomaly_type) first`,
    );
  }

  for (const inj of args.injections) {
    if (inj.rank !== null && (inj.rank < 0 || inj.rank >= args.ranks))
      throw new ConfigError(`--inject: rank=${inj.rank} does not exist with --ranks ${args.ranks}`);
  }
  if (cfg.train.batch_size < args.ranks)
    throw new ConfigError(
      `train.batch_size (${cfg.train.batch_size}) is the global batch; it must be at least --ranks (${args.ranks})`,
    );

  const dataPath = cfg.data.path ?? join(packageRoot, 'data', 'pride-and-prejudice.txt');
  // Read the data once here, so a bad file is an error before anything is written.
  const corpus = loadCorpus(dataPath, cfg.data.val_fraction);
  new LaneSampler(
    corpus.train,
    cfg.train.batch_size,
    cfg.train.seq_len,
    cfg.train.seq_len - 1,
    0,
    cfg.train.batch_size,
  );
  return {
    cfg,
    outDir,
    configPath: args.config ? resolve(args.config) : join(outDir, 'config.yaml'),
    resumePath,
    dataPath,
    datasetName: cfg.data.path ? cfg.data.dataset : DEFAULT_DATASET,
    injections: args.injections,
    heartbeatEvery: args.heartbeatEvery || truthy(process.env.NSA_HEARTBEAT_EVERY),
    keepCheckpoints: args.keepCheckpoints ?? 0,
    kernels: cfg.runtime.kernels,
    world: args.ranks,
    notes,
  };
}
