// Control actions across the nodes of a multi-node run (src/trainer/control/nodes.ts), on real
// processes of this machine standing in for ranks on several nodes: each node is its own Host (a
// LocalHost seen through a recording proxy), so the test sees on which node each pid was checked
// and signalled. A node that cannot be reached, and one whose out_dir is not the one the first node
// reads (a node-local out_dir: its view of the run dir is another directory), are named for each of
// their ranks, in the result and in the action log, and nothing is signalled there.
// The same across real nodes (namespaces, torchrun, sshd): test/multinode/actions.test.ts.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Host } from '../../../src/remote/host.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { currentActor, dumpAll, escalate, readActions } from '../../../src/trainer/control/actions.js';
import type { NodeHosts } from '../../../src/trainer/control/nodes.js';
import { killKids, startKid, tempDir, type Kid } from './helpers.js';

const primary = new LocalHost();

/** this machine as node `label`: every signal is noted; `seesInstead` makes its run dir another dir */
function nodeHost(label: string, signals: string[], seesInstead?: [string, string]): Host {
  const base = new LocalHost();
  return new Proxy(base, {
    get(target, key, recv) {
      const v = Reflect.get(target, key, recv) as unknown;
      if (key === 'label') return label;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (key === 'signal') signals.push(`${args[1] as string} ${args[0] as number} on ${label}`);
        const p = args[0];
        if (seesInstead && typeof p === 'string' && p.startsWith(seesInstead[0]))
          args[0] = seesInstead[1] + p.slice(seesInstead[0].length);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

function nodes(byLabel: Record<string, Host | string>): NodeHosts {
  return {
    primary: 'A',
    labels: ['A', ...Object.keys(byLabel)],
    reachable: (l) => (l === 'A' ? primary : (byLabel[l] ?? `node ${l} is not one of the nodes`)),
  };
}

test('dump across nodes: each rank checked and signalled on its own node and named with it; an unreachable node and a node-local out_dir are named per node, recorded, and not signalled', async () => {
  const dir = tempDir('nodes-dump');
  // node L's own out_dir: an action log of its own (another dump's), not this one's
  const elsewhere = mkdtempSync(join(tmpdir(), 'nsa-top-nodes-local-'));
  mkdirSync(join(elsewhere, '.nsa-top'));
  writeFileSync(
    join(elsewhere, '.nsa-top', 'actions.jsonl'),
    `${JSON.stringify({ ts: 1, who: { user: 'x', pid: 1 }, action: 'dump', target: {}, result: 'started', detail: '' })}\n`,
  );
  const signals: string[] = [];
  const kids: Kid[] = [];
  try {
    // named dumps (rank and pid in the name): no second-long waits between ranks
    for (const r of ['0', '1', '2', '3']) kids.push(await startKid(primary, dir, undefined, { DUMP_RANK: r }));
    const n = nodes({
      B: nodeHost('B', signals),
      L: nodeHost('L', signals, [dir, elsewhere]),
      C: 'node C unreachable: connection lost: connect ECONNREFUSED',
      D: 'node D unreachable: cannot reach d:22: connect ETIMEDOUT',
    });
    const hosts = ['A', 'B', 'L', 'C'];
    const out = await dumpAll(
      primary,
      dir,
      kids.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime, host: hosts[i] })),
      await currentActor(primary),
      { answerMs: 400, waitMs: 3000, nodes: n },
    );
    const by = (r: number) => out.perRank.find((x) => x.rank === r)!;
    assert.deepEqual(
      out.perRank.map((x) => [x.rank, x.host, x.status]),
      [
        [0, 'A', 'dumped'],
        [1, 'B', 'dumped'],
        [2, 'L', 'refused'],
        [3, 'C', 'refused'],
      ],
      JSON.stringify(out.perRank),
    );
    assert.match(by(2).why!, /node L: its \S+ is not the one the first node reads \(this action's record is not in it/);
    assert.match(by(3).why!, /node C unreachable/);
    assert.deepEqual(out.outOfReach, [{ host: 'D', why: 'node D unreachable: cannot reach d:22: connect ETIMEDOUT' }]);
    // rank 1's pid went to node B's host, and nothing to L or C
    assert.deepEqual(signals, [`SIGUSR1 ${kids[1]!.pid} on B`]);
    for (const r of [0, 1]) assert.ok(existsSync(by(r).file!), `rank ${r}'s own file`);
    assert.equal(kids[2]!.child.exitCode, null);
    assert.equal(kids[3]!.child.exitCode, null);
    // one action in the run's log on the first node: its 'started' line, then how it went, per node
    const log = (await readActions(primary, dir)).filter((a) => a.action === 'dump');
    assert.deepEqual(
      log.map((a) => a.result),
      ['started', 'partial'],
    );
    const last = log[1]!;
    assert.match(last.detail, /2\/4 ranks dumped: rank 0 on A stackdump_\S+, rank 1 on B stackdump_/);
    assert.match(last.detail, /rank 3 on C refused: not signalled: node C unreachable/);
    assert.match(last.detail, /node D unreachable: .*its ranks are not known, none signalled there/);
    assert.deepEqual(
      (last.target.perRank as { host: string }[]).map((p) => p.host),
      ['A', 'B', 'L', 'C'],
    );
  } finally {
    killKids(kids);
    rmSync(elsewhere, { recursive: true, force: true });
  }
});

test('escalation across nodes: SIGINT to each node’s proven ranks on that node; an unreachable node is named, recorded, partial', async () => {
  const dir = tempDir('nodes-esc');
  const signals: string[] = [];
  const kids: Kid[] = [];
  try {
    for (const r of ['0', '1', '2']) kids.push(await startKid(primary, dir, undefined, { DUMP_RANK: r }));
    const rec = await escalate(
      primary,
      dir,
      kids.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime, host: ['A', 'B', 'C'][i] })),
      'SIGINT',
      await currentActor(primary),
      {
        nodes: nodes({
          B: nodeHost('B', signals),
          C: 'node C unreachable: connection closed',
          D: 'node D unreachable: x',
        }),
      },
    );
    assert.equal(rec.result, 'partial', rec.detail);
    assert.deepEqual(rec.target.sentTo, [kids[0]!.pid, kids[1]!.pid]);
    assert.deepEqual(signals, [`SIGINT ${kids[1]!.pid} on B`]);
    assert.equal((await kids[0]!.exited).code, 130);
    assert.equal((await kids[1]!.exited).code, 130);
    assert.equal(kids[2]!.child.exitCode, null, 'the rank on the unreachable node was not signalled');
    assert.match(rec.detail, /SIGINT sent to 2\/3 ranks; rank 2 on C pid \d+: not signalled: node C unreachable/);
    assert.match(rec.detail, /node D unreachable: x: its ranks are not known, none signalled there/);
    const [logged] = await readActions(primary, dir);
    assert.equal(logged!.detail, rec.detail);
  } finally {
    killKids(kids);
  }
});
