// Acceptance grading against the runbooks' phases (contract §5): pure, over one snapshot, its
// Evaluation (the same rules as the cockpit and the watchdog) and optional per-record memory read
// by the command module. Honest: a run stopped at step 20 of 300 does not pass phase 1, and what
// cannot be measured is said so, not passed.
import { ENDED_STATES } from './runstate.js';
import type { RaisedCritical } from '../trainer/control/stopfacts.js';
import type { RunHistory } from '../trainer/run/history.js';
import type { ModelDims, RunSnapshot, SeriesPoint } from '../trainer/run/snapshot.js';
import { configBasename, estimateParams, knownConfig } from './flops.js';
import type { Evaluation } from './index.js';
import { leakOf, oddRankFromDumps, type MemSample } from './rules/index.js';
import { buildCtx } from './context.js';
import { dur, grouped, sig } from '../format.js';
import { currentSegment, median, quantile } from './stats.js';
import { DEFAULT_THRESHOLDS, type Thresholds } from './thresholds.js';
import type { Alert } from './types.js';
import { missingCheckpoints } from './saves.js';

export type Phase = 0 | 1 | 2 | 3;
export type Status = 'pass' | 'fail' | 'pending' | 'unknown';
export type Verdict = 'GO' | 'NO-GO' | 'CANNOT JUDGE';

export interface Criterion {
  id: string;
  phase: Phase;
  name: string;
  status: Status;
  evidence: string;
}

export interface PhaseGrade {
  phase: Phase;
  title: string;
  verdict: Verdict;
  /** one line: the first failing / pending criterion, or what passed */
  why: string;
  /** the criteria of this phase and every phase below it */
  criteria: Criterion[];
}

export interface Report {
  run: {
    name: string;
    dir: string;
    host: string;
    step: number | null;
    total: number | null;
    state: string;
    stateWhy: string;
    trainer: string;
    config: string | null;
  };
  /** the phase the verdict is for */
  target: Phase;
  verdict: Verdict;
  /** 0 GO, 1 NO-GO, 2 cannot judge */
  exitCode: 0 | 1 | 2;
  phases: PhaseGrade[];
  critical: Alert[];
  warnings: Alert[];
  /** per-step seconds where known */
  stepTime: { median: number | null; p95: number | null; max: number | null };
  /** the whole history, every segment (when the command read it) */
  history: {
    segments: RunHistory['segments'];
    events: RunHistory['events'];
    counts: RunHistory['counts'];
    complete: boolean;
    records: number;
  } | null;
}

export const PHASES: Record<Phase, { title: string; steps: number }> = {
  0: { title: 'phase 0 — smoke: one step and heartbeats', steps: 1 },
  1: { title: 'phase 1 — 300 steps: no stalls, finite loss, steady steps, throughput in bounds', steps: 300 },
  2: { title: 'phase 2 — 1000 steps: memory stable', steps: 1000 },
  3: { title: 'phase 3 — production: finished, checkpoints, real data, the intended model', steps: 5000 },
};

export interface GradeInput {
  run: RunSnapshot;
  ev: Evaluation;
  /** per-rank memory series read from the heartbeat files (gpu_mem_reserved, rss_mib), when available */
  memory?: Map<string, MemSample[]>;
  /** minimum median tok/s over the last 100 records (run_smoke_tests.py --min-tps, default 10) */
  minTps?: number;
  thresholds?: Thresholds;
  /** (step, ms) of rank 0's progress records, read from its heartbeat file by the command */
  progressTimes?: { step: number; t: number }[];
  /** every segment of the run, read from the first byte (src/trainer/run/history.ts) */
  history?: RunHistory;
  /** how the newest stop ended (CheckInput.stopEscalation and its evidence) */
  stop?: { signal: 'SIGINT' | 'SIGKILL' | null; why: string | null };
  /** the dataset the launch names outside the run dir's train.log (argv, run.info, a recorded stdout) */
  namedDataset?: { value: string; source: string } | null;
  /**
   * the critical alerts a cockpit or watchdog raised while it watched (.nsa-top/watchdog.jsonl and
   * the journal), oldest first, cleared or not: a critical alert during the run fails `no critical
   * alert` though it is gone at the end (ms epoch)
   */
  raised?: readonly RaisedCritical[];
}

/** Smaller than this many parameters is a toy or smoke model, not the runbooks' 125M one. */
export const MIN_INTENDED_PARAMS = 20e6;

/** parameters (the same estimate as preflight and the throughput rule) */
export function approxParams(m: ModelDims): number {
  return estimateParams(m).total;
}

function fmtParams(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 2)}M` : `${(n / 1e3).toFixed(0)}k`;
}

/** "the first 3 of N: a; b; c" */
function listSome(texts: string[], total: number, n = 3): string {
  const head = texts.slice(0, n).join('; ');
  return total > n ? `${total} of them, the first ${n}: ${head}` : head;
}

/** The highest phase a run can reach by its configured length. */
export function reachablePhase(run: RunSnapshot): Phase {
  const total = run.totalSteps ?? run.step ?? 0;
  if (total >= PHASES[3].steps) return 3;
  if (total >= PHASES[2].steps) return 2;
  if (total >= PHASES[1].steps) return 1;
  return 0;
}

function allPoints(s: { recent: SeriesPoint[] }): readonly SeriesPoint[] {
  return currentSegment(s as never);
}

/** What every criterion reads: the input, and what is derived from it once. */
interface Grading {
  inp: GradeInput;
  run: RunSnapshot;
  ev: Evaluation;
  t: Thresholds;
  step: number;
  total: number | null;
  /** the run is over (finished, halted, exited, or no trainer) */
  ended: boolean;
  critical: Alert[];
  lossPts: readonly SeriesPoint[];
  times: StepTimes;
}

/** A criterion of a phase: its verdict on the run, or null where it does not apply. */
type CriterionFn = (g: Grading) => Omit<Criterion, 'phase'> | null;

/**
 * The runbooks' phases, each by its criteria (a phase's verdict also counts every phase below it).
 * `no-critical` repeats per phase; the highest-phase copy is the one kept.
 */
const PHASE_CRITERIA: Record<Phase, readonly CriterionFn[]> = {
  0: [reachedSteps(1), heartbeatsFromEveryRank, firstLossFinite, noCrash, cleanStop, noCritical],
  1: [reachedSteps(300), noStall, lossFinite, steadySteps, throughputInBounds, realRun, noCritical],
  2: [reachedSteps(1000), memoryStable, noCritical],
  3: [finished, checkpointsSaved, realData, intendedModel, noCritical],
};

interface StepTimes {
  /** timed records (per step): the heartbeat progress times when read, else the first timed series */
  timed: readonly SeriesPoint[];
  perStep: { step: number; s: number }[];
  /** seconds per step past step 5 */
  steady: number[];
  median: number | null;
  p95: number | null;
  max: number | null;
}

/**
 * Step time, from timed records (per step): the heartbeat progress times when the command read
 * them, else the first series whose points carry times (CSV rows have none).
 */
function stepTimes(inp: GradeInput): StepTimes {
  const run = inp.run;
  const pt = inp.history?.progressTimes.length ? inp.history.progressTimes : inp.progressTimes;
  const timed: readonly SeriesPoint[] = pt?.length
    ? pt.map((p) => ({ step: p.step, t: p.t, value: 0, segment: 0 }))
    : ([run.series.loss, run.series.toksPerS, run.series.gateEntropy, run.series.dtFetchS, run.series.memReservedMiB]
        .map((s) => allPoints(s))
        .find((ps) => ps.filter((p) => p.t !== null).length >= 2) ?? []);
  const perStep: { step: number; s: number }[] = [];
  for (let i = 1; i < timed.length; i++) {
    const a = timed[i - 1]!,
      b = timed[i]!;
    if (a.t === null || b.t === null || b.step <= a.step) continue;
    perStep.push({ step: b.step, s: (b.t - a.t) / 1000 / (b.step - a.step) });
  }
  const steady = perStep.filter((p) => p.step > 5).map((p) => p.s);
  return {
    timed,
    perStep,
    steady,
    median: median(steady),
    p95: quantile(steady, 0.95),
    max: steady.length ? Math.max(...steady) : null,
  };
}

function criterion(id: string, name: string, status: Status, evidence: string): Omit<Criterion, 'phase'> {
  return { id, name, status, evidence };
}

// ---------- every phase

function noCritical(g: Grading): Omit<Criterion, 'phase'> {
  const critical = g.critical;
  // raised while nsa-top watched and cleared since: one line per alert, its first raise
  const now = new Set(critical.map((a) => a.id));
  const earlier = new Map<string, { ts: number; last: number; title: string; n: number }>();
  for (const r of g.inp.raised ?? []) {
    if (now.has(r.id)) continue;
    const e = earlier.get(r.id);
    // the watchdog's log and the journal record one raise each: a raise within 5 s of the last is that one
    if (!e) earlier.set(r.id, { ts: r.ts, last: r.ts, title: r.title, n: 1 });
    else if (r.ts - e.last > 5000) {
      e.n++;
      e.last = r.ts;
    }
  }
  const cleared = [...earlier.values()].map(
    (e) =>
      `${e.title} (raised ${new Date(e.ts).toISOString().replace(/\.\d{3}Z$/, 'Z')}${e.n > 1 ? `, ${e.n} times` : ''}, cleared since)`,
  );
  const texts = [...critical.map((a) => a.title), ...(cleared.length ? [listSome(cleared, cleared.length)] : [])];
  return criterion(
    'no-critical',
    'no critical alert',
    texts.length ? 'fail' : 'pass',
    texts.length
      ? texts.join('; ')
      : g.inp.raised
        ? 'none of the rules raised a critical alert, now or while nsa-top watched'
        : 'none of the rules raised a critical alert',
  );
}

function reachedSteps(need: number): CriterionFn {
  return ({ step, total, ended, ev }) => {
    const id = `steps-${need}`;
    const name = `${need} step${need > 1 ? 's' : ''}`;
    const of = total !== null ? ` of ${total}` : '';
    if (step >= need) return criterion(id, name, 'pass', `reached step ${step}${of}`);
    if (ended)
      return criterion(
        id,
        name,
        'fail',
        `the run ${ev.runState === 'FINISHED' ? 'finished' : 'stopped'} at step ${step}${of} (${ev.runStateWhy})`,
      );
    if (total !== null && total < need)
      return criterion(id, `${need} steps`, 'fail', `the run is configured for ${total} steps only`);
    return criterion(id, name, 'pending', `live at step ${step}${of}: not there yet`);
  };
}

// ---------- phase 0

function heartbeatsFromEveryRank({ run, ended, step }: Grading): Omit<Criterion, 'phase'> {
  const world = run.identity.worldSize ?? 1;
  const seen = new Set(run.ranks.filter((r) => r.bootTs !== null || r.records > 0).map((r) => r.rank));
  const missing = Array.from({ length: world }, (_, i) => i).filter((r) => !seen.has(r));
  const r0 = run.ranks.find((r) => r.rank === 0);
  const prog = (r0?.events?.['progress'] ?? 0) > 0 || run.lastProgress !== null;
  const status: Status = missing.length === 0 && prog ? 'pass' : ended || step > 0 ? 'fail' : 'pending';
  return criterion(
    'heartbeats',
    'heartbeats from every rank',
    status,
    missing.length
      ? `no heartbeat from rank(s) ${missing.slice(0, 32).join(',')}${missing.length > 32 ? ` … (${missing.length} ranks)` : ''} of ${world}`
      : !prog
        ? 'rank 0 wrote no progress record'
        : `${run.ranks.length} heartbeat file(s) for world size ${world}; rank 0 progress at step ${run.lastProgress?.step ?? '?'}`,
  );
}

function firstLossFinite({ lossPts, ended }: Grading): Omit<Criterion, 'phase'> {
  const first = lossPts[0];
  return criterion(
    'first-loss',
    'first loss finite',
    first ? (Number.isFinite(first.value) ? 'pass' : 'fail') : ended ? 'fail' : 'pending',
    first ? `loss ${sig(first.value, 4)} at step ${first.step}` : 'no loss logged',
  );
}

/**
 * Every earlier segment of the run: a crash anywhere, even one that was resumed, is NO-GO at every
 * phase (like a critical alert), named with its steps and time. Judged only when the caller read
 * the history (`nsa-top report` always does).
 */
function noCrash({ inp, ev, run }: Grading): Omit<Criterion, 'phase'> | null {
  const h = inp.history;
  if (!h) return null;
  const crashes = h.events.filter((e) => e.kind === 'crash');
  // the current segment ended without metrics.json or a .HALT: a crash even when no log says how
  // (the trainer's stdout is often elsewhere: a runbook's log, a tmux pane)
  const last = h.segments.at(-1);
  if (!h.counts.crash && ev.runState === 'EXITED')
    return criterion(
      'no-crash',
      'no crash or restart',
      'fail',
      `the last segment${last?.pid ? ` (pid ${last.pid})` : ''} ended at step ${run.step ?? '?'} without finishing or a .HALT: ${ev.runStateWhy}${last && /; log: /.test(last.endWhy) ? ` (${last.endWhy.slice(last.endWhy.indexOf('log: '))})` : ''}`,
    );
  const others = h.segments.filter((g) => g.end !== 'current' && g.end !== 'crashed');
  const restartTxt = others.map(
    (g) =>
      `segment #${g.index}${g.pid !== null ? ` (pid ${g.pid})` : ''} steps ${g.firstStep ?? 0}–${g.lastStep ?? 0} ${g.end}: ${g.endWhy}`,
  );
  return criterion(
    'no-crash',
    'no crash or restart',
    h.counts.crash ? 'fail' : 'pass',
    h.counts.crash
      ? `${h.counts.crash} crash(es): ${listSome(
          crashes.map((e) => e.text),
          h.counts.crash,
        )}${restartTxt.length ? `; also ${restartTxt.join('; ')}` : ''}`
      : h.segments.length > 1
        ? `${h.segments.length} segments, none crashed: ${restartTxt.join('; ')}`
        : `one segment${h.segments[0]?.pid ? ` (pid ${h.segments[0].pid})` : ''}, no restart`,
  );
}

/**
 * Every stop of the run was answered: a stall that a halt ended is still a stall (named with its
 * rank and evidence), and a stop that needed SIGINT or SIGKILL is not a graceful halt. Judged only
 * when the caller read the history.
 */
function cleanStop({ inp }: Grading): Omit<Criterion, 'phase'> | null {
  const h = inp.history;
  if (!h) return null;
  const stalled = h.events.filter((e) => e.kind === 'stall' && e.atStop);
  const signalled = h.segments.filter((g) => g.stopSignal);
  const cur = inp.stop?.signal ?? null;
  const texts = [
    ...stalled.map((e) => `segment #${e.segment}: ${e.text}`),
    ...signalled
      .filter((g) => !stalled.some((e) => e.segment === g.index))
      .map((g) => `segment #${g.index} ${g.endWhy}`),
  ];
  if (cur && texts.length === 0) texts.push(`stopped by ${cur}${inp.stop?.why ? ` (${inp.stop.why})` : ''}`);
  return criterion(
    'clean-stop',
    'no hang, every stop answered',
    texts.length ? 'fail' : 'pass',
    texts.length ? listSome(texts, texts.length) : 'no stall was on at a stop, and no stop needed SIGINT or SIGKILL',
  );
}

// ---------- phase 1

/** gaps between consecutive records against the stall threshold; stall alerts and anomalies */
function noStall({ run, ev, inp, ended, times }: Grading): Omit<Criterion, 'phase'> {
  const thr = ev.stallThresholdS;
  const timed = times.timed;
  let worst: { gap: number; from: number; to: number } | null = null;
  for (let i = 1; i < timed.length; i++) {
    const a = timed[i - 1]!,
      b = timed[i]!;
    if (a.t === null || b.t === null) continue;
    const gap = (b.t - a.t) / 1000;
    if (!worst || gap > worst.gap) worst = { gap, from: a.step, to: b.step };
  }
  for (const hb of run.series.loss.history) {
    // older history: bucket-internal gaps are unknown; only the span per record is
    if (hb.tFrom !== null && hb.tTo !== null && hb.count > 1) {
      const gap = (hb.tTo - hb.tFrom) / 1000 / (hb.count - 1);
      if (!worst || gap > worst.gap) worst = { gap, from: hb.stepFrom, to: hb.stepTo };
    }
  }
  const stalls = ev.alerts.filter((a) => a.rule === 'heartbeat-stall' && a.severity !== 'info');
  const anomalyStall = run.control.anomaly?.type === 'heartbeat_stall';
  const r0dumps = run.ranks.find((r) => r.rank === 0)?.watchdogDumps ?? 0;
  const h = inp.history;
  const hStalls = h ? h.events.filter((e) => e.kind === 'stall') : [];
  const nStalls = h?.counts.stall ?? 0;
  const bad = stalls.length > 0 || anomalyStall || (worst !== null && worst.gap > thr) || r0dumps > 0 || nStalls > 0;
  const parts = [
    nStalls
      ? `${nStalls} stall(s) in the history (a gap > ${dur(thr, 'precise')}, one the watchdog called, or one still on when the run was stopped): ${listSome(
          hStalls.map((e) => `segment #${e.segment}: ${e.text}`),
          nStalls,
        )}`
      : null,
    h
      ? `whole history read: ${grouped(h.records)} heartbeat records in ${h.segments.length} segment(s)${h.complete ? '' : ` (incomplete: ${h.error})`}`
      : null,
    h
      ? null
      : worst
        ? `largest gap between logged records ${dur(worst.gap, 'precise')} (steps ${worst.from}–${worst.to}) vs stall threshold ${dur(thr, 'precise')}`
        : 'no record gaps measurable',
    stalls.length ? stalls.map((a) => a.title).join('; ') : null,
    anomalyStall ? '.anomaly_type = heartbeat_stall' : null,
    r0dumps ? `rank 0 wrote ${r0dumps} in-process watchdog dump(s)` : null,
  ].filter(Boolean);
  return criterion(
    'no-stall',
    'no stalls',
    bad ? 'fail' : worst !== null || (h && h.records > 0) ? 'pass' : ended ? 'unknown' : 'pending',
    parts.join('; '),
  );
}

function lossFinite({ run, inp, lossPts, ended }: Grading): Omit<Criterion, 'phase'> {
  const past5 = lossPts.filter((p) => p.step > 5);
  const hNf = inp.history ? inp.history.events.filter((e) => e.kind === 'non-finite') : [];
  const nHNf = inp.history?.counts['non-finite'] ?? 0;
  // every source, not only the one the loss series is drawn from (a NaN only training.csv holds)
  const bySrc = run.lossNonFiniteBySource ?? { csv: 0, tb: 0, heartbeat: 0 };
  const elsewhere = (
    [
      ['csv', 'training.csv'],
      ['tb', 'TensorBoard'],
      ['heartbeat', 'heartbeat'],
    ] as const
  ).filter(([k]) => bySrc[k] > 0 && k !== run.seriesSource.loss && !(k === 'heartbeat' && nHNf > 0));
  const nElsewhere = elsewhere.reduce((n, [k]) => n + bySrc[k], 0);
  const nonFinite =
    run.series.loss.nonFinite + (run.lastLossNonFinite ? 1 : 0) + (run.log.fatalNonFinite ? 1 : 0) + nHNf + nElsewhere;
  const st: Status =
    nonFinite > 0 || run.control.anomaly?.type === 'nan_loss'
      ? 'fail'
      : past5.length
        ? 'pass'
        : ended
          ? 'fail'
          : 'pending';
  return criterion(
    'loss-finite',
    'finite loss past step 5',
    st,
    st === 'fail' && nonFinite
      ? `${
          nHNf
            ? `${nHNf} non-finite loss record(s) in the history: ${listSome(
                hNf.map((e) => `segment #${e.segment}: ${e.text}`),
                nHNf,
              )}`
            : run.series.loss.nonFinite
              ? `${run.series.loss.nonFinite} non-finite loss record(s)`
              : 'non-finite loss'
        }${elsewhere.map(([k, name]) => `; ${bySrc[k]} non-finite loss value(s) in ${name}`).join('')}${run.log.fatalNonFinite ? '; "[train][FATAL] non-finite loss detected" in the log' : ''}${run.control.anomaly?.type === 'nan_loss' ? '; .anomaly_type = nan_loss' : ''}`
      : past5.length
        ? `${past5.length} logged losses past step 5, all finite (steps ${past5[0]!.step}–${past5[past5.length - 1]!.step}; ${sig(past5[0]!.value, 4)} → ${sig(past5[past5.length - 1]!.value, 4)})`
        : 'no loss logged past step 5',
  );
}

function steadySteps({ times, ended }: Grading): Omit<Criterion, 'phase'> {
  const { steady, median: stMed, p95: stP95, max: stMax } = times;
  let st: Status = 'unknown';
  let evd = 'step times not measurable (fewer than 5 timed records past step 5)';
  if (steady.length >= 5 && stMed !== null && stP95 !== null && stMax !== null) {
    const spread = stP95 / stMed;
    const ok = spread < 3 && stMax < 10 * stMed;
    st = ok ? 'pass' : 'fail';
    const worstStep = times.perStep.find((p) => p.s === stMax)?.step;
    evd = `median ${sig(stMed)} s/step, p95 ${sig(stP95)} (${sig(spread)} × median), max ${sig(stMax)} at step ${worstStep ?? '?'}; steady means p95 < 3 × and max < 10 × the median`;
  } else if (!ended) st = 'pending';
  return criterion('steady-steps', 'steady step times', st, evd);
}

function throughputInBounds({ run, ev, inp, ended }: Grading): Omit<Criterion, 'phase'> {
  const tps = allPoints(run.series.toksPerS).map((p) => p.value);
  const last100 = tps.slice(-100);
  const med = median(last100);
  const minTps = inp.minTps ?? 10;
  const tAlerts = ev.alerts.filter((a) => a.rule.startsWith('throughput') && a.severity !== 'info');
  let st: Status;
  if (tAlerts.some((a) => a.severity === 'critical')) st = 'fail';
  else if (med === null) st = ended ? 'fail' : 'pending';
  else st = med >= minTps && tAlerts.length === 0 ? 'pass' : 'fail';
  return criterion(
    'throughput',
    'throughput in bounds',
    st,
    `${med === null ? 'no throughput logged' : `median ${sig(med)} tok/s over the last ${last100.length} records (min ${minTps})`}${tAlerts.length ? `; ${tAlerts.map((a) => a.title).join('; ')}` : '; no flatline, drop or implausible value'}`,
  );
}

/**
 * The runbook's phase 1 is a dataset run of the intended model: a toy or synthetic run can pass the
 * smoke (phase 0) and nothing after it.
 */
function realRun({ run, ev, inp, t }: Grading): Omit<Criterion, 'phase'> {
  const id = run.identity;
  const named = inp.namedDataset ?? null;
  const dataset = id.dataset ?? named?.value ?? null;
  const synth =
    dataset === 'synthetic' ||
    run.data.syntheticFallback ||
    ev.alerts.some((a) => a.rule === 'synthetic-data' && a.id.startsWith('data:synthetic'));
  const pinned = pinnedAtLnVocab(run, t);
  const known = knownConfig(id.config);
  const envRead = (run.files['env.json']?.records ?? 0) > 0;
  const params = id.model ? approxParams(id.model) : null;
  const fails: string[] = [];
  if (synth)
    fails.push(
      `synthetic data (${id.dataset === 'synthetic' ? 'train.log: dataset=synthetic' : dataset === 'synthetic' ? `${named!.source}: ${named!.value}` : run.data.syntheticFallback ? 'the loader fell back to synthetic' : 'no data fetch time on the progress records'})`,
    );
  if (pinned) fails.push(pinned);
  if (known?.toy) fails.push(`toy config ${configBasename(id.config)}`);
  else if (id.trainer === 'nsa-vibe' && id.config === null && envRead)
    fails.push('no CONFIG in env.json: the toy default configs/train_showcase.yaml');
  if (params !== null && params < MIN_INTENDED_PARAMS)
    fails.push(
      `a ${fmtParams(params)}-parameter model (dim ${id.model!.dim} × ${id.model!.nLayers} layers; the runbooks' model is 125M)`,
    );
  const dataTxt = dataset
    ? `dataset ${dataset}${id.dataset ? '' : ` (${named!.source})`}`
    : run.data.withFetch > 0
      ? `${run.data.withFetch} records with a data fetch time`
      : 'dataset not named';
  const modelTxt =
    params !== null
      ? `${fmtParams(params)} parameters (dim ${id.model!.dim} × ${id.model!.nLayers})`
      : 'model dims unknown';
  const st: Status = fails.length
    ? 'fail'
    : params === null || (!dataset && run.data.withFetch === 0)
      ? 'unknown'
      : 'pass';
  return criterion(
    'real-run',
    'a dataset run of the intended model',
    st,
    fails.length
      ? fails.join('; ')
      : st === 'unknown'
        ? `cannot confirm: ${[params === null ? 'model dims unknown (no config readable)' : null, !dataset && run.data.withFetch === 0 ? 'the data source is not named' : null].filter(Boolean).join('; ')}`
        : `${dataTxt}; ${modelTxt}; CONFIG ${id.config}`,
  );
}

/**
 * Within the thresholds' lossPinnedEps (0.25) of ln(vocab) … (not 0.05: the real trainer on
 * synthetic data, recorded in test/fixtures/nsa-vibe/ddp2-crash-resume, sits at 5.58–5.80 for
 * 200 steps, 0.05–0.25 above ln(256) = 5.545)
 */
/** … for more than this share of the run's logged losses (past its first 5 %): it learned nothing */
export const PINNED_SHARE = 0.5;

/**
 * A loss pinned at ln(vocab) for most of the run: the model sees random tokens (synthetic data,
 * a broken loader), whatever the dataset is called. Over the whole series (history buckets by
 * their last value, then the recent points). Null when not pinned or the vocab is unknown.
 */
export function pinnedAtLnVocab(run: RunSnapshot, t: Thresholds): string | null {
  const eps = t.lossPinnedEps;
  const vocab = run.identity.model?.vocab ?? null;
  if (!vocab || vocab < 2) return null;
  const lnV = Math.log(vocab);
  const s = run.series.loss;
  const pts: { step: number; v: number; w: number }[] = s.history.map((b) => ({
    step: b.stepTo,
    v: b.last,
    w: b.count,
  }));
  const lastHist = pts.at(-1)?.step ?? -Infinity;
  for (const p of s.recent) if (p.step > lastHist) pts.push({ step: p.step, v: p.value, w: 1 });
  if (pts.length < 10) return null;
  const from = pts[0]!.step + (pts[pts.length - 1]!.step - pts[0]!.step) * 0.05;
  const body = pts.filter((p) => p.step >= from && Number.isFinite(p.v));
  const total = body.reduce((a, p) => a + p.w, 0);
  const near = body.filter((p) => Math.abs(p.v - lnV) <= eps).reduce((a, p) => a + p.w, 0);
  if (total === 0 || near / total <= PINNED_SHARE) return null;
  return `loss pinned at ln(${vocab}) = ${sig(lnV, 4)} (±${eps}) on ${Math.round((100 * near) / total)} % of the logged losses (steps ${body[0]!.step}–${body[body.length - 1]!.step}): the model learns nothing, as on random tokens`;
}

// ---------- phase 2

function memoryStable({ run, ev, inp, t, step, ended }: Grading): Omit<Criterion, 'phase'> {
  const sources = new Map(inp.memory ?? []);
  const hb = allPoints(run.series.memReservedMiB).map((p) => ({ step: p.step, mib: p.value }));
  if (hb.length) sources.set('0:gpu_mem_reserved', hb);
  const leaks = ev.alerts.filter((a) => a.rule === 'memory-growth');
  const found: string[] = [];
  const flat: string[] = [];
  for (const [key, s] of sources) {
    const [rank, src] = key.split(':');
    if (s.length < 2) continue;
    const l = leakOf(s, t);
    const a = s[0]!,
      b = s[s.length - 1]!;
    (l ? found : flat).push(
      `rank ${rank} ${src} ${Math.round(a.mib)} → ${Math.round(b.mib)} MiB over steps ${a.step}–${b.step}${l ? ` (+${sig(l.slope)} MiB/step)` : ''}`,
    );
  }
  const st: Status =
    leaks.length || found.length ? 'fail' : flat.length ? (step >= 1000 || ended ? 'pass' : 'pending') : 'unknown';
  return criterion(
    'memory-stable',
    'memory stable (no creep)',
    st,
    [...leaks.map((a) => a.title), ...found, ...flat].join('; ') ||
      'no memory telemetry in the heartbeats (gpu_mem_* appear only with CUDA)',
  );
}

// ---------- phase 3

function finished({ ev, ended }: Grading): Omit<Criterion, 'phase'> {
  const fin = ev.runState === 'FINISHED';
  return criterion(
    'finished',
    'ran to its configured length',
    fin ? 'pass' : ended ? 'fail' : 'pending',
    `${ev.runState}: ${ev.runStateWhy}`,
  );
}

function checkpointsSaved({ run, inp, ended }: Grading): Omit<Criterion, 'phase'> {
  const ck = run.checkpoints.filter((c) => c.complete);
  const saveEvery = run.identity.train?.saveEvery ?? null;
  const h = inp.history;
  const failedSaves = h ? h.events.filter((e) => e.kind === 'checkpoint-failed') : [];
  // the real trainer swallows a failed save (TS:1489-1499): a checkpoint the current segment
  // should have written by now and that is not there failed silently
  const cur = h?.segments[h.segments.length - 1];
  const missing = missingCheckpoints(
    saveEvery,
    run.checkpoints.map((c) => c.step),
    cur?.lastStep,
    20,
    run.log.checkpointsRemovedThrough ?? null,
  );
  const ckBad = failedSaves.length > 0 || missing.length > 0;
  return criterion(
    'checkpoints',
    'checkpoints saved',
    ckBad ? 'fail' : ck.length ? 'pass' : ended || saveEvery === 0 ? 'fail' : 'pending',
    ckBad
      ? [
          failedSaves.length
            ? `${h!.counts['checkpoint-failed']} failed save(s): ${listSome(
                failedSaves.map((e) => `segment #${e.segment} step ${e.step}: ${e.text}`),
                h!.counts['checkpoint-failed'],
              )}`
            : null,
          missing.length
            ? `save_every ${saveEvery} but no checkpoint_step{${missing.join(',')}}.pt from the current segment (steps ${cur!.firstStep}–${cur!.lastStep}): saves that failed silently, or removed`
            : null,
        ]
          .filter(Boolean)
          .join('; ')
      : ck.length
        ? `${ck.length} complete checkpoint(s), newest step ${Math.max(...ck.map((c) => c.step))}`
        : saveEvery === 0
          ? 'save_every is 0: this run never writes a checkpoint'
          : ended
            ? 'no complete checkpoint was written'
            : 'no checkpoint yet',
  );
}

function realData({ run, ev }: Grading): Omit<Criterion, 'phase'> {
  const synth = ev.alerts.filter((a) => a.rule === 'synthetic-data');
  return criterion(
    'real-data',
    'trained on real data',
    synth.length ? 'fail' : run.data.withFetch > 0 ? 'pass' : 'unknown',
    synth.length
      ? synth.map((a) => a.title).join('; ')
      : run.data.withFetch > 0
        ? `${run.data.withFetch} progress records carry dt_fetch_s`
        : 'no dt_fetch_s seen: the data source cannot be confirmed',
  );
}

function intendedModel({ run, ev }: Grading): Omit<Criterion, 'phase'> {
  const idA = ev.alerts.filter((a) => a.rule === 'run-identity' || a.id === 'throughput:impossible');
  const m = run.identity.model;
  const small = m && approxParams(m) < MIN_INTENDED_PARAMS;
  const cfg = `CONFIG ${run.identity.config ?? '(none)'}`;
  return criterion(
    'identity',
    'the intended model and config',
    idA.length || small ? 'fail' : m ? 'pass' : 'unknown',
    idA.length
      ? idA.map((a) => a.title).join('; ')
      : small
        ? `a ${fmtParams(approxParams(m!))}-parameter model (dim ${m!.dim} × ${m!.nLayers} layers) is not the intended 125M model; ${cfg}`
        : m
          ? `${cfg}; model dim ${m.dim} × ${m.nLayers} layers (${fmtParams(approxParams(m))} parameters)`
          : `${cfg}; model dims unknown (no config readable): the model cannot be confirmed`,
  );
}

// ---------- the verdicts

/** a phase's verdict over its criteria and every phase's below it */
function gradePhase(p: Phase, crit: Criterion[]): PhaseGrade {
  const cs = dedupe(crit.filter((c) => c.phase <= p));
  const fail = cs.find((c) => c.status === 'fail');
  const pend = cs.find((c) => c.status === 'pending' || c.status === 'unknown');
  const verdict: Verdict = fail ? 'NO-GO' : pend ? 'CANNOT JUDGE' : 'GO';
  const why = fail
    ? `${fail.name}: ${fail.evidence}`
    : pend
      ? `${pend.name}: ${pend.evidence}`
      : `all ${cs.length} criteria pass`;
  return { phase: p, title: PHASES[p].title, verdict, why, criteria: cs };
}

const ALL_PHASES: readonly Phase[] = [0, 1, 2, 3];

/**
 * A stall still on at a stop names its rank: the watchdog's culprit when it had one, else the odd
 * rank of the stack dumps taken after the last step advance (the same reading as the live rule).
 */
function withStallRanks(inp: GradeInput, t: Thresholds): GradeInput {
  const h = inp.history;
  if (!h || !h.events.some((e) => e.kind === 'stall' && e.atStop && (e.rank ?? null) === null)) return inp;
  const odd = oddRankFromDumps(buildCtx({ now: inp.run.takenAt, run: inp.run, procs: null, gpu: null }, t));
  if (!odd) return inp;
  const events = h.events.map((e) =>
    e.kind === 'stall' && e.atStop && (e.rank ?? null) === null && e.segment === h.segments.length - 1
      ? {
          ...e,
          rank: odd.rank,
          text: e.text.replace(
            /^(stalled at step \d+) and never recovered: /,
            `$1 (rank ${odd.rank}) and never recovered: rank ${odd.rank}'s stack dump shows ${odd.where} while the others are in ${odd.others}; `,
          ),
        }
      : e,
  );
  return { ...inp, history: { ...h, events } };
}

export function gradeRun(input: GradeInput, target?: Phase): Report {
  const inp = withStallRanks(input, input.thresholds ?? DEFAULT_THRESHOLDS);
  const { run, ev } = inp;
  const g: Grading = {
    inp,
    run,
    ev,
    t: inp.thresholds ?? DEFAULT_THRESHOLDS,
    step: run.step ?? 0,
    total: run.totalSteps,
    ended: ENDED_STATES.has(ev.runState),
    critical: ev.alerts.filter((a) => a.severity === 'critical'),
    lossPts: allPoints(run.series.loss),
    times: stepTimes(inp),
  };
  const crit: Criterion[] = [];
  for (const phase of ALL_PHASES)
    for (const judge of PHASE_CRITERIA[phase]) {
      const c = judge(g);
      if (c) crit.push({ id: c.id, phase, name: c.name, status: c.status, evidence: c.evidence });
    }
  const phases = ALL_PHASES.map((p) => gradePhase(p, crit));
  const tgt = target ?? reachablePhase(run);
  const verdict = phases[tgt]!.verdict;
  return {
    run: {
      name: run.identity.name,
      dir: run.runDir,
      host: run.host,
      step: run.step,
      total: g.total,
      state: ev.runState,
      stateWhy: ev.runStateWhy,
      trainer: run.identity.trainer,
      config: run.identity.config,
    },
    target: tgt,
    verdict,
    exitCode: verdict === 'GO' ? 0 : verdict === 'NO-GO' ? 1 : 2,
    phases,
    critical: g.critical,
    warnings: ev.alerts.filter((a) => a.severity === 'warning'),
    stepTime: { median: g.times.median, p95: g.times.p95, max: g.times.max },
    history: inp.history
      ? {
          segments: inp.history.segments,
          events: inp.history.events,
          counts: inp.history.counts,
          complete: inp.history.complete,
          records: inp.history.records,
        }
      : null,
  };
}

/** the no-critical criterion repeats per phase: keep the highest-phase copy only */
function dedupe(cs: Criterion[]): Criterion[] {
  const last = new Map<string, Criterion>();
  for (const c of cs) last.set(c.id, c);
  return cs.filter((c) => last.get(c.id) === c);
}
