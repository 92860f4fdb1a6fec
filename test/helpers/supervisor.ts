// A supervisor.json state for tests: a running supervisor with no restarts used, its identity given.
import type { SupervisorState } from '../../src/trainer/control/types.js';

export function supervisorState(
  runDir: string,
  supervisor: { pid: number; startTime: string },
  o: Partial<SupervisorState> = {},
): SupervisorState {
  return {
    runDir,
    profile: 'p',
    supervisor,
    child: null,
    state: 'running',
    restarts: 0,
    maxRestarts: 2,
    exitCodes: [],
    lastCommand: [],
    resumeFrom: null,
    updatedAt: Date.now(),
    ...o,
  };
}
