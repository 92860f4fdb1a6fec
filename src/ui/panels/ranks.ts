// Ranks: one row per rank, merged from the process table (pid, state, CPU, RSS) and the heartbeat
// files (step advance, last beat), coloured by the health the evaluation gives each rank.
import type { CockpitState } from '../../cockpit/state.js';
import type { RankProc } from '../../remote/types.js';
import type { RankHeartbeat } from '../../trainer/run/snapshot.js';
import { claimedRank, dumpClaims } from '../../checks/present.js';
import { ago, dur, mib, pct } from '../format.js';

/** the compact row's age: "12s" (the column header says what it is), – when unknown */
const since = (ts: number | null | undefined, now: number) => (ts != null ? dur((now - ts) / 1000) : '–');
import type { Role } from '../palette.js';
import { clean, type Line, t } from '../text.js';
import { scrollSlice, type PanelFn } from '../view.js';
import { HEALTH_ROLE } from './header.js';

export interface RankRow {
  rank: number;
  proc: RankProc | null;
  hb: RankHeartbeat | null;
  lastDumpMs: number | null;
  role: Role;
  why: string | null;
  /** the straggler score (1 = as fast as the fastest; src/checks/straggler.ts), null when not scored */
  score: number | null;
  /** the evaluation names this rank the straggler */
  straggler: boolean;
}

const STATE_NAMES: Record<string, string> = {
  R: 'run',
  S: 'sleep',
  D: 'disk(D)',
  T: 'stopped',
  t: 'traced',
  Z: 'zombie',
  I: 'idle',
  X: 'dead',
  '?': '?',
};

// A frame asks for the rows twice (the layout sizes the panel by them, the panel draws them): they
// are worked out once for the members of the state they are made of (compared by reference: a new
// snapshot, process table or evaluation is a new object).
let lastRows: { of: readonly unknown[]; rows: RankRow[] } | null = null;

export function rankRows(s: CockpitState, _now?: number): RankRow[] {
  const of = [s.run.ranks, s.run.dumps, s.procs, s.straggler, s.rankHealth, s.actions];
  if (!lastRows || of.some((x, i) => x !== lastRows!.of[i])) lastRows = { of, rows: computeRankRows(s) };
  return lastRows.rows;
}

function computeRankRows(s: CockpitState): RankRow[] {
  const ids = new Set<number>();
  for (const r of s.run.ranks) ids.add(r.rank);
  for (const r of s.procs?.ranks ?? []) ids.add(r.rank);
  const rows: RankRow[] = [];
  // by rank (and pid) once: thousands of ranks must not cost ranks² finds a frame
  const first = <T>(m: Map<number, T>, k: number | null | undefined, v: T) => {
    if (k != null && !m.has(k)) m.set(k, v);
  };
  const hbOf = new Map<number, (typeof s.run.ranks)[number]>();
  for (const r of s.run.ranks) first(hbOf, r.rank, r);
  const procOf = new Map<number, NonNullable<typeof s.procs>['ranks'][number]>();
  for (const r of s.procs?.ranks ?? []) first(procOf, r.rank, r);
  const paceOf = new Map<number, number | null>();
  for (const r of s.straggler?.ranks ?? []) paceOf.set(r.rank, r.score);
  const judgedOf = new Map<number, NonNullable<typeof s.rankHealth>[number]>();
  for (const r of s.rankHealth ?? []) first(judgedOf, r.rank, r);
  const lastDumpBy = (m: Map<number, number>, k: number | null | undefined, ms: number) => {
    if (k != null) m.set(k, Math.max(m.get(k) ?? -Infinity, ms));
  };
  const dumpByRank = new Map<number, number>();
  const dumpByPid = new Map<number, number>();
  // the real trainer's dumps name no rank: the dump action's record says whose each is
  const claims = dumpClaims(s.actions);
  for (const d of s.run.dumps) {
    lastDumpBy(dumpByRank, claimedRank(d, claims), d.mtimeMs);
    if (d.rank == null) lastDumpBy(dumpByPid, d.pid, d.mtimeMs);
  }
  for (const rank of [...ids].sort((a, b) => a - b)) {
    const hb = hbOf.get(rank) ?? null;
    const proc = procOf.get(rank) ?? null;
    const pid = proc?.proc.pid ?? hb?.pid ?? null;
    const times = [dumpByRank.get(rank), pid != null ? dumpByPid.get(pid) : undefined].filter(
      (x): x is number => x !== undefined,
    );
    const lastDumpMs = times.length ? Math.max(...times) : null;
    // health and its reason are the evaluation's (src/checks): this only presents them
    const judged = judgedOf.get(rank);
    const role: Role = judged ? HEALTH_ROLE[judged.health] : 'dim';
    const why = judged?.why ?? null;
    rows.push({
      rank,
      proc,
      hb,
      lastDumpMs,
      role,
      why,
      score: paceOf.get(rank) ?? null,
      straggler: s.straggler?.straggler?.rank === rank,
    });
  }
  return rows;
}

/** The panel's lines below its column header, and the rank each line belongs to (null: not a rank's). */
export function rankBody(s: CockpitState, w: number, now: number, sel: number | null = null) {
  const rows = rankRows(s, now);
  const wide = w >= 70;
  const head = wide
    ? 'rank pid     state    cpu%  pace   rss   step  advanced  heartbeat  dump'
    : 'rk pid     st  cpu% pace  rss  step  adv   beat';
  const body: Line[] = [];
  const owners: (number | null)[] = [];
  // the nodes of a multi-node view, in the order their ranks come (a host name does not fit a column)
  const nodeTag = new Map<string, number>();
  for (const r of rows) {
    const h = r.proc?.proc.host;
    if (h && !nodeTag.has(h)) nodeTag.set(h, nodeTag.size + 1);
  }
  if (nodeTag.size > 0) {
    body.push([t(`nodes ${[...nodeTag].map(([h, n]) => `@${n} ${clean(h)}`).join(' · ')}`, 'dim')]);
    owners.push(null);
  }
  for (const r of rows) {
    const p = r.proc?.proc;
    const pid = String(p?.pid ?? r.hb?.pid ?? '–').padEnd(7);
    // a rank whose node does not answer: its last answer, never shown as the state it has now
    const st =
      p?.unseenSinceMs !== undefined
        ? wide
          ? 'stale'
          : '?'
        : p
          ? wide
            ? (STATE_NAMES[p.state] ?? p.state)
            : p.state
          : wide
            ? 'gone'
            : '–';
    const cpu = p?.cpuPct != null ? p.cpuPct.toFixed(0) : '–';
    const rss = p?.rssKiB != null ? mib(p.rssKiB / 1024) : '–';
    const step = r.hb?.lastStep != null ? String(r.hb.lastStep) : '–';
    // the straggler score: 1.00 as fast as the fastest rank, lower holds the others back; ◀ the named one
    const pace = (r.score != null ? r.score.toFixed(2) : '–') + (r.straggler ? '◀' : ' ');
    const txt = wide
      ? `${String(r.rank).padStart(4)} ${pid} ${st.padEnd(8)} ${cpu.padStart(4)} ${pace.padStart(5)} ${rss.padStart(5)} ${step.padStart(6)} ${ago(r.hb?.stepAdvancedTs, now).padStart(9)} ${ago(r.hb?.lastTs, now).padStart(10)} ${ago(r.lastDumpMs, now)}`
      : `${String(r.rank).padStart(2)} ${pid} ${st.padEnd(3)} ${cpu.padStart(4)} ${pace.padStart(5)} ${rss.padStart(5)} ${step.padStart(5)} ${since(r.hb?.stepAdvancedTs, now).padStart(5)} ${since(r.hb?.lastTs, now).padStart(5)}`;
    // a multi-node view (--node): the rank's node as @N, named on the legend line above the ranks
    const node = p?.host ? ` @${nodeTag.get(p.host)}` : '';
    // the selected rank (d dumps it alone): inverse, on any panel width
    body.push([t(txt + node, r.role, { bold: r.role === 'crit', inverse: r.rank === sel })]);
    owners.push(r.rank);
    // its node does not answer: the row is that node's last answer, this old (on a line of its own: any width)
    if (p?.host && p.unseenSinceMs !== undefined) {
      body.push([t(`  └ node @${nodeTag.get(p.host)} unreachable: as seen ${ago(p.unseenSinceMs, now)}`, 'warn')]);
      owners.push(r.rank);
    }
    if (r.why) {
      body.push([t(`  └ ${clean(r.why)}`, r.role)]);
      owners.push(r.rank);
    }
  }
  const L = s.procs?.launcher;
  if (L) {
    body.push([
      t(
        `launcher pid ${L.pid} ${STATE_NAMES[L.state] ?? L.state}${L.cpuPct != null ? ` cpu ${pct(L.cpuPct)}` : ''}`,
        'dim',
      ),
    ]);
    owners.push(null);
  }
  const sv = s.straggler;
  if (sv?.min && sv.max && sv.min.rank !== sv.max.rank) {
    body.push([
      t(
        `pace min ${sv.min.score.toFixed(2)} (rank ${sv.min.rank}) · max ${sv.max.score.toFixed(2)} (rank ${sv.max.rank}) · ${sv.looks} looks`,
        sv.straggler ? 'warn' : 'dim',
      ),
    ]);
    owners.push(null);
  }
  if (s.procs?.unknown.length) {
    body.push([t(`${s.procs.unknown.length} trainer-like process(es) of unknown rank`, 'warn')]);
    owners.push(null);
  }
  return { rows, head, body, owners };
}

export const ranksPanel: PanelFn = ({ s, v, w, h, now }) => {
  const sel = v.rankSel ?? null;
  const { rows, head, body } = rankBody(s, w, now, sel);
  if (rows.length === 0)
    return { lines: [[t(s.procs?.error ? `process table: ${clean(s.procs.error)}` : 'no ranks seen yet', 'dim')]] };
  const sl = scrollSlice(body, h - 1, v.scroll.ranks ?? 0);
  return {
    lines: [[t(head, 'dim')], ...sl.shown],
    more: sl.more,
    ...(sel !== null ? { note: `r${sel} selected: d dumps it alone · esc: all` } : {}),
  };
};
