// The multi-node merge without processes (the live two-node job is test/multinode/status.test.ts):
// the node list as the command line gives it, a node that refuses the connection kept as a fact, the
// ranks tagged with their node, a heartbeat pid that means nobody on the other node dropped once its
// rank is proven where it runs, the view that makes the state STALE "node H unreachable", and the
// ranks of a node that stops answering kept with the age of its last answer.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checker } from '../../../src/checks/index.js';
import { NodeSet, nodeNames } from '../../../src/remote/nodes.js';
import type { ProcInfo, RunProcesses } from '../../../src/remote/types.js';
import { liveFixture, proc as rankProc, procs } from '../../checks/helpers.js';
import { NodeProcesses } from '../../../src/trainer/run/nodes.js';

test('nodeNames: --node in order, then --nodes; each once; a name with a space is refused', () => {
  assert.deepEqual(nodeNames(['local', 'root@b:2222'], 'c, d,,root@b:2222'), ['local', 'root@b:2222', 'c', 'd']);
  assert.deepEqual(nodeNames(undefined, undefined), []);
  assert.throws(() => nodeNames(['a b'], undefined), /holds a space/);
});

function proc(pid: number, rank: number): ProcInfo {
  return {
    pid,
    ppid: 1,
    startTime: '1000',
    state: 'S',
    cpuPct: null,
    rssKiB: null,
    wchan: null,
    argv: ['python', 'train_showcase.py'],
    env: { RANK: String(rank), GROUP_RANK: '0' },
  };
}

test('a node that refuses the connection: kept, unreachable; the first node its ranks tagged; the state STALE naming the node', async () => {
  // a port that was just free: connect() is refused at once
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 1));
    });
  });
  const home = mkdtempSync(join(tmpdir(), 'nsa-nodes-unit-'));
  writeFileSync(join(home, 'known_hosts'), '');
  const down = `nobody@127.0.0.1:${port}`;
  const set = await NodeSet.open(['local', down], {
    spec: {
      sshConfigText: '',
      home,
      ssh: { knownHostsFiles: [join(home, 'known_hosts')], agentSocket: join(home, 'no-agent.sock') },
    },
  });
  try {
    assert.equal(set.nodes[0]!.host?.kind, 'local');
    assert.equal(set.nodes[1]!.host, null);
    assert.match(set.nodes[1]!.error, /ECONNREFUSED|refused/);
    const np = new NodeProcesses(set);
    const first: RunProcesses = {
      at: Date.now(),
      launcher: null,
      ranks: [{ rank: 0, localRank: 0, proc: proc(8, 0), gpuMemMiB: null, gpuUuid: null, source: 'environ' }],
      unknown: [],
      unproven: [
        // rank 0's own heartbeat pid seen from nowhere else: proven here, so no doubt
        { pid: 9, startTime: null, rank: 0, argv: [], why: 'x' },
        // rank 1's heartbeat pid, whose node does not answer: still a doubt
        { pid: 8, startTime: null, rank: 1, argv: [], why: 'y' },
      ],
    };
    const merged = await np.merge(first, '/nonexistent', { heartbeatPids: [] });
    assert.deepEqual(
      merged.ranks.map((r) => [r.rank, r.proc.host, r.proc.pid]),
      [[0, 'local', 8]],
    );
    assert.deepEqual(
      merged.unproven?.map((u) => u.rank),
      [1],
    );
    // the table is unknown to the judge while a node does not answer: no rank is called dead for it
    assert.match(merged.error ?? '', new RegExp(`node ${down.replace(/[.]/g, '\\.')} unreachable`));
    const v = np.view();
    assert.ok(v && v.ageMs > v.staleAfterMs, JSON.stringify(v));
    assert.match(v!.cause, /unreachable/);
    // and the judge says STALE with that cause, never RUNNING without the node
    const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
    const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: merged, gpu: null, view: v! });
    assert.equal(ev.runState, 'STALE');
    assert.match(ev.runStateWhy, /node nobody@127\.0\.0\.1:\d+ unreachable/);
    // a node that answers: its ranks as they are now; once it stops answering, the ranks of its last
    // answer are kept and marked with that answer's time (shown stale, with their age)
    assert.equal(merged.ranks[0]!.proc.unseenSinceMs, undefined);
    const t0 = Date.now();
    const again = await np.merge({ ...first, ranks: [], unproven: [], error: 'connection lost' }, '/nonexistent', {
      heartbeatPids: [],
    });
    assert.deepEqual(
      again.ranks.map((r) => [r.rank, r.proc.host, r.proc.pid]),
      [[0, 'local', 8]],
    );
    assert.ok((again.ranks[0]!.proc.unseenSinceMs ?? Infinity) <= t0, 'aged from its last answer');
  } finally {
    await set.close();
    rmSync(home, { recursive: true, force: true });
  }
});

test('a stopped rank of a multi-node view is named with its node; the same rank on one host is not', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const r1 = rankProc(1, 'T', { pid: 8 });
  const on = new Checker().evaluate({
    now: lastTs + 1000,
    run,
    procs: procs([rankProc(0, 'S', { pid: 8 }), { ...r1, proc: { ...r1.proc, host: 'root@b:2222' } }]),
    gpu: null,
  });
  assert.ok(
    on.alerts.some((a) => a.title.startsWith('rank 1 on root@b:2222 (pid 8) is stopped (T)')),
    on.alerts.map((a) => a.title).join(' | '),
  );
  const one = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([rankProc(0, 'S'), r1]), gpu: null });
  assert.ok(one.alerts.some((a) => a.title.startsWith('rank 1 (pid 8) is stopped (T)')));
});
