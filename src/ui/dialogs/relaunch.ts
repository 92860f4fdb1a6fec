// The relaunch dialog: what a relaunch would do (which checkpoint and why), the run's name typed to
// confirm, a stale .HALT removed or kept, then the outcome.
import type { CockpitState } from '../../cockpit/state.js';
import { keyText, off } from '../keys.js';
import { relaunchDisabled } from '../keymap.js';
import { clean, type Line, t, wrap } from '../text.js';
import { type DialogBinding, type DialogOf, type DialogView, dk, input, QUIT, typing, unless } from './common.js';

/** A relaunch dialog as it opens: nothing typed, nothing answered (`info` comes from prepareRelaunch). */
export function relaunchDialog(
  stage: DialogOf<'relaunch'>['stage'] = 'confirm',
  info?: DialogOf<'relaunch'>['info'],
  steps: number | null = null,
): DialogOf<'relaunch'> {
  return {
    kind: 'relaunch',
    stage,
    stepsInput: '',
    steps,
    input: '',
    haltInput: '',
    removeHalt: false,
    result: null,
    error: null,
    info,
  };
}

/**
 * The step count typed in the relaunch dialog of a FINISHED run: a whole number, or why not. Whether
 * it is past the steps the run trained is the judge's verdict (src/checks/actions.ts), as for the CLI.
 */
export function parseSteps(typed: string): { n: number } | { error: string } {
  const v = typed.trim();
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < 1)
    return { error: `"${clean(v).slice(0, 20)}" is not a step count: type a whole number, then enter` };
  return { n: Number(v) };
}

export const RELAUNCH_KEYS: readonly DialogBinding<'relaunch'>[] = [
  QUIT,
  {
    command: 'close',
    keys: ['esc'],
    hint: 'cancels',
    help: 'in the relaunch dialog: cancel (while it runs: close the window)',
    disabled: ({ d }) => (d.stage === 'done' ? off('done', 'the relaunch is done') : null),
  },
  // reached at its question only: elsewhere QUIT takes ctrl-c first
  { command: 'close', keys: ['ctrl+c'], hint: 'cancels', help: 'in the relaunch dialog, at its question: cancel' },
  {
    command: 'submit',
    keys: ['enter'],
    hint: 'confirms',
    help: 'in the relaunch dialog: confirm what is typed (a FINISHED run: the steps to train to; the run name; "remove" or "keep" a stale .HALT)',
    disabled: ({ d }) => unless(typing(d), 'not asking'),
  },
  {
    command: 'erase',
    keys: ['backspace'],
    hint: 'erases',
    help: 'in the relaunch dialog: erase the last character typed',
    disabled: ({ d }) => unless(typing(d), 'not asking'),
  },
  {
    command: 'close',
    keys: ['esc', 'enter', 'q'],
    hint: 'closes',
    help: 'in the relaunch dialog, once done: close it',
    disabled: ({ d }) => unless(d.stage === 'done', 'not done'),
  },
];

export function relaunchView(d: DialogOf<'relaunch'>, s: CockpitState, W: number): DialogView {
  const name = s.run.identity.name;
  const lines: Line[] = [];
  if (d.stage === 'steps') {
    // a FINISHED run resumes at its last step: without more steps it would stop at once
    const past = s.run.totalSteps ?? s.run.step;
    lines.push(
      ...wrap(
        clean(
          `the run is FINISHED: it trained ${past != null ? `${past} steps` : 'all its steps'}. A relaunch resumes from the newest checkpoint with --steps N in its command (as nsa-top relaunch RUN --steps N); every later restart keeps N.`,
        ),
        W - 4,
      ).map((l) => [t(l, 'info')]),
    );
    lines.push([]);
    lines.push(input(`train to how many steps${past != null ? ` (more than ${past})` : ''}? `, d.stepsInput));
  }
  if (d.stage === 'checking') lines.push([t('checking what a relaunch would do…', 'dim')]);
  if (d.stage === 'confirm' || d.stage === 'halt-confirm') {
    const info = d.info;
    if (info) {
      // which file and why come from the trainer layer (newest weights, not the highest step)
      if (info.adopted)
        lines.push(
          ...wrap(clean(`started by hand; runs again under the supervisor: ${info.adopted}`), W - 4).map((l) => [
            t(l, 'info'),
          ]),
        );
      const head = info.readopt
        ? info.readopt
        : info.fresh
          ? 'first start: the run never ran'
          : info.resume
            ? `resumes from ${info.resume.name} (step ${info.resume.step})`
            : 'no complete checkpoint: starts from step 0';
      lines.push(
        ...wrap(clean(head), W - 4).map((l) => [
          t(l, info.readopt || info.resume || info.fresh ? 'info' : 'warn', { bold: true }),
        ]),
      );
      if (info.resume) lines.push(...wrap(clean(info.resume.why), W - 6).map((l) => [t(`  ${l}`, 'dim')]));
      // exactly what will run (command, cwd, every variable set), before the name is asked
      for (const l of info.willRun ?? []) lines.push(...wrap(clean(l), W - 6).map((x) => [t(`  ${x}`, 'dim')]));
      for (const n of info.notFollowed ?? [])
        lines.push(...wrap(clean(`not followed: ${n}`), W - 4).map((l) => [t(l, 'warn')]));
      for (const w of [...info.skipped.map((x) => `skipped ${x}`), ...info.warnings])
        lines.push(...wrap(clean(w), W - 4).map((l) => [t(l, 'warn')]));
    } else {
      const ck = s.run.checkpoints.filter((c) => c.complete).sort((a, b) => b.mtimeMs - a.mtimeMs)[0];
      lines.push([
        t(
          ck
            ? `resumes from the newest complete checkpoint (${ck.name} here)`
            : 'no complete checkpoint: starts from step 0',
          ck ? 'info' : 'warn',
        ),
      ]);
    }
    // the command above is what will run: the recorded one with --steps N written into it
    if (d.steps != null)
      lines.push([
        t(
          `trains to step ${d.steps}: --steps ${d.steps} replaces the recorded command's step count (every later restart keeps it)`,
          'info',
          { bold: true },
        ),
      ]);
    const no = relaunchDisabled(s, d.steps);
    if (no) lines.push(...wrap(clean(no.why), W - 4).map((l) => [t(l, 'crit')]));
    const halt = s.run.control.halt;
    if (halt.present)
      lines.push([
        t(
          `a .HALT is present${halt.content ? ` ("${clean(halt.content).trim().slice(0, 40)}")` : ''}: it would stop the new run at step 1`,
          'warn',
        ),
      ]);
  }
  if (d.stage === 'confirm') {
    lines.push([]);
    lines.push(input(`type the run name (${name}) and enter: `, d.input));
  } else if (d.stage === 'halt-confirm') {
    lines.push([]);
    lines.push(input('remove the stale .HALT? type "remove" (or "keep") and enter: ', d.haltInput));
  } else if (d.stage === 'running') lines.push([t('relaunching…', 'info')]);
  if (d.error) lines.push(...wrap(clean(d.error), W - 4).map((l) => [t(l, 'crit')]));
  if (d.result) lines.push(...wrap(clean(d.result.detail), W - 4).map((l) => [t(l, d.result!.ok ? 'ok' : 'crit')]));
  const close = keyText(dk(RELAUNCH_KEYS, 'close').keys[0]!);
  lines.push([t(d.stage === 'done' ? `${close} closes` : `${close} cancels`, 'dim')]);
  return { title: 'Relaunch', role: 'warn', lines };
}
