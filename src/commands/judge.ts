// One look at a run, judged once: what `status`, `watchdog --once` and `report` all start from, so
// the three can never disagree about the state or the critical alerts. The judgement itself is
// src/checks (Checker.evaluate); this module only gathers its input (snapshot, processes, run.info)
// and turns the evaluation into the exit code every command documents.
import { readdir, stat } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Checker, type Alert, type Evaluation, type Launched } from '../checks/index.js';
import { launchedFromRunInfo } from '../checks/launched.js';
import type { Host } from '../remote/host.js';
import { findRunProcesses } from '../trainer/run/processes.js';
import { hintsFromRun } from '../trainer/run/ranks.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import type { RunModel } from '../trainer/run/model.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import type { ControlRequest, SupervisorState } from '../trainer/control/types.js';
import { readStopFacts, type StopFacts } from '../trainer/control/stopfacts.js';

export async function readLaunched(host: Host, launcherDir: string): Promise<Launched | undefined> {
  try {
    return launchedFromRunInfo((await host.readFile(join(launcherDir, 'run.info'), 256 * 1024)).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** The run's processes (src/remote/procs); null when the process table cannot be read. */
export async function runProcesses(
  host: Host,
  outDir: string,
  run: RunSnapshot,
  gpu: GpuTelemetry | null,
): Promise<RunProcesses | null> {
  const g = gpu && gpu.status === 'ok' ? gpu : null;
  try {
    // a heartbeat's pid only names a candidate: a rank proves itself (command, environ, start time)
    const procs = await findRunProcesses(host, outDir, { ...hintsFromRun(run), gpu: g });
    return procs.error && procs.ranks.length === 0 ? null : procs;
  } catch {
    return null;
  }
}

/**
 * The working directory of a live rank (or the launcher): env.json's CONFIG is relative to it. The
 * run model is told, so a run nsa-top did not launch still shows its model, dims and total steps.
 */
export function tellTrainerCwd(model: RunModel, procs: RunProcesses | null): boolean {
  if (!procs) return false;
  const cwds = [...procs.ranks.map((r) => r.proc), ...(procs.launcher ? [procs.launcher] : [])]
    .map((p) => p.cwd)
    .filter((c): c is string => !!c);
  return cwds.length > 0 && model.setTrainerCwd(cwds[0]!);
}

export interface Judged {
  run: RunSnapshot;
  procs: RunProcesses | null;
  ev: Evaluation;
  /** how the run's stops went (nsa-top's own records), as judged */
  stop: StopFacts;
}

/** Evaluate a snapshot with the run's processes, as every command does. */
export async function judge(
  host: Host,
  outDir: string,
  model: RunModel,
  run: RunSnapshot,
  o: {
    checker: Checker;
    gpu: GpuTelemetry | null;
    launched?: Launched;
    launcherDir?: string;
    /** the supervisor's state with its liveness, and the control requests (CheckInput) */
    supervisor?: SupervisorState | null;
    requests?: ControlRequest[];
  },
): Promise<Judged> {
  const procs = await runProcesses(host, outDir, run, o.gpu);
  const stop = await readStopFacts(host, outDir, o.launcherDir ?? outDir);
  // CONFIG can now be resolved against the trainer's cwd: read it before judging
  if (tellTrainerCwd(model, procs)) run = await model.poll();
  const ev = o.checker.evaluate({
    now: run.hostNowMs || host.now(),
    run,
    procs,
    gpu: o.gpu,
    launched: o.launched,
    hostCpus: host.kind === 'local' ? cpus().length : undefined,
    ...(o.supervisor !== undefined ? { supervisor: o.supervisor } : {}),
    ...(o.requests !== undefined ? { requests: o.requests } : {}),
    stopEscalation: stop.stopEscalation,
    stopEscalationWhy: stop.escalationWhy,
  });
  return { run, procs, ev, stop };
}

/** an alert's fields as `status --json` and the watchdog's `alert` lines give them */
export function alertFields(a: Alert) {
  return {
    id: a.id,
    rule: a.rule,
    severity: a.severity,
    title: a.title,
    detail: a.detail,
    since: a.since,
    step: a.step ?? null,
    rank: a.rank ?? null,
  };
}

const DEAD = new Set(['STALLED', 'EXITED', 'NO TRAINER']);

/**
 * The exit code of `status` and `watchdog --once`: 0 healthy (running, finished, halted on
 * request), 1 an anomaly (any critical alert), a stall or a dead run.
 */
export function healthExit(ev: Evaluation): 0 | 1 {
  return ev.alerts.some((a) => a.severity === 'critical') || DEAD.has(ev.runState) ? 1 : 0;
}

/**
 * The reason behind an "empty" listing on this machine: names that readdir shows but that cannot
 * be looked at (a dir without search permission lists its names and nothing else).
 */
export async function whyNothingListed(host: Host, outDir: string): Promise<string | null> {
  if (host.kind !== 'local') return null;
  const names = await readdir(outDir).catch(() => null);
  if (!names || names.length === 0) return null;
  const err = await stat(join(outDir, names[0]!)).then(
    () => null,
    (e: NodeJS.ErrnoException) => e.code ?? e.message,
  );
  return err ? `cannot read run dir ${outDir}: its ${names.length} entries cannot be looked at (${err})` : null;
}

/**
 * Why a snapshot cannot be judged at all (exit 2), or null: the dir is gone, holds no run artifact,
 * or nothing in it could be read.
 */
export function unjudgeable(run: RunSnapshot, outDir: string): string | null {
  if (!run.exists) return `cannot read run dir ${outDir}: ${run.error ?? 'missing'}`;
  const files = Object.entries(run.files);
  if (files.length === 0 && run.checkpoints.length === 0 && !run.tb.present) {
    return `${outDir} holds no run artifacts (no heartbeat_rank*.jsonl, training.csv, env.json, checkpoint or tb/)`;
  }
  const readable = files.filter(([, h]) => h.records > 0 || (h.lastError === null && h.size === 0));
  if (files.length > 0 && readable.length === 0 && files.every(([, h]) => h.lastError)) {
    const [name, h] = files[0]!;
    return `cannot read the run's files in ${outDir} (${name}: ${h.lastError}${files.length > 1 ? `, and ${files.length - 1} more` : ''})`;
  }
  return null;
}
