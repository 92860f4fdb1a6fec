// A multi-node launch that failed on some node: the supervisors it already started on the other
// nodes wait, each with its torchrun, for a rendezvous that can never complete (torchrun waits up to
// its rendezvous timeout, then fails, and its supervisor restarts it into the same wait). Each is
// stopped here through the audited path on its own node: its supervisor read there (pid + start
// time checked on that node: pids are per node), asked to stop with `abort` (stop.json: it SIGKILLs
// its torchrun at once, audited, without .HALT — nothing has trained, and a .HALT would refuse the
// next launch into the out_dir), and waited for. One `stop` record in that node's action log.
import type { Host } from '../../remote/host.js';
import { verifyProcess } from '../../remote/procs.js';
import { audited } from '../control/audit.js';
import { writeOwnAtomic } from '../control/ownfiles.js';
import type { ActionRecord, Actor } from '../control/types.js';
import { supervisorInCharge } from '../control/types.js';
import { readSupervisorState, STOP_FILE } from '../run/launchstate.js';
import { NSA_DIR } from '../run/rundirs.js';

/** how long a stopped node's supervisor gets to end (its SIGKILL, then its own exit) */
const ABORT_WAIT_MS = 30_000;

/**
 * Stops node `label`'s supervisor (launcher dir `dir` on that node, over its Host `h`) of a launch
 * that failed elsewhere; `why` says where. The record is appended to the action log of that node's
 * out_dir (the run's, on a shared file system).
 */
export async function abortNodeSupervisor(
  h: Host,
  node: { label: string; nodeRank: number; dir: string },
  actor: Actor,
  why: string,
  waitMs = ABORT_WAIT_MS,
): Promise<ActionRecord> {
  return audited(
    h,
    node.dir,
    { actor, action: 'stop', target: { runDir: node.dir, node: node.label, nodeRank: node.nodeRank, reason: why } },
    async () => {
      const st = await readSupervisorState(h, node.dir);
      const sup = st?.supervisor;
      if (!st || !sup) return { result: 'failed', detail: `node ${node.label}: no supervisor state in ${node.dir}` };
      const target = { supervisorPid: sup.pid, childPid: st.child?.pid ?? null };
      if (!(await verifyProcess(h, sup).catch(() => false)))
        return {
          result: 'ok',
          detail: `node ${node.label}: its supervisor (pid ${sup.pid}) has already ended (${st.state})`,
          target,
        };
      await writeOwnAtomic(
        h,
        node.dir,
        `${NSA_DIR}/${STOP_FILE}`,
        `${JSON.stringify({ ts: Date.now(), who: actor, reason: why, abort: true })}\n`,
      );
      const until = Date.now() + waitMs;
      let now = st;
      for (;;) {
        const gone = !(await verifyProcess(h, sup).catch(() => false));
        now = (await readSupervisorState(h, node.dir).catch(() => null)) ?? now;
        if (gone || !supervisorInCharge(now.state)) break;
        if (Date.now() >= until)
          return {
            result: 'partial',
            detail: `node ${node.label}: its supervisor (pid ${sup.pid}) was asked to stop and is still ${now.state} after ${Math.round(waitMs / 1000)} s: stop it with nsa-top stop ${node.dir}`,
            target,
          };
        await new Promise((r) => setTimeout(r, 250));
      }
      const child = st.child ? `, and its torchrun (pid ${st.child.pid})` : '';
      return {
        result: 'ok',
        detail: `node ${node.label}: stopped its supervisor (pid ${sup.pid}, start time checked there)${child}, which waited for a rendezvous that cannot complete: ${why}; no .HALT written`,
        target,
      };
    },
  );
}
