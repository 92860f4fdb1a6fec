// Alerts, Log, Dumps and the Action log: scrollable lists.
import type { Alert } from '../../checks/types.js';
import type { CockpitState } from '../../cockpit/state.js';
import type { ActionRecord } from '../../trainer/control/types.js';
import { alertAcks, dumpTimeMs } from '../../checks/present.js';
import { dumpClaims, newestDumpSet, operatorSet, watchdogDumps } from '../dumps.js';
import { bindingOf, keyOf } from '../keymap.js';
import { ago, clock, dur } from '../format.js';
import type { Role } from '../palette.js';
import { highlight, matches, searchNote, shiftLine } from '../search.js';
import { clean, ellipsize, type Line, plain, strWidth, t, wrap } from '../text.js';
import { scrollSlice, type PanelFn } from '../view.js';

const SEV: Record<string, { role: Role; tag: string }> = {
  critical: { role: 'crit', tag: 'CRIT' },
  warning: { role: 'warn', tag: 'WARN' },
  info: { role: 'info', tag: 'info' },
};

/** One row of the alert timeline: an alert in force, or a cleared one, with its acknowledgements. */
export interface AlertEntry {
  key: string;
  alert: Alert;
  /** ms epoch the condition cleared (history entries only) */
  cleared: number | null;
  acks: ActionRecord[];
}

/**
 * The alert timeline as the panel lists it: alerts in force (critical first, then newest), then the
 * cleared ones, newest first. An acknowledgement in the action log belongs to the episode of its
 * alert id that was in force when it was written: the earliest one not cleared before it. (`since`
 * is where each cockpit first saw a condition, so two cockpits on one run may differ in it.)
 */
export function alertEntries(s: CockpitState): AlertEntry[] {
  const key = (a: Alert) => `${a.id}@${a.since}`;
  const out: AlertEntry[] = s.alerts.map((a) => ({ key: key(a), alert: a, cleared: null, acks: [] }));
  for (const h of s.alertHistory ?? [])
    out.push({ key: `${key(h)}>${h.cleared}`, alert: h, cleared: h.cleared, acks: [] });
  for (const { id, rec } of alertAcks(s.actions)) {
    // the episode it names by its start (this cockpit's own, or one the data dates), else the one in force then
    let best: AlertEntry | null = out.find((e) => e.alert.id === id && e.alert.since === rec.target['since']) ?? null;
    if (!best)
      for (const e of out)
        if (
          e.alert.id === id &&
          (e.cleared === null || e.cleared >= rec.ts) &&
          (!best || e.alert.since < best.alert.since)
        )
          best = e;
    best?.acks.push(rec);
  }
  return out;
}

/** The index of the selected entry: the one the view names, else the first. */
export function selectedAlert(entries: AlertEntry[], sel: string | null | undefined): number {
  const i = sel ? entries.findIndex((e) => e.key === sel) : -1;
  return i < 0 ? 0 : i;
}

function ackText(acks: ActionRecord[]): string {
  const a = acks[acks.length - 1]!;
  // the user and the time: the Actions panel has the terminal
  return `ack ${a.who.user} ${clock(a.ts)}${acks.length > 1 ? ` +${acks.length - 1}` : ''}`;
}

/** the ack key, as the keymap binds it, where it can act */
function ackNote(s: CockpitState): string {
  return bindingOf('ack').disabled?.(s) ? '' : ` · ${keyOf('ack')} ack`;
}

/** An entry's lines at a level of detail: 0 whole text; 1 no detail; 2 the when on one line; 3 the title only; 4 the title on one line. */
function entryLines(e: AlertEntry, level: number, w: number, now: number, mark: string): Line[] {
  const a = e.alert;
  const sev = SEV[a.severity] ?? SEV.info!;
  const done = e.cleared !== null;
  const role: Role = done ? 'dim' : sev.role;
  const tag = done ? `${sev.tag.toLowerCase()}` : sev.tag;
  const head = `${mark}${tag} `;
  const titleW = Math.max(1, w - strWidth(head));
  const title = clean(a.title);
  const tl = level <= 3 ? wrap(title, titleW) : [ellipsize(title, titleW)];
  const out: Line[] = [];
  tl.forEach((l, i) => {
    if (i === 0)
      out.push([
        t(mark, 'accent', { bold: true }),
        t(tag, role, { bold: !done, inverse: a.severity === 'critical' && !done && e.acks.length === 0 }),
        t(` ${l}`, role),
      ]);
    else out.push([t(' '.repeat(strWidth(head)) + l, role)]);
  });
  if (level >= 3) return out;
  const when = done
    ? `${clock(a.since)}–${clock(e.cleared)} (${dur((e.cleared! - a.since) / 1000)}), cleared ${ago(e.cleared, now)}`
    : `since ${clock(a.since)} (${ago(a.since, now)})${a.clearing !== undefined ? ` · clear since ${clock(a.clearing)}, held` : ''}`;
  const meta = `${when}${e.acks.length ? ` · ${ackText(e.acks)}` : ''}`;
  const ind = ' '.repeat(Math.min(strWidth(head), 6));
  const bodyW = Math.max(1, w - strWidth(ind));
  const text = level === 0 && a.detail ? `${meta} · ${clean(a.detail)}` : meta;
  const bl = level === 2 ? [ellipsize(meta, bodyW)] : wrap(text, bodyW);
  for (const l of bl) out.push([t(ind + l, 'dim')]);
  return out;
}

/**
 * Alerts in force and the cleared ones (the timeline), each with its whole text where the room
 * allows: every entry in full if that fits, else the others shortened step by step while the
 * selected one stays whole. ↑/↓ pick an entry, `a` acknowledges it, z/enter gives it the screen.
 */
export const alertsPanel: PanelFn = ({ s, v, w, h, now, focused, zoomed }) => {
  const entries = alertEntries(s);
  const hist = s.alertHistory?.length ?? 0;
  if (entries.length === 0) return { lines: [[t('no alerts', 'ok')]], note: '0' };
  const sel = selectedAlert(entries, v.alertSel);
  const cursor = focused || zoomed;
  const firstDone = entries.findIndex((e) => e.cleared !== null);
  type Levels = Record<string, number>;
  const build = (
    lv: Levels,
    histLevel: number,
  ): { lines: Line[]; selAt: number; selEnd: number; activeEnd: number; critEnd: number } => {
    const lines: Line[] = [];
    let selAt = 0,
      selEnd = 0,
      activeEnd = 0,
      critEnd = 0;
    if (s.alerts.length === 0) lines.push([t('no alerts now', 'ok')]);
    entries.forEach((e, i) => {
      if (i === firstDone) {
        activeEnd = lines.length;
        lines.push([t(`── cleared (${hist}) ${'─'.repeat(Math.max(0, w - 14 - String(hist).length))}`, 'dim')]);
      }
      if (i === sel) selAt = lines.length;
      const mark = cursor ? (i === sel ? '› ' : '  ') : '';
      // with the focus (or zoomed) the selected entry stays whole; else every entry gets the same room
      lines.push(
        ...entryLines(
          e,
          i === sel && (focused || zoomed) ? 0 : e.cleared !== null ? histLevel : (lv[e.alert.severity] ?? 0),
          w,
          now,
          mark,
        ),
      );
      if (i === sel) selEnd = lines.length;
      if (e.cleared === null && e.alert.severity === 'critical') critEnd = lines.length;
    });
    if (firstDone < 0) activeEnd = lines.length;
    return { lines, selAt, selEnd, activeEnd, critEnd };
  };
  // everything whole if it fits; else the cleared ones shrink to a line each (they follow below)
  // and the alerts in force shrink step by step, the least severe first, until they fit
  const lv: Levels = { critical: 0, warning: 0, info: 0 };
  let b = build(lv, 0);
  if (b.lines.length > h) {
    b = build(lv, 4);
    shrink: for (const sev of ['info', 'warning', 'critical']) {
      for (let level = 1; level <= 4 && b.activeEnd > h; level++) {
        // the criticals keep their whole titles while those fit; what is less severe goes below (↓)
        if (sev === 'critical' && level === 4 && b.critEnd <= h) break shrink;
        lv[sev] = level;
        b = build(lv, 4);
      }
    }
  }
  // keep the selected entry on screen: its first line, and as much of it as fits
  let off = 0;
  if (b.lines.length > h) {
    off = Math.max(0, Math.min(b.selAt, b.selEnd - h));
    off = Math.min(off, b.lines.length - h);
  }
  const shown = b.lines.slice(off, off + h);
  const crit = s.alerts.filter((a) => a.severity === 'critical').length;
  const note = `${s.alerts.length}${crit ? `, ${crit} critical` : ''}${hist ? ` · ${hist} cleared` : ''}${cursor ? ackNote(s) : ''}`;
  return { lines: shown, more: Math.max(0, b.lines.length - off - h), note };
};

/** Rows the alerts in force want at full text in a panel `w` wide (for the layout to make room). */
export function alertRowsWanted(s: CockpitState, w: number): number {
  let n = 0;
  for (const e of alertEntries(s)) if (e.cleared === null) n += entryLines(e, 0, w, s.at, '').length;
  return n;
}

/**
 * The critical alerts in one or two lines across the screen, for when the Alerts panel is not on
 * screen (another tab of its slot, or another panel zoomed): a critical is never only a tab label.
 */
export const alertBannerPanel: PanelFn = ({ s, w, h, now }) => {
  // criticals in force, unacknowledged first, then as the evaluation orders them
  const crit = alertEntries(s).filter((e) => e.cleared === null && e.alert.severity === 'critical');
  const order = [...crit].sort((x, y) => Number(x.acks.length > 0) - Number(y.acks.length > 0));
  const lines: Line[] = [];
  for (let i = 0; i < Math.min(h, order.length); i++) {
    const { alert: a, acks } = order[i]!;
    const left = order.length - i - 1;
    const tail = `${a.clearing !== undefined ? ' · clearing' : ''}${acks.length ? ` · ${ackText(acks)}` : ''} · ${ago(a.since, now)}${i === h - 1 && left > 0 ? ` · +${left} more (tab to Alerts)` : ''}`;
    const room = Math.max(1, w - 5 - strWidth(tail));
    lines.push([
      t('CRIT', 'crit', { bold: true, inverse: acks.length === 0 }),
      t(` ${ellipsize(clean(a.title), room)}`, 'crit'),
      t(tail, 'dim'),
    ]);
  }
  return { lines };
};

export { logPanel } from './log.js';

/** The Dumps panel's lines before scrolling (the search and `o` read them too); null: no set yet. */
export function dumpsBody(s: CockpitState, w: number, now: number): { body: Line[]; files: string[] } | null {
  const pidToRank = new Map<number, number>();
  for (const r of s.run.ranks) if (r.pid != null) pidToRank.set(r.pid, r.rank);
  for (const r of s.procs?.ranks ?? []) pidToRank.set(r.proc.pid, r.rank);
  // the odd rank: the one whose stack differs from the others' (the odd-rank rule), else the rank the
  // state names as the culprit — both the evaluation's answers, never judged here
  const odd = s.dumpOdd?.rank ?? s.culprit?.rank ?? null;
  // the operator's newest set first (its record says which file is whose), else the newest signal
  // set; the trainer's own watchdog dumps apart, so they never push the operator's set out of view
  const mine = operatorSet(s.run.dumps, s.actions, odd);
  const signalSet = mine ? null : newestDumpSet(s.run.dumps, pidToRank, odd, 8, dumpClaims(s.actions));
  const wd = watchdogDumps(s.run.dumps);
  const set =
    mine?.set ?? signalSet ?? (wd.count ? newestDumpSet(s.run.dumps, pidToRank, odd, 8, new Map(), 'watchdog') : null);
  if (!set) return null;
  const body: Line[] = [];
  // the files in the order the panel shows them (the odd group first, as the groups are drawn)
  const files: string[] = [];
  const n = (k: number, what: string) => `${k} ${what}${k === 1 ? '' : 's'}`;
  if (mine)
    body.push([
      t(
        `your set${mine.only ? ` of rank ${mine.only.join(', ')} only (chosen)` : ''} @ ${clock(set.at)} (${ago(set.at, now)}) by ${mine.by} · ${set.dumps.length}/${mine.total} ranks: `,
        'dim',
      ),
      t(set.dumps.map((d) => d.label).join(' ') || 'none', set.dumps.length === mine.total ? 'info' : 'warn'),
    ]);
  else
    body.push([
      t(
        `${set.kind === 'watchdog' ? "trainer's own watchdog " : ''}set @ ${clock(set.at)} (${ago(set.at, now)}) · ${n(set.dumps.length, 'dump')}: `,
        'dim',
      ),
      t(set.dumps.map((d) => d.label).join(' '), 'info'),
    ]);
  for (const m of mine?.missing ?? []) body.push([t(ellipsize(`r${m.rank}: ${m.why}`, w), 'warn')]);
  const ws = s.run.identity.worldSize;
  const seenRanks = set.dumps.filter((d) => d.rank != null).length;
  if (!mine && ws != null && seenRanks > 0 && seenRanks < ws)
    body.push([
      t(
        `missing: ranks ${Array.from({ length: ws }, (_, i) => i)
          .filter((r) => !set.dumps.some((d) => d.rank === r))
          .join(',')}`,
        'warn',
      ),
    ]);
  if (wd.newest && set.kind !== 'watchdog')
    body.push([
      t(
        `⚑ trainer's own watchdog: ${n(wd.count, 'dump')}, newest ${clock(dumpTimeMs(wd.newest))} (${ago(dumpTimeMs(wd.newest), now)}) — not part of this set`,
        'dim',
      ),
    ]);
  for (const g of [...set.groups].sort((a, b) => Number(b.odd) - Number(a.odd)))
    for (const m of g.members) files.push(m.dump.path);
  for (const g of set.groups) {
    const who = g.members.map((m) => m.label).join(',');
    const step = g.members[0]?.dump.step;
    const head = g.odd ? `◆ ODD: ${who}` : `● ${who}${g.members.length > 1 ? ` (${g.members.length} identical)` : ''}`;
    body.push([
      t(head, g.odd ? 'crit' : 'ok', { bold: true }),
      t(step != null ? `  step ${step}` : '', 'dim'),
      t(g.members[0]?.dump.phase ? ` ${g.members[0].dump.phase}` : '', 'dim'),
    ]);
    for (const f of g.frames) {
      const file = f.file.split('/').slice(-1)[0];
      body.push([t(`   ${f.func} `, g.odd ? 'warn' : undefined), t(`${file}:${f.line ?? '?'}`, 'dim')]);
      if (f.code && w > 60) body.push([t(`      ${ellipsize(clean(f.code), w - 7)}`, 'dim')]);
    }
  }
  return { body, files };
}

export const dumpsPanel: PanelFn = ({ s, v, w, h, now }) => {
  const d = dumpsBody(s, w, now);
  if (!d) return { lines: [[t('no stack dumps yet (d dumps every rank)', 'dim')]] };
  const search = v.search?.panel === 'dumps' ? v.search : null;
  const x = v.hscroll?.dumps ?? 0;
  const sl = scrollSlice(d.body, h, v.scroll.dumps ?? 0);
  const lines = sl.shown.map((l, i) => {
    let line = search?.query ? highlight(l, search.query) : l;
    if (x) line = shiftLine(line, x);
    return search?.at != null && sl.offset + i === search.at ? [t('›', 'accent', { bold: true }), ...line] : line;
  });
  const notes = [`${s.run.dumps.length} files`];
  if (x) notes.push(`→${x}`);
  if (search)
    notes.push(searchNote(search, search.typing ? null : d.body.filter((l) => matches(plain(l), search.query)).length));
  return { lines, more: sl.more, note: notes.join(' · ') };
};

function who(a: ActionRecord): string {
  const tty = a.who.tmux ?? a.who.tty;
  return `${a.who.user}${tty ? `@${tty.replace(/^\/dev\//, '')}` : ''}`;
}

const RESULT_ROLE: Record<ActionRecord['result'], Role> = {
  started: 'info',
  ok: 'ok',
  partial: 'warn',
  failed: 'crit',
  refused: 'warn',
};

export const actionsPanel: PanelFn = ({ s, v, w, h }) => {
  if (s.actions.length === 0) return { lines: [[t('no actions taken on this run yet', 'dim')]] };
  const sorted = [...s.actions].sort((a, b) => b.ts - a.ts);
  const body: Line[] = [];
  for (const a of sorted) {
    body.push([
      t(`${clock(a.ts)} `, 'dim'),
      t(who(a), 'accent'),
      t(` ${a.action} `, 'title', { bold: true }),
      t(a.result, RESULT_ROLE[a.result] ?? 'dim'),
    ]);
    if (a.detail) body.push([t(`   ${ellipsize(clean(a.detail), w - 3)}`, 'dim')]);
  }
  const sl = scrollSlice(body, h, v.scroll.actions ?? 0);
  return { lines: sl.shown, more: sl.more, note: `${s.actions.length}` };
};
