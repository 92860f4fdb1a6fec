// Entry of `nsa-top train`: one plain process with --ranks 1, else the launcher; `--rank-worker`
// (hidden) is a rank spawned by the launcher, which receives its RunSpec over the IPC channel.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseTrainArgs, TRAIN_HELP, UsageError } from './args.js';
import { IpcComm, LocalComm, type ToRank } from './comm.js';
import { ConfigError, configToYaml } from './config.js';
import { DataError } from './data.js';
import { installDumpHandler, type DumpHandler } from './dumps.js';
import { runLauncher } from './launcher.js';
import { LockError, lockRunDir } from './lock.js';
import { runRank } from './rank.js';
import { resolveSpec, type RunSpec } from './spec.js';

export interface TrainContext {
  /** argv prefix that re-invokes nsa-top (node + bin/nsa-top.js) */
  selfCommand: string[];
  /** package root: data/ lives there */
  packageRoot: string;
}

/** Errors that are the user's input, not a bug: one line and exit code 2. */
export class TrainInputError extends Error {
  readonly exitCode = 2;
}

export async function runTrain(argv: string[], ctx: TrainContext): Promise<number> {
  // A log reader that went away (a closed pipe, EPIPE; a hung-up terminal, EIO) must not kill training.
  for (const st of [process.stdout, process.stderr])
    st.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE' && e.code !== 'EIO') throw e;
    });
  // First thing: a SIGUSR1 must never kill a starting trainer.
  const worker = argv.includes('--rank-worker');
  const dumps = installDumpHandler(
    worker ? (process.env.NSA_TOP_RUN_DIR ?? null) : null,
    worker ? Number(process.env.RANK ?? 0) : 0,
  );
  try {
    return await runTrainInner(argv, ctx, dumps);
  } finally {
    dumps.uninstall();
  }
}

async function runTrainInner(argv: string[], ctx: TrainContext, dumps: DumpHandler): Promise<number> {
  let args;
  try {
    args = parseTrainArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) throw new TrainInputError(`train: ${err.message}`);
    throw err;
  }
  if (args.help) {
    process.stdout.write(TRAIN_HELP);
    return 0;
  }
  if (args.rankWorker) return runWorker(dumps);

  let spec: RunSpec;
  try {
    spec = await resolveSpec(args, ctx.packageRoot);
    mkdirSync(spec.outDir, { recursive: true });
    lockRunDir(spec.outDir);
    writeFileSync(join(spec.outDir, 'config.yaml'), configToYaml(spec.cfg));
  } catch (err) {
    if (err instanceof ConfigError || err instanceof DataError || err instanceof LockError)
      throw new TrainInputError(`train: ${err.message}`);
    throw err;
  }
  if (spec.world === 1) {
    dumps.setTarget(spec.outDir, 0);
    return await runSingle(spec, dumps);
  }
  dumps.uninstall(); // the launcher answers SIGUSR1 itself (it points at the ranks)
  return await runLauncher(spec, ctx.selfCommand);
}

async function runSingle(spec: RunSpec, dumps: DumpHandler): Promise<number> {
  try {
    return await runRank(spec, new LocalComm(), dumps.act);
  } catch (err) {
    if (err instanceof DataError) throw new TrainInputError(`train: ${err.message}`);
    throw err;
  }
}

async function runWorker(dumps: DumpHandler): Promise<number> {
  if (!process.send) throw new TrainInputError('train: --rank-worker is internal (a rank started by the launcher)');
  const rank = Number(process.env.RANK);
  const world = Number(process.env.WORLD_SIZE);
  const spec = await new Promise<RunSpec>((resolve, reject) => {
    const onMsg = (m: ToRank) => {
      if (m.t === 'spec') {
        process.off('message', onMsg);
        resolve(m.spec as RunSpec);
      }
    };
    process.on('message', onMsg);
    process.once('disconnect', () => reject(new Error('launcher went away before sending the run spec')));
  });
  const comm = new IpcComm(rank, world);
  dumps.setTarget(spec.outDir, rank);
  try {
    const code = await runRank(spec, comm, dumps.act);
    return code;
  } catch (err) {
    process.stderr.write(`[train] rank ${rank} (pid ${process.pid}) failed: ${(err as Error).stack ?? err}\n`);
    comm.close();
    return 1;
  }
}
