// Command line of `nsa-top train`. Unknown flags are an error (the real trainer silently ignores
// them, which once cost a 50k-step run).
import { parseInjections, type Injection } from './inject.js';

export class UsageError extends Error {}

export interface TrainArgs {
  help: boolean;
  out: string | null;
  config: string | null;
  steps: number | null;
  ranks: number;
  /** null: no resume; 'auto': newest complete checkpoint in --out; else a path */
  resume: null | 'auto' | string;
  data: string | null;
  injections: Injection[];
  saveEvery: number | null;
  logEvery: number | null;
  evalEvery: number | null;
  seqLen: number | null;
  batchSize: number | null;
  lr: number | null;
  seed: number | null;
  kernels: 'wasm' | 'js' | 'auto' | null;
  heartbeatEvery: boolean;
  /** hidden: this process is a rank under the launcher */
  rankWorker: boolean;
}

export const TRAIN_HELP = `usage: nsa-top train [options]

Runs the reference Native Sparse Attention trainer (a small byte-level language model written in
TypeScript + WebAssembly). It writes the same run directory as the nsa-vibe trainer (training.csv,
heartbeat_rank{N}.jsonl, env.json, val.csv, k_stats.csv, checkpoints, metrics.json, ...) and answers
the same controls (.HALT, SIGUSR1), so the cockpit can watch and drive it like a real run.

options:
  --out DIR            run directory (default artifacts/reference, or train.out_dir of --config)
  --config FILE        YAML in the nsa-vibe trainer's shape (model/nsa/data/runtime/train); flags win
  --steps N            total steps (also the length of the LR schedule)
  --ranks N            N rank processes under one launcher (RANK/LOCAL_RANK/WORLD_SIZE set, gradients
                       averaged over IPC). This exists to exercise per-rank monitoring on one machine;
                       it is NOT a distributed training engine and makes nothing faster.
  --resume [CKPT]      continue from CKPT, or without a value from the newest complete checkpoint in
                       --out: weights, optimizer, step count, LR schedule and data position
  --data FILE          UTF-8 text, or JSONL with a "text" field per line (default: Pride and Prejudice)
  --inject SPEC        fault injection for drills (repeatable):
                         hang@step=K[,rank=R]   the rank blocks as if in a collective
                         nan@step=K[,rank=R]    non-finite loss → coherent abort (.anomaly_type nan_loss)
                         crash@step=K[,rank=R]  the rank exits non-zero
                         gate-collapse@step=K   gates forced one-hot from step K
                         slow-data@ms=M         every batch fetch sleeps M ms
                         leak@mb=M              retain M MB more per step (RSS climbs)
                       without rank=R an injection applies to every rank; crash and hang fire
                       once per run dir, so a resumed run goes past them
  --save-every N       checkpoint every N steps (0: off)
  --log-every N        log (training.csv, progress heartbeat, stdout) every N steps
  --eval-every N       val.csv every N steps (on log steps; 0: off)
  --seq-len N          sequence length          --batch-size N   global batch (sequences)
  --lr X               peak learning rate       --seed N         init seed
  --kernels wasm|js    hot kernels (default: wasm when it loads, else js)
  --heartbeat-every    a "beat" heartbeat every step on every rank (also NSA_HEARTBEAT_EVERY=1)
  -h, --help           this help

control:
  touch DIR/.HALT      every rank stops at the same step, saves a checkpoint first, exits 0
  kill -USR1 <rank>    stack dump stackdump_<epoch>_rank<R>_<pid>.txt; training continues
  SIGTERM / SIGINT     checkpoint, then exit (a second signal exits at once)
`;

const VALUE_FLAGS = new Set([
  '--out',
  '--config',
  '--steps',
  '--ranks',
  '--data',
  '--inject',
  '--save-every',
  '--log-every',
  '--eval-every',
  '--seq-len',
  '--batch-size',
  '--lr',
  '--seed',
  '--kernels',
]);

function intArg(flag: string, v: string, min: number): number {
  if (!/^-?\d+$/.test(v)) throw new UsageError(`${flag} needs an integer, got '${v}'`);
  const n = Number(v);
  if (n < min) throw new UsageError(`${flag} must be >= ${min}, got ${n}`);
  return n;
}

export function parseTrainArgs(argv: string[]): TrainArgs {
  const a: TrainArgs = {
    help: false,
    out: null,
    config: null,
    steps: null,
    ranks: 1,
    resume: null,
    data: null,
    injections: [],
    saveEvery: null,
    logEvery: null,
    evalEvery: null,
    seqLen: null,
    batchSize: null,
    lr: null,
    seed: null,
    kernels: null,
    heartbeatEvery: false,
    rankWorker: false,
  };
  const specs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!;
    let inline: string | null = null;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const value = (): string => {
      if (inline !== null) return inline;
      const v = argv[i + 1];
      if (v === undefined || (v.startsWith('--') && v.length > 2)) throw new UsageError(`${arg} needs a value`);
      i++;
      return v;
    };
    if (arg === '-h' || arg === '--help') {
      a.help = true;
      continue;
    }
    if (arg === '--resume') {
      if (inline !== null) a.resume = inline || 'auto';
      else {
        const next = argv[i + 1];
        if (next !== undefined && !next.startsWith('-')) {
          a.resume = next;
          i++;
        } else a.resume = 'auto';
      }
      continue;
    }
    if (arg === '--heartbeat-every') {
      if (inline !== null && !['1', 'true', 'yes', 'on'].includes(inline.toLowerCase())) a.heartbeatEvery = false;
      else a.heartbeatEvery = true;
      continue;
    }
    if (arg === '--rank-worker') {
      a.rankWorker = true;
      continue;
    }
    if (!VALUE_FLAGS.has(arg)) {
      if (arg.startsWith('-')) throw new UsageError(`unknown option '${arg}' (see nsa-top train --help)`);
      throw new UsageError(`unexpected argument '${arg}' (see nsa-top train --help)`);
    }
    const v = value();
    switch (arg) {
      case '--out':
        a.out = v;
        break;
      case '--config':
        a.config = v;
        break;
      case '--steps':
        a.steps = intArg(arg, v, 1);
        break;
      case '--ranks':
        a.ranks = intArg(arg, v, 1);
        if (a.ranks > 16)
          throw new UsageError(`--ranks ${a.ranks}: at most 16 (this is a single-machine rehearsal tool)`);
        break;
      case '--data':
        a.data = v;
        break;
      case '--inject':
        specs.push(v);
        break;
      case '--save-every':
        a.saveEvery = intArg(arg, v, 0);
        break;
      case '--log-every':
        a.logEvery = intArg(arg, v, 1);
        break;
      case '--eval-every':
        a.evalEvery = intArg(arg, v, 0);
        break;
      case '--seq-len':
        a.seqLen = intArg(arg, v, 8);
        break;
      case '--batch-size':
        a.batchSize = intArg(arg, v, 1);
        break;
      case '--seed':
        a.seed = intArg(arg, v, -(2 ** 31));
        break;
      case '--lr': {
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--lr needs a positive number, got '${v}'`);
        a.lr = n;
        break;
      }
      case '--kernels':
        if (v !== 'wasm' && v !== 'js' && v !== 'auto')
          throw new UsageError(`--kernels must be wasm, js or auto, got '${v}'`);
        a.kernels = v;
        break;
    }
  }
  try {
    a.injections = parseInjections(specs);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return a;
}
