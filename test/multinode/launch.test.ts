// Launch over SSH on several nodes (issue 22), on two "nodes" made of namespaces (test/helpers/netns.ts),
// everything run on node A as an operator would there, node B reached over its own sshd. One job:
// - `preflight --node local --node B --node B-on-a-dead-port`: each node's checks, printed per node
//   (B's over SSH), the dead one "unreachable", exit 1;
// - `preflight --profile … --node local --node B`: the rendezvous port free on local (node_rank 0)
//   and reached from B (a test listener on local);
// - `launch --node local --node DEAD`: refused before anything is created or started anywhere;
// - a launch whose supervisor cannot start on B (its launch dir read-only there): the supervisor
//   started on local is stopped (audited, on its node, no .HALT), and the launch says so, exit 1;
// - `launch --profile two-nodes --node local --node B`: a supervisor per node (each in its own
//   nodes/<R>/ launcher dir, its pid as its node sees it) running that node's torchrun --nnodes 2
//   --node_rank R (c10d on A's address) of test/multinode/train_showcase.py; both ranks step, rank 0
//   on A and rank 1 on B; each start audited with its node; each node's supervisor read on its node;
// - `relaunch RUN --node …`: refused while it runs; after a .HALT, every node's supervisor again,
//   each trainer resuming from the one checkpoint picked, audited per node.
import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { nodesUnavailable, startNodes, TORCH_PYTHON, TORCHRUN, type Nodes } from '../helpers/netns.js';
import { heartbeatPid, until } from './job.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const worker = fileURLToPath(new URL('./train_showcase.py', import.meta.url));

const skip = nodesUnavailable({ torch: true });
if (skip) console.log(`# multi-node launch test SKIPPED: ${skip}`);

interface Sup {
  host: string;
  nodeRank: number;
  dir: string;
  state: string | null;
  supervisorPid: number | null;
  childPid: number | null;
  error: string | null;
}

/** pid's command line on a node (null: no such process there) */
function cmdline(node: Nodes['a'], pid: number): string | null {
  const r = node.run(['cat', `/proc/${pid}/cmdline`]);
  return r.code === 0 ? r.stdout.replace(/\0/g, ' ') : null;
}

test(
  'preflight and launch --node: per-node checks, a node out of reach refuses before anything starts, one supervisor per node runs its torchrun --node_rank',
  { skip: skip ?? false, timeout: 180_000 },
  async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'nsa-nodelaunch-'));
    let nodes: Nodes | null = null;
    try {
      nodes = await startNodes();
      const { a, b, sshd } = nodes;
      const home = join(tmp, 'home');
      mkdirSync(join(home, '.ssh'), { recursive: true });
      writeFileSync(join(home, '.ssh', 'known_hosts'), `${sshd.knownHostsLine}\n`);
      const nodeB = `root@${b.addr}:${sshd.port}`;
      // nothing listens there: refused at once (the node is out of reach)
      const dead = `root@${b.addr}:${sshd.port === 65535 ? 1 : sshd.port + 1}`;
      const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
      const nsaTop = (args: string[]) => {
        const r = a.run([process.execPath, bin, ...args, '-i', sshd.userKey], { env, timeoutMs: 90_000 });
        return { ...r, out: r.stdout + r.stderr };
      };
      // Debian's torch 1.13 on Python 3.11 cannot parse torchrun's default `--redirects 0`
      // (named torchrun: a relaunch runs only known trainers unless --allow-command names one)
      mkdirSync(join(tmp, 'bin'));
      const torchrun = join(tmp, 'bin', 'torchrun');
      writeFileSync(
        torchrun,
        `#!/bin/sh\nexec ${TORCHRUN} --redirects 1 --tee 1 --log_dir "${tmp}/logs-$(hostname)" "$@"\n`,
      );
      chmodSync(torchrun, 0o755);
      const out = join(tmp, 'out');
      const port = 29000 + Math.floor(Math.random() * 900);
      const profiles = join(tmp, 'profiles.yaml');
      writeFileSync(
        profiles,
        [
          'profiles:',
          '  two-nodes:',
          '    trainer: nsa-vibe',
          `    repo: ${tmp}`,
          `    python: ${TORCH_PYTHON}`,
          `    torchrun: ${torchrun}`,
          `    script: ${worker}`,
          '    config: cfg.yaml',
          `    out_dir: ${out}`,
          '    procs: 1',
          '    nnodes: 2',
          `    rdzv_endpoint: ${a.addr}:${port}`,
          "    args: [--step-s, '0.2']",
          '    restart: { max_restarts: 0 }',
          '',
        ].join('\n'),
      );
      const base = join(tmp, 'artifacts', 'train_runs');

      // 1. preflight on every node, printed per node; the one out of reach says so; exit 1
      const pf = nsaTop(['preflight', '--node', 'local', '--node', nodeB, '--node', dead]);
      console.log(`# preflight on 3 nodes (one dead): ${pf.ms} ms, exit ${pf.code}`);
      assert.equal(pf.code, 1, pf.out);
      for (const n of ['local', nodeB, dead])
        assert.match(pf.out, new RegExp(`nsa-top preflight on node ${n}\\n`), pf.out);
      assert.match(pf.out, new RegExp(`FAIL  node +node ${dead} unreachable: `), pf.out);
      assert.match(pf.out, /1 of 3 nodes not ready: root@/, pf.out);
      // B's own checks ran there (its free disk, its port): not a copy of A's section
      const sectionB = pf.out.split(`nsa-top preflight on node ${nodeB}\n`)[1]!.split('\n\n')[0]!;
      assert.match(sectionB, /PASS {2}disk/, pf.out);
      // with the profile: its rendezvous port free on node_rank 0's node (local) and reached from B
      // (a test listener on local answered B's dial over the veth)
      const pfr = nsaTop([
        'preflight',
        '--profile',
        'two-nodes',
        '--profiles',
        profiles,
        '--node',
        'local',
        '--node',
        nodeB,
      ]);
      console.log(`# preflight --profile on 2 nodes (the rendezvous tried): ${pfr.ms} ms`);
      const ep = `${a.addr}:${port}`.replace(/\./g, '\\.');
      assert.match(
        pfr.out,
        new RegExp(`PASS  rendezvous +port ${port} is free on node local \\(node_rank 0 hosts the rendezvous ${ep}\\)`),
        pfr.out,
      );
      assert.match(
        pfr.out,
        new RegExp(
          `PASS  rendezvous +node ${nodeB.replace(/\./g, '\\.')} reaches ${ep} \\(a test listener on node local answered\\)`,
        ),
        pfr.out,
      );

      // 2. a node out of reach: refused, nothing created or started anywhere
      const launchOn = (second: string) =>
        nsaTop(['launch', '--profile', 'two-nodes', '--profiles', profiles, '--node', 'local', '--node', second]);
      const bad = launchOn(dead);
      assert.equal(bad.code, 1, bad.out);
      assert.match(bad.out, new RegExp(`node ${dead} unreachable: .*Nothing was started on any node\\.`), bad.out);
      assert.equal(bad.out.trim().split('\n').length, 1, bad.out);
      assert.ok(!existsSync(base) || readdirSync(base).length === 0, 'a run dir was made');
      assert.ok(!existsSync(out), 'the out_dir was made');

      // 2b. node B cannot start its supervisor (the launch dir read-only in B's mount namespace): the
      // supervisor already started on local, waiting in a rendezvous that cannot complete, is stopped
      // through the audited path on its node (pid + start time checked there), without a .HALT
      const out2 = join(tmp, 'out2');
      writeFileSync(
        profiles,
        readFileSync(profiles, 'utf8') +
          ['  ro-b:', ...readFileSync(profiles, 'utf8').split('\n').slice(2, -1)]
            .join('\n')
            .replace(`out_dir: ${out}`, `out_dir: ${out2}`)
            .replace(`:${port}`, `:${port + 1}`) +
          '\n',
      );
      mkdirSync(base, { recursive: true });
      for (const argv of [
        ['mount', '--bind', base, base],
        ['mount', '-o', 'remount,bind,ro', base],
      ])
        assert.equal(b.run(argv).code, 0, argv.join(' '));
      const half = nsaTop(['launch', '--profile', 'ro-b', '--profiles', profiles, '--node', 'local', '--node', nodeB]);
      assert.equal(b.run(['umount', base]).code, 0);
      console.log(`# launch failing on node B, node A's supervisor stopped: ${half.ms} ms, exit ${half.code}`);
      assert.equal(half.code, 1, half.out);
      assert.match(
        half.stdout,
        new RegExp(`node ${nodeB.replace(/\./g, '\\.')} \\(node_rank 1\\): FAILED: `),
        half.out,
      );
      const stopped = new RegExp(
        `node local \\(node_rank 0\\): supervisor pid (\\d+) STOPPED \\(ok\\): node local: stopped its supervisor \\(pid \\1, start time checked there\\)(, and its torchrun \\(pid \\d+\\))?, which waited for a rendezvous that cannot complete: the launch failed on node ${nodeB.replace(/\./g, '\\.')}; no \\.HALT written`,
      ).exec(half.stdout);
      assert.ok(stopped, half.out);
      assert.match(half.stdout, /the launch failed: the supervisors it had started were stopped/);
      const halfDir = /run dir +(\S+)/.exec(half.stdout)![1]!;
      const sup0 = JSON.parse(readFileSync(join(halfDir, 'nodes', '0', '.nsa-top', 'supervisor.json'), 'utf8')) as {
        state: string;
        child: { pid: number } | null;
      };
      assert.equal(sup0.state, 'halted', JSON.stringify(sup0));
      // (gone, or a zombie: the node's pid 1 reaps nothing)
      const ended = (pid: number) =>
        /^$| Z /.test(a.run(['sh', '-c', `cat /proc/${pid}/stat 2>/dev/null || true`]).stdout);
      assert.ok(ended(Number(stopped[1])), "node A's supervisor is gone");
      if (sup0.child) assert.ok(ended(sup0.child.pid), 'its torchrun is gone');
      assert.ok(!existsSync(join(out2, '.HALT')), 'no .HALT left to refuse the next launch');
      const acts2 = readFileSync(join(out2, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { action: string; result: string; target: { node?: string; reason?: string } });
      assert.deepEqual(
        acts2.filter((x) => x.action === 'stop').map((x) => [x.target.node, x.result, x.target.reason]),
        [['local', 'ok', `the launch failed on node ${nodeB}`]],
        JSON.stringify(acts2),
      );

      // 3. the launch: a supervisor per node, each running its node's torchrun
      const t0 = Date.now();
      const l = launchOn(nodeB);
      console.log(`# launch over 2 nodes: ${l.ms} ms, exit ${l.code}`);
      assert.equal(l.code, 0, l.out);
      const runDir = /run dir +(\S+)/.exec(l.stdout)![1]!;
      assert.match(l.stdout, /node local \(node_rank 0\): supervisor pid \d+ \(detached\)/);
      assert.match(l.stdout, new RegExp(`node ${nodeB.replace(/\./g, '\\.')} \\(node_rank 1\\): supervisor pid \\d+`));
      const logs = () =>
        [0, 1]
          .map((r) => `--- node_rank ${r} train.log:\n${readLog(join(runDir, 'nodes', String(r), 'train.log'))}`)
          .join('\n');
      await until('both ranks to boot and rank 0 to log steps', 90_000, () => {
        return (
          existsSync(join(out, 'training.csv')) &&
          readFileSync(join(out, 'training.csv'), 'utf8').split('\n').length > 2 &&
          heartbeatPid(out, 1) !== null
        );
      }).catch((e: Error) => {
        throw new Error(`${e.message}\n${logs()}`);
      });
      console.log(`# 2-node job stepping ${((Date.now() - t0) / 1000).toFixed(1)} s after the launch began`);

      // each node's supervisor state in its own launcher dir, its pids as its node sees them
      const state = (r: number) =>
        JSON.parse(readFileSync(join(runDir, 'nodes', String(r), '.nsa-top', 'supervisor.json'), 'utf8')) as {
          state: string;
          supervisor: { pid: number };
          child: { pid: number } | null;
        };
      const s0 = state(0);
      const s1 = state(1);
      assert.equal(s0.state, 'running', logs());
      assert.equal(s1.state, 'running', logs());
      assert.match(cmdline(a, s0.supervisor.pid) ?? '', /nsa-top\.js supervise/);
      assert.match(cmdline(b, s1.supervisor.pid) ?? '', /nsa-top\.js supervise/, 'node B runs its own supervisor');
      assert.match(cmdline(b, s1.child!.pid) ?? '', /--nnodes=2 --node_rank=1 --rdzv_backend=c10d/);
      assert.match(cmdline(a, s0.child!.pid) ?? '', /--nnodes=2 --node_rank=0 /);
      // rank 1 runs on node B (its heartbeat's pid is one of B's processes, training there)
      assert.match(cmdline(b, heartbeatPid(out, 1)!) ?? '', /train_showcase\.py/);
      const plan1 = JSON.parse(readFileSync(join(runDir, 'nodes', '1', '.nsa-top', 'launch.json'), 'utf8')) as {
        node: { label: string; nodeRank: number };
      };
      assert.deepEqual([plan1.node.label, plan1.node.nodeRank], [nodeB, 1]);

      // each start audited in the run's action log, with its node
      const acts = readFileSync(join(out, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { action: string; result: string; target: { node?: string; nodeRank?: number } });
      const launches = acts.filter((x) => x.action === 'launch');
      assert.deepEqual(launches.map((x) => [x.target.node, x.target.nodeRank, x.result]).sort(), [
        ['local', 0, 'ok'],
        [nodeB, 1, 'ok'],
      ]);

      // each node's supervisor as status --node shows it, read on its own node — and the one the
      // judge weighs (a run launched on several nodes is a supervised run on every surface)
      const p = nsaTop(['status', runDir, '--node', 'local', '--node', nodeB, '--json']);
      assert.ok(p.code === 0 || p.code === 1, p.out);
      const got = JSON.parse(p.stdout) as {
        supervisors: Sup[];
        supervisor: { alive: boolean | null; state: string } | null;
        state: { runState: string };
      };
      assert.deepEqual(
        got.supervisors.map((x) => [x.host, x.nodeRank, x.state, x.supervisorPid, x.error]),
        [
          ['local', 0, 'running', s0.supervisor.pid, null],
          [nodeB, 1, 'running', s1.supervisor.pid, null],
        ],
      );
      assert.equal(got.supervisor?.state, 'running', JSON.stringify(got.supervisor));
      assert.equal(got.supervisor?.alive, true);
      assert.match(got.state.runState, /^(STARTING|RUNNING)$/);
      const text = nsaTop(['status', runDir, '--node', 'local', '--node', nodeB]).stdout;
      assert.match(
        text,
        new RegExp(
          `^ +${nodeB.replace(/\./g, '\\.')} \\(node_rank 1\\): running \\(supervisor pid ${s1.supervisor.pid}, torchrun pid ${s1.child!.pid}\\)$`,
          'm',
        ),
      );

      // 4. relaunch across nodes: refused while the run runs; after a halt, every node resumes from
      // the one newest complete checkpoint (picked once)
      const relaunch = (...extra: string[]) =>
        nsaTop(['relaunch', runDir, '--node', 'local', '--node', nodeB, '--yes', ...extra]);
      // (and no second launch into the out_dir it writes)
      const again = launchOn(nodeB);
      assert.equal(again.code, 2, again.out);
      assert.match(
        again.out,
        new RegExp(
          `${out} is being written by the run ${runDir} \\(node local \\(supervisor pid ${s0.supervisor.pid}, running\\); node root@`,
        ),
        again.out,
      );
      assert.equal(readdirSync(base).length, 2, 'a second run dir was made (beside the launch that failed on B)');
      const busy = relaunch();
      assert.equal(busy.code, 3, busy.out);
      assert.match(
        busy.out,
        new RegExp(`node local: its supervisor \\(pid ${s0.supervisor.pid}\\) is running`),
        busy.out,
      );
      const ckpt = join(out, 'checkpoint_step20.pt');
      // an empty torch zip: its end-of-central-directory record, written a while ago (settled)
      writeFileSync(ckpt, Buffer.concat([Buffer.from('PK\x05\x06'), Buffer.alloc(18)]));
      utimesSync(ckpt, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
      writeFileSync(join(out, '.HALT'), 'halt: test\n');
      await until('both supervisors to end on the .HALT', 60_000, () =>
        [0, 1].every((r) => state(r).state === 'halted'),
      );
      const re = relaunch('--remove-stale-halt');
      console.log(`# relaunch over 2 nodes: ${re.ms} ms, exit ${re.code}`);
      assert.equal(re.code, 0, re.out);
      assert.match(re.stdout, /resum\w* .*checkpoint_step20\.pt/, re.out);
      assert.ok(!existsSync(join(out, '.HALT')));
      for (const [r, node] of [
        [0, a],
        [1, b],
      ] as const) {
        const st = state(r);
        assert.notEqual(st.supervisor.pid, [s0, s1][r]!.supervisor.pid);
        assert.ok(['running', 'starting'].includes(st.state), `${r}: ${st.state}\n${logs()}`);
        const child = await until(`node_rank ${r}'s trainer`, 30_000, () => state(r).child);
        assert.match(
          cmdline(node, child.pid) ?? '',
          new RegExp(`--node_rank=${r} .*--resume ${ckpt}`),
          `node_rank ${r}`,
        );
      }
      const relaunches = readFileSync(join(out, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { action: string; result: string; target: { node?: string; resumeFrom?: string } })
        .filter((x) => x.action === 'relaunch' && x.result === 'ok');
      assert.deepEqual(relaunches.map((x) => [x.target.node, x.target.resumeFrom]).sort(), [
        ['local', ckpt],
        [nodeB, ckpt],
      ]);

      // 5. node B's supervisor killed outright: the judge weighs every node's supervisor (pid + start
      // time checked on its node), so status says so — critical, naming node B — while A's runs on
      const gone = state(1).supervisor.pid;
      const k = b.run(['kill', '-9', String(gone)]);
      assert.equal(k.code, 0, k.stderr);
      const supDead = await until('status --node to name node B supervisor dead', 30_000, () => {
        const st = nsaTop(['status', runDir, '--node', 'local', '--node', nodeB, '--json']);
        const j = JSON.parse(st.stdout) as { alerts: { id: string; level: string; detail: string }[] };
        return j.alerts.find((x) => x.id === 'supervisor:dead') ?? null;
      });
      assert.equal(supDead.level, 'critical');
      assert.ok(supDead.detail.includes(`node ${nodeB}:`), supDead.detail);
    } finally {
      await nodes?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
);

function readLog(p: string): string {
  return existsSync(p) ? readFileSync(p, 'utf8').slice(-1500) : '(none)';
}
