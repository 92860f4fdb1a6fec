// The Log panel: live, the collector's tail of train.log follows the end; scrolled back, the lines
// read from the file on demand (view.logPage) from the line the view is anchored on (a byte offset),
// so the view holds still while the log grows, and the title says how far behind live it is.
import type { CockpitState } from '../../cockpit/state.js';
import type { LogLine, LogPage } from '../../trainer/run/logback.js';
import type { Role } from '../palette.js';
import { highlight, matches, searchNote, shiftLine } from '../search.js';
import { clean, type Line, t } from '../text.js';
import type { PanelFn, ViewState } from '../view.js';

const STEP_RE = /\bstep[ =:]*0*(\d+)\b/i;

/** The first kept line at or after byte offset `at` (the anchor), as an index; lines.length if none. */
export function lineIndex(lines: readonly LogLine[], at: number): number {
  let lo = 0;
  let hi = lines.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (lines[mid]!.at < at) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export interface LogWindow {
  /** the lines on screen, oldest first (`at` null: the live tail, whose offsets are not known) */
  shown: { at: number | null; text: string }[];
  /** scrolled back: the index of the top line in page.lines */
  top: number | null;
  /** lines between the last one shown and the end of the log */
  behind: number;
  page: LogPage | null;
}

/** What the Log shows in `h` rows: the live tail, or the scroll-back from its anchor. */
export function logWindow(s: CockpitState, v: ViewState, h: number): LogWindow {
  const page = v.logPage ?? null;
  if (v.logAnchor == null || v.logAnchor < 0 || !page || page.lines.length === 0) {
    const lines = s.run.log.lines;
    return { shown: lines.slice(-h).map((text) => ({ at: null, text })), top: null, behind: 0, page };
  }
  const top = Math.max(0, Math.min(lineIndex(page.lines, v.logAnchor), page.lines.length - h));
  const shown = page.lines.slice(top, top + h);
  return { shown, top, behind: page.lines.length - top - shown.length + page.after, page };
}

function style(raw: string, alertSteps: Map<number, Role>): Line {
  const l = clean(raw);
  const m = STEP_RE.exec(l);
  const mark = m ? alertSteps.get(Number(m[1])) : undefined;
  if (mark) return [t('▶ ', mark, { bold: true }), t(l, mark)];
  const role: Role | undefined = /error|traceback|nan|oom|out of memory/i.test(l)
    ? 'crit'
    : /warn|HALT|fallback/i.test(l)
      ? 'warn'
      : /^\[boot\]|^\[train\]/.test(l)
        ? 'info'
        : undefined;
  return [t('  '), t(l, role)];
}

/** matches per (lines, query): a frame a second must not scan 20,000 lines each time */
const counted = new WeakMap<readonly (LogLine | string)[], { q: string; n: number }>();
function matchCount(lines: readonly (LogLine | string)[], q: string): number {
  const c = counted.get(lines);
  if (c?.q === q) return c.n;
  let n = 0;
  for (const l of lines) if (matches(typeof l === 'string' ? l : l.text, q)) n++;
  counted.set(lines, { q, n });
  return n;
}

const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? '' : 's'}`;

export const logPanel: PanelFn = ({ s, v, w, h }) => {
  const win = logWindow(s, v, h);
  if (win.shown.length === 0)
    return { lines: [[t(s.run.log.file ? 'log is empty' : 'no train.log in the run dir', 'dim')]] };
  const alertSteps = new Map<number, Role>();
  for (const a of s.alerts) if (a.step != null) alertSteps.set(a.step, a.severity === 'critical' ? 'crit' : 'warn');
  const search = v.search?.panel === 'log' ? v.search : null;
  const q = search?.query ?? '';
  const x = v.hscroll?.log ?? 0;
  // only the lines on screen are styled
  const body: Line[] = win.shown.map((l) => {
    let line = style(l.text, alertSteps);
    if (q) line = highlight(line, q);
    if (search?.at != null && l.at === search.at) line = [t('› ', 'accent', { bold: true }), ...line.slice(1)];
    return x ? [line[0]!, ...shiftLine(line.slice(1), x)] : line;
  });
  const parts: string[] = [];
  if (search) {
    const pool = win.page && win.top !== null ? win.page.lines : s.run.log.lines;
    parts.push(searchNote(search, search.typing ? null : matchCount(pool, search.query)));
  }
  if (win.top !== null) {
    const p = win.page!;
    const start = win.top === 0 ? (p.atStart ? 'start of log · ' : p.capped ? 'start of scroll-back · ' : '') : '';
    // the whole sentence where the title has room, else its numbers (a narrow tab group at 80 columns)
    const long = `${start}↑ ${plural(win.behind, 'line')} behind, live: End`;
    const room = w - 14 - parts.reduce((n, x) => n + x.length + 3, 0);
    parts.push(long.length <= room ? long : `↑${win.behind} behind · End`);
  } else if (v.logAnchor != null) parts.push('reading…');
  else if (s.run.log.file) parts.push(s.run.log.file.split('/').pop()!);
  if (x) parts.push(`→${x}`);
  if (win.page?.error && win.top !== null) parts.push(win.page.error);
  return { lines: body, note: parts.join(' · ') };
};
