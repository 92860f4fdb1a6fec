// One look over a real multi-node run (issue 22): two nodes made of namespaces (test/helpers/netns.ts),
// a 2-node torchrun job (c10d rendezvous over the veth addresses, a gloo all-reduce per step:
// test/multinode/train_showcase.py) writing into a run dir both nodes share, and `nsa-top status
// RUN --node local --node root@B:PORT --json` run on node A. One job is shared by every assertion:
// - the ranks: rank 0 on local, rank 1 on node B, each with its pid as its own node sees it (the pid
//   its heartbeat names), its GROUP_RANK, and the run RUNNING; the cockpit's Ranks panel names each
//   rank's node;
// - SIGSTOP of the rank on node B: the next status says "rank 1 on root@B:PORT (pid N) is stopped (T)";
// - node B's sshd killed: status answers within 10 s with STALE, "node … unreachable", not RUNNING;
//   sshd back: RUNNING again with both ranks;
// - node B's GPUs (a fake nvidia-smi, test/fixtures/nvidia-smi/, on node B's PATH only: bound over
//   /usr/local/bin in node B's mount namespace) in status --json, each with its node;
// - `watchdog --once --node … --metrics-file`: one judgement over both nodes, RUNNING; every rank's
//   series and node B's GPUs carry their `host`, and `promtool check metrics` passes;
// - `stop --node --reason` on a job whose ranks ignore .HALT: .HALT, then SIGINT to each rank on its
//   own node (audited, each record with the reason), and both ranks end.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { nodesUnavailable, startNodes, type Nodes } from '../helpers/netns.js';
import { cleanHome, heartbeatPid, startJob, until, type Job } from './job.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));

const FX = fileURLToPath(new URL('../fixtures/nvidia-smi/', import.meta.url));
const PROMTOOL = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
if (!PROMTOOL) console.log('# multi-node status test: promtool not installed: `promtool check metrics` skipped');
const skip = nodesUnavailable({ torch: true });
if (skip) console.log(`# multi-node status test SKIPPED: ${skip}`);

interface StatusJson {
  state: { runState: string; why: string };
  alerts: { id: string; level: string; title: string; detail: string }[];
  nodes: { host: string; readsRunDir: boolean; reachable: boolean; error: string | null }[];
  processes: { rank: number; host: string; pid: number; state: string; groupRank: number | null }[];
  gpus: { host: string | null; index: number; uuid: string; utilPct: number | null; ranks: number[] }[];
  gpuNodes: { host: string; status: string }[];
}

test(
  'status --node: rank 0 on local and rank 1 on node B with their own pids; a stopped rank on B named with its node; B unreachable is STALE, then back',
  { skip: skip ?? false, timeout: 180_000 },
  async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'nsa-multinode-'));
    let nodes: Nodes | null = null;
    let job: Job | null = null;
    try {
      nodes = await startNodes();
      const { a, b, sshd } = nodes;
      const run = join(tmp, 'run');
      mkdirSync(run);
      const t0 = Date.now();
      // node B's GPUs: a fake nvidia-smi first on node B's PATH, and on no other machine's (bound over
      // /usr/local/bin in node B's mount namespace); node B's root with an empty home (cleanHome)
      const gpuBin = join(tmp, 'gpubin');
      const smiDir = join(tmp, 'smi');
      mkdirSync(gpuBin);
      cpSync(join(FX, 'a100x2'), smiDir, { recursive: true });
      writeFileSync(
        join(gpuBin, 'nvidia-smi'),
        `#!/bin/sh\nNSA_FAKE_SMI_DIR=${smiDir} exec ${join(FX, 'bin', 'nvidia-smi')} "$@"\n`,
        { mode: 0o755 },
      );
      const bound = b.run(['mount', '--bind', gpuBin, '/usr/local/bin']);
      assert.equal(bound.code, 0, bound.stderr);
      cleanHome(b, tmp);
      // ranks that do not answer .HALT: only stop's signals end them (step 6)
      job = await startJob(nodes, run, tmp, 0.2, ['--ignore-halt']);
      console.log(`# 2-node job stepping ${((Date.now() - t0) / 1000).toFixed(1)} s after start`);
      const pid0 = heartbeatPid(run, 0)!;
      const pid1 = heartbeatPid(run, 1)!;
      // node B's second GPU runs rank 1 (its pid as node B sees it)
      writeFileSync(join(smiDir, 'apps.csv'), `${pid1}, GPU-7d21e4f6-8b9a-4e2c-b1d3-5f6a7c8e9b12, 40102\n`);

      const home = join(tmp, 'home');
      mkdirSync(join(home, '.ssh'), { recursive: true });
      writeFileSync(join(home, '.ssh', 'known_hosts'), `${sshd.knownHostsLine}\n`);
      const nodeB = `root@${b.addr}:${sshd.port}`;
      const nodeArgs = ['--node', 'local', '--node', nodeB, '-i', sshd.userKey];
      /** `watchdog --once --node … --metrics-file PROM` on node A: its decision lines */
      const watchdogOnce = (prom: string) => {
        const r = a.run([process.execPath, bin, 'watchdog', run, '--once', '--metrics-file', prom, ...nodeArgs], {
          env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' },
          timeoutMs: 60_000,
        });
        const events = r.stdout
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { event: string; state?: string; why?: string; nodes?: string[] });
        return { code: r.code, ms: r.ms, events, out: r.stdout + r.stderr };
      };
      const status = (): { json: StatusJson; code: number | null; ms: number } => {
        const r = a.run([process.execPath, bin, 'status', run, '--json', ...nodeArgs], {
          env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' },
          timeoutMs: 60_000,
        });
        assert.ok(r.code === 0 || r.code === 1, `status exit ${r.code}: ${r.stderr}`);
        return { json: JSON.parse(r.stdout) as StatusJson, code: r.code, ms: r.ms };
      };

      // 1. each rank on its own node, with the pid its node gives it
      const s1 = status();
      console.log(`# status over 2 nodes: ${s1.ms} ms; ${s1.json.state.runState}: ${s1.json.state.why}`);
      assert.equal(s1.json.state.runState, 'RUNNING', s1.json.state.why);
      const r0 = s1.json.processes.find((p) => p.rank === 0);
      const r1 = s1.json.processes.find((p) => p.rank === 1);
      assert.deepEqual(
        { host: r0?.host, pid: r0?.pid, groupRank: r0?.groupRank },
        { host: 'local', pid: pid0, groupRank: 0 },
        JSON.stringify(s1.json.processes),
      );
      assert.deepEqual(
        { host: r1?.host, pid: r1?.pid, groupRank: r1?.groupRank },
        { host: nodeB, pid: pid1, groupRank: 1 },
      );
      assert.equal(s1.json.processes.length, 2, JSON.stringify(s1.json.processes));
      assert.deepEqual(
        s1.json.nodes.map((n) => [n.host, n.readsRunDir, n.reachable]),
        [
          ['local', true, true],
          [nodeB, false, true],
        ],
      );
      // node B's GPUs, each with its node; node A has none
      assert.deepEqual(
        s1.json.gpus.map((g) => [g.host, g.index, g.utilPct, g.ranks]),
        [
          [nodeB, 0, 98, []],
          [nodeB, 1, 97, [1]],
        ],
        JSON.stringify(s1.json.gpuNodes),
      );
      assert.deepEqual(
        s1.json.gpuNodes.map((n) => [n.host, n.status]),
        [
          ['local', 'no-nvidia-tools'],
          [nodeB, 'ok'],
        ],
      );
      // the pid is node B's own: on node B it is rank 1 (its environ says so)
      const env1 = b.run(['cat', `/proc/${pid1}/environ`]).stdout.split('\0');
      assert.ok(env1.includes('RANK=1') && env1.includes('GROUP_RANK=1'), 'pid as node B sees it');

      // the cockpit (one frame, piped) over both nodes: each rank's row names its node
      const frame = a.run([process.execPath, bin, run, '--node', 'local', '--node', nodeB, '-i', sshd.userKey], {
        env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' },
        timeoutMs: 60_000,
      });
      assert.equal(frame.code, 0, frame.stderr);
      const rows = frame.stdout.split('\n');
      for (const [rank, pid, host] of [
        [0, pid0, 'local'],
        [1, pid1, nodeB],
      ] as const)
        assert.ok(
          rows.some((l) => new RegExp(`\\b${rank} +${pid} .* @${rank + 1}\\b`).test(l)) &&
            rows.some((l) => l.includes(`@${rank + 1} ${host}`)),
          `rank ${rank} pid ${pid} on ${host} in the Ranks panel:\n${frame.stdout}`,
        );
      // its actions work across the nodes (test/multinode/actions.test.ts): no read-only notice
      assert.doesNotMatch(frame.stderr, /read-only/);

      // 2. SIGSTOP of the rank on node B, in node B's pid namespace
      const tStop = Date.now();
      assert.equal(b.run(['kill', '-STOP', String(pid1)]).code, 0);
      const s2 = status();
      const stopLatency = Date.now() - tStop;
      const want = `rank 1 on ${nodeB} (pid ${pid1}) is stopped (T)`;
      const texts = s2.json.alerts.map((x) => x.title);
      console.log(`# SIGSTOP on node B shown by status ${stopLatency} ms after the signal`);
      assert.ok(
        texts.some((t) => t.includes(want)),
        `wanted "${want}" in: ${JSON.stringify(texts)}`,
      );
      assert.ok(stopLatency < 5000, `shown ${stopLatency} ms after SIGSTOP (≤ 5 s)`);
      b.run(['kill', '-CONT', String(pid1)]);

      // 3. node B's sshd killed: unreachable, STALE — never RUNNING by omission
      sshd.kill();
      const s3 = status();
      console.log(
        `# node B unreachable: status answered in ${s3.ms} ms: ${s3.json.state.runState}: ${s3.json.state.why}`,
      );
      assert.equal(s3.json.state.runState, 'STALE', s3.json.state.why);
      assert.match(s3.json.state.why, new RegExp(`node ${nodeB.replace(/[.]/g, '\\.')} unreachable`));
      assert.ok(s3.ms < 10_000, `answered in ${s3.ms} ms (≤ 10 s)`);
      assert.deepEqual(
        s3.json.nodes.map((n) => n.reachable),
        [true, false],
      );
      // the watchdog says the same: its state line and its metrics, never RUNNING without node B
      const prom3 = join(tmp, 'unreachable.prom');
      const wd3 = watchdogOnce(prom3);
      console.log(`# watchdog --once --node with node B unreachable: ${wd3.ms} ms`);
      const st3 = wd3.events.find((e) => e.event === 'state');
      assert.equal(st3?.state, 'STALE', wd3.out);
      assert.match(st3?.why ?? '', new RegExp(`node ${nodeB.replace(/[.]/g, '\\.')} unreachable`));
      assert.match(readFileSync(prom3, 'utf8'), /^nsatop_run_state_info\{[^}]*state="STALE"\} 1$/m);

      // 4. back
      await sshd.start();
      const s4 = status();
      assert.equal(s4.json.state.runState, 'RUNNING', s4.json.state.why);
      assert.deepEqual(
        s4.json.processes.map((p) => [p.rank, p.host]),
        [
          [0, 'local'],
          [1, nodeB],
        ],
      );

      // 5. the watchdog over both nodes: one judgement; the metrics carry each rank's and GPU's node
      const prom = join(tmp, 'nodes.prom');
      const wd = watchdogOnce(prom);
      console.log(`# watchdog --once --node over 2 nodes: ${wd.ms} ms`);
      assert.equal(wd.code, 0, wd.out);
      const states = wd.events;
      assert.deepEqual(states.find((e) => e.event === 'start')?.nodes, ['local', nodeB]);
      assert.equal(states.find((e) => e.event === 'state')?.state, 'RUNNING', wd.out);
      const text = readFileSync(prom, 'utf8');
      for (const [rank, host] of [
        [0, 'local'],
        [1, nodeB],
      ] as const)
        assert.match(text, new RegExp(`^nsatop_rank_up\\{[^}]*rank="${rank}",host="${host}"\\} 1$`, 'm'), text);
      const gpuLines = text.split('\n').filter((l) => l.startsWith('nsatop_gpu_utilization_ratio{'));
      assert.equal(gpuLines.length, 2, text);
      for (const l of gpuLines) assert.ok(l.includes(`hostname="${b.addr}"`) && l.includes(`host="${nodeB}"`), l);
      if (PROMTOOL) {
        // nothing to say but dcgm-exporter's camelCase `modelName` on the GPU series (docs/prometheus.md)
        const chk = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 20_000 });
        const said = (chk.stdout + chk.stderr).split('\n').filter((l) => l.trim() !== '');
        assert.deepEqual(
          said.filter((l) => !/^nsatop_gpu_\w+ label names should be written in 'snake_case' not 'camelCase'$/.test(l)),
          [],
        );
        assert.equal(chk.status, said.length ? 3 : 0, chk.stdout + chk.stderr);
      }

      // 6. stop --node: .HALT (ignored by these ranks), then SIGINT to each rank on its own node
      const why = 'end of the test';
      const st = a.run(
        [process.execPath, bin, 'stop', run, '--json', '--halt-grace', '1', '--reason', why, ...nodeArgs],
        {
          env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' },
          timeoutMs: 60_000,
        },
      );
      console.log(`# stop --node over 2 nodes: ${st.ms} ms`);
      assert.equal(st.code, 0, st.stdout + st.stderr);
      const sj = JSON.parse(st.stdout) as {
        reason: string | null;
        steps: { action: string; result: string; target: { sentOn?: { host: string; pid: number }[] } }[];
      };
      assert.equal(sj.reason, why);
      assert.deepEqual(
        sj.steps.map((x) => [x.action, x.result]),
        [
          ['halt', 'ok'],
          ['escalate-sigint', 'ok'],
        ],
        st.stdout,
      );
      assert.deepEqual(sj.steps[1]!.target.sentOn, [
        { host: 'local', pid: pid0 },
        { host: nodeB, pid: pid1 },
      ]);
      // the reason is in every record the stop wrote (as `stop --reason` on one host)
      const logged = readFileSync(join(run, '.nsa-top', 'actions.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { action: string; detail: string; target: { reason?: string } })
        .filter((x) => x.action === 'halt' || x.action === 'escalate-sigint');
      assert.deepEqual(
        logged.map((x) => [x.action, x.target.reason, x.detail.endsWith(`(reason: ${why})`)]),
        [
          ['halt', why, true],
          ['escalate-sigint', why, true],
        ],
        JSON.stringify(logged),
      );
      const gone = (node: typeof a, pid: number) => {
        const stat = node.run(['sh', '-c', `cat /proc/${pid}/stat 2>/dev/null || true`]).stdout;
        return stat === '' || / Z /.test(stat);
      };
      await until('rank 0 gone on node A, rank 1 on node B', 10_000, () => gone(a, pid0) && gone(b, pid1));
      assert.ok(existsSync(join(run, '.HALT')));
    } finally {
      job?.kill();
      await nodes?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
);
