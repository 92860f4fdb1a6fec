// What the cockpit's keys can do to a run, as one object the UI calls. No Ink here: every action
// goes through src/trainer/control/actions and src/trainer/launch (verified pids, each effect run by
// src/trainer/control/audit.ts audited(), which refuses read-only mode with the same words as the CLI
// and the watchdog). Read-only is refused at the key and in the dialog too; here only where no
// audited call would be made at all (no rank to signal, a relaunch function injected by the command).
import type { Host } from '../remote/host.js';
import type { ActionRecord, Actor } from '../trainer/control/types.js';
import { READ_ONLY_WHY, supervisorRestarts } from '../checks/control.js';
import { READ_ONLY_REFUSAL } from '../trainer/control/audit.js';
import { withoutResume } from '../trainer/launch/adopt.js';
import {
  acknowledgeAlert,
  currentActor,
  dumpAll,
  escalate,
  rankTarget,
  removeStaleHalt,
  requestHalt,
  type AlertRef,
  type RankTarget,
} from '../trainer/control/actions.js';
import { cancelRequest, submitHaltAfterCheckpoint } from '../trainer/control/requests.js';
import type { NodeHosts } from '../trainer/control/nodes.js';
import type { RunDirs, RunRef } from '../trainer/run/rundirs.js';
import { describeReadopt, prepareRelaunch, stopRun, supervisorStatus } from '../trainer/launch/launch.js';
import type { CockpitState } from './state.js';
import { judgeAdoption } from '../checks/preflight.js';

export interface RankDumpResult {
  rank: number;
  pid: number | null;
  /** its node (a multi-node run, --node) */
  host?: string;
  outcome: 'dumped' | 'no-answer' | 'refused';
  file?: string | null;
  why?: string;
  /** refused only because the rank has no SIGUSR1 handler yet (still starting): try again later */
  notReady?: true;
}

export interface DumpOutcome {
  results: RankDumpResult[];
  pySpy: boolean;
  /** a multi-node run: nodes that could not be reached, their ranks unknown (none signalled there) */
  outOfReach?: { host: string; why: string }[];
}

export interface ActionOutcome {
  ok: boolean;
  result: ActionRecord['result'];
  detail: string;
}

export interface CockpitActions {
  readonly readOnly: boolean;
  /** every proven rank, or only `only.ranks` (the one selected in the Ranks panel), through the same proof */
  dump(onProgress: (line: string) => void, only?: { ranks: number[] }): Promise<DumpOutcome>;
  /**
   * 'now': a supervised run with a live supervisor gets its stop escalation (.HALT, grace, SIGINT,
   * SIGKILL, carried by the supervisor); otherwise .HALT. 'after-checkpoint': a durable request
   * carried by the supervisor or a detached agent — it outlives this cockpit.
   */
  halt(mode: 'now' | 'after-checkpoint', onProgress?: (line: string) => void): Promise<ActionOutcome>;
  /** cancel the pending durable request (any cockpit can; too late once its .HALT is written) */
  cancelHalt(): Promise<ActionOutcome>;
  escalate(sig: 'SIGINT' | 'SIGKILL'): Promise<ActionOutcome>;
  /** `steps`: train to N (a FINISHED run is relaunched only with N past the steps it trained) */
  relaunch(opts: RelaunchOpts): Promise<ActionOutcome>;
  /** acknowledge one alert episode: a line in actions.jsonl that every cockpit on the run shows */
  ack(alert: AlertRef): Promise<ActionOutcome>;
  /** what a relaunch would do, or why it cannot work: asked before the operator types anything */
  /** `steps`: a FINISHED run relaunched to N — what will run is the command with --steps N */
  prepareRelaunch?(steps?: number | null): Promise<RelaunchInfo>;
}

/** What `r` would do (src/trainer/launch/launch.ts prepareRelaunch), as plain data for the dialog. */
export interface RelaunchInfo {
  /** why it cannot work and what to do instead; null = it can */
  refusal: string | null;
  /** the checkpoint it resumes from and why; null with fresh=false: no complete checkpoint */
  resume: { name: string; path: string; step: number; segment: number | null; why: string } | null;
  /** a run that never ran starts fresh */
  fresh: boolean;
  warnings: string[];
  skipped: string[];
  /** a run started by hand: the command that will run again (without --resume) */
  adopted: string | null;
  /**
   * what will run, to show before the name is typed: working directory, exact command, every
   * environment variable set (src/trainer/launch/willrun.ts describeWillRun; [] when unknown)
   */
  willRun?: string[];
  /** pointer files not followed (a copy's, a planted one), one line each */
  notFollowed?: string[];
  /** its supervisor died and the trainer runs on: what the relaunch does instead (re-adopts it), one line */
  readopt?: string | null;
}

/** What the relaunch dialog asks for: remove a stale .HALT, and (a FINISHED run) train to `steps`. */
export interface RelaunchOpts {
  removeStaleHalt: boolean;
  steps?: number;
}

/** The supervisor's relaunch, injected by the command (src/trainer/launch). */
export type RelaunchFn = (opts: RelaunchOpts) => Promise<ActionOutcome>;
/** The supervisor's stop escalation, injected by the command; null when the run has no live supervisor. */
export type StopFn = () => Promise<ActionOutcome | null>;

function outcome(r: ActionRecord): ActionOutcome {
  return { ok: r.result === 'ok' || r.result === 'started', result: r.result, detail: r.detail };
}

/** a multi-node run is relaunched by its own launcher on every node (launch over SSH is not built) */
const MULTI_NODE_RELAUNCH =
  'relaunch over several nodes is not built: start the job again on every node with your launcher (torchrun, srun)';

const refused = (): ActionOutcome => ({ ok: false, result: 'refused', detail: READ_ONLY_REFUSAL });

export function rankTargets(s: CockpitState | null): RankTarget[] {
  return (s?.procs?.ranks ?? []).map(rankTarget);
}

export function createActions(o: {
  host: Host;
  runDir: string;
  /** the run resolved once at the edge: the halt path writes where it is given */
  dirs?: RunDirs;
  readOnly: boolean;
  state: () => CockpitState | null;
  relaunch?: RelaunchFn;
  stop?: StopFn;
  changed?: () => void;
  /** a multi-node run (--node): each rank's signal goes to its own node (src/trainer/control/nodes.ts) */
  nodes?: NodeHosts;
}): CockpitActions {
  const { host, runDir, readOnly, nodes } = o;
  // the run as resolved at the edge, for what acts in its out_dir (.HALT, dumps, the action log);
  // what reads the launcher dir and its supervisor (escalate's proof, a relaunch) is resolved when
  // taken: a hand-launched run relaunched under a supervisor gets a launcher dir while we watch
  const run: RunRef = o.dirs ?? runDir;
  const changed = () => o.changed?.();
  return {
    readOnly,
    async dump(onProgress, only) {
      const wanted = (rank: number | null | undefined) => !only || (rank != null && only.ranks.includes(rank));
      const targets = rankTargets(o.state()).filter((t) => wanted(t.rank));
      if (readOnly)
        return {
          results: targets.map((t) => ({ rank: t.rank, pid: t.pid, outcome: 'refused', why: READ_ONLY_REFUSAL })),
          pySpy: false,
        };
      // processes a heartbeat or an argv named, without proof that they are this run's ranks: never
      // signalled, and the dialog says why
      const unproven: RankDumpResult[] = (o.state()?.procs?.unproven ?? [])
        .filter((u) => !only || wanted(u.rank))
        .map((u) => ({
          rank: u.rank ?? -1,
          pid: u.pid,
          ...(u.host !== undefined ? { host: u.host } : {}),
          outcome: 'refused',
          why: u.why,
        }));
      if (targets.length === 0) {
        const why = unproven.map((u) => u.why).join(' ');
        const which = only ? `rank ${only.ranks.join(', ')} has no process` : 'no rank process of this run is';
        throw new Error(`${which} proven: nothing signalled${why ? `. ${why}` : ''}`);
      }
      const actor = await currentActor(host);
      const r = await dumpAll(host, run, targets, actor, {
        readOnly,
        onProgress,
        ...(nodes ? { nodes } : {}),
        ...(only ? { ranks: only.ranks } : {}),
      });
      changed();
      return {
        pySpy: r.pySpy,
        ...(r.outOfReach ? { outOfReach: r.outOfReach } : {}),
        results: [
          ...r.perRank.map((p) => ({
            rank: p.rank,
            pid: p.pid,
            ...(p.host !== undefined ? { host: p.host } : {}),
            outcome: p.status,
            file: p.file ?? null,
            why: p.why,
            ...(p.notReady ? { notReady: true as const } : {}),
          })),
          ...unproven,
        ],
      };
    },
    async halt(mode, onProgress) {
      const actor = await currentActor(host);
      let r: ActionOutcome;
      if (mode === 'after-checkpoint') {
        onProgress?.('handing the request to a detached process…');
        r = outcome((await submitHaltAfterCheckpoint(host, run, actor, { readOnly })).record);
      } else {
        const viaSupervisor = o.stop ? await o.stop() : null;
        r = viaSupervisor ?? outcome(await requestHalt(host, run, 'now', actor, { readOnly }));
      }
      changed();
      return r;
    },
    async cancelHalt() {
      const actor = await currentActor(host);
      const r = outcome((await cancelRequest(host, run, actor, { readOnly })).record);
      changed();
      return r;
    },
    async escalate(sig) {
      if (readOnly) return refused();
      const targets = rankTargets(o.state());
      if (targets.length === 0) return { ok: false, result: 'failed', detail: 'no rank processes left to signal' };
      const actor = await currentActor(host);
      const r = outcome(await escalate(host, runDir, targets, sig, actor, { readOnly, ...(nodes ? { nodes } : {}) }));
      changed();
      return r;
    },
    async ack(alert) {
      const actor = await currentActor(host);
      const r = outcome(await acknowledgeAlert(host, run, alert, actor, { readOnly }));
      changed();
      return r;
    },
    async relaunch(opts) {
      if (readOnly) return refused();
      if (nodes) return { ok: false, result: 'refused', detail: MULTI_NODE_RELAUNCH };
      if (opts.removeStaleHalt && !o.relaunch) {
        const actor = await currentActor(host);
        const r = await removeStaleHalt(host, run, actor, { readOnly });
        if (r.result !== 'ok') return outcome(r);
      }
      if (!o.relaunch)
        return {
          ok: false,
          result: 'failed',
          detail: 'this run has no supervisor: relaunch it with `nsa-top relaunch` or your launcher',
        };
      const r = await o.relaunch(opts);
      changed();
      return r;
    },
    async prepareRelaunch(steps): Promise<RelaunchInfo> {
      const none: RelaunchInfo = {
        refusal: null,
        resume: null,
        fresh: false,
        warnings: [],
        skipped: [],
        adopted: null,
        willRun: [],
        notFollowed: [],
      };
      if (readOnly) return { ...none, refusal: READ_ONLY_WHY };
      if (nodes) return { ...none, refusal: MULTI_NODE_RELAUNCH };
      if (!o.relaunch)
        return {
          ...none,
          refusal: 'this cockpit cannot start a supervisor: run `nsa-top relaunch RUN_DIR` on the training box',
        };
      if (host.kind !== 'local')
        return {
          ...none,
          refusal: 'relaunch starts the supervisor on the training box: run `nsa-top relaunch RUN_DIR` there',
        };
      const p = await prepareRelaunch(host, runDir, { judgeAdoption, ...(steps != null ? { steps } : {}) });
      const f = p.pick?.found ?? null;
      return {
        refusal: p.refusal,
        resume: f ? { name: f.name, path: f.path, step: f.step, segment: f.segment, why: f.why } : null,
        fresh: p.pick === null,
        warnings: p.pick?.warnings ?? [],
        skipped: p.pick?.skipped ?? [],
        adopted: p.adopted
          ? `(cd ${p.adopted.launcher.cwd} && ${withoutResume(p.adopted.launcher.argv).join(' ')})${p.adopted.config ? ` with CONFIG=${p.adopted.config}` : ''}`
          : null,
        willRun: p.willRun?.lines ?? [],
        notFollowed: p.notFollowed,
        readopt: p.readopt ? describeReadopt(p.readopt) : null,
      };
    },
  };
}

/**
 * The cockpit's "halt now" on a supervised run: the supervisor's stop escalation (it writes .HALT and
 * escalates after the profile's grace, and outlives the cockpit). null when no live supervisor runs it.
 */
export function supervisorStopFn(host: Host, runDir: string, actor: Actor, readOnly: boolean): StopFn {
  return async () => {
    if (host.kind !== 'local') return null;
    const sup = await supervisorStatus(host, runDir).catch(() => null);
    if (!sup?.alive || !sup.state || !supervisorRestarts(sup.state.state)) return null;
    return outcome(await stopRun(host, runDir, actor, { readOnly, reason: 'halt from the cockpit' }));
  };
}
