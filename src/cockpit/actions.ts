// What the cockpit's keys can do to a run, as one object the UI calls. No Ink here: every action
// goes through src/trainer/control (verified pids, audited in actions.jsonl). Read-only is
// enforced here as well as at the key and in the dialog (and control.ts refuses it a third time).
import type { Host } from '../remote/host.js';
import type { ActionRecord } from '../trainer/control-types.js';
import { acknowledgeAlert, currentActor, dumpAll, escalate, removeStaleHalt, requestHalt, type AlertRef, type RankTarget } from '../trainer/control.js';
import type { CockpitState } from './state.js';

export interface RankDumpResult {
  rank: number;
  pid: number | null;
  outcome: 'dumped' | 'no-answer' | 'refused';
  file?: string | null;
  why?: string;
}

export interface DumpOutcome {
  results: RankDumpResult[];
  pySpy: boolean;
}

export interface ActionOutcome {
  ok: boolean;
  result: ActionRecord['result'];
  detail: string;
}

export interface CockpitActions {
  readonly readOnly: boolean;
  dump(onProgress: (line: string) => void): Promise<DumpOutcome>;
  halt(mode: 'now' | 'after-checkpoint', onProgress?: (line: string) => void): Promise<ActionOutcome>;
  /** stop waiting for a checkpoint before writing .HALT */
  cancelHalt(): void;
  escalate(sig: 'SIGINT' | 'SIGKILL'): Promise<ActionOutcome>;
  relaunch(opts: { removeStaleHalt: boolean }): Promise<ActionOutcome>;
  /** acknowledge one alert episode: a line in actions.jsonl that every cockpit on the run shows */
  ack(alert: AlertRef): Promise<ActionOutcome>;
}

export const READ_ONLY_WHY = 'nsa-top runs with --read-only: dump, halt, relaunch and ack are disabled';

/** The supervisor's relaunch, injected by the command (src/trainer/supervisor). */
export type RelaunchFn = (opts: { removeStaleHalt: boolean }) => Promise<ActionOutcome>;

function outcome(r: ActionRecord): ActionOutcome {
  return { ok: r.result === 'ok' || r.result === 'started', result: r.result, detail: r.detail };
}

const refused = (): ActionOutcome => ({ ok: false, result: 'refused', detail: READ_ONLY_WHY });

export function rankTargets(s: CockpitState | null): RankTarget[] {
  return (s?.procs?.ranks ?? []).map((r) => ({ rank: r.rank, pid: r.proc.pid, startTime: r.proc.startTime, state: r.proc.state }));
}

export function createActions(o: { host: Host; runDir: string; readOnly: boolean; state: () => CockpitState | null; relaunch?: RelaunchFn; changed?: () => void }): CockpitActions {
  const { host, runDir, readOnly } = o;
  const changed = () => o.changed?.();
  let haltAbort: AbortController | null = null;
  return {
    readOnly,
    async dump(onProgress) {
      const targets = rankTargets(o.state());
      if (readOnly) return { results: targets.map((t) => ({ rank: t.rank, pid: t.pid, outcome: 'refused', why: READ_ONLY_WHY })), pySpy: false };
      // processes a heartbeat or an argv named, without proof that they are this run's ranks: never
      // signalled, and the dialog says why
      const unproven: RankDumpResult[] = (o.state()?.procs?.unproven ?? []).map((u) => ({ rank: u.rank ?? -1, pid: u.pid, outcome: 'refused', why: u.why }));
      if (targets.length === 0) {
        const why = unproven.map((u) => u.why).join(' ');
        throw new Error(`no rank process of this run is proven: nothing signalled${why ? `. ${why}` : ''}`);
      }
      const actor = await currentActor(host);
      const r = await dumpAll(host, runDir, targets, actor, { readOnly, onProgress });
      changed();
      return { pySpy: r.pySpy, results: [...r.perRank.map((p) => ({ rank: p.rank, pid: p.pid, outcome: p.status, file: p.file ?? null, why: p.why })), ...unproven] };
    },
    async halt(mode, onProgress) {
      if (readOnly) return refused();
      const actor = await currentActor(host);
      haltAbort = new AbortController();
      const r = outcome(await requestHalt(host, runDir, mode, actor, { readOnly, signal: haltAbort.signal, onProgress }));
      changed();
      return r;
    },
    cancelHalt() {
      haltAbort?.abort();
    },
    async escalate(sig) {
      if (readOnly) return refused();
      const targets = rankTargets(o.state());
      if (targets.length === 0) return { ok: false, result: 'failed', detail: 'no rank processes left to signal' };
      const actor = await currentActor(host);
      const r = outcome(await escalate(host, runDir, targets, sig, actor, { readOnly }));
      changed();
      return r;
    },
    async ack(alert) {
      if (readOnly) return refused();
      const actor = await currentActor(host);
      const r = outcome(await acknowledgeAlert(host, runDir, alert, actor, { readOnly }));
      changed();
      return r;
    },
    async relaunch(opts) {
      if (readOnly) return refused();
      if (opts.removeStaleHalt && !o.relaunch) {
        const actor = await currentActor(host);
        const r = await removeStaleHalt(host, runDir, actor, { readOnly });
        if (r.result !== 'ok') return outcome(r);
      }
      if (!o.relaunch) return { ok: false, result: 'failed', detail: 'this run has no supervisor: relaunch it with `nsa-top relaunch` or your launcher' };
      const r = await o.relaunch(opts);
      changed();
      return r;
    },
  };
}
