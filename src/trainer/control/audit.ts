// The one audited path: every effect nsa-top has on a run (a signal, .HALT, a relaunch, a stop
// request, an acknowledgement) runs inside audited(), and nothing else appends to
// <out_dir>/.nsa-top/actions.jsonl (test/trainer/control/audit.test.ts greps src/ for it). So, by
// construction and not by convention:
//  - read-only mode refuses with one text, READ_ONLY_REFUSAL, before the effect runs (and nothing is
//    written, the action log included);
//  - every record names who (the actor) and when (the host's clock, when the outcome is known);
//  - the outcome is appended through src/trainer/control/ownfiles.ts — also when the effect throws,
//    which is recorded as 'failed' with its message: a control request never vanishes silently;
//  - a failing append never hides the outcome: the returned record says "; NOT logged: …" and
//    carries notLogged (the CLI prints it, the watchdog puts it on stderr and its own output);
//  - a record that cannot be kept because the log was tampered with (a link, a hard link that could
//    not be set aside, not a regular file) refuses an action that asks for its record first
//    (requireLog) — except a safety action (failOpen: a halt), which is taken anyway and says it
//    was not logged. Read-only is the one refusal that holds for every action.
// The log is read back here too (readActionLog), so this module alone knows its lines.
import { join } from 'node:path';
import type { Host, OwnWriteDone } from '../../remote/host.js';
import type { ActionKind, ActionRecord, Actor } from './types.js';
import { appendOwn, OwnWriteError, readOnlyMode, type EffectOptions } from './ownfiles.js';
import { NSA_DIR, runDirsOf, type RunDirs, type RunRef } from '../run/rundirs.js';

export const ACTIONS_FILE = 'actions.jsonl';

/** What every read-only refusal says: the cockpit, the CLI commands, the watchdog, relaunch. */
export const READ_ONLY_REFUSAL = 'read-only mode: no action taken';

export interface AuditSpec {
  /** who acts (src/trainer/control/actions.ts currentActor, or the supervisor / request owner) */
  actor: Actor;
  action: ActionKind;
  /** what it is aimed at; the host's label is added, an outcome's target is merged over it */
  target: Record<string, unknown>;
  /**
   * Refuse before the effect when the action log cannot take the record because it was tampered
   * with (a link, not a regular file): an action that could not be recorded is not taken.
   */
  requireLog?: boolean;
  /**
   * A safety action (.HALT: the operator's, the watchdog's): never blocked by its record. With
   * requireLog, a log that cannot take the record does not refuse it; the effect is taken and the
   * result says "NOT logged: why" (notLogged). Only read-only refuses it.
   */
  failOpen?: boolean;
}

export interface Outcome {
  result: ActionRecord['result'];
  detail: string;
  /** merged over the spec's target */
  target?: Record<string, unknown>;
  /**
   * Not appended, and why: an earlier line of the same action already says it (a 'started' line,
   * a record the nested action wrote), or nothing was done that anyone else needs to read.
   */
  unrecorded?: string;
  /** the record IS the effect (an acknowledgement): a failed append makes the outcome this instead */
  ifNotRecorded?: (why: string) => { result: ActionRecord['result']; detail: string };
}

export interface AuditContext {
  /** appends an intermediate line of the same action (a 'started' while it waits) */
  progress(result: ActionRecord['result'], detail: string, target?: Record<string, unknown>): Promise<ActionRecord>;
}

// ---------------------------------------------------------------------------------------------
// reading it back

export interface ActionLog {
  records: ActionRecord[];
  /** lines that were not a valid action record (skipped, never fatal) */
  badLines: number;
  error: string | null;
}

const KINDS = new Set<string>([
  'dump',
  'halt',
  'halt-after-checkpoint',
  'escalate-sigint',
  'escalate-sigkill',
  'relaunch',
  'remove-stale-halt',
  'launch',
  'watchdog-halt',
  'watchdog-dump',
  'py-spy-dump',
  'ack',
  'adopt',
  'cancel-request',
  'stop',
  'bundle',
]);
const RESULTS = new Set<string>(['started', 'ok', 'partial', 'failed', 'refused']);

function asRecord(v: unknown): ActionRecord | null {
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  const who = o.who as Record<string, unknown> | undefined;
  if (typeof o.ts !== 'number' || !Number.isFinite(o.ts)) return null;
  if (typeof o.action !== 'string' || !KINDS.has(o.action)) return null;
  if (typeof o.result !== 'string' || !RESULTS.has(o.result)) return null;
  if (!who || typeof who !== 'object' || typeof who.user !== 'string') return null;
  return {
    ts: o.ts,
    who: {
      user: who.user,
      tty: typeof who.tty === 'string' ? who.tty : null,
      tmux: typeof who.tmux === 'string' ? who.tmux : null,
      host: typeof who.host === 'string' ? who.host : '?',
      pid: typeof who.pid === 'number' ? who.pid : 0,
    },
    action: o.action as ActionKind,
    target: o.target && typeof o.target === 'object' ? (o.target as Record<string, unknown>) : {},
    result: o.result as ActionRecord['result'],
    detail: typeof o.detail === 'string' ? o.detail : '',
  };
}

/** Reads the action log (newest last). Bad lines are skipped and counted; a missing log is empty. */
export async function readActionLog(host: Host, run: RunRef, limit?: number): Promise<ActionLog> {
  const { outDir } = await runDirsOf(host, run);
  const path = join(outDir, NSA_DIR, ACTIONS_FILE);
  let buf: Buffer;
  let partialHead = false;
  try {
    const st = await host.stat(path);
    if (!st) return { records: [], badLines: 0, error: null };
    // With a limit, read only the tail: a few KiB per record is plenty.
    const want = limit !== undefined ? Math.max(64 * 1024, limit * 4096) : st.size;
    const start = Math.max(0, st.size - want);
    partialHead = start > 0;
    buf = await host.readRange(path, start);
  } catch (e) {
    return { records: [], badLines: 0, error: `${path}: ${(e as Error).message}` };
  }
  const lines = buf.toString('utf8').split('\n');
  if (partialHead) lines.shift(); // the first line is cut
  const records: ActionRecord[] = [];
  let badLines = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line.length === 0) continue;
    let rec: ActionRecord | null = null;
    try {
      rec = asRecord(JSON.parse(line));
    } catch {
      rec = null;
    }
    // an unterminated last line may be an append in progress: not counted as bad
    if (!rec) {
      if (i !== lines.length - 1) badLines++;
      continue;
    }
    records.push(rec);
  }
  return { records: limit !== undefined ? records.slice(-limit) : records, badLines, error: null };
}

export async function readActions(host: Host, run: RunRef, limit?: number): Promise<ActionRecord[]> {
  return (await readActionLog(host, run, limit)).records;
}

// ---------------------------------------------------------------------------------------------
// writing it: audited() only

const MAX_DETAIL = 2000;

/**
 * One O_APPEND line (short enough to stay one write): never through a link (soft or hard), outside
 * the run, or read-only. Resolves to a note when the log was set aside first (a hard link at it).
 */
async function append(host: Host, dir: RunRef, rec: ActionRecord, opts: EffectOptions): Promise<string | null> {
  const { outDir } = await runDirsOf(host, dir);
  const clean: ActionRecord = {
    ...rec,
    detail: rec.detail.length > MAX_DETAIL ? `${rec.detail.slice(0, MAX_DETAIL)}…` : rec.detail,
  };
  const rel = `${NSA_DIR}/${ACTIONS_FILE}`;
  const done = await appendOwn(host, outDir, rel, `${JSON.stringify(clean)}\n`, opts);
  return done ? setAsideNote(rel, done) : null;
}

function setAsideNote(rel: string, done: OwnWriteDone): string {
  return `${rel} ${done.why}: ${done.setAside ? `set aside as ${done.setAside}, ` : ''}logged in a fresh one`;
}

/** failures that mean the run dir was tampered with, not that the disk is full or slow */
const HOSTILE = new Set(['ELOOP', 'ENOTDIR', 'EFTYPE', 'EPERM', 'EISDIR', 'ENXIO', 'EINVAL', 'ESUSPECT']);

/**
 * Why an action must not be taken because its record could not be kept: the action log (or
 * `.nsa-top`) is a link, not a regular file, or the run dir is not a run. Null when it can take a
 * record, and also when it fails for an ordinary reason (a full disk): stopping a run matters more
 * than its log line, and the outcome then says it was not logged. Creates an empty log if missing.
 */
async function actionLogProblem(
  host: Host,
  outDir: string,
  opts: EffectOptions,
): Promise<{ why: string | null; note: string | null }> {
  const rel = `${NSA_DIR}/${ACTIONS_FILE}`;
  try {
    // an empty append: the checks run (a hard link is set aside now, before the effect), nothing is written
    const done = await appendOwn(host, outDir, rel, '', opts);
    return { why: null, note: done ? setAsideNote(rel, done) : null };
  } catch (e) {
    if (e instanceof OwnWriteError && HOSTILE.has(e.code)) return { why: e.message, note: null };
    return { why: null, note: null };
  }
}

// ---------------------------------------------------------------------------------------------
// actions in flight: a process that is about to end (the cockpit's q) lets them finish, or records
// that it abandoned them — a dump half done when the cockpit quit must not vanish from the log

interface InFlight {
  action: ActionKind;
  /** its record, once kept */
  done: Promise<ActionRecord | null>;
  /** appends the record that it was abandoned, once, unless its own outcome was kept first (then false) */
  abandon(why: string): Promise<boolean>;
}

const inFlight = new Set<InFlight>();

/** The audited actions this process has under way (asked for, their outcome not kept yet). */
export function actionsInFlight(): { action: ActionKind }[] {
  return [...inFlight].map(({ action }) => ({ action }));
}

/**
 * Waits for the actions under way to finish and keep their records, for at most `ms` or until
 * `stop` resolves (a second Ctrl-C); those still under way then get a 'failed' record saying they
 * were abandoned and why. Resolves to the records kept meanwhile and the actions abandoned.
 */
export async function settleActions(
  ms: number,
  why: string,
  stop?: Promise<unknown>,
): Promise<{ kept: ActionRecord[]; abandoned: ActionKind[] }> {
  const all = [...inFlight];
  if (!all.length) return { kept: [], abandoned: [] };
  const kept: ActionRecord[] = [];
  for (const a of all) void a.done.then((r) => r && kept.push(r));
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((r) => (timer = setTimeout(r, ms)));
  await Promise.race([Promise.allSettled(all.map((a) => a.done)), late, ...(stop ? [stop] : [])]);
  clearTimeout(timer);
  const left = [...inFlight];
  const cut = await Promise.all(left.map((a) => a.abandon(why).catch(() => true)));
  return { kept, abandoned: left.filter((_, i) => cut[i]).map((a) => a.action) };
}

/** What a result says when its record could not be kept: the same words for every cause. */
export function notLoggedText(why: string): string {
  return `NOT logged: ${why}`;
}

/**
 * Runs `effect` as `spec.actor` on the run at `dir` (a run dir or out_dir) and returns the record of
 * how it went, appended to the run's action log. Read-only refuses (unrecorded: nothing is written);
 * with spec.requireLog an action log that cannot take records refuses too, unless spec.failOpen (a
 * halt): then the effect is taken and the record says "NOT logged"; a throwing effect is recorded as
 * failed.
 */
export async function audited(
  host: Host,
  run: RunRef,
  spec: AuditSpec,
  effect: (ctx: AuditContext) => Promise<Outcome>,
  opts: EffectOptions = {},
): Promise<ActionRecord> {
  const make = (result: ActionRecord['result'], detail: string, target: Record<string, unknown> = {}) => ({
    ts: host.now(),
    who: spec.actor,
    action: spec.action,
    target: { host: host.label, ...spec.target, ...target },
    result,
    detail,
  });
  let dirs: RunDirs | null = null;
  // a log known to be unusable (a fail-open action taken anyway) is not tried again for each line
  let unusable: string | null = null;
  const notLogged = (rec: ActionRecord, why: string): ActionRecord => ({
    ...rec,
    detail: `${rec.detail}; ${notLoggedText(why)}`,
    notLogged: why,
  });
  // an earlier line of this action that could not be kept (its 'started'): the result says so too
  let failedAppend: string | null = null;
  // a log set aside before the effect: said on the action's last record
  let asideNote: string | null = null;
  const keep = async (rec: ActionRecord, ifNot?: Outcome['ifNotRecorded'], last = false): Promise<ActionRecord> => {
    if (unusable !== null) return ifNot ? { ...rec, ...ifNot(unusable) } : notLogged(rec, unusable);
    if (last && asideNote) rec.detail += ` (${asideNote})`;
    try {
      const note = await append(host, dirs ?? run, rec, opts);
      if (note) rec.detail += ` (${note})`;
    } catch (e) {
      const why = (e as Error).message;
      failedAppend = why;
      if (ifNot) return { ...rec, ...ifNot(why) };
      return notLogged(rec, why);
    }
    return rec;
  };
  // under way from the call until its outcome is kept: a process that ends first (the cockpit's q)
  // waits for it, or records it abandoned (settleActions)
  let started = false;
  let ended = false;
  let cancelled: string | null = null;
  let settle!: (r: ActionRecord | null) => void;
  let final: ActionRecord | null = null;
  const entry: InFlight = {
    action: spec.action,
    done: new Promise<ActionRecord | null>((r) => (settle = r)),
    async abandon(why) {
      if (ended) return false;
      if (!started) {
        // not taken yet: it is refused, and recorded, before its effect
        cancelled = why;
        await entry.done;
        return true;
      }
      ended = true;
      inFlight.delete(entry);
      await keep(make('failed', `abandoned before its outcome was known: ${why}`));
      return true;
    },
  };
  inFlight.add(entry);
  try {
    if (readOnlyMode(opts)) return make('refused', READ_ONLY_REFUSAL);
    // the run's dirs once for the whole action (its log check and every record), when handed a dir
    // (a dir whose pointer files cannot be read: each record tries again and says it was not logged)
    dirs = await runDirsOf(host, run).catch(() => null);
    if (spec.requireLog) {
      const { why, note } = await actionLogProblem(host, (dirs ?? (await runDirsOf(host, run))).outDir, opts);
      // a signal, a dump, removing a .HALT: not taken unrecorded (fail closed); a halt: taken (fail open)
      if (why && !spec.failOpen)
        return make('refused', `${why} — the action could not be recorded, so it was not taken`);
      unusable = why;
      asideNote = note;
    }
    if (cancelled !== null) {
      ended = true;
      final = await keep(make('refused', `not taken: ${cancelled}`), undefined, true);
      return final;
    }
    started = true;
    const ctx: AuditContext = { progress: (result, detail, target) => keep(make(result, detail, target)) };
    let o: Outcome;
    try {
      o = await effect(ctx);
    } catch (e) {
      o = { result: 'failed', detail: (e as Error).message };
    }
    // recorded abandoned meanwhile (its process is ending): its outcome is kept too, if there is time
    const late = ended ? 'after it was recorded abandoned: ' : '';
    ended = true;
    const rec = make(o.result, `${late}${o.detail}`, o.target);
    if (o.unrecorded !== undefined) {
      const why = unusable ?? failedAppend;
      return why !== null ? notLogged(rec, why) : rec;
    }
    final = await keep(rec, o.ifNotRecorded, true);
    return final;
  } finally {
    ended = true;
    inFlight.delete(entry);
    settle(final);
  }
}

/** An event of an action already under way, recorded as it happened (the supervisor, a request's owner). */
export function auditedEvent(
  host: Host,
  dir: RunRef,
  spec: AuditSpec,
  outcome: Outcome,
  opts: EffectOptions = {},
): Promise<ActionRecord> {
  return audited(host, dir, spec, () => Promise.resolve(outcome), opts);
}
