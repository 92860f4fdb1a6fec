// Builders for screen tests: CockpitStates from real fixture runs (read through RunModel, as the
// collector does) and hand-made ones for the states fixtures cannot show.
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import xterm from '@xterm/headless';
const { Terminal } = xterm;
type Terminal = InstanceType<typeof Terminal>;
import { Checker, type CheckInput, type Thresholds } from '../../src/checks/index.js';
import type { CockpitActions } from '../../src/cockpit/actions.js';
import { evaluationFields, type CockpitState } from '../../src/cockpit/state.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { RunModel } from '../../src/trainer/run/model.js';
import { emptySnapshot, type RunSnapshot } from '../../src/trainer/run/snapshot.js';

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

/** Actions that record what was asked and answer ok (each test overrides what it needs). */
export function recordingActions(
  readOnly: boolean,
  over: Partial<CockpitActions> = {},
): CockpitActions & { calls: string[] } {
  const calls: string[] = [];
  const ok = (what: string) => {
    calls.push(what);
    return { ok: true, result: 'ok' as const, detail: `${what} done` };
  };
  return {
    calls,
    readOnly,
    dump: async () => (calls.push('dump'), { results: [], pySpy: false }),
    halt: async (mode) => ok(`halt ${mode}`),
    cancelHalt: async () => ok('cancel'),
    escalate: async (sig) => ok(sig),
    relaunch: async (o) =>
      ok(`relaunch${o.removeStaleHalt ? ' remove-halt' : ''}${o.steps ? ` steps ${o.steps}` : ''}`),
    ack: async (a) => ok(`ack ${a.id}`),
    ...over,
  };
}

const sgrless = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

/**
 * The Ink App on a fake TTY (no painter: Ink draws), with keys typed into its stdin one by one.
 * `screen()` is everything written so far (without SGR); `until` waits (up to 5 s) for a condition.
 */
export async function appOnTty(state: CockpitState, actions: CockpitActions, cols = 80, rows = 24) {
  const { render } = await import('ink');
  const { createElement } = await import('react');
  const { App } = await import('../../src/ui/App.js');
  const out = new PassThrough() as PassThrough & { columns: number; rows: number; isTTY: boolean };
  Object.assign(out, { columns: cols, rows, isTTY: true });
  const chunks: string[] = [];
  out.on('data', (d: Buffer) => chunks.push(d.toString('utf8')));
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => {}, ref: () => {}, unref: () => {} });
  const inst = render(
    createElement(App, {
      store: { get: () => state, subscribe: () => () => {} },
      actions,
      interactive: true,
      noColor: true,
      renderMs: { current: null },
      tickMs: 60_000,
    }),
    {
      stdout: out as unknown as NodeJS.WriteStream,
      stdin: stdin as unknown as NodeJS.ReadStream,
      patchConsole: false,
      exitOnCtrlC: false,
    },
  );
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const until = async (ok: () => boolean) => {
    for (let i = 0; i < 250 && !ok(); i++) await sleep(20);
  };
  await until(() => chunks.length > 0); // the first frame is out: keys are listened to
  await sleep(50);
  return {
    screen: () => sgrless(chunks.join('')),
    /** what was written since mark() */
    since: (mark: number) => sgrless(chunks.slice(mark).join('')),
    mark: () => chunks.length,
    until,
    press: async (...keys: string[]) => {
      for (const k of keys) {
        stdin.write(k);
        await sleep(20);
      }
    },
    unmount: () => inst.unmount(),
  };
}
