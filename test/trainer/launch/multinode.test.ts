// The multi-node profile fields and each node's torchrun command (pure: no process).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../../src/errors.js';
import { nodeSlots } from '../../../src/trainer/launch/multinode.js';
import {
  formatIssue,
  parseProfilesText,
  resolveLaunchPlan,
  type GpuInventory,
  type Profile,
} from '../../../src/trainer/launch/profiles.js';

const noGpu: GpuInventory = { count: 0, memTotalMiB: [], maxMemMiB: null, source: 'none', error: null };

function profiles(body: string): { ok: true; p: Profile } | { ok: false; errors: string[] } {
  const text = `profiles:\n  mn:\n    trainer: nsa-vibe\n    repo: /repo\n    config: configs/x.yaml\n    torchrun: /usr/bin/torchrun\n${body
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n')}\n`;
  const r = parseProfilesText(text, 'p.yaml');
  return r.ok ? { ok: true, p: r.file.profiles.mn! } : { ok: false, errors: r.issues.map(formatIssue) };
}

function ok(body: string): Profile {
  const r = profiles(body);
  assert.ok(r.ok, r.ok ? '' : r.errors.join('\n'));
  return r.p;
}

function errors(body: string): string[] {
  const r = profiles(body);
  assert.ok(!r.ok, `accepted:\n${body}`);
  return r.errors;
}

function commandOf(p: Profile, labels: string[], label: string): string[] {
  const slot = nodeSlots('mn', p, labels, 'mn_20261126-171500').find((s) => s.label === label)!;
  return resolveLaunchPlan({
    profileName: 'mn',
    profile: p,
    presets: {},
    gpus: noGpu,
    runDir: '/runs/mn_20261126-171500/nodes/x',
    cwd: '/repo',
    configOutDir: '/out',
    node: slot,
  }).command;
}

test('c10d: each node gets --nnodes, its --node_rank in --node order, the endpoint and one rdzv id; node_rank 0 hosts the store', () => {
  const p = ok('nnodes: 2\nprocs: 1\nrdzv_endpoint: 10.0.0.1:29400\nargs: [--dataset, synthetic]');
  const nodes = ['local', 'root@10.0.0.2:2222'];
  const common = [
    '--nnodes=2',
    '--rdzv_backend=c10d',
    '--rdzv_endpoint=10.0.0.1:29400',
    '--rdzv_id=mn_20261126-171500',
  ];
  const a = commandOf(p, nodes, 'local');
  const b = commandOf(p, nodes, 'root@10.0.0.2:2222');
  assert.deepEqual(a, [
    '/usr/bin/torchrun',
    '--nnodes=2',
    '--node_rank=0',
    ...common.slice(1),
    '--rdzv_conf=is_host=1',
    '--nproc_per_node=1',
    'scripts/train_showcase.py',
    '--dataset',
    'synthetic',
  ]);
  assert.deepEqual(b, [
    '/usr/bin/torchrun',
    '--nnodes=2',
    '--node_rank=1',
    ...common.slice(1),
    '--rdzv_conf=is_host=0',
    '--nproc_per_node=1',
    'scripts/train_showcase.py',
    '--dataset',
    'synthetic',
  ]);
});

test('static rendezvous: --master_addr/--master_port; node_ranks overrides the --node order', () => {
  const p = ok('nnodes: 2\nprocs: 4\nmaster_addr: gpu02\nmaster_port: 29511\nnode_ranks: { gpu01: 1, gpu02: 0 }');
  assert.deepEqual(commandOf(p, ['gpu01', 'gpu02'], 'gpu01').slice(1, 6), [
    '--nnodes=2',
    '--node_rank=1',
    '--master_addr=gpu02',
    '--master_port=29511',
    '--nproc_per_node=4',
  ]);
  assert.equal(commandOf(p, ['gpu01', 'gpu02'], 'gpu02')[2], '--node_rank=0');
});

test('profile checks: each a one-line error at its key', () => {
  const one = (body: string, re: RegExp) => {
    const e = errors(body);
    assert.ok(
      e.some((l) => re.test(l) && !l.includes('\n')),
      e.join('\n'),
    );
  };
  one('nnodes: 2', /p\.yaml:\d+:\d+: profiles\.mn\.nnodes: nnodes 2 needs a rendezvous/);
  one('nnodes: 2\nrdzv_endpoint: nohostport', /rdzv_endpoint: HOST:PORT/);
  one('nnodes: 2\nrdzv_endpoint: a:1\nmaster_addr: b\nmaster_port: 2', /two rendezvous/);
  one('nnodes: 2\nrdzv_endpoint: a:1\nmaster_port: 2', /the port is set twice/);
  one('nnodes: 2\nmaster_addr: b', /master_addr needs master_port/);
  one('rdzv_endpoint: a:1', /rdzv_endpoint is for a multi-node run/);
  one('nnodes: 2\nrdzv_endpoint: a:1\nnode_ranks: { x: 0, y: 0 }', /node_ranks must give each of the 2 nodes/);
  const ref = parseProfilesText('profiles:\n  r:\n    trainer: reference\n    nnodes: 2\n', 'p.yaml');
  assert.ok(!ref.ok && ref.issues.some((i) => /reference trainer runs on one machine/.test(i.message)));
});

test('launch checks: the node count is nnodes, node_ranks names the --node names, a one-machine profile refuses --node', () => {
  const p = ok('nnodes: 2\nrdzv_endpoint: a:1');
  const msg = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      assert.ok(e instanceof InputError, String(e));
      assert.ok(!e.message.includes('\n'), e.message);
      return e.message;
    }
    assert.fail('accepted');
  };
  assert.match(
    msg(() => nodeSlots('mn', p, ['local'], 'id')),
    /nnodes 2, but 1 node named \(local\)/,
  );
  assert.match(
    msg(() => nodeSlots('mn', p, ['a', 'b', 'c'], 'id')),
    /nnodes 2, but 3 nodes named/,
  );
  const q = ok('nnodes: 2\nrdzv_endpoint: a:1\nnode_ranks: { gpu01: 0, gpu02: 1 }');
  assert.match(
    msg(() => nodeSlots('mn', q, ['gpu01', 'gpu03'], 'id')),
    /no rank for gpu03/,
  );
  assert.match(
    msg(() => nodeSlots('mn', ok('procs: 1'), ['local', 'b'], 'id')),
    /not a multi-node profile/,
  );
  assert.deepEqual(
    nodeSlots('mn', p, ['local', 'b'], 'id').map((s) => [s.label, s.nodeRank]),
    [
      ['local', 0],
      ['b', 1],
    ],
  );
});
