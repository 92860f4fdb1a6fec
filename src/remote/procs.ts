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
// recycled pid is never mistaken for a rank: see verifyProcess(). LocalHost and SshHost may read
// the table themselves (Host.readProcTable); else the script runs through exec(). Which processes
// are a run's ranks is decided in src/trainer/run (ranks.ts judges, processes.ts reads what it needs
// through the host): this file knows processes, not runs.
import { hostOf, type Host, type ProcTable, type ProcTableRequest } from './host.js';
import type { ProcInfo, ProcState } from './types.js';

const HEAD_MARK = '@@NSA-TOP-HEAD@@';
const ENVIRON_MAX = 131072;
const EXEC_TIMEOUT_MS = 15000;

// $1 run dir ('' none)  $2 '1' to report CLK_TCK/PAGESIZE ('=CLK PAGE': as known already)  $3 mode  $4 pids already looked at
// closely (space-separated)  $5.. pids to enrich. Modes: 'all' every process; 'run' only
// processes whose comm looks like a trainer (python*, node, torchrun, pt_main_thread, nsa-top*)
// plus the pids named and the parents of the trainer-looking ones (their launcher, whatever its
// comm: torch 2.x's torchrun is not "torchrun") — what findRunProcesses needs: a few hundred bytes;
// 'list' only the pids named. In 'all' and 'run', trainer-looking processes not in $4 are
// enriched too, so a refresh stays one command even when new trainers appear.
// Output: R <physical run dir> | J <env.json on one line> | U <uptime s> | C <wall clock s, read beside it> | T <clk_tck> <pagesize>
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
if read -r up idle < /proc/uptime; then printf 'U %s\\n' "$up"; printf 'C %s\\n' "$(date +%s.%N 2>/dev/null)"; fi
case $tk in 1) printf 'T %s %s\\n' "$(getconf CLK_TCK)" "$(getconf PAGESIZE)";; =*) printf 'T %s\\n' "\${tk#=}";; esac
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
    w=; read -r w < "$1/wchan"; printf 'S %s\\nW %s\\n' "$s" "$w"; seen="$seen $1 "
    # a trainer's parent is its launcher whatever its comm (torch 2.x's torchrun is not "torchrun"):
    # kept too, below (field 4 of the stat line, after comm's last ')')
    if [ -n "$t" ]; then r=\${s##*) }; r=\${r#* }; pp="$pp \${r%% *}"; fi
    [ "$mode" = run ] && tr="$tr $1/cmdline"
    if [ -n "$t" ] && [ "$mode" != list ]; then
      case $known in *" $1 "*) ;; *) en="$en $1";; esac
    fi
  fi
}
seen=' '
pp=
if [ "$mode" = list ]; then for p in "$@"; do st "$p"; done; else for p in [0-9]*; do st "$p"; done; fi
if [ "$mode" = run ]; then
  for p in $pp; do case $seen in *" $p "*) ;; *) [ "$p" -gt 1 ] && known="$known $p " && st "$p";; esac; done
fi
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

const ENV_KEYS = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'GROUP_RANK', 'NSA_TOP_RUN_DIR', 'CONFIG'] as const;

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
  return hostState.get(hostOf(host));
}

/** how far startedAtMs may lie from the true start: exact (uptime and the wall clock read together:
 * 10 ms ticks and uptime's 10 ms resolution), or loose (the wall clock read after the table) */
const EXACT_START_SLACK_MS = 100;
const LOOSE_START_SLACK_MS = 2000;

export interface RawSnapshot {
  procs: ProcInfo[];
  /** physical path of the run dir when it exists */
  runDirPhysical: string | null;
  /** env.json of the run dir (one line), when it exists */
  envJson: string | null;
  uptimeS: number | null;
  error?: string;
}

/** PROC_SCRIPT's positional arguments for a request. */
export function procScriptArgs(req: ProcTableRequest): string[] {
  return [req.runDir, req.sysconf ? '1' : '', req.mode, req.known.join(' '), ...req.pids.map(String)];
}

/** A table with nothing in it yet. */
export function emptyProcTable(): ProcTable {
  return {
    runDirPhysical: null,
    envJson: null,
    uptimeS: null,
    sysconf: null,
    procs: [],
    cwd: new Map(),
    nsPid: new Map(),
    cmdline: new Map(),
    environ: new Map(),
  };
}

/** PROC_SCRIPT's output → the table (over SSH and through exec; LocalHost builds it directly). */
export function parseProcScriptOutput(out: string): ProcTable {
  const markAt = out.indexOf(`${HEAD_MARK}\n`);
  const textPart = markAt >= 0 ? out.slice(0, markAt) : out;
  const headPart = markAt >= 0 ? out.slice(markAt + HEAD_MARK.length + 1) : '';
  const t = emptyProcTable();
  let lastStat: { stat: string; wchan: string } | null = null;
  for (const line of textPart.split('\n')) {
    const tag = line.slice(0, 2);
    const v = line.slice(2);
    if (tag === 'R ') t.runDirPhysical = v;
    else if (tag === 'J ') t.envJson = v;
    else if (tag === 'U ') t.uptimeS = Number(v) || null;
    else if (tag === 'C ') t.uptimeAtMs = /^\d{9,}\.\d{3,}$/.test(v) ? Number(v) * 1000 : null;
    else if (tag === 'X ') t.error = v;
    else if (tag === 'T ') {
      const [a, b] = v.split(' ').map(Number);
      t.sysconf = { clkTck: a && a > 0 ? a : 100, pageSize: b && b > 0 ? b : 4096 };
    } else if (tag === 'S ') t.procs.push((lastStat = { stat: v, wchan: '' }));
    else if (tag === 'W ' || line === 'W') {
      if (lastStat) lastStat.wchan = v;
      lastStat = null;
    } else if (tag === 'D ') {
      const sp = v.indexOf(' ');
      const pid = Number(v.slice(0, sp));
      if (sp > 0 && Number.isInteger(pid)) t.cwd.set(pid, v.slice(sp + 1));
    } else if (tag === 'N ') {
      const nums = v.trim().split(/\s+/).map(Number);
      if (nums.length > 1 && nums.every((n) => Number.isInteger(n) && n > 0)) t.nsPid.set(nums[0]!, nums.slice(1));
    }
  }
  for (const [name, content] of splitHeadOutput(headPart)) {
    const m = /^(?:\/proc\/)?(\d+)\/(cmdline|environ)$/.exec(name);
    if (m) (m[2] === 'cmdline' ? t.cmdline : t.environ).set(Number(m[1]), content);
  }
  // PROC_SCRIPT prints HEAD_MARK after every process's stat line: without it the reader died on the
  // way (killed with the session of a dropped link; seen in the two-node test: its node's table came
  // back without rank 1, which the cockpit then called gone instead of unreachable). An answer cut
  // short is no answer: the processes it lacks are not gone.
  if (markAt < 0 && !t.error) t.error = 'the process-table reader was cut short (its answer is incomplete)';
  return t;
}

/**
 * The 'run' table of `runDir` that a first read of this host's candidates would ask for, with no
 * pids named yet: what a look asks ahead (LookAhead.procs), before the run's heartbeats name pids.
 */
export function candidateRequestAhead(host: Host, runDir: string): ProcTableRequest {
  const known = stateFor(host);
  return { runDir, sysconf: !known, mode: 'run', known: known ? [...known.enriched.keys()] : [], pids: [] };
}

/**
 * Whether `table`, read for `ahead` (candidateRequestAhead), is the table `req` would read: the
 * same run dir, mode, first contact and known pids, and every pid `req` names was read closely
 * (its stat, cmdline and environ) because it looks like a trainer — PROC_SCRIPT enriches such a
 * pid whether named or not. A pid it does not cover (gone, or not trainer-looking: the script
 * would read it only when named) makes `req` a read of its own.
 */
export function tableCovers(ahead: ProcTableRequest, table: ProcTable, req: ProcTableRequest): boolean {
  if (req.runDir !== ahead.runDir || req.mode !== ahead.mode || req.sysconf !== ahead.sysconf) return false;
  if (ahead.pids.length > 0 || table.error) return false;
  const known = new Set(ahead.known);
  if (req.known.length !== known.size || req.known.some((p) => !known.has(p))) return false;
  const seen = new Set(table.procs.map((r) => Number(r.stat.slice(0, r.stat.indexOf(' ')))));
  return req.pids.every((p) => !known.has(p) && seen.has(p) && table.cmdline.has(p) && table.environ.has(p));
}

/** The table through the host's own reader when it has one, else by running PROC_SCRIPT. */
async function readTable(host: Host, req: ProcTableRequest): Promise<ProcTable | { error: string }> {
  // over SSH the script runs inside the watch loop when it can (no channel, no shell start-up)
  const light = host.readProcTable ? await host.readProcTable(req, EXEC_TIMEOUT_MS).catch(() => null) : null;
  if (light) return light;
  const r = await host.exec(['sh', '-c', PROC_SCRIPT, 'nsa-top-procs', ...procScriptArgs(req)], {
    timeoutMs: EXEC_TIMEOUT_MS,
    maxOutputBytes: 64 * 1024 * 1024,
  });
  if (r.timedOut) return { error: 'process table read timed out' };
  if (r.code !== 0) return { error: `process table read failed (exit ${r.code}): ${r.stderr.trim().slice(0, 200)}` };
  return parseProcScriptOutput(r.stdout);
}

/** The table → ProcInfo, with CPU % between refreshes and environ/cwd remembered per host. */
async function runScript(
  host: Host,
  runDir: string,
  mode: 'all' | 'run' | 'list',
  pids: number[],
): Promise<RawSnapshot> {
  const known = stateFor(host);
  for (const p of pids) if (!Number.isInteger(p) || p <= 0) throw new Error(`invalid pid ${p}`);
  // each pid once: the script would read a pid named twice twice, and a file that appears twice in
  // `head`'s output is untrustworthy (splitHeadOutput) — two ranks' heartbeats naming the same pid
  // (two nodes' pid namespaces) left both unread
  pids = [...new Set(pids)];
  const req: ProcTableRequest = {
    runDir,
    sysconf: !known,
    mode,
    known: known ? [...known.enriched.keys()] : [],
    pids,
  };
  const table = await readTable(host, req);
  if (!('procs' in table)) return { procs: [], runDirPhysical: null, envJson: null, uptimeS: null, error: table.error };
  const { uptimeS } = table;
  let st = known;
  if (table.sysconf || !st) {
    // first contact (without a T line when the script failed early: the usual values)
    st = { ...(table.sysconf ?? { clkTck: 100, pageSize: 4096 }), cpu: new Map(), enriched: new Map() };
    hostState.set(hostOf(host), st);
  }
  // pids enriched by this run: the ones asked for, and those the reader picked by comm
  const enrichSet = new Set([...pids, ...table.environ.keys(), ...table.cwd.keys()]);
  // the boot time from the wall clock read beside /proc/uptime (exact to ~10 ms), else from now
  // (off by however long the table took to read, and over SSH by the clock estimate)
  const exact = typeof table.uptimeAtMs === 'number' && Number.isFinite(table.uptimeAtMs);
  const nowMs = exact ? table.uptimeAtMs! : host.now();
  const bootMs = uptimeS !== null ? nowMs - uptimeS * 1000 : null;
  const nextCpu = new Map<string, { ticks: number; upS: number }>();
  const procs: ProcInfo[] = [];
  for (const row of table.procs) {
    const f = parseStat(row.stat);
    if (!f) continue;
    const w = row.wchan.trim();
    const wchan = w === '' || w === '0' ? null : w;
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
    const cmdRaw = table.cmdline.get(f.pid);
    const argvKey = cmdRaw ?? '';
    let enriched = st.enriched.get(f.pid);
    if (enrichSet.has(f.pid)) {
      const envRaw = table.environ.get(f.pid);
      enriched = {
        startTime: f.startTime,
        argvKey,
        env: envRaw != null ? parseEnviron(envRaw) : {},
        cwd: table.cwd.get(f.pid) ?? null,
        nsPid: table.nsPid.get(f.pid) ?? null,
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
      cpuTotalS: ticks / st.clkTck,
      ageS: uptimeS !== null ? Math.max(0, uptimeS - Number(f.startTime) / st.clkTck) : null,
      ...(bootMs !== null ? { startedAtSlackMs: exact ? EXACT_START_SLACK_MS : LOOSE_START_SLACK_MS } : {}),
    });
  }
  for (const [k, v] of nextCpu) st.cpu.set(k, v);
  if (uptimeS !== null) for (const [k, v] of st.cpu) if (uptimeS - v.upS > 120) st.cpu.delete(k);
  if (mode !== 'list') {
    // forget enrichment of processes that are gone
    const alive = new Set(procs.map((p) => p.pid));
    for (const pid of st.enriched.keys()) if (!alive.has(pid)) st.enriched.delete(pid);
  }
  return { procs, runDirPhysical: table.runDirPhysical, envJson: table.envJson, uptimeS, error: table.error };
}

/** One process, with environ and cwd, or null when it does not exist. */
export async function readProc(host: Host, pid: number): Promise<ProcInfo | null> {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const snap = await runScript(host, '', 'list', [pid]);
  if (snap.error && snap.procs.length === 0) throw new Error(snap.error);
  return snap.procs.find((p) => p.pid === pid) ?? null;
}

/** Several pids in one command (env and cwd included); those gone are left out. */
export async function readProcs(host: Host, pids: number[]): Promise<ProcInfo[]> {
  const want = [...new Set(pids.filter((pid) => Number.isInteger(pid) && pid > 0))];
  if (want.length === 0) return [];
  const snap = await runScript(host, '', 'list', want);
  if (snap.error && snap.procs.length === 0) throw new Error(snap.error);
  return snap.procs;
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

/**
 * The trainer-looking processes of the box ('run' mode: python*, node, torchrun, pt_main_thread,
 * nsa-top*, plus the pids named), and the run dir as the host resolves it. `enrich` says which of
 * them deserve environ and cwd: those not looked at yet cost one more command, the first time only.
 */
export async function readCandidateTable(
  host: Host,
  runDir: string,
  pidsFirst: number[],
  enrich: (p: ProcInfo) => boolean,
): Promise<RawSnapshot> {
  const st0 = stateFor(host);
  const snap = await runScript(
    host,
    runDir,
    'run',
    pidsFirst.filter((pid) => !st0?.enriched.has(pid)),
  );
  if (snap.error && snap.procs.length === 0) return snap;
  const st = stateFor(host)!;
  const missing = snap.procs.filter((p) => enrich(p) && !st.enriched.has(p.pid)).map((p) => p.pid);
  if (missing.length === 0) return snap;
  const more = await runScript(host, '', 'list', missing).catch(() => null);
  if (!more) return snap;
  const byPid = new Map(more.procs.map((p) => [p.pid, p]));
  return {
    ...snap,
    procs: snap.procs.map((p) => {
      const m = byPid.get(p.pid);
      return m && m.startTime === p.startTime ? { ...p, env: m.env, cwd: m.cwd, nsPid: m.nsPid } : p;
    }),
  };
}
