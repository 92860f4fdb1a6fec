// Header: what run, where, in what state and why; what it is (config identity); how far along.
import { STATE_HEALTH } from '../../checks/present.js';
import type { Health } from '../../checks/index.js';
import type { CockpitState } from '../../cockpit/state.js';
import type { ConnState } from '../../remote/host.js';
import { dur, num, pct, si } from '../format.js';
import type { Role } from '../palette.js';
import { clean, join, type Line, t } from '../text.js';
import type { PanelFn } from '../view.js';
import { replayMoment } from './timeline.js';

/** The colour of a judgement: the checks decide the health, this only maps it to a role. */
export const HEALTH_ROLE: Record<Health, Role> = { ok: 'ok', info: 'info', warning: 'warn', critical: 'crit' };

/** The state badge's colour, from the evaluation (STATE_HEALTH only for a state built without one). */
export function stateRole(s: Pick<CockpitState, 'runState' | 'stateHealth'>): Role {
  return HEALTH_ROLE[s.stateHealth ?? STATE_HEALTH[s.runState]];
}

export function connText(c: ConnState, label: string, now: number): { text: string; role: Role } {
  switch (c.state) {
    case 'local':
      return { text: 'local', role: 'dim' };
    case 'connected':
      return { text: label, role: 'ok' };
    case 'reconnecting':
      return { text: `${label} reconnecting (${dur((now - c.since) / 1000)}, try ${c.attempt})`, role: 'crit' };
    case 'closed':
      return { text: `${label} disconnected`, role: 'crit' };
  }
}

/** Flags that change what the trainer computes come first (contract §10). */
const KEY_FLAGS = [
  'NSA_PREFILL_BATCHED',
  'NSA_FORCE_SEL_MASK',
  'NSA_USE_SEL_PACK',
  'NSA_DISABLE_AUX_STATS',
  'NSA_USE_FA2',
  'NSA_HEARTBEAT_EVERY',
];

export function flagList(flags: Record<string, string>): string[] {
  const keys = Object.keys(flags).filter(
    (k) => k.startsWith('NSA_') && k !== 'NSA_VIBE_SRC' && !k.startsWith('NSA_TOP_'),
  );
  keys.sort((a, b) => {
    const ia = KEY_FLAGS.indexOf(a);
    const ib = KEY_FLAGS.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  return keys.map((k) => `${k.slice(4)}=${clean(flags[k]!)}`);
}

export function identityLine(s: CockpitState): Line {
  const id = s.run.identity;
  const m = id.model;
  const tr = id.train;
  const parts: (Line | null)[] = [];
  if (m) parts.push([t(`d${m.dim} L${m.nLayers} H${m.nHeads}/kv${m.nKvGroups} V${si(m.vocab, 0)}`, 'info')]);
  if (id.worldSize != null)
    parts.push([t(`world ${id.worldSize}${id.backend && id.backend !== 'single' ? ` ${id.backend}` : ''}`)]);
  const flags = flagList(id.flags);
  if (flags.length) parts.push([t(flags.join(' '), 'accent')]);
  if (tr?.seqLen != null) parts.push([t(`seq ${tr.seqLen}`)]);
  if (tr?.batchSize != null) parts.push([t(`batch ${tr.batchSize}${tr.accum && tr.accum > 1 ? `×${tr.accum}` : ''}`)]);
  if (id.dataset) {
    const synth = s.run.data.syntheticFallback;
    // coloured by the synthetic-data rule's alert, when it holds
    const tell = s.alerts.find((a) => a.rule === 'synthetic-data' && a.severity !== 'info');
    parts.push([
      t(
        `data ${id.dataset}${synth ? ' (FELL BACK to synthetic)' : s.run.data.dtFetchAbsent && id.dataset !== 'synthetic' ? ' (no dt_fetch)' : ''}`,
        synth && tell ? HEALTH_ROLE[tell.severity] : undefined,
      ),
    ]);
  }
  // coloured by the identity rules (a wrong or missing CONFIG), else plain
  const cfgAlert = s.alerts.find((a) => a.id === 'identity:config' || a.id === 'identity:no-config');
  parts.push([t(`CONFIG=${id.config ?? '(default)'}`, cfgAlert ? HEALTH_ROLE[cfgAlert.severity] : 'dim')]);
  if (id.nsa) parts.push([t(`nsa l${id.nsa.l} d${id.nsa.d} sel${id.nsa.nSel}×${id.nsa.lSel} w${id.nsa.w}`, 'dim')]);
  if (id.device || id.dtype)
    parts.push([t([id.device, id.dtype?.replace('torch.', '')].filter(Boolean).join(' '), 'dim')]);
  if (!m && id.worldSize == null && !flags.length)
    return [t(s.run.exists ? 'config identity unknown (no env.json / config yet)' : 'run dir not found', 'dim')];
  return join(parts, ' · ');
}

export function progressLine(s: CockpitState): Line {
  const r = s.run;
  const total = r.totalSteps;
  const stepTxt =
    r.step == null
      ? 'step –'
      : `step ${r.step}${total ? `/${total}` : ''}${total && r.step != null ? ` (${pct((100 * r.step) / total, 1)})` : ''}`;
  // rate and ETA only while the evaluation says the run advances; a frozen step says how long instead
  const frozen = s.noStepSinceMs ?? null;
  const moving = s.advancing === true;
  const parts: (Line | null)[] = [
    [t(stepTxt, 'title', { bold: true })],
    frozen !== null
      ? [t(`no step for ${dur(Math.max(0, s.at - frozen) / 1000)}`, 'warn', { bold: true })]
      : moving && r.stepsPerS != null
        ? [t(`${num(r.stepsPerS, r.stepsPerS < 1 ? 3 : 2)} step/s`)]
        : null,
    moving && r.toksPerS != null ? [t(`${si(r.toksPerS)} tok/s`)] : null,
    moving && r.etaS != null ? [t(`ETA ${dur(r.etaS)}`)] : null,
    r.loss != null ? [t('loss '), t(num(r.loss, 4), 'info', { bold: true })] : null,
    r.lr != null ? [t(`lr ${r.lr.toExponential(2)}`, 'dim')] : null,
  ];
  const val = r.series.valLoss.recent.at(-1);
  if (val) parts.push([t(`val ${num(val.value, 4)}@${val.step}`, 'info')]);
  // MFU (or "unknown peak"), restarts and the newest checkpoint's age: the evaluation's numbers
  const nums = s.numbers;
  if (nums?.mfu)
    parts.push([
      t(
        nums.mfu.value !== null
          ? `MFU ${num(nums.mfu.value * 100, nums.mfu.value < 0.01 ? 3 : 1)} %`
          : 'MFU ? (unknown peak)',
        'dim',
      ),
    ]);
  const rs = nums?.restarts;
  if (rs && rs.count > 0)
    parts.push([
      t(
        `${rs.count}${rs.max !== null ? `/${rs.max}` : ''} restart${rs.count === 1 ? '' : 's'}${rs.storm ? ' STORM' : ''}`,
        rs.storm ? 'crit' : 'warn',
      ),
    ]);
  const risk = s.stepsAtRisk;
  if (risk && risk.lastCheckpointStep != null)
    parts.push([
      t(
        `ckpt @${risk.lastCheckpointStep}${nums?.lastCheckpoint ? ` ${dur(nums.lastCheckpoint.ageS)} ago` : ''}`,
        'dim',
      ),
    ]);
  else if (r.checkpoints.length === 0 && r.step != null) parts.push([t('no checkpoint yet', 'dim')]);
  return join(parts, ' · ');
}

export const headerPanel: PanelFn = ({ s, now }) => {
  // the connection's times are ours (this machine's clock), not the host's
  const conn = connText(s.conn, s.hostLabel, now - (s.clockOffsetMs ?? 0));
  const role = stateRole(s);
  const first: Line = [
    t(` ${s.runState} `, role, { inverse: true, bold: true }),
    t(' '),
    ...(s.replay
      ? [t(` REPLAY ${replayMoment(s.replay.at)} `, 'accent', { inverse: true, bold: true }), t(' ')]
      : s.readOnly
        ? [t(' READ-ONLY ', 'warn', { inverse: true }), t(' ')]
        : []),
    t(clean(s.run.identity.name || s.run.runDir), 'title', { bold: true }),
    t(' @ ', 'dim'),
    t(conn.text, conn.role),
    t(' — ', 'dim'),
    t(clean(s.runStateWhy), role === 'ok' ? 'muted' : role),
  ];
  if (s.collectError) first.push(t(`  ⚠ ${clean(s.collectError)}`, 'warn'));
  return { lines: [first, identityLine(s), progressLine(s)] };
};
