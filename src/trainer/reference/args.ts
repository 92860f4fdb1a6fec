// Command line of `nsa-top train`. Unknown flags are an error (the real trainer silently ignores
// them, which once cost a 50k-step run).
import { parseArgs, type ParseArgsConfig } from 'node:util';
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
  /** keep only the newest N checkpoints this process wrote (0 / null: keep every one) */
  keepCheckpoints: number | null;
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
                         slow@rank=R,x=F        rank R's compute takes F× as long (busy CPU, like a
                                                slow GPU): the straggler drill
                       without rank=R an injection applies to every rank; crash and hang fire
                       once per run dir, so a resumed run goes past them
  --save-every N       checkpoint every N steps (0: off)
  --keep-checkpoints N keep the newest N checkpoints this trainer wrote, deleting its older ones after
                       each save (0, the default: keep all). A checkpoint it did not write — an
                       earlier process's, the one it resumed from, another run's — is never deleted
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

/**
 * The flags, for util.parseArgs. It parses them loosely (not strict), as argparse does: a value may
 * start with '-' (`--seed -5`); what is not a flag, a missing value and a flag given as another
 * flag's value (`--out --steps`) are refused below. --resume takes an optional value, so it is a
 * boolean here and the word after it is its value when that is not a flag.
 */
export const TRAIN_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  out: { type: 'string' },
  config: { type: 'string' },
  steps: { type: 'string' },
  ranks: { type: 'string' },
  resume: { type: 'boolean' },
  data: { type: 'string' },
  inject: { type: 'string', multiple: true },
  'save-every': { type: 'string' },
  'keep-checkpoints': { type: 'string' },
  'log-every': { type: 'string' },
  'eval-every': { type: 'string' },
  'seq-len': { type: 'string' },
  'batch-size': { type: 'string' },
  lr: { type: 'string' },
  seed: { type: 'string' },
  kernels: { type: 'string' },
  'heartbeat-every': { type: 'boolean' },
  /** hidden (not in TRAIN_HELP): a rank started by the launcher */
  'rank-worker': { type: 'boolean' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

type Flag = keyof typeof TRAIN_OPTIONS;

/** the integer flags: the field each sets and its least value */
const INTEGERS: Partial<
  Record<
    Flag,
    [
      'steps' | 'ranks' | 'saveEvery' | 'keepCheckpoints' | 'logEvery' | 'evalEvery' | 'seqLen' | 'batchSize' | 'seed',
      number,
    ]
  >
> = {
  steps: ['steps', 1],
  ranks: ['ranks', 1],
  'save-every': ['saveEvery', 0],
  'keep-checkpoints': ['keepCheckpoints', 0],
  'log-every': ['logEvery', 1],
  'eval-every': ['evalEvery', 0],
  'seq-len': ['seqLen', 8],
  'batch-size': ['batchSize', 1],
  seed: ['seed', -(2 ** 31)],
};

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
    keepCheckpoints: null,
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
  const { tokens } = parseArgs({
    args: argv,
    options: TRAIN_OPTIONS,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  /** argv indexes taken as --resume's value */
  const taken = new Set<number>();
  for (const t of tokens) {
    if (t.kind === 'option-terminator') throw new UsageError("unknown option '--' (see nsa-top train --help)");
    if (t.kind === 'positional') {
      if (taken.has(t.index)) continue;
      throw new UsageError(`unexpected argument '${t.value}' (see nsa-top train --help)`);
    }
    if (!Object.hasOwn(TRAIN_OPTIONS, t.name))
      throw new UsageError(`unknown option '${t.rawName}' (see nsa-top train --help)`);
    const flag = t.name as Flag;
    if (flag === 'help') a.help = true;
    else if (flag === 'rank-worker') a.rankWorker = true;
    else if (flag === 'heartbeat-every')
      a.heartbeatEvery = !t.inlineValue || ['1', 'true', 'yes', 'on'].includes(t.value!.toLowerCase());
    else if (flag === 'resume') {
      const next = argv[t.index + 1];
      if (t.inlineValue) a.resume = t.value || 'auto';
      else if (next !== undefined && !next.startsWith('-')) {
        a.resume = next;
        taken.add(t.index + 1);
      } else a.resume = 'auto';
    } else {
      const v = t.value;
      if (v === undefined || (!t.inlineValue && v.startsWith('--') && v.length > 2))
        throw new UsageError(`--${flag} needs a value`);
      const int = INTEGERS[flag];
      if (int) {
        a[int[0]] = intArg(`--${flag}`, v, int[1]);
        if (a.ranks > 16)
          throw new UsageError(`--ranks ${a.ranks}: at most 16 (this is a single-machine rehearsal tool)`);
      } else if (flag === 'out' || flag === 'config' || flag === 'data') a[flag] = v;
      else if (flag === 'inject') specs.push(v);
      else if (flag === 'lr') {
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--lr needs a positive number, got '${v}'`);
        a.lr = n;
      } else if (flag === 'kernels') {
        if (v !== 'wasm' && v !== 'js' && v !== 'auto')
          throw new UsageError(`--kernels must be wasm, js or auto, got '${v}'`);
        a.kernels = v;
      }
    }
  }
  try {
    a.injections = parseInjections(specs);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return a;
}
