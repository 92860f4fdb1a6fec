// `nsa-top report [RUN_DIR] [--phase 0|1|2|3] [--json|--md]`: grade a finished or live run against
// the runbooks' acceptance phases with evidence, using the same rules as the cockpit and the
// watchdog (src/checks). Exit 0 GO, 1 NO-GO, 2 cannot judge.
import { jsonSafe, sanitize, sanitizeText } from '../sanitize.js';
import { isAbsolute, join } from 'node:path';
import { Checker, thresholdsFromEnv, unjudgeable, type Alert } from '../checks/index.js';
import { gradeRun, PHASES, type Phase, type Report, type Status } from '../checks/report.js';
import type { MemSample } from '../checks/rules/index.js';
import type { Host } from '../remote/host.js';
import { sampleGpus } from '../remote/gpu.js';
import { openHost } from '../remote/index.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { openRunModelOf, resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import type { RunSnapshot, Series } from '../trainer/run/snapshot.js';
import { CliError, orCliError } from './errors.js';
import { grouped } from '../format.js';
import { chartText } from '../ui/chart.js';
import { Observer, whyNothingListed } from '../cockpit/observe.js';
import { readRunHistory } from '../trainer/run/history.js';
import { journalCriticals } from '../journal/index.js';

export const command = defineCommand({
  name: 'report',
  positional: RUN_DIR_ARG,
  options: {
    phase: {
      type: 'string',
      choices: ['0', '1', '2', '3'],
      help: "the phase to grade (default: the highest the run's configured length allows)",
    },
    json: { type: 'boolean', help: 'the report as JSON' },
    md: { type: 'boolean', help: 'the report as Markdown' },
    'min-tps': {
      type: 'number',
      min: 0,
      value: 'N',
      help: 'the least tokens/s that passes phase 1 (default: its bounds)',
    },
    ...HOST_OPTIONS,
  },
  about: `Grades a finished or live run against the runbooks' acceptance phases, with evidence. It reads the
WHOLE history (rank 0's heartbeat file and the log, streaming, every segment): crashes, restarts,
stalls that cleared, non-finite losses and failed checkpoint saves anywhere are named with their
steps and times. What a cockpit or watchdog recorded while it watched (.nsa-top/watchdog.jsonl, the
journal) counts too: a gap it called a stall is a stall, and a critical alert it raised fails "no
critical alert" though it has cleared since.
  phase 0  smoke: one step logged, heartbeats from every rank, a finite first loss, no crash in
           any segment (a crash that was resumed is still a crash)
  phase 1  300 steps, no stalls, finite loss past step 5, steady step times, throughput in bounds,
           a dataset run of the intended model (not a toy, not synthetic)
  phase 2  1000 steps, memory stable (no creep)
  phase 3  production: ran to its length, checkpoints saved (none failed), real data, the intended
           model/config (dims known)
A critical alert (non-finite or exploding loss, gate collapse, a stall, a dead rank, a run that
ended without finishing or halting, a wrong config) makes every phase NO-GO. Without --phase the
highest phase the run's configured length allows is graded, and every phase is shown.`,
  epilog: "Exit: 0 GO, 1 NO-GO, 2 cannot judge (yet: a live run short of the phase's steps; or no run data).",
});

interface ReportArgs {
  dir: string | undefined;
  phase: Phase | undefined;
  format: 'text' | 'json' | 'md';
  minTps: number | undefined;
}

const MEM_TAIL = 32 * 1024 * 1024;

/**
 * From the heartbeat files: per-rank memory per record (gpu_mem_reserved MiB; the reference
 * trainer's rss_mib) and rank 0's progress times (step time and gaps; CSV rows carry no time).
 */
async function readHeartbeats(
  host: Host,
  outDir: string,
  run: RunSnapshot,
): Promise<{ memory: Map<string, MemSample[]>; progressTimes: { step: number; t: number }[] }> {
  const out = new Map<string, MemSample[]>();
  let times: { step: number; t: number }[] = [];
  for (const r of run.ranks) {
    const path = join(outDir, r.file);
    let text: string;
    try {
      const st = await host.stat(path);
      if (!st) continue;
      const start = Math.max(0, st.size - MEM_TAIL);
      text = (await host.readRange(path, start)).toString('utf8');
      if (start > 0) text = text.slice(text.indexOf('\n') + 1);
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      const isProgress = r.rank === 0 && line.includes('"progress"');
      if (!isProgress && !line.includes('"boot"') && !line.includes('gpu_mem_reserved') && !line.includes('rss_mib'))
        continue;
      let j: Record<string, unknown>;
      try {
        j = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      if (j.msg === 'boot') {
        // a relaunch: only the current segment counts
        for (const [k, v] of out) if (k.startsWith(`${r.rank}:`)) v.length = 0;
        if (r.rank === 0) times = [];
        continue;
      }
      const step = j.step;
      if (typeof step !== 'number' || step <= 0) continue;
      if (isProgress && j.msg === 'progress' && typeof j.ts === 'number') {
        const last = times[times.length - 1];
        if (last && step <= last.step) times = [];
        times.push({ step, t: j.ts * 1000 });
      }
      for (const [field, src] of [
        ['gpu_mem_reserved', 'gpu_mem_reserved'],
        ['rss_mib', 'rss_mib'],
      ] as const) {
        const v = j[field];
        if (typeof v !== 'number' || !Number.isFinite(v)) continue;
        const key = `${r.rank}:${src}`;
        let arr = out.get(key);
        if (!arr) out.set(key, (arr = []));
        const last = arr[arr.length - 1];
        if (last && step < last.step) arr.length = 0;
        if (last && last.step === step) last.mib = v;
        else arr.push({ step, mib: v });
      }
    }
  }
  return { memory: out, progressTimes: times };
}

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const v = p.values;
  if (v.json && v.md) throw new CliError('report: --json and --md do not go together', 2);
  const a: ReportArgs = {
    dir: p.positional,
    phase: v.phase === undefined ? undefined : (Number(v.phase) as Phase),
    format: v.json ? 'json' : v.md ? 'md' : 'text',
    minTps: v['min-tps'],
  };
  const t = orCliError('report', () => thresholdsFromEnv(process.env));
  const host = await openHost(hostSpecOf(v));
  try {
    return await reportOn(host, a, t);
  } finally {
    await host.close().catch(() => {});
  }
}

/** backfill bytes per poll, and polls at most, for a report (64 MiB × 64: a 4 GiB CSV) */
const REPORT_BACKFILL_CHUNK = 64 * 1024 * 1024;
const REPORT_BACKFILL_POLLS = 64;

async function reportOn(host: Host, a: ReportArgs, t: ReturnType<typeof thresholdsFromEnv>): Promise<number> {
  const g = await gatherReport(host, a, t);
  if (!g) return 2;
  const { rep, charts } = g;
  if (a.format === 'json') process.stdout.write(reportJson(rep, charts));
  else process.stdout.write(sanitizeText(a.format === 'md' ? formatMd(rep, charts) : formatText(rep, charts)));
  return rep.exitCode;
}

/** report --json's text */
export function reportJson(rep: Report, charts: { loss: string | null; toksPerS: string | null }): string {
  return jsonSafe(JSON.stringify({ ...rep, charts }, null, 2)) + '\n';
}

/**
 * The report's one reading of a run (the bundle reuses it): the graded report, its charts, and the
 * observation it judged. null: the run holds nothing to judge (said on stderr).
 */
export async function gatherReport(
  host: Host,
  a: Pick<ReportArgs, 'dir' | 'phase' | 'minTps'>,
  t: ReturnType<typeof thresholdsFromEnv>,
) {
  const dir = await resolveRunDir(host, a.dir, process.cwd());
  // the run, resolved once: the observation below is handed it
  const dirs = await resolveRunDirsAt(host, dir);
  const outDir = dirs.outDir;
  if (dirs.outDirProblem) process.stderr.write(`nsa-top: warning: ${sanitize(dirs.outDirProblem)}\n`); // run.info is input
  // a report reads every series whole: a big training.csv is read tail first and its older rows in
  // pieces, and a NaN at step 100 of a 13 MB CSV must not be judged on the last rows alone
  const model = await openRunModelOf(host, dirs, { backfillChunk: REPORT_BACKFILL_CHUNK });
  await model.poll();
  // a second poll settles checkpoint completeness (size stable); the history is read below, whole
  let snap = await model.poll();
  for (let i = 0; snap.backfill.pending && i < REPORT_BACKFILL_POLLS; i++) snap = await model.poll();
  if (snap.backfill.pending)
    process.stderr.write(
      `nsa-top: warning: ${Math.round(snap.backfill.bytesLeft / 2 ** 20)} MiB of older series rows still unread: the loss and throughput verdicts see only the newer rows\n`,
    );
  if (!snap.exists) throw new CliError(`report: cannot read run dir ${outDir}: ${snap.error ?? 'missing'}`, 2);
  const bad = unjudgeable(snap, outDir);
  if (bad)
    throw new CliError(
      `report: ${(Object.keys(snap.files).length === 0 && (await whyNothingListed(host, outDir))) || bad}`,
      2,
    );
  if (snap.ranks.length === 0 && snap.series.loss.total === 0) {
    process.stderr.write(
      sanitizeText(`nsa-top report: ${outDir} holds no heartbeat and no training.csv: nothing to judge\n`),
    );
    return null;
  }
  // a live run: its GPUs too (utilisation/power hang verdicts, memory near capacity)
  const gpu = snap.ended ? null : await sampleGpus(host, { timeoutMs: 5000 }).catch(() => null);
  // the one observation the cockpit, status and the watchdog take (supervisor, requests, CPU count, grace)
  const obs = await new Observer(host, { dirs, model, gpu: { current: () => gpu }, checker: new Checker(t) }).judged();
  const ev = obs.ev;
  snap = obs.run;
  const hb = await readHeartbeats(host, outDir, snap);
  const r0 = snap.ranks.find((r) => r.rank === 0) ?? snap.ranks[0];
  // a hand-launched run's stdout, recorded at adoption, when the run dir holds no train.log
  const logFile = snap.log.file
    ? isAbsolute(snap.log.file)
      ? snap.log.file
      : join(outDir, snap.log.file)
    : (obs.stop?.adoptedLog ?? null);
  const ended = snap.metrics?.['ended'];
  // what a cockpit or watchdog raised while it watched, cleared or not: the watchdog's log and the journal
  const journaled = await journalCriticals(host, dirs).catch(() => []);
  const raised = [...(obs.stop?.criticals ?? []), ...journaled].sort((x, y) => x.ts - y.ts);
  const history = await readRunHistory(host, {
    heartbeat: r0 ? join(outDir, r0.file) : null,
    log: logFile,
    stallS: ev.stallThresholdS,
    total: snap.totalSteps,
    stop: {
      events: obs.stop?.events ?? [],
      stalls: [
        ...(obs.stop?.stalls ?? []),
        ...journaled.filter((c) => c.id === 'stall:run').map((c) => ({ ...c, step: null })),
      ],
      dumps: snap.dumps.map((d) => ({ ts: d.epoch * 1000, rank: d.rank, kind: d.kind })),
      metricsEnded: typeof ended === 'string' ? ended : null,
    },
  });
  const rep = gradeRun(
    {
      run: snap,
      ev,
      memory: hb.memory,
      progressTimes: hb.progressTimes,
      history,
      minTps: a.minTps,
      thresholds: t,
      stop: { signal: obs.stop?.stopEscalation ?? null, why: obs.stop?.escalationWhy ?? null },
      raised,
      namedDataset:
        obs.stop?.argvDataset ??
        (history.logDataset
          ? { value: history.logDataset, source: `dataset= in the recorded stdout ${logFile ?? ''}`.trim() }
          : null),
    },
    a.phase,
  );
  const charts = { loss: chart(snap.series.loss), toksPerS: chart(snap.series.toksPerS) };
  return { rep, charts, snap, obs, ev, dirs, logFile };
}

// ------------------------------------------------------------------ rendering

/** The cockpit's step-axis chart of a series (history and recent window), 64 columns of plot, unstyled. */
export function chart(s: Series, height = 8): string | null {
  return chartText(s, { plotW: 64, h: height + 1 });
}

const MARK: Record<Status, string> = { pass: '✔', fail: '✘', pending: '…', unknown: '?' };

function fmtStepOf(r: Report): string {
  return `step ${r.run.step ?? '—'}${r.run.total !== null ? ` of ${r.run.total}` : ''}`;
}

function alertLine(a: Alert): string {
  return `${a.severity.toUpperCase().padEnd(8)} ${a.title}\n${' '.repeat(9)}${a.detail}`;
}

/** the run's segments and the events of its whole history, one line each */
function historyLines(r: Report): string[] {
  const h = r.history;
  if (!h) return [];
  const out = [
    '',
    `history   ${grouped(h.records)} heartbeat records, ${h.segments.length} segment(s)${h.complete ? '' : ' (could not be read to the end)'}`,
  ];
  const iso = (ms: number | null | undefined) =>
    ms === null || ms === undefined ? '?' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  for (const g of h.segments) {
    out.push(
      `  #${g.index}${g.pid !== null ? ` pid ${g.pid}` : ''}  steps ${g.firstStep ?? '—'}–${g.lastStep ?? '—'}  ${iso(g.startTs)} → ${iso(g.endTs)}  ${g.end}${g.end !== 'current' ? `: ${g.endWhy}` : ''}`,
    );
  }
  for (const e of h.events) out.push(`  ${e.kind.toUpperCase().padEnd(17)} ${e.text}`);
  for (const [k, n] of Object.entries(h.counts)) {
    const shown = h.events.filter((e) => e.kind === k).length;
    if (n > shown) out.push(`  … ${n - shown} more ${k} event(s)`);
  }
  return out;
}

export function formatText(r: Report, charts: { loss: string | null; toksPerS: string | null }): string {
  const out: string[] = [];
  out.push(`nsa-top report  ${r.run.name}  (${r.run.dir}${r.run.host !== 'local' ? ` on ${r.run.host}` : ''})`);
  out.push(`run       ${r.run.state} — ${r.run.stateWhy}`);
  out.push(`trainer   ${r.run.trainer}, CONFIG ${r.run.config ?? '(none)'}, ${fmtStepOf(r)}`);
  out.push('');
  out.push(`VERDICT   ${r.verdict} for ${PHASES[r.target].title}`);
  out.push(`          ${r.phases[r.target]!.why}`);
  out.push('');
  for (const p of r.phases) {
    out.push(`${p.phase === r.target ? '▶' : ' '} ${p.title}: ${p.verdict}`);
    for (const c of p.criteria.filter((c) => c.phase === p.phase || c.id === 'no-critical')) {
      out.push(`    ${MARK[c.status]} ${c.name.padEnd(30)} ${c.evidence}`);
    }
  }
  out.push(...historyLines(r));
  if (r.critical.length || r.warnings.length) {
    out.push('');
    out.push('alerts');
    for (const a of [...r.critical, ...r.warnings]) out.push('  ' + alertLine(a).replace(/\n/g, '\n  '));
  }
  if (charts.loss) out.push('', 'loss', charts.loss);
  if (charts.toksPerS) out.push('', 'tok/s', charts.toksPerS);
  out.push('', `exit ${r.exitCode} (${r.verdict})`);
  return out.join('\n') + '\n';
}

export function formatMd(r: Report, charts: { loss: string | null; toksPerS: string | null }): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const out: string[] = [];
  out.push(`# Acceptance report: ${r.run.name}`, '');
  out.push(`- **Verdict: ${r.verdict}** for ${PHASES[r.target].title} — ${esc(r.phases[r.target]!.why)}`);
  out.push(`- Run: ${r.run.state} — ${esc(r.run.stateWhy)}`);
  out.push(`- Trainer ${r.run.trainer}, CONFIG \`${r.run.config ?? '(none)'}\`, ${fmtStepOf(r)}`);
  out.push(`- Dir \`${r.run.dir}\`${r.run.host !== 'local' ? ` on ${r.run.host}` : ''}`, '');
  for (const p of r.phases) {
    out.push(`## ${p.title}: ${p.verdict}${p.phase === r.target ? ' (graded)' : ''}`, '');
    out.push('| | criterion | evidence |', '|---|---|---|');
    for (const c of p.criteria.filter((c) => c.phase === p.phase || c.id === 'no-critical'))
      out.push(`| ${MARK[c.status]} | ${esc(c.name)} | ${esc(c.evidence)} |`);
    out.push('');
  }
  const hl = historyLines(r);
  if (hl.length) out.push('## History', '', '```', ...hl.slice(1), '```', '');
  if (r.critical.length || r.warnings.length) {
    out.push('## Alerts', '');
    for (const a of [...r.critical, ...r.warnings]) out.push(`- **${a.severity}** ${esc(a.title)} — ${esc(a.detail)}`);
    out.push('');
  }
  if (charts.loss) out.push('## Loss', '', '```', charts.loss, '```', '');
  if (charts.toksPerS) out.push('## Throughput (tok/s)', '', '```', charts.toksPerS, '```', '');
  return out.join('\n');
}
