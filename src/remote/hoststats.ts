// The machine's own resources: RAM, swap, CPU, load, and the disks of the run's directories —
// what the Host panel shows and the judge's host rules (src/checks/rules/hostres.ts) read. Machines,
// not runs: the caller names the directories (the run dir, the checkpoint destination).
//
// Locally everything is read in-process (/proc/meminfo, /proc/loadavg, /proc/stat, statfs): no
// command per refresh. Over SSH one short `sh` command reads the same three files and `df -Pk` of
// the directories (each a quoted argument, never shell text); HostStatsReader runs it in the
// background at most every `sshEveryMs`, so a refresh never waits on it.
import { stat, statfs } from 'node:fs/promises';
import type { Host } from './host.js';
import { KeptProcFile } from './local/statfds.js';

export interface DiskStats {
  /** the directory asked about, and what it is to the run */
  path: string;
  role: string;
  /** the file system's mount point when the host said (df), else null */
  mount: string | null;
  totalMiB: number;
  /** what an unprivileged writer may still use */
  availMiB: number;
}

export interface HostStats {
  /** host wall time of the reading (ms epoch) */
  at: number;
  memTotalMiB: number | null;
  memAvailMiB: number | null;
  swapTotalMiB: number | null;
  swapFreeMiB: number | null;
  /** load average over 1, 5 and 15 minutes */
  load: [number, number, number] | null;
  /** busy share of all CPUs since the previous reading, % (null on the first) */
  cpuPct: number | null;
  /** disks of the directories asked about; one entry per file system (the first role wins) */
  disks: DiskStats[];
  /** parts that could not be read, each one phrase */
  errors: string[];
}

/** the fields of /proc/meminfo a reading uses */
const MEMINFO_KEYS = ['MemTotal', 'MemFree', 'MemAvailable', 'Buffers', 'Cached', 'SwapTotal', 'SwapFree'];

/** /proc/meminfo's fields in MiB (kB in the file); only `keys` when given (a reading every second
 * needs 7 of its ~55 lines). */
export function parseMeminfo(text: string, keys?: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (keys && !keys.includes(line.slice(0, line.indexOf(':')))) continue;
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]) / 1024;
  }
  return out;
}

export function parseLoadavg(text: string): [number, number, number] | null {
  const p = text.trim().split(/\s+/).slice(0, 3).map(Number);
  return p.length === 3 && p.every((x) => Number.isFinite(x) && x >= 0) ? (p as [number, number, number]) : null;
}

/** The `cpu` line of /proc/stat as busy and total ticks (iowait counts as idle). */
export function parseCpuLine(text: string): { busy: number; total: number } | null {
  const line = text.split('\n').find((l) => /^cpu\s/.test(l));
  if (!line) return null;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  if (v.length < 4 || v.some((x) => !Number.isFinite(x) || x < 0)) return null;
  // user nice system idle iowait irq softirq steal (guest is counted in user already)
  const total = v.slice(0, 8).reduce((s, x) => s + x, 0);
  const idle = v[3]! + (v[4] ?? 0);
  return { busy: total - idle, total };
}

export function cpuPctBetween(
  a: { busy: number; total: number } | null,
  b: { busy: number; total: number } | null,
): number | null {
  if (!a || !b || b.total <= a.total || b.busy < a.busy) return null;
  return Math.min(100, Math.max(0, (100 * (b.busy - a.busy)) / (b.total - a.total)));
}

/** `df -Pk` output: one row per path asked, in order (a header first). */
export function parseDfP(text: string): { mount: string; totalMiB: number; availMiB: number }[] {
  const rows: { mount: string; totalMiB: number; availMiB: number }[] = [];
  for (const line of text.split('\n').slice(1)) {
    // Filesystem 1024-blocks Used Available Capacity Mounted-on (the mount may hold blanks)
    const m = /^\S+\s+(\d+)\s+\d+\s+(\d+)\s+\d+%\s+(.+)$/.exec(line.trim());
    if (m) rows.push({ totalMiB: Number(m[1]) / 1024, availMiB: Number(m[2]) / 1024, mount: m[3]! });
  }
  return rows;
}

export interface DirAsked {
  path: string;
  role: string;
}

const procBuf = Buffer.allocUnsafe(16384);

/** the host's /proc files read every round, each kept open (./local/statfds.ts): a pread each, not an
 *  open, a read and a close */
const kept = new Map<string, KeptProcFile>();

/** The start of a /proc file (at most `max` bytes, one read), or null when it cannot be read. */
function procText(path: string, max: number): string | null {
  let f = kept.get(path);
  if (!f) kept.set(path, (f = new KeptProcFile(path)));
  return f.read(procBuf, max);
}

/** Assembles a reading from the raw texts (both hosts' paths end here). */
export function hostStatsFrom(
  raw: { meminfo: string | null; loadavg: string | null; cpu: { busy: number; total: number } | null },
  prevCpu: { busy: number; total: number } | null,
  disks: DiskStats[],
  at: number,
  errors: string[],
): HostStats {
  const mi = raw.meminfo ? parseMeminfo(raw.meminfo, MEMINFO_KEYS) : {};
  const memTotal = mi['MemTotal'] ?? null;
  // kernels before 3.14 have no MemAvailable: free + page cache is the old estimate
  const memAvail =
    mi['MemAvailable'] ??
    (mi['MemFree'] !== undefined ? mi['MemFree'] + (mi['Cached'] ?? 0) + (mi['Buffers'] ?? 0) : null);
  if (raw.meminfo === null) errors.push('memory not readable (/proc/meminfo)');
  return {
    at,
    memTotalMiB: memTotal,
    memAvailMiB: memAvail,
    swapTotalMiB: mi['SwapTotal'] ?? null,
    swapFreeMiB: mi['SwapFree'] ?? null,
    load: raw.loadavg ? parseLoadavg(raw.loadavg) : null,
    cpuPct: cpuPctBetween(prevCpu, raw.cpu),
    disks,
    errors,
  };
}

// one line: it rides the SSH watch loop (a quick exec), which takes single-line scripts only. The
// /proc files are read by the shell itself (no cat or head: a process each cost ~5 ms of the loop's
// time under load, and the loop answers the look's next request only after this one), and of
// /proc/meminfo only the lines read (MEMINFO_KEYS); df's last line (its row) likewise, `-` when it
// printed none
const SSH_SCRIPT =
  'exec 2>/dev/null; while IFS= read -r l; do case $l in MemTotal:*|MemFree:*|MemAvailable:*|Buffers:*|Cached:*|SwapTotal:*|SwapFree:*) printf \'%s\\n\' "$l";; esac; done < /proc/meminfo; echo @@; IFS= read -r l < /proc/loadavg && printf \'%s\\n\' "$l"; echo @@; IFS= read -r l < /proc/stat && printf \'%s\\n\' "$l"; echo @@; t=; command -v timeout >/dev/null && t=\'timeout 3\'; for p in "$@"; do $t df -Pk -- "$p" | { r=-; while IFS= read -r l; do r=$l; done; printf \'%s\\n\' "$r"; }; done';

/** The command an SSH reading runs for these directories (each once): a look-ahead asks it ahead
 * (LookAhead.execs), and a reading of the same directories takes that answer. */
export function hostStatsArgv(paths: string[]): string[] {
  return ['sh', '-c', SSH_SCRIPT, 'sh', ...new Set(paths)];
}

/**
 * Reads a host's resources. One per observer: it keeps the previous CPU ticks (CPU % is a rate)
 * and, over SSH, the newest reading while the next one is on its way.
 */
export class HostStatsReader {
  private prevCpu: { busy: number; total: number } | null = null;
  private last: HostStats | null = null;
  private inFlight: Promise<void> | null = null;
  private lastStart = 0;
  /** the last local reading of the disks, and of which directories */
  private disks: { key: string; at: number; disks: DiskStats[]; errors: string[] } | null = null;

  constructor(
    private readonly host: Host,
    private readonly o: { sshEveryMs?: number; localEveryMs?: number; localDisksEveryMs?: number } = {},
  ) {}

  /**
   * The newest reading of the directories asked. Locally it is read now (at most once a second); over SSH a new reading
   * is started when the last is older than sshEveryMs and the newest finished one is returned
   * (`wait`: wait for it — one-shot commands).
   */
  async read(dirs: DirAsked[], o: { wait?: boolean } = {}): Promise<HostStats | null> {
    if (this.host.kind === 'local') {
      // at most once a second: back-to-back rounds (a key burst, a one-shot after a round) reuse it
      if (this.last === null || Date.now() - this.lastStart >= (this.o.localEveryMs ?? 1000)) {
        this.lastStart = Date.now();
        this.last = await this.readLocal(dirs);
      }
      return this.last;
    }
    const every = this.o.sshEveryMs ?? 5000;
    if (!this.inFlight && (this.last === null || Date.now() - this.lastStart >= every)) {
      this.lastStart = Date.now();
      this.inFlight = this.readSsh(dirs)
        .then((s) => {
          this.last = s;
        })
        .catch(() => {})
        .finally(() => {
          this.inFlight = null;
        });
    }
    if (o.wait && this.inFlight) await this.inFlight;
    return this.last;
  }

  private async readLocal(dirs: DirAsked[]): Promise<HostStats> {
    const errors: string[] = [];
    // the kernel answers these from memory: read in place (a thread-pool round trip for each of
    // open/fstat/read/close cost more than the reading), /proc/stat only as far as its first line
    const meminfo = procText('/proc/meminfo', 16384);
    const loadavg = procText('/proc/loadavg', 256);
    const st = procText('/proc/stat', 1024);
    const cpu = st ? parseCpuLine(st) : null;
    // the disks (a stat and a statfs each, through the thread pool: a network mount may hang) every
    // localDisksEveryMs, and at once when the directories asked change
    const key = dirs.map((d) => `${d.role}\0${d.path}`).join('\0');
    if (this.disks && key === this.disks.key && Date.now() - this.disks.at < (this.o.localDisksEveryMs ?? 5000)) {
      errors.push(...this.disks.errors);
      const s = hostStatsFrom({ meminfo, loadavg, cpu }, this.prevCpu, this.disks.disks, this.host.now(), errors);
      if (cpu) this.prevCpu = cpu;
      return s;
    }
    const at = Date.now();
    const diskErrors: string[] = [];
    const disks: DiskStats[] = [];
    const devs = new Set<number>();
    for (const d of dirs) {
      try {
        const [s, f] = await Promise.all([stat(d.path), statfs(d.path)]);
        if (devs.has(s.dev)) continue;
        devs.add(s.dev);
        disks.push({
          path: d.path,
          role: d.role,
          mount: null,
          totalMiB: (f.blocks * f.bsize) / 2 ** 20,
          availMiB: (f.bavail * f.bsize) / 2 ** 20,
        });
      } catch (e) {
        diskErrors.push(
          `disk of ${d.role} not readable (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
        );
      }
    }
    this.disks = { key, at, disks, errors: diskErrors };
    errors.push(...diskErrors);
    const s = hostStatsFrom({ meminfo, loadavg, cpu }, this.prevCpu, disks, this.host.now(), errors);
    if (cpu) this.prevCpu = cpu;
    return s;
  }

  private async readSsh(dirs: DirAsked[]): Promise<HostStats> {
    // it rides the connection's watch loop (quick: no session of its own, one per look in all): the
    // /proc reads answer at once and df stats the run dir's and the checkpoints' file systems, which
    // the loop's own reads of the run depend on anyway; `timeout 3` bounds a slow df where it can
    // each directory once (the checkpoints in the run dir itself: one df)
    const paths = [...new Set(dirs.map((d) => d.path))];
    const r = await this.host.exec(hostStatsArgv(paths), { timeoutMs: 10_000, quick: true });
    const errors: string[] = [];
    const [meminfo, loadavg, cpuText, dfText] = r.stdout.split('@@\n');
    const cpu = cpuText ? parseCpuLine(cpuText) : null;
    const disks: DiskStats[] = [];
    const rows = (dfText ?? '').split('\n').filter((l) => l.length > 0);
    const mounts = new Set<string>();
    dirs.forEach((d) => {
      const i = paths.indexOf(d.path);
      const row = rows[i] && rows[i] !== '-' ? parseDfP(`header\n${rows[i]}`)[0] : undefined;
      if (!row) {
        errors.push(`disk of ${d.role} not readable (df)`);
        return;
      }
      if (mounts.has(row.mount)) return;
      mounts.add(row.mount);
      disks.push({ path: d.path, role: d.role, ...row });
    });
    const s = hostStatsFrom(
      { meminfo: meminfo?.includes('MemTotal') ? meminfo : null, loadavg: loadavg ?? null, cpu },
      this.prevCpu,
      disks,
      this.host.now(),
      errors,
    );
    if (cpu) this.prevCpu = cpu;
    return s;
  }
}
