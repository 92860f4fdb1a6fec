// Which processes of a machine are the ranks and the launcher of THIS run: pure functions over the
// process table that src/remote/procs.ts reads (ProcInfo). A process is a rank only with proof:
// a trainer command nsa-top knows (rankCommandKind), an environment that ties it to the run dir
// (envTie: NSA_TOP_RUN_DIR, or a CONFIG whose train.out_dir is the run dir), and either the run's
// own records naming it (a boot record or heartbeat with its pid, whose time its start fits:
// recordWhy, startTimeWhy) or descent from the run's proven launcher or from the process nsa-top's
// supervisor started (MatchCtx.roots). The environment alone is a hint (anyone can start a trainer
// with the run's NSA_TOP_RUN_DIR and RANK); a path in argv names candidates, never ranks. No I/O
// here (src/checks imports isToolProcess).
import type { GpuSample, ProcInfo, RankProc, RunProcesses, UnprovenProc } from '../../remote/types.js';

function base(s: string | undefined): string {
  if (!s) return '';
  const i = s.lastIndexOf('/');
  return i >= 0 ? s.slice(i + 1) : s;
}

function isPython(argv0: string | undefined): boolean {
  return /^python[0-9.]*$/.test(base(argv0)) || /^pt_main_thread$/.test(base(argv0));
}

/** torchrun, python -m torch.distributed.run/launch, or `nsa-top train` without a RANK. */
export function isLauncher(p: ProcInfo): boolean {
  const a = p.argv;
  if (a.length === 0) return false;
  if (base(a[0]) === 'torchrun') return true;
  if (isPython(a[0])) {
    if (base(a[1]) === 'torchrun') return true;
    const m = a.indexOf('-m');
    if (m >= 0 && /^torch\.distributed\.(run|launch)$/.test(a[m + 1] ?? '')) return true;
  }
  const nt = nsaTopArgIndex(a);
  if (nt >= 0 && a[nt + 1] === 'train' && p.env.RANK === undefined && !hasRankArg(a) && !isSingleReference(a, nt))
    return true;
  return false;
}

/** `nsa-top train` with one rank (no --ranks, or --ranks 1): it trains in its own process. */
function isSingleReference(a: string[], nt: number): boolean {
  if (a.includes('--rank-worker')) return false;
  const r = argValue(a.slice(nt + 2), ['--ranks']);
  return r === undefined || r.trim() === '1';
}

const NSA_TOP_SCRIPT = /^nsa-top(\.js|\.mjs|\.cjs)?$/;
/** node options that take the next argument as their value (`--import X`, `-r X`, …) */
const NODE_OPTION_WITH_VALUE =
  /^(--import|--require|-r|--loader|--experimental-loader|--env-file|--conditions|-C|--inspect-port|--title|--stack-size|--max-old-space-size)$/;

/** Index of the script a node command line runs, past node's own options (`node --import X a.js`). */
export function nodeScriptIndex(a: string[]): number {
  let i = 1;
  while (i < a.length && a[i]!.startsWith('-')) i += NODE_OPTION_WITH_VALUE.test(a[i]!) ? 2 : 1;
  return i;
}

/** Where `nsa-top` stands in argv: the installed shim itself, or the script node runs (whatever
 * options node was given first — trainer ranks are started with `--import=…`). -1: not nsa-top. */
function nsaTopArgIndex(a: string[]): number {
  if (a.length === 0) return -1;
  if (NSA_TOP_SCRIPT.test(base(a[0]))) return 0;
  if (!/^node(js)?$/.test(base(a[0]))) return -1;
  const i = nodeScriptIndex(a);
  return i < a.length && NSA_TOP_SCRIPT.test(base(a[i])) ? i : -1;
}

function hasRankArg(a: string[]): boolean {
  return a.some((x) => /^--(rank|local[-_]rank)(=|$)/.test(x));
}

/** The script (or -m module) a python command line runs. */
function pythonScript(a: string[]): string | null {
  for (let i = 1; i < a.length; i++) {
    const x = a[i]!;
    if (x === '-m' || x === '-c') return a[i + 1] ?? null;
    if (x.startsWith('-')) continue;
    return x;
  }
  return null;
}

/**
 * Processes that name a run without training it: nsa-top's own subcommands other than `train`
 * (cockpit, supervise, watchdog…), and python tools that watch a run (scripts/_watchdog.py,
 * tensorboard, monitors, plots).
 */
export function isToolProcess(p: ProcInfo): boolean {
  const a = p.argv;
  const nt = nsaTopArgIndex(a);
  if (nt >= 0) return a[nt + 1] !== 'train';
  if (a.length && isPython(a[0]) && p.env.RANK === undefined) {
    const script = pythonScript(a);
    return script !== null && /watchdog|monitor|tensorboard|plot|dashboard|report/i.test(base(script));
  }
  return false;
}

export function trainerKind(p: ProcInfo): boolean {
  const a = p.argv;
  return a.length > 0 && (isPython(a[0]) || base(a[0]) === 'torchrun' || nsaTopArgIndex(a) >= 0) && !isToolProcess(p);
}

function argValue(a: string[], names: string[]): string | undefined {
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    for (const n of names) {
      if (x === n && i + 1 < a.length) return a[i + 1];
      if (x.startsWith(`${n}=`)) return x.slice(n.length + 1);
    }
  }
  return undefined;
}

function intOrNull(s: string | undefined): number | null {
  if (s === undefined || !/^\d+$/.test(s.trim())) return null;
  return Number(s.trim());
}

export function normPath(p: string): string {
  const parts: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return `/${parts.join('/')}`;
}

export function resolveAgainst(p: string, cwd: string | null | undefined): string | null {
  if (p.startsWith('/')) return normPath(p);
  if (!cwd) return null;
  return normPath(`${cwd}/${p}`);
}

export interface MatchCtx {
  runDirs: Set<string>;
  /** processes nsa-top itself started for this run and has verified (pid + start time): the
   * supervisor's child. Their descendants are the run's even before any record names them. */
  roots?: { pid: number; startTime: string }[];
  /** train.out_dir of each CONFIG yaml a candidate names (absolute yaml path → out_dir as written,
   * or an error); filled by findRunProcesses, which reads the yaml files through the host */
  configOutDirs?: Map<string, { outDir: string | null; error: string | null }>;
}

/** How long a trainer may take from its exec to its first heartbeat record (imports, model, data). */
export const LAUNCH_WINDOW_MS = 15 * 60_000;
/** slack between /proc's start time (10 ms ticks from the boot time) and a record's time.time() */
const CLOCK_SLACK_MS = 2000;

/**
 * The rank kinds nsa-top knows: nsa-vibe's scripts/train_showcase.py (or its FSDP variant) under
 * python, which is also what torchrun's workers run, and nsa-top's own reference ranks
 * (`nsa-top train` with a RANK). Launchers (torchrun, `nsa-top train` without a RANK) are not ranks.
 */
export function rankCommandKind(p: Pick<ProcInfo, 'argv' | 'env'>): 'nsa-vibe' | 'reference' | null {
  const a = p.argv;
  if (a.length === 0) return null;
  if (isPython(a[0])) {
    const script = pythonScript(a);
    if (script === null || a[a.indexOf(script) - 1] === '-c') return null;
    if (/^train_showcase(_fsdp)?\.py$/.test(base(script)) || /(^|\.)train_showcase(_fsdp)?$/.test(script))
      return 'nsa-vibe';
    return null;
  }
  const nt = nsaTopArgIndex(a);
  if (nt >= 0 && a[nt + 1] === 'train' && (p.env.RANK !== undefined || hasRankArg(a) || isSingleReference(a, nt)))
    return 'reference';
  return null;
}

/**
 * What in the process's own environment ties it to this run: NSA_TOP_RUN_DIR naming the run dir,
 * or CONFIG naming a yaml whose train.out_dir (relative to the process's cwd) is the run dir.
 * A path in argv is not evidence (an eval script or a `tail` names the run dir as well).
 */
export function envTie(p: ProcInfo, ctx: MatchCtx): { ok: true; how: string } | { ok: false; why: string } {
  const d = p.env.NSA_TOP_RUN_DIR;
  if (d) {
    const r = resolveAgainst(d, p.cwd);
    if (r && ctx.runDirs.has(r)) return { ok: true, how: 'NSA_TOP_RUN_DIR' };
    return { ok: false, why: `its NSA_TOP_RUN_DIR names ${r ?? d}, another run` };
  }
  // nsa-top's own single-process trainer started by hand: its --out is, by definition, its run dir
  const nt = nsaTopArgIndex(p.argv);
  if (nt >= 0 && p.argv[nt + 1] === 'train' && p.env.RANK === undefined && isSingleReference(p.argv, nt)) {
    const out = argValue(p.argv.slice(nt + 2), ['--out', '--out-dir']);
    const r = out ? resolveAgainst(out, p.cwd) : null;
    if (r && ctx.runDirs.has(r)) return { ok: true, how: 'nsa-top train --out' };
  }
  if (p.env.CONFIG) {
    const cfg = resolveAgainst(p.env.CONFIG, p.cwd);
    if (!cfg) return { ok: false, why: `its CONFIG ${p.env.CONFIG} is relative and its cwd is unknown` };
    const od = ctx.configOutDirs?.get(cfg);
    if (!od) return { ok: false, why: `its CONFIG ${cfg} was not read` };
    if (!od.outDir) return { ok: false, why: `its CONFIG cannot tell its out_dir (${od.error ?? 'no train.out_dir'})` };
    const r = resolveAgainst(od.outDir, p.cwd);
    if (r && ctx.runDirs.has(r)) return { ok: true, how: 'CONFIG' };
    return { ok: false, why: `its CONFIG ${cfg} writes to ${r ?? od.outDir}, not this run` };
  }
  if (p.cwd === null || p.cwd === undefined)
    return { ok: false, why: 'its environment could not be read (another user, or it is exiting)' };
  return { ok: false, why: 'its environment names neither NSA_TOP_RUN_DIR nor a CONFIG whose out_dir is this run' };
}

export interface HeartbeatPidHint {
  rank: number;
  pid: number;
  /** ms epoch of the latest heartbeat record written by this pid: a process started after it is a recycled pid */
  lastTs?: number | null;
  /** ms epoch of this rank's latest `boot` record, when that record names this pid */
  bootTs?: number | null;
}

export interface FindRunHints {
  heartbeatPids: HeartbeatPidHint[];
  gpu?: GpuSample | null;
  /** ms epoch of the run's first record, when the whole history has been read */
  firstRecordTs?: number | null;
  /** what nsa-top's supervisor started for this run; findRunProcesses reads supervisor.json when absent */
  roots?: { pid: number; startTime: string }[];
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Whether the process's start time fits the run's records; a reason when it does not. */
function startTimeWhy(p: ProcInfo, hint: HeartbeatPidHint | undefined, firstRecordTs: number | null): string | null {
  const s = p.startedAtMs;
  if (s === null || s === undefined) return null;
  // a process always starts before the records it writes: a start after a record naming its pid,
  // by more than the start time's own error, is another process on a recycled pid
  const slack = p.startedAtSlackMs ?? CLOCK_SLACK_MS;
  if (hint?.bootTs != null) {
    if (s > hint.bootTs + slack)
      return `it started at ${iso(s)}, after the boot record (${iso(hint.bootTs)}) that names pid ${p.pid}: the pid was recycled`;
    if (s < hint.bootTs - LAUNCH_WINDOW_MS)
      return `it started at ${iso(s)}, long before the boot record (${iso(hint.bootTs)}) that names pid ${p.pid}: another process with the same pid`;
  } else if (hint?.lastTs != null && s > hint.lastTs + slack) {
    return `it started at ${iso(s)}, after the last heartbeat (${iso(hint.lastTs)}) that names pid ${p.pid}: the pid was recycled`;
  }
  // (a process the heartbeats name is judged by its own records above: a rotated or truncated
  // heartbeat file moves the run's first record, not the process's boot)
  if (!hint && firstRecordTs != null && s < firstRecordTs - LAUNCH_WINDOW_MS)
    return `it started at ${iso(s)}, long before the run's first record (${iso(firstRecordTs)})`;
  return null;
}

/**
 * Whether the run's own records name the process: a heartbeat or boot record with its pid whose
 * time the process's start fits (startTimeWhy judged the bounds). null when they do, else why not.
 * A process that started before a record naming its pid held that pid when the record was written.
 */
function recordWhy(p: ProcInfo, hint: HeartbeatPidHint | undefined): string | null {
  if (!hint) return `no record of the run names pid ${p.pid} (no boot record or heartbeat with its pid)`;
  if (p.startedAtMs === null || p.startedAtMs === undefined)
    return `its start time is unknown, so the record naming pid ${p.pid} cannot be tied to it`;
  if (hint.bootTs == null && hint.lastTs == null) return `the record naming pid ${p.pid} has no time`;
  return null;
}

export function describe(p: ProcInfo): string {
  const cmd = p.argv.length > 0 ? p.argv.join(' ') : p.comm ? `[${p.comm}]` : '?';
  return cmd.length > 120 ? `${cmd.slice(0, 119)}…` : cmd;
}

/** CONFIG as the run's env.json records it (its one line as the process-table reader returns it). */
export function envJsonConfig(line: string | null): string | null {
  if (!line) return null;
  try {
    const c = (JSON.parse(line) as { env?: Record<string, unknown> })?.env?.CONFIG;
    return typeof c === 'string' && c ? c : null;
  } catch {
    return null;
  }
}

/**
 * Whether the CONFIG yaml `path` of candidate `p` is worth reading: only candidates that may be
 * this run's are read — those a heartbeat names, and those whose CONFIG is the one the run's
 * env.json records (resolved against the candidate's cwd), or, while the run has no env.json yet,
 * those whose cwd holds the run dir. Null: read it; else why it is not read.
 */
export function configReadRefusal(
  p: ProcInfo,
  path: string,
  runConfig: string | null,
  named: Set<number>,
  runDirs: Set<string>,
): string | null {
  if (named.has(p.pid)) return null;
  if (runConfig !== null && resolveAgainst(runConfig, p.cwd) !== path)
    return `not the CONFIG the run's env.json records (${runConfig})`;
  // no env.json yet (the first seconds of a run): only a trainer whose cwd holds the run dir
  if (runConfig === null && !(p.cwd && [...runDirs].some((d) => d.startsWith(`${p.cwd}/`))))
    return 'the run has no env.json yet to compare it with';
  return null;
}

/** A trainer's CONFIG as an absolute path (relative ones against its cwd), or null. */
export function configPathOf(p: ProcInfo): string | null {
  return p.env.CONFIG ? resolveAgainst(p.env.CONFIG, p.cwd) : null;
}

/** Pure: given a process table, which processes are this run's. Exported for tests. */
export function matchRun(
  procs: ProcInfo[],
  ctx: MatchCtx,
  hbPids: HeartbeatPidHint[],
  gpu: GpuSample | null,
  at: number,
  error?: string,
  firstRecordTs: number | null = null,
): RunProcesses {
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const children = new Map<number, ProcInfo[]>();
  for (const p of procs) {
    const l = children.get(p.ppid) ?? [];
    l.push(p);
    children.set(p.ppid, l);
  }
  const hintByPid = new Map<number, HeartbeatPidHint>();
  for (const h of hbPids) if (!hintByPid.has(h.pid)) hintByPid.set(h.pid, h);
  // a heartbeat written inside a container names its pid there: the process whose NSpid ends in it
  const byInnerPid = new Map<number, ProcInfo>();
  for (const p of procs) if (p.nsPid && p.nsPid.length > 1) byInnerPid.set(p.nsPid[p.nsPid.length - 1]!, p);

  // the record that names a process: its own pid, or (a heartbeat written inside a container) the
  // last pid of its NSpid chain
  const hintOf = (p: ProcInfo): HeartbeatPidHint | undefined =>
    hintByPid.get(p.pid) ?? (p.nsPid && p.nsPid.length > 1 ? hintByPid.get(p.nsPid[p.nsPid.length - 1]!) : undefined);

  const proven = new Set<number>();
  const hbRank = new Map<number, number>();
  const whyNot = new Map<number, string>();
  /** tied to the run by command and environment, refused by their start time: always listed */
  const timeRefused = new Set<number>();
  /** tied to the run by command and environment only (no record names them): a hint, not proof —
   * proven below only as a descendant of the run's proven launcher or of what nsa-top started */
  const envOnly = new Set<number>();
  for (const p of procs) {
    if (isToolProcess(p)) continue;
    const kind = rankCommandKind(p);
    if (!kind) continue;
    const tie = envTie(p, ctx);
    if (!tie.ok) {
      whyNot.set(p.pid, tie.why);
      continue;
    }
    const hint = hintOf(p);
    const tw = startTimeWhy(p, hint, firstRecordTs);
    if (tw) {
      whyNot.set(p.pid, tw);
      timeRefused.add(p.pid);
      continue;
    }
    const rw = recordWhy(p, hint);
    if (rw) {
      whyNot.set(p.pid, rw);
      envOnly.add(p.pid);
      continue;
    }
    proven.add(p.pid);
  }
  // zombies have no command line left: a rank that died unreaped stays a rank when its environ
  // (remembered from while it lived) ties it to the run
  // `nsa-top train` without --ranks looks like a single-process trainer; with rank children it is
  // their launcher
  const demoted = new Set<number>();
  for (const pid of [...proven, ...envOnly]) {
    const p = byPid.get(pid)!;
    if (rankCommandKind(p) !== 'reference' || p.env.RANK !== undefined) continue;
    // (a trainer's own workers inherit its environment: a child with a RANK the parent lacks is a rank)
    if (
      (children.get(pid) ?? []).some(
        (c) => c.argv.includes('--rank-worker') || hasRankArg(c.argv) || c.env.RANK !== undefined,
      )
    )
      demoted.add(pid);
  }
  for (const pid of demoted) {
    proven.delete(pid);
    envOnly.delete(pid);
  }
  const launcherLike = (p: ProcInfo) => isLauncher(p) || demoted.has(p.pid);
  for (const p of procs) {
    if (proven.has(p.pid) || !(p.state === 'Z' && p.argv.length === 0)) continue;
    if (!p.env.NSA_TOP_RUN_DIR && !p.env.CONFIG) continue;
    if (envTie(p, ctx).ok && !startTimeWhy(p, hintByPid.get(p.pid), firstRecordTs)) proven.add(p.pid);
  }
  // what the run's records do not name may still be its rank: a process under the run's proven
  // launcher (the launcher-kind parent of a rank the records name), or under the process nsa-top's
  // supervisor started for this run (ctx.roots: verified by pid + start time). The environment
  // alone never is proof: anyone can start a trainer with the run's NSA_TOP_RUN_DIR and RANK.
  const provenRoots = new Set<number>();
  for (const r of ctx.roots ?? []) {
    const p = byPid.get(r.pid);
    if (p && p.startTime === String(r.startTime)) provenRoots.add(p.pid);
  }
  for (const pid of proven) {
    let cur = byPid.get(byPid.get(pid)!.ppid);
    for (let i = 0; cur && i < 4 && (isLauncher(cur) || demoted.has(cur.pid)); i++) {
      provenRoots.add(cur.pid);
      cur = byPid.get(cur.ppid);
    }
  }
  const underRoot = (p: ProcInfo): boolean => {
    let cur: ProcInfo | undefined = p;
    for (let i = 0; cur && i < 16; i++) {
      if (provenRoots.has(cur.pid)) return true;
      if (cur.ppid <= 1) break;
      cur = byPid.get(cur.ppid);
    }
    return false;
  };
  for (const pid of envOnly) {
    const p = byPid.get(pid)!;
    if (demoted.has(pid) || !underRoot(p)) continue;
    proven.add(pid);
    whyNot.delete(pid);
  }
  for (const pid of proven) {
    const h = hintOf(byPid.get(pid)!);
    if (h) hbRank.set(pid, h.rank);
  }
  // a trainer's own children (data-loader workers, compile workers) inherit its argv and environ:
  // they are not ranks
  const isWorker = (p: ProcInfo): boolean => {
    let cur = byPid.get(p.ppid);
    for (let i = 0; cur && i < 64; i++) {
      // (a child of a trainer refused for its start time is that trainer's worker all the same)
      if (proven.has(cur.pid) || timeRefused.has(cur.pid)) return true;
      cur = byPid.get(cur.ppid);
    }
    return false;
  };
  // the launcher: a launcher-kind parent of a proven rank (torchrun, `nsa-top train`), outermost
  let launcher: ProcInfo | null = null;
  const rankCands: ProcInfo[] = [];
  for (const pid of proven) {
    const p = byPid.get(pid)!;
    if (isWorker(p)) continue;
    rankCands.push(p);
    let cur = byPid.get(p.ppid);
    for (let i = 0; cur && i < 4 && launcherLike(cur); i++) {
      if (envTie(cur, ctx).ok || !(cur.env.NSA_TOP_RUN_DIR || cur.env.CONFIG)) {
        if (!launcher || isAncestor(byPid, cur, launcher)) launcher = cur;
      }
      cur = byPid.get(cur.ppid);
    }
  }
  if (!launcher) {
    // a launcher whose ranks are not up yet (or gone) but whose own environment names the run
    for (const p of procs)
      if (isLauncher(p) && !isToolProcess(p) && p.state !== 'Z' && envTie(p, ctx).ok)
        if (!launcher || isAncestor(byPid, p, launcher)) launcher = p;
  }
  const memByPid = new Map<number, { mem: number | null; uuid: string }>();
  for (const a of gpu?.apps ?? []) {
    const prev = memByPid.get(a.pid);
    if (!prev) memByPid.set(a.pid, { mem: a.usedMemMiB, uuid: a.gpuUuid });
    else prev.mem = prev.mem === null || a.usedMemMiB === null ? (prev.mem ?? a.usedMemMiB) : prev.mem + a.usedMemMiB;
  }
  const ranks: RankProc[] = [];
  const unknown: ProcInfo[] = [];
  const soleTrainer = rankCands.length === 1 && !launcher;
  for (const p of rankCands) {
    let rank: number | null = null;
    let localRank: number | null = intOrNull(p.env.LOCAL_RANK);
    let source: RankProc['source'] = 'environ';
    if (intOrNull(p.env.RANK) !== null) {
      rank = intOrNull(p.env.RANK);
    } else {
      const ar = intOrNull(argValue(p.argv, ['--rank']));
      const alr = intOrNull(argValue(p.argv, ['--local_rank', '--local-rank']));
      if (localRank === null) localRank = alr;
      if (ar !== null || alr !== null) {
        rank = ar ?? alr;
        source = 'argv';
      } else if (hbRank.has(p.pid)) {
        rank = hbRank.get(p.pid)!;
        source = 'heartbeat-pid';
      } else if (soleTrainer && !(intOrNull(p.env.WORLD_SIZE)! > 1)) {
        // a single-process run: the trainer itself is rank 0
        rank = 0;
        source = 'argv';
      }
    }
    if (rank === null) {
      unknown.push(p);
      continue;
    }
    const g = memByPid.get(p.pid);
    ranks.push({ rank, localRank, proc: p, gpuMemMiB: g ? g.mem : null, gpuUuid: g ? g.uuid : null, source });
  }
  ranks.sort((a, b) => a.rank - b.rank || a.proc.pid - b.proc.pid);
  unknown.sort((a, b) => a.pid - b.pid);

  // what was named as a trainer but not proven, and why: heartbeat pids, and trainer-looking
  // processes whose argv names the run dir
  const unproven: UnprovenProc[] = [];
  const listed = new Set<number>([...proven, ...(launcher ? [launcher.pid] : [])]);
  for (const h of hbPids) {
    if (listed.has(h.pid)) continue;
    const p = byPid.get(h.pid);
    const inner = byInnerPid.get(h.pid);
    const ns =
      inner && inner.pid !== h.pid
        ? ` The heartbeat comes from another pid namespace: its writer is pid ${inner.pid} here (NSpid ${inner.nsPid!.join(' ')}).`
        : '';
    if (!p) {
      if (ns)
        unproven.push({
          pid: h.pid,
          startTime: null,
          rank: h.rank,
          argv: [],
          why: `heartbeat_rank${h.rank} names pid ${h.pid}, which does not exist here.${ns}`,
        });
      continue;
    }
    if (isToolProcess(p)) continue;
    listed.add(p.pid);
    let why: string;
    if (!rankCommandKind(p) && !isLauncher(p))
      why = `its command (${describe(p)}) is not a trainer nsa-top knows (python …train_showcase.py, a torchrun worker of it, nsa-top train)`;
    else
      why =
        whyNot.get(p.pid) ??
        (isWorker(p) ? 'it is a worker process of a rank, not a rank' : 'no proof that it belongs to this run');
    unproven.push({
      pid: p.pid,
      startTime: p.startTime,
      rank: h.rank,
      argv: p.argv,
      why: `heartbeat_rank${h.rank} names pid ${p.pid}, but ${why}: not a rank of this run, never signalled.${ns}`,
    });
  }
  for (const pid of envOnly) {
    if (listed.has(pid) || proven.has(pid)) continue;
    const p = byPid.get(pid)!;
    if (isWorker(p)) continue;
    listed.add(pid);
    unproven.push({
      pid,
      startTime: p.startTime,
      rank: intOrNull(p.env.RANK),
      argv: p.argv,
      why: `pid ${pid} (${describe(p)}) names this run in its environment, but ${whyNot.get(pid)}, and it is not a child of the run's launcher: not a rank of this run, never signalled`,
      envOnly: true,
    });
  }
  for (const pid of timeRefused) {
    if (listed.has(pid)) continue;
    const p = byPid.get(pid)!;
    if (isWorker(p)) continue;
    listed.add(pid);
    unproven.push({
      pid,
      startTime: p.startTime,
      rank: null,
      argv: p.argv,
      why: `pid ${pid} (${describe(p)}) names this run in its environment, but ${whyNot.get(pid)}: not a rank of this run, never signalled`,
    });
  }
  for (const p of procs) {
    if (listed.has(p.pid) || isToolProcess(p) || !trainerKind(p) || !argvNamesRunDir(p, ctx)) continue;
    if (isWorker(p) || (launcher && isAncestor(byPid, launcher, p))) continue;
    listed.add(p.pid);
    const why =
      !rankCommandKind(p) && !isLauncher(p)
        ? `its command (${describe(p)}) is not a trainer nsa-top knows`
        : (whyNot.get(p.pid) ?? 'no proof that it belongs to this run');
    unproven.push({
      pid: p.pid,
      startTime: p.startTime,
      rank: null,
      argv: p.argv,
      why: `pid ${p.pid} names the run dir in its arguments, but ${why}: not a rank of this run, never signalled`,
    });
  }
  const out: RunProcesses = { at, launcher, ranks, unknown };
  if (unproven.length > 0) out.unproven = unproven;
  if (error) out.error = error;
  return out;
}

/** Whether a path in the process's argv is the run dir (a hint, never proof). */
function argvNamesRunDir(p: ProcInfo, ctx: MatchCtx): boolean {
  for (const x of p.argv.slice(1)) {
    const eq = x.startsWith('-') ? x.indexOf('=') : -1;
    const v = eq >= 0 ? x.slice(eq + 1) : x;
    if (!v || v.startsWith('-')) continue;
    const r = resolveAgainst(v, p.cwd);
    if (r && ctx.runDirs.has(r)) return true;
  }
  return false;
}

/**
 * The verdict of proveRunProcess on the run's processes: null when `target` (pid + start time) is
 * one of its ranks (or, with `launcherToo`, its launcher), a reason when it is not, undefined when
 * the process table of the run does not name it (then whyNotRunProcess judges a fresh read of it).
 */
export function runVerdict(
  rp: RunProcesses,
  target: { pid: number; startTime: string },
  launcherToo: boolean,
): string | null | undefined {
  if (rp.error && rp.ranks.length === 0 && !rp.launcher) return `could not read the process table: ${rp.error}`;
  const same = (p: ProcInfo | null | undefined) =>
    !!p && p.pid === target.pid && p.startTime === String(target.startTime);
  if (rp.ranks.some((r) => same(r.proc)) || rp.unknown.some((p) => same(p))) return null;
  if (same(rp.launcher))
    return launcherToo ? null : `pid ${target.pid} is the launcher (${describe(rp.launcher!)}), not a rank`;
  const u = rp.unproven?.find((x) => x.pid === target.pid);
  if (u) return u.why.replace(/: not a rank of this run, never signalled\.?/, '');
  return undefined;
}

/** Why `p` (a fresh read of the target's pid; null: gone) is not a rank of the run. */
export function whyNotRunProcess(p: ProcInfo | null, target: { pid: number; startTime: string }): string {
  if (!p) return `pid ${target.pid} is gone`;
  if (p.startTime !== String(target.startTime))
    return `pid ${target.pid} now belongs to another process (start time ${p.startTime} ≠ ${target.startTime})`;
  if (isToolProcess(p)) return `pid ${target.pid} is one of nsa-top's own tools or a watcher (${describe(p)})`;
  const kind = rankCommandKind(p);
  if (!kind)
    return `its command (${describe(p)}) is not a trainer nsa-top knows (python …train_showcase.py, a torchrun worker of it, nsa-top train)`;
  return `pid ${target.pid} (${describe(p)}) is not among this run's proven ranks`;
}

function isAncestor(byPid: Map<number, ProcInfo>, a: ProcInfo, b: ProcInfo): boolean {
  let cur = byPid.get(b.ppid);
  for (let i = 0; cur && i < 64; i++) {
    if (cur.pid === a.pid) return true;
    cur = byPid.get(cur.ppid);
  }
  return false;
}

/**
 * The hints findRunProcesses takes, from what the run's heartbeats say: each rank's latest pid,
 * its last record and its boot record, and the run's first record once the whole history is read
 * (while a long history is still being back-filled, its first record is not known yet).
 */
export function hintsFromRun(run: {
  ranks: { rank: number; pid: number | null; lastTs: number | null; bootTs: number | null }[];
  segments: { startTs: number | null }[];
  backfill?: { pending: boolean };
}): Pick<FindRunHints, 'heartbeatPids' | 'firstRecordTs'> {
  const heartbeatPids = run.ranks
    .filter((r) => r.pid !== null)
    .map((r) => ({ rank: r.rank, pid: r.pid!, lastTs: r.lastTs, bootTs: r.bootTs }));
  let first: number | null = null;
  if (!run.backfill?.pending)
    for (const s of run.segments) if (s.startTs !== null && (first === null || s.startTs < first)) first = s.startTs;
  return { heartbeatPids, firstRecordTs: first };
}
