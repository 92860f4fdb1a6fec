// The journal read back as a ReplaySource (src/replay/source.ts): the parts of
// <out_dir>/.nsa-top/journal*.jsonl, oldest first, indexed by time without parsing every line (v, t
// and k lead each line); stateAt(t) rebuilds the CockpitState from the newest keyframe at or before
// t forward. Read through the Host (a run on another machine is read over SSH, in one read a part).
import type { CockpitState } from '../cockpit/state.js';
import type { Host } from '../remote/host.js';
import type { ReplayMarker, ReplaySource } from '../replay/source.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import type { RaisedCritical } from '../trainer/control/stopfacts.js';
import { decodeRecord, JOURNAL_VERSION, markerOf, peekRecord, stateOfRecord, type JournalRecord } from './codec.js';
import { JOURNAL_PARTS, journalPart } from './writer.js';

/** the most a part is read (a part is capped by the writer; this guards a hand-grown file) */
const PART_READ_MAX = 256 * 1024 * 1024;

interface Line {
  t: number;
  k: string;
  text: string;
}

export interface JournalSource extends ReplaySource {
  /** the first moment the run's step was at least `step` (ms), or null when it never was */
  timeOfStep(step: number): Promise<number | null>;
  /** the raw lines with t in [from, to] (the bundle's window), oldest first */
  linesBetween(from: number, to: number): string[];
  /** lines skipped: not JSON, another version, a delta without a keyframe before it */
  readonly skipped: number;
}

/** Every record line this version reads, from the journal's parts, oldest part first. */
async function readLines(
  host: Host,
  dirs: RunDirs,
): Promise<{ lines: Line[]; bytes: number; files: number; skipped: number; otherVersion: number }> {
  const dir = `${dirs.outDir}/${NSA_DIR}`;
  const lines: Line[] = [];
  let bytes = 0;
  let files = 0;
  let skipped = 0;
  let otherVersion = 0;
  for (let i = JOURNAL_PARTS + 4; i >= 0; i--) {
    const path = `${dir}/${journalPart(i)}`;
    const st = await host.stat(path).catch(() => null);
    if (!st || !st.isFile) continue;
    const buf = await host.readFile(path, PART_READ_MAX).catch(() => null);
    if (!buf) continue;
    files++;
    bytes += buf.length;
    for (const text of buf.toString('utf8').split('\n')) {
      if (!text) continue;
      const h = peekRecord(text);
      if (!h) {
        skipped++;
        continue;
      }
      if (h.v !== JOURNAL_VERSION) {
        otherVersion++;
        continue;
      }
      lines.push({ t: h.t, k: h.k, text });
    }
  }
  return { lines, bytes, files, skipped, otherVersion };
}

/**
 * The critical alerts the run's journal recorded as raised, oldest first, whether or not they
 * cleared later (a report tells the whole run, not its last moment). Empty when there is no journal.
 */
export async function journalCriticals(host: Host, dirs: RunDirs): Promise<RaisedCritical[]> {
  const { lines } = await readLines(host, dirs);
  const out: RaisedCritical[] = [];
  for (const l of lines) {
    if (l.k !== 'alert') continue;
    const r = decodeRecord(l.text);
    if (!r || r.severity !== 'critical' || typeof r.id !== 'string') continue;
    out.push({
      ts: r.t,
      id: r.id,
      title: typeof r.title === 'string' ? r.title : r.id,
      rank: typeof r.rank === 'number' ? r.rank : null,
    });
  }
  return out;
}

/** Reads a run's journal; null when the run has none (no part holds a record this version reads). */
export async function journalSource(host: Host, dirs: RunDirs): Promise<JournalSource | null> {
  const { lines, bytes, files, otherVersion, skipped: skipped0 } = await readLines(host, dirs);
  let skipped = skipped0;
  // a writer's clock may step back a little between parts: keep file order, which is append order
  const keys = lines.map((l, i) => (l.k === 'key' ? i : -1)).filter((i) => i >= 0);
  if (keys.length === 0) return null;
  const first = keys[0]!;
  const markers: ReplayMarker[] = [];
  for (const l of lines) {
    if (l.k === 'key' || l.k === 'delta' || l.k === 'open' || l.k === 'note') continue;
    const r = decodeRecord(l.text);
    const m = r && markerOf(r);
    if (m) markers.push(m);
  }
  const states = lines.filter((l, i) => i >= first && (l.k === 'key' || l.k === 'delta'));
  const span = { start: lines[first]!.t, end: states.at(-1)!.t };
  const missing: string[] = [];
  if (otherVersion) missing.push(`${otherVersion} lines of another journal version not read`);
  missing.push('no history before the journal began', 'GPU and host samples every 10 s at most');

  // the state at line index idx (into `lines`): from the newest keyframe at or before it forward
  const cache = { idx: -1, state: null as Record<string, unknown> | null };
  const rebuild = (idx: number): Record<string, unknown> | null => {
    let start = -1;
    for (let j = keys.length - 1; j >= 0; j--)
      if (keys[j]! <= idx) {
        start = keys[j]!;
        break;
      }
    if (start < 0) return null;
    let base: Record<string, unknown> | null = null;
    let from = start;
    // walking forward from the cached state is cheaper when no keyframe lies between
    if (cache.state && cache.idx >= start && cache.idx <= idx) {
      base = cache.state;
      from = cache.idx + 1;
    }
    for (let i = from; i <= idx; i++) {
      const l = lines[i]!;
      if (l.k !== 'key' && l.k !== 'delta') continue;
      const r = decodeRecord(l.text);
      if (!r) continue;
      try {
        base = stateOfRecord(l.k === 'key' ? null : base, r) ?? base;
      } catch {
        skipped++;
      }
    }
    cache.idx = idx;
    cache.state = base;
    return base;
  };
  /** index of the newest key/delta line with t <= at */
  const indexAt = (at: number): number => {
    let best = first;
    for (let i = first; i < lines.length; i++) {
      const l = lines[i]!;
      if (l.k !== 'key' && l.k !== 'delta') continue;
      if (l.t <= at) best = i;
      else if (l.t > at + 60_000) break;
    }
    return best;
  };

  return {
    origin: `journal, ${files} file${files === 1 ? '' : 's'}, ${(bytes / 1048576).toFixed(1)} MB`,
    span,
    markers,
    missing,
    get skipped() {
      return skipped;
    },
    async stateAt(at: number): Promise<CockpitState> {
      const s = rebuild(indexAt(at));
      if (!s) throw new Error(`the journal has no state at ${new Date(at).toISOString()}`);
      return s as unknown as CockpitState;
    },
    async timeOfStep(step: number): Promise<number | null> {
      let base: Record<string, unknown> | null = null;
      for (let i = first; i < lines.length; i++) {
        const l = lines[i]!;
        if (l.k !== 'key' && l.k !== 'delta') continue;
        const r: JournalRecord | null = decodeRecord(l.text);
        if (!r) continue;
        try {
          base = stateOfRecord(l.k === 'key' ? null : base, r) ?? base;
        } catch {
          continue;
        }
        const run = base?.run as { step?: number | null } | undefined;
        if (typeof run?.step === 'number' && run.step >= step) return l.t;
      }
      return null;
    },
    linesBetween(from: number, to: number): string[] {
      return lines.filter((l) => l.t >= from && l.t <= to).map((l) => l.text);
    },
  };
}
