// Stack dump sets: the operator's newest set (the dump action's record in actions.jsonl says which
// file is which rank's: the real trainer's names do not), else the newest set of signal dumps (one
// per rank, written within a few seconds of each other), grouped by identical stacks so the odd
// rank stands out; the trainer's own watchdog dumps are counted apart, never in the set. Pure
// functions of the snapshot and the action log.
import type { StackDump, StackFrame } from '../trainer/run/snapshot.js';
import type { ActionRecord } from '../trainer/control/types.js';
import {
  claimedRank,
  dumpClaims,
  dumpPlace,
  dumpTimeMs,
  mainThreadFrames,
  operatorDumpSets,
  type DumpClaim,
  type DumpSetRank,
} from '../checks/present.js';

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

/** The label of a dump in a set: its rank, else "r?" (never the second in its name). */
function member(d: StackDump, rank: number | null): DumpMember {
  return { dump: d, rank, label: rank != null ? `r${rank}` : d.pid != null ? `r?(pid ${d.pid})` : 'r?' };
}

function grouped(at: number, kind: StackDump['kind'], members: DumpMember[], oddRank: number | null): DumpSet {
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
  const groups = [...bySig.values()];
  if (oddRank !== null) for (const g of groups) g.odd = g.members.some((m) => m.rank === oddRank) && groups.length > 1;
  // the odd rank's stack first (what the operator dumped for), then the biggest groups: the healthy
  // majority's long identical stack never pushes the odd one below the fold
  groups.sort((a, b) => Number(b.odd) - Number(a.odd) || b.members.length - a.members.length);
  return { at, kind, dumps: uniq, groups };
}

/**
 * The newest set of dumps of one kind (signal dumps unless `kind` says otherwise) grouped by place.
 * A dump's rank: the one it names, else the one nsa-top's dump action claimed it for (`claims`),
 * else its pid's. Which group is the odd one is not judged here: it is the evaluation's answer
 * (`oddRank`, from the odd-rank rule), so the panel and the rules never disagree.
 */
export function newestDumpSet(
  dumps: StackDump[],
  pidToRank: Map<number, number>,
  oddRank: number | null = null,
  windowS = 8,
  claims: ReadonlyMap<string, DumpClaim> = new Map(),
  kind: StackDump['kind'] = 'signal',
): DumpSet | null {
  const sorted = dumps.filter((d) => d.kind === kind).sort((a, b) => b.epoch - a.epoch || b.mtimeMs - a.mtimeMs);
  const newest = sorted[0];
  if (!newest) return null;
  // a set: each dump within windowS of the next newer one (staggered dumps chain)
  const set: StackDump[] = [newest];
  for (const d of sorted.slice(1)) {
    if (set[set.length - 1]!.epoch - d.epoch > windowS) break;
    set.push(d);
  }
  const members = set.map((d) =>
    member(d, claimedRank(d, claims) ?? (d.pid != null ? (pidToRank.get(d.pid) ?? null) : null)),
  );
  return grouped(dumpTimeMs(newest), newest.kind, members, oddRank);
}

/** The operator's newest dump set, from the dump action's record: every rank, its file or why not. */
export interface OperatorSetView {
  set: DumpSet;
  by: string;
  /** the ranks the operator chose (a dump of the selected rank); null: every rank was asked */
  only: number[] | null;
  /** ranks in the set (signalled or refused) */
  total: number;
  /** ranks whose stack is not there: lost, refused, or its file gone or overwritten since */
  missing: { rank: number; why: string }[];
}

export function operatorSet(
  dumps: StackDump[],
  actions: readonly ActionRecord[],
  oddRank: number | null = null,
): OperatorSetView | null {
  const rec = operatorDumpSets(actions, 1)[0];
  if (!rec) return null;
  const byName = new Map(dumps.map((d) => [d.name, d]));
  const members: DumpMember[] = [];
  const missing: { rank: number; why: string }[] = [];
  const gone = (r: DumpSetRank): string | null => {
    const d = r.file ? byName.get(r.file) : undefined;
    if (!d) return `${r.file} is not among the dumps read`;
    if (r.header !== null && d.header !== r.header) return `${r.file} was overwritten since`;
    members.push(member(d, r.rank));
    return null;
  };
  for (const r of rec.ranks) {
    const why = r.status === 'dumped' && r.file ? gone(r) : (r.why ?? r.status);
    if (why !== null) missing.push({ rank: r.rank, why: r.status === 'refused' ? `refused — ${why}` : why });
  }
  return {
    set: grouped(rec.at, 'signal', members, oddRank),
    by: rec.by,
    only: rec.only ?? null,
    total: rec.ranks.length,
    missing,
  };
}

/** The trainer's own watchdog dumps (not asked for by anyone): how many, and the newest. */
export function watchdogDumps(dumps: StackDump[]): { count: number; newest: StackDump | null } {
  const w = dumps.filter((d) => d.kind === 'watchdog').sort((a, b) => dumpTimeMs(b) - dumpTimeMs(a));
  return { count: w.length, newest: w[0] ?? null };
}

export { dumpClaims };
