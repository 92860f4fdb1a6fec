// `nsa-top status RUN --at TIME|step=N [--json]`: what nsa-top said at that moment, from the run's
// journal (<out_dir>/.nsa-top/journal*.jsonl, docs/journal.md) — the state a cockpit or watchdog
// recorded then, not a new look. No journal, or a moment outside it: one line, exit 2.
import { alertFields, type Alert } from '../checks/index.js';
import type { CockpitState } from '../cockpit/state.js';
import { clock, dur, num } from '../format.js';
import { outsideSpan, parseAt } from '../journal/at.js';
import { journalSource } from '../journal/index.js';
import type { Host } from '../remote/host.js';
import { jsonSafe, sanitizeText } from '../sanitize.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { CliError } from './errors.js';

const HEALTHY = new Set(['RUNNING', 'FINISHED', 'HALTED', 'STARTING', 'RESTARTING', 'HALTING']);

function jsonAlerts(alerts: readonly Alert[]) {
  return alerts.map(alertFields).map(({ id, severity: level, ...rest }) => ({ id, level, ...rest }));
}

/** Prints the recorded state at `atText`; returns status's exit code for it (0 healthy, 1 not). */
export async function statusAt(host: Host, dir: string | undefined, atText: string, json: boolean): Promise<number> {
  const runDir = await resolveRunDir(host, dir, process.cwd());
  const dirs = await resolveRunDirsAt(host, runDir);
  const src = await journalSource(host, dirs);
  if (!src)
    throw new CliError(
      `status --at: ${dirs.outDir} has no journal (.nsa-top/journal.jsonl: nothing recorded it — a cockpit or watchdog on its host records one)`,
      2,
    );
  const spec = parseAt(atText, src.span);
  if ('error' in spec) throw new CliError(`status ${spec.error}`, 2);
  let at: number;
  if ('step' in spec) {
    const t = await src.timeOfStep(spec.step);
    if (t === null) throw new CliError(`status --at step=${spec.step}: the journal never saw that step`, 2);
    at = t;
  } else {
    const out = outsideSpan(spec.time, src.span);
    if (out) throw new CliError(`status --at: ${out}`, 2);
    at = spec.time;
  }
  const s = await src.stateAt(at);
  const code = HEALTHY.has(s.runState) && !s.alerts.some((a) => a.severity === 'critical') ? 0 : 1;
  if (json) {
    const body = {
      ...s.run,
      state: { runState: s.runState, why: s.runStateWhy },
      alerts: jsonAlerts(s.alerts),
      culprit: s.culprit ?? null,
      journal: { at, stateAt: s.at, origin: src.origin, recordedBy: s.journal ?? null },
    };
    process.stdout.write(jsonSafe(JSON.stringify(body, null, 2)) + '\n');
  } else process.stdout.write(sanitizeText(formatAt(s, at, src.origin)));
  return code;
}

/** the recorded state in words, as status says a run (what the header and the alerts said) */
export function formatAt(s: CockpitState, at: number, origin: string): string {
  const r = s.run;
  const rows: [string, string][] = [
    ['at', `${clock(at)} — recorded ${clock(s.at)} (${origin})`],
    ['state', `${s.runState} — ${s.runStateWhy}`],
  ];
  if (s.culprit) rows.push(['culprit', `rank ${s.culprit.rank}: ${s.culprit.why}`]);
  const total = r.identity.train?.steps;
  rows.push(['step', `${r.step ?? '—'}${total ? `/${total}` : ''}  loss ${num(r.loss)}  tok/s ${num(r.toksPerS)}`]);
  for (const a of s.alerts) rows.push(['alert', `${a.severity.padEnd(8)} ${a.title}`]);
  for (const h of r.ranks ?? [])
    rows.push([
      `rank ${h.rank}`,
      `step ${h.lastStep ?? '—'}, heartbeat ${h.lastTs ? `${dur(Math.max(0, s.at - h.lastTs) / 1000)} before` : '—'}${h.pid ? `, pid ${h.pid}` : ''}`,
    ]);
  for (const x of s.actions.filter((x) => x.ts <= at).slice(-3))
    rows.push(['action', `${clock(x.ts)} ${x.action} by ${x.who.user}: ${x.result} — ${x.detail}`]);
  return rows.map(([k, v]) => `${k.padEnd(10)}${v}`).join('\n') + '\n';
}
