// Where a run's pieces live. A supervised run has a launcher dir (artifacts/train_runs/<profile>_<ts>/
// with run.info, train.log, .nsa-top/supervisor.json) and an out_dir where the trainer writes its
// artifacts. For nsa-top's reference trainer they are the same directory; for the real trainer the
// out_dir is the config's train.out_dir (contract §1.2, §1.21). Either may be handed to us: the
// launcher dir names its out_dir in run.info (`out_dir: ...`), and an out_dir that differs from its
// launcher dir carries a pointer in .nsa-top/run.json.
import { isAbsolute, join, normalize, resolve } from 'node:path';
import type { Host } from '../../remote/host.js';
import { NSA_DIR, runRootProblem } from '../control/ownfiles.js';
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
