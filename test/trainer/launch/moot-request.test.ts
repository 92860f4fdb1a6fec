// A halt after checkpoint that outlived its run must not halt the relaunched run. Real processes:
// a supervised run of the fake trainer, `nsa-top halt --after-checkpoint` (claimed by the
// supervisor), the supervisor SIGKILLed, the ranks ended, then `nsa-top relaunch`. The relaunch ends
// the moot request (audited) and says so; the new supervisor does not claim it, so no .HALT is
// written when the new run's first checkpoint appears.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import type { ActionRecord, ControlRequest, SupervisorState } from '../../../src/trainer/control/types.js';
import { tempDir } from '../control/helpers.js';
import { profilesFile, until } from './helpers.js';

const bin = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));
const host = new LocalHost();
type Proc = { pid: number; startTime: string };
const started: Proc[] = []; // supervisors and trainers of this test's run, killed at the end if alive

const read = <T>(p: string): T | null => {
  try {
    return JSON.parse(readFileSync(p, 'utf8')) as T;
  } catch {
    return null;
  }
};

async function killProven(p: Proc, sig: NodeJS.Signals, group = false): Promise<void> {
  if (!(await verifyProcess(host, p).catch(() => false))) return;
  try {
    process.kill(group ? -p.pid : p.pid, sig);
  } catch {
    process.kill(p.pid, sig);
  }
}

test('relaunch ends a moot halt-after-checkpoint (audited, said) and the new supervisor never fires it', async () => {
  const cwd = tempDir('moot');
  const runDirs: string[] = [];
  after(async () => {
    for (const d of runDirs) {
      const s = read<SupervisorState>(join(d, '.nsa-top', 'supervisor.json'));
      if (s?.supervisor?.startTime) started.push(s.supervisor);
      if (s?.child?.startTime) started.push(s.child);
    }
    for (const p of started) await killProven(p, 'SIGKILL', p !== started[0]);
    rmSync(cwd, { recursive: true, force: true });
  });
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
  const prof = profilesFile(cwd);
  const l = cli(['launch', '--profile', 'fake', '--profiles', prof]);
  assert.equal(l.status, 0, l.stderr);
  const runDir = /run dir\s+(\S+)/.exec(l.stdout)![1]!;
  runDirs.push(runDir);
  const supPath = join(runDir, '.nsa-top', 'supervisor.json');
  const reqPath = join(runDir, '.nsa-top', 'requests.json');
  const ckpts = () => readdirSync(runDir).filter((f) => /^checkpoint_step\d+\.pt$/.test(f));
  // running, with a checkpoint to resume from
  const st1 = await until('the first checkpoint', () => {
    const s = read<SupervisorState>(supPath);
    return s?.state === 'running' && s.child?.startTime && ckpts().length > 0 ? s : null;
  });
  const sup1 = st1.supervisor!;
  const child1 = st1.child!;
  started.push(sup1, child1);
  // the trainer is frozen so that no checkpoint can follow the request while its carrier lives
  process.kill(child1.pid, 'SIGSTOP');
  const h = cli(['halt', runDir, '--after-checkpoint']);
  assert.equal(h.status, 0, h.stdout + h.stderr);
  const req = await until('the supervisor to claim the request', () => {
    const r = read<{ requests: ControlRequest[] }>(reqPath)?.requests.find((x) => x.state === 'pending');
    return r?.owner?.pid === sup1.pid ? r : null;
  });
  // the carrier is SIGKILLed (only the pid this test started), then the ranks end
  await killProven(sup1, 'SIGKILL');
  await until('the supervisor to be gone', async () => !(await verifyProcess(host, sup1).catch(() => false)));
  await killProven(child1, 'SIGKILL', true);
  await until('the trainer to be gone', async () => !(await verifyProcess(host, child1).catch(() => false)));
  assert.equal(read<{ requests: ControlRequest[] }>(reqPath)?.requests.find((x) => x.id === req.id)?.state, 'pending');

  const t0 = Date.now();
  const r = cli(['relaunch', runDir, '--yes', '--allow-command', 'node']);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  // the new run writes a checkpoint newer than the request: nothing halts it
  const sup2 = read<SupervisorState>(supPath)!.supervisor!;
  started.push(sup2);
  await until('a checkpoint of the relaunched run', () =>
    ckpts().some((f) => statSync(join(runDir, f)).mtimeMs > t0) ? true : null,
  );
  // a few of the new supervisor's request ticks (1 s apart) pass after that checkpoint
  const ticksFrom = Date.now();
  await until('three request ticks', () => (Date.now() - ticksFrom > 3000 ? true : null));
  assert.equal(existsSync(join(runDir, '.HALT')), false, 'no .HALT in the relaunched run');
  assert.equal(read<SupervisorState>(supPath)!.state, 'running');
  assert.equal(
    read<{ requests: ControlRequest[] }>(reqPath)!.requests.find((x) => x.id === req.id)!.state,
    'cancelled',
  );
  // the relaunch says what happened to the request
  assert.match(r.stdout, new RegExp(`request halt after checkpoint ${req.id} .*: ended: moot: its run ended`));
  const ended = read<{ requests: ControlRequest[] }>(reqPath)!.requests.find((x) => x.id === req.id)!;
  assert.equal(ended.state, 'cancelled');
  assert.match(ended.note, /ended by .*'s relaunch: moot/);
  const acts = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((x) => JSON.parse(x) as ActionRecord);
  const rec = acts.find((a) => a.action === 'cancel-request' && a.target.request === req.id);
  assert.ok(rec, 'the end of the request is in the action log');
  assert.equal(rec.result, 'ok');
  assert.equal(rec.target.relaunch, 'end');
  // done: stop it the ordinary way and wait for the supervisor to end
  assert.equal(cli(['stop', runDir]).status, 0);
  await until(
    'the relaunched supervisor to exit',
    async () => !(await verifyProcess(host, sup2).catch(() => false)),
    30_000,
  );
});
