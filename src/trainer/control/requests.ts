// Durable control requests: <out_dir>/.nsa-top/requests.json. A "halt after the next checkpoint"
// is not a loop inside whoever asked (a cockpit that quits or loses SSH would drop it): it is a
// record owned by a detached process — the run's supervisor when it has a live one, else a small
// `nsa-top agent` started in its own session — which writes .HALT once a COMPLETE checkpoint written
// after the request appears (by mtime, not step number: after a resume the real trainer counts
// from 1 again), then watches the ranks exit. Any cockpit reads the file, shows the request and
// can cancel it; every step goes through the action log.
//
// requests.json is changed only under a lock file (read-modify-write, temp + rename), so a cancel
// and the owner's ".HALT now" cannot both win: whichever takes the lock first decides.
import { clock, dur } from '../../format.js';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Host } from '../../remote/host.js';
import { readProc, verifyProcess } from '../../remote/procs.js';
import { findRunProcesses, runRecordHints } from '../run/processes.js';
import { livesAs } from '../run/launchstate.js';
import type { HeartbeatPidHint } from '../run/ranks.js';
import {
  type ActionRecord,
  activeRequest,
  type Actor,
  type ControlRequest,
  DEFAULT_HALT_GRACE_S,
  type RequestsFile,
  supervisorRestarts,
} from './types.js';
import { checkpointWrittenSince, haltContent, type ControlOptions } from './actions.js';
import { audited, auditedEvent, type Outcome } from './audit.js';
import { createOwnSync, removeOwnSync, writeOwnAtomicSync } from './ownfiles.js';
import { NSA_DIR, resolveRunDirs, runDirsOf, type RunDirs, type RunRef } from '../run/rundirs.js';
import { spawnSelfDetached } from './detached.js';
import { readLaunchPlan, readSupervisorState } from '../run/launchstate.js';

export const REQUESTS_FILE = 'requests.json';
const LOCK_FILE = 'requests.lock';
export const AGENT_LOCK = 'agent.lock';
export const AGENT_LOG = 'agent.log';
/** how `nsa-top agent` learns its out_dir (kept out of argv: process discovery matches argv) */
export const AGENT_ENV = 'NSA_TOP_AGENT_OUT_DIR';
const KEEP_FINISHED = 20;
/** the ids of the requests a relaunch carried into its new supervisor, one a line (the only old ones it claims) */
export const CARRY_ENV = 'NSA_TOP_CARRY_REQUESTS';

/** The owner is alive: same pid and start time, and not a zombie (an unreaped dead process). */
export async function ownerAlive(host: Host, o: { pid: number; startTime: string }): Promise<boolean> {
  // locally its /proc/PID/stat alone, read in place (looked at every round while a request is in force)
  if (host.kind === 'local' && process.platform === 'linux')
    return Number.isInteger(o.pid) && o.pid > 1 && /^\d+$/.test(String(o.startTime)) && livesAs(host, o);
  if (!(await verifyProcess(host, o).catch(() => false))) return false;
  const info = await readProc(host, o.pid).catch(() => null);
  return !!info && info.state !== 'Z' && info.state !== 'X';
}

/**
 * The run's supervisor when it lives (pid + start time, not a zombie) and can carry a request: the
 * carrier of its run's requests, which claims each of them within a second. null otherwise.
 */
export async function liveSupervisorOf(host: Host, runDir: string): Promise<{ pid: number; startTime: string } | null> {
  const st = await readSupervisorState(host, runDir).catch(() => null);
  if (!st?.supervisor || st.supervisorGone || !supervisorRestarts(st.state)) return null;
  return (await ownerAlive(host, st.supervisor)) ? st.supervisor : null;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// the file

function parseRequests(text: string | null): ControlRequest[] {
  if (!text) return [];
  try {
    const j = JSON.parse(text) as Partial<RequestsFile>;
    if (!j || !Array.isArray(j.requests)) return [];
    return j.requests.filter(
      (r): r is ControlRequest =>
        !!r &&
        typeof r === 'object' &&
        typeof r.id === 'string' &&
        typeof r.state === 'string' &&
        typeof r.ts === 'number',
    );
  } catch {
    return [];
  }
}

/** The run's requests (oldest first), through a Host: any cockpit, local or over SSH, reads them. */
export async function readRequests(host: Host, run: RunRef): Promise<ControlRequest[]> {
  const { outDir } = await runDirsOf(host, run);
  try {
    return parseRequests((await host.readFile(join(outDir, NSA_DIR, REQUESTS_FILE), 1024 * 1024)).toString('utf8'));
  } catch {
    return [];
  }
}

function readLocal(outDir: string): ControlRequest[] {
  try {
    return parseRequests(readFileSync(join(outDir, NSA_DIR, REQUESTS_FILE), 'utf8'));
  } catch {
    return [];
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs fn on the requests under the lock and writes the result back atomically. Local only. */
export async function updateRequests<T>(outDir: string, fn: (reqs: ControlRequest[]) => T): Promise<T> {
  // every write here goes through src/trainer/control/ownfiles.ts: never through a link, not in read-only mode
  const dir = join(outDir, NSA_DIR);
  const lockRel = `${NSA_DIR}/${LOCK_FILE}`;
  const lock = join(dir, LOCK_FILE);
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      createOwnSync(outDir, lockRel, `${process.pid}\n`);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    // a holder that died, or one that has held it for seconds (a lock is held for milliseconds)
    let stale = false;
    try {
      const holder = Number(readFileSync(lock, 'utf8').trim());
      const age = Date.now() - statSync(lock).mtimeMs;
      stale = (Number.isInteger(holder) && holder > 0 && !pidAlive(holder)) || age > 5000;
    } catch {
      /* gone or half-written: try again */
    }
    if (stale) {
      try {
        removeOwnSync(outDir, lockRel);
      } catch {
        /* someone else broke it */
      }
      continue;
    }
    if (Date.now() > until) throw new Error(`${lock} is held by another process`);
    await sleep(15);
  }
  try {
    const reqs = readLocal(outDir);
    const out = fn(reqs);
    // keep every active request, and the newest finished ones for the record
    const finished = reqs.filter((r) => r.state !== 'pending' && r.state !== 'halt-written');
    const drop = new Set(finished.slice(0, Math.max(0, finished.length - KEEP_FINISHED)).map((r) => r.id));
    const file: RequestsFile = { version: 1, requests: reqs.filter((r) => !drop.has(r.id)) };
    writeOwnAtomicSync(outDir, `${NSA_DIR}/${REQUESTS_FILE}`, `${JSON.stringify(file, null, 1)}\n`);
    return out;
  } finally {
    try {
      removeOwnSync(outDir, lockRel);
    } catch {
      /* broken as stale by someone else */
    }
  }
}

// ---------------------------------------------------------------------------------------------
// what the owner looks at

/** The newest pid each heartbeat_rank{R}.jsonl names, with its last and its boot record's time:
 * hints for process discovery (runRecordHints: the same records every signal is proven with). */
export async function heartbeatPidsOf(host: Host, outDir: string): Promise<HeartbeatPidHint[]> {
  return (await runRecordHints(host, outDir)).heartbeatPids;
}

/** Is any process of the run alive (a rank, or the launcher that may be starting them)? */
export async function runAlive(
  host: Host,
  outDir: string,
): Promise<{ alive: boolean; ranks: number; error: string | null }> {
  const p = await findRunProcesses(host, outDir, { heartbeatPids: await heartbeatPidsOf(host, outDir) });
  if (p.error && p.ranks.length === 0 && !p.launcher) return { alive: true, ranks: 0, error: p.error }; // unknown: assume alive
  const ranks = p.ranks.filter((r) => r.proc.state !== 'Z' && r.proc.state !== 'X').length;
  return { alive: ranks > 0 || p.launcher !== null, ranks, error: null };
}

// ---------------------------------------------------------------------------------------------
// the owner (the agent, or the supervisor)

export interface OwnerIdentity {
  kind: 'agent' | 'supervisor';
  pid: number;
  startTime: string;
}

function ownerActor(me: OwnerIdentity, req: ControlRequest): Actor {
  // the action is the requester's; the log says who carried it out
  return { ...req.who, pid: me.pid, user: `${req.who.user} via nsa-top ${me.kind}` };
}

/**
 * Carries out the run's requests: claims the ones nobody (alive) owns, writes .HALT once a complete
 * checkpoint newer than the request is there, watches the ranks exit. Call tick() about once a
 * second; it never throws.
 */
export class RequestOwner {
  private lastAliveCheck = 0;
  private alive = true;
  constructor(
    private readonly host: Host,
    private readonly runDir: string,
    private readonly outDir: string,
    private readonly me: OwnerIdentity,
    private readonly hooks: {
      onHaltWritten?: (req: ControlRequest) => void;
      say?: (msg: string) => void;
      /** whether the run is still alive; default: its processes in the process table (a supervisor knows its child) */
      alive?: () => Promise<boolean>;
      /** whether this owner may claim a request nobody alive owns (a string: no, and why); default: any */
      mayClaim?: (req: ControlRequest) => boolean | string | Promise<boolean | string>;
    } = {},
  ) {}
  /** requests this owner declined to claim, said once each */
  private readonly declined = new Set<string>();

  private log(
    req: ControlRequest,
    result: ActionRecord['result'],
    detail: string,
    target: Record<string, unknown> = {},
  ): Promise<void> {
    this.hooks.say?.(`request ${req.id}: ${detail}`);
    return auditedEvent(
      this.host,
      this.runDir,
      {
        actor: ownerActor(this.me, req),
        action: 'halt-after-checkpoint',
        target: { request: req.id, path: join(this.outDir, '.HALT'), owner: { ...this.me } },
      },
      { result, detail, target },
    ).then(() => {});
  }

  private mine(r: ControlRequest): boolean {
    return r.owner?.pid === this.me.pid && r.owner.startTime === this.me.startTime;
  }

  /** The number of active requests this owner carries after the tick. */
  async tick(): Promise<number> {
    try {
      return await this.tickInner();
    } catch (e) {
      this.hooks.say?.(`requests: ${(e as Error).message}`);
      return readLocal(this.outDir).filter((r) => this.mine(r) && (r.state === 'pending' || r.state === 'halt-written'))
        .length;
    }
  }

  private async tickInner(): Promise<number> {
    const reqs = readLocal(this.outDir).filter((r) => r.state === 'pending' || r.state === 'halt-written');
    // claim what nobody alive owns
    for (const r of reqs) {
      if (this.mine(r)) continue;
      if (r.owner && (await ownerAlive(this.host, r.owner))) continue;
      const may = this.hooks.mayClaim ? await this.hooks.mayClaim(r) : true;
      if (may !== true) {
        // an earlier run's request: firing it into this run would halt a run nobody asked to halt
        if (!this.declined.has(r.id)) {
          this.declined.add(r.id);
          this.hooks.say?.(
            `request ${r.id} (${r.who.user}, ${clock(r.ts)}) ${typeof may === 'string' ? `is not claimed: ${may}` : `was made before this ${this.me.kind} started and was not carried into it: not claimed`}`,
          );
        }
        continue;
      }
      const prev = r.owner;
      const claimed = await updateRequests(this.outDir, (all) => {
        const x = all.find((y) => y.id === r.id);
        if (!x || (x.state !== 'pending' && x.state !== 'halt-written') || (x.owner && x.owner.pid !== prev?.pid))
          return null;
        x.owner = { ...this.me };
        x.updatedAt = Date.now();
        if (x.state === 'pending') x.note = `waiting for a complete checkpoint written after ${clock(x.ts)}`;
        return { ...x };
      });
      if (claimed)
        await this.log(
          claimed,
          'started',
          `taken over by nsa-top ${this.me.kind} (pid ${this.me.pid})${prev ? ` from pid ${prev.pid}, which is gone` : ''}: ${claimed.note}`,
        );
    }
    const now = Date.now();
    if (now - this.lastAliveCheck >= 3000) {
      this.lastAliveCheck = now;
      this.alive = this.hooks.alive
        ? await this.hooks.alive().catch(() => true)
        : (await runAlive(this.host, this.outDir).catch(() => ({ alive: true }))).alive;
    }
    let active = 0;
    for (const r of readLocal(this.outDir)) {
      if (!this.mine(r) || (r.state !== 'pending' && r.state !== 'halt-written')) continue;
      if (r.state === 'pending') await this.advancePending(r);
      else await this.watchHalt(r);
      const after = readLocal(this.outDir).find((x) => x.id === r.id);
      if (after && (after.state === 'pending' || after.state === 'halt-written')) active++;
    }
    return active;
  }

  private async advancePending(r: ControlRequest): Promise<void> {
    const haltPath = join(this.outDir, '.HALT');
    const haltNow = await this.host.stat(haltPath).catch(() => null);
    if (haltNow) {
      let content = '';
      try {
        content = (await this.host.readFile(haltPath, 4096)).toString('utf8').trim();
      } catch {
        /* vanished */
      }
      const done = await updateRequests(this.outDir, (all) => {
        const x = all.find((y) => y.id === r.id);
        if (!x || x.state !== 'pending') return null;
        Object.assign(x, {
          state: 'halt-written',
          haltAt: haltNow.mtimeMs,
          note: `.HALT appeared meanwhile ("${content}"): nothing written; watching the ranks exit`,
          updatedAt: Date.now(),
        });
        return { ...x };
      });
      if (done) await this.log(done, 'ok', done.note);
      return;
    }
    const c = await checkpointWrittenSince(this.host, this.outDir, r.ts);
    if (c) {
      // decide under the lock: a cancel that got there first wins, and no .HALT is written
      const res = await updateRequests(this.outDir, (all) => {
        const x = all.find((y) => y.id === r.id);
        if (!x || x.state !== 'pending' || !this.mine(x))
          return { req: x ? { ...x } : null, wrote: false, err: null as string | null };
        try {
          createOwnSync(this.outDir, '.HALT', haltContent('manual_stop', x.who));
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
            return { req: { ...x }, wrote: false, err: (e as Error).message };
        }
        Object.assign(x, {
          state: 'halt-written',
          haltAt: Date.now(),
          checkpoint: { path: c.path, step: c.step, mtimeMs: c.mtimeMs },
          note: `${c.name} (step ${c.step}, written ${clock(c.mtimeMs)}) is complete: .HALT written; watching the ranks exit`,
          updatedAt: Date.now(),
        });
        return { req: { ...x }, wrote: true, err: null };
      });
      if (res.err && res.req) {
        await this.log(res.req, 'failed', `could not write .HALT: ${res.err}; still waiting`);
        return;
      }
      if (res.wrote && res.req) {
        await this.log(res.req, 'ok', res.req.note, {
          checkpoint: c.path,
          checkpointStep: c.step,
          checkpointMtimeMs: c.mtimeMs,
        });
        this.hooks.onHaltWritten?.(res.req);
      }
      return;
    }
    if (!this.alive) {
      const failed = await updateRequests(this.outDir, (all) => {
        const x = all.find((y) => y.id === r.id);
        if (!x || x.state !== 'pending') return null;
        Object.assign(x, {
          state: 'failed',
          note: 'the run ended before a new checkpoint appeared: no .HALT written',
          updatedAt: Date.now(),
        });
        return { ...x };
      });
      if (failed) await this.log(failed, 'failed', failed.note);
    }
  }

  private async watchHalt(r: ControlRequest): Promise<void> {
    if (this.alive) return;
    const since = r.haltAt ?? r.ts;
    const done = await updateRequests(this.outDir, (all) => {
      const x = all.find((y) => y.id === r.id);
      if (!x || x.state !== 'halt-written') return null;
      const ck = x.checkpoint ? `; ${x.checkpoint.path.split('/').pop()} is there` : '';
      Object.assign(x, {
        state: 'done',
        note: `the run stopped ${dur((Date.now() - since) / 1000)} after .HALT${ck}`,
        updatedAt: Date.now(),
      });
      return { ...x };
    });
    if (done) await this.log(done, 'ok', done.note);
  }

  /** The owner is going away (a supervisor whose trainer is done): end its requests honestly. */
  async release(why: string): Promise<void> {
    const ended = await updateRequests(this.outDir, (all) => {
      const out: ControlRequest[] = [];
      for (const x of all) {
        if (!this.mine(x) || (x.state !== 'pending' && x.state !== 'halt-written')) continue;
        if (x.state === 'pending')
          Object.assign(x, { state: 'failed', note: `${why} before a new checkpoint appeared: no .HALT written` });
        else Object.assign(x, { state: 'done', note: `${why} after .HALT` });
        x.updatedAt = Date.now();
        out.push({ ...x });
      }
      return out;
    }).catch(() => [] as ControlRequest[]);
    for (const x of ended) await this.log(x, x.state === 'failed' ? 'failed' : 'ok', x.note);
  }
}

// ---------------------------------------------------------------------------------------------
// the agent process (`nsa-top agent`, internal)

/** One agent per out_dir: an exclusive lock file with pid + start time; a dead holder's is replaced. */
async function takeAgentLock(host: Host, outDir: string, me: OwnerIdentity): Promise<boolean> {
  const rel = `${NSA_DIR}/${AGENT_LOCK}`;
  const path = join(outDir, rel);
  for (let i = 0; i < 3; i++) {
    try {
      createOwnSync(outDir, rel, `${JSON.stringify({ pid: me.pid, startTime: me.startTime })}\n`);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return false;
    }
    try {
      const h = JSON.parse(readFileSync(path, 'utf8')) as { pid?: unknown; startTime?: unknown };
      if (
        typeof h.pid === 'number' &&
        typeof h.startTime === 'string' &&
        (await ownerAlive(host, { pid: h.pid, startTime: h.startTime }))
      )
        return false;
    } catch {
      await sleep(100);
      continue;
    }
    try {
      removeOwnSync(outDir, rel);
    } catch {
      /* raced */
    }
  }
  return false;
}

/** May an agent claim a request nobody alive carries (src/checks/carry.ts agentMayClaim, handed down)? */
export type AgentClaimJudge = (x: { supervisor: { pid: number } | null }) => { ok: true } | { ok: false; why: string };

export async function runAgent(
  host: Host,
  outDir: string,
  opts: { tickMs?: number; idleTicks?: number; mayClaim?: AgentClaimJudge } = {},
): Promise<number> {
  const say = (m: string) => process.stdout.write(`[nsa-top agent] ${new Date().toISOString()} ${m}\n`);
  const info = await readProc(host, process.pid).catch(() => null);
  const me: OwnerIdentity = { kind: 'agent', pid: process.pid, startTime: info?.startTime ?? '' };
  const lock = join(outDir, NSA_DIR, AGENT_LOCK);
  if (!(await takeAgentLock(host, outDir, me))) {
    say("another agent carries this run's requests: nothing to do");
    return 0;
  }
  process.on('SIGHUP', () => {
    /* the session that started us is gone: keep going */
  });
  const { runDir } = await resolveRunDirs(host, outDir);
  const judge = opts.mayClaim;
  const owner = new RequestOwner(host, runDir, outDir, me, {
    say,
    // a run with a live supervisor of its own: that supervisor is the carrier (the judge's word)
    ...(judge
      ? {
          mayClaim: async () => {
            const v = judge({ supervisor: await liveSupervisorOf(host, runDir) });
            return v.ok || v.why;
          },
        }
      : {}),
  });
  say(`carrying the requests of ${outDir}`);
  let idle = 0;
  try {
    // leave once nothing is left to carry (a few idle looks, so a request being submitted is seen)
    while (idle < (opts.idleTicks ?? 5)) {
      const n = await owner.tick();
      idle = n > 0 ? 0 : idle + 1;
      await sleep(opts.tickMs ?? 1000);
    }
  } finally {
    try {
      if (JSON.parse(readFileSync(lock, 'utf8')).pid === process.pid) removeOwnSync(outDir, `${NSA_DIR}/${AGENT_LOCK}`);
    } catch {
      /* not ours */
    }
  }
  say('no request left: exiting');
  return 0;
}

function spawnAgent(outDir: string): number {
  return spawnSelfDetached(['agent'], {
    root: outDir,
    log: `${NSA_DIR}/${AGENT_LOG}`,
    cwd: outDir,
    env: { [AGENT_ENV]: outDir },
    what: 'nsa-top agent',
  });
}

// ---------------------------------------------------------------------------------------------
// asking and cancelling

export interface RequestOutcome {
  record: ActionRecord;
  request: ControlRequest | null;
}

/**
 * Grace after .HALT for this run, the one value every surface counts (the halt window, escalation,
 * the "ranks ignore .HALT" alert): its profile's stop.halt_grace_s; for a run without a profile,
 * NSA_TOP_HALT_GRACE_S when set, else NSA_WATCH_HALT_GRACE_S (the watchdog's name), else the
 * profile default (300 s).
 */
export async function haltGraceS(host: Host, runDir: string): Promise<number> {
  const plan = await readLaunchPlan(host, runDir).catch(() => null);
  const g = plan?.stop?.halt_grace_s;
  if (typeof g === 'number' && Number.isFinite(g) && g >= 0) return g;
  for (const name of ['NSA_TOP_HALT_GRACE_S', 'NSA_WATCH_HALT_GRACE_S']) {
    const raw = process.env[name];
    const env = Number(raw);
    if (raw && raw.trim() !== '' && Number.isFinite(env) && env >= 0) return env;
  }
  return DEFAULT_HALT_GRACE_S;
}

/**
 * Asks for a halt after the next complete checkpoint and returns as soon as a detached owner (the
 * supervisor, else a new agent) has taken the request. Refused: read-only, not on the training
 * box, a .HALT already there, no process of the run alive.
 */
export async function submitHaltAfterCheckpoint(
  host: Host,
  run: RunRef,
  actor: Actor,
  opts: ControlOptions & { claimTimeoutMs?: number } = {},
): Promise<RequestOutcome> {
  const dirs = await runDirsOf(host, run);
  const { runDir, outDir, supervised } = dirs;
  const haltPath = join(outDir, '.HALT');
  let request: ControlRequest | null = null;
  const record = await audited(
    host,
    dirs,
    { actor, action: 'halt-after-checkpoint', target: { path: haltPath } },
    async (ctx): Promise<Outcome> => {
      if (host.kind !== 'local')
        return {
          result: 'refused',
          detail:
            'a halt after the next checkpoint is carried by a process on the training box: run `nsa-top halt RUN --after-checkpoint` there',
        };
      const existing = activeRequest(readLocal(outDir));
      if (existing && existing.owner && (await ownerAlive(host, existing.owner))) {
        request = existing;
        return {
          result: 'ok',
          detail: `already requested by ${existing.who.user} at ${clock(existing.ts)}: ${existing.note}`,
          target: { request: existing.id },
          unrecorded: 'the request it names is recorded already, and its owner records each step',
        };
      }
      const halt = await host.stat(haltPath).catch(() => null);
      if (halt) {
        let content = '';
        try {
          content = (await host.readFile(haltPath, 4096)).toString('utf8').trim();
        } catch {
          /* vanished */
        }
        return {
          result: 'refused',
          detail: `.HALT is already there ("${content}"): the run is stopping at its next step; nothing requested`,
        };
      }
      // who carries it: a live supervisor picks it up within a second; otherwise an agent of our own
      const sup = supervised ? await readSupervisorState(host, dirs) : null;
      const supAlive =
        !!sup?.supervisor?.startTime &&
        supervisorRestarts(sup.state) &&
        (await verifyProcess(host, sup.supervisor).catch(() => false));
      if (!supAlive && !(await runAlive(host, outDir)).alive)
        return {
          result: 'refused',
          detail: 'no process of this run is running (finished or stopped): nothing to halt',
        };
      const graceS = await haltGraceS(host, runDir);
      const now = Date.now();
      const req: ControlRequest = existing ?? {
        id: `${now.toString(36)}-${process.pid.toString(36)}`,
        kind: 'halt-after-checkpoint',
        ts: now,
        who: actor,
        state: 'pending',
        owner: null,
        graceS,
        note: `waiting for a complete checkpoint written after ${clock(now)}`,
        updatedAt: now,
      };
      if (existing) {
        // its owner is gone: hand it to whoever comes next
        await updateRequests(outDir, (all) => {
          const x = all.find((y) => y.id === existing.id);
          if (x && x.state === 'pending') x.owner = null;
        });
        req.owner = null;
      } else {
        try {
          await updateRequests(outDir, (all) => {
            all.push(req);
          });
        } catch (e) {
          // a durable request lives in .nsa-top/requests.json: a linked or unwritable .nsa-top
          // cannot keep one. A halt now does not need it (it fails open): say so, not just why.
          return {
            result: 'failed',
            detail: `the request cannot be kept: ${(e as Error).message}; no .HALT will be written for it — a halt now (\`nsa-top halt RUN\`, the cockpit's h → now) is not blocked by this`,
          };
        }
        await ctx.progress(
          'started',
          `requested: .HALT after the next complete checkpoint written after ${clock(now)}`,
          { request: req.id },
        );
      }
      const got = await handToOwner(host, outDir, req, supAlive, opts.claimTimeoutMs);
      if ('failed' in got) {
        request = got.request;
        return { result: 'failed', detail: got.failed, target: { request: req.id, ...got.target } };
      }
      request = got.request;
      const owner = got.request.owner!;
      const who =
        owner.kind === 'supervisor'
          ? `the supervisor (pid ${owner.pid})`
          : `nsa-top agent (pid ${owner.pid}, detached)`;
      return {
        result: 'started',
        detail: `${who} writes .HALT once a complete checkpoint written after ${clock(req.ts)} appears; it outlives this ${process.stdout.isTTY ? 'terminal' : 'process'}`,
        target: { request: req.id, owner },
        unrecorded: "its 'started' line is recorded above, and its owner records each step",
      };
    },
    opts,
  );
  return { record, request };
}

/**
 * Waits until a detached process has claimed `req`: the live supervisor, else a new agent. When
 * none does, the request is marked failed (never left looking pending) and why is returned.
 */
async function handToOwner(
  host: Host,
  outDir: string,
  req: ControlRequest,
  supAlive: boolean,
  claimTimeoutMs: number | undefined,
): Promise<{ request: ControlRequest } | { failed: string; request: ControlRequest | null; target: object }> {
  const waitClaim = async (ms: number) => {
    const until = Date.now() + ms;
    for (;;) {
      const x = readLocal(outDir).find((y) => y.id === req.id);
      if (!x || x.state !== 'pending' || x.owner) return x ?? null;
      if (Date.now() > until) return x;
      await sleep(100);
    }
  };
  let got = supAlive ? await waitClaim(claimTimeoutMs ?? 5000) : null;
  let agentPid: number | null = null;
  if (!got?.owner) {
    try {
      agentPid = spawnAgent(outDir);
    } catch (e) {
      await updateRequests(outDir, (all) => {
        const x = all.find((y) => y.id === req.id);
        if (x && x.state === 'pending' && !x.owner)
          Object.assign(x, {
            state: 'failed',
            note: `no process could carry it: ${(e as Error).message}`,
            updatedAt: Date.now(),
          });
      });
      return { failed: `could not start nsa-top agent: ${(e as Error).message}`, request: null, target: {} };
    }
    got = await waitClaim(claimTimeoutMs ?? 8000);
  }
  if (got?.owner) return { request: got };
  // nobody took it: say so, never leave it looking pending
  const failed = await updateRequests(outDir, (all) => {
    const x = all.find((y) => y.id === req.id);
    if (x && x.state === 'pending' && !x.owner)
      Object.assign(x, { state: 'failed', note: 'no process took the request', updatedAt: Date.now() });
    return x ? { ...x } : null;
  });
  if (failed?.owner) return { request: failed };
  return {
    failed: `nsa-top agent (pid ${agentPid}) did not take the request; see ${join(outDir, NSA_DIR, AGENT_LOG)}. Nothing will be written`,
    request: failed,
    target: { agentPid },
  };
}

/** Cancels the active request (or the one named). Too late once .HALT is written: then it says so. */
export async function cancelRequest(
  host: Host,
  run: RunRef,
  actor: Actor,
  opts: ControlOptions & { id?: string } = {},
): Promise<RequestOutcome> {
  const dirs = await runDirsOf(host, run);
  const { outDir } = dirs;
  let request: ControlRequest | null = null;
  const record = await audited(
    host,
    dirs,
    { actor, action: 'cancel-request', target: {} },
    async (): Promise<Outcome> => {
      if (host.kind !== 'local')
        return { result: 'refused', detail: 'run `nsa-top halt RUN --cancel` on the training box' };
      const res = await updateRequests(outDir, (all) => {
        const x = opts.id ? all.find((y) => y.id === opts.id) : activeRequest(all);
        if (!x) return { req: null, was: null as string | null };
        const was = x.state;
        if (x.state === 'pending')
          Object.assign(x, {
            state: 'cancelled',
            cancelledBy: actor,
            note: `cancelled by ${actor.user} before a new checkpoint; no .HALT written`,
            updatedAt: Date.now(),
          });
        return { req: { ...x }, was };
      });
      if (!res.req)
        return {
          result: 'refused',
          detail: 'no pending request to cancel',
          unrecorded: 'nothing was asked of the run',
        };
      request = res.req;
      const target = { request: res.req.id, kind: res.req.kind };
      if (res.was === 'pending')
        return {
          result: 'ok',
          detail: `cancelled the halt after checkpoint requested by ${res.req.who.user} at ${clock(res.req.ts)}; no .HALT written`,
          target,
        };
      if (res.was === 'halt-written')
        return {
          result: 'refused',
          detail: `too late: .HALT was written at ${clock(res.req.haltAt ?? res.req.updatedAt)} (${res.req.note}); the ranks are stopping`,
          target,
        };
      return {
        result: 'refused',
        detail: `request already ${res.was}: ${res.req.note}`,
        target,
        unrecorded: 'the request had ended already; its end is recorded',
      };
    },
    opts,
  );
  return { record, request };
}

// ---------------------------------------------------------------------------------------------
// taking over a request whose carrier died

/**
 * A request in force whose carrier (the supervisor or an agent) died — SIGKILL, the OOM killer —
 * would never write its .HALT. Any live observer on the training box (a cockpit, the watchdog)
 * calls this: a new `nsa-top agent` claims it (RequestOwner claims what nobody alive owns). Race-safe
 * between two takers: one agent per out_dir (its exclusive lock file), and the claim is decided under
 * requests.lock (a claim only replaces the dead owner it saw). Audited: the record names the request,
 * the dead carrier and the new one; a taker that lost the race records nothing.
 */
export async function takeOverRequest(
  host: Host,
  dirs: RunDirs,
  actor: Actor,
  requestId: string,
  opts: ControlOptions & { claimTimeoutMs?: number } = {},
): Promise<ActionRecord> {
  const { outDir } = dirs;
  const before = readLocal(outDir).find((r) => r.id === requestId) ?? null;
  const dead = before?.owner ?? null;
  return audited(
    host,
    dirs,
    {
      actor,
      action: 'halt-after-checkpoint',
      target: { request: requestId, path: join(outDir, '.HALT'), takeover: true, from: dead },
    },
    async (): Promise<Outcome> => {
      if (host.kind !== 'local')
        return {
          result: 'refused',
          detail:
            'a request is carried by a process on the training box: run `nsa-top halt RUN --after-checkpoint` (or a watchdog) there',
        };
      const carriedBy = (x: ControlRequest | undefined) =>
        x?.owner && (x.owner.pid !== dead?.pid || x.owner.startTime !== dead?.startTime) ? x.owner : null;
      const now0 = readLocal(outDir).find((r) => r.id === requestId);
      if (!now0 || (now0.state !== 'pending' && now0.state !== 'halt-written'))
        return {
          result: 'ok',
          detail: `request ${requestId} is no longer in force`,
          unrecorded: 'nothing to take over',
        };
      const other = carriedBy(now0);
      if (other && (await ownerAlive(host, other)))
        return {
          result: 'ok',
          detail: `already taken over by nsa-top ${other.kind} (pid ${other.pid})`,
          unrecorded: 'its new carrier recorded the take-over',
        };
      if (now0.owner && (await ownerAlive(host, now0.owner)))
        return { result: 'ok', detail: 'its carrier is alive', unrecorded: 'nothing to take over' };
      // a live supervisor of the run carries its requests and claims each of its run's within a
      // second: one it left is an earlier run's, and an agent started for it would not claim it
      // (src/checks/carry.ts agentMayClaim) — none is started
      const sup = await liveSupervisorOf(host, dirs.runDir);
      if (sup && (sup.pid !== dead?.pid || sup.startTime !== dead?.startTime))
        return {
          result: 'ok',
          detail: `not taken over: the run's supervisor (pid ${sup.pid}) lives and carries its requests; it did not claim this one (an earlier run's)`,
          unrecorded: 'nothing taken over',
        };
      let agentPid: number;
      try {
        agentPid = spawnAgent(outDir);
      } catch (e) {
        return { result: 'failed', detail: `could not start nsa-top agent: ${(e as Error).message}` };
      }
      const until = Date.now() + (opts.claimTimeoutMs ?? 8000);
      for (;;) {
        const x = readLocal(outDir).find((r) => r.id === requestId);
        const by = carriedBy(x);
        if (by && by.pid !== agentPid && (await ownerAlive(host, by)))
          return {
            result: 'ok',
            detail: `taken over by nsa-top ${by.kind} (pid ${by.pid}), another taker's`,
            unrecorded: 'the taker that won recorded the take-over',
          };
        if (by && (await ownerAlive(host, by)))
          return {
            result: 'started',
            detail: `the carrier of ${x!.who.user}'s halt after checkpoint (${dead ? `${dead.kind} pid ${dead.pid}` : 'none'}) is gone: nsa-top ${by.kind} (pid ${by.pid}) carries it now — ${x!.note}`,
            target: { owner: by, agentPid },
          };
        if (!x || (x.state !== 'pending' && x.state !== 'halt-written'))
          return { result: 'ok', detail: `request ${requestId} ended meanwhile: ${x?.note ?? 'gone'}` };
        if (Date.now() > until)
          return {
            result: 'failed',
            detail: `nsa-top agent (pid ${agentPid}) did not take the request over; see ${join(outDir, NSA_DIR, AGENT_LOG)}`,
            target: { agentPid },
          };
        await sleep(100);
      }
    },
    opts,
  );
}
