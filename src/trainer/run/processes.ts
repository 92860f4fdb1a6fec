// The processes of a run, read through the host: the candidates' part of the process table
// (src/remote/procs.ts) and the CONFIG yaml each candidate names, judged by ranks.ts. A process is
// a rank only with proof from the process itself; this is where that proof is gathered, for the
// cockpit and the commands (findRunProcesses) and again at the moment of a signal (proveRunProcess).
import type { Host } from '../../remote/host.js';
import { readCandidateTable, readProc, type RawSnapshot } from '../../remote/procs.js';
import { readTextFile } from '../../remote/textfile.js';
import type { ProcInfo, RunProcesses } from '../../remote/types.js';
import {
  configPathOf,
  configReadRefusal,
  envJsonConfig,
  isLauncher,
  matchRun,
  normPath,
  rankCommandKind,
  runVerdict,
  trainerKind,
  whyNotRunProcess,
  type FindRunHints,
  type HeartbeatPidHint,
} from './ranks.js';

/**
 * The processes of a run: launcher (torchrun / python -m torch.distributed.run / `nsa-top train`)
 * and its rank processes, with GPU memory per pid from compute-apps. A process is a rank only with
 * proof from the process itself (rankCommandKind, envTie, and a start time that fits the run's
 * records); a heartbeat's pid or a path in argv names candidates, never ranks. Candidates without
 * proof are listed in `unproven` with the reason. Costs one command per refresh once the run's
 * processes have been seen (two on the first), plus a read of each CONFIG yaml now and then.
 */
export async function findRunProcesses(host: Host, runDir: string, hints: FindRunHints): Promise<RunProcesses> {
  const at = host.now();
  const hbPids = hints.heartbeatPids.filter((h) => Number.isInteger(h.pid) && h.pid > 1);
  let snap: RawSnapshot;
  try {
    // environ + cwd for trainer-looking processes not looked at yet
    snap = await readCandidateTable(
      host,
      runDir,
      hbPids.map((h) => h.pid),
      (p) => trainerKind(p),
    );
  } catch (e) {
    return { at, launcher: null, ranks: [], unknown: [], error: (e as Error).message };
  }
  if (snap.error && snap.procs.length === 0) return { at, launcher: null, ranks: [], unknown: [], error: snap.error };
  const procs = snap.procs;
  // the run dir as given (when absolute) and as the host resolves it (symlinks, relative paths)
  const runDirs = new Set<string>();
  if (runDir.startsWith('/')) runDirs.add(normPath(runDir));
  if (snap.runDirPhysical) runDirs.add(normPath(snap.runDirPhysical));
  const named = new Set(hbPids.map((h) => h.pid));
  const configOutDirs = await configOutDirsFor(
    host,
    procs.filter((p) => rankCommandKind(p) !== null || isLauncher(p)),
    envJsonConfig(snap.envJson),
    named,
    runDirs,
  );
  return matchRun(
    procs,
    { runDirs, configOutDirs },
    hbPids,
    hints.gpu ?? null,
    at,
    snap.error,
    hints.firstRecordTs ?? null,
  );
}

// CONFIG yaml → train.out_dir, per process (pid + start time + path): a trainer reads its config
// once, at boot, so one read per new trainer process is enough (over SSH each read is a command).
const configCache = new WeakMap<Host, Map<string, { outDir: string | null; error: string | null }>>();
/**
 * The out_dir of each candidate's CONFIG. Only candidates that may be this run's are read (see
 * configReadRefusal). Other trainers on the box (other runs) cost nothing.
 */
async function configOutDirsFor(
  host: Host,
  cands: ProcInfo[],
  runConfig: string | null,
  named: Set<number>,
  runDirs: Set<string>,
): Promise<Map<string, { outDir: string | null; error: string | null }>> {
  let cache = configCache.get(host);
  if (!cache) configCache.set(host, (cache = new Map()));
  const out = new Map<string, { outDir: string | null; error: string | null }>();
  for (const p of cands) {
    const path = configPathOf(p);
    if (!path || out.has(path)) continue;
    const key = `${p.pid}:${p.startTime}:${path}`;
    let v = cache.get(key);
    if (!v) {
      const refusal = configReadRefusal(p, path, runConfig, named, runDirs);
      if (refusal) {
        out.set(path, { outDir: null, error: refusal });
        continue;
      }
      v = await readYamlOutDir(host, path);
      if (cache.size > 256) cache.clear();
      cache.set(key, v);
    }
    out.set(path, v);
  }
  return out;
}

async function readYamlOutDir(host: Host, path: string): Promise<{ outDir: string | null; error: string | null }> {
  const { text, error } = await readTextFile(host, path);
  if (error !== undefined) return { outDir: null, error };
  // the readers' parser (depth-bounded, no warnings on stderr), loaded only when a CONFIG is to be read.
  // Not `import('yaml')` here: yaml is bundled as CommonJS, and a dynamic import of its chunk has no
  // named exports (parseDocument was undefined in the built CLI).
  const { parseTrainerConfig } = await import('./readers/config.js');
  const r = parseTrainerConfig(text);
  if (!r.ok) return { outDir: null, error: `${path}: ${r.error}` };
  const od = r.value.train?.out_dir;
  if (typeof od === 'string' && od.length > 0) return { outDir: od, error: null };
  return { outDir: null, error: `${path}: no train.out_dir` };
}

/**
 * Proof, at the moment of a signal, that a process is a rank (or, with `launcherToo`, the
 * launcher) of the run in runDir: the same proof findRunProcesses asks for, on a fresh read of the
 * process table. null when proven, else why not.
 */
export async function proveRunProcess(
  host: Host,
  runDir: string,
  target: { pid: number; startTime: string },
  opts: { launcherToo?: boolean; hints?: HeartbeatPidHint[] } = {},
): Promise<string | null> {
  const rp = await findRunProcesses(host, runDir, { heartbeatPids: opts.hints ?? [] });
  const v = runVerdict(rp, target, opts.launcherToo ?? false);
  if (v !== undefined) return v;
  return whyNotRunProcess(await readProc(host, target.pid).catch(() => null), target);
}
