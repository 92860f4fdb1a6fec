// The process-table reader of procs.ts (PROC_SCRIPT), done in-process for LocalHost: the same
// output, byte for byte in what the parser reads, without starting `sh`, `head` and `getconf`
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

const ENVIRON_MAX = 131072;
const ENV_JSON_MAX = 65536;

/** CLK_TCK and the page size from the auxiliary vector (AT_CLKTCK = 17, AT_PAGESZ = 6). */
function auxv(): { clkTck: number; pageSize: number } {
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
 * At most `max` bytes of a file, through the thread pool; null when it cannot be opened. The buffer
 * starts small and grows: a command line is usually a few hundred bytes, and `max` is 128 KiB.
 */
async function head(path: string, max: number): Promise<Buffer | null> {
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(path, 'r');
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
      const { bytesRead } = await fh.read(buf, got, buf.length - got, null);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => {});
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

const TRAINER_COMM = [' (python', ' (node)', ' (torchrun)', ' (pt_main_thread)', ' (nsa-top'];

/**
 * PROC_SCRIPT's output for `args` (runDir, '1'|'', mode, known pids, pids…), or null for arguments
 * it does not take (the caller then runs the script).
 */
export async function procTableLocal(args: string[]): Promise<Buffer | null> {
  const [rd = '', tk = '', mode = '', knownArg = '', ...pidArgs] = args;
  if (!/^(all|run|list)$/.test(mode) || !/^[\d ]*$/.test(knownArg) || pidArgs.some((p) => !/^\d+$/.test(p)))
    return null;
  const known = new Set([...knownArg.split(' ').filter(Boolean), ...pidArgs]);
  const out: string[] = [];
  if (rd) {
    const real = await realpathCached(rd);
    const isDir = real
      ? await fs.stat(real).then(
          (s) => s.isDirectory(),
          () => false,
        )
      : false;
    if (real && isDir) {
      out.push(`R ${real}\n`);
      const envFile = join(real, 'env.json');
      const st = await fs.stat(envFile).catch(() => null);
      if (st?.isFile()) {
        const j = await head(envFile, ENV_JSON_MAX);
        out.push(`J ${(j ?? Buffer.alloc(0)).toString('utf8').replace(/[\n\r]/g, ' ')}\n`);
      }
    }
  }
  const up = readSmall('/proc/uptime');
  if (up === null) return Buffer.from('X no /proc on this host\n');
  const upField = up.split(' ')[0];
  if (upField) out.push(`U ${upField}\n`);
  if (tk === '1') {
    const a = auxv();
    out.push(`T ${a.clkTck} ${a.pageSize}\n`);
  }
  const cmdlines: string[] = [];
  const enrich: string[] = [];
  // command lines already read for the node check below, reused for the head section
  const readBefore = new Map<string, Buffer | null>();
  const st = async (pid: string) => {
    const s = readSmall(`/proc/${pid}/stat`);
    if (s === null) return;
    let t = TRAINER_COMM.some((c) => s.includes(c));
    if (t && s.includes(' (node)')) {
      // node runs much besides nsa-top: keep it only when its command line names nsa-top
      const c = await head(`/proc/${pid}/cmdline`, ENVIRON_MAX);
      readBefore.set(`${pid}/cmdline`, c);
      if (!c || !c.toString('utf8').includes('nsa-top')) t = false;
    }
    if (mode === 'run' && !t && !known.has(pid)) return;
    const w = readSmall(`/proc/${pid}/wchan`) ?? '';
    out.push(`S ${s}\nW ${w}\n`);
    if (mode === 'run') cmdlines.push(pid);
    if (t && mode !== 'list' && !known.has(pid)) enrich.push(pid);
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
  for (const pid of all) await st(pid);
  const closer = [...pidArgs, ...enrich];
  for (const pid of closer) {
    const cwd = await fs.readlink(`/proc/${pid}/cwd`).catch(() => null);
    // `cd` into a deleted directory fails in the script: no D line either
    // (a cwd whose name holds a newline could forge lines for other pids: left out, as the script does)
    if (cwd !== null && !cwd.endsWith(' (deleted)') && !cwd.includes('\n')) out.push(`D ${pid} ${cwd}\n`);
    // NSpid with more than one entry: a nested pid namespace (a container)
    const status = await head(`/proc/${pid}/status`, 8192);
    const m = status ? /^NSpid:[ \t]*([^\n]*)$/m.exec(status.toString('latin1')) : null;
    if (m && /[^0-9]/.test(m[1]!.trim())) out.push(`N ${pid} ${m[1]!.trim()}\n`);
  }
  out.push('@@NSA-TOP-HEAD@@\n');
  const files: string[] = [];
  if (mode === 'all') files.push(...all.map((p) => `${p}/cmdline`), ...closer.map((p) => `${p}/environ`));
  else if (mode === 'run') files.push(...cmdlines.map((p) => `${p}/cmdline`), ...closer.map((p) => `${p}/environ`));
  else for (const p of closer) files.push(`${p}/cmdline`, `${p}/environ`);
  const bodies = await Promise.all(
    files.map((f) => (readBefore.has(f) ? readBefore.get(f)! : head(`/proc/${f}`, ENVIRON_MAX))),
  );
  const parts: Buffer[] = [Buffer.from(out.join(''))];
  let first = true;
  files.forEach((f, i) => {
    const b = bodies[i];
    if (!b) return; // head prints nothing for a file it cannot open
    parts.push(Buffer.from(`${first ? '' : '\n'}==> ${f} <==\n`), b);
    first = false;
  });
  return Buffer.concat(parts);
}
