// A Host that is the run's files as they stood at one moment (`at`): a listing holds the files
// written by then, a line file ends at its last record stamped at or before it, a file's mtime is
// that record's time, and the host's clock reads `at`. Nothing else is there: no process (exec
// answers "no process history"), no GPU, no host figures. The Observer (src/cockpit/observe.ts) runs
// on it unchanged, so every moment is judged by the one judge through the one observation.
//
// It never writes and never signals: those methods refuse (src/replay's rule in
// test/docs/boundaries.test.ts); the real Host under it is only read.
import { dirname, join } from 'node:path';
import type {
  ConnState,
  DirEntry,
  DirPoll,
  ExecResult,
  FileStat,
  Host,
  OwnWriteDone,
  ReadRequest,
  ReadResult,
  StreamHandle,
} from '../remote/host.js';
import { lastLineAt, sizeAt } from './dated.js';
import type { FilesIndex, IndexedFile } from './index-files.js';

/** what an effect on a recording answers */
export const REPLAY_REFUSAL = 'replay: a recording is only read — nothing is written to the run or signalled';

function refused(): Promise<never> {
  return Promise.reject(Object.assign(new Error(REPLAY_REFUSAL), { code: 'EROFS' }));
}

function enoent(path: string): Error {
  return Object.assign(new Error(`ENOENT: ${path} did not exist yet at that moment`), { code: 'ENOENT' });
}

export class AsOfHost implements Host {
  // not 'local': nothing of this machine (its CPUs, its nvidia-smi, its /proc) belongs to the recording
  readonly kind = 'ssh' as const;
  readonly label: string;

  constructor(
    private readonly idx: FilesIndex,
    /** the moment shown, ms epoch on the run host's clock */
    public at: number,
  ) {
    this.label = idx.host.label;
  }

  connState(): ConnState {
    return { state: 'local' };
  }

  now(): number {
    return this.at;
  }

  /** the file as it stood: its size and mtime then, or null when it was not written yet */
  private view(f: IndexedFile): { size: number; mtimeMs: number } | null {
    if (f.dated.at > this.at) return null;
    const cuts = f.dated.cuts;
    if (!cuts) return { size: f.entry.size, mtimeMs: f.dated.at };
    return { size: sizeAt(cuts, this.at), mtimeMs: lastLineAt(cuts, this.at) ?? f.dated.at };
  }

  private entryAt(dir: string, e: DirEntry): DirEntry | null {
    if (e.isDir) return e;
    const f = this.idx.files.get(join(dir, e.name));
    if (!f) return null;
    const v = this.view(f);
    return v ? { ...e, size: v.size, mtimeMs: v.mtimeMs } : null;
  }

  private listAt(dir: string): DirEntry[] | null {
    const all = this.idx.listed.get(dir);
    if (!all) return null;
    const out: DirEntry[] = [];
    for (const e of all) {
      const v = this.entryAt(dir, e);
      if (v) out.push(v);
    }
    return out;
  }

  /** a path in a listed directory that was never indexed did not exist when the run was read */
  private inIndexedDir(path: string): boolean {
    return this.idx.listed.has(dirname(path));
  }

  async stat(path: string): Promise<FileStat | null> {
    const f = this.idx.files.get(path);
    if (f) {
      const v = this.view(f);
      return v
        ? { size: v.size, mtimeMs: v.mtimeMs, ino: f.entry.ino, isDir: false, isFile: true, mode: 0o100444, nlink: 1 }
        : null;
    }
    if (this.idx.listed.has(path)) return this.idx.host.stat(path);
    if (this.inIndexedDir(path)) return null;
    // outside the run (a CONFIG yaml beside the trainer): as it is now
    return this.idx.host.stat(path);
  }

  async list(dir: string): Promise<DirEntry[]> {
    const l = this.listAt(dir);
    if (l) return l;
    if (this.inIndexedDir(dir)) throw enoent(dir);
    return this.idx.host.list(dir);
  }

  async readRange(path: string, start: number, end?: number): Promise<Buffer> {
    const f = this.idx.files.get(path);
    if (!f) {
      if (this.inIndexedDir(path)) throw enoent(path);
      return this.idx.host.readRange(path, start, end);
    }
    const v = this.view(f);
    if (!v) throw enoent(path);
    if (f.bytes) return f.bytes.subarray(Math.min(start, v.size), Math.min(end ?? v.size, v.size));
    return this.idx.host.readRange(path, start, end);
  }

  readFile(path: string, maxBytes?: number): Promise<Buffer> {
    return this.readRange(path, 0, maxBytes);
  }

  private readAt(r: ReadRequest): Promise<ReadResult> | ReadResult {
    const f = this.idx.files.get(r.path);
    if (!f) return { path: r.path, stat: null, offset: r.offset, data: Buffer.alloc(0) };
    const v = this.view(f);
    if (!v) return { path: r.path, stat: null, offset: r.offset, data: Buffer.alloc(0) };
    const stat: FileStat = {
      size: v.size,
      mtimeMs: v.mtimeMs,
      ino: f.entry.ino,
      isDir: false,
      isFile: true,
      mode: 0o100444,
      nlink: 1,
    };
    let offset = r.offset;
    let reset: ReadResult['reset'];
    if (offset > v.size) {
      offset = 0;
      reset = 'truncated';
    }
    const end = r.maxBytes !== undefined ? Math.min(v.size, offset + r.maxBytes) : v.size;
    if (f.bytes)
      return { path: r.path, stat, offset, data: f.bytes.subarray(offset, end), ...(reset ? { reset } : {}) };
    return this.idx.host.readRange(r.path, offset, end).then(
      (data) => ({ path: r.path, stat, offset, data, ...(reset ? { reset } : {}) }),
      (e: Error) => ({ path: r.path, stat, offset, data: Buffer.alloc(0), error: e.message }),
    );
  }

  async pollDir(dir: string, reads: ReadRequest[], subdirs: string[] = []): Promise<DirPoll> {
    const entries = this.listAt(dir);
    const sub: Record<string, DirEntry[] | null> = {};
    for (const s of subdirs) sub[s] = this.listAt(join(dir, s));
    return {
      dir,
      entries,
      subdirs: sub,
      reads: await Promise.all(reads.map((r) => this.readAt(r))),
      ...(entries ? {} : { error: `ENOENT: ${dir} is not part of the recording` }),
      hostNowMs: this.at,
    };
  }

  exec(): Promise<ExecResult> {
    return Promise.reject(new Error('replay: no process history (the trainer files record none)'));
  }

  stream(): StreamHandle {
    return { stop() {}, done: Promise.resolve({ code: null, signal: null }) };
  }

  signal(): Promise<void> {
    return refused();
  }
  writeFile(): Promise<void> {
    return refused();
  }
  appendFile(): Promise<void> {
    return refused();
  }
  mkdirp(): Promise<void> {
    return refused();
  }
  remove(): Promise<void> {
    return refused();
  }
  writeOwn(): Promise<OwnWriteDone | undefined> {
    return refused();
  }
  removeOwn(): Promise<void> {
    return refused();
  }

  async close(): Promise<void> {
    /* the real host is the caller's */
  }
}
