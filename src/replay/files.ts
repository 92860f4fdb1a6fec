// Replay from the trainer's files alone: a run nsa-top never watched (or whose journal is gone).
// The run dir is read once and dated (index-files.ts); each moment is the dir as it stood then
// (asof.ts), observed by the one Observer and judged by the one judge, exactly as a live cockpit
// would have judged those files. The timeline's markers are what the files date (dumps,
// checkpoints, a relaunch's boot, .HALT, nsa-top's actions and the watchdog's stalls) and what the
// judge said over a sweep of the span (state changes, alerts raised and cleared).
import { join } from 'node:path';
import { Checker, thresholdsFromEnv } from '../checks/index.js';
import { stepsAtRisk } from '../checks/control.js';
import { Observer } from '../cockpit/observe.js';
import { evaluationFields, type CockpitState } from '../cockpit/state.js';
import type { Host } from '../remote/host.js';
import { readActions } from '../trainer/control/audit.js';
import { classify } from '../trainer/run/readers/names.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import { AsOfHost } from './asof.js';
import { lineEnds, lineTs } from './dated.js';
import { type FilesIndex, indexRun, spanOf } from './index-files.js';
import type { ReplayMarker, ReplaySource } from './source.js';

export interface FilesSourceOptions {
  /** moments judged across the span to find state changes and alerts (default 160) */
  samples?: number;
}

/** the most event moments a sweep judges besides its evenly spaced samples */
const EVENT_MOMENTS = 240;

/** What the trainer's files never hold, whatever the run. */
const ALWAYS_MISSING = [
  'no process history: which ranks lived, their CPU, memory and state are not in the trainer files',
  'no GPU history: the trainer files record no nvidia-smi samples',
  'no host history: RAM, swap, load and disks as they were are not recorded',
];

export class FilesSource implements ReplaySource {
  readonly origin: string;
  readonly span: { start: number; end: number };
  markers: ReplayMarker[] = [];
  readonly missing: string[];
  private chain: Promise<unknown> = Promise.resolve();
  /** the judge of forward moves: its hysteresis and alert timeline hold while time moves on */
  private checker: Checker | null = null;
  private lastAt = -Infinity;

  constructor(readonly idx: FilesIndex) {
    this.span = spanOf(idx);
    const n = idx.files.size;
    this.origin = `trainer files only (${n} file${n === 1 ? '' : 's'}: nsa-top kept no journal of this run)`;
    this.missing = [...ALWAYS_MISSING];
    if (idx.steps.length === 0)
      this.missing.push('no heartbeat with steps: rows and log lines are placed by file times only');
    if (idx.guessed.length)
      this.missing.push(
        `${idx.guessed.length} file time(s) guessed (their mtimes are a copy's, after the last record): ${idx.guessed.slice(0, 6).join(', ')}${idx.guessed.length > 6 ? ', …' : ''}`,
      );
    if (idx.capped.length) this.missing.push(`replayed from their first 64 MiB only: ${idx.capped.join(', ')}`);
    const whole = [...idx.files.values()]
      .filter((f) => !f.dated.cuts && /\.(json|yaml|yml)$/.test(f.dated.name))
      .map((f) => f.dated.name);
    if (whole.length) this.missing.push(`whole files show their last version only: ${whole.slice(0, 6).join(', ')}`);
  }

  /** The first moment a heartbeat reached `step` (rank 0's step clock), or null when none did. */
  timeOfStep(step: number): number | null {
    return this.idx.steps.find((s) => s.step >= step)?.at ?? null;
  }

  /** One moment, judged: serialized (a key held down asks faster than a round answers). */
  stateAt(at: number): Promise<CockpitState> {
    const run = this.chain.then(() => this.judgeAt(at));
    this.chain = run.catch(() => {});
    return run;
  }

  private async judgeAt(at0: number): Promise<CockpitState> {
    const at = Math.min(this.span.end, Math.max(this.span.start, at0));
    // moving back in time: a fresh judge (what it remembered had not happened yet)
    if (!this.checker || at < this.lastAt) this.checker = new Checker(thresholdsFromEnv(process.env));
    this.lastAt = at;
    const host = new AsOfHost(this.idx, at);
    const obs = new Observer(host, {
      dirs: this.idx.dirs,
      gpu: null,
      adoptAs: null,
      takeOver: null,
      // a recording is never stale: its moments are as old as they are
      staleAfterMs: Number.MAX_SAFE_INTEGER,
      checker: this.checker,
    });
    const j = await obs.judged();
    const ev = j.ev;
    const actions = await readActions(host, j.dirs, 100).catch(() => []);
    const risk = stepsAtRisk(j.run);
    // the process table is absent by nature here (`missing` says so), not a collection problem
    const errors = j.errors.filter((e) => !e.startsWith('process table'));
    return {
      at,
      clockOffsetMs: 0,
      hostLabel: this.idx.host.label,
      conn: { state: 'local' },
      readOnly: true,
      run: j.run,
      ...evaluationFields(ev),
      gpu: null,
      hostStats: null,
      procs: null,
      alertHistory: ev.history,
      actions,
      supervisor: j.supervisor,
      requests: j.requests,
      haltGraceS: j.haltGraceS,
      self: { cpuPct: null, rssMiB: null, renderMs: null, telemetryLatencyMs: null },
      stepsAtRisk: { steps: risk.lost, lastCheckpointStep: risk.lastCheckpointStep, savesOnHalt: risk.savesOnHalt },
      caps: { pySpy: false },
      collectError: errors.length ? errors.join('; ') : null,
    };
  }

  /** The markers the files date themselves. */
  fileMarkers(): ReplayMarker[] {
    const out: ReplayMarker[] = [];
    for (const f of this.idx.files.values()) {
      const k = classify(f.dated.name);
      const at = f.dated.at;
      if (k.kind === 'stackdump')
        out.push({
          at,
          kind: 'dump',
          label: `stack dump ${f.dated.name}${k.rank !== null ? ` (rank ${k.rank})` : ''}`,
        });
      else if (k.kind === 'checkpoint' && f.path.startsWith(this.idx.dirs.outDir))
        out.push({ at, kind: 'checkpoint', label: `checkpoint step ${k.step}` });
      else if (k.kind === 'halt')
        out.push({ at, kind: 'action', label: `.HALT written${f.dated.how === 'guess' ? ' (time guessed)' : ''}` });
      else if (k.kind === 'anomaly') out.push({ at, kind: 'alert', label: '.anomaly_type written' });
    }
    for (const b of this.idx.boots) out.push({ at: b, kind: 'restart', label: 'relaunch: rank 0 booted again' });
    const nsa = join(this.idx.dirs.outDir, NSA_DIR);
    const rec = (name: string) => this.idx.files.get(join(nsa, name));
    const actions = rec('actions.jsonl');
    if (actions?.bytes)
      for (const l of lineEnds(actions.bytes)) {
        const at = lineTs(l.text);
        if (at === null) continue;
        try {
          const r = JSON.parse(l.text) as { action?: string; who?: { user?: string }; result?: string; text?: string };
          out.push({
            at,
            kind: 'action',
            label: `${r.action ?? 'action'}${r.who?.user ? ` by ${r.who.user}` : ''}${r.result ? ` (${r.result})` : ''}`,
          });
        } catch {
          /* a torn line */
        }
      }
    const wd = rec('watchdog.jsonl');
    if (wd?.bytes)
      for (const l of lineEnds(wd.bytes)) {
        const at = lineTs(l.text);
        const title = /"title"\s*:\s*"([^"]*)"/.exec(l.text)?.[1];
        if (at !== null && title) out.push({ at, kind: 'alert', label: `watchdog: ${title}` });
      }
    return out;
  }

  /**
   * Judges `samples` moments across the span (and the moment after each file marker) in time
   * order, and marks where the state changed and alerts were raised or cleared.
   */
  async sweep(samples = 160): Promise<ReplayMarker[]> {
    const fm = this.fileMarkers();
    const { start, end } = this.span;
    const ts = new Set<number>();
    const n = Math.max(2, samples);
    for (let i = 0; i < n; i++) ts.add(start + ((end - start) * i) / (n - 1));
    // the moment of each dated event too, at most EVENT_MOMENTS of them (evenly chosen): a run with
    // thousands of checkpoints must not make opening it slow
    const events = fm.filter((m) => m.at >= start && m.at <= end).sort((a, b) => a.at - b.at);
    const every = Math.max(1, events.length / EVENT_MOMENTS);
    for (let i = 0; i < events.length; i += every) ts.add(events[Math.floor(i)]!.at);
    for (const s of this.idx.steps.slice(0, 1)) ts.add(s.at);
    const out: ReplayMarker[] = [...fm];
    let prevState: string | null = null;
    let prevAlerts = new Map<string, string>();
    this.checker = null;
    for (const t of [...ts].sort((a, b) => a - b)) {
      const s = await this.stateAt(t);
      // the moment judged (clamped to the span)
      const at = s.at;
      if (prevState !== null && s.runState !== prevState)
        out.push({ at, kind: 'state', label: `${prevState} → ${s.runState}` });
      prevState = s.runState;
      const now = new Map(s.alerts.map((a) => [a.id, `${a.severity} ${a.title}`]));
      for (const [id, label] of now) if (!prevAlerts.has(id)) out.push({ at, kind: 'alert', label });
      for (const [id, label] of prevAlerts)
        if (!now.has(id)) out.push({ at, kind: 'clear', label: `cleared: ${label}` });
      prevAlerts = now;
    }
    // the first state is the start, not a change; a marker per distinct moment and label
    const seen = new Set<string>();
    this.markers = out
      .filter((m) => {
        const key = `${m.at}|${m.kind}|${m.label}`;
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      })
      .sort((a, b) => a.at - b.at);
    this.checker = null;
    return this.markers;
  }
}

/** The replay source of a run from its trainer's files (read once, swept once). */
export async function trainerFilesSource(host: Host, dirs: RunDirs, o: FilesSourceOptions = {}): Promise<FilesSource> {
  const src = new FilesSource(await indexRun(host, dirs));
  await src.sweep(o.samples);
  return src;
}
