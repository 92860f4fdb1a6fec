// The halt question (now, or after the next checkpoint) and the halt window that follows it: the
// request and its carrier, each rank until it stops, and SIGINT/SIGKILL once the grace allows.
import type { CockpitState } from '../../cockpit/state.js';
import type { ControlRequest } from '../../trainer/control/types.js';
import {
  activeRequest,
  DEFAULT_HALT_GRACE_S,
  escalationBlocked,
  haltOutlook,
  procRunning,
  supervisorInCharge,
} from '../../checks/present.js';
import { clock, dur } from '../format.js';
import { type Disabled, keyText, off } from '../keys.js';
import { haltAfterCheckpointDisabled, keyOf, ranksAlive } from '../keymap.js';
import type { Role } from '../palette.js';
import { rankRows } from '../panels/ranks.js';
import { HEALTH_ROLE } from '../panels/header.js';
import { clean, type Line, t, wrap } from '../text.js';
import { ignoredText, OPENING_TEXT } from '../typeahead.js';
import {
  type DialogBinding,
  type DialogCtx,
  type DialogOf,
  type DialogView,
  dk,
  hintOf,
  QUIT,
  unless,
} from './common.js';

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

export const HALT_CHOOSE_KEYS: readonly DialogBinding<'halt-choose'>[] = [
  QUIT,
  { command: 'halt-now', keys: ['n'], hint: 'halt now (.HALT)', help: 'in the halt question: halt now (.HALT)' },
  {
    command: 'halt-after-checkpoint',
    keys: ['c'],
    hint: 'halt after the next checkpoint',
    help: 'in the halt question: halt after the next checkpoint',
    // the judge's verdict (src/checks/actions.ts): a stalled run writes no checkpoint
    disabled: ({ s }) => (s ? haltAfterCheckpointDisabled(s) : null),
  },
  {
    // not offered (above), c still answers: with the judge's refusal, not with silence
    command: 'halt-after-checkpoint',
    keys: ['c'],
    help: 'in the halt question of a stalled run: not offered (no checkpoint will come); says why',
  },
  { command: 'close', keys: ['esc', 'ctrl+c'], hint: 'cancel', help: 'in the halt question: cancel (nothing done)' },
];

export const HALT_TRACK_KEYS: readonly DialogBinding<'halt-track'>[] = [
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
];

/** SIGINT/SIGKILL only once .HALT exists and the ranks have had their grace (or one was sent already) */
function escalationOff({ s, d, now }: DialogCtx<'halt-track'>): Disabled | null {
  if (d.escalation) return null;
  if (!s) return off('no state', 'the run has not been read yet');
  const blocked = escalationGate(s, now);
  return blocked === null ? null : off('not yet', blocked);
}

/** What a guarded dialog says about type-ahead: the keys it dropped, and that it is not yet taking them. */
function typeAheadLines(d: DialogOf<'halt-choose'> | DialogOf<'halt-track'>): Line[] {
  const out: Line[] = [];
  const ig = ignoredText(d.ignored);
  if (ig) out.push([t(ig, 'warn', { bold: true })]);
  if (!d.armed) out.push([t(OPENING_TEXT, 'dim')]);
  return out;
}

export function haltChooseView(s: CockpitState, W: number, d?: DialogOf<'halt-choose'>): DialogView {
  const risk = s.stepsAtRisk;
  const lines: Line[] = [];
  if (risk?.lastCheckpointStep != null) lines.push([t(`newest complete checkpoint: step ${risk.lastCheckpointStep}`)]);
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
  // until the question has been on screen a moment, its keys do not act: they are not offered yet
  if (d) lines.push(...typeAheadLines(d));
  // the judge's verdict (src/checks/actions.ts): in a hang no checkpoint comes, so "after the next
  // checkpoint" is not offered — its key says why instead of waiting forever
  const noAfter = haltAfterCheckpointDisabled(s);
  if (d === undefined || d.armed) {
    lines.push([
      ...hintOf(dk(HALT_CHOOSE_KEYS, 'halt-now')),
      ...(noAfter ? [] : [t('   '), ...hintOf(dk(HALT_CHOOSE_KEYS, 'halt-after-checkpoint'))]),
      t('   '),
      ...hintOf(dk(HALT_CHOOSE_KEYS, 'close')),
    ]);
  } else lines.push([...hintOf(dk(HALT_CHOOSE_KEYS, 'close'))]);
  if (noAfter) {
    const c = keyText(dk(HALT_CHOOSE_KEYS, 'halt-after-checkpoint').keys[0]!);
    lines.push(
      ...wrap(clean(`${c} (halt after the next checkpoint) is not offered: ${noAfter.why}`), W - 4).map((l) => [
        t(l, 'dim'),
      ]),
    );
  }
  return { title: 'Halt the run?', role: 'warn', lines };
}

export function haltTrackView(d: DialogOf<'halt-track'>, s: CockpitState, now: number, W: number): DialogView {
  const lines: Line[] = [];
  const x: DialogCtx<'halt-track'> = { s, d, now };
  const age = (now - d.startedAt) / 1000;
  const req = d.mode === 'after-checkpoint' ? trackedRequest(s, d.startedAt) : null;
  // a refused or failed request wrote nothing: never say it did
  const notTaken = d.result !== null && (d.result.result === 'refused' || d.result.result === 'failed');
  const supervised = supervisorInCharge(s.supervisor?.state);
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
      // the judge's word on a pending request in a hang: it cannot fire (src/checks/supervisor.ts)
      const stuck = s.alerts.find((a) => a.id === `request:${req.id}` && a.severity !== 'info');
      if (stuck) lines.push(...wrap(clean(stuck.title), W - 4).map((l) => [t(l, 'warn', { bold: true })]));
    } else lines.push([t('handing the request to a detached process…', 'info')]);
  } else if (notTaken) lines.push([t(`no .HALT requested: ${d.result!.result}`, 'crit', { bold: true })]);
  else
    lines.push([
      t(
        // what the stop did (its outcome: the supervisor took it, or nsa-top wrote .HALT itself),
        // not what the supervisor's file last said (a supervisor SIGKILLed a second ago still has one)
        d.result === null
          ? supervised
            ? 'asking the supervisor to stop (it writes .HALT, then escalates on its own after the grace)…'
            : 'writing .HALT…'
          : d.result.result === 'started'
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
    const node = r.proc?.proc.host;
    lines.push([
      t(`rank ${r.rank} `, 'title'),
      ...(node !== undefined ? [t(`on ${clean(node)} `, 'dim')] : []),
      // its node does not answer: what it was doing when last seen, not what it does now
      ...(r.proc?.proc.unseenSinceMs !== undefined
        ? [t(`(node unreachable: as seen ${dur((now - r.proc.proc.unseenSinceMs) / 1000)} ago) `, 'warn')]
        : []),
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
    lines.push(
      d.escalation
        ? [
            t(
              `all ranks stopped by ${d.escalation.sig} after ${dur(age)} — .HALT went unanswered; ${keyOf('relaunch')} relaunches`,
              'warn',
              { bold: true },
            ),
          ]
        : [t(`all ranks stopped after ${dur(age)} — ${keyOf('relaunch')} relaunches`, 'ok', { bold: true })],
    );
  const blocked = escalationOff(x);
  if (notTaken && d.mode === 'now') {
    /* nothing was requested: nothing to escalate from here */
  } else if (!done && !blocked) {
    const kill = dk(HALT_TRACK_KEYS, 'sigkill');
    lines.push([
      t(`${alive} rank(s) still running after the grace: `, 'warn'),
      ...hintOf(dk(HALT_TRACK_KEYS, 'sigint')),
      t('  '),
      ...(d.killArmed
        ? hintOf(kill, `press ${keyText(kill.keys[0]!)} again to SIGKILL (no checkpoint!)`, 'crit')
        : hintOf(kill)),
    ]);
  } else if (!done) lines.push([t(`SIGINT/SIGKILL not offered: ${blocked?.why}`, 'dim')]);
  lines.push(...typeAheadLines(d));
  const keys: Line = [];
  const cancel = dk(HALT_TRACK_KEYS, 'cancel-request');
  if (!cancel.disabled?.(x)) keys.push(...hintOf(cancel), t('   '));
  const close = keyText(dk(HALT_TRACK_KEYS, 'close').keys[0]!);
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
