// The watchdog's round as the state a cockpit would have drawn from it, for the journal: the same
// observation and evaluation (Observer.judged), the action log re-read only when it changed (a stat
// a round), the parts a cockpit measures about itself left empty. The cockpit records its own
// CockpitState as the collector emits it.
import { join } from 'node:path';
import type { Judged } from '../cockpit/observe.js';
import { evaluationFields, type CockpitState } from '../cockpit/state.js';
import type { Host } from '../remote/host.js';
import { ACTIONS_FILE, readActions } from '../trainer/control/audit.js';
import type { ActionRecord } from '../trainer/control/types.js';
import { NSA_DIR } from '../trainer/run/rundirs.js';

export class LookState {
  private actions: ActionRecord[] = [];
  private actionsKey = '';

  constructor(private readonly host: Host) {}

  async of(looked: Judged, readOnly: boolean): Promise<CockpitState> {
    const { host } = this;
    try {
      const st = await host.stat(join(looked.dirs.outDir, NSA_DIR, ACTIONS_FILE));
      const key = st ? `${st.size}:${st.mtimeMs}:${st.ino}` : 'none';
      if (key !== this.actionsKey) {
        this.actions = st ? await readActions(host, looked.dirs, 100) : [];
        this.actionsKey = key;
      }
    } catch {
      /* the last actions read stay */
    }
    const ev = looked.ev;
    return {
      at: host.now(),
      hostLabel: host.label,
      conn: host.connState(),
      readOnly,
      run: looked.run,
      ...evaluationFields(ev),
      gpu: looked.gpu,
      hostStats: looked.hostStats,
      procs: looked.procs,
      alertHistory: ev.history,
      actions: this.actions,
      supervisor: looked.supervisor,
      requests: looked.requests,
      haltGraceS: looked.haltGraceS,
      self: { cpuPct: null, rssMiB: null, renderMs: null, telemetryLatencyMs: null },
      collectError: looked.errors.length ? looked.errors.join('; ') : null,
    };
  }
}
