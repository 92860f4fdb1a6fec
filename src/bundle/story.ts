// The README.md inside a bundle, pure: the story of the run in time order (what happened, when, to
// which rank, what was done, what the verdict is), built from the report's history and alerts, the
// action log, the stack dumps, the supervisor's and watchdog's records and nsa-top's journal (the run
// state's changes with their why and culprit, critical alerts raised and cleared); then what the bundle
// holds, what was cut to stay under its cap, and what was refused (links out of the run dir).
import type { Report } from '../checks/report.js';
import type { JournalRecord } from '../journal/codec.js';
import type { ActionRecord } from '../trainer/control/types.js';

export interface StoryEvent {
  ts: number;
  text: string;
  rank?: number | null;
}

export interface StoryInput {
  name: string;
  dir: string;
  host: string;
  bundledAt: number;
  nsaTopVersion: string;
  report: Report | null;
  /** the run state now, and why (status's evaluation) */
  state: { runState: string; why: string };
  /** the last time the run's step advanced, and the step (a hang starts there) */
  lastAdvance: { ts: number; step: number | null } | null;
  actions: readonly ActionRecord[];
  dumps: readonly { name: string; ts: number; rank: number | null; kind: string; file: string }[];
  stopEvents: readonly { ts: number; kind: string; who: string | null; source: string }[];
  stalls: readonly { ts: number; step: number | null; rank: number | null; title: string }[];
  /** the journal's event records (src/journal/codec.ts: state, alert, clear; others are ignored),
   *  oldest first: what the cockpit or watchdog said as it happened (the stall, RESTARTING…) */
  journal?: readonly JournalEvent[];
  /** more events with a time: the run's markers (.HALT written, .anomaly_type) */
  extra?: readonly StoryEvent[];
  contents: readonly { name: string; bytes: number; note?: string }[];
  cut: readonly string[];
  refused: readonly string[];
  notes: readonly string[];
  redactions: number;
}

/** one event line of the journal, decoded (src/journal/codec.ts's eventsOf) */
export type JournalEvent = Pick<JournalRecord, 't' | 'k'> & Record<string, unknown>;

/** the most journal events told (a flapping alert is told this many times at most, then counted) */
export const JOURNAL_EVENTS_MAX = 60;

const str = (x: unknown) => (x === null || x === undefined ? '' : String(x));
const rankOf = (x: unknown): number | null => (typeof x === 'number' && Number.isInteger(x) ? x : null);

/**
 * A journal event as the story tells it, or null when the story does not tell it: the run state's
 * changes (with the why, naming the culprit) and critical alerts raised and cleared. Dumps, actions
 * and restarts are told from their own files (the dumps, actions.jsonl, the run's segments).
 */
export function journalStoryEvent(r: JournalEvent): StoryEvent | null {
  if (r.k === 'state') {
    const culprit = typeof r.culprit === 'object' && r.culprit ? rankOf((r.culprit as { rank?: unknown }).rank) : null;
    const from = r.from ? `${str(r.from)} → ` : 'nsa-top began watching: ';
    return {
      ts: r.t,
      rank: culprit,
      text: `STATE ${from}${str(r.to)}${culprit !== null ? ` (culprit rank ${culprit})` : ''} — ${str(r.why)}`,
    };
  }
  if ((r.k === 'alert' || r.k === 'clear') && r.severity === 'critical') {
    const rank = rankOf(r.rank);
    return {
      ts: r.t,
      rank,
      text: `${r.k === 'alert' ? 'CRITICAL raised' : 'CRITICAL cleared'}: ${str(r.title)}${rank !== null ? ` (rank ${rank})` : ''}`,
    };
  }
  return null;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

function actionText(a: ActionRecord): string {
  const target = a.target as Record<string, unknown>;
  const ranks = Array.isArray(target.perRank)
    ? ` (${(target.perRank as Record<string, unknown>[])
        .map(
          (r) =>
            `rank ${String(r.rank)}: ${String(r.status)}${typeof r.file === 'string' ? ` → ${r.file.split('/').pop()}` : ''}`,
        )
        .join(', ')})`
    : '';
  return `ACTION ${a.action} by ${a.who.user}: ${a.result} — ${a.detail}${ranks}`;
}

/** Every event of the run's story, oldest first (a later event of the same second after an earlier one). */
export function storyEvents(s: StoryInput): StoryEvent[] {
  const ev: StoryEvent[] = [];
  const h = s.report?.history;
  for (const g of h?.segments ?? []) {
    if (g.startTs !== null)
      ev.push({
        ts: g.startTs,
        text: `START segment #${g.index}${g.pid !== null ? ` (pid ${g.pid})` : ''} at step ${g.firstStep ?? '—'}`,
      });
    if (g.end !== 'current' && g.endTs !== null)
      ev.push({ ts: g.endTs, text: `END segment #${g.index} at step ${g.lastStep ?? '—'}: ${g.end} — ${g.endWhy}` });
  }
  for (const e of h?.events ?? [])
    if (e.ts !== null) ev.push({ ts: e.ts, rank: e.rank ?? null, text: `${e.kind.toUpperCase()}: ${e.text}` });
  if (s.lastAdvance && /STALL|HANG/i.test(s.state.runState))
    ev.push({
      ts: s.lastAdvance.ts,
      text: `HANG: the step stopped advancing here (last progress at step ${s.lastAdvance.step ?? '—'}); the run is ${s.state.runState} now`,
    });
  for (const x of s.stalls)
    ev.push({
      ts: x.ts,
      rank: x.rank,
      text: `WATCHDOG stall decision${x.step !== null ? ` at step ${x.step}` : ''}: ${x.title}`,
    });
  for (const d of s.dumps)
    ev.push({
      ts: d.ts,
      rank: d.rank,
      text: `DUMP ${d.rank !== null ? `rank ${d.rank}` : 'rank ? (no claim names it)'}: ${d.name} (${d.kind === 'watchdog' ? "the trainer's own watchdog" : 'on a signal'}) → ${d.file}`,
    });
  for (const a of s.actions) if (a.result !== 'started') ev.push({ ts: a.ts, text: actionText(a) });
  for (const e of s.stopEvents)
    if (e.source !== 'actions.jsonl')
      ev.push({ ts: e.ts, text: `${e.kind.toUpperCase()} by ${e.who ?? '?'} (${e.source})` });
  const told = (s.journal ?? []).map(journalStoryEvent).filter((e): e is StoryEvent => e !== null);
  ev.push(...told.slice(0, JOURNAL_EVENTS_MAX));
  if (told.length > JOURNAL_EVENTS_MAX)
    ev.push({
      ts: told[JOURNAL_EVENTS_MAX]!.ts,
      text: `… ${told.length - JOURNAL_EVENTS_MAX} more state changes and critical alerts in the journal (see journal/)`,
    });
  ev.push(...(s.extra ?? []));
  return ev.sort((a, b) => a.ts - b.ts);
}

export function storyReadme(s: StoryInput): string {
  const out: string[] = [];
  const r = s.report;
  out.push(`# nsa-top bundle: ${s.name}`, '');
  out.push(`- Run dir: \`${s.dir}\`${s.host !== 'local' ? ` on ${s.host}` : ''}`);
  out.push(`- Bundled: ${iso(s.bundledAt)} by nsa-top ${s.nsaTopVersion}`);
  out.push(`- State now: **${s.state.runState}** — ${s.state.why}`);
  if (r)
    out.push(
      `- Verdict: **${r.verdict}** (${r.phases[r.target]?.title ?? `phase ${r.target}`}) — ${r.phases[r.target]?.why ?? ''}`,
    );
  else out.push('- Verdict: none (the run holds nothing to judge)');
  for (const a of r?.critical ?? []) out.push(`- CRITICAL ${a.title} — ${a.detail}`);
  out.push('', '## What happened, in order', '');
  const ev = storyEvents(s);
  if (!ev.length) out.push('Nothing recorded with a time.');
  for (const e of ev) out.push(`${ev.indexOf(e) + 1}. ${iso(e.ts)}  ${e.text}`);
  out.push('', '## What was done', '');
  const done = s.actions.filter((a) => a.result !== 'started');
  if (!done.length) out.push('No action by nsa-top is recorded (actions.jsonl).');
  for (const a of done) out.push(`- ${iso(a.ts)} ${actionText(a)}`);
  out.push('', '## The verdict', '');
  if (r) {
    out.push(
      `${r.verdict} for ${r.phases[r.target]?.title ?? `phase ${r.target}`}; the run is ${s.state.runState}: ${s.state.why}.`,
    );
    for (const a of [...r.critical, ...r.warnings]) out.push(`- ${a.severity} ${a.title}`);
    out.push('', 'The full grading is `report.txt` / `report.json`; the snapshot nsa-top saw is `status.json`.');
  } else out.push(`The run is ${s.state.runState}: ${s.state.why}.`);
  out.push('', '## In this bundle', '');
  for (const c of s.contents) out.push(`- \`${c.name}\` ${c.bytes} bytes${c.note ? ` — ${c.note}` : ''}`);
  out.push(
    '',
    `Secrets were redacted by name and by shape in every text file (${s.redactions} replacement${s.redactions === 1 ? '' : 's'}); checkpoints are listed in \`checkpoints.txt\`, never copied.`,
  );
  if (s.cut.length) out.push('', '## Cut to stay under the size cap', '', ...s.cut.map((c) => `- ${c}`));
  if (s.refused.length) out.push('', '## Refused (links are never followed)', '', ...s.refused.map((c) => `- ${c}`));
  if (s.notes.length) out.push('', '## Notes', '', ...s.notes.map((c) => `- ${c}`));
  return out.join('\n') + '\n';
}
