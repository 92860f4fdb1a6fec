// Dialogs: what an action needs from the operator (a choice, a typed confirmation) and what it did
// (progress, per-rank results). The App owns the dialog value (useDialogs); this file draws it and
// declares each dialog's keys (DIALOG_KEYS), which useDialogs acts on, the dialogs and the footer show,
// and the README lists.
import type { Key } from 'ink';
import type { CockpitState } from '../cockpit/state.js';
import type { ActionOutcome, DumpOutcome, RelaunchInfo } from '../cockpit/actions.js';
import {
  activeRequest,
  type ControlRequest,
  DEFAULT_HALT_GRACE_S,
  escalationBlocked,
  procRunning,
} from '../trainer/control/types.js';
import { clock, dur } from './format.js';
import { type Binding, type Disabled, enabledBindingFor, keysText, keyText, off } from './keys.js';
import { keyOf, KEYMAP, ranksAlive } from './keymap.js';
import type { Role } from './palette.js';
import { rankRows } from './panels/ranks.js';
import { HEALTH_ROLE } from './panels/header.js';
import { haltOutlook } from '../checks/present.js';
import { clean, type Line, t, wrap } from './text.js';

export type Dialog =
  | { kind: 'help' }
  | { kind: 'refused'; what: string; why: string }
  | { kind: 'dump'; startedAt: number; progress: string[]; result: DumpOutcome | null; error: string | null }
  | { kind: 'halt-choose'; startedAt: number }
  | {
      kind: 'halt-track';
      mode: 'now' | 'after-checkpoint';
      startedAt: number;
      startStep: number | null;
      result: ActionOutcome | null;
      escalation: { sig: 'SIGINT' | 'SIGKILL'; result: ActionOutcome | null } | null;
      /** SIGKILL needs a second key press */
      killArmed: boolean;
    }
  | {
      kind: 'relaunch';
      /** checking: asking what a relaunch would do, before anything is typed */
      stage: 'checking' | 'confirm' | 'halt-confirm' | 'running' | 'done';
      input: string;
      haltInput: string;
      removeHalt: boolean;
      result: ActionOutcome | null;
      error: string | null;
      info?: RelaunchInfo | null;
    };

/**
 * Whether SIGINT/SIGKILL may be offered in the halt window, and if not, why: from the run's state
 * (.HALT present and since when, the ranks alive) and the grace its profile gives (the request's,
 * else the run's). The judgement itself is escalationBlocked (src/trainer/control/types).
 */
export function escalationGate(s: CockpitState, now: number): string | null {
  const req = activeRequest(s.requests);
  return escalationBlocked({
    haltPresent: s.run.control.halt.present,
    haltSinceMs: req?.haltAt ?? s.run.control.halt.mtimeMs,
    graceS: req?.graceS ?? s.haltGraceS ?? DEFAULT_HALT_GRACE_S,
    ranksAlive: ranksAlive(s),
    now,
  });
}

/** The request this halt window follows: the active one, else the newest made since it opened. */
export function trackedRequest(s: CockpitState, since: number): ControlRequest | null {
  const act = activeRequest(s.requests);
  if (act) return act;
  const reqs = s.requests ?? [];
  for (let i = reqs.length - 1; i >= 0; i--) if (reqs[i]!.ts >= since - 5000) return reqs[i]!;
  return null;
}

export type DialogCommand =
  | 'close'
  | 'quit'
  | 'halt-now'
  | 'halt-after-checkpoint'
  | 'cancel-request'
  | 'sigint'
  | 'sigkill'
  | 'submit'
  | 'erase';

export type DialogOf<K extends Dialog['kind']> = Extract<Dialog, { kind: K }>;
/** what a dialog key is judged on: the run (null before the first snapshot), the dialog, the time */
export interface DialogCtx<K extends Dialog['kind'] = Dialog['kind']> {
  s: CockpitState | null;
  d: DialogOf<K>;
  now: number;
}
export type DialogBinding<K extends Dialog['kind'] = Dialog['kind']> = Binding<DialogCommand, DialogCtx<K>>;

const unless = (cond: boolean, why: string): Disabled | null => (cond ? null : off(why, why));

/** the relaunch dialog is asking: what is typed is the answer */
/** A relaunch dialog as it opens: nothing typed, nothing answered (`info` comes from prepareRelaunch). */
export function relaunchDialog(
  stage: DialogOf<'relaunch'>['stage'] = 'confirm',
  info?: DialogOf<'relaunch'>['info'],
): DialogOf<'relaunch'> {
  return { kind: 'relaunch', stage, input: '', haltInput: '', removeHalt: false, result: null, error: null, info };
}

export const typing = (d: DialogOf<'relaunch'>): boolean => d.stage === 'confirm' || d.stage === 'halt-confirm';

/** Ctrl-C quits from any dialog, but at a question it takes the safe default: no action, the question closes. */
const QUIT: Binding<DialogCommand, { d: Dialog }> = {
  command: 'quit',
  keys: ['ctrl+c'],
  help: 'in any dialog: quit nsa-top (at a question, halt or relaunch, it answers no instead)',
  disabled: ({ d }) =>
    d.kind === 'halt-choose' || (d.kind === 'relaunch' && typing(d)) ? off('question', 'it answers no') : null,
};
const CLOSE_READ: Binding<DialogCommand> = {
  command: 'close',
  keys: ['esc', '?', 'q', 'enter'],
  hint: 'closes',
  help: 'in the help or a refusal: close it',
};
/**
 * The dialogs' keys: App acts on them, the dialogs show them, the README lists them. The first binding
 * of the key that is not disabled acts; a key none can take does nothing (the relaunch question
 * takes it as typed text).
 */
export const DIALOG_KEYS: { readonly [K in Dialog['kind']]: readonly DialogBinding<K>[] } = {
  help: [QUIT, CLOSE_READ],
  refused: [QUIT, CLOSE_READ],
  dump: [
    QUIT,
    { command: 'close', keys: ['esc'], hint: 'closes', help: 'in the stack dump: close it (the dump goes on)' },
    {
      command: 'close',
      keys: ['enter', 'q'],
      hint: 'closes',
      help: 'in the stack dump, once done: close it',
      disabled: ({ d }) => unless(!!(d.result || d.error), 'the dump is still running'),
    },
  ],
  'halt-choose': [
    QUIT,
    { command: 'halt-now', keys: ['n'], hint: 'halt now (.HALT)', help: 'in the halt question: halt now (.HALT)' },
    {
      command: 'halt-after-checkpoint',
      keys: ['c'],
      hint: 'halt after the next checkpoint',
      help: 'in the halt question: halt after the next checkpoint',
    },
    { command: 'close', keys: ['esc', 'ctrl+c'], hint: 'cancel', help: 'in the halt question: cancel (nothing done)' },
  ],
  'halt-track': [
    QUIT,
    {
      command: 'cancel-request',
      keys: ['x'],
      hint: 'cancel the request',
      help: 'in the halt window: cancel the pending halt-after-checkpoint request',
      disabled: ({ s, d }) =>
        unless(
          !!s && d.mode === 'after-checkpoint' && trackedRequest(s, d.startedAt)?.state === 'pending',
          'no pending request',
        ),
    },
    {
      command: 'sigint',
      keys: ['i'],
      hint: 'SIGINT',
      help: 'in the halt window: SIGINT the ranks still running after .HALT and its grace',
      disabled: escalationOff,
    },
    {
      command: 'sigkill',
      keys: ['K'],
      hint: 'SIGKILL',
      help: 'in the halt window: SIGKILL them (press twice; no checkpoint)',
      disabled: escalationOff,
    },
    {
      command: 'close',
      keys: ['esc'],
      hint: 'closes this window',
      help: 'in the halt window: close it (a request stays)',
    },
  ],
  relaunch: [
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
      help: 'in the relaunch dialog: confirm what is typed (the run name, then "remove" or "keep" a stale .HALT)',
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
  ],
};

/** SIGINT/SIGKILL only once .HALT exists and the ranks have had their grace (or one was sent already) */
function escalationOff({ s, d, now }: DialogCtx<'halt-track'>): Disabled | null {
  if (d.escalation) return null;
  if (!s) return off('no state', 'the run has not been read yet');
  const blocked = escalationGate(s, now);
  return blocked === null ? null : off('not yet', blocked);
}

/** The dialog's binding for a key press that can act now, or null (the key does nothing here). */
export function dialogBindingFor(x: DialogCtx, input: string, key: Partial<Key>): DialogBinding | null {
  return enabledBindingFor(DIALOG_KEYS[x.d.kind] as readonly DialogBinding[], x, input, key);
}

/** Every dialog binding once, in order; one that every dialog has (ctrl-c) last. */
export function dialogBindings(): DialogBinding[] {
  const lists = Object.values(DIALOG_KEYS) as (readonly DialogBinding[])[];
  const everywhere = (b: DialogBinding) => lists.every((l) => l.includes(b));
  const out: DialogBinding[] = [];
  for (const l of lists) for (const b of l) if (!out.includes(b) && !everywhere(b)) out.push(b);
  for (const b of lists[0]!) if (everywhere(b)) out.push(b);
  return out;
}

/** A dialog's binding for a command (the first; for its key and hint on screen). */
function dk<K extends Dialog['kind']>(kind: K, command: DialogCommand): DialogBinding<K> {
  return DIALOG_KEYS[kind].find((b) => b.command === command)!;
}

/** `n halt now (.HALT)`: a binding's first key, bold, and its hint. */
function hintOf(b: Binding<string, never>, hint = b.hint ?? '', role?: Role): Line {
  return [t(keyText(b.keys[0]!), 'accent', { bold: true }), t(` ${hint}`, role)];
}

export interface DialogView {
  title: string;
  role: Role;
  lines: Line[];
}

const input = (label: string, value: string): Line => [t(label), t(value, 'title', { bold: true }), t('▏', 'accent')];

export function dialogView(d: Dialog, s: CockpitState, now: number, width: number): DialogView {
  const W = width;
  switch (d.kind) {
    case 'help': {
      const lines: Line[] = [];
      const said = new Set<string>();
      for (const b of KEYMAP) {
        const off = b.disabled?.(s) ?? null;
        lines.push([
          t(keysText(b).padEnd(12), 'accent', { bold: true }),
          t(b.help),
          ...(off ? [t(`  ${off.short}`, 'warn')] : []),
        ]);
        // why it does nothing, once per reason (read-only silences four keys with one sentence)
        if (off && !said.has(off.why)) {
          said.add(off.why);
          lines.push(
            ...wrap(`disabled now: ${clean(off.why)}`, Math.max(20, W - 16)).map((l) => [
              t(' '.repeat(12)),
              t(l, 'warn'),
            ]),
          );
        }
      }
      lines.push([]);
      lines.push([
        t(
          `${keysText(dk('help', 'close'))} closes. Dangerous actions are audited in <run>/.nsa-top/actions.jsonl.`,
          'dim',
        ),
      ]);
      return { title: 'Keys', role: 'info', lines };
    }
    case 'refused':
      return {
        title: `${d.what}: refused`,
        role: 'warn',
        lines: [
          ...wrap(clean(d.why), W - 4).map((l): Line => [t(l, 'warn')]),
          [],
          [t(`${keysText(dk('refused', 'close'))} closes`, 'dim')],
        ],
      };
    case 'dump': {
      const lines: Line[] = d.progress.slice(-6).map((p) => [t(clean(p), 'dim')]);
      if (d.error) lines.push([t(`failed: ${clean(d.error)}`, 'crit')]);
      if (d.result) {
        for (const r of d.result.results) {
          const role: Role = r.outcome === 'dumped' ? 'ok' : 'crit';
          const what =
            r.outcome === 'dumped'
              ? `dumped → ${r.file ?? ''}`
              : `${r.outcome === 'refused' ? 'refused' : 'did not answer'}: ${r.why ?? ''}`;
          lines.push([
            t(r.rank >= 0 ? `rank ${r.rank} ` : 'not a rank ', 'title'),
            t(`pid ${r.pid ?? '–'} `, 'dim'),
            t(clean(what), role),
          ]);
        }
        if (d.result.results.some((r) => r.outcome !== 'dumped')) {
          if (d.result.pySpy)
            lines.push([
              t('py-spy is installed: `py-spy dump --pid PID` reads a stuck rank without its cooperation', 'info'),
            ]);
          else
            lines.push([
              t('py-spy is not installed (pip install py-spy) — it can read a rank that ignores SIGUSR1', 'dim'),
            ]);
        }
        lines.push([t(`the Dumps panel shows the set · ${keyText(dk('dump', 'close').keys[0]!)} closes`, 'dim')]);
      } else if (!d.error)
        lines.push([t(`sending SIGUSR1 to each rank, one per second… ${dur((now - d.startedAt) / 1000)}`, 'info')]);
      return { title: 'Stack dump', role: d.error ? 'crit' : 'info', lines };
    }
    case 'halt-choose': {
      const risk = s.stepsAtRisk;
      const lines: Line[] = [];
      if (risk?.lastCheckpointStep != null)
        lines.push([t(`newest complete checkpoint: step ${risk.lastCheckpointStep}`)]);
      else lines.push([t('no complete checkpoint in the run dir', 'warn')]);
      // what a halt costs is the evaluation's word: a hung rank never sees .HALT, so nothing is saved
      const outlook = haltOutlook(
        { runState: s.runState, culprit: s.culprit ?? null },
        risk ? { ...risk, step: s.run.step } : null,
      );
      if (outlook) lines.push(...wrap(clean(outlook.text), W - 4).map((l) => [t(l, HEALTH_ROLE[outlook.health])]));
      const every = s.run.identity.train?.saveEvery;
      if (every && s.run.step != null)
        lines.push([
          t(`next checkpoint at step ${Math.ceil((s.run.step + 1) / every) * every} (save_every ${every})`, 'dim'),
        ]);
      lines.push([]);
      lines.push([
        ...hintOf(dk('halt-choose', 'halt-now')),
        t('   '),
        ...hintOf(dk('halt-choose', 'halt-after-checkpoint')),
        t('   '),
        ...hintOf(dk('halt-choose', 'close')),
      ]);
      return { title: 'Halt the run?', role: 'warn', lines };
    }
    case 'halt-track': {
      const lines: Line[] = [];
      const x: DialogCtx<'halt-track'> = { s, d, now };
      const age = (now - d.startedAt) / 1000;
      const req = d.mode === 'after-checkpoint' ? trackedRequest(s, d.startedAt) : null;
      // a refused or failed request wrote nothing: never say it did
      const notTaken = d.result !== null && (d.result.result === 'refused' || d.result.result === 'failed');
      const supervised = !!s.supervisor && ['starting', 'running', 'backoff', 'stopping'].includes(s.supervisor.state);
      if (d.mode === 'after-checkpoint') {
        if (req) {
          const owner = req.owner ? `${req.owner.kind} pid ${req.owner.pid}` : 'no owner yet';
          const role: Role = req.state === 'failed' ? 'crit' : req.state === 'cancelled' ? 'warn' : 'info';
          lines.push([
            t(`${req.state === 'pending' ? 'pending' : req.state}: `, role, { bold: true }),
            t(clean(req.note), role),
          ]);
          lines.push([
            t(
              `requested by ${clean(req.who.user)} at ${clock(req.ts)} · carried by ${owner} (outlives this cockpit)`,
              'dim',
            ),
          ]);
        } else lines.push([t('handing the request to a detached process…', 'info')]);
      } else if (notTaken) lines.push([t(`no .HALT requested: ${d.result!.result}`, 'crit', { bold: true })]);
      else
        lines.push([
          t(
            supervised
              ? 'stop requested: the supervisor writes .HALT, then escalates on its own after the grace'
              : '.HALT written: ranks stop before their next micro-step',
            'info',
          ),
        ]);
      if (d.result && !(d.mode === 'after-checkpoint' && req && d.result.ok))
        lines.push(...wrap(clean(d.result.detail), W - 4).map((l) => [t(l, d.result!.ok ? 'dim' : 'crit')]));
      if (supervised && s.supervisor?.note) lines.push([t(`supervisor: ${clean(s.supervisor.note)}`, 'dim')]);
      const rows = rankRows(s, now);
      let alive = 0;
      for (const r of rows) {
        // a zombie has exited (it only waits to be reaped): stopped, as the escalation gate counts it
        const gone = !r.proc || !procRunning(r.proc.proc);
        if (!gone) alive++;
        const step = r.hb?.lastStep ?? null;
        lines.push([
          t(`rank ${r.rank} `, 'title'),
          t(
            gone
              ? `stopped${step != null ? ` at step ${step}` : ''}${r.proc ? ` (zombie pid ${r.proc.proc.pid})` : ''}`
              : `still running${step != null ? ` (step ${step})` : ''}${r.proc ? ` pid ${r.proc.proc.pid} ${r.proc.proc.state}` : ''}`,
            gone ? 'ok' : 'warn',
          ),
        ]);
      }
      if (rows.length === 0) lines.push([t('no ranks known', 'dim')]);
      const done = rows.length > 0 && alive === 0;
      if (d.escalation)
        lines.push([
          t(
            `${d.escalation.sig} sent${d.escalation.result ? `: ${clean(d.escalation.result.detail)}` : '…'}`,
            d.escalation.result && !d.escalation.result.ok ? 'crit' : 'info',
          ),
        ]);
      if (done)
        lines.push([t(`all ranks stopped after ${dur(age)} — ${keyOf('relaunch')} relaunches`, 'ok', { bold: true })]);
      const blocked = escalationOff(x);
      if (notTaken && d.mode === 'now') {
        /* nothing was requested: nothing to escalate from here */
      } else if (!done && !blocked) {
        const kill = dk('halt-track', 'sigkill');
        lines.push([
          t(`${alive} rank(s) still running after the grace: `, 'warn'),
          ...hintOf(dk('halt-track', 'sigint')),
          t('  '),
          ...(d.killArmed
            ? hintOf(kill, `press ${keyText(kill.keys[0]!)} again to SIGKILL (no checkpoint!)`, 'crit')
            : hintOf(kill)),
        ]);
      } else if (!done) lines.push([t(`SIGINT/SIGKILL not offered: ${blocked?.why}`, 'dim')]);
      const keys: Line = [];
      const cancel = dk('halt-track', 'cancel-request');
      if (!cancel.disabled?.(x)) keys.push(...hintOf(cancel), t('   '));
      const close = keyText(dk('halt-track', 'close').keys[0]!);
      keys.push(
        t(
          req && (req.state === 'pending' || req.state === 'halt-written')
            ? `${close} closes this window; the request stays in force`
            : `${close} closes this window`,
          'dim',
        ),
      );
      lines.push(keys);
      return {
        title: `Halt (${d.mode === 'now' ? 'now' : 'after the next checkpoint'})`,
        role: notTaken ? 'crit' : 'warn',
        lines,
      };
    }
    case 'relaunch': {
      const name = s.run.identity.name;
      const lines: Line[] = [];
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
          const head = info.fresh
            ? 'first start: the run never ran'
            : info.resume
              ? `resumes from ${info.resume.name} (step ${info.resume.step})`
              : 'no complete checkpoint: starts from step 0';
          lines.push([t(head, info.resume || info.fresh ? 'info' : 'warn', { bold: true })]);
          if (info.resume) lines.push(...wrap(clean(info.resume.why), W - 6).map((l) => [t(`  ${l}`, 'dim')]));
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
        if (s.runState === 'RUNNING' || s.runState === 'STALLED' || s.runState === 'STARTING')
          lines.push([t(`the run is ${s.runState}: relaunch stops nothing — halt it first`, 'crit')]);
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
      const close = keyText(dk('relaunch', 'close').keys[0]!);
      lines.push([t(d.stage === 'done' ? `${close} closes` : `${close} cancels`, 'dim')]);
      return { title: 'Relaunch', role: 'warn', lines };
    }
  }
}
