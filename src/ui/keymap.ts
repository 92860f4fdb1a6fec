// The one key table of the main screen: key handling (App), the `?` help screen, the footer and the
// README's key table (test/docs/readme-keys.test.ts) all read it, so they cannot disagree. A key that
// cannot act says why from its `disabled`: read-only mode (the same refusal the action layer gives,
// src/cockpit/actions.ts), or the run's state as the checks judged it (runState), never a UI threshold.
// The dialogs' keys are declared the same way, beside each dialog's view in dialogs/.
import {
  actionVerdicts,
  activeRequest,
  type ActionInput,
  newestHeartbeatAgeS,
  procRunning,
  relaunchWantsSteps,
  type ActionVerdicts,
  type Verdict,
} from '../checks/present.js';
import type { Key } from 'ink';
import type { CockpitState } from '../cockpit/state.js';
import { type Binding, bindingFor, type Disabled, keyText, off, READ_ONLY } from './keys.js';
import { FOCUSABLE, type PanelId, TITLES } from './layout.js';
import { replayRefusal } from './replaykeys.js';

/** The panels the number keys focus: 1 is the first (a panel added to FOCUSABLE gets the next number). */
export const PANEL_NUMBERS: readonly PanelId[] = FOCUSABLE.slice(0, 9);

export type Command =
  | 'dump'
  | 'halt'
  | 'relaunch'
  | 'ack'
  | 'focus-next'
  | 'focus-prev'
  | 'focus-panel'
  | 'zoom'
  | 'scroll-up'
  | 'scroll-down'
  | 'page-up'
  | 'page-down'
  | 'top'
  | 'bottom'
  | 'ema'
  | 'chart-range'
  | 'search'
  | 'search-next'
  | 'search-prev'
  | 'clear'
  | 'scroll-left'
  | 'scroll-right'
  | 'pager'
  | 'help'
  | 'redraw'
  | 'quit';

export type MainBinding = Binding<Command, CockpitState>;

/** rank processes that are alive (not zombies) */
export function ranksAlive(s: CockpitState): number {
  return (s.procs?.ranks ?? []).filter((r) => procRunning(r.proc)).length;
}

/** the commands that write (a signal, a file, the action log): a read-only cockpit refuses them all */
const writes = (s: CockpitState): Disabled | null =>
  s.replay ? replayRefusal(s.replay) : s.readOnly ? READ_ONLY : null;

/** Which actions fit the run's state: the judge's verdict (src/checks/actions.ts), the same one the
 *  headless commands give. `relaunchSteps`: the step count the relaunch dialog was given (`--steps N`). */
export function stateVerdicts(s: CockpitState, relaunchSteps: number | null = null): ActionVerdicts {
  // the footer's keys each ask, every frame, with the same input: judged once per input
  const input = actionInput(s, relaunchSteps);
  const key = inputKey(input);
  if (lastVerdicts?.key !== key) lastVerdicts = { key, v: actionVerdicts(input) };
  return lastVerdicts.v;
}
let lastVerdicts: { key: string; v: ActionVerdicts } | null = null;

/** everything of an ActionInput the judge of actions reads (a field added to it must be added here: typed so) */
function inputKey(x: ActionInput): string {
  const sv = x.supervisor;
  const parts: Record<keyof ActionInput, unknown> = {
    runState: x.runState,
    runStateWhy: x.runStateWhy,
    ranksAlive: x.ranksAlive,
    haltPresent: x.haltPresent,
    requestActive: x.requestActive,
    supervisor: sv ? `${sv.state}:${sv.supervisor?.pid}:${sv.supervisorGone}` : '-',
    heartbeatAgeS: x.heartbeatAgeS,
    stepsReached: x.stepsReached,
    relaunchSteps: x.relaunchSteps,
  };
  return Object.values(parts).join('|');
}

/** The run's state as the judge of actions reads it (src/checks/actions.ts). */
function actionInput(s: CockpitState, relaunchSteps: number | null): ActionInput {
  return {
    runState: s.runState,
    runStateWhy: s.runStateWhy,
    ranksAlive: s.procs ? ranksAlive(s) : null,
    haltPresent: s.run.control.halt.present,
    requestActive: !!activeRequest(s.requests),
    supervisor: s.supervisor ?? null,
    heartbeatAgeS: newestHeartbeatAgeS(s.run.ranks, s.run.hostNowMs || s.at),
    stepsReached: s.run.totalSteps ?? s.run.step,
    relaunchSteps,
  };
}

/** A FINISHED run that r relaunches once it is told how many steps to train to (null: none wanted). */
export function relaunchWantsStepsOf(s: CockpitState): { past: number | null } | null {
  return s.readOnly ? null : relaunchWantsSteps(actionInput(s, null));
}

/** A verdict as a key's reason: null when the action fits. */
export function verdictOff(v: Verdict): Disabled | null {
  return v.ok ? null : off(v.short, v.why);
}

export function dumpDisabled(s: CockpitState): Disabled | null {
  return writes(s) ?? verdictOff(stateVerdicts(s).dump);
}

export function haltDisabled(s: CockpitState): Disabled | null {
  return writes(s) ?? verdictOff(stateVerdicts(s).haltNow);
}

/** h → c in the halt question (wired in the halt dialog's keys) */
export function haltAfterCheckpointDisabled(s: CockpitState): Disabled | null {
  return writes(s) ?? verdictOff(stateVerdicts(s).haltAfterCheckpoint);
}

/** r: off when a relaunch cannot fit; a FINISHED run that fits with a step count opens the dialog, which asks for it */
export function relaunchDisabled(s: CockpitState, steps: number | null = null): Disabled | null {
  const w = writes(s);
  if (w) return w;
  if (steps === null && relaunchWantsStepsOf(s)) return null;
  return verdictOff(stateVerdicts(s, steps).relaunch);
}

export const KEYMAP: readonly MainBinding[] = [
  {
    command: 'dump',
    keys: ['d'],
    hint: 'dump',
    disabled: dumpDisabled,
    help: 'stack dump of every rank, or of the one selected in Ranks (SIGUSR1, one rank at a time); each file named by rank, a rank without one "no stack written (lost)"',
  },
  {
    command: 'halt',
    keys: ['h'],
    hint: 'halt',
    disabled: haltDisabled,
    help: 'halt now, or after the next checkpoint (outlives nsa-top; x cancels); SIGINT/KILL after .HALT + grace',
  },
  {
    command: 'relaunch',
    keys: ['r'],
    hint: 'relaunch',
    disabled: relaunchDisabled,
    help: 'relaunch from the newest complete checkpoint (type-to-confirm); a FINISHED run first asks how many steps to train to (as relaunch --steps N)',
  },
  {
    command: 'ack',
    keys: ['a'],
    hint: 'ack',
    disabled: writes,
    help: 'acknowledge the selected alert (Alerts panel, ↑/↓ to pick; elsewhere: the first unacknowledged critical); logged in actions.jsonl',
  },
  {
    command: 'focus-next',
    keys: ['tab'],
    hint: 'focus',
    help: 'focus the next panel, as the screen reads: each column top to bottom, left to right',
  },
  { command: 'focus-prev', keys: ['shift+tab'], help: 'focus the previous panel' },
  {
    command: 'focus-panel',
    keys: ['1', '2', '3', '4', '5', '6', '7', '8', '9'],
    label: '1–9',
    help: `focus a panel by number: ${PANEL_NUMBERS.map((p, i) => `${i + 1} ${TITLES[p]}`).join(', ')}`,
  },
  {
    command: 'zoom',
    keys: ['z', 'enter'],
    hint: 'zoom',
    help: 'zoom the focused panel to the whole screen (again: back)',
  },
  {
    command: 'scroll-up',
    keys: ['up', 'k'],
    help: 'scroll the focused panel up (Ranks: select the rank above, for d; Alerts: the alert above)',
  },
  { command: 'scroll-down', keys: ['down', 'j'], help: 'scroll the focused panel down (Ranks, Alerts: select below)' },
  { command: 'page-up', keys: ['pgup'], help: 'scroll a page up' },
  { command: 'page-down', keys: ['pgdn'], help: 'scroll a page down' },
  { command: 'top', keys: ['home', 'g'], help: 'scroll to the start' },
  { command: 'bottom', keys: ['end', 'G'], help: 'scroll to the end (follow)' },
  { command: 'ema', keys: ['e'], hint: 'EMA', help: 'toggle EMA smoothing of the charts' },
  { command: 'chart-range', keys: ['w'], help: 'charts: last N steps ↔ whole run' },
  {
    command: 'search',
    keys: ['/'],
    help: 'Log or Dumps: search (type, enter; the matches are highlighted)',
  },
  { command: 'search-next', keys: ['n'], help: 'next match (Log: older, Dumps: below)' },
  { command: 'search-prev', keys: ['N'], help: 'previous match (Log: newer, Dumps: above)' },
  {
    command: 'clear',
    keys: ['esc'],
    help: 'clear the search; with none, drop the rank selected in Ranks (d dumps every rank again)',
  },
  { command: 'scroll-left', keys: ['left'], help: 'Log or Dumps: scroll long lines left' },
  { command: 'scroll-right', keys: ['right'], help: 'Log or Dumps: scroll long lines right' },
  {
    command: 'pager',
    keys: ['o'],
    help: 'open the Log or the dump shown in $PAGER (default less -R; over --host a private local copy); the cockpit comes back after',
  },
  { command: 'help', keys: ['?'], hint: 'help', help: 'this help' },
  {
    command: 'redraw',
    keys: ['ctrl+l'],
    help: 'redraw the whole screen (after a stray write or a tmux attach)',
  },
  { command: 'quit', keys: ['q', 'ctrl+c'], hint: 'quit', help: 'quit nsa-top (the run keeps going)' },
];

/** The main screen's binding for a key press (disabled or not), or null. */
export const commandFor = (input: string, key: Partial<Key>): MainBinding | null => bindingFor(KEYMAP, input, key);

export const bindingOf = (c: Command): MainBinding => KEYMAP.find((b) => b.command === c)!;

/** How a command's key is named in a sentence ("r relaunches"): its first key. */
export const keyOf = (c: Command): string => keyText(bindingOf(c).keys[0]!);
