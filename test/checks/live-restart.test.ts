// Live: the reference trainer (2 ranks, `nsa-top train`) under its detached supervisor. SIGKILL of
// rank 1 → the run is judged RESTARTING (the supervisor's words, no critical, exit 0 for status)
// from the moment the rank is gone (its launcher ending the group) until the new ranks step, then RUNNING — never STALLED with
// "step frozen" or "run ended" for the whole boot. Judged as the headless commands judge it
// (src/commands/fit.ts: the snapshot, the proven ranks, supervisor.json with its liveness).
// Robust on a loaded machine: it waits on conditions with generous deadlines, never on sleeps.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { headlessVerdicts } from '../../src/commands/fit.js';
import { healthExit } from '../../src/checks/index.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { verifyProcess } from '../../src/remote/procs.js';
import { currentActor } from '../../src/trainer/control/actions.js';
import { heartbeatPidsOf } from '../../src/trainer/control/requests.js';
import type { SupervisorState } from '../../src/trainer/control/types.js';
import { launchRun, readSupervisorState, stopRun } from '../../src/trainer/launch/launch.js';
import { findRunProcesses } from '../../src/trainer/run/processes.js';
import { until } from '../trainer/launch/helpers.js';

const BIN = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const host = new LocalHost();
const dirs: string[] = [];
const supervisors: NonNullable<SupervisorState['supervisor']>[] = [];
after(async () => {
  for (const s of supervisors) if (await verifyProcess(host, s).catch(() => false)) process.kill(s.pid, 'SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function profiles(dir: string): string {
  const f = join(dir, 'profiles.yaml');
  writeFileSync(
    f,
    `profiles:
  ref:
    trainer: reference
    procs: 2
    steps: 100000
    save_every: 5
    log_every: 1
    args: [--seq-len, "64", --batch-size, "4"]
    env: { NSA_HEARTBEAT_EVERY: 1 }
    restart: { max_restarts: 2, backoff_s: 6, backoff_factor: 1 }
    stop: { halt_grace_s: 20, sigint_grace_s: 5 }
`,
  );
  return f;
}

interface Seen {
  at: number;
  state: string;
  why: string;
  critical: string[];
  exit: number;
}

test('SIGKILL of a rank under the supervisor: RESTARTING (no critical) until the new ranks step, then RUNNING', async (t) => {
  const cwd = mkdtempSync(join(tmpdir(), 'nsa-live-restart-'));
  dirs.push(cwd);
  const r = await launchRun(host, { profile: 'ref', profilesFile: profiles(cwd), cwd });
  const sup0 = await until('supervisor state', () => readSupervisorState(host, r.runDir), 60_000);
  if (sup0.supervisor) supervisors.push(sup0.supervisor);
  const look = async (): Promise<Seen> => {
    const v = await headlessVerdicts(host, r.runDir);
    assert.ok(v, 'the run can be judged');
    return {
      at: Date.now(),
      state: v.ev.runState,
      why: v.ev.runStateWhy,
      critical: v.ev.alerts.filter((a) => a.severity === 'critical').map((a) => a.id),
      exit: healthExit(v.ev),
    };
  };
  try {
    // stepping on both ranks
    await until('RUNNING', async () => (await look()).state === 'RUNNING', 240_000);
    const procs = await findRunProcesses(host, r.outDir, { heartbeatPids: await heartbeatPidsOf(host, r.outDir) });
    const rank1 = procs.ranks.find((p) => p.rank === 1);
    assert.ok(rank1, `rank 1 proven among ${procs.ranks.map((p) => `${p.rank}:${p.proc.pid}`).join(' ')}`);
    assert.ok(await verifyProcess(host, { pid: rank1.proc.pid, startTime: rank1.proc.startTime }));
    process.kill(rank1.proc.pid, 'SIGKILL');

    // every look from the kill until the restarted ranks step
    const seen: Seen[] = [];
    let status = null as { code: number | null; state: string; why: string; critical: string[] } | null;
    await until(
      'RUNNING again after the restart',
      async () => {
        const s = await look();
        seen.push(s);
        if (!status && s.state === 'RESTARTING' && /^supervisor: /.test(s.why)) {
          // the supervisor backs off for 6 s: `status` judges the same moment, and exits 0
          const st = spawnSync(process.execPath, [BIN, 'status', r.runDir, '--json'], {
            encoding: 'utf8',
            timeout: 60_000,
          });
          const j = JSON.parse(st.stdout) as {
            state: { runState: string; why: string };
            alerts: { id: string; level: string }[];
          };
          status = {
            code: st.status,
            state: j.state.runState,
            why: j.state.why,
            critical: j.alerts.filter((a) => a.level === 'critical').map((a) => a.id),
          };
        }
        const sup = await readSupervisorState(host, r.runDir);
        return s.state === 'RUNNING' && (sup?.restarts ?? 0) >= 1 && seen.some((x) => x.state === 'RESTARTING');
      },
      300_000,
    );
    const trace = seen.map((s) => `${s.state}${s.critical.length ? `[${s.critical.join(',')}]` : ''}: ${s.why}`);
    t.diagnostic(`${seen.length} looks:\n${trace.join('\n')}`);
    const first = seen.findIndex((s) => s.state === 'RESTARTING');
    assert.ok(first >= 0, 'RESTARTING was seen');
    // the launcher tearing the group down under a supervisor with restarts left is already the
    // restart: never STALLED, never critical, from the kill on (seen for 2 s on an H100 before)
    for (const s of seen.slice(0, first)) assert.equal(s.state, 'RUNNING', trace.join('\n'));
    const restarting = seen.slice(first, seen.length - 1);
    for (const s of restarting) {
      assert.equal(s.state, 'RESTARTING', `from the first RESTARTING until RUNNING:\n${trace.join('\n')}`);
      assert.deepEqual(s.critical, [], `no critical while restarting:\n${trace.join('\n')}`);
      assert.equal(s.exit, 0, 'a restart in progress is not an anomaly');
    }
    // in the supervisor's words, and how long it has waited
    assert.ok(
      restarting.some((s) => /restart 1 of 2/.test(s.why) && /(booting for|waiting) \d/.test(s.why)),
      trace.join('\n'),
    );
    assert.ok(
      restarting.some((s) =>
        // the rank the supervisor saw go first (its own 250 ms watch), or — when the launcher reaped it
        // between two looks — the launcher's own summary: either way rank 1 and its SIGKILL
        /^restart 1 of 2 after (rank 1 went first \(SIGKILL\)|SIGKILL of rank 1) \(the trainer's exit \d+\); booting for /.test(
          s.why,
        ),
      ),
      `the new trainer's boot is seen: ${trace.join('\n')}`,
    );
    assert.equal(seen.at(-1)!.state, 'RUNNING');
    assert.ok(status, 'status ran during the backoff');
    assert.deepEqual(
      [status.state, status.critical, status.code],
      ['RESTARTING', [], 0],
      `status during the backoff: ${status.why}`,
    );
  } finally {
    const who = await currentActor(host);
    await stopRun(host, r.runDir, who).catch(() => null);
    await until(
      'the supervisor to finish',
      async () => {
        const s = await readSupervisorState(host, r.runDir);
        return !s?.supervisor || !(await verifyProcess(host, s.supervisor).catch(() => false));
      },
      90_000,
    ).catch(() => null);
  }
});
