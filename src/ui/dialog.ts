// Dialogs: what an action needs from the operator (a choice, a typed confirmation) and what it did
// (progress, per-rank results). The App owns the dialog value; this file only draws it.
import type { CockpitState } from '../cockpit/state.js';
import type { ActionOutcome, DumpOutcome } from '../cockpit/actions.js';
import { dur } from './format.js';
import { KEYMAP } from './keymap.js';
import type { Role } from './palette.js';
import { rankRows } from './panels/ranks.js';
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
  | { kind: 'relaunch'; stage: 'confirm' | 'halt-confirm' | 'running' | 'done'; input: string; haltInput: string; removeHalt: boolean; result: ActionOutcome | null; error: string | null };

/** Seconds after a halt request before escalation is offered. */
export const ESCALATE_AFTER_S = 20;

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
      const lines: Line[] = KEYMAP.map((b) => [t(b.keys.padEnd(12), 'accent', { bold: true }), t(b.help), ...(b.dangerous && s.readOnly ? [t('  (read-only)', 'warn')] : [])]);
      lines.push([]);
      lines.push([t('esc / ? closes. Dangerous actions are audited in <run>/.nsa-top/actions.jsonl.', 'dim')]);
      return { title: 'Keys', role: 'info', lines };
    }
    case 'refused':
      return { title: `${d.what}: refused`, role: 'warn', lines: [[t(d.why, 'warn')], [], [t('esc closes', 'dim')]] };
    case 'dump': {
      const lines: Line[] = d.progress.slice(-6).map((p) => [t(clean(p), 'dim')]);
      if (d.error) lines.push([t(`failed: ${clean(d.error)}`, 'crit')]);
      if (d.result) {
        for (const r of d.result.results) {
          const role: Role = r.outcome === 'dumped' ? 'ok' : 'crit';
          const what = r.outcome === 'dumped' ? `dumped → ${r.file ?? ''}` : `${r.outcome === 'refused' ? 'refused' : 'did not answer'}: ${r.why ?? ''}`;
          lines.push([t(r.rank >= 0 ? `rank ${r.rank} ` : 'not a rank ', 'title'), t(`pid ${r.pid ?? '–'} `, 'dim'), t(clean(what), role)]);
        }
        if (d.result.results.some((r) => r.outcome !== 'dumped')) {
          if (d.result.pySpy) lines.push([t('py-spy is installed: `py-spy dump --pid PID` reads a stuck rank without its cooperation', 'info')]);
          else lines.push([t('py-spy is not installed (pip install py-spy) — it can read a rank that ignores SIGUSR1', 'dim')]);
        }
        lines.push([t('the Dumps panel shows the set · esc closes', 'dim')]);
      } else if (!d.error) lines.push([t(`sending SIGUSR1 to each rank, one per second… ${dur((now - d.startedAt) / 1000)}`, 'info')]);
      return { title: 'Stack dump', role: d.error ? 'crit' : 'info', lines };
    }
    case 'halt-choose': {
      const risk = s.stepsAtRisk;
      const lines: Line[] = [];
      if (risk?.lastCheckpointStep != null) lines.push([t(`newest complete checkpoint: step ${risk.lastCheckpointStep}`)]);
      else lines.push([t('no complete checkpoint in the run dir', 'warn')]);
      if (risk?.savesOnHalt) lines.push([t('halting now loses nothing: this trainer saves a checkpoint when it sees .HALT', 'ok')]);
      else if (risk?.steps != null) lines.push([t(`halting now loses ${risk.steps} step${risk.steps === 1 ? '' : 's'} (the nsa-vibe trainer writes no checkpoint on HALT)`, risk.steps > 0 ? 'warn' : 'ok')]);
      const every = s.run.identity.train?.saveEvery;
      if (every && s.run.step != null) lines.push([t(`next checkpoint at step ${Math.ceil((s.run.step + 1) / every) * every} (save_every ${every})`, 'dim')]);
      lines.push([]);
      lines.push([t('n', 'accent', { bold: true }), t(' halt now (.HALT)   '), t('c', 'accent', { bold: true }), t(' halt after the next checkpoint   '), t('esc', 'accent'), t(' cancel')]);
      return { title: 'Halt the run?', role: 'warn', lines };
    }
    case 'halt-track': {
      const lines: Line[] = [];
      const age = (now - d.startedAt) / 1000;
      lines.push([t(d.mode === 'now' ? '.HALT written: ranks stop before their next micro-step' : 'waiting for the next checkpoint, then .HALT', 'info')]);
      if (d.result) lines.push([t(clean(d.result.detail), d.result.ok ? 'dim' : 'crit')]);
      const rows = rankRows(s, now);
      let alive = 0;
      for (const r of rows) {
        const gone = !r.proc;
        if (!gone) alive++;
        const step = r.hb?.lastStep ?? null;
        lines.push([t(`rank ${r.rank} `, 'title'), t(gone ? `stopped${step != null ? ` at step ${step}` : ''}` : `still running${step != null ? ` (step ${step})` : ''}${r.proc ? ` pid ${r.proc.proc.pid} ${r.proc.proc.state}` : ''}`, gone ? 'ok' : 'warn')]);
      }
      if (rows.length === 0) lines.push([t('no ranks known', 'dim')]);
      const done = rows.length > 0 && alive === 0;
      if (d.escalation) lines.push([t(`${d.escalation.sig} sent${d.escalation.result ? `: ${clean(d.escalation.result.detail)}` : '…'}`, d.escalation.result && !d.escalation.result.ok ? 'crit' : 'info')]);
      if (done) lines.push([t(`all ranks stopped after ${dur(age)} — r relaunches`, 'ok', { bold: true })]);
      if (!done && (age >= ESCALATE_AFTER_S || d.escalation)) {
        lines.push([t(`${alive} rank(s) still running after ${dur(age)}: `, 'warn'), t('i', 'accent', { bold: true }), t(' SIGINT  '), t('K', 'accent', { bold: true }), t(d.killArmed ? ' press K again to SIGKILL (no checkpoint!)' : ' SIGKILL', d.killArmed ? 'crit' : undefined)]);
      } else if (!done) lines.push([t(`waiting… ${dur(age)} (escalation offered after ${ESCALATE_AFTER_S}s)`, 'dim')]);
      lines.push([t('esc closes this window; the halt stays requested', 'dim')]);
      return { title: `Halt (${d.mode})`, role: 'warn', lines };
    }
    case 'relaunch': {
      const name = s.run.identity.name;
      const lines: Line[] = [];
      if (d.stage === 'confirm' || d.stage === 'halt-confirm') {
        const ck = s.run.checkpoints.filter((c) => c.complete).sort((a, b) => b.step - a.step)[0];
        lines.push([t(ck ? `resumes from ${ck.name} (step ${ck.step})` : 'no complete checkpoint: starts from step 0', ck ? 'info' : 'warn')]);
        if (s.runState === 'RUNNING' || s.runState === 'STALLED' || s.runState === 'STARTING') lines.push([t(`the run is ${s.runState}: relaunch stops nothing — halt it first`, 'crit')]);
        const halt = s.run.control.halt;
        if (halt.present) lines.push([t(`a .HALT is present${halt.content ? ` ("${clean(halt.content).trim().slice(0, 40)}")` : ''}: it would stop the new run at step 1`, 'warn')]);
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
      lines.push([t(d.stage === 'done' ? 'esc closes' : 'esc cancels', 'dim')]);
      return { title: 'Relaunch', role: 'warn', lines };
    }
  }
}
