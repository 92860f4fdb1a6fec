// What `status --node` shows of each node's supervisor of a multi-node launch, in text and --json.
// Apart from launch-nodes.ts, which loads the launch's profile parsers that `status` never needs.
import { firstGoneOf } from '../checks/boot.js';
import { sanitize } from '../sanitize.js';
import type { SupervisorState } from '../trainer/control/types.js';
import type { NodeSupervisor } from '../trainer/run/nodesrecord.js';

/**
 * A supervisor's last trainer exit and the rank it saw go first (its own process looks), or null:
 * status --json `supervisor.lastExit` and each node's `supervisors[].lastExit`.
 */
export function lastExitOf(st: SupervisorState | null) {
  const last = st?.exitCodes.at(-1);
  if (!st || !last) return null;
  const g = firstGoneOf(st, last.at);
  return {
    at: last.at,
    code: last.code,
    signal: last.signal,
    cause: st.lastCause ?? null,
    firstGone: g ? { rank: g.rank, pid: g.pid, at: g.at, how: g.how, node: g.node ?? null } : null,
  };
}

/** `supervisors` lines of a multi-node launch: each node's supervisor as its node sees it. */
export function formatNodeSupervisors(sups: readonly NodeSupervisor[]): string {
  return (
    sups
      .map((s, i) => {
        const st = s.state;
        const what = s.error
          ? `UNREACHABLE: ${s.error}`
          : !st
            ? `no supervisor state in ${s.dir}`
            : `${st.state}${st.supervisor ? ` (supervisor pid ${st.supervisor.pid}` : ' ('}${st.child ? `, torchrun pid ${st.child.pid}` : ''}${st.restarts ? `, restarts ${st.restarts}/${st.maxRestarts}` : ''})${st.note ? `: ${st.note}` : ''}${exitText(lastExitOf(st))}`;
        return `${(i === 0 ? 'supervisors' : '').padEnd(12)}${sanitize(s.label)} (node_rank ${s.nodeRank}): ${sanitize(what)}`;
      })
      .join('\n') + '\n'
  );
}

/** status --json `supervisors[]` of a multi-node launch */
export function nodeSupervisorsJson(sups: readonly NodeSupervisor[]) {
  return sups.map((s) => ({
    host: s.label,
    nodeRank: s.nodeRank,
    dir: s.dir,
    state: s.state?.state ?? null,
    supervisorPid: s.state?.supervisor?.pid ?? null,
    childPid: s.state?.child?.pid ?? null,
    restarts: s.state?.restarts ?? null,
    note: s.state?.note ?? null,
    lastExit: lastExitOf(s.state),
    error: s.error,
  }));
}

/** "; last exit SIGKILL (rank 1, pid 4242, went first: signal SIGKILL)" */
function exitText(e: ReturnType<typeof lastExitOf>): string {
  if (!e) return '';
  const g = e.firstGone;
  const first = g ? ` (rank ${g.rank}, pid ${g.pid}, went first${g.how ? `: ${g.how}` : ''})` : '';
  return `; last exit ${e.cause ?? e.signal ?? `exit ${e.code}`}${first}`;
}
