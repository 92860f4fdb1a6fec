// `nsa-top stop` (stopRun) relies on the supervisor only once its liveness is proven: pid + start
// time, and not a zombie. A SIGKILLed supervisor is a zombie until it is reaped (~1 s here), and a
// stop in that second said "the supervisor writes .HALT" while nothing would. A real zombie is
// made here: a child killed under a parent that never reaps it (`sleep 600 &` under an exec'd
// `sleep`), named in supervisor.json as the supervisor.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { currentActor } from '../../../src/trainer/control/actions.js';
import { stopRun, supervisorAlive } from '../../../src/trainer/launch/launch.js';
import { writeStateLocal } from '../../../src/trainer/launch/state.js';
import { readSupervisorState } from '../../../src/trainer/run/launchstate.js';
import { supervisorState } from '../../helpers/supervisor.js';

const host = new LocalHost();

test('stop right after the supervisor was SIGKILLed (a zombie, not yet reaped): nsa-top writes .HALT itself and says so', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-stop-zombie-'));
  // the outer sh prints its child's pid, then becomes a `sleep` that never reaps it
  const holder = spawn('sh', ['-c', 'sleep 600 & echo $!; exec sleep 601'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const pid = Number(await new Promise<string>((r) => holder.stdout!.once('data', (b: Buffer) => r(String(b)))));
    const me = await readProc(host, pid);
    assert.ok(me, 'the stand-in supervisor runs');
    const sup = supervisorState(dir, { pid, startTime: me.startTime });
    writeStateLocal(dir, sup);
    assert.equal(await supervisorAlive(host, sup), true, 'alive while it runs');
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && (await readProc(host, pid))?.state !== 'Z'; i++)
      await new Promise((r) => setTimeout(r, 20));
    assert.equal((await readProc(host, pid))?.state, 'Z', 'a zombie: same pid, same start time, dead');
    assert.equal(await supervisorAlive(host, sup), false, 'a zombie is not a live supervisor');
    // every surface that reads supervisor.json sees it gone (the cockpit's critical "supervisor dead")
    assert.equal((await readSupervisorState(host, dir))?.supervisorGone, true);
    const rec = await stopRun(host, dir, await currentActor(host));
    assert.equal(rec.result, 'ok', rec.detail);
    assert.doesNotMatch(rec.detail, /the supervisor writes \.HALT/);
    assert.match(
      rec.detail,
      new RegExp(
        `^the supervisor \\(pid ${pid}\\) is not alive \\(pid \\+ start time checked\\): nsa-top wrote \\.HALT itself`,
      ),
    );
    assert.match(rec.detail, /nothing escalates it: if the ranks do not stop, escalate \(SIGINT, then SIGKILL\)/);
    assert.match(readFileSync(join(dir, '.HALT'), 'utf8'), /^halt: manual_stop /);
    assert.ok(!existsSync(join(dir, '.nsa-top', 'stop.json')), 'nobody was asked who cannot answer');
  } finally {
    holder.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
