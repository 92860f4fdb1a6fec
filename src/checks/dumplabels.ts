// Which stack dump is which rank's, and which set the operator asked for, read back from the dump
// action's records in actions.jsonl (target.perRank, written by signalForDumps in actions.ts). The
// real trainer's `stackdump_<second>.txt` names no rank; the record does. Pure: the Dumps panel,
// `status` and `status --json` call these with the records they already hold. Below: where a dump
// says its rank is (the main thread's innermost frame, or the phase it names) and when it was written.
import type { ActionRecord } from '../trainer/control/types.js';
import type { StackDump, StackFrame, StackThread } from '../trainer/run/snapshot.js';

export interface DumpSetRank {
  rank: number;
  pid: number;
  status: 'dumped' | 'no-answer' | 'refused';
  /** file name (no directory) claimed for this rank, or null */
  file: string | null;
  why: string | null;
  /** first line of the claimed write: the file is this rank's only while it still starts so */
  header: string | null;
}

/** One dump action: the set of stacks an operator asked for. */
export interface OperatorDumpSet {
  at: number;
  by: string;
  result: ActionRecord['result'];
  detail: string;
  ranks: DumpSetRank[];
  /** the ranks the operator chose to dump (`d` on a selected rank); absent: every rank was asked */
  only?: number[];
}

const base = (f: string) => f.split('/').pop() ?? f;

function ranksOf(r: ActionRecord): DumpSetRank[] | null {
  const per = r.target.perRank;
  if (!Array.isArray(per)) return null;
  const out: DumpSetRank[] = [];
  for (const e of per as Record<string, unknown>[]) {
    if (!e || typeof e.rank !== 'number' || typeof e.pid !== 'number') continue;
    const status = e.status === 'dumped' || e.status === 'refused' ? e.status : 'no-answer';
    out.push({
      rank: e.rank,
      pid: e.pid,
      status,
      file: typeof e.file === 'string' && e.file ? base(e.file) : null,
      why: typeof e.why === 'string' ? e.why : null,
      header: typeof e.header === 'string' ? e.header : null,
    });
  }
  return out.sort((a, b) => a.rank - b.rank);
}

/** The operator's dump sets, newest first (records written before ranks were recorded are skipped). */
export function operatorDumpSets(actions: readonly ActionRecord[], limit = 5): OperatorDumpSet[] {
  const out: OperatorDumpSet[] = [];
  for (const r of [...actions].sort((a, b) => b.ts - a.ts)) {
    if (r.action !== 'dump' || r.result === 'started') continue;
    const ranks = ranksOf(r);
    if (!ranks) continue;
    const only = Array.isArray(r.target.only) ? r.target.only.filter((x): x is number => typeof x === 'number') : null;
    out.push({ at: r.ts, by: r.who.user, result: r.result, detail: r.detail, ranks, ...(only ? { only } : {}) });
    if (out.length >= limit) break;
  }
  return out;
}

export interface DumpClaim {
  rank: number;
  pid: number;
  /** when the dump action that claimed it ended */
  at: number;
  header: string | null;
}

/** file name → the rank a dump action claimed it for; the newest claim of a name wins. */
export function dumpClaims(actions: readonly ActionRecord[]): Map<string, DumpClaim> {
  const m = new Map<string, DumpClaim>();
  for (const r of [...actions].sort((a, b) => a.ts - b.ts)) {
    if (r.action !== 'dump') continue;
    for (const x of ranksOf(r) ?? [])
      if (x.status === 'dumped' && x.file) m.set(x.file, { rank: x.rank, pid: x.pid, at: r.ts, header: x.header });
  }
  return m;
}

/**
 * The rank a dump is: the one it names (the reference trainer), else the one the dump action claimed
 * it for — while the file still holds that write (same first line). null when nobody can tell.
 */
export function claimedRank(d: StackDump, claims: ReadonlyMap<string, DumpClaim>): number | null {
  if (d.rank !== null) return d.rank;
  const c = claims.get(d.name);
  if (!c) return null;
  if (c.header !== null && d.header !== c.header) return null; // overwritten since
  return c.rank;
}

/** "rank 1", or "rank ?" (with the pid when the dump names one): how every surface names a dump. */
export function dumpRankLabel(d: StackDump, claims: ReadonlyMap<string, DumpClaim>): string {
  const r = claimedRank(d, claims);
  if (r !== null) return `rank ${r}`;
  return d.pid !== null ? `rank ? (pid ${d.pid})` : 'rank ?';
}

/** Written in answer to nsa-top's dump action (by its record), not by the trainer's own watchdog. */
export function byOperator(d: StackDump, claims: ReadonlyMap<string, DumpClaim>): boolean {
  return d.kind === 'signal' && claims.has(d.name) && claimedRank(d, claims) !== null;
}

/** The dump's own frames (the signal handler that wrote it), never "where the rank is". */
const HANDLER = /^(_?dump_stacks?|_dump_handler|_on_signal|handle_sigusr1|format_stack|print_stack|_watchdog_dump)$/;

/** The main thread: named MainThread, else one whose name says main, else the first. */
export function mainThread(d: StackDump): StackThread | null {
  return (
    d.threads.find((x) => x.name === 'MainThread') ??
    d.threads.find((x) => /main/i.test(x.name)) ??
    d.threads[0] ??
    null
  );
}

/** The main thread's frames, outermost first, without the dump handler's own frames at the top. */
export function mainThreadFrames(d: StackDump): StackFrame[] {
  const t = mainThread(d);
  if (!t) return [];
  const frames = [...t.frames];
  while (frames.length && HANDLER.test(frames[frames.length - 1]!.func)) frames.pop();
  return frames;
}

/** The innermost frame of the main thread, skipping the dump handler itself ("where is it stuck"). */
export function mainThreadTop(d: StackDump): StackFrame | null {
  const f = mainThreadFrames(d);
  return f[f.length - 1] ?? null;
}

/** Where a dump says the rank is: the phase the reference trainer names, else the main thread's
 *  innermost frame. The one answer the odd-rank rule and the Dumps panel both group by. */
export function dumpPlace(d: StackDump): string | null {
  if (d.phase) return d.phase;
  const f = mainThreadTop(d);
  return f ? `${f.func} (${f.file.split('/').pop()}:${f.line ?? '?'})` : null;
}

/** When the dump was written: its mtime, unless a copy changed that (then the epoch in its name). */
export function dumpTimeMs(d: StackDump): number {
  if (d.epoch > 0 && Math.abs(d.mtimeMs - d.epoch * 1000) > 120_000) return d.epoch * 1000 + 999;
  return d.mtimeMs;
}
