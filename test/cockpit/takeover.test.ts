// Requests that outlive their carrier (issue 24 item 5), with real processes: a halt after the next
// checkpoint whose carrier — the supervisor of a launched run, or the detached agent of a run
// started by hand — is SIGKILLed is critical on every surface within one round, and is taken over
// within a round by whoever observes the run live (the watchdog's loop; an open cockpit's collector):
// .HALT still appears after the next checkpoint. The take-over is in the action log. Needs
// `npm run build` first (the CLI, `nsa-top train`, the detached agent run from dist).
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Collector } from '../../src/cockpit/collector.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { verifyProcess } from '../../src/remote/procs.js';
import { selfCommand } from '../../src/self.js';
import { currentActor, readActions } from '../../src/trainer/control/actions.js';
import { readRequests, submitHaltAfterCheckpoint } from '../../src/trainer/control/requests.js';
import type { ControlRequest } from '../../src/trainer/control/types.js';
import { launchRun, readSupervisorState } from '../../src/trainer/launch/launch.js';
import { tempDir } from '../trainer/control/helpers.js';
import { until } from '../trainer/launch/helpers.js';
import { tmp, train } from '../trainer/reference/helpers.js';

const host = new LocalHost();
const leftovers: { pid: number; startTime: string }[] = [];
const kids: ChildProcess[] = [];
const dirs: string[] = [];
after(async () => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
  for (const p of leftovers) if (await verifyProcess(host, p).catch(() => false)) process.kill(p.pid, 'SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
});

function cli(args: string[]) {
  const [node, ...pre] = selfCommand();
  return spawnSync(node!, [...pre, ...args], { encoding: 'utf8', timeout: 60_000 });
}

const ckpts = (out: string) =>
  (existsSync(out) ? readdirSync(out) : []).filter((n) => /^checkpoint_step\d+\.pt$/.test(n)).length;

/** right after a checkpoint appeared: the next one is a whole save interval away */
async function justAfterACheckpoint(out: string): Promise<void> {
  await until('a first checkpoint', () => ckpts(out) > 0, 90_000);
  const n = ckpts(out);
  await until('the next checkpoint', () => ckpts(out) > n, 90_000);
}

const critical = (alerts: { id: string; level?: string; severity?: string }[]) =>
  alerts
    .filter((a) => (a.level ?? a.severity) === 'critical')
    .map((a) => a.id)
    .sort();

test('a launched run: SIGKILL of the supervisor carrying a halt-after-checkpoint — critical in status and watchdog --once, the watchdog loop takes it over, .HALT after the next checkpoint', async () => {
  const cwd = tempDir('takeover-sup');
  dirs.push(cwd);
  const pf = join(cwd, 'profiles.yaml');
  // the reference trainer (a proven rank), a checkpoint every 40 steps of at least 100 ms (4 s):
  // room to kill the carrier before the next one
  writeFileSync(
    pf,
    `profiles:
  slow:
    trainer: reference
    procs: 1
    steps: 100000
    save_every: 40
    log_every: 1
    args: [--seq-len, "32", --batch-size, "2", --inject, "slow-data@ms=100"]
    restart: { max_restarts: 2, backoff_s: 0.2, backoff_factor: 1 }
    stop: { halt_grace_s: 20, sigint_grace_s: 5 }
`,
  );
  const { runDir, supervisorPid } = await launchRun(host, { profile: 'slow', profilesFile: pf, cwd });
  const st0 = await until('the trainer', async () => {
    const s = await readSupervisorState(host, runDir);
    return s?.child?.startTime ? s : null;
  });
  leftovers.push(st0.supervisor!, st0.child!);
  const outDir = st0.outDir ?? runDir;
  await justAfterACheckpoint(outDir);
  const actor = await currentActor(host);
  const sub = await submitHaltAfterCheckpoint(host, runDir, actor);
  const req = sub.request!;
  assert.equal(req.owner?.kind, 'supervisor', sub.record.detail);
  process.kill(supervisorPid, 'SIGKILL');
  await until('the supervisor to die', async () => !(await verifyProcess(host, st0.supervisor!)));
  assert.equal(existsSync(join(outDir, '.HALT')), false, 'the checkpoint came before the kill: nothing left to test');

  // every surface, within one look: the supervisor is dead, the request has lost its carrier
  const s = cli(['status', runDir, '--json']);
  assert.equal(s.status, 1, s.stderr);
  const snap = JSON.parse(s.stdout);
  assert.deepEqual(critical(snap.alerts), [`request-orphan:${req.id}`, 'supervisor:dead'].sort());
  assert.equal(snap.supervisor.alive, false);
  assert.equal(snap.supervisor.pid, supervisorPid);
  assert.equal(snap.requests.length, 1);
  assert.deepEqual(snap.requests[0].carrier, { kind: 'supervisor', pid: supervisorPid, alive: false });
  const text = cli(['status', runDir]);
  assert.match(text.stdout, /CRITICAL {2}supervisor dead \(pid \d+ gone\): crashes will not be restarted/);
  assert.match(text.stdout, /supervisor DEAD \(pid \d+ gone\): crashes will not be restarted · 0 of 2 restarts used/);
  assert.match(text.stdout, /request {3}halt-after-checkpoint by .* carried by supervisor pid \d+ — GONE/);
  const once = cli(['watchdog', runDir, '--once', '--no-gpu']);
  assert.equal(once.status, 1);
  const onceCrit = once.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((l) => l.event === 'alert' && l.severity === 'critical')
    .map((l) => l.id)
    .sort();
  assert.deepEqual(onceCrit, critical(snap.alerts), 'watchdog --once says what status says');
  assert.equal(
    (await readRequests(host, outDir)).find((x) => x.id === req.id)?.owner?.pid,
    supervisorPid,
    'a one-shot look never acts: still the dead carrier',
  );

  // the watchdog's loop takes it over within a round
  const [node, ...pre] = selfCommand();
  const wd = spawn(node!, [...pre, 'watchdog', runDir, '--no-gpu', '--interval', '0.5'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  kids.push(wd);
  let out = '';
  wd.stdout!.on('data', (b) => (out += b));
  const took = await until(
    'the watchdog to take the request over',
    () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .find((l) => l.event === 'takeover'),
    20_000,
  );
  assert.equal(took.result, 'started', took.detail);
  assert.match(took.detail, /the carrier .* \(supervisor pid \d+\) is gone: nsa-top agent \(pid \d+\) carries it now/);
  const carried = (await readRequests(host, outDir)).find((x) => x.id === req.id)!;
  assert.equal(carried.owner?.kind, 'agent');
  leftovers.push(carried.owner!);
  // …and .HALT comes after the next complete checkpoint
  const halted = await until(
    '.HALT after the next checkpoint',
    async () => {
      const x = (await readRequests(host, outDir)).find((y) => y.id === req.id);
      return existsSync(join(outDir, '.HALT')) && x?.checkpoint ? x : null;
    },
    60_000,
  );
  assert.ok(halted.checkpoint!.mtimeMs > req.ts, 'a checkpoint written after the request');
  assert.ok(statSync(join(outDir, '.HALT')).mtimeMs >= halted.checkpoint!.mtimeMs);
  const log = (await readActions(host, runDir)).filter((a) => a.action === 'halt-after-checkpoint');
  assert.ok(
    log.some((a) => a.target['takeover'] === true && a.result === 'started'),
    `the take-over is audited: ${JSON.stringify(log.map((a) => [a.result, a.detail]))}`,
  );
  await until('the trainer to stop on .HALT', async () => !(await verifyProcess(host, st0.child!)), 30_000);
});

test('a hand-launched run: SIGKILL of the agent carrying the request — an open cockpit shows it critical in its first round and takes it over; .HALT after the next checkpoint', async () => {
  const t = tmp();
  dirs.push(t.dir);
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '150',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  kids.push(p.child);
  await justAfterACheckpoint(t.out);
  const r = cli(['halt', t.out, '--after-checkpoint', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const first = JSON.parse(r.stdout).request as ControlRequest;
  assert.equal(first.owner?.kind, 'agent');
  leftovers.push(first.owner!);
  process.kill(first.owner!.pid, 'SIGKILL'); // the agent our own command started, by pid
  await until('the agent to die', async () => !(await verifyProcess(host, first.owner!)));
  assert.equal(existsSync(join(t.out, '.HALT')), false, 'the checkpoint came before the kill: nothing left to test');

  const c = new Collector({ host, runDir: t.out, actor: await currentActor(host), readOnly: false });
  const s1 = await c.tick();
  assert.ok(
    s1.alerts.some((a) => a.id === `request-orphan:${first.id}` && a.severity === 'critical'),
    JSON.stringify(s1.alerts.map((a) => [a.id, a.severity])),
  );
  const next = await until(
    'the cockpit to hand the request to a new agent',
    async () => {
      const s = await c.tick();
      const q = s.requests?.find((x) => x.id === first.id);
      return q?.owner && q.owner.pid !== first.owner!.pid ? q : null;
    },
    20_000,
  );
  assert.equal(next.owner!.kind, 'agent');
  leftovers.push(next.owner!);
  const after2 = await c.tick();
  assert.ok(!after2.alerts.some((a) => a.id === `request-orphan:${first.id}` && a.clearing === undefined));
  const exit = await Promise.race([p.exit, new Promise<null>((res) => setTimeout(() => res(null), 90_000).unref())]);
  assert.ok(exit, 'the trainer stopped');
  assert.equal(exit.code, 0);
  const done = (await readRequests(host, t.out)).find((x) => x.id === first.id)!;
  assert.ok(existsSync(join(t.out, '.HALT')));
  assert.ok(
    done.checkpoint && done.checkpoint.mtimeMs > first.ts,
    'the .HALT followed a checkpoint written after the request',
  );
  const log = await readActions(host, t.out);
  assert.ok(log.some((a) => a.target['takeover'] === true && a.result === 'started'));
});
