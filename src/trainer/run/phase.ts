// What a supervisor's phase (supervisor.json's `state`) means, pure (src/checks value-imports it
// through control/types.ts). It lives on the lowest floor that needs it: run/launchstate.ts checks
// an in-charge supervisor's liveness; control/types.ts re-exports it for control/ and above.
import type { SupervisorState } from '../control/types.js';

type SupervisorPhase = SupervisorState['state'];
const IN_CHARGE: ReadonlySet<SupervisorPhase> = new Set(['starting', 'running', 'backoff', 'stopping']);
const RESTARTS: ReadonlySet<SupervisorPhase> = new Set(['starting', 'running', 'backoff']);

/**
 * A supervisor in this phase is in charge of the run: its process owns the trainer, even while it
 * brings it down ('stopping'). Whether that process is still alive is a separate question.
 */
export function supervisorInCharge(phase: SupervisorPhase | null | undefined): boolean {
  return !!phase && IN_CHARGE.has(phase);
}

/**
 * A supervisor in this phase still drives the run forward: it will (re)start the trainer itself and
 * can carry a request. Unlike supervisorInCharge, not while 'stopping' (it is bringing the run down).
 */
export function supervisorRestarts(phase: SupervisorPhase | null | undefined): boolean {
  return !!phase && RESTARTS.has(phase);
}
