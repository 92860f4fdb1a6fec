// The process-table reader of procs.ts (PROC_SCRIPT), done in-process for LocalHost: the same
// table as the script's output parsed, without starting `sh`, `head` and `getconf`
// every refresh. Spawning them from the cockpit cost more than everything else it does in a
// second (a fork of a ~90 MB process plus a shell walking /proc).
//
// What may block is kept off the main thread. /proc/PID/stat and wchan are read synchronously:
// the kernel answers them from the task struct. cmdline and environ are read through the thread
// pool: the kernel takes the target's mmap lock for them, and a rank stuck in D state holding it
// must stall this read, not the cockpit's keys. The run dir's realpath and env.json are read
// asynchronously too (the run dir may sit on a network file system).
import * as fsSync from 'node:fs';
import * as fs from 'node:fs/promises';
import { join } from 'node:path';
import type { ProcTable, ProcTableRequest } from '../host.js';
import { emptyProcTable } from '../procs.js';

const ENVIRON_MAX = 131072;
const ENV_JSON_MAX = 65536;

/** CLK_TCK and the page size from the auxiliary vector (AT_CLKTCK = 17, AT_PAGESZ = 6). */
export function auxv(): { clkTck: number; pageSize: number } {
  let clkTck = 100;
  let pageSize = 4096;
  try {
    const b = fsSync.readFileSync('/proc/self/auxv');
    for (let o = 0; o + 16 <= b.length; o += 16) {
      const type = Number(b.readBigUInt64LE(o));
      const val = Number(b.readBigUInt64LE(o + 8));
      if (type === 0) break;
      if (type === 17 && val > 0) clkTck = val;
      if (type === 6 && val > 0) pageSize = val;
    }
  } catch {
    /* not Linux, or 32-bit: the usual values */
  }
  return { clkTck, pageSize };
}

const small = Buffer.allocUnsafe(4096);

/** the first line of a small /proc file (stat, wchan, uptime): one read into a shared buffer */
function readSmall(path: string): string | null {
  let fd: number;
  try {
    fd = fsSync.openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    const n = fsSync.readSync(fd, small, 0, small.length, 0);
    const nl = small.indexOf(10);
    return small.toString('latin1', 0, nl >= 0 && nl < n ? nl : n);
  } catch {
    return null;
  } finally {
    fsSync.closeSync(fd);
  }
}

/**
 * /proc/PID/stat of this machine's processes, read in place (one open/read/close each, no thread
 * pool round trip: the kernel answers it from the task struct, so a process stuck in D cannot block
 * it); a pid without one is left out.
 */
export function statLinesLocal(pids: readonly number[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const pid of pids) {
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const s = readSmall(`/proc/${pid}/stat`);
    if (s) out.set(pid, s.trim());
  }
  return out;
}

/** callback fs wrapped once: cheaper than a FileHandle (an object, a finalizer, a promise per call) */
function cb<T>(f: (done: (e: NodeJS.ErrnoException | null, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => f((e, v) => (e ? reject(e) : resolve(v))));
}

/**
 * At most `max` bytes of a file, through the thread pool; null when it cannot be opened. The buffer
 * starts small and grows: a command line is usually a few hundred bytes, and `max` is 128 KiB.
 */
async function head(path: string, max: number): Promise<Buffer | null> {
  let fd: number;
  try {
    fd = await cb<number>((d) => fsSync.open(path, 'r', d));
  } catch {
    return null;
  }
  try {
    let buf = Buffer.allocUnsafe(Math.min(4096, max));
    let got = 0;
    while (got < max) {
      if (got === buf.length) {
        const bigger = Buffer.allocUnsafe(Math.min(max, buf.length * 2));
        buf.copy(bigger, 0, 0, got);
        buf = bigger;
      }
      const n = await cb<number>((d) => fsSync.read(fd, buf, got, buf.length - got, null, d));
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } catch {
    return null;
  } finally {
    await cb<void>((d) => fsSync.close(fd, (e) => d(e, undefined))).catch(() => {});
  }
}

// The run dir's physical path, refreshed every 30 s: resolving it is the costliest call of a
// refresh (a thread-pool round trip per path component) and it changes only if someone moves a
// symlink under a live run.
const realpaths = new Map<string, { at: number; real: string }>();
async function realpathCached(rd: string): Promise<string | null> {
  const known = realpaths.get(rd);
  if (known && Date.now() - known.at < 30_000) return known.real;
  const real = await fs.realpath(rd).catch(() => null);
  // a run dir that does not exist yet is looked up again next time
  if (real !== null) realpaths.set(rd, { at: Date.now(), real });
  return real;
}

/** env.json per run dir, with the stat it was read under */
const envJsons = new Map<string, { key: string; text: string }>();

const TRAINER_COMM = [' (python', ' (node)', ' (torchrun)', ' (pt_main_thread)', ' (nsa-top'];

// A node process whose command line does not name nsa-top (an editor's server, tsc, npm…), by pid and
// start time: its command line is not read again every refresh — on a developer's box a dozen such
// processes cost more thread-pool reads than the run itself. Looked at again after NODE_RECHECK_MS
// (a process may exec another node program in place, keeping its pid and start time).
const NODE_RECHECK_MS = 5000;
const notNsaTop = new Map<string, { startTime: string; at: number }>();

// 'run' mode (what findRunProcesses reads, every second in the watchdog) wants trainer-looking
// processes only, but learns which those are from each /proc/PID/stat: three system calls for every
// process of the box, every refresh, nearly all of them shells, daemons and kernel threads. A process
// seen not to look like a trainer (and not named by the caller) is skipped until the next full scan,
// at most FULL_SCAN_MS later: a new pid is read at once; only a process that turns into a trainer in
// place (an exec keeping its pid) waits for the full scan. 'all' and 'list' read everything they name.
//
// The verdict on a process that was already QUIET_FIRM_AGE_S old when it was judged outlasts the
// full scans too (the cockpit reads the table every 5 s, so every read was a full scan: a stat of
// every process of the box, the largest part of its reading the table): it is looked at again
// QUIET_RECHECK_MS after it was judged, or when the pid leaves /proc. What a firm verdict can miss
// for that long is an old process that execs into a trainer in place. Two cases are covered sooner:
// a launcher script that sets up and then `exec torchrun …` is read again in the very scan that
// finds its new ranks (a kept process's parent is never skipped), and a rank is named by its own
// heartbeats (a pid the caller names is always read). A young process (a fork on its way to exec)
// never gets a firm verdict. The verdict is kept by pid: a pid the kernel hands out again must first
// run through every other pid (they are handed out in turn), which no box does between two scans.
const FULL_SCAN_MS = 5000;
const QUIET_FIRM_AGE_S = 30;
const QUIET_RECHECK_MS = 30_000;
/** the timings above, in one place tests may shorten */
export const quietTuning = { fullScanMs: FULL_SCAN_MS, firmAgeS: QUIET_FIRM_AGE_S, recheckMs: QUIET_RECHECK_MS };
/** pid → when a firm verdict (not a trainer) was reached; 0: until the next full scan only */
const quiet = new Map<string, number>();
let fullScanAt = 0;
let clkTck: number | null = null;

// Command lines of the trainer-looking processes, by pid, with the stat identity (statIdentity) they
// were read under. 'run' mode sends every kept process's command line, every refresh (the watchdog
// refreshes once a second): each was a thread-pool open/read/read/close, four round trips, for text
// that is fixed once a process has exec'd. An exec in place changes the identity (comm, and where
// the new image is mapped), so it is read again at once; a process that rewrites its own argv
// (setproctitle), or execs where its mappings cannot be seen, is read again after CMDLINE_RECHECK_MS
// (longer than the cockpit's 5 s between reads of the table, or every read would miss). An empty one
// (a zombie, a kernel thread) is never kept.
const CMDLINE_RECHECK_MS = 30_000;
const cmdlines = new Map<string, { key: string; at: number; body: Buffer }>();

/**
 * What changes in a stat line when a pid is reused or the process execs: the start time, comm, and
 * where the new image's code and stack were mapped (fields 26 and 28, randomised anew by every exec,
 * even of the same program; 0 when the process is not ours to trace). null for a zombie, whose
 * command line the kernel empties.
 */
function statIdentity(s: string): string | null {
  const open = s.indexOf('(');
  const close = s.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const f = s.slice(close + 2).split(' ', 26);
  if (f[0] === 'Z' || f[0] === 'X' || f[19] === undefined) return null;
  return `${f[19]}:${f[23] ?? ''}:${f[25] ?? ''}:${s.slice(open, close)}`;
}

async function cmdlineOf(pid: string, s: string, now: number): Promise<Buffer | null> {
  const key = statIdentity(s);
  const known = cmdlines.get(pid);
  if (known && key !== null && known.key === key && now - known.at < CMDLINE_RECHECK_MS && now >= known.at)
    return known.body;
  const b = await head(`/proc/${pid}/cmdline`, ENVIRON_MAX);
  if (b && b.length > 0 && key !== null) cmdlines.set(pid, { key, at: now, body: b });
  else cmdlines.delete(pid);
  return b;
}

/** field 22 of a stat line (start time), or null */
function statStartTime(s: string): string | null {
  const close = s.lastIndexOf(')');
  if (close < 0) return null;
  return s.slice(close + 2).split(' ', 20)[19] ?? null;
}

/** field 4 of a stat line (the parent's pid), or null */
function parentOf(s: string): string | null {
  const close = s.lastIndexOf(')');
  if (close < 0) return null;
  return s.slice(close + 2).split(' ', 2)[1] ?? null;
}

/** The process table as PROC_SCRIPT reads it (same modes, same choices), read in-process. */
export async function procTableLocal(req: ProcTableRequest): Promise<ProcTable> {
  const { mode } = req;
  const pidArgs = req.pids.map(String);
  const known = new Set([...req.known.map(String), ...pidArgs]);
  const t = emptyProcTable();
  if (req.runDir) {
    const real = await realpathCached(req.runDir);
    // env.json's stat answers for the run dir too (a file in it: the dir exists and is one); the
    // dir itself is looked at only when env.json is not there
    const envFile = real ? join(real, 'env.json') : null;
    const st = envFile ? await fs.stat(envFile).catch(() => null) : null;
    const isDir =
      st !== null ||
      (real
        ? await fs.stat(real).then(
            (s) => s.isDirectory(),
            () => false,
          )
        : false);
    if (real && isDir) {
      t.runDirPhysical = real;
      if (st?.isFile()) {
        // re-read only when it changed (a trainer writes it once, at start)
        const key = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
        const known = envJsons.get(envFile!);
        if (known?.key === key) t.envJson = known.text;
        else {
          const j = await head(envFile!, ENV_JSON_MAX);
          t.envJson = (j ?? Buffer.alloc(0)).toString('utf8').replace(/[\n\r]/g, ' ');
          if (j) {
            if (envJsons.size > 64) envJsons.clear();
            envJsons.set(envFile!, { key, text: t.envJson });
          }
        }
      }
    }
  }
  const up = readSmall('/proc/uptime');
  t.uptimeAtMs = Date.now();
  if (up === null) return { ...t, error: 'no /proc on this host' };
  const upField = up.split(' ')[0];
  if (upField) t.uptimeS = Number(upField) || null;
  if (req.sysconf) t.sysconf = auxv();
  const wanted: string[] = [];
  /** the stat line of each kept pid: its command line is read again only when it changed */
  const statOf = new Map<string, string>();
  const enrich: string[] = [];
  // command lines already read for the node check below, reused below
  const readBefore = new Map<string, Buffer | null>();
  const now = Date.now();
  const full = mode !== 'run' || now - fullScanAt >= quietTuning.fullScanMs || now < fullScanAt;
  if (mode === 'run' && full) {
    fullScanAt = now;
    for (const [pid, at] of quiet) if (at === 0 || now - at >= quietTuning.recheckMs || now < at) quiet.delete(pid);
  }
  const upS = t.uptimeS;
  clkTck ??= auxv().clkTck;
  /** pids skipped this time (a kept process's parent among them is read after all) */
  const skipped = new Set<string>();
  /** pids whose stat was read: the others (gone, or never there) have no cwd, status or environ to read */
  const present = new Set<string>();
  const st = async (pid: string) => {
    if (mode === 'run' && quiet.has(pid) && !known.has(pid)) {
      skipped.add(pid);
      return;
    }
    const s = readSmall(`/proc/${pid}/stat`);
    if (s === null) return;
    present.add(pid);
    let isTrainer = TRAINER_COMM.some((c) => s.includes(c));
    if (isTrainer && s.includes(' (node)')) {
      // node runs much besides nsa-top: keep it only when its command line names nsa-top
      const start = statStartTime(s);
      const seen = notNsaTop.get(pid);
      if (seen && start !== null && seen.startTime === start && now - seen.at < NODE_RECHECK_MS) isTrainer = false;
      else {
        const c = await cmdlineOf(pid, s, now);
        readBefore.set(`${pid}/cmdline`, c);
        if (!c || !c.toString('utf8').includes('nsa-top')) {
          isTrainer = false;
          // (an unreadable one, gone or caught mid-exec, is read again next time)
          if (c && c.length > 0 && start !== null) notNsaTop.set(pid, { startTime: start, at: now });
        } else notNsaTop.delete(pid);
      }
    }
    if (mode === 'run' && !isTrainer && !known.has(pid)) {
      // firm only for a process old enough not to be a fork on its way to exec
      const start = statStartTime(s);
      const age = upS !== null && start !== null ? upS - Number(start) / clkTck! : null;
      quiet.set(pid, age !== null && age >= quietTuning.firmAgeS ? now : 0);
      return;
    }
    quiet.delete(pid);
    t.procs.push({ stat: s, wchan: readSmall(`/proc/${pid}/wchan`) ?? '' });
    if (mode === 'run') {
      wanted.push(pid);
      statOf.set(pid, s);
    }
    if (isTrainer && mode !== 'list' && !known.has(pid)) enrich.push(pid);
  };
  let all: string[];
  if (mode === 'list') all = pidArgs;
  else {
    try {
      all = fsSync
        .readdirSync('/proc')
        .filter((n) => /^[0-9]/.test(n))
        .sort();
    } catch {
      all = [];
    }
  }
  // not the process reading the table (a status, a cockpit, a watchdog: nsa-top's own tool, never a
  // rank of any run) unless the caller names it: its command line names the run dir, and proving it
  // a tool cost a status ~13 thread-pool round trips (a wake each) and every later read ~9
  const own = String(process.pid);
  for (const pid of all) if (mode !== 'run' || pid !== own || known.has(pid)) await st(pid);
  if (mode === 'run') {
    // the parent of a kept process is read even when judged quiet: a launcher that exec'd in place
    // is found with its ranks (and its own parent in turn)
    // — and a trainer's parent is kept whatever its comm: its launcher (torch 2.x's torchrun is not
    // "torchrun": on an H100 the launcher was never in the table, so a rank's death under a
    // supervisor read as a hang instead of the restart's teardown), as the script does
    for (let i = 0; i < t.procs.length; i++) {
      const s = t.procs[i]!.stat;
      const ppid = parentOf(s);
      if (ppid === null || statOf.has(ppid) || Number(ppid) <= 1) continue;
      const trainer = TRAINER_COMM.some((c) => s.includes(c));
      if (skipped.delete(ppid) || trainer) {
        if (trainer) known.add(ppid);
        quiet.delete(ppid);
        await st(ppid);
      }
    }
  }
  if (mode !== 'list') {
    // forget the verdicts on processes that are gone
    const listed = new Set(all);
    for (const pid of notNsaTop.keys()) if (!listed.has(pid)) notNsaTop.delete(pid);
    for (const pid of quiet.keys()) if (!listed.has(pid)) quiet.delete(pid);
    for (const pid of cmdlines.keys()) if (!listed.has(pid)) cmdlines.delete(pid);
  }
  // the named pids that are there (a heartbeat's pid of a rank long gone has nothing to read), and the
  // trainers found, each looked at side by side: their round trips share the caller's wakes
  const closer = [...pidArgs.filter((p) => present.has(p)), ...enrich];
  const looked = await Promise.all(
    closer.map((pid) =>
      Promise.all([fs.readlink(`/proc/${pid}/cwd`).catch(() => null), head(`/proc/${pid}/status`, 8192)]),
    ),
  );
  closer.forEach((pid, i) => {
    const [cwd, status] = looked[i]!;
    // `cd` into a deleted directory fails in the script: no cwd either
    // (a cwd whose name holds a newline could forge lines for other pids there: left out here too)
    if (cwd !== null && !cwd.endsWith(' (deleted)') && !cwd.includes('\n')) t.cwd.set(Number(pid), cwd);
    // NSpid with more than one entry: a nested pid namespace (a container)
    const m = status ? /^NSpid:[ \t]*([^\n]*)$/m.exec(status.toString('latin1')) : null;
    const ns = m ? m[1]!.trim().split(/\s+/).map(Number) : [];
    if (ns.length > 1 && ns.every((n) => Number.isInteger(n) && n > 0)) t.nsPid.set(Number(pid), ns);
  });
  const files: (readonly [string, 'cmdline' | 'environ'])[] = [];
  if (mode === 'all')
    files.push(...all.map((p) => [p, 'cmdline'] as const), ...closer.map((p) => [p, 'environ'] as const));
  else if (mode === 'run')
    files.push(...wanted.map((p) => [p, 'cmdline'] as const), ...closer.map((p) => [p, 'environ'] as const));
  else for (const p of closer) files.push([p, 'cmdline'], [p, 'environ']);
  const bodies = await Promise.all(
    files.map(([pid, f]) =>
      readBefore.has(`${pid}/${f}`)
        ? readBefore.get(`${pid}/${f}`)!
        : f === 'cmdline' && statOf.has(pid)
          ? cmdlineOf(pid, statOf.get(pid)!, now)
          : head(`/proc/${pid}/${f}`, ENVIRON_MAX),
    ),
  );
  files.forEach(([pid, f], i) => {
    const b = bodies[i];
    if (!b) return; // a file that cannot be opened is not read (as `head` prints nothing for it)
    (f === 'cmdline' ? t.cmdline : t.environ).set(Number(pid), b.toString('utf8'));
  });
  return t;
}
