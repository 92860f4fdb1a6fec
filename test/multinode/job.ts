// The 2-node job of the multi-node tests: `torchrun --nnodes 2` (c10d rendezvous on node A's veth
// address, one rank per node) of train_showcase.py, writing into `run`, which both nodes share; and
// the small waits the tests share. The job's output goes to `<tmp>/job.log` (shown when it fails).
import { type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TORCHRUN, type NetNode, type Nodes } from '../helpers/netns.js';

const worker = fileURLToPath(new URL('./train_showcase.py', import.meta.url));

export async function until<T>(what: string, ms: number, f: () => T | null | undefined | false): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Gives node B's root an empty home in node B's mount namespace, as a clean machine has: this box's
 * /root/.bashrc runs `pyenv init` in every SSH session (bash reads it for sshd), whose rehash lock,
 * left behind by a session cut short (a killed sshd, a closed connection), stalls every later SSH
 * session on the machine 60 s — and each SSH session costs a second of it under load. Before the job.
 */
export function cleanHome(node: NetNode, tmp: string): void {
  const home = join(tmp, `root-${node.name}`);
  mkdirSync(home);
  const r = node.run(['mount', '--bind', home, '/root']);
  if (r.code !== 0) throw new Error(`node ${node.name}: mount --bind ${home} /root: ${r.stderr}`);
}

/** the pid rank `rank`'s boot heartbeat names (as its own node sees it) */
export function heartbeatPid(run: string, rank: number): number | null {
  const f = join(run, `heartbeat_rank${rank}.jsonl`);
  if (!existsSync(f)) return null;
  const boot = readFileSync(f, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"boot"'))
    .pop();
  return boot ? (JSON.parse(boot) as { pid: number }).pid : null;
}

export interface Job {
  /** torchrun on node A, on node B (nsenter's processes, outside the nodes) */
  procs: ChildProcess[];
  /** the job's output so far (its last 3000 characters) */
  tail(): string;
  /** SIGKILL what is left (the nodes' stop() kills the rest with their PID namespaces) */
  kill(): void;
}

/**
 * Starts the job on both nodes; resolves once both ranks booted and rank 0 logged steps. `workerArgs`:
 * more arguments of train_showcase.py (e.g. --ignore-halt).
 */
export async function startJob(
  nodes: Nodes,
  run: string,
  tmp: string,
  stepS = 0.2,
  workerArgs: string[] = [],
): Promise<Job> {
  const { a, b } = nodes;
  const log = join(tmp, 'job.log');
  const port = 29000 + Math.floor(Math.random() * 900);
  let done = false;
  const procs: ChildProcess[] = [];
  const start = (node: NetNode, nodeRank: number) => {
    const p = node.spawn(
      [
        'env',
        `NSA_TOP_RUN_DIR=${run}`,
        TORCHRUN,
        // (Debian's torch 1.13 on Python 3.11 cannot parse the default `--redirects 0`)
        ...['--redirects', '1', '--tee', '1', '--log_dir', join(tmp, `logs${nodeRank}`)],
        ...['--nnodes', '2', '--nproc_per_node', '1', '--rdzv_backend', 'c10d'],
        ...['--rdzv_endpoint', `${a.addr}:${port}`, '--rdzv_id', 'nsa-top-test'],
        ...['--rdzv_conf', `is_host=${nodeRank === 0 ? 1 : 0}`],
        ...[worker, '--step-s', String(stepS), ...workerArgs],
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    // every line tagged with its node (a chunk may hold several lines, or end mid-line)
    for (const s of [p.stdout!, p.stderr!]) {
      let rest = '';
      s.on('data', (d: Buffer) => {
        if (done) return;
        const lines = (rest + d.toString('utf8')).split('\n');
        rest = lines.pop()!;
        if (lines.length) appendFileSync(log, lines.map((l) => `[${node.name}] ${l}\n`).join(''));
      });
    }
    procs.push(p);
  };
  start(a, 0);
  start(b, 1);
  const tail = () => (existsSync(log) ? readFileSync(log, 'utf8').slice(-3000) : '(no output)');
  const job: Job = {
    procs,
    tail,
    kill() {
      done = true;
      for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    },
  };
  await until('both ranks to boot and step', 90_000, () => {
    if (procs.some((j) => j.exitCode !== null)) throw new Error(`the job ended early:\n${tail()}`);
    return (
      existsSync(join(run, 'training.csv')) &&
      readFileSync(join(run, 'training.csv'), 'utf8').split('\n').length > 2 &&
      heartbeatPid(run, 1) !== null
    );
  }).catch((e: Error) => {
    job.kill();
    throw new Error(`${e.message}\n${tail()}`);
  });
  return job;
}
