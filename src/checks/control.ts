// Verdicts on control: which request is in force, whether SIGINT/SIGKILL may be offered yet, which
// alert acknowledgements stand, what a halt now would lose. Pure: the cockpit, the headless
// commands and the UI (through ./present.ts) all ask these, so they refuse and warn alike.
import { dur } from '../format.js';
import type { ActionRecord } from '../trainer/control/types.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';

/** the request in force: plain data selection the trainer's request mechanics share (trainer/control/types.ts) */
export {
  activeRequest,
  DEFAULT_HALT_GRACE_S,
  supervisorInCharge,
  supervisorRestarts,
} from '../trainer/control/types.js';

/** Why a read-only cockpit refuses an action: its keys, dialogs and action layer all say this. */
export const READ_ONLY_WHY = 'nsa-top runs with --read-only: dump, halt, relaunch and ack are disabled';

/** A rank process still running: a zombie (Z) has exited and only waits to be reaped. */
export function procRunning(p: { state: string }): boolean {
  return p.state !== 'Z';
}

/**
 * Whether SIGINT/SIGKILL may be offered: only once a .HALT exists (something was asked of the
 * trainer) and the ranks have had the grace the profile gives since it was written. Returns the
 * reason when not (for the key's hint), or null when escalation may be offered.
 */
export function escalationBlocked(o: {
  haltPresent: boolean;
  haltSinceMs: number | null;
  graceS: number;
  ranksAlive: number;
  now: number;
}): string | null {
  if (o.ranksAlive === 0) return 'no rank is running';
  if (!o.haltPresent) return 'no .HALT yet: nothing has been asked of the trainer';
  if (o.haltSinceMs === null) return null;
  const left = o.haltSinceMs + o.graceS * 1000 - o.now;
  if (left > 0) return `the ranks have ${dur(Math.ceil(left / 1000))} of their ${dur(o.graceS)} grace left after .HALT`;
  return null;
}

/** The acknowledgements in an action log, with the alert id each names (oldest first). */
export function alertAcks(records: readonly ActionRecord[]): { id: string; rec: ActionRecord }[] {
  const out: { id: string; rec: ActionRecord }[] = [];
  for (const r of records) {
    const id = r.target['alert'];
    if (r.action === 'ack' && r.result === 'ok' && typeof id === 'string') out.push({ id, rec: r });
  }
  return out.sort((a, b) => a.rec.ts - b.rec.ts);
}

/** Steps lost if the run stopped now: the real trainer writes no checkpoint on HALT (contract §2.5). */
export function stepsAtRisk(run: RunSnapshot): {
  lastCheckpointStep: number | null;
  step: number | null;
  lost: number | null;
  savesOnHalt: boolean;
} {
  const step = run.step;
  const savesOnHalt = run.identity.trainer === 'nsa-top-reference';
  // The real trainer restarts its step counter at 1 on resume: only checkpoints written during
  // the current segment count.
  const seg = run.segments.length > 0 ? run.segments[run.segments.length - 1]! : null;
  const segStart = run.identity.trainer === 'nsa-vibe' && seg && seg.index > 0 ? seg.startTs : null;
  let last: number | null = null;
  for (const c of run.checkpoints) {
    if (!c.complete) continue;
    if (step !== null && c.step > step) continue;
    if (segStart !== null && c.mtimeMs < segStart) continue;
    if (last === null || c.step > last) last = c.step;
  }
  let lost: number | null = null;
  if (step !== null) lost = savesOnHalt ? 0 : Math.max(0, step - (last ?? 0));
  return { lastCheckpointStep: last, step, lost, savesOnHalt };
}
