// The process table of a machine, read through a Host: one remote command per refresh.
//
// Everything comes from /proc (Linux; the training boxes are Linux): /proc/PID/stat for state,
// ppid, CPU ticks, start time and RSS; wchan; cmdline; and, only for processes that look like
// trainers, environ (RANK/LOCAL_RANK/WORLD_SIZE/NSA_TOP_RUN_DIR/CONFIG) and cwd. The shell script
// below uses builtins (`read`, `cd`, `pwd -P`) in its per-process loop, and one `head` for every
// cmdline/environ at once, so a refresh is one command and a handful of forks on the remote side,
// however many processes the box runs. Paths and pids reach the script as positional arguments,
// never spliced into its text.
//
// A process is identified by pid + start time (stat field 22, clock ticks since boot), so a
// recycled pid is never mistaken for a rank: see verifyProcess().
import type { Host } from './host.js';
import type { GpuSample, ProcInfo, ProcState, RankProc, RunProcesses, UnprovenProc } from './types.js';

const HEAD_MARK = '@@NSA-TOP-HEAD@@';
const ENVIRON_MAX = 131072;
const EXEC_TIMEOUT_MS = 15000;

// $1 run dir ('' none)  $2 '1' to report CLK_TCK/PAGESIZE  $3 mode  $4 pids already looked at
// closely (space-separated)  $5.. pids to enrich. Modes: 'all' every process; 'run' only
// processes whose comm looks like a trainer (python*, node, torchrun, pt_main_thread, nsa-top*)
// plus the pids named (what findRunProcesses needs: a few hundred bytes, not the whole table);
// 'list' only the pids named. In 'all' and 'run', trainer-looking processes not in $4 are
// enriched too, so a refresh stays one command even when new trainers appear.
// Output: R <physical run dir> | J <env.json on one line> | U <uptime s> | T <clk_tck> <pagesize>
// | S <stat line> + W <wchan> per process | D <pid> <cwd> and N <pid> <NSpid…> (nested pid namespace
// only) per enriched pid | HEAD_MARK | `head`
// output of cmdline/environ files.
export const PROC_SCRIPT = `exec 2>/dev/null
NL='
'
rd=$1; tk=$2; mode=$3; known=" $4 "; shift 4; known="$known $* "
if [ -n "$rd" ] && cd "$rd"; then
  printf 'R '; pwd -P
  if [ -f env.json ]; then printf 'J '; head -c 65536 env.json | tr '\\n\\r' '  '; echo; fi
fi
cd /proc || { echo 'X no /proc on this host'; exit 0; }
if read -r up idle < /proc/uptime; then printf 'U %s\\n' "$up"; fi
if [ "$tk" = 1 ]; then printf 'T %s %s\\n' "$(getconf CLK_TCK)" "$(getconf PAGESIZE)"; fi
en=
tr=
st() {
  if read -r s < "$1/stat"; then
    t=
    case $s in *' (python'*|*' (node)'*|*' (torchrun)'*|*' (pt_main_thread)'*|*' (nsa-top'*) t=1;; esac
    # node runs much besides nsa-top (editors' servers…): keep it only when its command line names
    # nsa-top (read drops the NULs between arguments: no fork needed)
    case $s in *' (node)'*) c=; read -r c < "$1/cmdline"; case $c in *nsa-top*) ;; *) t=;; esac;; esac
    if [ "$mode" = run ] && [ -z "$t" ]; then
      case $known in *" $1 "*) ;; *) return;; esac
    fi
    w=; read -r w < "$1/wchan"; printf 'S %s\\nW %s\\n' "$s" "$w"
    [ "$mode" = run ] && tr="$tr $1/cmdline"
    if [ -n "$t" ] && [ "$mode" != list ]; then
      case $known in *" $1 "*) ;; *) en="$en $1";; esac
    fi
  fi
}
if [ "$mode" = list ]; then for p in "$@"; do st "$p"; done; else for p in [0-9]*; do st "$p"; done; fi
set -- "$@" $en
for p in "$@"; do
  # (a cwd whose name holds a newline could forge lines for other pids: left out)
  if cd -P "/proc/$p/cwd"; then case $PWD in *"$NL"*) ;; *) printf 'D %s %s\\n' "$p" "$PWD";; esac; fi
  # NSpid with more than one entry: the process lives in a nested pid namespace (a container)
  while read -r k v; do case $k in NSpid:) case $v in *[!0-9]*) printf 'N %s %s\\n' "$p" "$v";; esac; break;; esac; done < "/proc/$p/status"
done
cd /proc || exit 0
printf '${HEAD_MARK}\\n'
n=$#
if [ "$mode" = all ]; then
  for p in "$@"; do set -- "$@" "$p/environ"; done; shift $n
  head -c ${ENVIRON_MAX} /dev/null [0-9]*/cmdline "$@"
elif [ "$mode" = run ]; then
  for p in "$@"; do set -- "$@" "$p/environ"; done; shift $n
  head -c ${ENVIRON_MAX} /dev/null $tr "$@"
else
  for p in "$@"; do set -- "$@" "$p/cmdline" "$p/environ"; done; shift $n
  head -c ${ENVIRON_MAX} /dev/null "$@"
fi
exit 0
`;

/** Parsed /proc/PID/stat. comm may hold spaces and parentheses: it spans first '(' to LAST ')'. */
export interface StatFields {
  pid: number;
  comm: string;
  state: ProcState;
  ppid: number;
  utime: number;
  stime: number;
  /** field 22, clock ticks since boot, kept as the decimal string the kernel wrote */
  startTime: string;
  rssPages: number;
}

const STATES = new Set(['R', 'S', 'D', 'T', 't', 'Z', 'I', 'X']);

export function parseStat(line: string): StatFields | null {
  const open = line.indexOf('(');
  const close = line.lastIndexOf(')');
  if (open < 1 || close < open) return null;
  const pid = Number(line.slice(0, open).trim());
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const comm = line.slice(open + 1, close);
  const rest = line
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state); field N is rest[N - 3]
  if (rest.length < 22) return null;
  const num = (i: number) => Number(rest[i]);
  const startTime = rest[19]!;
  if (!/^\d+$/.test(startTime)) return null;
  const st = rest[0]!;
  const fields: StatFields = {
    pid,
    comm,
    state: (STATES.has(st) ? st : '?') as ProcState,
    ppid: num(1),
    utime: num(11),
    stime: num(12),
    startTime,
    rssPages: num(21),
  };
  if (![fields.ppid, fields.utime, fields.stime, fields.rssPages].every(Number.isFinite)) return null;
  return fields;
}

/**
 * Splits the output of `head -c N /dev/null f1 f2 …` into file → content. GNU and busybox head
 * print "==> f <==\n" before each file and a "\n" before every header but the first. A header
 * that appears twice (a crafted argv imitating one) makes that file's content unknown.
 */
export function splitHeadOutput(out: string): Map<string, string | null> {
  const res = new Map<string, string | null>();
  const re = /(?:^|\n)==> ([^\n]*?) <==\n/g;
  let m: RegExpExecArray | null;
  let prevName: string | null = null;
  let prevEnd = 0;
  const put = (name: string, content: string) => {
    if (res.has(name)) res.set(name, null);
    else res.set(name, content);
  };
  while ((m = re.exec(out)) !== null) {
    if (prevName !== null) put(prevName, out.slice(prevEnd, m.index));
    prevName = m[1]!;
    prevEnd = m.index + m[0].length;
  }
  if (prevName !== null) put(prevName, out.slice(prevEnd));
  return res;
}

const ENV_KEYS = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'NSA_TOP_RUN_DIR', 'CONFIG'] as const;

export function parseEnviron(raw: string): ProcInfo['env'] {
  const env: ProcInfo['env'] = {};
  for (const kv of raw.split('\0')) {
    const eq = kv.indexOf('=');
    if (eq <= 0) continue;
    const k = kv.slice(0, eq);
    if ((ENV_KEYS as readonly string[]).includes(k)) env[k as (typeof ENV_KEYS)[number]] = kv.slice(eq + 1);
  }
  return env;
}

export function parseCmdline(raw: string): string[] {
  if (raw === '') return [];
  const parts = raw.split('\0');
  if (parts[parts.length - 1] === '') parts.pop();
  return parts;
}

interface Enriched {
  startTime: string;
  /** cmdline when read: a process caught between fork and exec shows its parent's environ */
  argvKey: string;
  env: ProcInfo['env'];
  cwd: string | null;
  /** NSpid when the process lives in a nested pid namespace */
  nsPid: number[] | null;
  /** environ could not be read (permissions, or the process is gone) */
  envUnreadable: boolean;
}

interface HostProcState {
  clkTck: number;
  pageSize: number;
  /** previous utime+stime sample per pid:startTime, for CPU % */
  cpu: Map<string, { ticks: number; upS: number }>;
  /** environ and cwd per pid (valid while the start time matches) */
  enriched: Map<number, Enriched>;
}

const hostState = new WeakMap<Host, HostProcState>();

function stateFor(host: Host): HostProcState | undefined {
  return hostState.get(host);
}

interface RawSnapshot {
  procs: ProcInfo[];
  /** physical path of the run dir when it exists */
  runDirPhysical: string | null;
  /** env.json of the run dir (one line), when it exists */
  envJson: string | null;
  uptimeS: number | null;
  error?: string;
  /** commands run and stdout bytes, for the benchmark */
  bytes: number;
}

async function runScript(
  host: Host,
  runDir: string,
  mode: 'all' | 'run' | 'list',
  pids: number[],
): Promise<RawSnapshot> {
  const known = stateFor(host);
  for (const p of pids) if (!Number.isInteger(p) || p <= 0) throw new Error(`invalid pid ${p}`);
  const knownPids = known ? [...known.enriched.keys()].join(' ') : '';
  const args = [runDir, known ? '' : '1', mode, knownPids, ...pids.map(String)];
  // over SSH the script runs inside the watch loop when it can (no channel, no shell start-up)
  const light = host.runLight ? await host.runLight('procs', args, EXEC_TIMEOUT_MS).catch(() => null) : null;
  const r = light
    ? { timedOut: false, code: 0, stdout: light.toString('utf8'), stderr: '' }
    : await host.exec(['sh', '-c', PROC_SCRIPT, 'nsa-top-procs', ...args], {
        timeoutMs: EXEC_TIMEOUT_MS,
        maxOutputBytes: 64 * 1024 * 1024,
      });
  if (r.timedOut)
    return {
      procs: [],
      runDirPhysical: null,
      envJson: null,
      uptimeS: null,
      error: 'process table read timed out',
      bytes: r.stdout.length,
    };
  if (r.code !== 0)
    return {
      procs: [],
      runDirPhysical: null,
      envJson: null,
      uptimeS: null,
      error: `process table read failed (exit ${r.code}): ${r.stderr.trim().slice(0, 200)}`,
      bytes: r.stdout.length,
    };
  const out = r.stdout;
  const markAt = out.indexOf(`${HEAD_MARK}\n`);
  const textPart = markAt >= 0 ? out.slice(0, markAt) : out;
  const headPart = markAt >= 0 ? out.slice(markAt + HEAD_MARK.length + 1) : '';
  let runDirPhysical: string | null = null;
  let envJson: string | null = null;
  let uptimeS: number | null = null;
  let error: string | undefined;
  const stats: { f: StatFields; wchan: string | null }[] = [];
  const cwds = new Map<number, string>();
  const nsPids = new Map<number, number[]>();
  let st = known;
  for (const line of textPart.split('\n')) {
    const tag = line.slice(0, 2);
    const v = line.slice(2);
    if (tag === 'R ') runDirPhysical = v;
    else if (tag === 'J ') envJson = v;
    else if (tag === 'U ') uptimeS = Number(v) || null;
    else if (tag === 'X ') error = v;
    else if (tag === 'T ') {
      const [a, b] = v.split(' ').map(Number);
      st = { clkTck: a && a > 0 ? a : 100, pageSize: b && b > 0 ? b : 4096, cpu: new Map(), enriched: new Map() };
      hostState.set(host, st);
    } else if (tag === 'S ') {
      const f = parseStat(v);
      if (f) stats.push({ f, wchan: null });
    } else if (tag === 'W ' || line === 'W') {
      const last = stats[stats.length - 1];
      const w = v.trim();
      if (last && last.wchan === null) last.wchan = w === '' || w === '0' ? null : w;
    } else if (tag === 'D ') {
      const sp = v.indexOf(' ');
      const pid = Number(v.slice(0, sp));
      if (sp > 0 && Number.isInteger(pid)) cwds.set(pid, v.slice(sp + 1));
    } else if (tag === 'N ') {
      const nums = v.trim().split(/\s+/).map(Number);
      if (nums.length > 1 && nums.every((n) => Number.isInteger(n) && n > 0)) nsPids.set(nums[0]!, nums.slice(1));
    }
  }
  if (!st) {
    // first contact but no T line (script failed early)
    st = { clkTck: 100, pageSize: 4096, cpu: new Map(), enriched: new Map() };
    hostState.set(host, st);
  }
  const files = splitHeadOutput(headPart);
  // pids enriched by this run: the ones asked for, and those the script picked by comm
  const enrichSet = new Set(pids);
  for (const k of files.keys()) {
    const m = /^(?:\/proc\/)?(\d+)\/environ$/.exec(k);
    if (m) enrichSet.add(Number(m[1]));
  }
  for (const pid of cwds.keys()) enrichSet.add(pid);
  const nowMs = host.now();
  const bootMs = uptimeS !== null ? nowMs - uptimeS * 1000 : null;
  const nextCpu = new Map<string, { ticks: number; upS: number }>();
  const procs: ProcInfo[] = [];
  for (const { f, wchan } of stats) {
    const key = `${f.pid}:${f.startTime}`;
    const ticks = f.utime + f.stime;
    let cpuPct: number | null = null;
    if (uptimeS !== null) {
      const prev = st.cpu.get(key);
      // /proc/uptime has 10 ms resolution: samples closer than 200 ms would be noise
      if (prev && uptimeS - prev.upS < 0.2) nextCpu.set(key, prev);
      else {
        if (prev) cpuPct = Math.max(0, ((ticks - prev.ticks) / st.clkTck / (uptimeS - prev.upS)) * 100);
        nextCpu.set(key, { ticks, upS: uptimeS });
      }
    }
    const cmdRaw = files.get(`${f.pid}/cmdline`) ?? files.get(`/proc/${f.pid}/cmdline`);
    const argvKey = cmdRaw ?? '';
    let enriched = st.enriched.get(f.pid);
    if (enrichSet.has(f.pid)) {
      const envRaw = files.get(`${f.pid}/environ`) ?? files.get(`/proc/${f.pid}/environ`);
      enriched = {
        startTime: f.startTime,
        argvKey,
        env: envRaw != null ? parseEnviron(envRaw) : {},
        cwd: cwds.get(f.pid) ?? null,
        nsPid: nsPids.get(f.pid) ?? null,
        envUnreadable: envRaw == null || envRaw === '',
      };
      // an empty environ (caught mid-exec) is not remembered: read it again next time — unless
      // the process is a zombie, whose environ stays empty
      if (envRaw === '' && f.state !== 'Z' && f.state !== 'X') st.enriched.delete(f.pid);
      else st.enriched.set(f.pid, enriched);
    } else if (
      enriched &&
      (enriched.startTime !== f.startTime ||
        (cmdRaw != null && cmdRaw !== '' && enriched.argvKey !== argvKey && f.state !== 'Z' && f.state !== 'X'))
    ) {
      // (a new non-empty argv under the same start time is an exec; an empty one is a process on
      // its way out — its memory is gone before it turns Z — and keeps what was seen while it lived)
      st.enriched.delete(f.pid);
      enriched = undefined;
    }
    procs.push({
      pid: f.pid,
      ppid: f.ppid,
      startTime: f.startTime,
      state: f.state,
      cpuPct,
      rssKiB: Math.round((f.rssPages * st.pageSize) / 1024),
      wchan,
      argv: cmdRaw != null ? parseCmdline(cmdRaw) : [],
      env: enriched ? { ...enriched.env } : {},
      comm: f.comm,
      cwd: enriched ? enriched.cwd : null,
      nsPid: enriched ? enriched.nsPid : null,
      startedAtMs: bootMs !== null ? Math.round(bootMs + (Number(f.startTime) / st.clkTck) * 1000) : null,
    });
  }
  for (const [k, v] of nextCpu) st.cpu.set(k, v);
  if (uptimeS !== null) for (const [k, v] of st.cpu) if (uptimeS - v.upS > 120) st.cpu.delete(k);
  if (mode !== 'list') {
    // forget enrichment of processes that are gone
    const alive = new Set(procs.map((p) => p.pid));
    for (const pid of st.enriched.keys()) if (!alive.has(pid)) st.enriched.delete(pid);
  }
  return { procs, runDirPhysical, envJson, uptimeS, error, bytes: out.length };
}

/** One process, with environ and cwd, or null when it does not exist. */
export async function readProc(host: Host, pid: number): Promise<ProcInfo | null> {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const snap = await runScript(host, '', 'list', [pid]);
  if (snap.error && snap.procs.length === 0) throw new Error(snap.error);
  return snap.procs.find((p) => p.pid === pid) ?? null;
}

/** true only if a process with this pid exists AND its start time equals startTime (pid reuse safe) */
export async function verifyProcess(host: Host, p: { pid: number; startTime: string }): Promise<boolean> {
  if (!Number.isInteger(p.pid) || p.pid <= 1 || !/^\d+$/.test(String(p.startTime))) return false;
  const info = await readProc(host, p.pid);
  return info !== null && info.startTime === String(p.startTime);
}

/** Every process of the host (env and cwd filled only for processes already looked at closely). */
export async function listProcesses(host: Host): Promise<ProcInfo[]> {
  const snap = await runScript(host, '', 'all', []);
  if (snap.error && snap.procs.length === 0) throw new Error(snap.error);
  return snap.procs;
}

// ---------------------------------------------------------------------------------------------
// Matching processes to a run

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

function trainerKind(p: ProcInfo): boolean {
  const a = p.argv;
  return a.length > 0 && (isPython(a[0]) || base(a[0]) === 'torchrun' || nsaTopArgIndex(a) >= 0) && !isToolProcess(p);
}

/**
 * A process that may be a trainer of a run it names: torchrun, `nsa-top train`, or python with a
 * rank environment, a launcher, or a script/module whose name says train. (A heartbeat pid needs
 * less: any python/torchrun/`nsa-top train` process that is not a tool — it wrote the heartbeat.)
 */
export function looksLikeTrainer(p: ProcInfo): boolean {
  if (!trainerKind(p)) return false;
  if (!isPython(p.argv[0])) return true;
  if (p.env.RANK !== undefined || p.env.LOCAL_RANK !== undefined || isLauncher(p)) return true;
  const script = pythonScript(p.argv);
  return script !== null && /train/i.test(base(script));
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

function normPath(p: string): string {
  const parts: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return `/${parts.join('/')}`;
}

function resolveAgainst(p: string, cwd: string | null | undefined): string | null {
  if (p.startsWith('/')) return normPath(p);
  if (!cwd) return null;
  return normPath(`${cwd}/${p}`);
}

interface MatchCtx {
  runDirs: Set<string>;
  /** no longer used (env.json's CONFIG is not proof): kept so older callers still compile */
  config?: string | null;
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
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Whether the process's start time fits the run's records; a reason when it does not. */
function startTimeWhy(p: ProcInfo, hint: HeartbeatPidHint | undefined, firstRecordTs: number | null): string | null {
  const s = p.startedAtMs;
  if (s === null || s === undefined) return null;
  if (hint?.bootTs != null) {
    if (s > hint.bootTs + CLOCK_SLACK_MS)
      return `it started at ${iso(s)}, after the boot record (${iso(hint.bootTs)}) that names pid ${p.pid}: the pid was recycled`;
    if (s < hint.bootTs - LAUNCH_WINDOW_MS)
      return `it started at ${iso(s)}, long before the boot record (${iso(hint.bootTs)}) that names pid ${p.pid}: another process with the same pid`;
  } else if (hint?.lastTs != null && s > hint.lastTs + CLOCK_SLACK_MS) {
    return `it started at ${iso(s)}, after the last heartbeat (${iso(hint.lastTs)}) that names pid ${p.pid}: the pid was recycled`;
  }
  // (a process the heartbeats name is judged by its own records above: a rotated or truncated
  // heartbeat file moves the run's first record, not the process's boot)
  if (!hint && firstRecordTs != null && s < firstRecordTs - LAUNCH_WINDOW_MS)
    return `it started at ${iso(s)}, long before the run's first record (${iso(firstRecordTs)})`;
  return null;
}

function describe(p: ProcInfo): string {
  const cmd = p.argv.length > 0 ? p.argv.join(' ') : p.comm ? `[${p.comm}]` : '?';
  return cmd.length > 120 ? `${cmd.slice(0, 119)}…` : cmd;
}

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
  const st0 = stateFor(host);
  const needFirst = hbPids.map((h) => h.pid).filter((pid) => !st0?.enriched.has(pid));
  let snap: RawSnapshot;
  try {
    snap = await runScript(host, runDir, 'run', needFirst);
  } catch (e) {
    return { at, launcher: null, ranks: [], unknown: [], error: (e as Error).message };
  }
  if (snap.error && snap.procs.length === 0) return { at, launcher: null, ranks: [], unknown: [], error: snap.error };
  let procs = snap.procs;
  // environ + cwd for trainer-looking processes not looked at yet: one more command, first time only
  const st = stateFor(host)!;
  const missing = procs.filter((p) => trainerKind(p) && !st.enriched.has(p.pid)).map((p) => p.pid);
  if (missing.length > 0) {
    const more = await runScript(host, '', 'list', missing).catch(() => null);
    if (more) {
      const byPid = new Map(more.procs.map((p) => [p.pid, p]));
      procs = procs.map((p) => {
        const m = byPid.get(p.pid);
        return m && m.startTime === p.startTime ? { ...p, env: m.env, cwd: m.cwd, nsPid: m.nsPid } : p;
      });
    }
  }
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

function envJsonConfig(line: string | null): string | null {
  if (!line) return null;
  try {
    const c = (JSON.parse(line) as { env?: Record<string, unknown> })?.env?.CONFIG;
    return typeof c === 'string' && c ? c : null;
  } catch {
    return null;
  }
}

// CONFIG yaml → train.out_dir, per process (pid + start time + path): a trainer reads its config
// once, at boot, so one read per new trainer process is enough (over SSH each read is a command).
const configCache = new WeakMap<Host, Map<string, { outDir: string | null; error: string | null }>>();

/**
 * The out_dir of each candidate's CONFIG. Only candidates that may be this run's are read: those a
 * heartbeat names, and those whose CONFIG is the one the run's env.json records (resolved against
 * the candidate's cwd) — or, while the run has no env.json yet, those whose cwd holds the run dir.
 * Other trainers on the box (other runs) cost nothing.
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
    if (!p.env.CONFIG) continue;
    const path = resolveAgainst(p.env.CONFIG, p.cwd);
    if (!path || out.has(path)) continue;
    const key = `${p.pid}:${p.startTime}:${path}`;
    let v = cache.get(key);
    if (!v) {
      if (!named.has(p.pid)) {
        if (runConfig !== null && resolveAgainst(runConfig, p.cwd) !== path) {
          out.set(path, { outDir: null, error: `not the CONFIG the run's env.json records (${runConfig})` });
          continue;
        }
        // no env.json yet (the first seconds of a run): only a trainer whose cwd holds the run dir
        if (runConfig === null && !(p.cwd && [...runDirs].some((d) => d.startsWith(`${p.cwd}/`)))) {
          out.set(path, { outDir: null, error: 'the run has no env.json yet to compare it with' });
          continue;
        }
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
  let text: string;
  try {
    text = (await host.readFile(path, 1 << 20)).toString('utf8');
  } catch (e) {
    return {
      outDir: null,
      error: `${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (e as Error).message}`,
    };
  }
  // the readers' parser (depth-bounded, no warnings on stderr), loaded only when a CONFIG is to be read.
  // Not `import('yaml')` here: yaml is bundled as CommonJS, and a dynamic import of its chunk has no
  // named exports (parseDocument was undefined in the built CLI).
  const { parseTrainerConfig } = await import('../trainer/run/readers/config.js');
  const r = parseTrainerConfig(text);
  if (!r.ok) return { outDir: null, error: `${path}: ${r.error}` };
  const od = r.value.train?.out_dir;
  if (typeof od === 'string' && od.length > 0) return { outDir: od, error: null };
  return { outDir: null, error: `${path}: no train.out_dir` };
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

  const proven = new Set<number>();
  const hbRank = new Map<number, number>();
  const whyNot = new Map<number, string>();
  /** tied to the run by command and environment, refused by their start time: always listed */
  const timeRefused = new Set<number>();
  for (const p of procs) {
    if (isToolProcess(p)) continue;
    const kind = rankCommandKind(p);
    if (!kind) continue;
    const tie = envTie(p, ctx);
    if (!tie.ok) {
      whyNot.set(p.pid, tie.why);
      continue;
    }
    const tw = startTimeWhy(p, hintByPid.get(p.pid), firstRecordTs);
    if (tw) {
      whyNot.set(p.pid, tw);
      timeRefused.add(p.pid);
      continue;
    }
    proven.add(p.pid);
  }
  // zombies have no command line left: a rank that died unreaped stays a rank when its environ
  // (remembered from while it lived) ties it to the run
  // `nsa-top train` without --ranks looks like a single-process trainer; with rank children it is
  // their launcher
  const demoted = new Set<number>();
  for (const pid of proven) {
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
  for (const pid of demoted) proven.delete(pid);
  const launcherLike = (p: ProcInfo) => isLauncher(p) || demoted.has(p.pid);
  for (const p of procs) {
    if (proven.has(p.pid) || !(p.state === 'Z' && p.argv.length === 0)) continue;
    if (!p.env.NSA_TOP_RUN_DIR && !p.env.CONFIG) continue;
    if (envTie(p, ctx).ok && !startTimeWhy(p, hintByPid.get(p.pid), firstRecordTs)) proven.add(p.pid);
  }
  for (const pid of proven) {
    const h = hintByPid.get(pid);
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
  if (rp.error && rp.ranks.length === 0 && !rp.launcher) return `could not read the process table: ${rp.error}`;
  const same = (p: ProcInfo | null | undefined) =>
    !!p && p.pid === target.pid && p.startTime === String(target.startTime);
  if (rp.ranks.some((r) => same(r.proc)) || rp.unknown.some((p) => same(p))) return null;
  if (same(rp.launcher))
    return opts.launcherToo ? null : `pid ${target.pid} is the launcher (${describe(rp.launcher!)}), not a rank`;
  const u = rp.unproven?.find((x) => x.pid === target.pid);
  if (u) return u.why.replace(/: not a rank of this run, never signalled\.?/, '');
  const p = await readProc(host, target.pid).catch(() => null);
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
