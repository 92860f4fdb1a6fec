// A relaunch and the old run's durable requests (requests.json): each request in force is ended
// when moot (audited, one record each: which request and why), carried into the new supervisor when
// the operator asked (`relaunch --carry-requests`), or left untouched while a rank of its run runs.
// The decision is the judge's (src/checks/carry.ts, handed down by the caller); the new supervisor claims no older request
// but the carried ones (CARRY_ENV). Without this, a request whose carrier died with its run would
// be claimed by the relaunch's supervisor and write .HALT into the new run.
import { clock } from '../../format.js';
import type { Host } from '../../remote/host.js';
import { findRunProcesses } from '../run/processes.js';
import type { RunDirs } from '../run/rundirs.js';
import { audited } from './audit.js';
import type { ControlOptions } from './actions.js';
import { heartbeatPidsOf, readRequests, updateRequests } from './requests.js';
import { ACTIVE_REQUEST_STATES, type Actor } from './types.js';

export type RelaunchFate = 'end' | 'carry' | 'keep';
/** The judge's verdict on an old request at a relaunch (src/checks/carry.ts relaunchRequestFate), handed down. */
export type RequestFateJudge = (x: {
  carry: boolean;
  procsKnown: boolean;
  ranksAlive: number;
  launcherAlive: boolean;
}) => { fate: RelaunchFate; why: string };

export interface SettledRequest {
  id: string;
  fate: RelaunchFate;
  /** one line for the relaunch's output */
  line: string;
}

/**
 * Settles the old run's requests in force before a relaunch starts its supervisor. Returns one
 * line per request and the ids carried (to hand the new supervisor through CARRY_ENV).
 */
export async function settleRequestsForRelaunch(
  host: Host,
  dirs: RunDirs,
  actor: Actor,
  opts: ControlOptions & { carry: boolean; judgeRequest: RequestFateJudge; by?: 'launch' | 'relaunch' },
): Promise<{ settled: SettledRequest[]; carried: string[] }> {
  const active = (await readRequests(host, dirs)).filter((r) => ACTIVE_REQUEST_STATES.includes(r.state));
  if (!active.length) return { settled: [], carried: [] };
  const p = await findRunProcesses(host, dirs.outDir, {
    heartbeatPids: await heartbeatPidsOf(host, dirs.outDir),
  }).catch((e: Error) => ({ error: e.message, ranks: [], launcher: null }));
  const procsKnown = !(p.error && p.ranks.length === 0 && !p.launcher);
  const live = (s: string) => s !== 'Z' && s !== 'X';
  const verdict = opts.judgeRequest({
    carry: opts.carry,
    procsKnown,
    ranksAlive: p.ranks.filter((r) => live(r.proc.state)).length,
    launcherAlive: !!p.launcher && live(p.launcher.state),
  });
  const by = opts.by ?? 'relaunch';
  const settled: SettledRequest[] = [];
  const carried: string[] = [];
  for (const r of active) {
    const what = `halt after checkpoint ${r.id} (${r.who.user}, ${clock(r.ts)}, ${r.state})`;
    if (verdict.fate === 'keep') {
      settled.push({ id: r.id, fate: 'keep', line: `${what}: ${verdict.why}` });
      continue;
    }
    const ending = verdict.fate === 'end';
    let done = false;
    // ended (or re-armed) under requests.lock: a carrier that decides at the same moment loses
    const rec = await audited(
      host,
      dirs,
      {
        actor,
        action: 'cancel-request',
        target: { request: r.id, kind: r.kind, relaunch: verdict.fate, owner: r.owner },
      },
      async () => {
        const got = await updateRequests(dirs.outDir, (all) => {
          const x = all.find((y) => y.id === r.id);
          if (!x || !ACTIVE_REQUEST_STATES.includes(x.state)) return x ? { ...x } : null;
          const was = x.state;
          if (ending)
            Object.assign(x, {
              state: 'cancelled',
              cancelledBy: actor,
              note: `ended by ${actor.user}'s ${by}: ${verdict.why}`,
              updatedAt: Date.now(),
            });
          else
            Object.assign(x, {
              state: 'pending',
              owner: null,
              haltAt: null,
              checkpoint: null,
              note: `carried into ${actor.user}'s relaunch: waiting for a complete checkpoint written after ${clock(x.ts)}`,
              updatedAt: Date.now(),
            });
          return { ...x, was };
        });
        if (!got || !('was' in got))
          return {
            result: 'ok',
            detail: `${what}: ended meanwhile (${got?.note ?? 'gone'})`,
            unrecorded: 'nothing to end',
          };
        done = true;
        const hint = ending && by === 'relaunch' ? ' (relaunch --carry-requests carries it instead)' : '';
        return { result: 'ok', detail: `${what}: ${ending ? 'ended' : 'carried'}: ${verdict.why}${hint}` };
      },
      opts,
    );
    if (!ending && done && rec.result === 'ok') carried.push(r.id);
    settled.push({
      id: r.id,
      fate: verdict.fate,
      line: `${rec.result === 'ok' ? '' : `${rec.result}: `}${rec.detail}`,
    });
  }
  return { settled, carried };
}
