// /proc/PID/stat (and wchan) of the same few pids, every round (the cockpit's and the watchdog's look at each
// proven rank, the supervisor's liveness): each file is opened once and read again in place (pread
// at 0: the kernel renders it afresh on every read), instead of an open, a read and a close per pid
// per round — the open walks /proc's path and allocates its dentry each time (~17 → ~4 µs a read).
//
// A kept fd is bound to the process it was opened on, not to the number: once that process is gone
// (reaped) the read fails (ESRCH), the fd is closed and the path opened afresh, which gives what a
// fresh open gives — nothing (no such process) or the stat of whatever now has that pid (its start
// time then differs, and the caller calls it dead). So a kept fd never shows another process's stat
// as this one's, and a read tells exactly what statLinesLocal's open-read-close would.
import * as fsSync from 'node:fs';

const buf = Buffer.allocUnsafe(4096);

/** One read of an open /proc stat fd at offset 0: its first line, or null (the process is gone). */
function readAt0(fd: number): string | null {
  try {
    const n = fsSync.readSync(fd, buf, 0, buf.length, 0);
    if (n <= 0) return null;
    const nl = buf.indexOf(10);
    return buf.toString('latin1', 0, nl >= 0 && nl < n ? nl : n);
  } catch {
    return null;
  }
}

function closeAll(fds: Map<number, number>): void {
  for (const fd of fds.values())
    try {
      fsSync.closeSync(fd);
    } catch {
      /* already closed */
    }
  fds.clear();
}

/** an owner dropped without close() (a watchdog made and forgotten in a test) leaks no fd */
const leftOpen = new FinalizationRegistry<Map<number, number>>(closeAll);

export class ProcStatFds {
  private readonly fds = new Map<number, number>();

  /** `file`: which of /proc/PID's one-line files (stat, wchan) */
  constructor(private readonly file: 'stat' | 'wchan' = 'stat') {
    leftOpen.register(this, this.fds, this);
  }

  /** pid → the first line of its /proc/PID/<file> now (a pid missing: no such process, or nothing
   *  to read); fds of pids not asked are closed. */
  lines(pids: readonly number[]): Map<number, string> {
    const out = new Map<number, string>();
    const asked = new Set<number>();
    for (const pid of pids) {
      if (!Number.isInteger(pid) || pid <= 0 || asked.has(pid)) continue;
      asked.add(pid);
      let line: string | null = null;
      const kept = this.fds.get(pid);
      if (kept !== undefined) {
        line = readAt0(kept);
        if (line === null) this.drop(pid);
      }
      if (line === null) {
        let fd: number;
        try {
          fd = fsSync.openSync(`/proc/${pid}/${this.file}`, 'r');
        } catch {
          continue;
        }
        line = readAt0(fd);
        if (line === null) fsSync.closeSync(fd);
        else this.fds.set(pid, fd);
      }
      if (line !== null) out.set(pid, line.trim());
    }
    for (const pid of [...this.fds.keys()]) if (!asked.has(pid)) this.drop(pid);
    return out;
  }

  /** how many fds are kept open (tests) */
  get open(): number {
    return this.fds.size;
  }

  /** closes every kept fd (the next lines() opens them again) */
  close(): void {
    closeAll(this.fds);
  }

  private drop(pid: number): void {
    const fd = this.fds.get(pid);
    this.fds.delete(pid);
    if (fd === undefined) return;
    try {
      fsSync.closeSync(fd);
    } catch {
      /* already closed */
    }
  }
}

/**
 * One of the host's own /proc files (meminfo, loadavg, stat), kept open and read again at 0 each
 * round: the kernel renders it afresh on every read from the start. A failed read closes it; the
 * next read opens it again.
 */
export class KeptProcFile {
  private fd: number | null = null;

  constructor(readonly path: string) {}

  /** the file's first `max` bytes now (one read into `into`), or null when it cannot be read */
  read(into: Buffer, max: number): string | null {
    for (let attempt = 0; attempt < 2; attempt++) {
      const fresh = this.fd === null;
      if (fresh)
        try {
          this.fd = fsSync.openSync(this.path, 'r');
        } catch {
          return null;
        }
      try {
        const n = fsSync.readSync(this.fd!, into, 0, Math.min(max, into.length), 0);
        return into.toString('latin1', 0, n);
      } catch {
        this.close();
        if (fresh) return null;
      }
    }
    return null;
  }

  close(): void {
    if (this.fd === null) return;
    try {
      fsSync.closeSync(this.fd);
    } catch {
      /* already closed */
    }
    this.fd = null;
  }
}
