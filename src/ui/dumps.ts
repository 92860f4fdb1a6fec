// Stack dump sets: the newest set of dumps (one per rank, written within a few seconds of each
// other), grouped by identical stacks so the odd rank stands out. Pure functions of the snapshot.
import type { StackDump, StackFrame } from '../trainer/run/snapshot.js';
import { dumpPlace, dumpTimeMs, mainThreadFrames } from '../trainer/run/readers/stackdump.js';

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

/** Frames of the main thread, innermost first, without the dump handler's own frames. */
export function relevantFrames(d: StackDump): StackFrame[] {
  return mainThreadFrames(d).reverse();
}

/** The group key: where the dump says the rank is — the same place the odd-rank rule compares. */
export function signature(d: StackDump): string {
  return dumpPlace(d) ?? d.name;
}

/**
 * The newest set of dumps grouped by place. Which group is the odd one is not judged here: it is the
 * evaluation's answer (`oddRank`, from the odd-rank rule), so the panel and the rules never disagree.
 */
export function newestDumpSet(
  dumps: StackDump[],
  pidToRank: Map<number, number>,
  oddRank: number | null = null,
  windowS = 8,
): DumpSet | null {
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
    const rank = d.rank ?? (d.pid != null ? (pidToRank.get(d.pid) ?? null) : null);
    return {
      dump: d,
      rank,
      label:
        rank != null
          ? `r${rank}`
          : d.pid != null
            ? `pid ${d.pid}`
            : d.name.replace(/^(watchdog_)?stackdump_/, '').replace(/\.txt$/, ''),
    };
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
  if (oddRank !== null) for (const g of groups) g.odd = g.members.some((m) => m.rank === oddRank) && groups.length > 1;
  return { at: dumpTimeMs(newest), kind: newest.kind, dumps: uniq, groups };
}
