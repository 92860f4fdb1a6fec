// An earlier run's halt request left pending ("keep": a relaunch or a launch that could not tell
// whether its run still ran), its carrier dead, while a new supervisor runs the out_dir and did not
// claim it (supervisorMayClaim): no agent may take it over — it would write .HALT into the new run.
// With real processes: a live stand-in supervisor named in supervisor.json, a dead carrier, the
// agent's own loop (runAgent, in-process, the judge handed down as `nsa-top agent` does) and the
// observers' take-over. Once no supervisor lives, the agent carries it again.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { agentMayClaim } from '../../../src/checks/carry.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { currentActor } from '../../../src/trainer/control/actions.js';
import { runAgent, takeOverRequest, updateRequests } from '../../../src/trainer/control/requests.js';
import type { ControlRequest } from '../../../src/trainer/control/types.js';
import { writeStateLocal } from '../../../src/trainer/launch/state.js';
import { tempDir } from './helpers.js';
import { supervisorState } from '../../helpers/supervisor.js';

const host = new LocalHost();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const request = (dir: string) =>
  (JSON.parse(readFileSync(join(dir, '.nsa-top', 'requests.json'), 'utf8')) as { requests: ControlRequest[] })
    .requests[0]!;

test("an agent never takes over a request the run's live supervisor left (an earlier run's); once no supervisor lives, it does", async () => {
  const dir = tempDir('claim-guard');
  const sup = spawn('sleep', ['600'], { stdio: 'ignore' });
  try {
    // the earlier run's carrier: a process that has ended
    const gone = spawnSync('true');
    const dead = { kind: 'supervisor' as const, pid: gone.pid!, startTime: '1' };
    let me = await readProc(host, sup.pid!);
    for (let i = 0; i < 50 && !me; i++) me = (await sleep(20), await readProc(host, sup.pid!));
    assert.ok(me, 'the stand-in supervisor runs');
    writeStateLocal(dir, supervisorState(dir, { pid: sup.pid!, startTime: me.startTime }));
    mkdirSync(join(dir, '.nsa-top'), { recursive: true });
    const who = await currentActor(host);
    const req: ControlRequest = {
      id: 'old1',
      kind: 'halt-after-checkpoint',
      ts: Date.now() - 600_000,
      who,
      state: 'pending',
      owner: dead,
      graceS: 20,
      note: 'waiting for a complete checkpoint written after …',
      updatedAt: Date.now() - 600_000,
    };
    writeFileSync(join(dir, '.nsa-top', 'requests.json'), JSON.stringify({ version: 1, requests: [req] }));
    // an observer (a cockpit, the watchdog) sees its carrier dead: no agent is started for it
    const took = await takeOverRequest(host, { runDir: dir, outDir: dir, supervised: true }, who, 'old1');
    assert.equal(took.result, 'ok', took.detail);
    assert.match(took.detail, new RegExp(`^not taken over: the run's supervisor \\(pid ${sup.pid}\\) lives`));
    assert.ok(!existsSync(join(dir, '.nsa-top', 'agent.log')), 'no agent was started');
    // an agent that runs anyway (another request brought it) leaves it alone, and says why
    assert.equal(await runAgent(host, dir, { tickMs: 20, idleTicks: 3, mayClaim: agentMayClaim }), 0);
    assert.deepEqual(request(dir).owner, dead, 'not claimed');
    // no live supervisor any more: the agent is the carrier, and claims it
    sup.kill('SIGKILL');
    await new Promise((r) => sup.once('exit', r));
    const agent = runAgent(host, dir, { tickMs: 20, idleTicks: 3, mayClaim: agentMayClaim });
    for (let i = 0; i < 250 && request(dir).owner?.pid !== process.pid; i++) await sleep(20);
    assert.equal(request(dir).owner?.pid, process.pid, 'claimed once no supervisor lives');
    // end it so the agent's loop goes idle and returns
    await updateRequests(dir, (all) => {
      all[0]!.state = 'cancelled';
    });
    assert.equal(await agent, 0);
  } finally {
    if (sup.exitCode === null && sup.signalCode === null) sup.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
