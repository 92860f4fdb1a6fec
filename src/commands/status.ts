// `nsa-top status [RUN_DIR] [--json]`: read a run dir once and print its snapshot — a human
// table, or the RunSnapshot as JSON (a stable interface for scripts; see docs/status-json.md).
import {
  alertFields,
  Checker,
  healthExit,
  numbersLine,
  stragglerFields,
  thresholdsFromEnv,
  unjudgeable,
  type Alert,
  type Evaluation,
} from '../checks/index.js';
import { ago, bytes, clock, dur, num, pct as percent } from '../format.js';
import { missingCheckpoints } from '../checks/saves.js';
import { jsonSafe, jsonSafeBytes, sanitize, sanitizeText } from '../sanitize.js';
import { join, resolve } from 'node:path';
import { withLook, type Host } from '../remote/host.js';
import { LocalHost } from '../remote/local/host.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { readActions } from '../trainer/control/audit.js';
import type { ActionRecord } from '../trainer/control/types.js';
import { supervisorInCharge } from '../checks/control.js';
import {
  byOperator,
  claimedRank,
  dumpClaims,
  dumpRankLabel,
  mainThreadTop,
  operatorDumpSets,
} from '../checks/dumplabels.js';
import { openRunModelOf, resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import type { CheckpointInfo, RunSnapshot } from '../trainer/run/snapshot.js';
import { CliError, orCliError } from './errors.js';
import { Observer, whyNothingListed, type Observation } from '../cockpit/observe.js';
import { readAdoption } from '../trainer/launch/adopt.js';
import { pickResumeCheckpoint } from '../trainer/run/checkpoints.js';
import { readLaunchPlan } from '../trainer/run/launchstate.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { formatNodes, NODE_OPTIONS, nodeGpus, nodeListOf, nodesJson, openNodes } from './nodes.js';
import { formatNodeSupervisors, lastExitOf, nodeSupervisorsJson } from './status-nodes.js';
import { lookAheadOf } from '../trainer/run/lookahead.js';
import { writeStdout } from '../stdout.js';

/** status --json `resumeCheckpoint`: the file a relaunch or restart resumes from, and why. */
export interface ResumeCheckpointField {
  path: string;
  step: number;
  /** the run segment that wrote it (numbered like `segments[].index`; -1 = before the first recorded boot; null = no heartbeat history) */
  segment: number | null;
  why: string;
  warnings: string[];
  skipped: string[];
}

/** status answers from the tail: a heartbeat history above this is scanned for segments only with --full */
const SEGMENT_SCAN_MAX = 64 * 2 ** 20;

export async function resumeCheckpointOf(
  host: Host,
  dirs: RunDirs,
  full: boolean,
  settled: CheckpointInfo[] | Promise<CheckpointInfo[]> = [],
): Promise<ResumeCheckpointField | null> {
  const { runDir, outDir } = dirs;
  const plan = await readLaunchPlan(host, runDir);
  const adopted = plan ? null : await readAdoption(host, outDir);
  // oldest first: the hand-launched run's own log, then the supervisor's
  const logs = [
    ...(plan?.adopted?.stdout ? [plan.adopted.stdout] : []),
    ...(adopted?.stdout ? [adopted.stdout] : []),
    join(runDir, 'train.log'),
  ];
  const pick = await pickResumeCheckpoint(host, outDir, {
    logFiles: logs,
    stableWaitMs: 700,
    settled,
    ...(full ? {} : { segmentScanMaxBytes: SEGMENT_SCAN_MAX }),
  });
  if (!pick.found) return null;
  const f = pick.found;
  return { path: f.path, step: f.step, segment: f.segment, why: f.why, warnings: pick.warnings, skipped: pick.skipped };
}

/** a promise that never rejects (its error kept for unsettle), so it may wait unawaited */
function settle<T>(p: Promise<T>): Promise<{ ok: true; v: T } | { ok: false; e: unknown }> {
  return p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
}
function unsettle<T>(r: { ok: true; v: T } | { ok: false; e: unknown }): T {
  if (r.ok) return r.v;
  throw r.e;
}

function formatResume(r: ResumeCheckpointField | null, adoptNote: string | null): string {
  const out: string[] = [];
  if (r) {
    out.push(`${'resume'.padEnd(10)}${r.path}  (step ${r.step}): ${r.why}`);
    for (const w of r.warnings) out.push(`${''.padEnd(10)}warning: ${w}`);
  }
  if (adoptNote) out.push(`${'adopted'.padEnd(10)}${adoptNote}`);
  return out.length ? `${out.join('\n')}\n` : '';
}

export const command = defineCommand({
  name: 'status',
  positional: RUN_DIR_ARG,
  options: {
    json: { type: 'boolean', help: 'the RunSnapshot plus `state` and `alerts` as JSON (fields: docs/status-json.md)' },
    full: { type: 'boolean', help: 'read the whole history of huge files first (series, segments)' },
    at: {
      type: 'string',
      value: 'TIME',
      needs: 'a time (ISO 8601 or HH:MM[:SS] local) or step=N',
      help: `what nsa-top said at TIME (ISO 8601, HH:MM[:SS] local, or step=N), from the run's
journal (docs/journal.md); exit 2 when there is none or TIME is outside it`,
    },
    ...HOST_OPTIONS,
    ...NODE_OPTIONS,
  },
  about: `Reads the run directory once and prints what the cockpit would show: the run's state and why, its
alerts, identity, step/total, loss, tok/s, ETA, per-rank heartbeat ages, gates, data, halt/anomaly,
checkpoints, stack dumps and parse errors. The state and alerts are the same evaluation the
cockpit, \`watchdog --once\` and \`report\` use. --json prints the RunSnapshot plus \`state\` and
\`alerts\` (fields: docs/status-json.md).
It answers from the end of huge files; --full reads their whole history first (series, segments).
A multi-node run: --node for each node (or --nodes H1,H2; SLURM_JOB_NODELIST when set): the run dir
is read on the first node, the ranks are found on every node (one SSH connection each) and shown with
their node; a node that does not answer makes the state STALE ("node H unreachable").`,
  epilog: `Exit: 0 healthy (running, finished, halted); 1 an anomaly (a critical alert), stalled or dead;
2 bad input: the dir is missing, unreadable or holds no run.`,
});

/** --full: how long status keeps reading the older history of huge files before printing */
const FULL_BACKFILL_BUDGET_MS = 120_000;

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { json, full } = a.values;
  const spec = hostSpecOf(a.values);
  const t = orCliError('status', () => thresholdsFromEnv(process.env));
  const nodeList = await nodeListOf(a.values);
  if (nodeList.length > 0) {
    if (spec.host) throw new CliError("status: --host and --node: name the run dir's machine as the first --node", 2);
    const nodes = await openNodes(nodeList, spec);
    // every node's GPUs, one sample each (nvidia-smi on each node's connection, at once)
    const gpus = nodeGpus(nodes, 1000, 4000);
    try {
      await gpus.start();
      return await statusOn(nodes.primary.host!, a.positional, json, full, new Checker(t), nodes);
    } finally {
      gpus.stop();
      await nodes.set.close();
    }
  }
  // a local status never loads the SSH stack (ssh2 alone costs about a bare node start)
  const host =
    spec.host && spec.host !== 'local' ? await (await import('../remote/index.js')).openHost(spec) : new LocalHost();
  try {
    // the journal's reader loads only for --at (a plain status never reads it)
    if (a.values.at !== undefined)
      return await (await import('./status-at.js')).statusAt(host, a.positional, a.values.at, json);
    return await statusOn(host, a.positional, json, full, new Checker(t));
  } finally {
    await host.close().catch(() => {});
  }
}

/** the alerts as status --json gives them (docs/status-json.md): `level` is the severity */
export function jsonAlerts(alerts: readonly Alert[]) {
  return alerts.map(alertFields).map(({ id, severity: level, ...rest }) => ({ id, level, ...rest }));
}

async function statusOn(
  host: Host,
  dir: string | undefined,
  json: boolean,
  full: boolean,
  checker: Checker,
  nodes: NodeProcesses | null = null,
): Promise<number> {
  const { snap, ev, obs, actions, resumeCheckpoint } = await gatherStatus(host, dir, full, checker, nodes);
  // a multi-node launch's supervisors, each read on its own node by the observation (null: not one)
  const sups = obs.nodeSupervisors;
  // JSON stays exact (stringify escapes controls); human text is sanitised: the run dir is input
  writeStdout(
    json
      ? jsonSafeBytes(
          JSON.stringify(
            {
              ...statusJson(snap, ev, obs, actions),
              resumeCheckpoint,
              ...(nodes ? nodesJson(nodes, obs) : {}),
              ...(sups ? { supervisors: nodeSupervisorsJson(sups) } : {}),
            },
            null,
            2,
          ) + '\n',
        )
      : sanitizeText(
          formatStatus(snap, ev, actions) +
            (nodes ? formatNodes(nodes, obs) : '') +
            (sups ? formatNodeSupervisors(sups) : '') +
            formatControl(obs, snap.hostNowMs || snap.takenAt) +
            formatResume(resumeCheckpoint, obs.adoptionNote),
        ),
  );
  return healthExit(ev);
}

/** status's one reading of a run (the bundle reuses it); status --json is `statusJsonText` of it */
export async function gatherStatus(
  host: Host,
  dir: string | undefined,
  full: boolean,
  checker: Checker,
  nodes: NodeProcesses | null = null,
) {
  // one look (Host.look): over SSH the run's records are asked together as it starts, each once
  const guess = dir ? resolve(process.cwd(), dir) : null;
  const ahead = guess ? lookAheadOf({ runDir: guess, outDir: guess }, 'first') : undefined;
  return withLook(host, ahead, (look) => gatherIn(look, dir, guess, full, checker, nodes));
}

async function gatherIn(
  look: Host,
  dir: string | undefined,
  guess: string | null,
  full: boolean,
  checker: Checker,
  nodes: NodeProcesses | null,
) {
  let host = look;
  const runDir = await resolveRunDir(host, dir, process.cwd());
  // a supervised real-trainer run: launcher dir (run.info, train.log) + the config's out_dir, resolved once
  const dirs = await resolveRunDirsAt(host, runDir);
  // elsewhere than guessed (a launcher dir's out_dir, the newest run under artifacts/): ask for its records too
  if (dirs.runDir !== guess || dirs.outDir !== guess) host = host.look?.(lookAheadOf(dirs, 'first')) ?? host;
  const outDir = dirs.outDir;
  if (dirs.outDirProblem) process.stderr.write(`nsa-top: warning: ${sanitize(dirs.outDirProblem)}\n`); // run.info is input
  // status answers from the end of large files (and says so): the observation's own poll below
  // must not read 4 MiB of their older history that the answer then leaves out (--full reads it all)
  const model = await openRunModelOf(host, dirs, full ? {} : { backfillChunk: 0 });
  // the resume pick (read-only, and with a settle wait of its own for a checkpoint written in the
  // last 5 s) runs beside the look below instead of after it: the two 700 ms waits overlap, and
  // status on a run that checkpoints often answers in one wait, not two. Before it waits, it takes
  // the checkpoints the first poll's model saw complete (the saving rank stepped past one): no wait
  // for those — on the real trainer saving every 20 steps, 10 of 20 statuses in a row waited
  // (0.85-0.92 s against ~0.2 s)
  let seen: (v: CheckpointInfo[]) => void = () => {};
  const resumeEarly = settle(resumeCheckpointOf(host, dirs, full, new Promise((r) => (seen = r))));
  let snap: RunSnapshot;
  try {
    snap = await model.poll();
  } catch (e) {
    seen([]); // nothing seen: the pick waits as it would have
    throw e;
  }
  seen(snap.checkpoints.filter((c) => c.complete));
  if (full) {
    const started = Date.now();
    while (snap.backfill.pending && Date.now() - started < FULL_BACKFILL_BUDGET_MS) snap = await model.poll();
  }
  // a checkpoint counts as complete once its size holds across two polls: look once more when
  // a recent one has only been seen once (only within 30 s of a save)
  const settling = snap.checkpoints.some((c) => !c.complete);
  if (settling) await new Promise((r) => setTimeout(r, 700));
  const bad = unjudgeable(snap, outDir);
  if (bad)
    throw new CliError((Object.keys(snap.files).length === 0 && (await whyNothingListed(host, outDir))) || bad, 2);
  const unreadable = Object.entries(snap.files)
    .filter(([, f]) => f.lastError !== null && /^(EACCES|EPERM)\b/.test(f.lastError))
    .map(([n]) => n);
  if (unreadable.length > 0)
    process.stderr.write(
      `nsa-top: warning: cannot read ${unreadable.join(', ')} in ${outDir} (permission denied): their data is missing below\n`,
    );
  // the one observation every surface takes (the cockpit's collector, watchdog, report): its poll
  // is the second look that settles checkpoint completeness, and with none to settle it judges the
  // poll above; a live run nsa-top did not start gets its launch recorded, so that it can be
  // relaunched later
  const obs = await new Observer(host, { dirs, model, adoptAs: 'status', checker, nodes, gpu: nodes?.gpus }).judged({
    waitHostStats: true,
    polled: settling ? undefined : snap,
  });
  const ev = obs.ev;
  snap = obs.run;
  // (looked at again in the rare cases where the look changed what it reads: the observation
  // followed the out_dir's pointer elsewhere, or recorded a hand-launched run's adoption just now,
  // whose stdout log the pick reads)
  const resumeCheckpoint =
    obs.dirs.runDir === dirs.runDir && obs.dirs.outDir === dirs.outDir && obs.adoptionNote === null
      ? unsettle(await resumeEarly)
      : await resumeCheckpointOf(host, obs.dirs, full);
  // which dump file is which rank's: the dump action's records (the real trainer's names say only the second)
  const actions = await readActions(host, obs.dirs, 200).catch(() => [] as ActionRecord[]);
  return { snap, ev, obs, actions, resumeCheckpoint };
}

/** status --json's text of a `gatherStatus` reading */
export function statusJsonText(g: Awaited<ReturnType<typeof gatherStatus>>): string {
  return (
    jsonSafe(
      JSON.stringify({ ...statusJson(g.snap, g.ev, g.obs, g.actions), resumeCheckpoint: g.resumeCheckpoint }, null, 2),
    ) + '\n'
  );
}

export function statusJson(
  snap: RunSnapshot,
  ev: Evaluation,
  obs?: Observation,
  actions: readonly ActionRecord[] = [],
) {
  const claims = dumpClaims(actions);
  return {
    ...snap,
    // each dump labelled by rank: the one it names, else the one nsa-top's dump action claimed it for
    dumps: snap.dumps.map((d) => ({ ...d, claimedRank: claimedRank(d, claims), byOperator: byOperator(d, claims) })),
    dumpSets: operatorDumpSets(actions),
    state: { runState: ev.runState, why: ev.runStateWhy },
    alerts: jsonAlerts(ev.alerts),
    straggler: stragglerFields(ev.straggler),
    numbers: numbersField(ev),
    ...(obs
      ? {
          supervisor: supervisorField(obs),
          requests: requestsField(obs),
          haltGraceS: obs.haltGraceS,
          hostResources: obs.hostStats,
        }
      : {}),
  };
}

/** status --json `numbers`: MFU with its arithmetic and peak, restarts, the newest checkpoint's age */
export function numbersField(ev: Evaluation) {
  const n = ev.numbers;
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    mfu: n.mfu
      ? {
          value: n.mfu.value === null ? null : Math.round(n.mfu.value * 1e6) / 1e6,
          toksPerS: r3(n.mfu.toksPerS),
          flopsPerToken: Math.round(n.mfu.flopsPerToken),
          achievedFlops: Math.round(n.mfu.achievedFlops),
          peak: n.mfu.peak,
          unknownPeak: n.mfu.unknownPeak,
          arithmetic: n.mfu.arithmetic,
        }
      : null,
    restarts: n.restarts,
    lastCheckpoint: n.lastCheckpoint ? { ...n.lastCheckpoint, ageS: r3(n.lastCheckpoint.ageS) } : null,
  };
}

/** the human status's straggler and numbers lines */
function stragglerText(ev: Evaluation): string[] {
  const out: string[] = [];
  const v = ev.straggler;
  const pace = v.ranks.map(
    (r) => `${r.rank}: ${r.score === null ? '—' : r.score.toFixed(2)} ${r.activity}${r.wchan ? ` (${r.wchan})` : ''}`,
  );
  if (v.ranks.length) out.push(`${'pace'.padEnd(10)}${pace.join(' · ')} — ${v.basis}`);
  if (v.straggler) out.push(`${'straggler'.padEnd(10)}rank ${v.straggler.rank}: ${v.straggler.why}`);
  const n = ev.numbers;
  if (n.mfu) out.push(`${'MFU'.padEnd(10)}${n.mfu.arithmetic}`);
  const line = numbersLine({ ...n, mfu: null });
  if (line.length) out.push(`${'numbers'.padEnd(10)}${line.join(' · ')}`);
  return out;
}

/** status --json `supervisor`: the supervisor as judged this round (null: not a supervised run) */
export function supervisorField(obs: Observation) {
  const s = obs.supervisor;
  if (!s) return null;
  return {
    state: s.state,
    alive: s.supervisorGone ? false : s.supervisor && supervisorInCharge(s.state) ? true : null,
    pid: s.supervisor?.pid ?? null,
    restarts: s.restarts,
    maxRestarts: s.maxRestarts,
    lastExit: lastExitOf(s),
    note: s.note ?? null,
    updatedAt: s.updatedAt,
  };
}

/** status --json `requests`: the durable control requests still in force, each with its carrier */
export function requestsField(obs: Observation) {
  return obs.requests
    .filter((r) => r.state === 'pending' || r.state === 'halt-written')
    .map((r) => ({
      id: r.id,
      kind: r.kind,
      state: r.state,
      requestedBy: r.who.user,
      ts: r.ts,
      note: r.note,
      graceS: r.graceS,
      carrier: r.owner
        ? {
            kind: r.owner.kind,
            pid: r.owner.pid,
            alive: obs.carrier?.request.id === r.id ? (obs.carrier.alive ?? null) : null,
          }
        : null,
    }));
}

/** the supervisor and the requests in force, as status prints them */
export function formatControl(obs: Observation, now: number): string {
  const out: string[] = [];
  const L = (label: string, text: string) => out.push(`${label.padEnd(9)} ${text}`);
  const sup = supervisorField(obs);
  if (sup) {
    const life =
      sup.alive === false
        ? `DEAD (pid ${sup.pid} gone): crashes will not be restarted`
        : sup.alive
          ? `alive (pid ${sup.pid}), ${sup.state}`
          : sup.state;
    const g = sup.lastExit?.firstGone;
    const first = g
      ? ` (rank ${g.rank}${g.node !== null ? ` on node ${g.node}` : ''}, pid ${g.pid}, went first${g.how ? `: ${g.how}` : ''})`
      : '';
    const last = sup.lastExit
      ? `; last exit ${sup.lastExit.cause ?? sup.lastExit.signal ?? `exit ${sup.lastExit.code}`}${first} ${ago(sup.lastExit.at, now, 'precise')}`
      : '';
    L('supervisor', `${life} · ${sup.restarts} of ${sup.maxRestarts} restarts used${last}`);
  }
  for (const r of requestsField(obs)) {
    const c = r.carrier
      ? `carried by ${r.carrier.kind} pid ${r.carrier.pid}${r.carrier.alive === false ? ' — GONE: nothing will write .HALT' : r.carrier.alive ? ' (alive)' : ''}`
      : 'no carrier yet';
    L('request', `${r.kind} by ${r.requestedBy} (${r.state}): ${r.note}; ${c}`);
  }
  return out.length ? `${out.join('\n')}\n` : '';
}

// ------------------------------------------------------------------ human table

function table(rows: string[][], indent: string): string[] {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows.map(
    (r) =>
      indent +
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
  );
}

export function formatStatus(s: RunSnapshot, ev?: Evaluation, actions: readonly ActionRecord[] = []): string {
  const out: string[] = [];
  const L = (label: string, text: string) => out.push(`${label.padEnd(10)}${text}`);
  const now = s.hostNowMs || s.takenAt;
  const id = s.identity;

  L('run', `${id.name}  ${s.runDir}${s.host !== 'local' ? `  on ${s.host}` : ''}`);
  if (ev) {
    L('STATE', `${ev.runState} — ${ev.runStateWhy}`);
    for (const a of ev.alerts.filter((x) => x.severity !== 'info'))
      L(a.severity === 'critical' ? 'CRITICAL' : 'warning', a.title);
  }
  const who = [
    id.trainer,
    id.backend ? `${id.backend}${id.worldSize && id.worldSize > 1 ? ` × ${id.worldSize}` : ''}` : null,
    `config ${id.config ?? '(none in env.json: toy default?)'}`,
    id.dataset ? `dataset ${id.dataset}${id.tokenizer ? `/${id.tokenizer}` : ''}` : null,
    id.device ? `${id.device}${id.dtype ? ` ${id.dtype}` : ''}` : null,
    id.gpuName,
  ].filter(Boolean);
  L('identity', who.join(' · '));
  if (id.configFile && id.configFile !== id.config) L('config', `read from ${id.configFile}`);
  if (id.model) {
    const m = id.model;
    const n = id.nsa;
    L(
      'model',
      `dim ${m.dim} · ${m.nLayers} layers · ${m.nHeads} heads/${m.nKvGroups} kv · d_k ${m.dK} · vocab ${m.vocab}${n ? ` · NSA l=${n.l} d=${n.d} l_sel=${n.lSel} n_sel=${n.nSel} w=${n.w}` : ''}`,
    );
  }
  if (id.train) {
    const t = id.train;
    L(
      'train',
      `S=${t.seqLen ?? '?'} B=${t.batchSize ?? '?'} accum=${t.accum ?? '?'} lr=${num(t.lr, 4, '—')} warmup=${t.warmupSteps ?? '?'} log/eval/save every ${t.logEvery ?? '?'}/${t.evalEvery ?? '?'}/${t.saveEvery ?? '?'}`,
    );
  }
  if (s.log.effectiveConfig) L('effective', s.log.effectiveConfig);
  const flags = Object.entries(id.flags).filter(([k]) => k !== 'NSA_VIBE_SRC');
  if (flags.length) L('flags', flags.map(([k, v]) => `${k}=${v}`).join(' '));

  // progress
  const pct = s.step !== null && s.totalSteps ? ` (${percent((100 * s.step) / s.totalSteps, 1)})` : '';
  const loss = s.lastLossNonFinite ? 'NaN/Inf' : num(s.loss, 4, '—');
  L(
    'step',
    `${s.step ?? '—'} / ${s.totalSteps ?? '?'}${pct}   loss ${loss}   lr ${s.lr === null ? '—' : s.lr.toExponential(2)}   tok/s ${s.toksPerS === null ? '—' : Math.round(s.toksPerS)}   ${
      s.stepTimeS === null ? '' : `${num(s.stepTimeS, 2, '—')} s/step   `
    }ETA ${s.ended ? 'ended' : s.etaS === null ? '—' : dur(s.etaS, 'precise')}`,
  );
  if (s.stepAdvancedTs !== null) L('advanced', ago(s.stepAdvancedTs, now, 'precise'));
  if (s.lastVal)
    L('val', `step ${s.lastVal.step}  val_loss ${num(s.lastVal.valLoss, 4, '—')}  ppl ${num(s.lastVal.ppl, 2, '—')}`);
  if (s.segments.length > 1) {
    L(
      'segments',
      s.segments
        .map((g) => `#${g.index} ${g.cause} steps ${g.firstStep}–${g.lastStep}${g.pid ? ` pid ${g.pid}` : ''}`)
        .join(' | '),
    );
  }
  const src = s.seriesSource;
  if (src.loss && src.loss !== 'csv')
    L('series', `loss/tok/s from ${src.loss}${src.lr ? `, lr from ${src.lr}` : ''} (no training.csv)`);

  // state
  const st: string[] = [];
  if (s.control.halt.present) {
    const c = s.control.halt.content?.trim();
    st.push(
      `.HALT present${c ? ` ("${c}")` : ' (empty)'}${s.control.halt.mtimeMs ? `, ${dur((now - s.control.halt.mtimeMs) / 1000, 'precise')} old` : ''}`,
    );
  }
  if (s.control.anomaly) st.push(`.anomaly_type ${s.control.anomaly.type}`);
  if (s.log.haltSeen) st.push('log: HALT file detected');
  if (s.log.fatalNonFinite) st.push('log: FATAL non-finite loss');
  if (s.log.oom) st.push('log: CUDA out of memory');
  if (s.log.resumedFrom) st.push(`resumed from ${s.log.resumedFrom}`);
  if (s.ended) st.push('metrics.json written (run ended)');
  if (st.length) L('control', st.join(' · '));

  // ranks
  if (s.ranks.length) {
    out.push('ranks');
    const rows = [['rank', 'pid', 'last beat', 'msg', 'step', 'step advanced', 'records', 'wd dumps', 'mem MiB']];
    for (const r of s.ranks) {
      rows.push([
        String(r.rank),
        r.pid === null ? '—' : String(r.pid),
        r.lastTs === null ? '—' : ago(r.lastTs, now, 'precise'),
        r.lastMsg ?? '—',
        r.lastStep === null ? '—' : String(r.lastStep),
        r.stepAdvancedTs === null ? '—' : ago(r.stepAdvancedTs, now, 'precise'),
        String(r.records),
        String(r.watchdogDumps),
        r.memReservedMiB === null ? '—' : `${r.memAllocMiB ?? '?'}/${r.memReservedMiB}`,
      ]);
    }
    out.push(...table(rows, '  '));
  } else L('ranks', 'no heartbeat files');
  if (ev) out.push(...stragglerText(ev));

  // gates
  const g = s.gates;
  if (g) {
    const sh = g.branchShares
      ? `shares cmp ${g.branchShares[0].toFixed(3)} sel ${g.branchShares[1].toFixed(3)} win ${g.branchShares[2].toFixed(3)}`
      : 'no shares';
    L(
      'gates',
      `step ${g.step}: entropy ${num(g.entropyMean, 4, '—')} (min ${num(g.entropyMin, 4, '—')}) · max ${num(g.maxGate, 3, '—')} · collapse ${num(g.collapseFrac, 3, '—')} · ${sh}`,
    );
  } else L('gates', 'no gate stats (aux stats off, or no progress record yet)');
  if (s.sel)
    L(
      'selection',
      `k_mean ${num(s.sel.kMean, 1, '—')} · k_max ${s.sel.kMax ?? '—'} · rows ${s.sel.rows ?? '—'} · at max ${num(s.sel.pctAtMax, 3, '—')}`,
    );
  if (s.fallbacks) L('fallbacks', `total ${s.fallbacks.total_fallbacks ?? '—'}`);

  // data
  const d = s.data;
  const dataBits: string[] = [];
  if (d.dtFetchAbsent) dataBits.push('no dt_fetch_s on recent progress records (synthetic data)');
  else if (d.withFetch)
    dataBits.push(
      `dt_fetch ${d.lastDtFetchS === null ? '—' : dur(d.lastDtFetchS, 'precise')} · p50 ${num(d.fetchP50Ms, 0, '—')} ms · p95 ${num(d.fetchP95Ms, 0, '—')} ms`,
    );
  if (d.syntheticFallback) dataBits.push('loader failed → synthetic fallback');
  L('data', dataBits.length ? dataBits.join(' · ') : '—');
  if (s.optStateMb !== null) L('opt state', `${s.optStateMb} MB`);

  // checkpoints
  if (s.checkpoints.length) {
    L(
      'ckpts',
      s.checkpoints.map((c) => `step ${c.step} (${bytes(c.size)}${c.complete ? '' : ', being written?'})`).join(' · '),
    );
  } else L('ckpts', `none${id.train?.saveEvery === 0 ? ' (save_every 0)' : ''}`);
  // failed saves: the log says so (reference trainer), or save_every says a file should be there
  const failed = s.log.checkpointFailed;
  if (failed.length)
    L(
      '  FAILED',
      `${failed.length} checkpoint save(s) failed: ${failed.map((f) => `step ${f.step}`).join(', ')} — ${failed[failed.length - 1]!.text}`,
    );
  const seg = s.segments[s.segments.length - 1];
  const missing = missingCheckpoints(
    id.train?.saveEvery,
    s.checkpoints.map((c) => c.step),
    s.step ?? seg?.lastStep,
    20,
    s.log.checkpointsRemovedThrough ?? null,
  ).filter((k) => !failed.some((f) => f.step === k));
  if (missing.length)
    L(
      '  MISSING',
      `save_every ${id.train!.saveEvery} but no checkpoint_step{${missing.join(',')}}.pt: saves that failed silently, or were removed`,
    );

  // dumps: the operator's newest set by rank, then the newest files, each by rank, the trainer's own marked
  if (s.dumpsTotal) {
    const claims = dumpClaims(actions);
    out.push(
      `dumps     ${s.dumpsTotal} stack dump${s.dumpsTotal > 1 ? 's' : ''}${s.dumpsTotal > s.dumps.length ? ` (newest ${s.dumps.length} parsed)` : ''}`,
    );
    const mine = operatorDumpSets(actions, 1)[0];
    if (mine) {
      out.push(
        `  your newest set ${clock(mine.at)} by ${mine.by}: ${mine.ranks.filter((r) => r.status === 'dumped' && r.file).length}/${mine.ranks.length} ranks dumped`,
      );
      for (const r of mine.ranks)
        out.push(
          `    rank ${r.rank}: ${r.file ?? (r.status === 'refused' ? `refused — ${r.why}` : (r.why ?? r.status))}`,
        );
    }
    for (const dump of s.dumps.slice(-5)) {
      const top = mainThreadTop(dump);
      const who2 = [
        dumpRankLabel(dump, claims),
        dump.pid !== null && dump.rank !== null ? `pid ${dump.pid}` : null,
        dump.step !== null ? `step ${dump.step}` : null,
        dump.phase ? `phase ${dump.phase}` : null,
      ]
        .filter(Boolean)
        .join(' ');
      const kind =
        dump.kind === 'watchdog'
          ? "trainer's own watchdog"
          : `signal${dump.signal !== null ? ` ${dump.signal}` : ''}${byOperator(dump, claims) ? ' (nsa-top dump)' : ''}`;
      out.push(
        `  ${who2}  ${dump.name}  ${kind} · ${dump.threads.length} threads${
          top
            ? ` · main at ${top.file.split('/').pop()}:${top.line ?? '?'} ${top.func}${top.code ? ` — ${top.code}` : ''}`
            : ''
        }`,
      );
    }
  } else L('dumps', 'none');

  if (s.tb.present || s.tb.files)
    L('tb', `${s.tb.files} event file(s), ${s.tb.scalars} scalars, last step ${s.tb.lastStep ?? '—'}`);

  // parse errors
  const bad = Object.entries(s.files).filter(([, h]) => h.parseErrors > 0 || h.lastError);
  if (bad.length) {
    out.push('parse');
    for (const [name, h] of bad)
      out.push(
        `  ${name}: ${h.parseErrors} bad of ${h.records + h.parseErrors}${h.lastError ? ` — last: ${h.lastError}` : ''}`,
      );
  } else L('parse', `${Object.keys(s.files).length} files read, no errors`);
  if (s.backfill.pending)
    L(
      'note',
      `answered from the end of the files: ${bytes(s.backfill.bytesLeft)} of older history not read (--full reads it)`,
    );
  return out.join('\n') + '\n';
}
