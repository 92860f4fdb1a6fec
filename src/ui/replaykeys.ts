// The replay cockpit's own keys (`nsa-top replay`), as data like the main KEYMAP: they move the
// cursor on the recording's timeline; the main screen's keys keep their meaning, and every action
// key is refused with the reason (`replayRefusal`, what keymap.ts's `disabled` gives in replay).
import type { Key } from 'ink';
import type { CockpitState, ReplayView } from '../cockpit/state.js';
import { clock } from '../format.js';
import { type Binding, bindingFor, type Disabled } from './keys.js';

export type ReplayCommand =
  'play' | 'step-back' | 'step-forward' | 'prev-marker' | 'next-marker' | 'slower' | 'faster' | 'start' | 'end';

/** What the replay's keys drive (src/replay/player.ts implements it). */
export interface ReplayControls {
  toggle(): void;
  step(dir: -1 | 1): void;
  jump(dir: -1 | 1): void;
  speed(dir: -1 | 1): void;
  edge(dir: -1 | 1): void;
}

export const REPLAY_KEYS: readonly Binding<ReplayCommand, CockpitState>[] = [
  { command: 'play', keys: [' '], label: 'space', hint: 'play', help: 'play / pause the recording' },
  { command: 'step-back', keys: [','], hint: 'back', help: 'step back (a hundredth of the span, at least 1 s)' },
  { command: 'step-forward', keys: ['.'], hint: 'fwd', help: 'step forward' },
  {
    command: 'prev-marker',
    keys: ['['],
    hint: 'prev mark',
    help: 'jump to the previous marker (alert, action, dump, state change, checkpoint, restart)',
  },
  { command: 'next-marker', keys: [']'], hint: 'next mark', help: 'jump to the next marker' },
  { command: 'slower', keys: ['-'], help: 'play slower' },
  { command: 'faster', keys: ['+', '='], help: 'play faster' },
  { command: 'start', keys: ['<'], help: 'the start of the recording' },
  { command: 'end', keys: ['>'], help: 'the end of the recording' },
];

export const replayBindingFor = (input: string, key: Partial<Key>) => bindingFor(REPLAY_KEYS, input, key);

/** Carries out a replay key on the controls. */
export function runReplayCommand(c: ReplayControls, cmd: ReplayCommand): void {
  if (cmd === 'play') c.toggle();
  else if (cmd === 'step-back' || cmd === 'step-forward') c.step(cmd === 'step-back' ? -1 : 1);
  else if (cmd === 'prev-marker' || cmd === 'next-marker') c.jump(cmd === 'prev-marker' ? -1 : 1);
  else if (cmd === 'slower' || cmd === 'faster') c.speed(cmd === 'slower' ? -1 : 1);
  else c.edge(cmd === 'start' ? -1 : 1);
}

/** Why an action key does nothing in a replay: the footer's word and the refusal's sentence. */
export function replayRefusal(r: ReplayView): Disabled {
  return {
    short: 'replay',
    why: `replay: this is a recording of ${r.run} at ${clock(r.at)}, not the run now — nothing is sent to it (act from the live cockpit: nsa-top ${r.run})`,
  };
}
