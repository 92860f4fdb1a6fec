// Straggler: which rank holds the others back. In data-parallel training every rank steps at the
// same rate (the all-reduce makes the fast ranks wait for the slow one), so step times and beats
// alone look equal; what differs is how each rank spends the step. The slow rank computes while its
// peers wait (asleep in the collective: state S, a futex/poll wait channel, little CPU). So each
// process-table look gives, per proven rank, its CPU over the interval since the last look, its
// state and wait channel; over a window of looks:
//
//   score(r) = min_q Σcpu(q) / Σcpu(r) × (share of looks r was not stopped)   (1 = as fast as the
//                                                   fastest: NVRx's relative performance score)
//
// a rank stopped (state T) holds everyone and computes nothing: the looks it was stopped in count
// against it. A look
// counts only when some rank is busy (a hang or an idle run says nothing about speed). A rank is
// named the straggler once its window score is under stragglerScore over at least stragglerSamples
// looks, with the 99 % upper bound of its per-look scores under it too (a clean rank's half-second
// CPU swings ±30 % on a busy box), unless its peers were found holding it up clearly more often than
// it held them (a sign test: then its CPU is spent waiting, not computing); the rank that writes the
// progress (rank 0 logs every log step, so it computes more by design) must also have fallen under
// 0.85 × its own usual score (the median of its full windows: NVRx's individual score) —, or once the
// process states alone say so (working while every peer waits in ≥ 50 % of ≥ 10 looks, 3× as often as
// any peer, and past a sign test at 1 %: a rank starved of CPU by nice, taskset or a neighbour does
// the same CPU work per step as its peers, so only its state shows it); it stays named until the
// evidence that named it clears (hysteresis: no alarm on a clean run's jitter). Per-rank beats (how
// far a rank's newest beat is behind the furthest rank's) and per-rank dt_fetch_s, where ranks
// write them, are shown beside the score as evidence.
// Pure: no I/O.
import type { Ctx } from './context.js';
import type { Draft } from './rules/index.js';
import { sig } from '../format.js';

export interface RankPace {
  rank: number;
  /** CPU % since the previous process-table look; null: one look only, or not a live rank */
  cpuPct: number | null;
  /** process state (R, S, D, T, …) and wait channel in the newest look */
  state: string | null;
  wchan: string | null;
  /** what the newest look says the rank is doing */
  activity: 'busy' | 'waiting' | 'stopped' | 'unknown';
  /** mean CPU % over the window's looks */
  busyPct: number | null;
  /** fastest rank's compute / this rank's compute over the window (1: the fastest); null: no look yet */
  score: number | null;
  /** the highest the score could be, given how its looks scatter (scoreBound); null: < 2 looks */
  scoreHigh: number | null;
  /** its usual score: the median of its scores over the last 31 full windows of looks (4 × the
   *  looks needed, not overlapping, none while a rank is named); null before two */
  usualScore: number | null;
  /** looks in the window in which this rank was stopped (state T) */
  stoppedLooks: number;
  /** share of the window's looks in which this rank was working (or stopped) while every peer
   *  waited: the state evidence, which sees a rank starved of CPU (nice, taskset, a noisy
   *  neighbour) whose CPU time per step looks like everyone's */
  holdPct: number | null;
  /** the step of this rank's newest heartbeat, and how many steps it is behind the furthest rank */
  beatStep: number | null;
  beatBehind: number | null;
  /** this rank's newest dt_fetch_s, where it writes one (the trainers: rank 0's progress records) */
  dtFetchS: number | null;
}

export interface StragglerView {
  /** one row per live proven rank, by rank */
  ranks: RankPace[];
  /** the slowest and the fastest rank by score (Megatron's --log-straggler min/max) */
  min: { rank: number; score: number } | null;
  max: { rank: number; score: number } | null;
  /** the rank named as holding the others back (past the threshold, over the window), else null */
  straggler: { rank: number; score: number; why: string; evidence: 'cpu' | 'state' } | null;
  /** looks in the window, and how many are needed before a rank is named */
  looks: number;
  looksNeeded: number;
  /** one phrase: what the view is made of, or why it says nothing */
  basis: string;
}

export interface Look {
  /** the process table's own time (a look is counted once) */
  at: number;
  cpu: Map<number, number>;
  stopped: Set<number>;
  /** ranks found waiting (asleep in a wait channel) in this look */
  waiting: Set<number>;
}

const WAITING_WCHAN = /futex|poll|select|epoll|pipe|sk_wait|unix_stream|wait|nanosleep|hrtimer/i;

export function activityOf(state: string | null, wchan: string | null): RankPace['activity'] {
  if (state === 'T' || state === 't') return 'stopped';
  if (state === 'R') return 'busy';
  if (state === 'S' || state === 'D' || state === 'I') return wchan && !WAITING_WCHAN.test(wchan) ? 'busy' : 'waiting';
  return 'unknown';
}

/** the per-look scores: min cpu / cpu, and 0 for a stopped rank; null when no rank is busy */
export function lookScores(
  cpu: Map<number, number>,
  stopped: Set<number>,
  busyFloorPct: number,
): Map<number, number> | null {
  const running = [...cpu].filter(([r]) => !stopped.has(r));
  const busiest = Math.max(0, ...running.map(([, c]) => c));
  if (busiest < busyFloorPct && stopped.size === 0) return null;
  const out = new Map<number, number>();
  const fastest = running.length ? Math.min(...running.map(([, c]) => c)) : 0;
  for (const [r, c] of cpu) out.set(r, stopped.has(r) ? 0 : c <= 0 ? 1 : Math.min(1, Math.max(fastest, 0) / c));
  // ranks all stopped together (a debugger, a suspended job) hold nobody back
  if (stopped.size === cpu.size) return null;
  return out;
}

/**
 * Scores over a window of counted looks: the fastest rank's CPU over the window's looks without a
 * stopped rank / this rank's (sums, so a look's scheduling noise averages out instead of biasing
 * every rank below 1), times the share of looks in which the rank was not stopped. Empty when no look
 * counts.
 */
export function windowScores(looks: { cpu: Map<number, number>; stopped: Set<number> }[]): Map<number, number> {
  const out = new Map<number, number>();
  if (!looks.length) return out;
  // CPU compared only over looks in which no rank was stopped: a stopped rank's peers wait too, and
  // counting its lost CPU would make the waiting ranks look slow once it runs again
  const total = new Map<number, number>();
  const stopped = new Map<number, number>();
  for (const l of looks)
    for (const [r, c] of l.cpu) {
      if (l.stopped.size === 0) total.set(r, (total.get(r) ?? 0) + c);
      stopped.set(r, (stopped.get(r) ?? 0) + (l.stopped.has(r) ? 1 : 0));
    }
  const fastest = total.size ? Math.min(...total.values()) : 0;
  for (const r of stopped.keys()) {
    const c = total.get(r);
    const ratio = c === undefined || c <= 0 ? 1 : Math.min(1, fastest / c);
    out.set(r, ratio * (1 - stopped.get(r)! / looks.length));
  }
  return out;
}

// one-sided 99 % quantiles of Student's t for 1…30 degrees of freedom (then 40, 60, 120, ∞)
const T99 = [
  31.82, 6.96, 4.54, 3.75, 3.36, 3.14, 3.0, 2.9, 2.82, 2.76, 2.72, 2.68, 2.65, 2.62, 2.6, 2.58, 2.57, 2.55, 2.54, 2.53,
  2.52, 2.51, 2.5, 2.49, 2.49, 2.48, 2.47, 2.47, 2.46, 2.46,
];
const t99 = (df: number) =>
  df < 1 ? Infinity : df <= 30 ? T99[df - 1]! : df < 60 ? 2.42 : df < 120 ? 2.39 : df < 1000 ? 2.36 : 2.33;

/**
 * How high a rank's score could really be, given its looks: the upper 99 % confidence bound of the
 * mean of its per-look scores (Student's t). On a busy 2-core box a clean rank's CPU swings ±30 %
 * from one half-second look to the next (two ranks, the watchdog and a neighbour share two cores),
 * so five looks' sum can say 0.81 for a rank that is as fast as its peer: the sum alone named rank 0
 * of a clean run (which also logs, evaluates and saves). A slowed rank's looks agree with each other
 * and its bound falls under the threshold within a few more looks. null: fewer than 2 looks.
 */
export function scoreBound(perLook: number[]): number | null {
  const n = perLook.length;
  if (n < 2) return null;
  const mean = perLook.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(perLook.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  return mean + (t99(n - 1) * sd) / Math.sqrt(n);
}

/** P(X ≥ k) for X ~ Binomial(n, ½): how often a fair coin would come out at least this lopsided */
export function binomTail(k: number, n: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  let c = 1; // C(n, 0)
  let sum = 0;
  for (let i = 0; i <= n; i++) {
    if (i >= k) sum += c;
    c = (c * (n - i)) / (i + 1);
  }
  return sum / 2 ** n;
}

/**
 * Per rank, the highest of the other ranks' values ([rank, value] entries; 0 where there is none),
 * from the two highest: thousands of ranks must not cost ranks² a look.
 */
function maxOtherThan(entries: [number, number][]): (rank: number) => number {
  const top = [...entries].sort((x, y) => y[1] - x[1]).slice(0, 2);
  return (rank) => top.find(([q]) => q !== rank)?.[1] ?? 0;
}

/** per rank, the looks in which it was working (or stopped) while every other rank waited: O(looks × ranks) */
export function holdCounts(looks: Look[]): Map<number, number> {
  const n = new Map<number, number>();
  for (const l of looks) {
    let only: number | null = null;
    let working = 0;
    for (const q of l.cpu.keys())
      if (!l.waiting.has(q)) {
        working++;
        only = q;
      }
    if (working === 1 && only !== null) n.set(only, (n.get(only) ?? 0) + 1);
  }
  return n;
}

/** Keeps the window of looks across evaluations (one per Checker). */
export class StragglerTracker {
  private looks: Look[] = [];
  private named: number | null = null;
  private namedBy: 'cpu' | 'state' = 'cpu';
  /** per rank, its scores over past full windows (NVRx's individual score compares a rank with its
   *  own history), for the rank set they were taken in; looks taken since the last was recorded */
  private usual = new Map<number, number[]>();
  private usualKey = '';
  private sinceUsual = 0;
  /** each look's rank set and its scores, worked out once: a look never changes once taken, and
   *  the window's looks were re-keyed and re-scored every round (a third of the judge's garbage) */
  private keys = new WeakMap<Look, string>();
  private scores = new WeakMap<Look, { floor: number; s: Map<number, number> | null }>();

  private keyOf(l: Look): string {
    let k = this.keys.get(l);
    if (k === undefined) this.keys.set(l, (k = [...l.cpu.keys()].sort((a, b) => a - b).join(',')));
    return k;
  }

  private scoresOf(l: Look, floor: number): Map<number, number> | null {
    const c = this.scores.get(l);
    if (c && c.floor === floor) return c.s;
    const s = lookScores(l.cpu, l.stopped, floor);
    this.scores.set(l, { floor, s });
    return s;
  }

  reset(): void {
    this.looks = [];
    this.named = null;
    this.usual.clear();
  }

  /**
   * `hold`: why the group has no straggler now (a restart's teardown or boot, a launch booting, a
   * rank gone), else null. A dead or booting group has no pace to compare: the ranks left wait on a
   * peer that is gone, or do boot work that differs by rank (live: kill -9 of rank 0 under the
   * supervisor named the surviving rank 1 during the teardown). While held the window is dropped
   * (its looks would judge the next group by this one) and nobody is named.
   */
  view(ctx: Ctx, hold: string | null = null): StragglerView {
    const t = ctx.t;
    const procs = ctx.in.procs;
    const alive = ctx.alive;
    if (hold !== null) {
      this.looks = [];
      this.named = null;
    }
    // per-rank beats and fetch times: evidence beside the score
    const hb = new Map(ctx.ranks.map((r) => [r.rank, r]));
    const furthest = Math.max(-Infinity, ...ctx.ranks.map((r) => r.lastStep ?? -Infinity));
    const lp = ctx.run.lastProgress;
    if (hold === null && procs && alive.length >= 2) {
      const last = this.looks[this.looks.length - 1];
      if (!last || last.at !== procs.at) {
        const cpu = new Map<number, number>();
        const stopped = new Set<number>();
        const waiting = new Set<number>();
        for (const r of alive) {
          const act = activityOf(r.proc.state, r.proc.wchan);
          if (act === 'stopped') stopped.add(r.rank);
          if (act === 'waiting') waiting.add(r.rank);
          if (r.proc.cpuPct !== null) cpu.set(r.rank, r.proc.cpuPct);
          else if (stopped.has(r.rank)) cpu.set(r.rank, 0);
        }
        if (cpu.size === alive.length) {
          this.looks.push({ at: procs.at, cpu, stopped, waiting });
          this.sinceUsual++;
        }
        // a different set of ranks (a restart, a rank gone) starts a new window
        const newest = this.looks[this.looks.length - 1];
        if (newest) {
          const k = this.keyOf(newest);
          if (this.looks.some((l) => this.keyOf(l) !== k)) this.looks = this.looks.filter((l) => this.keyOf(l) === k);
        }
        const cutoff = procs.at - t.stragglerWindowS * 1000;
        const keep = t.stragglerSamples * 4;
        if (this.looks.length > keep || this.looks.some((l) => l.at < cutoff))
          this.looks = this.looks.filter((l) => l.at >= cutoff).slice(-keep);
      }
    } else if (hold === null && (!procs || alive.length < 2)) {
      this.looks = [];
      this.named = null;
    }
    const counted = this.looks
      .map((l) => ({ l, s: this.scoresOf(l, t.stragglerBusyFloorPct) }))
      .filter((x): x is { l: Look; s: Map<number, number> } => x.s !== null);
    let win = windowScores(counted.map((c) => c.l));
    const held = holdCounts(this.looks);
    // no interval look yet (a one-shot `status`): the share of CPU since each rank started, one
    // long look (boot included) that scores but never names
    let sinceStart = false;
    if (
      hold === null &&
      counted.length === 0 &&
      alive.length >= 2 &&
      alive.every((r) => (r.proc.ageS ?? 0) >= 1 && r.proc.cpuTotalS != null)
    ) {
      const cpu = new Map(alive.map((r) => [r.rank, (100 * r.proc.cpuTotalS!) / r.proc.ageS!]));
      const stopped = new Set(
        alive.filter((r) => activityOf(r.proc.state, r.proc.wchan) === 'stopped').map((r) => r.rank),
      );
      if (lookScores(cpu, new Set(), t.stragglerBusyFloorPct)) {
        win = windowScores([{ cpu, stopped: new Set() }]);
        for (const r of stopped) win.set(r, 0);
        sinceStart = true;
      }
    }
    // each rank's usual score: one full window's score every full window of new looks, kept across
    // restarts of the same rank set. A window in which a rank was named is not the norm, nor the
    // windows up to a full one after the name clears (live, a starved rank 1 put rank 0's usual at 1
    // and rank 0 was named for its ordinary logging once rank 1 recovered); the median (of at
    // least two: a run's first window holds its boot, where rank 0 does not log yet, and named rank
    // 0 for its logging 80 s into a clean real-trainer run) keeps the odd one out
    if (this.named !== null) this.sinceUsual = 0;
    if (counted.length >= t.stragglerSamples * 4 && !sinceStart && this.sinceUsual >= t.stragglerSamples * 4) {
      this.sinceUsual = 0;
      const k = this.keyOf(counted[counted.length - 1]!.l);
      if (k !== this.usualKey) {
        this.usual.clear();
        this.usualKey = k;
      }
      for (const [r, sc] of win) {
        const h = this.usual.get(r) ?? [];
        h.push(sc);
        if (h.length > 31) h.shift();
        this.usual.set(r, h);
      }
    }
    const usualOf = (rank: number) => {
      const h = this.usual.get(rank);
      if (!h || h.length < 2) return null;
      const o = [...h].sort((a, b) => a - b);
      return o.length % 2 ? o[(o.length - 1) / 2]! : (o[o.length / 2 - 1]! + o[o.length / 2]!) / 2;
    };
    const rows: RankPace[] = [...alive]
      .sort((a, b) => a.rank - b.rank)
      .map((r) => {
        const h = hb.get(r.rank);
        const cpus = counted.map((c) => c.l.cpu.get(r.rank)).filter((x): x is number => x !== undefined);
        const beatStep = h?.lastStep ?? null;
        return {
          rank: r.rank,
          cpuPct: r.proc.cpuPct,
          state: r.proc.state,
          wchan: r.proc.wchan,
          activity: activityOf(r.proc.state, r.proc.wchan),
          busyPct: cpus.length ? cpus.reduce((a, b) => a + b, 0) / cpus.length : null,
          score: win.get(r.rank) ?? null,
          usualScore: usualOf(r.rank),
          scoreHigh: scoreBound(counted.map((c) => c.s.get(r.rank)).filter((x): x is number => x !== undefined)),
          stoppedLooks: counted.filter((c) => c.l.stopped.has(r.rank)).length,
          holdPct: this.looks.length ? (100 * (held.get(r.rank) ?? 0)) / this.looks.length : null,
          beatStep,
          beatBehind: beatStep !== null && Number.isFinite(furthest) ? furthest - beatStep : null,
          dtFetchS: lp && lp.rank === r.rank ? (lp.dtFetchS ?? null) : null,
        };
      });
    const scored = rows.filter((r) => r.score !== null) as (RankPace & { score: number })[];
    const byScore = [...scored].sort((a, b) => a.score - b.score || a.rank - b.rank);
    const min = byScore[0] ? { rank: byScore[0].rank, score: byScore[0].score } : null;
    const maxR = byScore[byScore.length - 1];
    const max = maxR ? { rank: maxR.rank, score: maxR.score } : null;
    let straggler: StragglerView['straggler'] = null;
    const enough = counted.length >= t.stragglerSamples;
    // by rank once, and the highest hold share but each rank's own
    const rowOf = new Map(rows.map((x) => [x.rank, x]));
    const holdOf = (rank: number) => rowOf.get(rank)?.holdPct ?? 0;
    const maxOtherHold = maxOtherThan(rows.map((x) => [x.rank, x.holdPct ?? 0]));
    // the looks in which this rank held its peers, and the most in which one peer held the rest
    const maxOtherHeld = maxOtherThan([...held]);
    const heldPair = (rank: number): [number, number] => [held.get(rank) ?? 0, maxOtherHeld(rank)];
    // a rank its peers were found holding up (working while it waited) clearly more often than it held
    // them — a sign test at 5 %, so a few looks of a step's logging or a boot transient do not count —
    // waits for them: its extra CPU is spent waiting (a polling collective), not computing
    const heldBy = (rank: number) => {
      const [own, other] = heldPair(rank);
      return other > own && binomTail(other, own + other) < 0.05;
    };
    // the rank that writes the run's progress (rank 0: heartbeat progress records, the CSVs and
    // TensorBoard, every log step) computes more than its peers by design — live, the real trainer's
    // rank 0 (it logs every step) scored 0.79–0.83 over full windows of a clean run. By its CPU it is
    // named only once it has also fallen well under its own usual score (NVRx's individual
    // score beside the relative one); a rank slow from its first window is left to the states
    const logger = lp?.rank ?? 0;
    const ownDrop = (r: RankPace & { score: number }) =>
      r.rank !== logger || (r.usualScore !== null && r.score < t.stragglerScore * r.usualScore);
    // (A) the CPU says it computes more per step than the fastest — beyond what the looks' own
    // scatter could hide — and its peers were not found holding it up
    const byCpu = (rank: number) => {
      const r = rowOf.get(rank);
      return (
        !!r &&
        r.score !== null &&
        enough &&
        r.score < t.stragglerScore &&
        r.scoreHigh !== null &&
        r.scoreHigh < t.stragglerScore &&
        ownDrop(r as RankPace & { score: number }) &&
        !heldBy(rank)
      );
    };
    // (B) the state says it: working while every peer waits in at least half of ≥ 10 looks, and 3×
    // as often as any peer (clean runs measured ≤ 20 %, a niced + pinned rank 54 %) — so lopsidedly
    // that a fair coin would do it under 1 % of the time: 5 looks of 10 against none (a clean run
    // beside a CPU hog, its ranks taking turns on the cores) is not
    const byState = (rank: number) => {
      const [own, other] = heldPair(rank);
      return (
        this.looks.length >= 2 * t.stragglerSamples &&
        holdOf(rank) >= t.stragglerHoldPct &&
        holdOf(rank) >= 3 * maxOtherHold(rank) &&
        binomTail(own, own + other) < 0.01
      );
    };
    if (this.named !== null) {
      const r = rowOf.get(this.named);
      const cpuHolds =
        !!r &&
        r.score !== null &&
        r.score < t.stragglerClearScore * (r.rank === logger ? (r.usualScore ?? 1) : 1) &&
        min?.rank === r.rank &&
        !heldBy(r.rank);
      const stateHolds = holdOf(this.named) >= t.stragglerHoldPct / 2 && holdOf(this.named) > maxOtherHold(this.named);
      // named until the evidence that named it clears: the other kind can hold a rank for good (the
      // progress writer holds its peers while it logs; a starved rank's CPU score is its usual one)
      if (!(this.namedBy === 'cpu' ? cpuHolds : stateHolds)) this.named = null;
    }
    if (this.named === null && rows.length >= 2) {
      const cand = [...rows].sort((x, y) => (x.score ?? 1) - (y.score ?? 1) || (y.holdPct ?? 0) - (x.holdPct ?? 0));
      const c = cand.find((x) => byCpu(x.rank));
      const st = c ? undefined : rows.find((x) => byState(x.rank));
      if (c ?? st) {
        this.named = (c ?? st)!.rank;
        this.namedBy = c ? 'cpu' : 'state';
      }
    }
    if (this.named !== null) {
      const r = rowOf.get(this.named)!;
      const peers = rows.filter((x) => x.rank !== r.rank);
      // the fastest of its peers (the named rank can be the fastest by CPU when the states named it)
      const best = peers.reduce<RankPace | null>(
        (a, x) => (x.score !== null && (!a || x.score > a.score!) ? x : a),
        null,
      );
      const fastest = best ? { rank: best.rank, score: best.score! } : { rank: r.rank, score: 1 };
      const parts = [
        r.score !== null
          ? `score ${sig(r.score, 2)} vs rank ${fastest.rank}'s ${sig(fastest.score, 2)} over ${counted.length} looks${r.scoreHigh !== null && r.scoreHigh < 1 ? ` (at most ${sig(r.scoreHigh, 2)} at 99 % confidence)` : ''}`
          : `no CPU score yet`,
        r.stoppedLooks
          ? `stopped (state T) in ${r.stoppedLooks} of them`
          : `cpu ${Math.round(r.busyPct ?? 0)} % vs ${Math.round(rowOf.get(fastest.rank)?.busyPct ?? 0)} %`,
        `working while every peer waited in ${Math.round(r.holdPct ?? 0)} % of ${this.looks.length} looks (peers ≤ ${Math.round(maxOtherHold(r.rank))} %)`,
        `its peers wait in the collective (${peers
          .slice(0, 3)
          .map((x) => `rank ${x.rank} ${x.activity}${x.wchan ? ` in ${x.wchan}` : ''}`)
          .join(', ')}${peers.length > 3 ? `, and ${peers.length - 3} more` : ''})`,
      ];
      straggler = { rank: r.rank, score: r.score ?? 1, why: parts.join('; '), evidence: this.namedBy };
    }
    const basis =
      hold !== null
        ? `${hold}: no straggler in a group that is not stepping`
        : alive.length < 2
          ? 'fewer than 2 live ranks: nothing to compare'
          : sinceStart
            ? 'one process-table look: CPU share since each rank started (a window needs looks over time: the cockpit and the watchdog take them every round)'
            : this.looks.length === 0
              ? 'one process-table look: CPU needs two (the cockpit and the watchdog take them every round)'
              : counted.length === 0
                ? 'no rank busy in the window (idle or hung): speed says nothing'
                : `${counted.length} look${counted.length === 1 ? '' : 's'} over ${Math.round(t.stragglerWindowS)} s: per-rank CPU, state and wait channel from /proc`;
    return { ranks: rows, min, max, straggler, looks: counted.length, looksNeeded: t.stragglerSamples, basis };
  }
}

/** The warning that names the straggler (the Checker's hysteresis clears it). */
export function ruleStraggler(v: StragglerView): Draft[] {
  const s = v.straggler;
  if (!s) return [];
  return [
    {
      id: `straggler:rank${s.rank}`,
      rule: 'straggler',
      severity: 'warning',
      title:
        s.evidence === 'cpu'
          ? `rank ${s.rank} is the straggler: it holds the other ranks back (score ${sig(s.score, 2)})`
          : `rank ${s.rank} is the straggler: it runs while the other ranks wait (${Math.round(v.ranks.find((r) => r.rank === s.rank)?.holdPct ?? 0)} % of looks)`,
      detail: `${s.why}. A slow GPU or CPU, a throttled or shared core, or a noisy neighbour on that rank; every other rank waits for it each step`,
      rank: s.rank,
    },
  ];
}

const r3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000);

/** The view as `status --json` (`straggler`) and the watchdog's `straggler` line give it (docs/status-json.md). */
export function stragglerFields(v: StragglerView) {
  return {
    straggler: v.straggler
      ? { rank: v.straggler.rank, score: r3(v.straggler.score), evidence: v.straggler.evidence, why: v.straggler.why }
      : null,
    min: v.min ? { rank: v.min.rank, score: r3(v.min.score) } : null,
    max: v.max ? { rank: v.max.rank, score: r3(v.max.score) } : null,
    looks: v.looks,
    looksNeeded: v.looksNeeded,
    basis: v.basis,
    ranks: v.ranks.map((r) => ({
      rank: r.rank,
      score: r3(r.score),
      scoreHigh: r3(r.scoreHigh),
      usualScore: r3(r.usualScore),
      busyPct: r.busyPct === null ? null : Math.round(r.busyPct * 10) / 10,
      cpuPct: r.cpuPct === null ? null : Math.round(r.cpuPct * 10) / 10,
      activity: r.activity,
      state: r.state,
      wchan: r.wchan,
      stoppedLooks: r.stoppedLooks,
      holdPct: r.holdPct === null ? null : Math.round(r.holdPct * 10) / 10,
      beatStep: r.beatStep,
      beatBehind: r.beatBehind,
      dtFetchS: r.dtFetchS,
    })),
  };
}
