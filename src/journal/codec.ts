// The journal's lines, encoded and decoded — pure (no I/O): what a cockpit or watchdog observed and
// judged, one JSON line per change, so a reader can rebuild the CockpitState of any moment
// (docs/journal.md is the format). Every line is `{"v":1,"t":<ms on the run host's clock>,"k":<kind>,…}`
// with v, t and k first, in that order, so a reader finds a line's time and kind without parsing it.
//  - key:   the whole state (`s`), now and then, and first in every file: a reader starts there;
//  - delta: what changed since the previous line's state (`d`, a patch: see diffState);
//  - alert / clear / state / action / dump / restart / checkpoint / note: the events of that change,
//    said once in words (the replay's markers; `grep` finds them) — derived from two states here.
import type { CockpitState } from '../cockpit/state.js';
import type { ReplayMarker } from '../replay/source.js';

export const JOURNAL_VERSION = 1;

export type RecordKind =
  'open' | 'key' | 'delta' | 'alert' | 'clear' | 'state' | 'action' | 'dump' | 'restart' | 'checkpoint' | 'note';

export interface JournalRecord {
  v: number;
  /** ms epoch on the run host's clock */
  t: number;
  k: RecordKind;
  [field: string]: unknown;
}

/** One patch: what changed in an object (see diffState). */
export type Patch = Record<string, unknown>;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Deep equality of two JSON values (undefined members count as absent). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') {
    // NaN and ±Infinity are written as null: equal once encoded
    return typeof a === 'number' && typeof b === 'number' && !Number.isFinite(a) && !Number.isFinite(b);
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  for (const k in ao) if (ao[k] !== undefined && !jsonEqual(ao[k], bo[k])) return false;
  for (const k in bo) if (bo[k] !== undefined && ao[k] === undefined) return false;
  return true;
}

/**
 * An array's change: `{"$s":S,"$m":M,"$p":[…]}` — drop S items from the front, keep the next M,
 * then append the items of $p. A sliding window (a series' recent points) and a grown list (the
 * action log, a bucket list whose last bucket moved) cost only what is new.
 */
function diffArray(a: unknown[], b: unknown[]): { $s: number; $m: number; $p: unknown[] } {
  // items are compared by reference before their content: a series window (2000 points on a long
  // run) shares its point objects with the last one, and this runs for each changed series every
  // second — a call per item where a comparison answers is most of what recording a look cost
  let bestS = 0;
  let bestM = 0;
  while (bestM < a.length && bestM < b.length && (a[bestM] === b[bestM] || jsonEqual(a[bestM], b[bestM]))) bestM++;
  if (bestM < b.length && b.length > 0) {
    // a window that slid: the new array's first item further into the old one
    const first = b[0];
    for (let s = 1; s < a.length && a.length - s > bestM; s++) {
      if (a[s] !== first && !jsonEqual(a[s], first)) continue;
      let m = 1;
      while (s + m < a.length && m < b.length && (a[s + m] === b[m] || jsonEqual(a[s + m], b[m]))) m++;
      if (m > bestM) {
        bestS = s;
        bestM = m;
      }
      break;
    }
  }
  return { $s: bestS, $m: bestM, $p: b.slice(bestM) };
}

/** One value's change: `[v]` replaces it, a patch object changes an object in place (diffState). */
function diffValue(a: unknown, b: unknown): unknown {
  if (isObj(a) && isObj(b)) return diffState(a, b) ?? {};
  if (Array.isArray(a) && Array.isArray(b)) {
    const d = diffArray(a, b);
    // an array of as many items whose items changed in place (per-rank rows): only what changed in them
    if (d.$s === 0 && a.length === b.length && d.$p.length > 0) {
      const e: Record<string, unknown> = {};
      let inPlace = false;
      for (let i = d.$m; i < b.length; i++)
        if (!jsonEqual(a[i], b[i])) {
          e[i] = diffValue(a[i], b[i]);
          inPlace ||= !Array.isArray(e[i]);
        }
      // items replaced whole (numbers, strings) are written as the array, whole or its tail
      if (inPlace) return { $e: e };
    }
    // a change as big as the array is written whole
    return d.$p.length >= b.length ? [b] : d;
  }
  return [b];
}

/**
 * What changed from `a` to `b`, or null when nothing did. For each changed member of an object:
 * `[value]` (a one-item array) replaces it whole; `[]` removes it; an object is a patch of the
 * object it was (both were objects); `{"$s","$m","$p"}` is an array's change (diffArray);
 * `{"$e":{"i":change}}` changes items of an array of the same length in place, each as a member.
 * `omit`: a top-level member left out (the recorder's `at`, which is the line's `t`). `a` and `b` may
 * be live states: what JSON would not keep (undefined members, NaN) compares as JSON would write it.
 */
export function diffState(a: Record<string, unknown>, b: Record<string, unknown>, omit?: string): Patch | null {
  let out: Patch | null = null;
  const set = (k: string, v: unknown) => ((out ??= {})[k] = v);
  for (const k in b) {
    const bv = b[k];
    if (bv === undefined || k === omit) continue;
    const av = a[k];
    if (av === undefined) set(k, [bv]);
    else if (!jsonEqual(av, bv)) set(k, diffValue(av, bv));
  }
  for (const k in a) if (a[k] !== undefined && b[k] === undefined && k !== omit) set(k, []);
  return out;
}

/** `old` changed by one member's change `p` (see diffState); undefined: removed. */
function applyValue(old: unknown, p: unknown, at: string): unknown {
  if (Array.isArray(p)) return p.length === 0 ? undefined : p[0];
  if (!isObj(p)) throw new Error(`bad patch at ${at}`);
  if ('$p' in p) {
    const arr = Array.isArray(old) ? old : [];
    const s = Number(p.$s ?? 0);
    const m = Number(p.$m ?? 0);
    if (!Array.isArray(p.$p) || s + m > arr.length) throw new Error(`bad array patch at ${at}`);
    return [...arr.slice(s, s + m), ...p.$p];
  }
  if ('$e' in p) {
    if (!Array.isArray(old) || !isObj(p.$e)) throw new Error(`bad array patch at ${at}`);
    const arr = [...old];
    for (const i in p.$e) {
      const n = Number(i);
      if (!Number.isInteger(n) || n < 0 || n >= arr.length) throw new Error(`bad array patch at ${at}[${i}]`);
      arr[n] = applyValue(arr[n], p.$e[i], `${at}[${i}]`);
    }
    return arr;
  }
  return applyPatch(isObj(old) ? old : {}, p);
}

/** `a` with `patch` applied (a new object; `a` itself is never changed). Throws on a malformed patch. */
export function applyPatch(a: Record<string, unknown>, patch: Patch): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const k in patch) {
    const v = applyValue(out[k], patch[k], k);
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

/** The state as the journal keeps it: plain JSON (what JSON.stringify keeps), `at` in the record's t. */
export function plainState(s: CockpitState): Record<string, unknown> {
  return JSON.parse(JSON.stringify(s)) as Record<string, unknown>;
}

/** How often the readings that move every look are kept (a change that matters is kept at once). */
export const SAMPLE_EVERY_MS = 10_000;

/** what must be kept at once about the rank processes: which they are and their state (not CPU, RSS, age) */
const procsKey = (s: CockpitState) =>
  s.procs
    ? `${s.procs.ranks.map((r) => `${r.rank}:${r.proc.pid}:${r.proc.startTime}:${r.proc.state}`).join(',')}|${s.procs.launcher?.pid ?? ''}|${s.procs.unproven?.length ?? 0}|${s.procs.error ?? ''}`
    : 'none';

/**
 * The state to record: the readings that move at every look — the GPU and host samples, the rank
 * processes' CPU, RSS and age, the straggler scores, the derived numbers (MFU), nsa-top's own cost —
 * are kept from the last recorded state until SAMPLE_EVERY_MS has passed since they were taken,
 * unless what matters changed: the GPUs' status, which processes are the ranks and their state, the
 * rank the straggler view names. `sampledAt` is when the recorded samples were taken.
 */
export function throttleSamples(
  prev: CockpitState | null,
  next: CockpitState,
  sampledAt: number,
  everyMs = SAMPLE_EVERY_MS,
): { state: CockpitState; sampled: boolean } {
  if (
    !prev ||
    next.at - sampledAt >= everyMs ||
    (prev.gpu?.status ?? null) !== (next.gpu?.status ?? null) ||
    procsKey(prev) !== procsKey(next) ||
    (prev.straggler?.straggler?.rank ?? null) !== (next.straggler?.straggler?.rank ?? null)
  )
    return { state: next, sampled: true };
  return {
    state: {
      ...next,
      gpu: prev.gpu,
      hostStats: prev.hostStats,
      self: prev.self,
      procs: prev.procs,
      straggler: prev.straggler,
      numbers: prev.numbers,
    },
    sampled: false,
  };
}

/** One line of the journal (no newline). v, t and k lead. */
export function encodeRecord(t: number, k: RecordKind, fields: Record<string, unknown> = {}): string {
  return JSON.stringify({ v: JOURNAL_VERSION, t: Math.round(t), k, ...fields });
}

const HEAD_RE = /^\{"v":(\d+),"t":(-?\d+),"k":"([a-z]+)"/;

/** A line's version, time and kind without parsing it (null: not a journal line). */
export function peekRecord(line: string): { v: number; t: number; k: RecordKind } | null {
  const m = HEAD_RE.exec(line);
  return m ? { v: Number(m[1]), t: Number(m[2]), k: m[3] as RecordKind } : null;
}

/** One line parsed; null when it is not a journal record this version reads. */
export function decodeRecord(line: string): JournalRecord | null {
  let r: unknown;
  try {
    r = JSON.parse(line);
  } catch {
    return null;
  }
  if (!isObj(r) || typeof r.t !== 'number' || typeof r.k !== 'string' || r.v !== JOURNAL_VERSION) return null;
  return r as JournalRecord;
}

/** The state a keyframe or a delta leads to; `base` is the state before (null for a keyframe). */
export function stateOfRecord(base: Record<string, unknown> | null, r: JournalRecord): Record<string, unknown> | null {
  if (r.k === 'key' && isObj(r.s)) return { ...r.s, at: r.t };
  if (r.k === 'delta' && base && isObj(r.d)) return { ...applyPatch(base, r.d), at: r.t };
  if (r.k === 'delta' && base) return { ...base, at: r.t };
  return null;
}

// --------------------------------------------------------------------------- events of a change

const alertLine = (a: { severity: string; title: string }) => `${a.severity} ${a.title}`;

/**
 * The events between two consecutive states, each one record (without v and t): alerts raised
 * (or changed in severity) and cleared, the run state's changes with its why, new actions.jsonl
 * records, stack dumps, run segments (restarts) and complete checkpoints. prev null: the first
 * state — its alerts and state are said, its history is not (it is in the keyframe).
 */
export function eventsOf(prev: CockpitState | null, next: CockpitState): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const before = new Map((prev?.alerts ?? []).map((a) => [a.id, a]));
  for (const a of next.alerts) {
    const b = before.get(a.id);
    if (!b || b.severity !== a.severity)
      out.push({ k: 'alert', id: a.id, severity: a.severity, title: a.title, rank: a.rank ?? null });
  }
  const now = new Set(next.alerts.map((a) => a.id));
  for (const [id, b] of before) if (!now.has(id)) out.push({ k: 'clear', id, severity: b.severity, title: b.title });
  // the state's change, and the culprit it names when that changes (a stall's rank named after a dump)
  const culprit = next.culprit ? { rank: next.culprit.rank, why: next.culprit.why } : null;
  if (!prev || prev.runState !== next.runState || (culprit && prev.culprit?.rank !== culprit.rank))
    out.push({ k: 'state', from: prev?.runState ?? null, to: next.runState, why: next.runStateWhy, culprit });
  if (prev) {
    // the collector hands the same action log on until actions.jsonl changes: compared only then
    if (prev.actions !== next.actions) {
      const seen = new Set(prev.actions.map((a) => JSON.stringify(a)));
      for (const a of next.actions) if (!seen.has(JSON.stringify(a))) out.push({ k: 'action', rec: a });
    }
    const dumps = new Set(prev.run.dumps.map((d) => d.name));
    for (const d of next.run.dumps)
      if (!dumps.has(d.name)) out.push({ k: 'dump', file: d.name, rank: d.rank, pid: d.pid, dumpKind: d.kind });
    const segs = prev.run.segments.length;
    for (const s of next.run.segments.slice(segs))
      if (s.index > 0) out.push({ k: 'restart', segment: s.index, cause: s.cause, step: s.firstStep });
    const ck = new Set(prev.run.checkpoints.filter((c) => c.complete).map((c) => c.name));
    for (const c of next.run.checkpoints)
      if (c.complete && !ck.has(c.name)) out.push({ k: 'checkpoint', name: c.name, step: c.step });
  }
  return out;
}

/** The replay marker an event record is, or null (key, delta, open, note). */
export function markerOf(r: JournalRecord): ReplayMarker | null {
  const s = (x: unknown) => (x === null || x === undefined ? '' : String(x));
  switch (r.k) {
    case 'alert':
      return { at: r.t, kind: 'alert', label: alertLine(r as never) };
    case 'clear':
      return { at: r.t, kind: 'clear', label: `cleared ${s(r.title)}` };
    case 'state':
      return {
        at: r.t,
        kind: 'state',
        label:
          r.from === r.to && isObj(r.culprit)
            ? `${s(r.to)}: culprit rank ${s(r.culprit.rank)}`
            : `${r.from ? `${s(r.from)} → ` : ''}${s(r.to)}`,
      };
    case 'action': {
      const a = isObj(r.rec) ? r.rec : {};
      const who = isObj(a.who) ? s(a.who.user) : '';
      return { at: r.t, kind: 'action', label: `${s(a.action)}${who ? ` by ${who}` : ''}: ${s(a.result)}` };
    }
    case 'dump':
      return { at: r.t, kind: 'dump', label: `stack dump${r.rank !== null ? ` rank ${s(r.rank)}` : ''}: ${s(r.file)}` };
    case 'restart':
      return { at: r.t, kind: 'restart', label: `segment ${s(r.segment)} (${s(r.cause)}) from step ${s(r.step)}` };
    case 'checkpoint':
      return { at: r.t, kind: 'checkpoint', label: `checkpoint ${s(r.name)} (step ${s(r.step)})` };
    default:
      return null;
  }
}

export type { Json };
