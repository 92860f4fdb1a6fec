// Control actions on a run (dump, halt, escalate, remove a stale .HALT): every one goes through
// this module, is aimed only at processes verified by pid + start time, and runs inside audited()
// (src/trainer/control/audit.ts), which leaves one line in <out_dir>/.nsa-top/actions.jsonl saying
// who did what, when, and how it went — so two people sharing a tmux pane both see what happened —
// and refuses read-only mode (an option or NSA_TOP_READ_ONLY=1) whatever the UI does.
import { clock, dur } from '../../format.js';
import { childProcess } from '../../builtins.js';
import { readlinkSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Host, SignalName } from '../../remote/host.js';
import { readProc, verifyProcess } from '../../remote/procs.js';
import { findRunProcesses, proveRunProcess, runRecordHints } from '../run/processes.js';
import { isLauncher } from '../run/ranks.js';
import type { ProcInfo, RankProc, UnprovenProc } from '../../remote/types.js';
import { checkpointTailProblem, listCheckpoints } from '../run/checkpoints.js';
import type { ActionKind, ActionRecord, Actor } from './types.js';
import { createOwn, OwnWriteError, readOnlyMode as ownReadOnly, removeOwn } from './ownfiles.js';
import { audited, readActions, type AuditContext, type Outcome } from './audit.js';
import { runDirsOf, type RunDirs, type RunRef } from '../run/rundirs.js';
import { DumpWatch, dumpSummary, knownDumpIdents, type DumpSlot } from './dumpwatch.js';
import { readSupervisorState } from '../run/launchstate.js';
import { nodesOutOfReach, outOfReachText, rankHost, rankName, sharesOutDir, type NodeHosts } from './nodes.js';

export type { ActionRecord, Actor } from './types.js';

export { ACTIONS_FILE, readActionLog, readActions, type ActionLog } from './audit.js';

export interface RankTarget {
  rank: number;
  pid: number;
  startTime: string;
  state?: string;
  /** the node its pid lives on (a multi-node run, --node): checked and signalled there only */
  host?: string;
}

/** A proven rank process as a target of a signal: pid + start time, and its node on a multi-node run. */
export function rankTarget(r: RankProc): RankTarget {
  return {
    rank: r.rank,
    pid: r.proc.pid,
    startTime: r.proc.startTime,
    state: r.proc.state,
    ...(r.proc.host !== undefined ? { host: r.proc.host } : {}),
  };
}

export interface DumpOutcome {
  perRank: {
    rank: number;
    pid: number;
    /** its node (a multi-node run) */
    host?: string;
    status: 'dumped' | 'no-answer' | 'refused';
    file?: string;
    why?: string;
    /** refused because the rank has no SIGUSR1 handler yet (still starting): try again later */
    notReady?: true;
    /** the process ended after it was sent SIGUSR1 (with its handler installed): our signal's doing, maybe */
    endedAfterSignal?: true;
  }[];
  pySpy: boolean;
  /** a multi-node run: nodes that could not be reached and hold no known rank (none signalled there) */
  outOfReach?: { host: string; why: string }[];
}

export interface ControlOptions {
  /** defence in depth: a read-only cockpit passes true; NSA_TOP_READ_ONLY=1 does the same */
  readOnly?: boolean;
  /** a multi-node run: each target's node (RankTarget.host), where its pid is checked and signalled */
  nodes?: NodeHosts;
  /** why, in the operator's words (`stop --reason`): kept in the record's target and detail */
  reason?: string;
}

/** the record's `reason` (target) and its words at the end of the detail, when one was given */
function reasonTarget(opts: ControlOptions): { reason?: string } {
  return opts.reason ? { reason: opts.reason } : {};
}
function reasonSaid(opts: ControlOptions): string {
  return opts.reason ? ` (reason: ${opts.reason})` : '';
}

export interface DumpOptions extends ControlOptions {
  /** least time between two signals (default none: with the real trainer's second-only names the
   *  next rank waits past the second of the previous rank's dump, see dumpwatch.ts) */
  staggerMs?: number;
  /** how long, after the last signal, ranks that have not answered are still waited for */
  waitMs?: number;
  /** how long each rank gets before the next is signalled */
  answerMs?: number;
  onProgress?: (msg: string) => void;
  /** only these ranks (the operator picked one): the others are not signalled; each is proven as ever */
  ranks?: readonly number[];
}

export interface HaltOptions extends ControlOptions {
  /** 'after-checkpoint': cancels the wait */
  signal?: AbortSignal;
  pollMs?: number;
  timeoutMs?: number;
  onProgress?: (msg: string) => void;
}

/** the one read-only switch (src/trainer/control/ownfiles.ts): every write there refuses it again */
export function readOnlyMode(opts?: ControlOptions): boolean {
  return ownReadOnly(opts);
}

// ---------------------------------------------------------------------------------------------
// who

function localTty(): string | null {
  for (const fd of [0, 1, 2]) {
    try {
      const p = readlinkSync(`/proc/self/fd/${fd}`);
      if (p.startsWith('/dev/pts/') || p.startsWith('/dev/tty')) return p;
    } catch {
      /* not Linux, or no such fd */
    }
  }
  return null;
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    try {
      childProcess().execFile(cmd, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout) =>
        resolve(err ? null : stdout.trim()),
      );
    } catch {
      resolve(null);
    }
  });
}

let actorCache: Promise<Actor> | null = null;
let actorCacheLabel = '';

/** Who is acting: user, tty, tmux client and session (when inside tmux), host, pid. */
export function currentActor(host: Host): Promise<Actor> {
  if (actorCache && actorCacheLabel === host.label) return actorCache;
  actorCacheLabel = host.label;
  actorCache = (async (): Promise<Actor> => {
    let user = process.env.USER || process.env.LOGNAME || '';
    try {
      user = userInfo().username || user;
    } catch {
      /* no passwd entry (containers): keep $USER */
    }
    let tmux: string | null = null;
    if (process.env.TMUX) {
      const pane = process.env.TMUX_PANE ?? '';
      // -t: the pane we run in, not whichever pane is current for the server
      const args = [
        'display-message',
        '-p',
        ...(pane ? ['-t', pane] : []),
        '#{client_tty}|#{session_name}:#{window_index}.#{pane_index}',
      ];
      const shown = await run('tmux', args, 1500);
      const [clientTty = '', where = ''] = (shown ?? '').split('|');
      const parts = [clientTty ? `client ${clientTty}` : null, where ? `session ${where}` : null, pane || null].filter(
        Boolean,
      );
      tmux = parts.length > 0 ? parts.join(' ') : 'tmux';
    }
    const me = hostname();
    return {
      user: user || `uid${process.getuid?.() ?? '?'}`,
      tty: localTty(),
      tmux,
      host: host.kind === 'local' ? me : `${me} → ${host.label}`,
      pid: process.pid,
    };
  })();
  return actorCache;
}

export function describeActor(a: Actor): string {
  const where = [a.tmux ? `tmux ${a.tmux}` : a.tty, a.host].filter(Boolean).join(', ');
  return `${a.user}${where ? ` (${where})` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// process identity

export interface VerifiedRank {
  target: RankTarget;
  ok: boolean;
  proc: ProcInfo | null;
  why: string | null;
}

function stateWhy(p: ProcInfo): string | null {
  switch (p.state) {
    case 'T':
    case 't':
      return 'stopped (state T): it cannot run a signal handler until continued (SIGCONT)';
    case 'D':
      return `in uninterruptible sleep (state D${p.wchan ? `, wchan ${p.wchan}` : ''}): usually stuck in I/O or a driver call`;
    case 'Z':
      return 'zombie (state Z): the process has exited and was not reaped';
    case 'X':
      return 'dead (state X)';
    default:
      return null;
  }
}

/** pid + start time must both match: a recycled pid is never signalled. */
export async function verifyRank(host: Host, t: RankTarget): Promise<VerifiedRank> {
  if (!Number.isInteger(t.pid) || t.pid <= 1) return { target: t, ok: false, proc: null, why: `invalid pid ${t.pid}` };
  let ok = false;
  try {
    ok = await verifyProcess(host, { pid: t.pid, startTime: t.startTime });
  } catch (e) {
    return { target: t, ok: false, proc: null, why: `could not verify pid ${t.pid}: ${(e as Error).message}` };
  }
  let proc: ProcInfo | null = null;
  try {
    proc = await readProc(host, t.pid);
  } catch {
    proc = null;
  }
  if (!ok) {
    const why = proc
      ? `pid ${t.pid} now belongs to another process (start time ${proc.startTime} ≠ ${t.startTime}): refused`
      : `pid ${t.pid} is gone`;
    return { target: t, ok: false, proc, why };
  }
  if (proc && (proc.state === 'Z' || proc.state === 'X')) return { target: t, ok: false, proc, why: stateWhy(proc) };
  return { target: t, ok: true, proc, why: null };
}

/**
 * Positive proof that a verified process is this run's: a rank (or with `launcherToo` its
 * launcher) by its own command and environment, and the run's own records naming it with a start
 * time that fits or its descent from the run's proven launcher or supervisor child (ranks.ts), or —
 * for stop escalations — a process the run's supervisor started (its recorded child, verified by
 * pid + start time, or a descendant of it). null when proven, else why not. The environment alone,
 * or a heartbeat's pid alone, is never proof.
 */
export async function proveTarget(
  host: Host,
  run: RunRef,
  t: RankTarget,
  opts: {
    launcherToo?: boolean;
    launch?: boolean;
    /** the run's records (runRecordHints), read once per action; read here when absent */
    hints?: Awaited<ReturnType<typeof runRecordHints>>;
  } = {},
): Promise<string | null> {
  const dirs = await runDirsOf(host, run);
  const { outDir } = dirs;
  let why: string | null;
  try {
    why = await proveRunProcess(host, outDir, t, { launcherToo: opts.launcherToo, hints: opts.hints });
  } catch (e) {
    return `could not prove pid ${t.pid}: ${(e as Error).message}`;
  }
  if (why === null || !opts.launch) return why;
  const st = await readSupervisorState(host, dirs).catch(() => null);
  const child = st?.child;
  if (!child?.startTime) return why;
  if (!(await verifyProcess(host, child).catch(() => false))) return why;
  // the supervisor's child, or a descendant of it
  let cur = await readProc(host, t.pid).catch(() => null);
  if (!cur || cur.startTime !== String(t.startTime)) return why;
  for (let i = 0; cur && i < 16; i++) {
    if (cur.pid === child.pid && cur.startTime === child.startTime) return null;
    if (cur.ppid <= 1) break;
    cur = await readProc(host, cur.ppid).catch(() => null);
  }
  return why;
}

function targetOf(t: RankTarget): Record<string, unknown> {
  return { rank: t.rank, pid: t.pid, startTime: t.startTime, ...(t.host !== undefined ? { host: t.host } : {}) };
}

// ---------------------------------------------------------------------------------------------
// dump

async function pySpyInstalled(host: Host): Promise<boolean> {
  try {
    const r = await host.exec(['sh', '-c', 'command -v py-spy'], { timeoutMs: 3000, quick: true });
    return r.code === 0 && r.stdout.trim().length > 0;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * SIGUSR1 to every rank (never the launcher: torchrun does not forward it), each pid + start time
 * verified first, one at a time. The real trainer names a dump by the second only
 * (`stackdump_<epoch>.txt`), so the next rank is signalled only once this one's file is there and
 * the second it was named for has passed, or once it is given up on (`waitMs`, default 8 s): two
 * ranks never write one name in one go. With the reference trainer's names (rank and pid in them)
 * each rank gets `answerMs` (default 2 s) before the next, and late ones are waited for until
 * `waitMs` after the last signal. Which file is whose: the pid in its name, else its content
 * (dumpwatch.ts): a write no one rank can be proven to own is claimed for none, a claimed file
 * overwritten in the same second loses its claim. A rank without a file of its own is named
 * "no stack written (lost)" with why (stopped, D state, zombie, gone, inside a C call); "k/n ranks
 * dumped" counts only ranks with their own file; py-spy availability is noted.
 */
export async function dumpAll(
  host: Host,
  run: RunRef,
  ranks: RankTarget[],
  actor: Actor,
  opts: DumpOptions = {},
): Promise<DumpOutcome> {
  const say = opts.onProgress ?? (() => {});
  const only = opts.ranks;
  const sorted = ranks.filter((t) => !only || only.includes(t.rank)).sort((a, b) => a.rank - b.rank);
  // a rank asked for by number that no proven process is: nothing is signalled, and no record says otherwise
  if (only && sorted.length === 0)
    throw new Error(`rank ${only.join(', ')}: no proven process of this run has that rank: nothing signalled`);
  let out: DumpOutcome | null = null;
  // resolved once (or handed down resolved): the record, the proof and the dumps read one run
  const dirs = await runDirsOf(host, run);
  const rec = await audited(
    host,
    dirs,
    // fails closed (no failOpen): a dump only observes, and a signal to a rank that nobody can later
    // account for is worse than no dump — the log must take its record first. A dump of chosen ranks
    // says so (`only`): the others were left alone on purpose, not lost
    {
      actor,
      action: 'dump',
      target: { ranks: sorted.map(targetOf), ...(only ? { only: [...only] } : {}) },
      requireLog: true,
    },
    async (ctx) => {
      const r = await signalForDumps(host, dirs, sorted, say, opts, ctx);
      out = r.outcome;
      return r.record;
    },
    { readOnly: opts.readOnly },
  );
  // refused before any signal (read-only, an action log that cannot be kept), or it broke down
  return (
    out ?? {
      perRank: sorted.map((t) => ({
        rank: t.rank,
        pid: t.pid,
        ...(t.host !== undefined ? { host: t.host } : {}),
        status: rec.result === 'refused' ? ('refused' as const) : ('no-answer' as const),
        why: rec.detail,
      })),
      pySpy: false,
    }
  );
}

/**
 * `nsa-top dump`: the run's ranks found with the run's own records (boot records included, the
 * same proof the cockpit and the watchdog use), then dumpAll, which proves each one again right
 * before its signal. `unproven`: what was named as a trainer of the run without proof (never
 * signalled); `outcome` null when no rank is proven.
 */
export async function dumpRun(
  host: Host,
  run: RunRef,
  actor: () => Promise<Actor>,
  opts: DumpOptions = {},
  /** asked once the ranks are proven, before any signal: why the run's state refuses a dump, or null */
  gate?: () => Promise<string | null>,
): Promise<{ outcome: DumpOutcome | null; unproven: UnprovenProc[]; error: string | null; refused?: string }> {
  const dirs = await runDirsOf(host, run);
  const { outDir } = dirs;
  const procs = await findRunProcesses(host, outDir, await runRecordHints(host, outDir));
  const targets = procs.ranks
    .filter((r) => r.proc.state !== 'Z' && (!opts.ranks || opts.ranks.includes(r.rank)))
    .map(rankTarget);
  const unproven = procs.unproven ?? [];
  const refused = gate ? await gate() : null;
  // no rank to signal: the state's words when it has them (the cockpit's), else the proof's
  if (targets.length === 0)
    return { outcome: null, unproven, error: procs.error ?? null, ...(refused ? { refused } : {}) };
  if (refused) return { outcome: null, unproven, error: null, refused };
  return { outcome: await dumpAll(host, dirs, targets, await actor(), opts), unproven, error: null };
}

async function signalForDumps(
  host: Host,
  dirs: RunDirs,
  sorted: RankTarget[],
  say: (msg: string) => void,
  opts: DumpOptions,
  ctx?: AuditContext,
): Promise<{ outcome: DumpOutcome; record: Outcome }> {
  const { outDir } = dirs;
  const stagger = Math.max(0, opts.staggerMs ?? 0);
  const waitMs = opts.waitMs ?? 8000;
  const answerMs = Math.min(waitMs, opts.answerMs ?? 2000);
  // ranks on other nodes than the one that reads the run dir (a multi-node run, src/trainer/control/nodes.ts)
  const nodes = opts.nodes;
  const others = [
    ...new Set(sorted.map((t) => t.host).filter((h): h is string => h !== undefined && h !== nodes?.primary)),
  ];
  const multi = nodes !== undefined && others.length > 0;
  // a remote host's clock is corrected, not exact (and several nodes' clocks are as close as NTP
  // keeps them): allow for it when matching dumps to signals
  const skewMs = host.kind === 'local' && !multi ? 50 : 750;
  const pySpyP = pySpyInstalled(host);
  type Slot = DumpSlot & {
    t: RankTarget;
    status: 'dumped' | 'no-answer' | 'refused' | 'pending';
    why?: string;
    notReady?: true;
    endedAfterSignal?: true;
    /** the host its pid was signalled on */
    on?: Host;
  };
  const slots: Slot[] = sorted.map((t) => ({
    t,
    rank: t.rank,
    pid: t.pid,
    ...(t.host !== undefined ? { host: t.host } : {}),
    status: 'pending',
  }));
  // what is there already is someone else's; main threads seen in this run's earlier dumps name their pid
  const watch = new DumpWatch(host, outDir, skewMs, say, await knownDumpIdents(host, dirs, sorted));
  await watch.start();
  // the run's own records (boot records included), read once per node: each rank is proven with
  // them again right before its signal, on its own node, whoever found it (the cockpit, the
  // watchdog, the CLI)
  const hintsOf = new Map<Host, ReturnType<typeof runRecordHints>>([[host, runRecordHints(host, outDir)]]);
  const hintsFor = (h: Host) => {
    if (!hintsOf.has(h)) hintsOf.set(h, runRecordHints(h, outDir));
    return hintsOf.get(h)!;
  };
  // a node that cannot take part, and why: unreachable, or its out_dir is not the one watched here
  const blocked = new Map<string, string>();
  if (multi) {
    const started = await ctx?.progress(
      'started',
      `SIGUSR1 to ${sorted.length} ranks on ${[nodes.primary, ...others].join(', ')}, one at a time`,
    );
    await Promise.all(
      others.map(async (label) => {
        const h = nodes.reachable(label);
        if (typeof h === 'string') return blocked.set(label, h);
        const why = started
          ? await sharesOutDir(h, outDir, started)
          : 'cannot tell whether it shares the run dir (no record of this action)';
        if (why)
          blocked.set(label, `node ${label}: ${why} — its ranks' dumps would land where this dump cannot see them`);
      }),
    );
  }
  let lastSignalAt = -Infinity;
  /** New dump writes since the last look, each given to the one rank it can belong to. */
  const collect = async () => {
    await watch.collect(slots);
    for (const x of slots) if (x.status === 'pending' && x.file) x.status = 'dumped';
    for (const x of slots) if (x.status === 'dumped' && !x.file) x.status = 'pending'; // overwritten: lost
  };

  for (const slot of slots) {
    const t = slot.t;
    // the rank's own node: its pid is checked and signalled there, or not at all (and said why)
    const on = (t.host !== undefined ? blocked.get(t.host) : undefined) ?? rankHost(host, nodes, t);
    if (typeof on === 'string') {
      Object.assign(slot, { status: 'refused', why: `not signalled: ${on}` });
      say(`${rankName(t)} (pid ${t.pid}): refused — ${slot.why}`);
      continue;
    }
    slot.on = on;
    const v = await verifyRank(on, t);
    if (!v.ok) {
      Object.assign(slot, { status: 'refused', why: v.why ?? 'not verified' });
      say(`${rankName(t)} (pid ${t.pid}): refused — ${slot.why}`);
      continue;
    }
    if (v.proc && isLauncher(v.proc)) {
      // torchrun does not forward SIGUSR1, and its default action would kill the launcher
      Object.assign(slot, {
        status: 'refused',
        why: `pid ${t.pid} is the launcher (${v.proc.argv.slice(0, 3).join(' ')}), not a rank: SIGUSR1 would not be forwarded`,
      });
      say(`rank ${t.rank}: refused — ${slot.why}`);
      continue;
    }
    // SIGUSR1's default action kills a process without a handler: only a proven rank gets it
    const unproven = await proveTarget(on, dirs, t, { hints: await hintsFor(on) });
    if (unproven !== null) {
      Object.assign(slot, { status: 'refused', why: `not signalled: ${unproven}` });
      say(`${rankName(t)} (pid ${t.pid}): refused — ${slot.why}`);
      continue;
    }
    const gap = lastSignalAt + stagger - Date.now();
    if (gap > 0) await sleep(gap);
    await collect(); // late answers from earlier ranks belong to them, not to this one
    // second-only names: not before the second a claimed dump was named for has passed
    for (let past = watch.notBefore() - on.now(); past > 0; past = watch.notBefore() - on.now()) {
      await sleep(Math.min(past, 250));
      await collect();
    }
    slot.sentAt = on.now();
    try {
      // the start time and the handler are checked in the same step as the kill: SIGUSR1's default
      // action would kill a rank still starting (the real trainer installs its handler after
      // `import torch` and its config)
      await on.signal(t.pid, 'SIGUSR1', { startTime: t.startTime, requireHandler: true });
    } catch (e) {
      slot.sentAt = undefined;
      if ((e as NodeJS.ErrnoException).code === 'ENOHANDLER') {
        const spy = (await pySpyP)
          ? `; py-spy is installed and can be used instead: py-spy dump --pid ${t.pid}`
          : '; try again once it has started';
        Object.assign(slot, {
          status: 'refused',
          notReady: true,
          why: `rank ${t.rank} not ready for a dump yet (still starting: no SIGUSR1 handler)${spy}`,
        });
        say(`rank ${t.rank} (pid ${t.pid}): not signalled — ${slot.why}`);
      } else Object.assign(slot, { status: 'no-answer', why: `signal failed: ${(e as Error).message}` });
      continue;
    }
    lastSignalAt = Date.now();
    say(`${rankName(t)} (pid ${t.pid}): SIGUSR1 sent, waiting for its stack dump…`);
    // names with rank and pid cannot collide: the next rank after answerMs. Names with only the
    // second: the next rank only once this one's file is there (or it is given up on after waitMs)
    const until = () => lastSignalAt + (watch.named ? answerMs : waitMs);
    while (Date.now() < until() && slot.status !== 'dumped') {
      await sleep(150);
      await collect();
    }
    if (slot.status !== 'dumped' && watch.named)
      say(`rank ${t.rank}: no dump yet after ${dur(answerMs / 1000, 'precise')}; moving on and still watching for it`);
    else if (slot.status !== 'dumped')
      say(
        `rank ${t.rank}: no stack dump within ${dur(waitMs / 1000, 'precise')}; moving on (a late one makes the next rank's file unprovable)`,
      );
  }
  const deadline = lastSignalAt + waitMs;
  while (slots.some((x) => x.status === 'pending' && x.sentAt !== undefined && !x.lost) && Date.now() < deadline) {
    await sleep(200);
    await collect();
  }
  await collect(); // a last look: a write under a claimed name since then takes the claim away
  for (const slot of slots) {
    if (slot.status !== 'pending') continue;
    // Why not? Look at the process now.
    let why = `no stack written (lost) — ${slot.lost ?? `no stack dump within ${dur((Date.now() - (slot.sentAt ?? Date.now())) / 1000, 'precise')}`}`;
    const p = await readProc(slot.on ?? host, slot.t.pid).catch(() => null);
    // it had its handler when signalled; if it ended since, that is said as it is — never as if it
    // had gone by itself
    if (!p || p.startTime !== String(slot.t.startTime)) {
      why += `; the process ended after nsa-top sent it SIGUSR1 (its SIGUSR1 handler was installed when the signal was sent)`;
      slot.endedAfterSignal = true;
    } else {
      const s = stateWhy(p);
      if (s) why += `; ${s}`;
      else
        why += `; state ${p.state}${p.wchan ? ` (wchan ${p.wchan})` : ''} — the main thread may be inside a long C/CUDA/NCCL call (Python runs handlers only between bytecodes)`;
    }
    Object.assign(slot, { status: 'no-answer', why });
    say(`rank ${slot.t.rank}: ${why}`);
  }
  const perRank: DumpOutcome['perRank'] = slots.map((x) => ({
    rank: x.t.rank,
    pid: x.t.pid,
    ...(x.t.host !== undefined ? { host: x.t.host } : {}),
    status: x.status as 'dumped' | 'no-answer' | 'refused',
    ...(x.notReady ? { notReady: true as const } : {}),
    ...(x.endedAfterSignal ? { endedAfterSignal: true as const } : {}),
    ...(x.file ? { file: x.file } : {}),
    ...(x.why ? { why: x.why } : {}),
  }));
  const claimed = new Map(slots.map((x) => [x.t.rank, x]));
  const pySpy = await pySpyP;
  const dumped = perRank.filter((r) => r.status === 'dumped').length;
  // a node that cannot be reached and whose ranks are not known: not every rank was dumped (a dump
  // of chosen ranks asked for none of them)
  const outOfReach = opts.ranks ? [] : nodesOutOfReach(nodes, sorted);
  const result: ActionRecord['result'] =
    dumped === sorted.length && sorted.length > 0 && outOfReach.length === 0
      ? 'ok'
      : dumped > 0
        ? 'partial'
        : perRank.every((r) => r.status === 'refused')
          ? 'refused'
          : 'failed';
  // a dump of chosen ranks says so first: the others were not asked, not lost
  const detail = `${opts.ranks ? `only rank ${opts.ranks.join(', ')} (chosen): ` : ''}${dumpSummary(perRank, watch.unclaimed, pySpy)}${outOfReach.map((n) => `; ${outOfReachText(n)}`).join('')}`;
  return {
    outcome: { perRank, pySpy, ...(outOfReach.length ? { outOfReach } : {}) },
    record: {
      result,
      detail,
      target: {
        ...(outOfReach.length ? { outOfReach } : {}),
        files: perRank.filter((r) => r.file).map((r) => r.file),
        // which file is which rank's (the real trainer's names do not say): read back by the Dumps
        // panel and `status`; the main-thread ident lets the next dump match this process by content
        perRank: perRank.map((r) => ({
          rank: r.rank,
          pid: r.pid,
          ...(r.host !== undefined ? { host: r.host } : {}),
          startTime: sorted.find((t) => t.rank === r.rank)?.startTime ?? null,
          status: r.status,
          file: r.file ?? null,
          why: r.why ?? null,
          // the claimed write's first line: a file that no longer starts so was overwritten since
          header: r.file ? (claimed.get(r.rank)?.header ?? null) : null,
          ident: claimed.get(r.rank)?.ident ?? null,
        })),
        ...(watch.unclaimed.length ? { unclaimed: watch.unclaimed } : {}),
      },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// halt

export function haltContent(reason: string, actor: Actor): string {
  return `halt: ${reason} ${actor.user}\n`;
}

async function readSmall(host: Host, path: string): Promise<string | null> {
  try {
    return (await host.readFile(path, 4096)).toString('utf8');
  } catch {
    return null;
  }
}

/**
 * Writes .HALT unless one is there already (whose reason is then kept and reported). A .HALT that
 * is not a regular file (a directory, a link) is reported as such, never written through. A .HALT
 * created but left without its reason (a full disk) is ours: said so, not taken for someone else's.
 */
async function writeHalt(
  host: Host,
  dirs: RunDirs,
  actor: Actor,
): Promise<{ wrote: boolean; existing: string | null }> {
  const { outDir } = dirs;
  const path = join(outDir, '.HALT');
  try {
    await createOwn(host, outDir, '.HALT', haltContent('manual_stop', actor));
    return { wrote: true, existing: null };
  } catch (e) {
    if (e instanceof OwnWriteError && e.partial)
      throw new OwnWriteError(
        path,
        `${e.message} — the empty .HALT is nsa-top's own and still stops the trainer at its next step`,
        e.code,
        true,
      );
    if (e instanceof OwnWriteError && e.code !== 'EEXIST') throw e;
    const st = await host.stat(path).catch(() => null);
    if (st && !st.isFile)
      return { wrote: false, existing: `not a regular file (${st.isDir ? 'a directory' : 'a special file'})` };
    const existing = await readSmall(host, path);
    if (existing !== null && existing.trim() === '')
      return { wrote: false, existing: await emptyHaltWhy(host, dirs, path) };
    if (existing !== null) return { wrote: false, existing: existing.trim() };
    throw e;
  }
}

/** Whose is an empty .HALT: nsa-top's own cut-short write (its action log says so), or unknown. */
async function emptyHaltWhy(host: Host, dirs: RunDirs, path: string): Promise<string> {
  const recs = await readActions(host, dirs, 200).catch(() => [] as ActionRecord[]);
  const own = recs.reverse().find((r) => r.target.path === path && r.target.partial === true);
  if (own)
    return `empty: nsa-top's own write cut short at ${new Date(own.ts).toISOString()} by ${own.who.user} (${own.detail.replace(/^could not write \.HALT: /, '').slice(0, 120)}); it still stops the trainer`;
  return 'empty: no reason given (a bare touch)';
}

/**
 * The newest COMPLETE checkpoint whose file was written after `sinceMs` (its mtime), or null. A
 * file modified within the last second is left for the next look (it may still be growing: the
 * real trainer torch.save()s in place); the rest must pass the structural check in checkpoints.ts.
 */
export async function checkpointWrittenSince(
  host: Host,
  outDir: string,
  sinceMs: number,
): Promise<{ path: string; name: string; step: number; mtimeMs: number } | null> {
  const now = host.now();
  const cands = (await listCheckpoints(host, outDir))
    .filter((c) => c.mtimeMs > sinceMs)
    .sort((a, b) => b.mtimeMs - a.mtimeMs);
  for (const c of cands) {
    if (now - c.mtimeMs < 1000) continue;
    const st = await host.stat(c.path).catch(() => null);
    if (!st || st.size !== c.size || st.mtimeMs !== c.mtimeMs) continue; // changed since the listing
    const problem = await checkpointTailProblem(host, c.path, st.size).catch((e: Error) => e.message);
    if (problem) continue;
    return { path: c.path, name: c.name, step: c.step, mtimeMs: c.mtimeMs };
  }
  return null;
}

/** a halt now waits for a checkpoint written within this long, or still growing, to stay quiet this long … */
const SAVE_QUIET_MS = 250;
/** … for at most this long */
const SAVE_WAIT_MAX_MS = 30_000;

/**
 * Waits while a checkpoint is being written (the newest one's mtime within `quietMs` of the host's
 * clock, or its size still growing: one long write() stamps its mtime when it begins), until it has
 * been quiet that long or `maxMs` has passed; null when none was in flight. Only a save in flight:
 * a run that saves every second (the reference trainer's default) is quiet most of each second.
 * Why: the real trainer's rank 0 saves after step N while the other ranks have passed step N+1's
 * .HALT check and wait in its all-reduce (each rank checks .HALT on its own, contract §2.5). A .HALT
 * written during the save reaches rank 0 a step before the others and splits the group: rank 0
 * leaves the loop, writes metrics.json and waits in its barrier, the others in the all-reduce, for
 * good (seen live, 2 ranks on CPU: both alive 7 minutes later). Once the file is quiet, rank 0 is
 * past that check as well and every rank sees .HALT at the same step.
 */
export async function saveSettled(
  host: Host,
  outDir: string,
  o: { quietMs?: number; maxMs?: number; signal?: AbortSignal } = {},
): Promise<{ name: string; waitedMs: number; settled: boolean } | null> {
  const quiet = o.quietMs ?? SAVE_QUIET_MS;
  const t0 = Date.now();
  let name: string | null = null;
  let seen: { name: string; size: number } | null = null;
  for (;;) {
    const newest = (await listCheckpoints(host, outDir).catch(() => [])).reduce<{
      name: string;
      mtimeMs: number;
      size: number;
    } | null>((a, c) => (a === null || c.mtimeMs > a.mtimeMs ? c : a), null);
    const growing = newest !== null && seen !== null && seen.name === newest.name && seen.size !== newest.size;
    seen = newest && { name: newest.name, size: newest.size };
    const fresh = newest !== null && (growing || host.now() - newest.mtimeMs < quiet);
    if (!fresh || o.signal?.aborted) return name === null ? null : { name, waitedMs: Date.now() - t0, settled: !fresh };
    name = newest.name;
    if (Date.now() - t0 >= (o.maxMs ?? SAVE_WAIT_MAX_MS)) return { name, waitedMs: Date.now() - t0, settled: false };
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * 'now': write .HALT ("halt: manual_stop <user>") — once a checkpoint save in flight is over
 * (saveSettled). 'after-checkpoint': wait IN THIS PROCESS for a
 * complete checkpoint written after now, then write .HALT (cancel with opts.signal). The cockpit and
 * `nsa-top halt` use the durable request instead (src/trainer/control/requests.ts), which outlives them.
 */
export async function requestHalt(
  host: Host,
  run: RunRef,
  mode: 'now' | 'after-checkpoint',
  actor: Actor,
  opts: HaltOptions = {},
): Promise<ActionRecord> {
  // resolved once (or handed down resolved): the audit and the write go where they are given
  const dirs = await runDirsOf(host, run);
  const outDir = dirs.outDir;
  const haltPath = join(outDir, '.HALT');
  return audited(
    host,
    dirs,
    {
      actor,
      action: mode === 'now' ? 'halt' : 'halt-after-checkpoint',
      target: { path: haltPath, ...reasonTarget(opts) },
      requireLog: true,
      // a halt stops a run going wrong: it is never blocked by a log that cannot take its record
      failOpen: true,
    },
    async (ctx): Promise<Outcome> => {
      if (mode === 'after-checkpoint') return haltAfterCheckpoint(host, dirs, actor, ctx, opts);
      try {
        const present = (await host.stat(haltPath).catch(() => null)) !== null;
        const save = present ? null : await saveSettled(host, outDir, { signal: opts.signal });
        const w = await writeHalt(host, dirs, actor);
        const during = !save
          ? ''
          : save.settled
            ? ` once ${save.name} was saved (waited ${dur(save.waitedMs / 1000, 'precise')}: a .HALT during a save reaches the saving rank a step after the others and can split the group)`
            : ` while ${save.name} was still being written after ${dur(save.waitedMs / 1000, 'precise')} (a .HALT during a save can split the group: if the ranks do not stop, escalate)`;
        return {
          result: 'ok',
          detail: `${w.wrote ? `.HALT written (halt: manual_stop)${during}` : `.HALT already present (${w.existing}); left as it is`}${reasonSaid(opts)}`,
        };
      } catch (e) {
        const partial = e instanceof OwnWriteError && e.partial;
        return {
          result: 'failed',
          detail: `could not write .HALT: ${(e as Error).message}`,
          ...(partial ? { target: { partial: true } } : {}),
        };
      }
    },
    { readOnly: opts.readOnly },
  );
}

async function haltAfterCheckpoint(
  host: Host,
  dirs: RunDirs,
  actor: Actor,
  ctx: AuditContext,
  opts: HaltOptions,
): Promise<Outcome> {
  const { outDir } = dirs;
  const haltPath = join(outDir, '.HALT');
  // "the next checkpoint" is one written after now (by mtime), not a step number above the old
  // maximum: after a resume the real trainer counts from step 1 again
  const since = host.now();
  await ctx.progress('started', `waiting for a complete checkpoint written after ${clock(since)}`);
  opts.onProgress?.('waiting for the next complete checkpoint');
  const pollMs = opts.pollMs ?? 1000;
  const deadline = opts.timeoutMs !== undefined ? Date.now() + opts.timeoutMs : Infinity;
  for (;;) {
    if (opts.signal?.aborted)
      return { result: 'failed', detail: 'cancelled before a new checkpoint appeared; no .HALT written' };
    if (Date.now() > deadline)
      return { result: 'failed', detail: 'timed out waiting for a new checkpoint; no .HALT written' };
    if ((await host.stat(haltPath)) !== null) {
      const existing = (await readSmall(host, haltPath))?.trim() ?? '';
      return { result: 'ok', detail: `.HALT appeared meanwhile (${existing}); nothing written` };
    }
    const c = await checkpointWrittenSince(host, outDir, since).catch(() => null);
    if (c) {
      const w = await writeHalt(host, dirs, actor);
      return {
        result: 'ok',
        detail: w.wrote
          ? `checkpoint step ${c.step} complete; .HALT written`
          : `checkpoint step ${c.step} complete; .HALT already present (${w.existing})`,
        target: { checkpoint: c.path, checkpointStep: c.step },
      };
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, pollMs);
      opts.signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });
  }
}

// ---------------------------------------------------------------------------------------------
// escalate, remove a stale .HALT

/** SIGINT or SIGKILL to verified ranks only; each pid that failed verification is named. */
export async function escalate(
  host: Host,
  run: RunRef,
  ranks: RankTarget[],
  sig: 'SIGINT' | 'SIGKILL',
  actor: Actor,
  opts: ControlOptions = {},
): Promise<ActionRecord> {
  const action: ActionKind = sig === 'SIGINT' ? 'escalate-sigint' : 'escalate-sigkill';
  const target = { signal: sig, ranks: ranks.map(targetOf), ...reasonTarget(opts) };
  // resolved once (or handed down resolved): the record and every rank's proof read one run
  const dirs = await runDirsOf(host, run);
  return audited(
    host,
    dirs,
    // fails closed: SIGINT/SIGKILL cost the run's unsaved steps and cannot be undone; the safety
    // stop that fails open is .HALT (requestHalt), and an escalation is never taken unrecorded
    { actor, action, target, requireLog: true },
    async () => {
      const sent: number[] = [];
      const notes: string[] = [];
      // a multi-node run: each rank on its own node (checked, proven and signalled there), and a node
      // that cannot be reached is named for each of its ranks — never skipped in silence
      const sentOn: { host: string; pid: number }[] = [];
      for (const t of [...ranks].sort((a, b) => a.rank - b.rank)) {
        const on = rankHost(host, opts.nodes, t);
        if (typeof on === 'string') {
          notes.push(`${rankName(t)} pid ${t.pid}: not signalled: ${on}`);
          continue;
        }
        const v = await verifyRank(on, t);
        if (!v.ok) {
          notes.push(`${rankName(t)} pid ${t.pid}: ${v.why}`);
          continue;
        }
        // the supervisor (and what it started) runs where the run dir is read: a descent from it
        // proves nothing about a pid on another node
        const unproven = await proveTarget(on, dirs, t, { launcherToo: true, launch: on === host });
        if (unproven !== null) {
          notes.push(`${rankName(t)} pid ${t.pid}: not signalled: ${unproven}`);
          continue;
        }
        try {
          await on.signal(t.pid, sig as SignalName, { startTime: t.startTime });
          sent.push(t.pid);
          if (t.host !== undefined) sentOn.push({ host: t.host, pid: t.pid });
        } catch (e) {
          notes.push(`${rankName(t)} pid ${t.pid}: ${(e as Error).message}`);
        }
      }
      const outOfReach = nodesOutOfReach(opts.nodes, ranks);
      for (const n of outOfReach) notes.push(outOfReachText(n));
      const result: ActionRecord['result'] =
        sent.length === ranks.length && ranks.length > 0 && outOfReach.length === 0
          ? 'ok'
          : sent.length > 0
            ? 'partial'
            : 'refused';
      const detail = `${sig} sent to ${sent.length}/${ranks.length} ranks${notes.length ? `; ${notes.join('; ')}` : ''}${reasonSaid(opts)}`;
      return {
        result,
        detail,
        target: { sentTo: sent, ...(sentOn.length ? { sentOn } : {}), ...(outOfReach.length ? { outOfReach } : {}) },
      };
    },
    opts,
  );
}

/** Removes a .HALT the operator confirmed is stale; logs the file's content first. */
export async function removeStaleHalt(
  host: Host,
  run: RunRef,
  actor: Actor,
  opts: ControlOptions = {},
): Promise<ActionRecord> {
  const dirs = await runDirsOf(host, run);
  const path = join(dirs.outDir, '.HALT');
  return audited(
    host,
    dirs,
    // fails closed: removing a .HALT undoes a safety stop, the opposite of what may go unrecorded
    { actor, action: 'remove-stale-halt', target: { path }, requireLog: true },
    async (): Promise<Outcome> => {
      const st = await host.stat(path).catch(() => undefined);
      if (st && !st.isFile)
        return {
          result: 'failed',
          detail: `could not remove .HALT: it is ${st.isDir ? 'a directory' : 'a special file'}, not a file — nsa-top removes only a file; remove it by hand`,
        };
      const content = await readSmall(host, path);
      if (content === null && st === null) return { result: 'ok', detail: 'no .HALT present; nothing removed' };
      if (content === null)
        return { result: 'failed', detail: 'could not read .HALT (to record what it said): not removed' };
      const anomaly = await readSmall(host, join(dirs.outDir, '.anomaly_type'));
      try {
        await removeOwn(host, dirs.outDir, '.HALT', opts);
      } catch (e) {
        return {
          result: 'failed',
          detail: `could not remove .HALT: ${(e as Error).message}`,
          target: { content: content.trim() },
        };
      }
      return {
        result: 'ok',
        detail: `removed .HALT ("${content.trim()}")${anomaly ? `; .anomaly_type (${anomaly.trim()}) kept as evidence` : ''}`,
        target: { content: content.trim(), anomalyType: anomaly?.trim() ?? null },
      };
    },
    opts,
  );
}

// ---------------------------------------------------------------------------------------------
// acknowledging an alert

/** The episode of an alert an acknowledgement names: its id and start (a later episode is new). */
export interface AlertRef {
  id: string;
  since: number;
  severity: string;
  title: string;
}

/**
 * Acknowledges one alert episode. The acknowledgement is the action-log line itself, so everyone
 * watching the run (two people sharing a pane, a second cockpit) reads it back from actions.jsonl;
 * a failed write is reported as failed, never as done.
 */
export async function acknowledgeAlert(
  host: Host,
  run: RunRef,
  alert: AlertRef,
  actor: Actor,
  opts: ControlOptions = {},
): Promise<ActionRecord> {
  return audited(
    host,
    run,
    { actor, action: 'ack', target: { alert: alert.id, since: alert.since, severity: alert.severity } },
    async () => ({
      result: 'ok',
      detail: `acknowledged ${alert.severity}: ${alert.title}`,
      ifNotRecorded: (why) => ({ result: 'failed', detail: `not acknowledged: cannot write the action log: ${why}` }),
    }),
    opts,
  );
}

// ---------------------------------------------------------------------------------------------
// py-spy
