// The run's files, read once through the Host and dated (dated.ts): what `asof.ts` serves as the
// run dir "as it stood at time t". Line files (heartbeats, the CSVs, the log, nsa-top's own
// records) are kept in memory and cut line by line; every other file is whole, present from the
// moment it was written, and read through the Host when asked for (a checkpoint is never read).
import { basename, join } from 'node:path';
import type { DirEntry, Host } from '../remote/host.js';
import { classify } from '../trainer/run/readers/names.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import {
  type Cut,
  dateJsonLines,
  dateLog,
  dateStepCsv,
  type DatedFile,
  dumpTime,
  haltSeenAt,
  heartbeatSteps,
  mtimeBelievable,
  type StepTime,
} from './dated.js';

/** line files are read whole up to this; past it, their first part only (and `missing` says so) */
export const LINE_FILE_CAP = 64 * 1024 * 1024;

export interface IndexedFile {
  path: string;
  entry: DirEntry;
  dated: DatedFile;
  /** a line file's bytes (cut by dated.cuts) */
  bytes?: Buffer;
}

export interface FilesIndex {
  host: Host;
  dirs: RunDirs;
  /** every directory listed, by path: its entries (files and subdirectories) */
  listed: Map<string, DirEntry[]>;
  files: Map<string, IndexedFile>;
  /** rank 0's (else the lowest rank's) step times, in file order */
  steps: StepTime[];
  /** every heartbeat boot after the first: a relaunch (or a rank restarted), ms */
  boots: number[];
  /** the moments the records date (heartbeats, dumps, nsa-top's records); null: none */
  records: { start: number; end: number } | null;
  /** files whose time is a guess (their mtime is not believable), by name */
  guessed: string[];
  /** files bigger than LINE_FILE_CAP, replayed from their start only */
  capped: string[];
}

type LineKind = 'jsonl' | 'csv' | 'log';

function lineKind(name: string, inNsa: boolean): LineKind | null {
  if (inNsa) return name.endsWith('.jsonl') ? 'jsonl' : null;
  const k = classify(name).kind;
  if (k === 'heartbeat' || k === 'heartbeat-smoke') return 'jsonl';
  if (k === 'training-csv' || k === 'val-csv' || k === 'k-stats' || k === 'fallback-counters') return 'csv';
  if (k === 'log') return 'log';
  return null;
}

/** Reads and dates the run's files (its out_dir, its launcher dir, their .nsa-top/ and tb/). */
export async function indexRun(host: Host, dirs: RunDirs): Promise<FilesIndex> {
  const listed = new Map<string, DirEntry[]>();
  const roots = [...new Set([dirs.outDir, dirs.runDir])];
  const dirsToList: { dir: string; nsa: boolean }[] = [];
  for (const r of roots) dirsToList.push({ dir: r, nsa: false }, { dir: join(r, NSA_DIR), nsa: true });
  dirsToList.push({ dir: join(dirs.outDir, 'tb'), nsa: false });
  const lineFiles: { path: string; entry: DirEntry; kind: LineKind; bytes: Buffer }[] = [];
  const wholeFiles: { path: string; entry: DirEntry; nsa: boolean }[] = [];
  const capped: string[] = [];
  for (const { dir, nsa } of dirsToList) {
    if (listed.has(dir)) continue;
    const entries = await host.list(dir).catch(() => null);
    if (!entries) continue;
    listed.set(dir, entries);
    for (const e of entries) {
      if (!e.isFile) continue;
      const path = join(dir, e.name);
      const lk = lineKind(e.name, nsa);
      if (lk) {
        const bytes = await host.readFile(path, LINE_FILE_CAP).catch(() => Buffer.alloc(0));
        if (e.size > LINE_FILE_CAP) capped.push(e.name);
        lineFiles.push({ path, entry: e, kind: lk, bytes });
      } else wholeFiles.push({ path, entry: e, nsa });
    }
  }

  // the step clock: rank 0's heartbeats (else the lowest rank's, else the smoke variant's)
  const hbs = lineFiles
    .filter((f) => f.kind === 'jsonl' && /^heartbeat(_rank\d+)?\.jsonl$/.test(f.entry.name))
    .map((f) => {
      const k = classify(f.entry.name);
      return { f, rank: k.kind === 'heartbeat' ? k.rank : 0, ...heartbeatSteps(f.bytes) };
    })
    .sort((a, b) => a.rank - b.rank);
  const clockHb = hbs.find((h) => h.steps.length > 0) ?? hbs[0];
  const steps = clockHb?.steps ?? [];
  const firstBoot = Math.min(...hbs.flatMap((h) => h.boots.slice(0, 1)), Infinity);
  // a boot of rank 0 after it had stepped: the run was relaunched (or a rank restarted in place)
  const boots = (clockHb?.boots ?? []).filter((b) => steps.some((s) => s.at < b));

  // what the records date: every JSON line's ts, the dumps by their own time
  const times: number[] = [];
  const dated = new Map<string, IndexedFile>();
  const dumpHeads = new Map<string, number | null>();
  for (const w of wholeFiles)
    if (classify(w.entry.name).kind === 'stackdump') {
      const head = await host
        .readRange(w.path, 0, 256)
        .then((b) => b.toString('utf8'))
        .catch(() => null);
      const at = dumpTime(w.entry.name, head);
      dumpHeads.set(w.path, at);
      if (at !== null) times.push(at);
    }
  const jsonCuts = new Map<string, Cut[]>();
  for (const f of lineFiles)
    if (f.kind === 'jsonl') {
      const cuts = dateJsonLines(f.bytes, f.entry.mtimeMs);
      jsonCuts.set(f.path, cuts);
      if (cuts.length) times.push(cuts[0]!.at, cuts.at(-1)!.at);
    }
  const records = times.length ? { start: Math.min(...times), end: Math.max(...times) } : null;
  const start = records?.start ?? Math.min(...lineFiles.map((f) => f.entry.mtimeMs), Date.now());
  const end = records?.end ?? Math.max(...[...lineFiles, ...wholeFiles].map((f) => f.entry.mtimeMs), start);

  let logHaltAt: number | null = null;
  for (const f of lineFiles) {
    const fallback = mtimeBelievable(f.entry.mtimeMs, records) ? Math.min(f.entry.mtimeMs, end) : end;
    // a line that nothing dates is shown no earlier than the end of what the records date
    const tail = steps.length || records ? end : fallback;
    const cuts =
      f.kind === 'jsonl'
        ? jsonCuts.get(f.path)!
        : f.kind === 'csv'
          ? dateStepCsv(f.bytes, steps, tail)
          : dateLog(f.bytes, steps, tail, Number.isFinite(firstBoot) ? firstBoot : undefined);
    if (f.kind === 'log') logHaltAt ??= haltSeenAt(f.bytes, cuts);
    const how = f.kind === 'jsonl' || steps.length ? 'records' : 'mtime';
    dated.set(f.path, {
      path: f.path,
      entry: f.entry,
      bytes: f.bytes,
      dated: { name: f.entry.name, at: cuts[0]?.at ?? fallback, cuts, how },
    });
  }

  const guessed: string[] = [];
  const firstStepOf = (n: number) => steps.find((s) => s.step === n)?.at ?? null;
  for (const w of wholeFiles) {
    const name = w.entry.name;
    const k = classify(name).kind;
    let at: number | null = null;
    let how: DatedFile['how'] = 'records';
    if (k === 'stackdump') at = dumpHeads.get(w.path) ?? null;
    if (at === null && mtimeBelievable(w.entry.mtimeMs, records)) {
      at = w.entry.mtimeMs;
      how = 'mtime';
    }
    if (at === null) {
      // the mtime is a copy's: placed by what the file is
      const ck = classify(name);
      if (ck.kind === 'checkpoint') at = firstStepOf(ck.step);
      else if (ck.kind === 'halt') at = logHaltAt;
      if (at === null) {
        how = 'guess';
        const atBoot =
          ck.kind === 'env-json' || ck.kind === 'config-yaml' || ck.kind === 'opt-state' || ck.kind === 'other';
        at = atBoot && !w.nsa ? start : end;
        guessed.push(name);
      }
    }
    dated.set(w.path, { path: w.path, entry: w.entry, dated: { name, at, how } });
  }
  return { host, dirs, listed, files: dated, steps, boots, records, guessed, capped };
}

/** The span the index covers: its first and last dated moment. */
export function spanOf(idx: FilesIndex): { start: number; end: number } {
  let start = Infinity;
  let end = -Infinity;
  for (const f of idx.files.values()) {
    const a = f.dated.at;
    const z = f.dated.cuts?.length ? f.dated.cuts.at(-1)!.at : a;
    if (a < start) start = a;
    if (z > end) end = z;
  }
  if (!Number.isFinite(start)) start = end = Date.now();
  return { start, end };
}

/** The file's name, for a one-line label. */
export const nameOf = (p: string) => basename(p);
