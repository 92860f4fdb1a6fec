// Our view of the run, and how old it is. nsa-top sees a run through reads of its files; over SSH
// those reads ride a watch loop whose frames can stop coming (the link down, sshd stopped, a hung
// remote file system) while the run goes on writing. A gap in *our* view is not a frozen step: the
// run's own files, read after the gap, show no gap at all. So data older than the stale limit is
// judged as of when it was read (the judge's clock does not run past the data) and the state is
// STALE with the data's age; nothing judged in the gap reaches the alert history or the watchdog.
import type { CheckInput } from './context.js';

/** How old the data in hand is (see Host.viewAgeMs), and from what age it is too old to judge. */
export interface ViewAge {
  /** ms since the data was read from the host */
  ageMs: number;
  /** past this the state is STALE (the cockpit: max(3 × its interval, 5 s)) */
  staleAfterMs: number;
  /** why no fresher data came, one phrase (the connection's state), when known */
  cause?: string | null;
}

/** The gap in our view when the data is too old to judge (age and cause), else null. */
export function blindView(input: CheckInput): { ageS: number; cause: string } | null {
  const v = input.view;
  if (!v || !Number.isFinite(v.ageMs) || v.ageMs <= v.staleAfterMs) return null;
  return { ageS: v.ageMs / 1000, cause: v.cause || 'the host sent nothing newer' };
}

/** The input as of when its data was read: the judge's clock stopped where our view stopped. */
export function asOfView(input: CheckInput): CheckInput {
  const ageMs = input.view ? Math.max(0, input.view.ageMs) : 0;
  const { view: _v, ...rest } = input;
  return { ...rest, now: input.now - ageMs };
}
