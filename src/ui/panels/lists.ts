// Alerts, Log, Dumps and the Action log: scrollable lists.
import type { ActionRecord } from '../../trainer/control-types.js';
import { newestDumpSet } from '../dumps.js';
import { ago, clock } from '../format.js';
import type { Role } from '../palette.js';
import { clean, ellipsize, type Line, t, wrap } from '../text.js';
import { scrollSlice, type PanelFn } from '../view.js';

const SEV: Record<string, { role: Role; tag: string }> = {
  critical: { role: 'crit', tag: 'CRIT' },
  warning: { role: 'warn', tag: 'WARN' },
  info: { role: 'info', tag: 'info' },
};

export const alertsPanel: PanelFn = ({ s, v, w, h, now }) => {
  if (s.alerts.length === 0) return { lines: [[t('no alerts', 'ok')]], note: '0' };
  const sorted = [...s.alerts].sort((a, b) => b.since - a.since);
  const body: Line[] = [];
  for (const a of sorted) {
    const sev = SEV[a.severity] ?? SEV.info!;
    body.push([t(sev.tag, sev.role, { bold: true, inverse: a.severity === 'critical' }), t(` ${clean(a.title)}`, sev.role)]);
    const when = `  since ${clock(a.since)} (${ago(a.since, now)})`;
    const detail = a.detail && (h > 6 || sorted.length <= 2) ? wrap(`${when} · ${clean(a.detail)}`, w - 2).slice(0, 2) : [when];
    for (const l of detail) body.push([t(l.startsWith('  ') ? l : `  ${l}`, 'dim')]);
  }
  const sl = scrollSlice(body, h, v.scroll.alerts ?? 0);
  const crit = s.alerts.filter((a) => a.severity === 'critical').length;
  return { lines: sl.shown, more: sl.more, note: crit ? `${s.alerts.length}, ${crit} critical` : `${s.alerts.length}` };
};

const STEP_RE = /\bstep[ =:]*0*(\d+)\b/i;

export const logPanel: PanelFn = ({ s, v, h }) => {
  const lines = s.run.log.lines;
  if (lines.length === 0) return { lines: [[t(s.run.log.file ? 'log is empty' : 'no train.log in the run dir', 'dim')]] };
  const alertSteps = new Map<number, Role>();
  for (const a of s.alerts) if (a.step != null) alertSteps.set(a.step, a.severity === 'critical' ? 'crit' : 'warn');
  // scroll counts from the bottom (newest); only the lines on screen are styled
  const off = v.scroll.log ?? 0;
  const max = Math.max(0, lines.length - h);
  const o = Math.min(Math.max(0, off), max);
  const start = Math.max(0, lines.length - h - o);
  const body: Line[] = lines.slice(start, start + h).map((raw) => {
    const l = clean(raw);
    const m = STEP_RE.exec(l);
    const mark = m ? alertSteps.get(Number(m[1])) : undefined;
    if (mark) return [t('▶ ', mark, { bold: true }), t(l, mark)];
    const role: Role | undefined = /error|traceback|nan|oom|out of memory/i.test(l) ? 'crit' : /warn|HALT|fallback/i.test(l) ? 'warn' : /^\[boot\]|^\[train\]/.test(l) ? 'info' : undefined;
    return [t('  '), t(l, role)];
  });
  return { lines: body, more: o, note: o ? `↑${o}` : s.run.log.file ? s.run.log.file.split('/').pop() : undefined };
};

export const dumpsPanel: PanelFn = ({ s, v, w, h, now }) => {
  const pidToRank = new Map<number, number>();
  for (const r of s.run.ranks) if (r.pid != null) pidToRank.set(r.pid, r.rank);
  for (const r of s.procs?.ranks ?? []) pidToRank.set(r.proc.pid, r.rank);
  const set = newestDumpSet(s.run.dumps, pidToRank);
  if (!set) return { lines: [[t('no stack dumps yet (d dumps every rank)', 'dim')]] };
  const body: Line[] = [];
  body.push([t(`${set.kind === 'watchdog' ? 'watchdog ' : ''}set @ ${clock(set.at)} (${ago(set.at, now)}) · ${set.dumps.length} dump${set.dumps.length === 1 ? '' : 's'}: `, 'dim'), t(set.dumps.map((d) => d.label).join(' '), 'info')]);
  const ws = s.run.identity.worldSize;
  const seenRanks = set.dumps.filter((d) => d.rank != null).length;
  if (ws != null && seenRanks > 0 && seenRanks < ws) body.push([t(`missing: ranks ${Array.from({ length: ws }, (_, i) => i).filter((r) => !set.dumps.some((d) => d.rank === r)).join(',')}`, 'warn')]);
  for (const g of set.groups) {
    const who = g.members.map((m) => m.label).join(',');
    const step = g.members[0]?.dump.step;
    const head = g.odd ? `◆ ODD: ${who}` : `● ${who}${g.members.length > 1 ? ` (${g.members.length} identical)` : ''}`;
    body.push([t(head, g.odd ? 'crit' : 'ok', { bold: true }), t(step != null ? `  step ${step}` : '', 'dim'), t(g.members[0]?.dump.phase ? ` ${g.members[0].dump.phase}` : '', 'dim')]);
    for (const f of g.frames) {
      const file = f.file.split('/').slice(-1)[0];
      body.push([t(`   ${f.func} `, g.odd ? 'warn' : undefined), t(`${file}:${f.line ?? '?'}`, 'dim')]);
      if (f.code && w > 60) body.push([t(`      ${ellipsize(clean(f.code), w - 7)}`, 'dim')]);
    }
  }
  const sl = scrollSlice(body, h, v.scroll.dumps ?? 0);
  return { lines: sl.shown, more: sl.more, note: `${s.run.dumps.length} files` };
};

function who(a: ActionRecord): string {
  const tty = a.who.tmux ?? a.who.tty;
  return `${a.who.user}${tty ? `@${tty.replace(/^\/dev\//, '')}` : ''}`;
}

const RESULT_ROLE: Record<ActionRecord['result'], Role> = { started: 'info', ok: 'ok', partial: 'warn', failed: 'crit', refused: 'warn' };

export const actionsPanel: PanelFn = ({ s, v, w, h }) => {
  if (s.actions.length === 0) return { lines: [[t('no actions taken on this run yet', 'dim')]] };
  const sorted = [...s.actions].sort((a, b) => b.ts - a.ts);
  const body: Line[] = [];
  for (const a of sorted) {
    body.push([t(`${clock(a.ts)} `, 'dim'), t(who(a), 'accent'), t(` ${a.action} `, 'title', { bold: true }), t(a.result, RESULT_ROLE[a.result] ?? 'dim')]);
    if (a.detail) body.push([t(`   ${ellipsize(clean(a.detail), w - 3)}`, 'dim')]);
  }
  const sl = scrollSlice(body, h, v.scroll.actions ?? 0);
  return { lines: sl.shown, more: sl.more, note: `${s.actions.length}` };
};
