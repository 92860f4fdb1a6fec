// `--at TIME|STEP` (status --at, replay --at): a moment named by the operator, read against the
// journal's span — pure. TIME is ISO 8601 (2026-11-26T03:12:00Z, or without a zone: local) or
// HH:MM[:SS] local time (the newest such moment at or before the journal's end); STEP is `step=N`.
import { clock } from '../format.js';

export type AtSpec = { time: number } | { step: number };

/** The moment `text` names, or a one-line error. `span` picks the day of an HH:MM time. */
export function parseAt(text: string, span: { start: number; end: number }): AtSpec | { error: string } {
  const s = text.trim();
  const st = /^step=(\d+)$/.exec(s);
  if (st) return { step: Number(st[1]) };
  const hm = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(s);
  if (hm) {
    const [h, m, sec, ms] = [Number(hm[1]), Number(hm[2]), Number(hm[3] ?? 0), Number((hm[4] ?? '0').padEnd(3, '0'))];
    if (h > 23 || m > 59 || sec > 59) return { error: `--at ${s}: not a time of day (HH:MM[:SS])` };
    // the newest day on which that time is at or before the journal's end (a night's run crosses midnight)
    const d = new Date(span.end);
    d.setHours(h, m, sec, ms);
    let t = d.getTime();
    // an HH:MM without seconds names the whole minute: one that ends within the journal counts
    const slack = hm[3] === undefined ? 59_999 : hm[4] === undefined ? 999 : 0;
    if (t > span.end) {
      d.setDate(d.getDate() - 1);
      t = d.getTime();
    }
    if (t + slack >= span.start && t < span.start) t = span.start;
    return { time: t };
  }
  if (/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.test(s)) {
    const t = Date.parse(s.replace(' ', 'T'));
    if (Number.isFinite(t)) return { time: t };
  }
  return { error: `--at ${s}: neither a time (ISO 8601, or HH:MM[:SS] local) nor step=N` };
}

/** Why `t` is outside the journal, one line; null when it is inside. */
export function outsideSpan(t: number, span: { start: number; end: number }): string | null {
  if (t >= span.start && t <= span.end) return null;
  const day = (x: number) => {
    const d = new Date(x);
    return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
  };
  const when = (x: number) => `${day(x)} ${clock(x)}`;
  return `${when(t)} is outside the journal (${when(span.start)} – ${when(span.end)})`;
}
