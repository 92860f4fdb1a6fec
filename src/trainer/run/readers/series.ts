// Bounded metric series: the recent window at full resolution, older points folded into
// min/max/last buckets whose width doubles whenever the bucket count passes its cap. Memory is
// O(recentWindow + historyBuckets) whatever the run length. Points of different segments never
// share a bucket.
import type { Series, SeriesBucket, SeriesPoint } from '../snapshot.js';

export interface SeriesOptions {
  recentWindow: number;
  historyBuckets: number;
}

export class SeriesAcc {
  private recent: SeriesPoint[] = [];
  private head = 0; // recent is a queue: live items are recent[head..]
  // Points pushed since the series was last read, after recent's, as columns: a ring of pCount
  // slots from pStart (its capacity, the columns' length, grows up to the window). A point object is
  // made only for what is still in the window when the series is read: a 512 KiB tail read at once
  // (status, the cockpit's first poll) pushes ~16k rows of which the window keeps 2000, and the
  // others go from these columns straight into buckets.
  private pStep: number[] = [];
  private pT: (number | null)[] = [];
  private pValue: number[] = [];
  private pSeg: number[] = [];
  private pStart = 0;
  private pCount = 0;
  private history: SeriesBucket[] = [];
  /** points per bucket at the current resolution */
  private width = 1;
  total = 0;
  nonFinite = 0;
  /** bumps on every change; toJSON() is cached per version */
  version = 0;
  private cached: { version: number; value: Series } | null = null;

  constructor(readonly opts: SeriesOptions) {}

  get size(): number {
    return this.recent.length - this.head + this.pCount;
  }

  push(step: number, t: number | null, value: number, segment: number): void {
    this.total++;
    this.version++;
    if (!Number.isFinite(value)) {
      this.nonFinite++;
      return;
    }
    if (this.opts.recentWindow <= 0) {
      // history only (backfill of older bytes): straight into buckets, no point objects
      this.foldValue(step, t, value, segment);
      return;
    }
    // the point leaving the window (the oldest) folds first, then the new one takes its place
    if (this.size >= this.opts.recentWindow) this.foldOldest();
    const cap = this.pStep.length;
    if (this.pCount === cap) {
      // full and never wrapped (pStart only moves once the pending points alone fill the window,
      // and by then the columns are that long): they grow by appending, which V8 does natively —
      // a one-shot status runs this in the interpreter, ~16k points of a tail read
      this.pStep.push(step);
      this.pT.push(t);
      this.pValue.push(value);
      this.pSeg.push(segment);
    } else {
      let at = this.pStart + this.pCount;
      if (at >= cap) at -= cap;
      this.pStep[at] = step;
      this.pT[at] = t;
      this.pValue[at] = value;
      this.pSeg[at] = segment;
    }
    this.pCount++;
  }

  /** the oldest point in the window into the buckets: an object of recent's, else the oldest pending one */
  private foldOldest(): void {
    if (this.recent.length > this.head) {
      this.fold(this.recent[this.head]!);
      this.head++;
      if (this.head > 4096 && this.head * 2 > this.recent.length) {
        this.recent = this.recent.slice(this.head);
        this.head = 0;
      }
      return;
    }
    const i = this.pStart;
    this.foldValue(this.pStep[i]!, this.pT[i] as number | null, this.pValue[i]!, this.pSeg[i]!);
    this.pStart = i + 1 === this.pStep.length ? 0 : i + 1;
    this.pCount--;
  }

  /** the pending points as objects at the end of recent (before anything reads recent) */
  private materialize(): void {
    if (this.pCount === 0) return;
    const cap = this.pStep.length;
    for (let k = 0, i = this.pStart; k < this.pCount; k++, i = i + 1 === cap ? 0 : i + 1)
      this.recent.push({
        step: this.pStep[i]!,
        t: this.pT[i] as number | null,
        value: this.pValue[i]!,
        segment: this.pSeg[i]!,
      });
    this.pStart = 0;
    this.pCount = 0;
    // a big read's room goes (a followed series then pushes a few points between reads)
    if (cap > 256) {
      this.pStep = [];
      this.pT = [];
      this.pValue = [];
      this.pSeg = [];
    }
  }

  last(): SeriesPoint | null {
    this.materialize();
    return this.recent.length > this.head ? this.recent[this.recent.length - 1]! : null;
  }

  private fold(p: SeriesPoint): void {
    this.foldValue(p.step, p.t, p.value, p.segment);
  }

  private foldValue(step: number, t: number | null, value: number, segment: number): void {
    const b = this.history[this.history.length - 1];
    if (b && b.segment === segment && b.count < this.width) {
      b.stepTo = step;
      b.tTo = t;
      if (value < b.min) b.min = value;
      if (value > b.max) b.max = value;
      b.last = value;
      b.count++;
    } else {
      this.history.push({
        stepFrom: step,
        stepTo: step,
        tFrom: t,
        tTo: t,
        min: value,
        max: value,
        last: value,
        count: 1,
        segment,
      });
      if (this.history.length > this.opts.historyBuckets) this.compact();
    }
  }

  /** halve the bucket count: merge neighbours of the same segment */
  private compact(): void {
    this.width *= 2;
    this.history = mergePairs(this.history);
    // buckets never span segments: a run restarted thousands of times cannot be folded further,
    // so the oldest buckets go (memory stays bounded whatever the input)
    if (this.history.length > this.opts.historyBuckets * 2)
      this.history.splice(0, this.history.length - this.opts.historyBuckets);
  }

  /**
   * Older history read later (backfill of a huge file read from its end first): `older` holds
   * everything before this series' first point. Its segments come first; ours are shifted by
   * `segShift`.
   */
  prependHistory(older: SeriesAcc, segShift: number): void {
    older.materialize();
    this.shiftSegments(segShift);
    const olderBuckets: SeriesBucket[] = older.history.map((b) => ({ ...b }));
    for (let i = older.head; i < older.recent.length; i++) {
      const p = older.recent[i]!;
      olderBuckets.push({
        stepFrom: p.step,
        stepTo: p.step,
        tFrom: p.t,
        tTo: p.t,
        min: p.value,
        max: p.value,
        last: p.value,
        count: 1,
        segment: p.segment,
      });
    }
    this.history = [...olderBuckets, ...this.history];
    this.width = Math.max(this.width, older.width);
    while (this.history.length > this.opts.historyBuckets) {
      const before = this.history.length;
      this.compact();
      if (this.history.length === before) break; // every bucket its own segment: cannot shrink
    }
    if (this.history.length > this.opts.historyBuckets * 2)
      this.history.splice(0, this.history.length - this.opts.historyBuckets);
    this.version++;
    this.total += older.total;
    this.nonFinite += older.nonFinite;
  }

  shiftSegments(by: number): void {
    if (by === 0) return;
    this.materialize();
    this.version++;
    // new objects, not edits: snapshots already handed out share the old ones (see toJSON)
    for (let i = this.head; i < this.recent.length; i++)
      this.recent[i] = { ...this.recent[i]!, segment: this.recent[i]!.segment + by };
    this.history = this.history.map((b) => ({ ...b, segment: b.segment + by }));
  }

  /**
   * The series as plain data. Points and closed buckets are never edited once written (only the
   * open last bucket is), so snapshots share them instead of copying 2000 points per series on
   * every poll; only the arrays and the open bucket are new.
   */
  toJSON(): Series {
    if (this.cached?.version === this.version) return this.cached.value;
    this.materialize();
    const history = this.history.slice();
    const open = history[history.length - 1];
    if (open) history[history.length - 1] = { ...open };
    const value: Series = {
      recent: Object.freeze(this.recent.slice(this.head)) as SeriesPoint[],
      history,
      total: this.total,
      nonFinite: this.nonFinite,
    };
    this.cached = { version: this.version, value };
    return value;
  }
}

function mergePairs(hs: SeriesBucket[]): SeriesBucket[] {
  const out: SeriesBucket[] = [];
  for (let i = 0; i < hs.length; i++) {
    const a = hs[i]!;
    const b = hs[i + 1];
    if (b && b.segment === a.segment) {
      out.push({
        stepFrom: a.stepFrom,
        stepTo: b.stepTo,
        tFrom: a.tFrom,
        tTo: b.tTo,
        min: Math.min(a.min, b.min),
        max: Math.max(a.max, b.max),
        last: b.last,
        count: a.count + b.count,
        segment: a.segment,
      });
      i++;
    } else out.push({ ...a });
  }
  return out;
}
