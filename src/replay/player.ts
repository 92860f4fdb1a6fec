// The replay cockpit's store: a cursor on the source's span (timeline.ts), the state judged at it
// (ReplaySource.stateAt), and playback. The App draws its states like a collector's and hands it
// the timeline keys (src/ui/replaykeys.ts ReplayControls). It never acts: every state says
// readOnly and carries the replay view, so the keymap refuses each action with the reason.
import type { CockpitState, ReplayView } from '../cockpit/state.js';
import type { ReplaySource } from './source.js';
import { advance, clampAt, type Cursor, markerFrom, nextSpeed, stepBy, toggle } from './timeline.js';

export interface PlayerOptions {
  /** where it opens (ms epoch, clamped to the span); default the end */
  at?: number;
  /** recorded seconds per wall second (default 1) */
  speed?: number;
  /** the run as the refusals name it */
  run: string;
  /** wall ms between playback frames (default 250) */
  frameMs?: number;
}

type Listener = (s: CockpitState) => void;

export class Player {
  private cursor: Cursor;
  private state: CockpitState | null = null;
  private base: CockpitState | null = null;
  private readonly listeners = new Set<Listener>();
  private timer: NodeJS.Timeout | null = null;
  private lastFrame = 0;
  private want: number;
  private inFlight: Promise<void> | null = null;
  /** rounds judged (tests, and the footer's honesty about a slow source) */
  rounds = 0;

  constructor(
    readonly source: ReplaySource,
    private readonly o: PlayerOptions,
  ) {
    this.cursor = { at: clampAt(o.at ?? source.span.end, source.span), playing: false, speed: o.speed ?? 1 };
    this.want = this.cursor.at;
  }

  get(): CockpitState | null {
    return this.state;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** the cursor now (tests) */
  get at(): number {
    return this.cursor.at;
  }

  get playing(): boolean {
    return this.cursor.playing;
  }

  get speedNow(): number {
    return this.cursor.speed;
  }

  /** Judges the opening moment; resolves with its state. */
  async open(): Promise<CockpitState> {
    await this.show();
    return this.state!;
  }

  /** Starts the frame timer (playback, and the ages kept still while paused). */
  start(): void {
    if (this.timer) return;
    this.lastFrame = Date.now();
    this.timer = setInterval(() => this.frame(), this.o.frameMs ?? 250);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  toggle(): void {
    this.move(toggle(this.cursor, this.source.span));
    this.lastFrame = Date.now();
  }

  step(dir: -1 | 1): void {
    this.move(stepBy(this.cursor, this.source.span, dir));
  }

  jump(dir: -1 | 1): void {
    const m = markerFrom(this.source.markers, this.cursor.at, dir);
    this.move({
      ...this.cursor,
      playing: false,
      at: m ? m.at : dir < 0 ? this.source.span.start : this.source.span.end,
    });
  }

  speed(dir: -1 | 1): void {
    this.move({ ...this.cursor, speed: nextSpeed(this.cursor.speed, dir) });
  }

  edge(dir: -1 | 1): void {
    this.move({ ...this.cursor, playing: false, at: dir < 0 ? this.source.span.start : this.source.span.end });
  }

  /** Seek to a moment (clamped to the span) and pause there. */
  seek(at: number): Promise<void> {
    this.move({ ...this.cursor, playing: false, at: clampAt(at, this.source.span) });
    return this.settled();
  }

  /** Waits until the state shown is the cursor's. */
  async settled(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }

  private move(c: Cursor): void {
    this.cursor = c;
    this.want = c.at;
    void this.show();
  }

  private frame(): void {
    const now = Date.now();
    const wall = now - this.lastFrame;
    this.lastFrame = now;
    if (this.cursor.playing) {
      this.cursor = advance(this.cursor, this.source.span, wall);
      this.want = this.cursor.at;
      // a round still being judged: the next frame asks for the newest moment
      if (!this.inFlight) void this.show();
    } else if (this.base) this.emit(this.base);
  }

  /** Judges the wanted moment (one round at a time; the newest wish wins). */
  private show(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = (async () => {
      try {
        for (;;) {
          const at = this.want;
          const s = await this.source.stateAt(at);
          this.rounds++;
          if (at !== this.want) continue;
          this.base = s;
          this.emit(s);
          return;
        }
      } finally {
        this.inFlight = null;
      }
    })();
    return this.inFlight;
  }

  private view(s: CockpitState): ReplayView {
    return {
      at: s.at,
      span: { ...this.source.span },
      markers: this.source.markers,
      playing: this.cursor.playing,
      speed: this.cursor.speed,
      origin: this.source.origin,
      run: this.o.run,
    };
  }

  private emit(base: CockpitState): void {
    // ages ("12s ago") are counted from the moment shown, still while paused
    const s: CockpitState = { ...base, readOnly: true, clockOffsetMs: base.at - Date.now(), replay: this.view(base) };
    this.state = s;
    for (const l of this.listeners) l(s);
  }
}

/**
 * The first moment the run stood at `step` (or past it): the source's own step clock when it has
 * one, else a bisection of the span by the state's step (a restart's repeated steps: the first).
 */
export async function momentOfStep(
  source: ReplaySource & { timeOfStep?(step: number): number | null },
  step: number,
): Promise<number | null> {
  const direct = source.timeOfStep?.(step);
  if (direct !== undefined) return direct;
  let lo = source.span.start;
  let hi = source.span.end;
  if (((await source.stateAt(hi)).run.step ?? 0) < step) return null;
  for (let i = 0; i < 40 && hi - lo > 500; i++) {
    const mid = Math.floor((lo + hi) / 2);
    if (((await source.stateAt(mid)).run.step ?? 0) >= step) hi = mid;
    else lo = mid;
  }
  return hi;
}
