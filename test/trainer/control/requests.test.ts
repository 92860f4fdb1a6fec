// Durable control requests with real processes: the reference trainer (`nsa-top train`), the built
// CLI (`nsa-top halt`), and the detached `nsa-top agent` it starts. Needs `npm run build` first.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { selfCommand } from '../../../src/self.js';
import { checkpointWrittenSince, readActions } from '../../../src/trainer/control/actions.js';
import type { ControlRequest } from '../../../src/trainer/control/types.js';
import { readRequests } from '../../../src/trainer/control/requests.js';
import { tmp, train, waitFor } from '../reference/helpers.js';
import { nsaCheckpoint } from './helpers.js';

const host = new LocalHost();
const agents: { pid: number; startTime: string }[] = [];
after(async () => {
  for (const a of agents) if (await verifyProcess(host, a).catch(() => false)) process.kill(a.pid, 'SIGKILL');
});

function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const [node, ...pre] = selfCommand();
  const r = spawnSync(node!, [...pre, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return {
    code: r.status,
    stdout: r.stdout,
    stderr: r.stderr,
    json: () =>
      JSON.parse(r.stdout) as { result: string; exitCode: number; detail: string; request: ControlRequest | null },
  };
}

/** a detached writer may still be finishing a line: retry */
const cleanup = (dir: string) => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
const sid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[3]);
const lastStep = (out: string) => {
  const p = join(out, 'heartbeat_rank0.jsonl');
  if (!existsSync(p)) return 0;
  const l = readFileSync(p, 'utf8').trim().split('\n').at(-1)!;
  try {
    return (JSON.parse(l) as { step: number }).step;
  } catch {
    return 0;
  }
};
const ckpts = (out: string) =>
  (existsSync(out) ? readdirSync(out) : []).filter((n) => /^checkpoint_step\d+\.pt$/.test(n));

test('halt --after-checkpoint returns at once; the detached agent outlives it and halts after a complete checkpoint written after the request', async () => {
  const t = tmp();
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '60',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  try {
    await waitFor('a first checkpoint', () => ckpts(t.out).length > 0, 60_000);
    const r = cli(['halt', t.out, '--after-checkpoint', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const j = r.json();
    assert.equal(j.result, 'started');
    const req = j.request!;
    assert.equal(req.owner?.kind, 'agent');
    agents.push(req.owner!);
    // the process that asked is gone; the agent is alive, in a session of its own
    assert.ok(await verifyProcess(host, req.owner!), 'the agent outlives the command that started it');
    assert.notEqual(
      sid(req.owner!.pid),
      sid(process.pid),
      'the agent has its own session (a hangup of ours never reaches it)',
    );
    assert.equal(existsSync(join(t.out, '.HALT')), false, 'no .HALT before a new checkpoint');
    const exit = await Promise.race([p.exit, new Promise<null>((res) => setTimeout(() => res(null), 90_000).unref())]);
    assert.ok(exit, 'the trainer stopped');
    assert.equal(exit.code, 0);
    assert.ok(existsSync(join(t.out, '.HALT')));
    const done = await waitFor(
      'the request to be done',
      () => {
        const x = JSON.parse(readFileSync(join(t.out, '.nsa-top', 'requests.json'), 'utf8')).requests.find(
          (y: ControlRequest) => y.id === req.id,
        ) as ControlRequest;
        return x.state === 'done' ? x : null;
      },
      30_000,
    );
    assert.ok(done.checkpoint, 'the request names the checkpoint that triggered .HALT');
    assert.ok(existsSync(done.checkpoint.path), 'and it is there');
    assert.ok(done.checkpoint.mtimeMs > req.ts, 'written after the request');
    assert.ok(statSync(join(t.out, '.HALT')).mtimeMs >= done.checkpoint.mtimeMs, '.HALT came after it');
    // the agent marks the request done, then logs it: the last line may follow a moment later
    const log = await waitFor(
      'the request ended in the action log',
      async () => {
        const l = (await readActions(host, t.out))
          .filter((a) => a.action === 'halt-after-checkpoint')
          .map((a) => a.result);
        return l.length >= 4 ? l : null;
      },
      10_000,
    );
    assert.deepEqual(
      log,
      ['started', 'started', 'ok', 'ok'],
      'requested, taken by the agent, .HALT written, ranks gone',
    );
    await waitFor(
      'the agent to leave once nothing is left',
      async () => !(await verifyProcess(host, req.owner!).catch(() => false)),
      30_000,
    );
  } finally {
    p.child.kill('SIGKILL');
    cleanup(t.dir);
  }
});

test('a pending request is cancelled from another process: no .HALT after the next checkpoint; any reader sees it cancelled', async () => {
  const t = tmp();
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '40',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  try {
    await waitFor('progress', () => lastStep(t.out) > 2, 60_000);
    const r = cli(['halt', t.out, '--after-checkpoint', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const req = r.json().request!;
    agents.push(req.owner!);
    const c = cli(['halt', t.out, '--cancel', '--json']);
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.json().result, 'ok');
    const seen = (await readRequests(host, t.out)).find((x) => x.id === req.id)!;
    assert.equal(seen.state, 'cancelled');
    // a checkpoint written after the request comes and goes by: nothing is written
    await waitFor(
      'a checkpoint after the request',
      () => ckpts(t.out).some((n) => statSync(join(t.out, n)).mtimeMs > req.ts + 1500),
      60_000,
    );
    await new Promise((res) => setTimeout(res, 2500));
    assert.equal(existsSync(join(t.out, '.HALT')), false, 'a cancelled request writes no .HALT');
    assert.equal(p.child.exitCode, null, 'the trainer still runs');
    assert.equal(cli(['halt', t.out, '--cancel']).code, 3, 'nothing left to cancel: refused');
    await waitFor(
      'the agent to leave',
      async () => !(await verifyProcess(host, req.owner!).catch(() => false)),
      30_000,
    );
  } finally {
    p.child.kill('SIGKILL');
    cleanup(t.dir);
  }
});

test('halt/stop/dump/--after-checkpoint refuse a finished run, and read-only refuses them all, writing nothing', () => {
  const t = tmp();
  try {
    writeFileSync(
      join(t.dir, 'heartbeat_rank0.jsonl'),
      `${JSON.stringify({ ts: 1, pid: 999999, rank: 0, step: 5, msg: 'progress' })}\n`,
    );
    const nothing = cli(['halt', t.dir, '--after-checkpoint']);
    assert.equal(nothing.code, 3);
    // the cockpit's words (src/checks/actions.ts): a run whose ranks are gone has nothing to halt
    assert.match(nothing.stderr, /^halt --after-checkpoint refused: the run is EXITED \(.*\): nothing to halt$/m);
    for (const args of [
      ['halt', t.dir],
      ['halt', t.dir, '--after-checkpoint'],
      ['halt', t.dir, '--cancel'],
      ['stop', t.dir],
      ['dump', t.dir],
    ]) {
      const r = cli(args, { NSA_TOP_READ_ONLY: '1' });
      assert.equal(r.code, 3, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /read-only/);
    }
    assert.equal(existsSync(join(t.dir, '.HALT')), false);
    assert.equal(existsSync(join(t.dir, '.nsa-top', 'requests.json')), false);
  } finally {
    cleanup(t.dir);
  }
});

test('"the next checkpoint" is one written after the request, not a higher step number (after a resume the count restarts at 1)', async () => {
  const t = tmp();
  try {
    const old = join(t.dir, 'checkpoint_step100.pt');
    writeFileSync(old, nsaCheckpoint(Buffer.alloc(1000, 1)));
    utimesSync(old, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const since = Date.now() - 30_000;
    assert.equal(await checkpointWrittenSince(host, t.dir, since), null, "the older segment's step 100 does not count");
    const seg2 = join(t.dir, 'checkpoint_step20.pt');
    writeFileSync(seg2, Buffer.alloc(500, 2)); // half-written: no trailer
    utimesSync(seg2, new Date(Date.now() - 5000), new Date(Date.now() - 5000));
    assert.equal(await checkpointWrittenSince(host, t.dir, since), null, 'a half-written file does not count');
    writeFileSync(seg2, nsaCheckpoint(Buffer.alloc(1000, 2)));
    utimesSync(seg2, new Date(Date.now() - 5000), new Date(Date.now() - 5000));
    const c = await checkpointWrittenSince(host, t.dir, since);
    assert.equal(c?.step, 20, "the later segment's lower step number counts");
  } finally {
    cleanup(t.dir);
  }
});

test('a request whose agent was killed is not lost: asking again hands the same request to a new agent, which carries it out', async () => {
  const t = tmp();
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '80',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  try {
    await waitFor('progress', () => lastStep(t.out) > 2, 60_000);
    const first = cli(['halt', t.out, '--after-checkpoint', '--json']).json().request!;
    agents.push(first.owner!);
    process.kill(first.owner!.pid, 'SIGKILL'); // our own agent, by pid
    await waitFor(
      'the agent to be gone',
      async () => !(await verifyProcess(host, first.owner!).catch(() => false)),
      10_000,
    );
    assert.equal(
      (await readRequests(host, t.out)).find((x) => x.id === first.id)?.state,
      'pending',
      'still pending: nothing dropped it silently',
    );
    const again = cli(['halt', t.out, '--after-checkpoint', '--json']);
    assert.equal(again.code, 0, again.stderr);
    const second = again.json().request!;
    assert.equal(second.id, first.id, 'the same request, not a second one');
    assert.notEqual(second.owner!.pid, first.owner!.pid);
    agents.push(second.owner!);
    const exit = await Promise.race([p.exit, new Promise<null>((res) => setTimeout(() => res(null), 90_000).unref())]);
    assert.ok(exit, 'the trainer stopped');
    assert.ok(existsSync(join(t.out, '.HALT')));
    const log = (await readActions(host, t.out)).filter((a) => a.action === 'halt-after-checkpoint');
    assert.ok(
      log.some(
        (a) =>
          /taken over by nsa-top agent/.test(a.detail) &&
          a.target.owner &&
          (a.target.owner as { pid: number }).pid === second.owner!.pid,
      ),
    );
    await waitFor(
      'the new agent to leave',
      async () => !(await verifyProcess(host, second.owner!).catch(() => false)),
      30_000,
    );
  } finally {
    p.child.kill('SIGKILL');
    cleanup(t.dir);
  }
});
