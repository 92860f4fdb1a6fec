// preflight --node's rendezvous judge (src/checks/preflight-rdzv.ts), pure: the port taken on the
// node that hosts the rendezvous, a node that cannot reach it, and the rendezvous a profile names.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { judgeRendezvous, rendezvousOf, type RendezvousFacts } from '../../src/checks/preflight-rdzv.js';

const facts = (o: Partial<RendezvousFacts> = {}): RendezvousFacts => ({
  addr: '10.0.0.1',
  port: 29400,
  hostNode: 'local',
  listening: new Set([22]),
  listeningError: null,
  listener: { error: null },
  dials: [{ node: 'root@b', result: 'ok' }],
  ...o,
});
const said = (m: Map<string, { status: string; text: string }[]>) =>
  Object.fromEntries([...m].map(([k, ls]) => [k, ls.map((l) => `${l.status} ${l.text}`)]));

test('the rendezvous: free on node_rank 0 and reached from the others; else FAIL naming the node and port', () => {
  assert.deepEqual(said(judgeRendezvous(facts())), {
    local: ['PASS port 29400 is free on node local (node_rank 0 hosts the rendezvous 10.0.0.1:29400)'],
    'root@b': ['PASS node root@b reaches 10.0.0.1:29400 (a test listener on node local answered)'],
  });
  // a torchrun still alive holds the port: FAIL on the host node, the dial not tried
  const taken = said(judgeRendezvous(facts({ listening: new Set([29400]), listener: null })));
  assert.match(
    taken['local']![0]!,
    /^FAIL port 29400 on node local \(node_rank 0, the rendezvous 10\.0\.0\.1:29400\) is already in use/,
  );
  assert.match(taken['root@b']![0]!, /^WARN not tried: whether node root@b reaches 10\.0\.0\.1:29400/);
  // a bind that failed although /proc/net/tcp did not list it (another namespace's, a race): taken too
  const bind = said(judgeRendezvous(facts({ listener: { error: 'bind: [Errno 98] Address already in use' } })));
  assert.match(bind['local']![0]!, /^FAIL port 29400 on node local/);
  // a firewall between them
  const cut = said(
    judgeRendezvous(
      facts({ dials: [{ node: 'root@b', result: 'ConnectionRefusedError: [Errno 111] Connection refused' }] }),
    ),
  );
  assert.match(cut['local']![0]!, /^PASS /);
  assert.equal(
    cut['root@b']![0]!,
    "FAIL node root@b cannot reach 10.0.0.1:29400 (node local's rendezvous port 29400): ConnectionRefusedError: [Errno 111] Connection refused",
  );
});

test("a profile's rendezvous: rdzv_endpoint HOST:PORT ([v6]:PORT), else master_addr + master_port", () => {
  assert.deepEqual(rendezvousOf({ rdzv_endpoint: 'node-a:29400' }), { addr: 'node-a', port: 29400 });
  assert.deepEqual(rendezvousOf({ rdzv_endpoint: '[fd00::1]:29400' }), { addr: 'fd00::1', port: 29400 });
  assert.deepEqual(rendezvousOf({ master_addr: '10.0.0.1', master_port: 29500 }), { addr: '10.0.0.1', port: 29500 });
  assert.equal(rendezvousOf({ rdzv_endpoint: 'node-a' }), null);
  assert.equal(rendezvousOf({}), null);
});
