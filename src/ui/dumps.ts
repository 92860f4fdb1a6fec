// Stack dump sets: the newest set of dumps (one per rank, written within a few seconds of each
// other), grouped by identical stacks so the odd rank stands out. Pure functions of the snapshot.
import type { StackDump, StackFrame, StackThread } from '../trainer/snapshot.js';

export interface DumpMember {
  dump: StackDump;
  /** rank when the dump or the process table tells, else null */
  rank: number | null;
  label: string;
}

export interface DumpGroup {
  signature: string;
  /** innermost first, handler frames removed */
  frames: StackFrame[];
  members: DumpMember[];
  odd: boolean;
}

export interface DumpSet {
  at: number;
  kind: StackDump['kind'];
  dumps: DumpMember[];
  groups: DumpGroup[];
}

const HANDLER = /dump_stack|_dump_handler|_on_signal|handle_sigusr1|format_stack/;

function mainThread(d: StackDump): StackThread | null {
  return d.threads.find((t) => /MainThread/.test(t.name)) ?? d.threads[0] ?? null;
}

/** Frames of the main thread, innermost first, without the dump handler's own frames. */
export function relevantFrames(d: StackDump): StackFrame[] {
  const th = mainThread(d);
  if (!th) return [];
  const frames = [...th.frames];
  while (frames.length && HANDLER.test(frames[frames.length - 1]!.func)) frames.pop();
  return frames.reverse();
}

export function signature(d: StackDump): string {
  return relevantFrames(d)
    .map((f) => `${f.file}:${f.line ?? '?'}:${f.func}`)
    .join('|');
}

export function newestDumpSet(dumps: StackDump[], pidToRank: Map<number, number>, windowS = 8): DumpSet | null {
  if (dumps.length === 0) return null;
  const sorted = [...dumps].sort((a, b) => b.epoch - a.epoch || b.mtimeMs - a.mtimeMs);
  const newest = sorted[0]!;
  // a set: same kind, each dump within windowS of the next newer one (staggered dumps chain)
  const set: StackDump[] = [newest];
  for (const d of sorted.slice(1)) {
    if (d.kind !== newest.kind) continue;
    if (set[set.length - 1]!.epoch - d.epoch > windowS) break;
    set.push(d);
  }
  const members: DumpMember[] = set.map((d) => {
    const rank = d.rank ?? (d.pid != null ? pidToRank.get(d.pid) ?? null : null);
    return { dump: d, rank, label: rank != null ? `r${rank}` : d.pid != null ? `pid ${d.pid}` : d.name.replace(/^(watchdog_)?stackdump_/, '').replace(/\.txt$/, '') };
  });
  // one dump per rank: keep the newest of each
  const seen = new Set<string>();
  const uniq = members.filter((m) => {
    const k = m.rank != null ? `r${m.rank}` : m.dump.name;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  uniq.sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.dump.name.localeCompare(b.dump.name));
  const bySig = new Map<string, DumpGroup>();
  for (const m of uniq) {
    const sig = signature(m.dump);
    let g = bySig.get(sig);
    if (!g) {
      g = { signature: sig, frames: relevantFrames(m.dump), members: [], odd: false };
      bySig.set(sig, g);
    }
    g.members.push(m);
  }
  const groups = [...bySig.values()].sort((a, b) => b.members.length - a.members.length);
  if (groups.length > 1) {
    const biggest = groups[0]!.members.length;
    for (const g of groups.slice(1)) if (g.members.length < biggest || groups.length === uniq.length) g.odd = true;
  }
  return { at: newest.mtimeMs, kind: newest.kind, dumps: uniq, groups };
}
