// Actions across a real multi-node run (issue 22): two nodes made of namespaces (test/helpers/netns.ts),
// one 2-node torchrun job (test/multinode/job.ts), and the cockpit with `--node local --node root@B`
// running on node A in a pane of an isolated tmux server. One job is shared by every step:
// - `d` in the cockpit dumps both ranks, each signalled on its own node (both ranks have the same
//   pid, each in its own node's PID namespace), each named with its node, one file each;
// - node B's sshd killed: the cockpit says STALE "node … unreachable" within 10 s and shows rank 1 as
//   its last answer, with its age; `status --node` says the same; `dump --node` signals rank 0 and
//   names node B — unreachable, none of its ranks signalled — in its result and in the action log;
// - sshd back: the cockpit RUNNING again with both ranks live;
// - `h` `n` in the cockpit: the one .HALT in the run dir on node A; both ranks exit, each on its node.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { nodesUnavailable, startNodes, type Nodes } from '../helpers/netns.js';
import { isolatedTmux } from '../e2e/tmuxserver.js';
import { cleanHome, heartbeatPid, startJob, until, type Job } from './job.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));

const T = isolatedTmux('nsa-multinode-actions-', 'the multi-node actions test');
const skip = nodesUnavailable({ torch: true }) ?? T.skip;
if (skip) console.log(`# multi-node actions test SKIPPED: ${skip}`);
after(() => T.close());

interface Rec {
  action: string;
  result: string;
  detail: string;
  target: { perRank?: { rank: number; host: string; pid: number; status: string; file: string | null }[] };
}
const actions = (run: string): Rec[] =>
  readFileSync(join(run, '.nsa-top', 'actions.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Rec);

test(
  'across two nodes: d dumps both ranks (each on its node); node B unreachable within 10 s, then back; h halts both',
  { skip: skip || false, timeout: 240_000 },
  async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'nsa-multinode-actions-'));
    let nodes: Nodes | null = null;
    let job: Job | null = null;
    try {
      nodes = await startNodes();
      const { a, b, sshd } = nodes;
      const run = join(tmp, 'run');
      mkdirSync(run);
      // node B's SSH sessions (the cockpit's process tables and GPU sampling there) without this box's
      // /root/.bashrc: its sshd is killed below, mid-session
      cleanHome(b, tmp);
      const t0 = Date.now();
      job = await startJob(nodes, run, tmp);
      console.log(`# 2-node job stepping ${((Date.now() - t0) / 1000).toFixed(1)} s after start`);
      const pid0 = heartbeatPid(run, 0)!;
      const pid1 = heartbeatPid(run, 1)!;

      const home = join(tmp, 'home');
      mkdirSync(join(home, '.ssh'), { recursive: true });
      writeFileSync(join(home, '.ssh', 'known_hosts'), `${sshd.knownHostsLine}\n`);
      const nodeB = `root@${b.addr}:${sshd.port}`;
      const env = { HOME: home, SSH_AUTH_SOCK: '' };
      const nodeArgs = ['--node', 'local', '--node', nodeB, '-i', sshd.userKey];
      const nsaTop = (...args: string[]) =>
        a.run([process.execPath, bin, ...args, ...nodeArgs], { env: { ...process.env, ...env }, timeoutMs: 60_000 });

      // the cockpit on node A, over both nodes
      const envArgs = Object.entries({ ...env, TERM: 'xterm-256color', TZ: 'UTC' }).map(([k, v]) => `${k}=${v}`);
      T.tmux(
        'new-session',
        '-d',
        '-s',
        'c',
        '-x',
        '200',
        '-y',
        '50',
        '--',
        ...a.wrap(['env', ...envArgs, process.execPath, bin, run, ...nodeArgs, '--no-mouse']),
      );
      T.tmux('set-option', '-t', 'c', 'remain-on-exit', 'on');
      const pane = () => T.tmux('capture-pane', '-p', '-t', 'c:0').split('\n');
      const onPane = (what: string, ms: number, ok: (rows: string[]) => boolean) =>
        until(what, ms, () => ok(pane())).catch((e: Error) => {
          throw new Error(`${e.message}\n--- pane ---\n${pane().join('\n')}`);
        });
      const rankRow = (rows: string[], rank: number) => rows.find((l) => new RegExp(`│ +${rank} +\\d+ `).test(l)) ?? '';
      const tC = Date.now();
      await onPane('the cockpit RUNNING with both ranks, each on its node', 30_000, (r) => {
        return /^ RUNNING /.test(r[0] ?? '') && / @1\b/.test(rankRow(r, 0)) && / @2\b/.test(rankRow(r, 1));
      });

      console.log(`# the cockpit over 2 nodes RUNNING with both ranks ${Date.now() - tC} ms after its start`);

      // 1. d: SIGUSR1 to each rank on its own node (the same pid on both: per node)
      const tD = Date.now();
      T.tmux('send-keys', '-t', 'c:0', 'd');
      await onPane('the dump done', 30_000, (r) => r.some((l) => l.includes('the Dumps panel shows the set')));
      const dumpMs = Date.now() - tD;
      const dump = actions(run).findLast((x) => x.action === 'dump')!;
      assert.equal(dump.result, 'ok', dump.detail);
      const per = dump.target.perRank!;
      assert.deepEqual(
        per.map((p) => [p.rank, p.host, p.pid, p.status]),
        [
          [0, 'local', pid0, 'dumped'],
          [1, nodeB, pid1, 'dumped'],
        ],
      );
      assert.notEqual(per[0]!.file, per[1]!.file, 'one file each');
      for (const p of per)
        assert.match(readFileSync(p.file!, 'utf8'), /^Signal 10 at .*\n--- Thread: MainThread[^]*train_showcase\.py/);
      assert.match(dump.detail, new RegExp(`rank 1 on ${nodeB.replace(/\./g, '\\.')} stackdump_\\d+\\.txt`));
      console.log(`# d across 2 nodes: both ranks dumped in ${dumpMs} ms (pids ${pid0} on A, ${pid1} on B)`);
      T.tmux('send-keys', '-t', 'c:0', 'Escape');

      // 2. node B's sshd killed: unreachable, STALE with its age — never RUNNING by omission
      sshd.kill();
      const tKill = Date.now();
      await onPane('STALE: node B unreachable', 10_000, (r) =>
        new RegExp(`^ STALE .*node ${nodeB.replace(/\./g, '\\.')} unreachable`).test(r[0] ?? ''),
      );
      const staleMs = Date.now() - tKill;
      console.log(`# node B's sshd killed: the cockpit STALE "node B unreachable" after ${staleMs} ms`);
      // the Ranks panel zoomed (4: focus it, z: zoom), so that each rank's lines all show
      T.tmux('send-keys', '-t', 'c:0', '4');
      T.tmux('send-keys', '-t', 'c:0', 'z');
      await onPane('rank 1 shown as its last answer, with its age', 15_000, (r) => {
        const i = r.indexOf(rankRow(r, 1));
        return / (\?|stale) .*@2\b/.test(r[i] ?? '') && /└ node @2 unreachable: as seen \S+ ago/.test(r[i + 1] ?? '');
      });
      console.log(`# rank 1 shown stale with its age ${Date.now() - tKill} ms after the kill`);
      const s = nsaTop('status', run, '--json');
      const sj = JSON.parse(s.stdout) as { state: { runState: string; why: string }; nodes: { reachable: boolean }[] };
      assert.equal(sj.state.runState, 'STALE', sj.state.why);
      assert.deepEqual(
        sj.nodes.map((n) => n.reachable),
        [true, false],
      );
      // a dump that cannot reach node B says so for node B, and the action log keeps it
      console.log(`# status --node over the unreachable node: ${s.ms} ms`);
      const d2 = nsaTop('dump', run, '--json');
      console.log(`# dump --node over the unreachable node: ${d2.ms} ms`);
      assert.equal(d2.code, 1, d2.stderr);
      const dj = JSON.parse(d2.stdout) as { perRank: { rank: number }[]; outOfReach: { host: string }[] };
      assert.deepEqual(
        dj.perRank.map((p) => p.rank),
        [0],
      );
      assert.deepEqual(
        dj.outOfReach.map((n) => n.host),
        [nodeB],
      );
      const rec2 = actions(run).findLast((x) => x.action === 'dump')!;
      assert.equal(rec2.result, 'partial');
      assert.match(rec2.detail, /unreachable: .*its ranks are not known, none signalled there/);

      // 3. sshd back: RUNNING again, rank 1 live on node B
      await sshd.start();
      const tBack = Date.now();
      await onPane('RUNNING again, both ranks live', 30_000, (r) => {
        return (
          /^ RUNNING /.test(r[0] ?? '') && / @2\b/.test(rankRow(r, 1)) && !r.some((l) => l.includes('@2 unreachable'))
        );
      });
      console.log(`# node B's sshd back: the cockpit RUNNING again after ${Date.now() - tBack} ms`);

      // 4. h, n: the one .HALT in the run dir; both ranks exit, each on its own node
      T.tmux('send-keys', '-t', 'c:0', 'h');
      await onPane('the halt question', 10_000, (r) => r.some((l) => l.includes('Halt the run?')));
      const tHalt = Date.now();
      // its keys arm a moment after it is drawn (typeahead.ts): asked again until it answers
      await until('the halt taken', 10_000, () => {
        if (pane().some((l) => l.includes('Halt (now)'))) return true;
        T.tmux('send-keys', '-t', 'c:0', 'n');
        return false;
      });
      assert.match(readFileSync(join(run, '.HALT'), 'utf8'), /^halt: manual_stop /);
      await onPane('all ranks stopped', 30_000, (r) => r.some((l) => l.includes('all ranks stopped after')));
      console.log(`# h across 2 nodes: the cockpit says both ranks stopped ${Date.now() - tHalt} ms after the halt`);
      // each rank gone from its own node (or a zombie its launcher has not reaped yet), stopped by the .HALT
      const gone = (node: typeof a, pid: number) => {
        const st = node.run(['sh', '-c', `cat /proc/${pid}/stat 2>/dev/null || true`]).stdout;
        return st === '' || / Z /.test(st);
      };
      await until('rank 0 gone on node A, rank 1 on node B', 10_000, () => gone(a, pid0) && gone(b, pid1));
      await until('both ranks saying they found .HALT', 10_000, () =>
        ['A', 'B'].every((n) => new RegExp(`\\[${n}\\][^\\n]*\\.HALT found`).test(job!.tail())),
      ).catch((e: Error) => {
        throw new Error(`${e.message}\n--- the job's output ---\n${job!.tail()}`);
      });
      const halt = actions(run).findLast((x) => x.action === 'halt')!;
      assert.equal(halt.result, 'ok', halt.detail);
      T.tmux('send-keys', '-t', 'c:0', 'Escape');
      T.tmux('send-keys', '-t', 'c:0', 'q');
    } finally {
      job?.kill();
      await nodes?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
);
