// LocalHost: the Host interface on this machine, with plain Node APIs.
import { spawn } from 'node:child_process';
import { constants as fsc } from 'node:fs';
import * as fs from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type {
  ConnState,
  DirEntry,
  DirPoll,
  ExecOptions,
  ExecResult,
  FileStat,
  Host,
  ReadRequest,
  ReadResult,
  SignalName,
  StreamHandle,
  StreamOptions,
} from './host.js';

const DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024;

function toStat(s: import('node:fs').Stats): FileStat {
  return { size: s.size, mtimeMs: s.mtimeMs, ino: s.ino, isDir: s.isDirectory(), isFile: s.isFile(), mode: s.mode };
}

export class LocalHost implements Host {
  readonly kind = 'local' as const;
  readonly label = 'local';
  /** inode last seen per path, to report replacement in pollDir */
  private readonly lastIno = new Map<string, number>();

  connState(): ConnState {
    return { state: 'local' };
  }

  async stat(path: string): Promise<FileStat | null> {
    try {
      return toStat(await fs.stat(path));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
      throw e;
    }
  }

  async list(dir: string): Promise<DirEntry[]> {
    const names = await fs.readdir(dir);
    const out: DirEntry[] = [];
    await Promise.all(
      names.map(async (name) => {
        try {
          const s = await fs.stat(join(dir, name));
          out.push({ name, isDir: s.isDirectory(), isFile: s.isFile(), size: s.size, mtimeMs: s.mtimeMs, ino: s.ino });
        } catch {
          /* vanished between readdir and stat */
        }
      }),
    );
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async readRange(path: string, start: number, end?: number): Promise<Buffer> {
    const fh = await fs.open(path, 'r');
    try {
      const size = (await fh.stat()).size;
      const stop = Math.min(end ?? size, size);
      if (stop <= start) return Buffer.alloc(0);
      const buf = Buffer.allocUnsafe(stop - start);
      let got = 0;
      while (got < buf.length) {
        const { bytesRead } = await fh.read(buf, got, buf.length - got, start + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return got === buf.length ? buf : buf.subarray(0, got);
    } finally {
      await fh.close();
    }
  }

  async readFile(path: string, maxBytes?: number): Promise<Buffer> {
    if (maxBytes === undefined) return fs.readFile(path);
    return this.readRange(path, 0, maxBytes);
  }

  private async readOne(req: ReadRequest): Promise<ReadResult> {
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(req.path, 'r');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      this.lastIno.delete(req.path);
      if (code === 'ENOENT') return { path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0) };
      return { path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0), error: `${code ?? 'error'}: ${(e as Error).message}` };
    }
    try {
      const st = toStat(await fh.stat());
      let offset = req.offset;
      let reset: ReadResult['reset'];
      const prevIno = this.lastIno.get(req.path);
      this.lastIno.set(req.path, st.ino);
      if (prevIno !== undefined && prevIno !== st.ino) {
        reset = 'replaced';
        offset = 0;
      } else if (st.size < offset) {
        reset = 'truncated';
        offset = 0;
      }
      const want = Math.max(0, Math.min(st.size - offset, req.maxBytes ?? Number.MAX_SAFE_INTEGER));
      const data = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await fh.read(data, got, want - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return { path: req.path, stat: st, offset, data: got === want ? data : data.subarray(0, got), reset };
    } catch (e) {
      return { path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0), error: (e as Error).message };
    } finally {
      await fh.close();
    }
  }

  async pollDir(dir: string, reads: ReadRequest[], subdirs: string[] = []): Promise<DirPoll> {
    const hostNowMs = Date.now();
    let entries: DirEntry[] | null = null;
    let error: string | undefined;
    try {
      entries = await this.list(dir);
    } catch (e) {
      error = `${(e as NodeJS.ErrnoException).code ?? 'error'}: ${(e as Error).message}`;
    }
    const sub: Record<string, DirEntry[] | null> = {};
    await Promise.all(
      subdirs.map(async (name) => {
        try {
          sub[name] = await this.list(join(dir, name));
        } catch {
          sub[name] = null;
        }
      }),
    );
    const results = await Promise.all(reads.map((r) => this.readOne(r)));
    return { dir, entries, subdirs: sub, reads: results, error, hostNowMs };
  }

  exec(argv: string[], opts: ExecOptions): Promise<ExecResult> {
    const started = Date.now();
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    return new Promise((resolve) => {
      const [cmd, ...args] = argv;
      if (!cmd) throw new Error('exec: empty argv');
      const child = spawn(cmd, args, {
        cwd: opts.cwd,
        env: opts.env ? { ...process.env, ...opts.env } : process.env,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true, // own process group, so a timeout kills the whole command
      });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outLen = 0;
      let errLen = 0;
      let timedOut = false;
      let settled = false;
      child.stdout.on('data', (b: Buffer) => {
        if (outLen < max) out.push(b);
        outLen += b.length;
      });
      child.stderr.on('data', (b: Buffer) => {
        if (errLen < max) err.push(b);
        errLen += b.length;
      });
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      }, opts.timeoutMs);
      const finish = (code: number | null, signal: string | null, spawnError?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({
          code: spawnError ? 127 : code,
          signal,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: spawnError ? `${spawnError.message}` : Buffer.concat(err).toString('utf8'),
          timedOut,
          durationMs: Date.now() - started,
        });
      };
      child.on('error', (e) => finish(null, null, e));
      child.on('close', (code, signal) => finish(code, signal));
      child.stdin.on('error', () => {});
      if (opts.input !== undefined) child.stdin.end(opts.input);
      else child.stdin.end();
    });
  }

  stream(argv: string[], opts: StreamOptions): StreamHandle {
    const [cmd, ...args] = argv;
    if (!cmd) throw new Error('stream: empty argv');
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ? { ...process.env, ...opts.env } : process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    createInterface({ input: child.stdout }).on('line', (l) => opts.onLine(l));
    const errLines = createInterface({ input: child.stderr });
    if (opts.onStderr) errLines.on('line', (l) => opts.onStderr!(l));
    const done = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.on('error', () => resolve({ code: 127, signal: null }));
      child.on('close', (code, signal) => resolve({ code, signal }));
    });
    return {
      done,
      stop() {
        try {
          if (child.pid) process.kill(-child.pid, 'SIGTERM');
        } catch {
          /* already gone */
        }
      },
    };
  }

  async signal(pid: number, sig: SignalName, expect?: { startTime: string }): Promise<void> {
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`refusing to signal pid ${pid}`);
    if (expect) {
      let stat: string;
      try {
        stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
      } catch {
        throw Object.assign(new Error(`pid ${pid} is gone`), { code: 'ESRCH' });
      }
      const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      if (start !== String(expect.startTime)) {
        throw Object.assign(new Error(`pid ${pid} is another process now (start time changed): not signalled`), { code: 'ESRCH' });
      }
    }
    process.kill(pid, sig === 'SIG0' ? 0 : sig);
  }

  async writeFile(path: string, data: string | Buffer, opts: { exclusive?: boolean; mode?: number } = {}): Promise<void> {
    await fs.writeFile(path, data, { flag: opts.exclusive ? 'wx' : 'w', mode: opts.mode });
  }

  async appendFile(path: string, data: string | Buffer): Promise<void> {
    // O_APPEND: concurrent appenders (two cockpits) never interleave within one short write
    const fh = await fs.open(path, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT, 0o644);
    try {
      await fh.write(typeof data === 'string' ? Buffer.from(data) : data);
    } finally {
      await fh.close();
    }
  }

  async mkdirp(path: string): Promise<void> {
    await fs.mkdir(path, { recursive: true });
  }

  async remove(path: string): Promise<void> {
    await fs.unlink(path);
  }

  now(): number {
    return Date.now();
  }

  async close(): Promise<void> {}
}
