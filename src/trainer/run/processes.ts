// The processes of a run, read through the host: the candidates' part of the process table
// (src/remote/procs.ts) and the CONFIG yaml each candidate names, judged by ranks.ts. A process is
// a rank only with proof from the process itself; this is where that proof is gathered, for the
// cockpit and the commands (findRunProcesses) and again at the moment of a signal (proveRunProcess).
import { hostOf, type Host } from '../../remote/host.js';
import { join } from 'node:path';
import { readCandidateTable, readProc, readProcs, type RawSnapshot } from '../../remote/procs.js';
import { readSupervisorState } from './launchstate.js';
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
 * proof (ranks.ts: rankCommandKind, envTie, and the run's records naming it with a start time that
 * fits, or descent from the run's proven launcher or the supervisor's child); a heartbeat's pid, a
 * path in argv or the environment alone names candidates, never ranks. Candidates without proof
 * are listed in `unproven` with the reason. Costs one command per refresh once the run's processes
 * have been seen (two on the first), plus a read of each CONFIG yaml now and then, and — only while
 * a candidate is tied to the run by its environment alone — a read of supervisor.json.
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
      [...hbPids.map((h) => h.pid), ...(hints.roots ?? []).map((r) => r.pid)],
      (p) => trainerKind(p),
    );
  } catch (e) {
    return { at, launcher: null, ranks: [], unknown: [], error: (e as Error).message };
  }
  if (snap.error && snap.procs.length === 0) return { at, launcher: null, ranks: [], unknown: [], error: snap.error };
  const first = await judge(snap.procs, hints.roots ?? []);
  // a process tied to the run by its environment only: proven only under what nsa-top's supervisor
  // started (read now: it costs a read, and most refreshes do not need it), or the run's launcher
  if (hints.roots !== undefined || !first.unproven?.some((u) => u.envOnly)) return first;
  const roots = await supervisorRoots(host, runDir);
  if (roots.length === 0) return first;
  return judge(snap.procs, roots);

  async function judge(procs0: ProcInfo[], roots: { pid: number; startTime: string }[]): Promise<RunProcesses> {
    const procs = roots.length > 0 ? await withAncestors(host, procs0, hbPids, roots) : procs0;
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
      { runDirs, configOutDirs, roots },
      hbPids,
      hints.gpu ?? null,
      at,
      snap.error,
      hints.firstRecordTs ?? null,
    );
  }
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
  let cache = configCache.get(hostOf(host));
  if (!cache) configCache.set(hostOf(host), (cache = new Map()));
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

/** The process nsa-top's supervisor started for this run, while the supervisor.json says so. */
async function supervisorRoots(host: Host, runDir: string): Promise<{ pid: number; startTime: string }[]> {
  const st = await readSupervisorState(host, runDir).catch(() => null);
  const c = st?.child;
  if (!c || !Number.isInteger(c.pid) || c.pid <= 1 || !/^\d+$/.test(String(c.startTime))) return [];
  return [{ pid: c.pid, startTime: String(c.startTime) }];
}

/**
 * The table 'run' mode reads holds trainer-looking processes only: a shell or a wrapper between the
 * supervisor's child and a rank is missing, and descent could not be traced through it. The missing
 * parents of rank candidates no record names are read (one command per level, 8 levels at most).
 */
async function withAncestors(
  host: Host,
  procs: ProcInfo[],
  hbPids: HeartbeatPidHint[],
  roots: { pid: number }[],
): Promise<ProcInfo[]> {
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const rootPids = new Set(roots.map((r) => r.pid));
  const named = new Set(hbPids.map((h) => h.pid));
  let frontier = procs.filter((p) => rankCommandKind(p) !== null && !named.has(p.pid));
  for (let level = 0; level < 8 && frontier.length > 0; level++) {
    const missing = [...new Set(frontier.filter((p) => !rootPids.has(p.pid)).map((p) => p.ppid))].filter(
      (pid) => pid > 1 && !byPid.has(pid),
    );
    if (missing.length === 0) break;
    const more = await readProcs(host, missing).catch(() => [] as ProcInfo[]);
    for (const p of more) byPid.set(p.pid, p);
    frontier = more;
  }
  return [...byPid.values()];
}

/** bytes of each heartbeat file's tail read for the pids it names */
const RECORD_TAIL = 512 * 1024;

/**
 * What the run's own records say about its processes, for findRunProcesses: for each
 * heartbeat_rank{R}.jsonl, the newest pid it names, the time of the newest record naming that pid
 * (lastTs) and of the newest `boot` record naming it (bootTs: a rank ≥ 1 of the real trainer writes
 * nothing else), from the file's last 512 KiB; and the run's first record when every file was read
 * whole. The same evidence for the CLI, the watchdog and the check right before a signal.
 */
export async function runRecordHints(
  host: Host,
  outDir: string,
): Promise<Pick<FindRunHints, 'heartbeatPids' | 'firstRecordTs'>> {
  const heartbeatPids: HeartbeatPidHint[] = [];
  let first: number | null = null;
  let whole = true;
  let entries: Awaited<ReturnType<Host['list']>>;
  try {
    entries = await host.list(outDir);
  } catch {
    return { heartbeatPids, firstRecordTs: null };
  }
  for (const e of entries) {
    const m = /^heartbeat_rank(\d+)\.jsonl$/.exec(e.name);
    if (!m || !e.isFile) continue;
    const from = Math.max(0, e.size - RECORD_TAIL);
    let text: string;
    try {
      text = (await host.readRange(join(outDir, e.name), from, e.size)).toString('utf8');
    } catch {
      whole = false;
      continue;
    }
    if (from > 0) whole = false;
    const lines = text.split('\n');
    if (from > 0) lines.shift(); // a cut line
    let pid: number | null = null;
    let lastTs: number | null = null;
    let bootTs: number | null = null;
    for (let i = lines.length - 1; i >= 0; i--) {
      const line = lines[i]!.trim();
      if (!line.startsWith('{')) continue;
      let j: { pid?: unknown; ts?: unknown; msg?: unknown };
      try {
        j = JSON.parse(line) as typeof j;
      } catch {
        continue;
      }
      const ts = typeof j.ts === 'number' && Number.isFinite(j.ts) ? j.ts * 1000 : null;
      if (from === 0 && ts !== null && (first === null || ts < first)) first = ts;
      if (typeof j.pid !== 'number' || !Number.isInteger(j.pid)) continue;
      if (pid === null) pid = j.pid;
      if (j.pid !== pid) {
        if (from === 0) continue; // older pids: only the first record's time is still wanted
        break;
      }
      if (lastTs === null && ts !== null) lastTs = ts;
      if (bootTs === null && j.msg === 'boot' && ts !== null) {
        bootTs = ts;
        if (from > 0) break;
      }
    }
    if (pid !== null) heartbeatPids.push({ rank: Number(m[1]), pid, lastTs, bootTs });
  }
  return { heartbeatPids, firstRecordTs: whole ? first : null };
}

/**
 * Proof, at the moment of a signal, that a process is a rank (or, with `launcherToo`, the
 * launcher) of the run in runDir: the same proof findRunProcesses asks for, on a fresh read of the
 * process table, with the run's own records (runRecordHints, read here unless given) and what
 * nsa-top's supervisor started. null when proven, else why not.
 */
export async function proveRunProcess(
  host: Host,
  runDir: string,
  target: { pid: number; startTime: string },
  opts: { launcherToo?: boolean; hints?: Pick<FindRunHints, 'heartbeatPids' | 'firstRecordTs'> } = {},
): Promise<string | null> {
  const rp = await findRunProcesses(host, runDir, opts.hints ?? (await runRecordHints(host, runDir)));
  const v = runVerdict(rp, target, opts.launcherToo ?? false);
  if (v !== undefined) return v;
  return whyNotRunProcess(await readProc(host, target.pid).catch(() => null), target);
}
