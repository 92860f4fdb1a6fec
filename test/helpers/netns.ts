// Two "nodes" on one machine for multi-node tests: two network namespaces joined by a veth pair on a
// random private /24 (10.X.Y.1 and 10.X.Y.2), each with its own PID namespace (`ip netns exec NS
// unshare --pid --fork --mount-proc`, whose pid 1 holds the node) and so its own /proc. A command
// runs on a node through `nsenter -t <pid 1> -p -m -n`; node B also runs its own OpenSSH sshd on its
// veth address (keys and sshd_config made as test/helpers/sshd.ts makes them). The run dir lives in
// the root mount namespace, which both nodes inherited: the shared file system case.
//
//   const why = nodesUnavailable(); if (why) { t.skip(why); return; }
//   const nodes = await startNodes();
//   try { … nodes.a.spawn([...]) … } finally { await nodes.stop(); }
//
// Names (namespaces, veths) are unique per call, so parallel runs never collide. stop() kills each
// node's pid 1 — the kernel then kills every process of that PID namespace, and only those — and
// deletes the namespaces (the veth pair goes with them); it also runs on process exit, so a failed
// or interrupted test leaves nothing behind.
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SSHD = ['/usr/sbin/sshd', '/usr/local/sbin/sshd', '/sbin/sshd'].find((p) => existsSync(p)) ?? null;
export const TORCH_PYTHON = '/usr/bin/python3';
export const TORCHRUN = '/usr/bin/torchrun';

export interface NetNode {
  /** 'A' or 'B' */
  name: string;
  /** the network namespace's name (`ip netns`) */
  ns: string;
  /** the node's veth address */
  addr: string;
  /** its hostname (its own UTS namespace; both nodes' /etc/hosts name both) */
  hostname: string;
  /** pid (as the root namespace sees it) of the node's pid 1 */
  init: number;
  /** argv that runs `argv` on the node */
  wrap(argv: string[]): string[];
  /** a process on the node (its pid is nsenter's, outside the node; see childOf) */
  spawn(argv: string[], opts?: SpawnOptions): ChildProcess;
  /** a command on the node, waited for */
  run(
    argv: string[],
    opts?: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv },
  ): { code: number | null; stdout: string; stderr: string; ms: number };
}

export interface NodeSshd {
  port: number;
  /** private key root logs in with */
  userKey: string;
  /** a known_hosts file that holds `[addr]:port ssh-ed25519 …` for node B's sshd */
  knownHosts: string;
  /** the line for known_hosts */
  knownHostsLine: string;
  /** kill node B's sshd and every session it started (connections drop): the node is unreachable */
  kill(): void;
  /** start it again (the same host key) */
  start(): Promise<void>;
}

export interface Nodes {
  a: NetNode;
  b: NetNode;
  sshd: NodeSshd;
  /** a temp dir of the test (keys, logs); removed by stop() */
  dir: string;
  stop(): Promise<void>;
}

function has(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0;
}

/** Why the two-node tests cannot run here (null: they can): what is missing, in words. */
export function nodesUnavailable(opts: { torch?: boolean } = {}): string | null {
  if (process.platform !== 'linux') return 'not Linux: no network or PID namespaces';
  if (process.getuid?.() !== 0) return 'not root: ip netns and unshare --pid need root';
  for (const c of ['ip', 'unshare', 'nsenter'])
    if (!has(c)) return `no ${c} (Debian: ${c === 'ip' ? 'iproute2' : 'util-linux'})`;
  if (!SSHD) return 'no sshd (Debian: openssh-server)';
  if (opts.torch) {
    if (!existsSync(TORCH_PYTHON) || !existsSync(TORCHRUN))
      return `no ${TORCH_PYTHON} / ${TORCHRUN} (Debian: python3-torch)`;
    const r = spawnSync(
      TORCH_PYTHON,
      ['-c', 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("torch") else 1)'],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) return `no torch for ${TORCH_PYTHON} (Debian: python3-torch)`;
  }
  // a probe: a container without CAP_SYS_ADMIN cannot make a namespace
  const probe = `nsp${randomBytes(4).toString('hex')}`;
  const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (r.status !== 0) return `ip netns add failed: ${r.stderr.trim().split('\n')[0]}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return null;
}

function sh(argv: string[]): void {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
}

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The process a wrapper (unshare --fork, nsenter -p) forked, once it has. */
export async function childOf(pid: number, timeoutMs = 10_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const c = children(pid);
    if (c.length > 0) return c[0]!;
    if (Date.now() - t0 > timeoutMs) throw new Error(`pid ${pid} started no child in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** pid and every descendant of it (root-namespace pids) */
function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...children(out[i]!));
  return out;
}

function kill(pid: number, sig: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

const live = new Set<() => void>();
process.once('exit', () => {
  for (const f of live) f();
});

export async function startNodes(): Promise<Nodes> {
  const id = randomBytes(3).toString('hex');
  const net = `10.${1 + (randomBytes(1)[0]! % 250)}.${randomBytes(1)[0]!}`;
  const dir = mkdtempSync(join(tmpdir(), 'nsa-nodes-'));
  const made: string[] = [];
  const holders: ChildProcess[] = [];
  const inits: number[] = [];
  const cleanup = () => {
    for (const p of inits) kill(p);
    for (const h of holders) if (h.pid) kill(h.pid);
    for (const ns of made) spawnSync('ip', ['netns', 'del', ns]);
    made.length = 0;
    rmSync(dir, { recursive: true, force: true });
  };
  live.add(cleanup);
  try {
    const nsA = `nsa${id}a`;
    const nsB = `nsa${id}b`;
    for (const ns of [nsA, nsB]) {
      sh(['ip', 'netns', 'add', ns]);
      made.push(ns);
    }
    sh(['ip', 'link', 'add', `v${id}a`, 'type', 'veth', 'peer', 'name', `v${id}b`]);
    const hosts = join(dir, 'hosts');
    writeFileSync(hosts, `127.0.0.1 localhost\n${net}.1 nodea-${id}\n${net}.2 nodeb-${id}\n`);
    const nodes: NetNode[] = [];
    for (const [name, ns, host] of [
      ['A', nsA, 1],
      ['B', nsB, 2],
    ] as const) {
      const dev = `v${id}${name.toLowerCase()}`;
      sh(['ip', 'link', 'set', dev, 'netns', ns]);
      sh(['ip', '-n', ns, 'addr', 'add', `${net}.${host}/24`, 'dev', dev]);
      sh(['ip', '-n', ns, 'link', 'set', dev, 'up']);
      sh(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
      const holder = spawn(
        'ip',
        ['netns', 'exec', ns, 'unshare', '--pid', '--uts', '--fork', '--mount-proc', 'sleep', 'infinity'],
        {
          stdio: 'ignore',
        },
      );
      holders.push(holder);
      const init = await childOf(holder.pid!);
      inits.push(init);
      const wrap = (argv: string[]) => ['nsenter', '-t', String(init), '-p', '-m', '-n', '-u', '--', ...argv];
      // its own hostname, resolved (by its own /etc/hosts, bind-mounted in its mount namespace) to its
      // veth address: torchrun's c10d rendezvous publishes the rank-0 node's hostname as MASTER_ADDR
      const hostname = `node${name.toLowerCase()}-${id}`;
      // (never the machine's own: only in a UTS namespace that is not ours)
      if (readlinkSync(`/proc/${init}/ns/uts`) === readlinkSync('/proc/self/ns/uts'))
        throw new Error(`node ${name} has no UTS namespace of its own`);
      if (readlinkSync(`/proc/${init}/ns/mnt`) === readlinkSync('/proc/self/ns/mnt'))
        throw new Error(`node ${name} has no mount namespace of its own`);
      sh([...wrap(['hostname', hostname])]);
      sh([...wrap(['mount', '--bind', hosts, '/etc/hosts'])]);
      nodes.push({
        name,
        ns,
        hostname,
        addr: `${net}.${host}`,
        init,
        wrap,
        spawn: (argv, opts = {}) => {
          const w = wrap(argv);
          return spawn(w[0]!, w.slice(1), opts);
        },
        run: (argv, opts = {}) => {
          const w = wrap(argv);
          const t0 = Date.now();
          const r = spawnSync(w[0]!, w.slice(1), {
            encoding: 'utf8',
            input: opts.input,
            env: opts.env ?? process.env,
            timeout: opts.timeoutMs ?? 60_000,
          });
          return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', ms: Date.now() - t0 };
        },
      });
    }
    const [a, b] = nodes as [NetNode, NetNode];
    const sshd = await nodeSshd(b, dir);
    return {
      a,
      b,
      sshd,
      dir,
      async stop() {
        sshd.kill();
        cleanup();
        live.delete(cleanup);
      },
    };
  } catch (e) {
    cleanup();
    live.delete(cleanup);
    throw e;
  }
}

function keygen(path: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'nsa-top-test', '-f', path], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

/** OpenSSH's sshd on node B's veth address, as test/helpers/sshd.ts sets one up on loopback. */
async function nodeSshd(node: NetNode, parent: string): Promise<NodeSshd> {
  const dir = join(parent, 'sshd');
  mkdirSync(dir);
  const hostKey = join(dir, 'host_ed25519');
  const userKey = join(dir, 'id_ed25519');
  keygen(hostKey);
  keygen(userKey);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(`${userKey}.pub`));
  const port = 20000 + (randomBytes(2).readUInt16BE() % 20000);
  const pidFile = join(dir, 'sshd.pid');
  const cfg = join(dir, 'sshd_config');
  writeFileSync(
    cfg,
    [
      `Port ${port}`,
      `ListenAddress ${node.addr}`,
      `HostKey ${hostKey}`,
      `PidFile ${pidFile}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'UsePAM no',
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'MaxSessions 10',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  const pub = readFileSync(`${hostKey}.pub`, 'utf8').trim().split(/\s+/);
  const knownHostsLine = `[${node.addr}]:${port} ${pub[0]} ${pub[1]}`;
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, `${knownHostsLine}\n`);
  let wrapper: ChildProcess | null = null;
  let sshdPid: number | null = null;
  let err = '';
  const self: NodeSshd = {
    port,
    userKey,
    knownHosts,
    knownHostsLine,
    kill() {
      // the listener and every per-connection process it forked (all started here)
      if (sshdPid !== null) for (const p of tree(sshdPid).reverse()) kill(p);
      if (wrapper?.pid) kill(wrapper.pid);
      sshdPid = null;
      wrapper = null;
    },
    async start() {
      if (!existsSync('/run/sshd')) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
      rmSync(pidFile, { force: true });
      err = '';
      wrapper = node.spawn([SSHD!, '-D', '-e', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
      wrapper.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
      sshdPid = await childOf(wrapper.pid!);
      // sshd writes its PidFile once it listens
      const t0 = Date.now();
      while (!existsSync(pidFile)) {
        if (wrapper.exitCode !== null || Date.now() - t0 > 15_000)
          throw new Error(`node ${node.name}'s sshd did not start: ${err.trim()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
  await self.start();
  return self;
}
