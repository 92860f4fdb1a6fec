// The one key table: key handling (App) and the `?` help screen both read it, so they cannot
// disagree. `dangerous` commands are refused in --read-only mode at the key, the dialog and the
// action (see src/cockpit/actions.ts).
import type { Key } from 'ink';
import type { CockpitState } from '../cockpit/state.js';
import { activeRequest } from '../trainer/control/types.js';

export type Command =
  | 'dump'
  | 'halt'
  | 'relaunch'
  | 'ack'
  | 'focus-next'
  | 'focus-prev'
  | 'zoom'
  | 'scroll-up'
  | 'scroll-down'
  | 'page-up'
  | 'page-down'
  | 'top'
  | 'bottom'
  | 'ema'
  | 'chart-range'
  | 'help'
  | 'redraw'
  | 'quit';

export interface Binding {
  command: Command;
  /** how the keys are written in the help screen */
  keys: string;
  /** short label for the footer; absent: help screen only */
  hint?: string;
  help: string;
  dangerous?: boolean;
  /**
   * Why the command cannot work on this run right now (shown in the footer hint and in `?`), or
   * null when it can. Read from the state and the checks' judgement (runState), never a UI threshold.
   */
  disabled?: (s: CockpitState) => Disabled | null;
  match(input: string, key: Partial<Key>): boolean;
}

/** why a key is off: a word for the footer hint, a sentence for `?` and the refusal */
export interface Disabled {
  short: string;
  why: string;
}

const ENDED = new Set(['FINISHED', 'EXITED', 'HALTED', 'NO TRAINER']);
const LIVE = new Set(['RUNNING', 'STALLED', 'STARTING', 'HALTING']);

function ranksAlive(s: CockpitState): number {
  return (s.procs?.ranks ?? []).filter((r) => r.proc.state !== 'Z').length;
}

export function dumpDisabled(s: CockpitState): Disabled | null {
  if (s.procs && ranksAlive(s) === 0)
    return { short: 'no ranks', why: `no rank process is running (the run is ${s.runState})` };
  return null;
}

export function haltDisabled(s: CockpitState): Disabled | null {
  if (activeRequest(s.requests)) return null; // h shows the request and can cancel it
  if (s.run.control.halt.present && ranksAlive(s) > 0) return null; // h tracks the halt and offers escalation
  if (ENDED.has(s.runState))
    return { short: s.runState, why: `the run is ${s.runState} (${s.runStateWhy}): nothing to halt` };
  return null;
}

export function relaunchDisabled(s: CockpitState): Disabled | null {
  if (LIVE.has(s.runState))
    return {
      short: s.runState,
      why: `the run is ${s.runState} (${s.runStateWhy}): relaunch stops nothing — halt it first`,
    };
  const sup = s.supervisor;
  if (sup && ['starting', 'running', 'backoff', 'stopping'].includes(sup.state))
    return {
      short: `supervisor ${sup.state}`,
      why: `its supervisor (pid ${sup.supervisor?.pid ?? '?'}) is ${sup.state}${sup.state === 'backoff' ? ': it restarts the trainer itself' : ''}`,
    };
  return null;
}

const ch = (c: string) => (input: string, key: Partial<Key>) => input === c && !key.ctrl && !key.meta;

export const KEYMAP: readonly Binding[] = [
  {
    command: 'dump',
    keys: 'd',
    hint: 'dump',
    dangerous: true,
    disabled: dumpDisabled,
    help: 'stack dump of every rank (SIGUSR1, staggered); names ranks that did not answer',
    match: ch('d'),
  },
  {
    command: 'halt',
    keys: 'h',
    hint: 'halt',
    dangerous: true,
    disabled: haltDisabled,
    help: 'halt now, or after the next checkpoint (outlives nsa-top; x cancels); SIGINT/KILL after .HALT + grace',
    match: ch('h'),
  },
  {
    command: 'relaunch',
    keys: 'r',
    hint: 'relaunch',
    dangerous: true,
    disabled: relaunchDisabled,
    help: 'relaunch from the newest complete checkpoint (type-to-confirm)',
    match: ch('r'),
  },
  {
    command: 'ack',
    keys: 'a',
    hint: 'ack',
    dangerous: true,
    help: 'acknowledge the selected alert (Alerts panel, ↑/↓ to pick; elsewhere: the first unacknowledged critical); logged in actions.jsonl',
    match: ch('a'),
  },
  {
    command: 'focus-next',
    keys: 'tab',
    hint: 'focus',
    help: 'focus the next panel',
    match: (i, k) => !!k.tab && !k.shift,
  },
  { command: 'focus-prev', keys: 'shift-tab', help: 'focus the previous panel', match: (i, k) => !!k.tab && !!k.shift },
  {
    command: 'zoom',
    keys: 'z / enter',
    hint: 'zoom',
    help: 'zoom the focused panel to the whole screen (again: back)',
    match: (i, k) => !!k.return || (i === 'z' && !k.ctrl),
  },
  {
    command: 'scroll-up',
    keys: '↑ / k',
    help: 'scroll the focused panel up',
    match: (i, k) => !!k.upArrow || i === 'k',
  },
  {
    command: 'scroll-down',
    keys: '↓ / j',
    help: 'scroll the focused panel down',
    match: (i, k) => !!k.downArrow || i === 'j',
  },
  { command: 'page-up', keys: 'pgup', help: 'scroll a page up', match: (i, k) => !!k.pageUp },
  { command: 'page-down', keys: 'pgdn', help: 'scroll a page down', match: (i, k) => !!k.pageDown },
  { command: 'top', keys: 'home / g', help: 'scroll to the start', match: (i, k) => !!k.home || i === 'g' },
  { command: 'bottom', keys: 'end / G', help: 'scroll to the end (follow)', match: (i, k) => !!k.end || i === 'G' },
  { command: 'ema', keys: 'e', hint: 'EMA', help: 'toggle EMA smoothing of the charts', match: ch('e') },
  { command: 'chart-range', keys: 'w', help: 'charts: last N steps ↔ whole run', match: ch('w') },
  { command: 'help', keys: '?', hint: 'help', help: 'this help', match: ch('?') },
  {
    command: 'redraw',
    keys: 'ctrl-l',
    help: 'redraw the whole screen (after a stray write or a tmux attach)',
    match: (i, k) => !!k.ctrl && i === 'l',
  },
  {
    command: 'quit',
    keys: 'q',
    hint: 'quit',
    help: 'quit nsa-top (the run keeps going)',
    match: (i, k) => i === 'q' || (!!k.ctrl && i === 'c'),
  },
];

export function commandFor(input: string, key: Partial<Key>): Binding | null {
  for (const b of KEYMAP) if (b.match(input, key)) return b;
  return null;
}

export function bindingOf(command: Command): Binding {
  return KEYMAP.find((b) => b.command === command)!;
}
