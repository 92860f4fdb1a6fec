// `nsa-top stop RUN --node …`: the stop escalation over a multi-node run, carried out by this command
// in the foreground (a multi-node run has no one supervisor to hand it to): the one .HALT in the run
// dir on the first node (requestHalt, audited), then — for the ranks still alive after the run's halt
// grace — SIGINT, and SIGKILL a SIGINT grace later (escalate, audited), each rank checked (pid + start
// time, proven a rank of this run) and signalled on its own node's connection. Each rank's liveness
// is the one observation merged over the nodes (src/trainer/run/nodes.ts); a node that cannot be
// reached is named in the outcome, never taken for a node whose ranks have ended.
import { Checker, thresholdsFromEnv } from '../checks/index.js';
import { Observer } from '../cockpit/observe.js';
import type { Host } from '../remote/host.js';
import { currentActor, escalate, rankTarget, requestHalt, type RankTarget } from '../trainer/control/actions.js';
import { haltGraceS } from '../trainer/control/requests.js';
import type { ActionRecord } from '../trainer/control/types.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import { readLaunchPlan } from '../trainer/run/launchstate.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { dur } from '../format.js';
import { exitCodeOf } from './control-cli.js';
import { refusedByState, reportRefusal } from './fit.js';
import { nodeHosts } from './nodes.js';
import { watchHangUp } from '../stdout.js';

/** the SIGINT grace without a profile (docs/launch.md: stop.sigint_grace_s) */
const DEFAULT_SIGINT_GRACE_S = 60;

export interface StopNodesOptions {
  readOnly: boolean;
  json: boolean;
  /** s after .HALT before SIGINT (default: the profile's stop.halt_grace_s, else the run's halt grace) */
  haltGraceS?: number;
  /** s after SIGINT before SIGKILL (default: the profile's stop.sigint_grace_s, else 60) */
  sigintGraceS?: number;
  /** why (--reason): in every record the stop writes, as the one-host stop's */
  reason?: string;
  /** the .HALT step already taken (the one-host stop asked the supervisor first, and found none) */
  halted?: ActionRecord;
}

interface Left {
  /** the proven ranks still running, as targets on their nodes */
  targets: RankTarget[];
  /** why the ranks of some node are not known now (its node does not answer) */
  unknown: string | null;
}

/** how long ago (s, by the run host's clock) .HALT was written; 0 when it is not there or unknown */
async function haltAgeS(observer: Observer): Promise<number> {
  const run = (await observer.observe()).run;
  const at = run.control.halt.mtimeMs;
  if (!run.control.halt.present || at === null) return 0;
  return Math.max(0, ((run.hostNowMs || Date.now()) - at) / 1000);
}

export async function stopNodes(host: Host, dirs: RunDirs, nodes: NodeProcesses, o: StopNodesOptions): Promise<number> {
  const actor = await currentActor(host);
  // (a stop whose .HALT is written was judged before it: the ranks leaving meanwhile is its success)
  if (!o.readOnly && !o.halted) {
    const no = await refusedByState(host, dirs, 'stop', { nodes });
    if (no) return reportRefusal('stop', o.json, { action: 'halt', runDir: dirs.runDir }, no);
  }
  const plan = await readLaunchPlan(host, dirs.runDir).catch(() => null);
  const haltGrace = o.haltGraceS ?? (await haltGraceS(host, dirs.runDir));
  const sigintGrace = o.sigintGraceS ?? plan?.stop?.sigint_grace_s ?? DEFAULT_SIGINT_GRACE_S;
  const hosts = nodeHosts(nodes);
  const observer = new Observer(host, { dirs, nodes, checker: new Checker(thresholdsFromEnv(process.env)) });
  const left = async (): Promise<Left> => {
    const obs = await observer.observe();
    const live = (obs.procs?.ranks ?? []).filter((r) => r.proc.state !== 'Z' && r.proc.state !== 'X');
    return {
      targets: live.map(rankTarget),
      unknown: obs.procs?.error ?? (obs.procs ? null : 'the process table could not be read'),
    };
  };
  /** polls until no rank runs (and every node answers), or `s` seconds */
  const waitGone = async (s: number): Promise<Left> => {
    const until = Date.now() + s * 1000;
    for (;;) {
      const l = await left();
      if ((l.targets.length === 0 && l.unknown === null) || Date.now() >= until) return l;
      await new Promise((r) => setTimeout(r, Math.min(500, Math.max(50, until - Date.now()))));
    }
  };
  const steps: ActionRecord[] = [];
  const say = (line: string) => {
    if (!o.json) process.stdout.write(`${line}\n`);
  };
  // The escalation outlives the terminal: an SSH link dropped mid-stop hangs up this process and
  // closes its output, and a stop that died there would leave a hung run with its .HALT and nothing
  // else, in silence. It goes on (each step in actions.jsonl); what it can no longer print is lost.
  const hangUp = watchHangUp([process.stdout, process.stderr]);
  try {
    return await escalation();
  } finally {
    hangUp.stopListening();
    // its exit code, not an abort in node's own exit (which restores the terminal it started on)
    hangUp.release();
  }

  async function escalation(): Promise<number> {
    const t0 = Date.now();
    const why = o.reason ? { reason: o.reason } : {};
    const halt = o.halted ?? (await requestHalt(host, dirs, 'now', actor, { readOnly: o.readOnly, ...why }));
    steps.push(halt);
    say(`stop: .HALT ${halt.result}: ${halt.detail}`);
    let l: Left | null = null;
    if (halt.result !== 'refused' && halt.result !== 'failed') {
      // the grace counts from the .HALT the ranks were given: one written long ago (a hung exit found
      // in the morning) has had its grace, and SIGINT goes now
      const age = await haltAgeS(observer);
      const waitS = Math.max(0, haltGrace - age);
      const on = hosts.labels.join(', ');
      say(
        age >= 2
          ? `stop: .HALT is ${dur(age, 'precise')} old (grace ${dur(haltGrace, 'precise')}): ${waitS > 0 ? `waiting up to ${dur(waitS, 'precise')} more for the ranks on ${on} to stop` : 'its grace is over'}`
          : `stop: waiting up to ${haltGrace} s for the ranks on ${on} to stop`,
      );
      l = await waitGone(waitS);
      for (const sig of ['SIGINT', 'SIGKILL'] as const) {
        if (l.targets.length === 0) break;
        const rec = await escalate(host, dirs, l.targets, sig, actor, { readOnly: o.readOnly, nodes: hosts, ...why });
        steps.push(rec);
        say(`stop: ${sig} ${rec.result}: ${rec.detail}`);
        // nothing sent (read-only, or no rank proven any more): what is left is looked at once more
        l = await waitGone(rec.result === 'refused' ? 1 : sig === 'SIGINT' ? sigintGrace : 10);
        if (rec.result === 'refused') break;
      }
    }
    const ended = l !== null && l.targets.length === 0 && l.unknown === null;
    const by = steps.length > 1 ? steps[steps.length - 1]!.action.replace('escalate-', '') : '.HALT';
    const detail = ended
      ? `every rank on ${hosts.labels.join(', ')} stopped (${by}) in ${((Date.now() - t0) / 1000).toFixed(1)} s`
      : l === null
        ? `.HALT ${halt.result}: ${halt.detail}`
        : `${l.targets.length ? `still running: ${l.targets.map((t) => `rank ${t.rank}${t.host !== undefined ? ` on ${t.host}` : ''} pid ${t.pid}`).join(', ')}` : ''}${l.targets.length && l.unknown ? '; ' : ''}${l.unknown ?? ''}`;
    const result: ActionRecord['result'] = ended ? 'ok' : l === null ? halt.result : 'partial';
    const code = exitCodeOf(result);
    if (o.json)
      process.stdout.write(
        `${JSON.stringify(
          {
            command: 'stop',
            result,
            exitCode: code,
            detail,
            nodes: hosts.labels,
            reason: o.reason ?? null,
            haltGraceS: haltGrace,
            sigintGraceS: sigintGrace,
            steps: steps.map((s) => ({ action: s.action, result: s.result, detail: s.detail, target: s.target })),
          },
          null,
          2,
        )}\n`,
      );
    else (code === 0 ? process.stdout : process.stderr).write(`stop ${result}: ${detail}\n`);
    return code;
  }
}
