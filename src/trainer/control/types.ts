// Plain data about control actions and the supervisor, shared by src/trainer/control/actions,
// the supervisor, the checks and the UI (which only draws these). The verdicts on them (may SIGINT
// be offered, which acks are in force, what a halt loses) are in src/checks/control.ts.
export interface Actor {
  user: string;
  tty: string | null;
  /** tmux client tty / session when nsa-top runs inside tmux */
  tmux: string | null;
  host: string;
  pid: number;
}

export type ActionKind =
  | 'dump'
  | 'halt'
  | 'halt-after-checkpoint'
  | 'escalate-sigint'
  | 'escalate-sigkill'
  | 'relaunch'
  | 'remove-stale-halt'
  | 'launch'
  | 'watchdog-halt'
  | 'watchdog-dump'
  | 'py-spy-dump'
  /** an operator acknowledged an alert: target {alert: id, since, severity} names the episode */
  | 'ack'
  /** nsa-top recorded the launch of a run it did not start (src/trainer/launch/adopt.ts) */
  | 'adopt'
  | 'cancel-request'
  | 'stop'
  /** nsa-top bundle wrote a bundle of the run: target {path} (the file, on the machine that ran it) */
  | 'bundle';

/** One line of <run>/.nsa-top/actions.jsonl */
export interface ActionRecord {
  ts: number;
  who: Actor;
  action: ActionKind;
  /** what it was aimed at: pids with start times, paths */
  target: Record<string, unknown>;
  result: 'started' | 'ok' | 'partial' | 'failed' | 'refused';
  detail: string;
  /** only on a record audited() returns: why it is not in the action log (its detail says so too) */
  notLogged?: string;
}

export interface SupervisorState {
  runDir: string;
  profile: string | null;
  supervisor: { pid: number; startTime: string } | null;
  child: { pid: number; startTime: string } | null;
  state: 'starting' | 'running' | 'backoff' | 'stopping' | 'halted' | 'exited' | 'failed';
  restarts: number;
  maxRestarts: number;
  exitCodes: { at: number; code: number | null; signal: string | null }[];
  lastCommand: string[];
  resumeFrom: string | null;
  updatedAt: number;
  /** where the trainer writes its artifacts (== runDir for the reference trainer) */
  outDir?: string;
  /** 'smoke' while the profile's smoke phase runs, then 'train' */
  phase?: 'smoke' | 'train';
  /** one human sentence on why the state is what it is ("HALT by alice: not restarted", "stale .HALT: ...") */
  note?: string | null;
  /** while state is 'backoff': when the next start is due (ms epoch) */
  backoffUntil?: number | null;
  /** why the trainer last exited, one phrase ("exit 2", "signal SIGKILL", "HALT", "NaN abort") */
  lastCause?: string | null;
  /** the rank of the last trainer the supervisor saw go first (src/trainer/launch/rankwatch.ts), and
   *  how it ended when its zombie could still be read: better evidence than a launcher's summary */
  firstGone?: {
    rank: number;
    pid: number;
    at: number;
    how: string | null;
    /** a multi-node run: the node whose supervisor saw it (set by the judge's merge, never written) */
    node?: string;
  } | null;
  /** the newest complete checkpoint (path, mtime) seen at each start: judges "restarts without progress" */
  startCheckpoints?: { at: number; path: string | null; mtimeMs: number | null }[];
  /** set by readers (never written): the file said active, but its supervisor process is gone */
  supervisorGone?: boolean;
}

// the supervisor-phase predicates live on the lowest floor that needs them (run/phase.ts: the
// reader of supervisor.json checks an in-charge supervisor's liveness); one definition, re-exported
export { supervisorInCharge, supervisorRestarts } from '../run/phase.js';

// ---------------------------------------------------------------------------------------------
// durable control requests (<out_dir>/.nsa-top/requests.json)

export type RequestState = 'pending' | 'halt-written' | 'done' | 'cancelled' | 'failed';

/**
 * A control request that outlives whoever made it: owned by a detached process (the supervisor of
 * a supervised run, else `nsa-top agent`), so quitting the cockpit or losing SSH does not drop it.
 */
export interface ControlRequest {
  id: string;
  kind: 'halt-after-checkpoint';
  /** when it was requested (ms epoch, host clock): only a checkpoint written after this counts */
  ts: number;
  who: Actor;
  state: RequestState;
  /** the detached process carrying it out; null until one has claimed it */
  owner: { kind: 'agent' | 'supervisor'; pid: number; startTime: string } | null;
  /** seconds the ranks get after .HALT before SIGINT/SIGKILL are offered (the profile's stop.halt_grace_s) */
  graceS: number;
  /** the complete checkpoint written after the request that triggered .HALT */
  checkpoint?: { path: string; step: number; mtimeMs: number } | null;
  /** when .HALT was written by this request (ms epoch) */
  haltAt?: number | null;
  cancelledBy?: Actor | null;
  /** one line: what it is waiting for, or how it ended */
  note: string;
  updatedAt: number;
}

export interface RequestsFile {
  version: 1;
  requests: ControlRequest[];
}

export const ACTIVE_REQUEST_STATES: readonly RequestState[] = ['pending', 'halt-written'];

/**
 * The request still in force (pending or waiting for the ranks after its .HALT), newest first.
 * Plain data selection, kept here because the trainer's request mechanics (one request at a time,
 * cancel the one in force) need it; src/checks/control.ts re-exports it for the judges and the UI.
 */
export function activeRequest(reqs: readonly ControlRequest[] | null | undefined): ControlRequest | null {
  if (!reqs) return null;
  for (let i = reqs.length - 1; i >= 0; i--) if (ACTIVE_REQUEST_STATES.includes(reqs[i]!.state)) return reqs[i]!;
  return null;
}

/** the profile default (src/trainer/launch/profiles.ts stop.halt_grace_s) for runs without a profile */
export const DEFAULT_HALT_GRACE_S = 300;
