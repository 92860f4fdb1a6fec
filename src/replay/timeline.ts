// The replay's cursor, pure: where on the span it is, whether it plays and how fast, the step a key
// moves it by, the marker before or after it, and `--at` read into a moment.
import type { ReplayMarker } from './source.js';

export interface Span {
  start: number;
  end: number;
}

export interface Cursor {
  /** the moment shown, ms epoch on the run host's clock */
  at: number;
  playing: boolean;
  /** recorded seconds per wall second */
  speed: number;
}

/** the speeds `+` and `-` walk through */
export const SPEEDS = [0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600] as const;

export const clampAt = (at: number, span: Span): number => Math.min(span.end, Math.max(span.start, at));

/** What one `,` / `.` moves: a hundredth of the span, at least one second. */
export function stepMs(span: Span): number {
  return Math.max(1000, Math.round((span.end - span.start) / 100));
}

/** The cursor one step back (-1) or forward (+1); a step pauses playback (the operator took the wheel). */
export function stepBy(c: Cursor, span: Span, dir: -1 | 1): Cursor {
  return { ...c, playing: false, at: clampAt(c.at + dir * stepMs(span), span) };
}

/** Playback: `wallMs` of real time later. At the end of the span it stops there. */
export function advance(c: Cursor, span: Span, wallMs: number): Cursor {
  if (!c.playing) return c;
  const at = clampAt(c.at + wallMs * c.speed, span);
  return { ...c, at, playing: at < span.end };
}

/** Play or pause; play at the end starts again from the beginning. */
export function toggle(c: Cursor, span: Span): Cursor {
  if (c.playing) return { ...c, playing: false };
  return { ...c, playing: true, at: c.at >= span.end ? span.start : c.at };
}

/** The next faster (+1) or slower (-1) speed. */
export function nextSpeed(speed: number, dir: -1 | 1): number {
  const i = SPEEDS.findIndex((s) => s >= speed);
  const cur = i < 0 ? SPEEDS.length - 1 : i;
  return SPEEDS[Math.max(0, Math.min(SPEEDS.length - 1, cur + dir))]!;
}

/** The first marker strictly after (+1) or before (-1) `at` (markers oldest first), or null. */
export function markerFrom(markers: readonly ReplayMarker[], at: number, dir: -1 | 1): ReplayMarker | null {
  if (dir > 0) return markers.find((m) => m.at > at) ?? null;
  for (let i = markers.length - 1; i >= 0; i--) if (markers[i]!.at < at) return markers[i]!;
  return null;
}

/** The markers at or just before `at` that the cursor sits on (within `within` ms). */
export function markersAt(markers: readonly ReplayMarker[], at: number, within = 0): ReplayMarker[] {
  return markers.filter((m) => m.at <= at && m.at >= at - within);
}

export type AtSpec = { at: number } | { step: number };

/**
 * `--at`: an ISO time (`2026-11-21T23:54:50Z`), a clock time `HH:MM[:SS]` (this machine's time zone,
 * as the screen shows times; on the span's first day, else the next day the span reaches), or a step
 * (`step=N`, or a bare number). Throws with a one-line reason.
 */
export function parseAt(text: string, span: Span): AtSpec {
  const t = text.trim();
  const step = /^(?:step\s*=\s*)?(\d+)$/i.exec(t);
  if (step) return { step: Number(step[1]) };
  const hm = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(t);
  if (hm) {
    const [h, m, s] = [Number(hm[1]), Number(hm[2]), Number(hm[3] ?? 0)];
    if (h > 23 || m > 59 || s > 59) throw new Error(`--at ${t}: not a clock time (HH:MM[:SS])`);
    const ms = Number((hm[4] ?? '0').padEnd(3, '0'));
    const day = new Date(span.start);
    for (let d = 0; d <= Math.ceil((span.end - span.start) / 86_400_000) + 1; d++) {
      const at = new Date(day.getFullYear(), day.getMonth(), day.getDate() + d, h, m, s, ms).getTime();
      if (at >= span.start - 1000 && at <= span.end + 1000) return { at };
    }
    throw new Error(`--at ${t}: the recording has no such moment (it spans ${spanText(span)})`);
  }
  if (/^\d{4}-\d\d-\d\d/.test(t)) {
    const at = Date.parse(t);
    if (!Number.isFinite(at)) throw new Error(`--at ${t}: not a time (ISO 8601, HH:MM[:SS] or step=N)`);
    return { at };
  }
  throw new Error(`--at ${t}: not a time or a step (ISO 8601, HH:MM[:SS], step=N)`);
}

function two(n: number): string {
  return String(n).padStart(2, '0');
}

/** `2026-11-21 23:54:44 – 23:54:57` (local time, as the screen shows) */
export function spanText(span: Span): string {
  const a = new Date(span.start);
  const b = new Date(span.end);
  const day = (d: Date) => `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
  const hms = (d: Date) => `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  return `${day(a)} ${hms(a)} – ${day(a) === day(b) ? '' : `${day(b)} `}${hms(b)}`;
}
