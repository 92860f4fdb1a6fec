// Where a run's pieces live. A supervised run has a launcher dir (artifacts/train_runs/<profile>_<ts>/
// with run.info, train.log, .nsa-top/supervisor.json) and an out_dir where the trainer writes its
// artifacts. For nsa-top's reference trainer they are the same directory; for the real trainer the
// out_dir is the config's train.out_dir (contract §1.2, §1.21). Either may be handed to us: the
// launcher dir names its out_dir in run.info (`out_dir: ...`), and an out_dir that differs from its
// launcher dir carries a pointer in .nsa-top/run.json.
import { isAbsolute, join, normalize, resolve } from 'node:path';
import { hostOf, type Host } from '../../remote/host.js';
import { classify, isRunMarker, LOG_NAMES, NSA_DIR } from './readers/names.js';
import { forThisDir, parseRunInfo, readRunPointer } from './pointers.js';

export interface RunDirs {
  /** the launcher dir (run.info, train.log, supervisor.json); equals `outDir` when unsupervised */
  runDir: string;
  /** where the trainer writes heartbeats, checkpoints, .HALT, stack dumps */
  outDir: string;
  supervised: boolean;
  /**
   * why run.info's `out_dir:` was not taken (then `outDir` is the launcher dir itself): it is not
   * a directory, or it holds no run and no `.nsa-top/run.json` naming this launcher dir
   */
  outDirProblem?: string;
  /**
   * why the out_dir's `.nsa-top/run.json` was not followed (a copy's stale pointer, a file nsa-top
   * did not write: see pointers.ts); the dir is then read as a run of its own
   */
  pointerProblem?: string;
}

export { NSA_DIR };

export { parseRunInfo };

/** names that show a directory holds a run (any one is enough) */
export function holdsRun(names: string[]): boolean {
  for (const n of names) {
    if (isRunMarker(n) || n === 'env.json' || n === 'run.info' || n === 'config.yaml' || LOG_NAMES.includes(n))
      return true;
    const k = classify(n).kind;
    if (k === 'checkpoint' || k === 'metrics-json' || k === 'stackdump') return true;
  }
  return false;
}

/**
 * A `.nsa-top/` alone is weak evidence (an old nsa-top may have made one anywhere, e.g. at `/`):
 * it counts only with launch's or the supervisor's own files in it.
 */
const NSA_RUN_FILES = new Set(['run.json', 'launch.json', 'supervisor.json']);

const validRoots = new WeakMap<Host, Set<string>>();

/**
 * Why `dir` cannot take nsa-top's files, or null when it can: it must be an absolute path to a
 * directory that holds a run. Checked once per host and directory (a run does not stop being one).
 */
export async function runRootProblem(host: Host, dir: string): Promise<string | null> {
  if (!isAbsolute(dir)) return `${dir} is not an absolute path`;
  const key = normalize(dir);
  if (validRoots.get(hostOf(host))?.has(key)) return null;
  let st;
  try {
    st = await host.stat(key);
  } catch (e) {
    return `${key}: cannot stat (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
  }
  if (!st) return `${key} does not exist`;
  if (!st.isDir) return `${key} is not a directory`;
  let names: string[];
  try {
    names = (await host.list(key)).map((e) => e.name);
  } catch (e) {
    return `${key}: cannot list (${(e as Error).message})`;
  }
  let ok = holdsRun(names);
  if (!ok && names.includes(NSA_DIR))
    ok = (await host.list(join(key, NSA_DIR)).catch(() => [])).some((e) => e.isFile && NSA_RUN_FILES.has(e.name));
  if (!ok)
    return `${key} holds no run (no heartbeat, training.csv, env.json, checkpoint, run.info, train.log or launch's ${NSA_DIR}/run.json)`;
  let set = validRoots.get(hostOf(host));
  if (!set) validRoots.set(hostOf(host), (set = new Set()));
  set.add(key);
  return null;
}

async function readText(host: Host, path: string, max = 256 * 1024): Promise<string | null> {
  try {
    return (await host.readFile(path, max)).toString('utf8');
  } catch {
    return null;
  }
}

export async function resolveRunDirs(host: Host, dir: string): Promise<RunDirs> {
  const info = await readText(host, join(dir, 'run.info'));
  if (info !== null) {
    const kv = parseRunInfo(info);
    // a copied launcher dir keeps the original's run.info (and its supervisor's files): its out_dir
    // and supervisor are the original's, never this copy's
    // (nsa-top writes run_dir absolute; the real launcher's may be relative to its repo: not judged)
    if (kv.run_dir && isAbsolute(kv.run_dir.trim())) {
      const copy = await forThisDir(host, dir, 'run.info', kv.run_dir.trim(), null, 'names another run');
      if (copy) return { runDir: dir, outDir: dir, supervised: false, pointerProblem: copy };
    }
    const supervised =
      (await host.stat(join(dir, NSA_DIR, 'supervisor.json')).catch(() => null)) !== null || 'profile' in kv;
    const declared = kv.out_dir?.trim() ?? '';
    if (declared.length === 0) return { runDir: dir, outDir: dir, supervised };
    // relative to the launcher dir, never to whatever the caller's cwd is
    const out = normalize(isAbsolute(declared) ? declared : resolve(dir, declared));
    if (out === normalize(dir)) return { runDir: dir, outDir: dir, supervised };
    const why = await outDirProblem(host, dir, out);
    if (why)
      return {
        runDir: dir,
        outDir: dir,
        supervised,
        outDirProblem: `run.info's out_dir ${declared}: ${why}; using ${dir} itself`,
      };
    return { runDir: dir, outDir: out, supervised };
  }
  const ptr = await readRunPointer(host, dir);
  if (ptr.runDir) return { runDir: ptr.runDir, outDir: dir, supervised: true };
  if (ptr.problem) return { runDir: dir, outDir: dir, supervised: false, pointerProblem: ptr.problem };
  return { runDir: dir, outDir: dir, supervised: false };
}

/**
 * Why `out` cannot be this launcher dir's out_dir, or null: it must be a real directory that holds
 * a run, or one nsa-top launch prepared for this launcher dir (its .nsa-top/run.json names it).
 */
async function outDirProblem(host: Host, dir: string, out: string): Promise<string | null> {
  const why = await runRootProblem(host, out);
  if (why === null) return null;
  const ptr = await readText(host, join(out, NSA_DIR, 'run.json'), 64 * 1024);
  if (ptr !== null) {
    try {
      const j = JSON.parse(ptr) as { runDir?: unknown };
      if (typeof j.runDir === 'string' && normalize(j.runDir) === normalize(dir)) return null;
    } catch {
      /* not ours */
    }
  }
  return why;
}

/** A run as callers hand it down: resolved once at the edge (RunDirs), or a dir still to resolve. */
export type RunRef = string | RunDirs;

/** The run's dirs: the value handed down as it is, a dir resolved (pointer files read) once here. */
export async function runDirsOf(host: Host, ref: RunRef): Promise<RunDirs> {
  return typeof ref === 'string' ? resolveRunDirs(host, ref) : ref;
}
