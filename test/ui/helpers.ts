// Builders for screen tests: CockpitStates from real fixture runs (read through RunModel, as the
// collector does) and hand-made ones for the states fixtures cannot show.
import { fileURLToPath } from 'node:url';
import xterm from '@xterm/headless';
const { Terminal } = xterm;
type Terminal = InstanceType<typeof Terminal>;
import { Checker, type CheckInput, type Thresholds } from '../../src/checks/index.js';
import { evaluationFields, type CockpitState } from '../../src/cockpit/state.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { RunModel } from '../../src/trainer/run/model.js';
import { emptySnapshot, type RunSnapshot } from '../../src/trainer/run/snapshot.js';
import { colorOf } from '../../src/ui/palette.js';
import type { Line } from '../../src/ui/text.js';

export const FIXTURES = fileURLToPath(new URL('../fixtures/nsa-vibe/', import.meta.url));

export async function fixtureSnapshot(name: string): Promise<RunSnapshot> {
  const host = new LocalHost();
  const m = new RunModel(host, FIXTURES + name);
  await m.poll();
  return m.poll();
}

export function baseState(run: RunSnapshot = emptySnapshot('/tmp/run')): CockpitState {
  return {
    at: run.takenAt || Date.now(),
    hostLabel: 'local',
    conn: { state: 'local' },
    readOnly: false,
    run,
    runState: 'RUNNING',
    runStateWhy: 'step advanced 2s ago',
    gpu: null,
    procs: null,
    alerts: [],
    verdicts: [],
    actions: [],
    supervisor: null,
    self: { cpuPct: 0.3, rssMiB: 61, renderMs: 4, telemetryLatencyMs: 12 },
  };
}

export async function fixtureState(name: string, over: Partial<CockpitState> = {}): Promise<CockpitState> {
  const run = await fixtureSnapshot(name);
  return { ...baseState(run), ...over };
}

/** Write text into a headless xterm of cols×rows and read the screen back, row by row. */
export async function xtermScreen(
  cols: number,
  rows: number,
  writes: string[],
): Promise<{ rows: string[]; cursorY: number; term: Terminal }> {
  const term = new Terminal({ cols, rows, allowProposedApi: true });
  for (const w of writes) await new Promise<void>((r) => term.write(w, r));
  const buf = term.buffer.active;
  const out: string[] = [];
  for (let y = 0; y < rows; y++) out.push(buf.getLine(buf.viewportY + y)?.translateToString(true) ?? '');
  return { rows: out, cursorY: buf.cursorY, term };
}

/** Lines as ANSI text, the way Ink would print them (colour roles → SGR). */
export function toAnsi(lines: Line[], colors = true): string {
  const SGR: Record<string, number> = {
    red: 31,
    green: 32,
    yellow: 33,
    blue: 34,
    magenta: 35,
    cyan: 36,
    white: 37,
    gray: 90,
  };
  return lines
    .map((l) =>
      l
        .map((s) => {
          const c = colorOf(s.role, !colors);
          const codes = [c ? SGR[c] : null, s.bold ? 1 : null, s.inverse ? 7 : null].filter(
            (x): x is number => x != null,
          );
          return codes.length ? `\x1b[${codes.join(';')}m${s.text}\x1b[0m` : s.text;
        })
        .join(''),
    )
    .join('\r\n');
}

/** A CockpitState whose every judgement is the Checker's, as the collector assembles it. */
export function judgedState(
  input: Omit<CheckInput, 'now'> & { now?: number },
  o: { thresholds?: Partial<Thresholds>; over?: Partial<CockpitState> } = {},
): CockpitState {
  const now = input.now ?? input.run.takenAt;
  const ev = new Checker(o.thresholds).evaluate({ ...input, now });
  return {
    ...baseState(input.run),
    at: now,
    procs: input.procs,
    gpu: input.gpu,
    ...evaluationFields(ev),
    ...(o.over ?? {}),
  };
}
