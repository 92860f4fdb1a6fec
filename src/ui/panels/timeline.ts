// The replay's footer: the recording's span as a bar, its markers on it, the cursor, playback and
// what the cursor sits on (else the replay's keys). Pure, like every panel.
import type { ReplayView } from '../../cockpit/state.js';
import { fit, type Line, lineWidth, t } from '../text.js';
import type { Role } from '../palette.js';

/** one glyph per marker kind, most telling first when two share a cell */
export const MARKER_GLYPH: Record<string, { ch: string; role: Role; rank: number }> = {
  alert: { ch: '!', role: 'crit', rank: 0 },
  restart: { ch: 'R', role: 'warn', rank: 1 },
  action: { ch: 'A', role: 'accent', rank: 2 },
  dump: { ch: 'D', role: 'info', rank: 3 },
  state: { ch: 'S', role: 'warn', rank: 4 },
  checkpoint: { ch: 'C', role: 'ok', rank: 5 },
  clear: { ch: '+', role: 'ok', rank: 6 },
};

const two = (n: number) => String(n).padStart(2, '0');

/** `23:54:50` on the span's day; with the date when the moment is not today (local time, as the screen shows). */
export function replayMoment(at: number): string {
  const d = new Date(at);
  const hms = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${hms}`;
}

/** The cell (0 … width-1) a moment falls on. */
export function cellOf(at: number, span: { start: number; end: number }, width: number): number {
  if (width <= 1 || span.end <= span.start) return 0;
  return Math.min(width - 1, Math.max(0, Math.floor(((at - span.start) / (span.end - span.start)) * width)));
}

export function timelineLine(r: ReplayView, w: number): Line {
  const left: Line = [t(r.playing ? '▶ ' : '‖ ', r.playing ? 'ok' : 'warn', { bold: true }), t(`${r.speed}× `, 'dim')];
  const rightW = Math.max(12, Math.min(56, Math.floor(w / 3)));
  const barW = Math.max(8, w - lineWidth(left) - rightW - 3);
  const cells: { ch: string; role: Role; rank: number }[] = Array.from({ length: barW }, () => ({
    ch: '─',
    role: 'dim' as Role,
    rank: 99,
  }));
  for (const m of r.markers) {
    const g = MARKER_GLYPH[m.kind] ?? { ch: '?', role: 'dim' as Role, rank: 50 };
    const i = cellOf(m.at, r.span, barW);
    if (g.rank < cells[i]!.rank) cells[i] = g;
  }
  const cur = cellOf(r.at, r.span, barW);
  for (let i = 0; i < cur; i++) if (cells[i]!.rank === 99) cells[i] = { ch: '━', role: 'accent', rank: 99 };
  const bar: Line = [t('│', 'dim')];
  cells.forEach((c, i) =>
    bar.push(i === cur ? t('●', 'focus', { bold: true }) : t(c.ch, c.role, { bold: c.rank < 99 })),
  );
  bar.push(t('│', 'dim'));
  // what the cursor sits on: the newest markers in its cell, the most telling of them named
  const cellMs = (r.span.end - r.span.start) / barW;
  const near = r.markers.filter((m) => m.at <= r.at && r.at - m.at <= Math.max(cellMs, 1000));
  const newest = near.reduce((a, m) => Math.max(a, m.at), -Infinity);
  const same = near.filter((m) => m.at === newest);
  const rank = (k: string) => MARKER_GLYPH[k]?.rank ?? 50;
  const on = same.sort((a, b) => rank(a.kind) - rank(b.kind))[0];
  const more = same.length > 1 ? ` (+${same.length - 1})` : '';
  const right: Line = on
    ? [
        t(` ${MARKER_GLYPH[on.kind]?.ch ?? '?'} `, MARKER_GLYPH[on.kind]?.role ?? 'dim', { bold: true }),
        t(on.label + more),
      ]
    : [
        t(' space', 'accent', { bold: true }),
        t(' play '),
        t(',.', 'accent', { bold: true }),
        t(' step '),
        t('[]', 'accent', { bold: true }),
        t(' mark '),
        t('?', 'accent', { bold: true }),
        t(' keys'),
      ];
  return fit([...left, ...bar, ...fit(right, w - lineWidth(left) - barW - 2, true)], w);
}
