// How a run's stops went, from nsa-top's own records in <out_dir>/.nsa-top: the operator's halts
// and the escalations that followed them (actions.jsonl), the supervisor's own account
// (supervisor.log, supervisor.json lastCause), the watchdog's stall decisions (watchdog.jsonl),
// and what the trainer was launched with (the adoption record, run.info, the supervisor's
// lastCommand). Read-only, bounded reads; the judge (src/checks) decides what the facts mean:
// this module only gathers them, once, for every surface (status, watchdog, report, the cockpit's
// observation) to pass as `CheckInput.stopEscalation` and to the report's history.
import { join } from 'node:path';
import type { Host } from '../../remote/host.js';
import { NSA_DIR, type RunDirs } from '../run/rundirs.js';
import { STATE_FILE, SUPERVISOR_LOG } from '../run/launchstate.js';
import { ACTIONS_FILE, readActionLog } from './audit.js';
import type { ActionRecord, SupervisorState } from './types.js';

export type StopSignal = 'SIGINT' | 'SIGKILL';

/** One stop-related record of the run, oldest first. */
export interface StopEvent {
  /** ms epoch */
  ts: number;
  kind: 'halt' | 'escalate-sigint' | 'escalate-sigkill' | 'launch';
  /** who asked (user), when nsa-top recorded it */
  who: string | null;
  /** where the fact comes from: "actions.jsonl", "supervisor.log" */
  source: string;
  text: string;
}

/** A stall the watchdog decided on (.nsa-top/watchdog.jsonl): its alert or anomaly line. */
export interface WatchdogStall {
  /** ms epoch */
  ts: number;
  step: number | null;
  rank: number | null;
  title: string;
}

/**
 * A critical alert a watchdog (its .nsa-top/watchdog.jsonl) or a cockpit (the journal) raised,
 * whether or not it cleared later.
 */
export interface RaisedCritical {
  /** ms epoch of the alert's record */
  ts: number;
  /** the alert's id (the judge's rule instance: "stall:run", "proc-state:1") */
  id: string;
  title: string;
  rank: number | null;
}

export interface StopFacts {
  /**
   * How the newest stop of the current launch ended: 'SIGINT' or 'SIGKILL' when nsa-top (the
   * operator or the supervisor) had to signal the ranks because .HALT went unanswered; null when
   * no escalation followed the newest launch (a graceful stop, or none).
   */
  stopEscalation: StopSignal | null;
  /** one phrase of evidence for stopEscalation ("SIGINT to ranks 0,1 by root at …, 10s after .HALT") */
  escalationWhy: string | null;
  /** every halt, escalation and (re)launch nsa-top recorded, oldest first */
  events: StopEvent[];
  /** the watchdog's stall decisions, oldest first (bounded) */
  stalls: WatchdogStall[];
  /** the critical alerts the watchdog raised, oldest first (bounded): a report tells of those that cleared too */
  criticals: RaisedCritical[];
  /** the dataset the trainer's argv names (`--dataset X`), and where it was read */
  argvDataset: { value: string; source: string } | null;
  /** the launcher's stdout log recorded by adoption (a hand-launched run), when a file */
  adoptedLog: string | null;
  /** nsa-top's newest dump actions (at most 20, oldest first): their records say which file is which rank's */
  dumpActions: ActionRecord[];
}

// bounded reads: the watchdog calls this every round
const TAIL = 512 * 1024;
const MAX_STALLS = 50;
const MAX_CRITICALS = 50;

async function readTail(host: Host, path: string, max = TAIL): Promise<string | null> {
  try {
    const st = await host.stat(path);
    if (!st || !st.isFile) return null;
    const start = Math.max(0, st.size - max);
    let text = (await host.readRange(path, start)).toString('utf8');
    if (start > 0) text = text.slice(text.indexOf('\n') + 1);
    return text;
  } catch {
    return null;
  }
}

async function readJson<T>(host: Host, path: string): Promise<T | null> {
  const t = await readTail(host, path, 1 << 20);
  if (t === null) return null;
  try {
    return JSON.parse(t) as T;
  } catch {
    return null;
  }
}

/** `--dataset X` / `--dataset=X` in an argv (tokens) */
export function datasetFromArgv(argv: readonly string[]): string | null {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--dataset' && i + 1 < argv.length) return argv[i + 1]!;
    const m = /^--dataset=(.+)$/.exec(a);
    if (m) return m[1]!;
  }
  return null;
}

/** `--dataset X` in run.info's shell-quoted `command:` line */
export function datasetFromRunInfo(text: string): string | null {
  const line = /^command:\s?(.*)$/m.exec(text)?.[1];
  if (!line) return null;
  const m = /(?:^|\s)--dataset(?:=|\s+)(['"]?)([^\s'"]+)\1/.exec(line);
  return m ? m[2]! : null;
}

const RE_SUP_START = /^\[nsa-top supervisor\] (\S+) (?:start|restart|relaunch)\b/;
const RE_SUP_ESC =
  /^\[nsa-top supervisor\] (\S+) (ranks still running (.+?) after \.HALT: SIGINT to .*|still running (.+?) after SIGINT: SIGKILL to .*)$/;

function actionEvent(r: ActionRecord): StopEvent | null {
  if (r.result !== 'ok' && r.result !== 'partial') return null;
  const kind =
    r.action === 'halt' || r.action === 'watchdog-halt' || r.action === 'stop'
      ? 'halt'
      : r.action === 'escalate-sigint'
        ? 'escalate-sigint'
        : r.action === 'escalate-sigkill'
          ? 'escalate-sigkill'
          : r.action === 'launch' || r.action === 'relaunch' || r.action === 'adopt'
            ? 'launch'
            : null;
  if (!kind) return null;
  return { ts: r.ts, kind, who: r.who?.user ?? null, source: 'actions.jsonl', text: `${r.action}: ${r.detail}` };
}

/** the files readStopFacts reads (run.info only when nothing else names the dataset), and the key's */
function stopFactFiles(outDir: string, launcherDir: string) {
  return {
    actions: join(outDir, NSA_DIR, ACTIONS_FILE),
    supLog: join(launcherDir, NSA_DIR, SUPERVISOR_LOG),
    supState: join(launcherDir, NSA_DIR, STATE_FILE),
    watchdog: join(outDir, NSA_DIR, 'watchdog.jsonl'),
    adoption: join(outDir, NSA_DIR, 'launch.json'),
    runInfo: join(launcherDir, 'run.info'),
  };
}

/**
 * What readStopFacts would read, as one key (each file's size, mtime and inode): the same key, the
 * same facts. A looping caller (the observation, every 3–10 s) stats six files instead of reading
 * and parsing them again.
 */
export async function stopFactsKey(host: Host, outDir: string, launcherDir: string = outDir): Promise<string> {
  const parts: string[] = [];
  for (const path of Object.values(stopFactFiles(outDir, launcherDir))) {
    const st = await host.stat(path).catch(() => null);
    parts.push(st ? `${st.size}:${st.mtimeMs}:${st.ino}` : '-');
  }
  return parts.join('|');
}

/**
 * Gather the stop facts of a run. `outDir`: where the trainer writes (the action log, the
 * watchdog's log and the adoption record live in its .nsa-top); `launcherDir`: where run.info and
 * the supervisor's files are (the same dir for most runs).
 */
export async function readStopFacts(
  host: Host,
  outDir: string,
  launcherDir: string = outDir,
  /** the run resolved at the edge: the action log is read where it says, not resolved again */
  dirs?: RunDirs,
): Promise<StopFacts> {
  const files = stopFactFiles(outDir, launcherDir);
  const events: StopEvent[] = [];
  const log = await readActionLog(host, dirs ?? outDir, 2000).catch(() => null);
  const dumpActions: ActionRecord[] = [];
  for (const r of log?.records ?? []) {
    const e = actionEvent(r);
    if (e) events.push(e);
    if (r.action === 'dump') dumpActions.push(r);
  }
  dumpActions.splice(0, Math.max(0, dumpActions.length - 20));
  // the supervisor's own account (it also writes actions, but its log survives an unwritable action log)
  const supLog = await readTail(host, files.supLog);
  for (const line of (supLog ?? '').split('\n')) {
    let m: RegExpExecArray | null;
    if ((m = RE_SUP_START.exec(line))) {
      const ts = Date.parse(m[1]!);
      if (Number.isFinite(ts)) events.push({ ts, kind: 'launch', who: null, source: 'supervisor.log', text: line });
    } else if ((m = RE_SUP_ESC.exec(line))) {
      const ts = Date.parse(m[1]!);
      if (!Number.isFinite(ts)) continue;
      const kind = m[3] !== undefined ? 'escalate-sigint' : 'escalate-sigkill';
      // the same escalation is in actions.jsonl when it could be written: keep one
      if (events.some((e) => e.kind === kind && Math.abs(e.ts - ts) < 5000)) continue;
      events.push({ ts, kind, who: 'supervisor', source: 'supervisor.log', text: m[2]! });
    }
  }
  events.sort((a, b) => a.ts - b.ts);
  const sup = await readJson<SupervisorState>(host, files.supState);

  // the newest stop: escalations after the newest launch
  let lastLaunch = -1;
  events.forEach((e, i) => {
    if (e.kind === 'launch') lastLaunch = i;
  });
  const after = events.slice(lastLaunch + 1);
  const kill = after.filter((e) => e.kind === 'escalate-sigkill').at(-1);
  const int = after.filter((e) => e.kind === 'escalate-sigint').at(-1);
  const halt = after.filter((e) => e.kind === 'halt')[0];
  let stopEscalation: StopSignal | null = null;
  let escalationWhy: string | null = null;
  const esc = kill ?? int;
  if (esc) {
    stopEscalation = kill ? 'SIGKILL' : 'SIGINT';
    const since = halt && halt.ts <= esc.ts ? `, ${Math.round((esc.ts - halt.ts) / 1000)}s after .HALT` : '';
    escalationWhy = `${stopEscalation} by ${esc.who ?? 'nsa-top'} at ${new Date(esc.ts).toISOString().replace(/\.\d{3}Z$/, 'Z')}${since} (${esc.source})`;
  } else if (
    sup &&
    (sup.state === 'halted' || sup.state === 'stopping') &&
    (sup.lastCause === 'SIGKILL' || sup.lastCause === 'SIGINT' || sup.lastCause === 'signal SIGKILL')
  ) {
    stopEscalation = sup.lastCause.endsWith('SIGKILL') ? 'SIGKILL' : 'SIGINT';
    escalationWhy = `the trainer ended by ${stopEscalation} (supervisor.json lastCause)`;
  }

  const stalls: WatchdogStall[] = [];
  const criticals: RaisedCritical[] = [];
  const wd = await readTail(host, files.watchdog);
  for (const line of (wd ?? '').split('\n')) {
    if (!line.includes('heartbeat') && !line.includes('critical')) continue;
    let j: Record<string, unknown>;
    try {
      j = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (typeof j.ts !== 'number') continue;
    const rank = typeof j.rank === 'number' ? j.rank : null;
    if (j.event === 'alert' && j.severity === 'critical' && typeof j.id === 'string') {
      if (criticals.length >= MAX_CRITICALS) criticals.shift();
      criticals.push({ ts: j.ts, id: j.id, title: typeof j.title === 'string' ? j.title : j.id, rank });
    }
    const isAlert =
      j.event === 'alert' && j.rule === 'heartbeat-stall' && j.severity === 'critical' && j.id === 'stall:run';
    const isAnomaly = j.event === 'anomaly' && j.type === 'heartbeat_stall';
    if (!isAlert && !isAnomaly) continue;
    if (stalls.length >= MAX_STALLS) stalls.shift();
    stalls.push({
      ts: j.ts,
      step: typeof j.step === 'number' ? j.step : null,
      rank,
      title: typeof j.title === 'string' ? j.title : 'heartbeat_stall',
    });
  }

  let argvDataset: StopFacts['argvDataset'] = null;
  let adoptedLog: string | null = null;
  const adopt = await readJson<{ kind?: string; launcher?: { argv?: unknown }; stdout?: unknown }>(
    host,
    files.adoption,
  );
  if (adopt?.kind === 'adopted') {
    if (Array.isArray(adopt.launcher?.argv)) {
      const d = datasetFromArgv(adopt.launcher.argv.filter((x): x is string => typeof x === 'string'));
      if (d) argvDataset = { value: d, source: '--dataset in the launcher argv recorded at adoption' };
    }
    if (typeof adopt.stdout === 'string' && adopt.stdout.startsWith('/')) adoptedLog = adopt.stdout;
  }
  if (!argvDataset && sup && Array.isArray(sup.lastCommand)) {
    const d = datasetFromArgv(sup.lastCommand);
    if (d) argvDataset = { value: d, source: "--dataset in the supervisor's lastCommand" };
  }
  if (!argvDataset) {
    const info = await readTail(host, files.runInfo, 256 * 1024);
    const d = info ? datasetFromRunInfo(info) : null;
    if (d) argvDataset = { value: d, source: "--dataset in run.info's command" };
  }
  return { stopEscalation, escalationWhy, events, stalls, criticals, argvDataset, adoptedLog, dumpActions };
}
