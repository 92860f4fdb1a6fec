// Plain data about control actions and the supervisor, shared by src/trainer/control,
// the supervisor, the checks and the UI (which only draws these).

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
  | 'ack';

/** One line of <run>/.nsa-top/actions.jsonl */
export interface ActionRecord {
  ts: number;
  who: Actor;
  action: ActionKind;
  /** what it was aimed at: pids with start times, paths */
  target: Record<string, unknown>;
  result: 'started' | 'ok' | 'partial' | 'failed' | 'refused';
  detail: string;
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
  /** set by readers (never written): the file said active, but its supervisor process is gone */
  supervisorGone?: boolean;
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
