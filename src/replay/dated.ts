// When each piece of a run's files was written, told from the files themselves (pure: bytes and
// names in, times out). A run nsa-top never watched has no journal: what it did when is in its
// heartbeats' `ts`, the steps of training.csv and train.log (timed by the heartbeat of the same
// step), stack dumps' names, checkpoints' steps, nsa-top's own records' `ts`, and the files' mtimes
// where those can be believed (a copied tree's mtimes are the copy's: a file dated long after the
// newest record is placed by what it is instead, and the source says so).
import { classify } from '../trainer/run/readers/names.js';

/** one line of a line file: where it ends (byte offset past its newline) and when it was written */
export interface Cut {
  end: number;
  at: number;
}

/** a file as replay knows it: whole (appears at `at`), or line by line (`cuts`, times non-decreasing) */
export interface DatedFile {
  name: string;
  /** when the file appears (its first line, for a line file) */
  at: number;
  /** line files only: the prefix of the file present at each moment */
  cuts?: Cut[];
  /** how `at` was told: 'records' (in-file times, a step's heartbeat, a name), 'mtime', 'guess' */
  how: 'records' | 'mtime' | 'guess';
}

/** one heartbeat record's step and time, in file order: what times the CSV rows and log lines */
export interface StepTime {
  step: number;
  at: number;
}

const TS_RE = /"ts"\s*:\s*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)/;
const STEP_RE = /"step"\s*:\s*([0-9]+)/;
const MSG_RE = /"msg"\s*:\s*"([^"]*)"/;
const ISO_RE = /(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)/;
/** the step lines of the trainer's stdout: `step 0013 | loss …` (contract §1.17) */
const LOG_STEP_RE = /^step\s+(\d+)\s*\|/;

/** A time a run can have been written at (2000 … 2200, ms epoch): anything else is garbage, not a date. */
export function plausibleMs(v: number): number | null {
  return Number.isFinite(v) && v >= 946_684_800_000 && v <= 7_258_118_400_000 ? v : null;
}

/** a JSON line's `ts`: seconds (heartbeats) or ms (nsa-top's records), as ms; null when absent or implausible */
export function lineTs(line: string): number | null {
  const m = TS_RE.exec(line);
  if (m) {
    const v = Number(m[1]);
    if (!Number.isFinite(v) || v <= 0) return null;
    return plausibleMs(v < 1e11 ? v * 1000 : v);
  }
  const iso = /"(?:ts|at|iso)"\s*:\s*"([^"]+)"/.exec(line);
  if (iso) return plausibleMs(Date.parse(iso[1]!));
  return null;
}

/** Splits text into lines with their end offsets (a last line without a newline is not a record yet). */
export function lineEnds(buf: Buffer): { text: string; end: number }[] {
  const out: { text: string; end: number }[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl < 0) break;
    out.push({ text: buf.toString('utf8', start, nl), end: nl + 1 });
    start = nl + 1;
  }
  return out;
}

/**
 * Times made non-decreasing (a line is never before the one above it). An undated line is placed no
 * earlier than it can have been written: with the next dated line below it (a header with the
 * first row, a resume's banner with the resumed run's first step), or, past the last dated line,
 * at `tail` (the end of what the records date) — never shown before its time. Lines above the first
 * dated one may take `head` (a boot) when it is earlier.
 */
function monotone(raw: { end: number; at: number | null }[], tail: number, head?: number): Cut[] {
  const next: (number | null)[] = new Array(raw.length);
  let below: number | null = null;
  for (let i = raw.length - 1; i >= 0; i--) {
    if (raw[i]!.at !== null) below = raw[i]!.at;
    next[i] = below;
  }
  let cur = -Infinity;
  let seen = false;
  return raw.map((r, i) => {
    let at = r.at;
    if (at === null) {
      const n = next[i];
      at = n === null ? Math.max(tail, cur) : !seen && head !== undefined && head <= n ? head : n;
    } else seen = true;
    if (at > cur) cur = at;
    return { end: r.end, at: cur };
  });
}

/** A JSON-lines file dated by each record's `ts` (heartbeats, actions.jsonl, watchdog.jsonl). */
export function dateJsonLines(buf: Buffer, tail: number): Cut[] {
  return monotone(
    lineEnds(buf).map((l) => ({ end: l.end, at: lineTs(l.text) })),
    tail,
  );
}

/** The step/time of each heartbeat record that names a step past 0, and the boots, in file order. */
export function heartbeatSteps(buf: Buffer): { steps: StepTime[]; boots: number[] } {
  const steps: StepTime[] = [];
  const boots: number[] = [];
  for (const l of lineEnds(buf)) {
    const at = lineTs(l.text);
    if (at === null) continue;
    const msg = MSG_RE.exec(l.text)?.[1];
    if (msg === 'boot' || msg === 'start') boots.push(at);
    const s = STEP_RE.exec(l.text);
    if (s && Number(s[1]) > 0) steps.push({ step: Number(s[1]), at });
  }
  return { steps, boots };
}

/**
 * Walks a run's step times in order: `timeOf(step)` finds the next record of that step at or after
 * the last one found (a restart's steps repeat; rows are matched in order), null when none is ahead.
 */
export class StepClock {
  private i = 0;
  constructor(private readonly steps: StepTime[]) {}
  timeOf(step: number): number | null {
    const limit = Math.min(this.steps.length, this.i + 100_000);
    for (let j = this.i; j < limit; j++)
      if (this.steps[j]!.step === step) {
        // the next row of the same step is a later record (a relaunch repeats steps)
        this.i = j + 1;
        return this.steps[j]!.at;
      }
    return null;
  }
}

/** A CSV whose first column is the step (training.csv, val.csv, k_stats, fallback counters). */
export function dateStepCsv(buf: Buffer, steps: StepTime[], tail: number): Cut[] {
  const clock = new StepClock(steps);
  const raw = lineEnds(buf).map((l) => {
    const first = l.text.split(',', 1)[0]!.trim();
    return { end: l.end, at: /^\d+$/.test(first) ? clock.timeOf(Number(first)) : null };
  });
  // a header before any row appears with the first row
  return monotone(raw, tail);
}

/** The trainer's stdout: step lines by their step's heartbeat, lines with an ISO time by it, the rest by the line above. */
export function dateLog(buf: Buffer, steps: StepTime[], tail: number, boot?: number): Cut[] {
  const clock = new StepClock(steps);
  const raw = lineEnds(buf).map((l) => {
    const s = LOG_STEP_RE.exec(l.text);
    if (s) return { end: l.end, at: clock.timeOf(Number(s[1])) };
    const iso = ISO_RE.exec(l.text);
    return { end: l.end, at: iso ? plausibleMs(Date.parse(iso[1]!.replace(' ', 'T'))) : null };
  });
  return monotone(raw, tail, boot);
}

/** The log line where the trainer says it saw .HALT, if it says so: when .HALT was there at the latest. */
export function haltSeenAt(buf: Buffer, cuts: Cut[]): number | null {
  const lines = lineEnds(buf);
  for (let i = 0; i < lines.length; i++)
    if (/\[train\] HALT file detected/.test(lines[i]!.text)) return cuts[i]?.at ?? null;
  return null;
}

/** A stack dump's time: its first line's `at <ISO>`, else the epoch in its name (seconds), else null. */
export function dumpTime(name: string, head: string | null): number | null {
  const m = head ? /\bat (\d{4}-\d\d-\d\dT[0-9:.]+Z?)/.exec(head) : null;
  if (m) {
    const v = plausibleMs(Date.parse(m[1]!.endsWith('Z') ? m[1]! : `${m[1]}Z`));
    if (v !== null) return v;
  }
  const k = classify(name);
  return k.kind === 'stackdump' ? plausibleMs(k.epoch * 1000) : null;
}

/** An mtime later than the newest record by more than this is a copy's, not the run's. */
export const MTIME_TRUST_MS = 10 * 60_000;

/** Whether a file's mtime can be believed, given the span the records cover (null: no record dates anything). */
export function mtimeBelievable(mtimeMs: number, records: { start: number; end: number } | null): boolean {
  if (!records) return true;
  return mtimeMs <= records.end + MTIME_TRUST_MS && mtimeMs >= records.start - 7 * 86_400_000;
}

/** The prefix of a line file present at `at`: its size (0 when no line is yet). */
export function sizeAt(cuts: Cut[], at: number): number {
  let lo = 0;
  let hi = cuts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cuts[mid]!.at <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? 0 : cuts[lo - 1]!.end;
}

/** The time of the newest line present at `at` (the file's mtime as it stood), or null. */
export function lastLineAt(cuts: Cut[], at: number): number | null {
  let best: number | null = null;
  for (let lo = 0, hi = cuts.length; lo < hi;) {
    const mid = (lo + hi) >> 1;
    if (cuts[mid]!.at <= at) {
      best = cuts[mid]!.at;
      lo = mid + 1;
    } else hi = mid;
  }
  return best;
}
