// Which run directory a command works on.
import { isAbsolute, join, resolve } from 'node:path';
import type { DirEntry, Host } from '../../remote/host.js';
import { InputError } from '../../errors.js';
import { isRunMarker, logRank, pickLog } from './readers/names.js';
import { RunModel, type RunModelOptions } from './model.js';
import { resolveRunDirs, type RunDirs } from './rundirs.js';

const MAX_DEPTH = 3;
const MAX_DIRS = 2000;

/** newest mtime of the run markers inside a listing, or null when it is not a run dir */
function runActivity(entries: DirEntry[]): number | null {
  let best: number | null = null;
  for (const e of entries) {
    if (!isRunMarker(e.name)) continue;
    if (e.name === 'tb' && !e.isDir) continue;
    if (best === null || e.mtimeMs > best) best = e.mtimeMs;
  }
  return best;
}

/**
 * RUN_DIR given → absolute path (must exist: InputError (exit 2) otherwise, one clear line).
 * Not given → the newest run under <cwd>/artifacts/ (a dir holding heartbeat_rank*.jsonl,
 * training.csv, training_fsdp.csv, heartbeat.jsonl or tb/, searched up to 3 levels deep);
 * none → InputError (exit 2). Works through a Host (remote paths are resolved against `cwd` as given).
 */
export async function resolveRunDir(host: Host, arg: string | undefined, cwd: string): Promise<string> {
  if (arg !== undefined && arg !== '') {
    const abs = isAbsolute(arg) ? resolve(arg) : resolve(cwd, arg);
    let st;
    try {
      st = await host.stat(abs);
    } catch (e) {
      throw new InputError(
        `cannot read run dir ${abs}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
        2,
      );
    }
    if (!st) throw new InputError(`run dir not found: ${abs}`, 2);
    if (!st.isDir) throw new InputError(`not a directory: ${abs}`, 2);
    try {
      await host.list(abs);
    } catch (e) {
      throw new InputError(
        `cannot read run dir ${abs}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
        2,
      );
    }
    return abs;
  }
  const root = join(resolve(cwd), 'artifacts');
  let best: { dir: string; t: number } | null = null;
  let visited = 0;
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (visited++ > MAX_DIRS) return;
    let entries: DirEntry[];
    try {
      entries = await host.list(dir);
    } catch {
      return;
    }
    const t = depth > 0 ? runActivity(entries) : null;
    if (t !== null) {
      if (!best || t > best.t) best = { dir, t };
      return; // a run dir's subdirs (tb/) are not runs of their own
    }
    if (depth >= MAX_DEPTH) return;
    for (const e of entries)
      if (e.isDir && !e.name.startsWith('.') && e.name !== 'env') await walk(join(dir, e.name), depth + 1);
  };
  const rootStat = await host.stat(root).catch(() => null);
  if (!rootStat?.isDir) throw new InputError(`no RUN_DIR given and no ${root} directory to look for runs in`, 2);
  await walk(root, 0);
  if (!best)
    throw new InputError(
      `no run found under ${root} (looked ${MAX_DEPTH} levels deep for heartbeat_rank*.jsonl, training.csv or tb/)`,
      2,
    );
  return (best as { dir: string }).dir;
}

/**
 * A RunModel for a run dir that may be a supervised launcher dir: artifacts are read from its
 * out_dir (run.info `out_dir:`), and the trainer's stdout from the launcher dir's train.log when the
 * two differ (the real trainer's layout, contract §1.21).
 */
/**
 * The run's dirs, resolved once at the edge (launcher dir, out_dir, supervised): what the observation
 * and the audited actions are handed, so nothing below re-reads run.info. Unreadable pointer files:
 * the dir itself, unsupervised.
 */
export async function resolveRunDirsAt(host: Host, dir: string): Promise<RunDirs> {
  let dirs: RunDirs = { runDir: dir, outDir: dir, supervised: false };
  try {
    const d = await resolveRunDirs(host, dir);
    // a pointer not followed (a copy's, a planted one) is said where a bad out_dir is
    const problem = [d.outDirProblem, d.pointerProblem].filter(Boolean).join('; ');
    dirs = {
      runDir: d.runDir,
      outDir: d.outDir,
      supervised: d.supervised,
      ...(problem ? { outDirProblem: problem } : {}),
    };
  } catch {
    /* unreadable pointer files: read the dir itself */
  }
  const outDir = isAbsolute(dirs.outDir) ? dirs.outDir : resolve(dir, dirs.outDir);
  return { ...dirs, outDir };
}

/** The run model of resolved dirs: a supervised run's log lives in its launcher dir. */
export async function openRunModelOf(host: Host, dirs: RunDirs, opts: RunModelOptions = {}): Promise<RunModel> {
  let logPath = opts.logPath;
  if (logPath === undefined && dirs.outDir !== dirs.runDir) {
    const present: { name: string; mtimeMs: number }[] = [];
    for (const e of await host.list(dirs.runDir).catch(() => [] as DirEntry[]))
      if (e.isFile && logRank(e.name) >= 0) present.push(e);
    const pick = pickLog(present);
    if (pick) logPath = join(dirs.runDir, pick.name);
  }
  return new RunModel(host, dirs.outDir, { ...opts, logPath });
}

export async function openRunModel(
  host: Host,
  dir: string,
  opts: RunModelOptions = {},
): Promise<{ model: RunModel; runDir: string; outDir: string; outDirProblem?: string; dirs: RunDirs }> {
  const dirs = await resolveRunDirsAt(host, dir);
  return {
    model: await openRunModelOf(host, dirs, opts),
    runDir: dirs.runDir,
    outDir: dirs.outDir,
    ...(dirs.outDirProblem ? { outDirProblem: dirs.outDirProblem } : {}),
    dirs,
  };
}
