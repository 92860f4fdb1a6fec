// A real OpenSSH sshd on loopback for tests: its own host and user keys (ssh-keygen) and its own
// sshd_config in a temp dir, started with `sshd -D -e -f cfg` and stopped by its pid. Where sshd
// is absent it falls back to a small ssh2 Server that runs commands with `sh -c`, and says so
// (`kind`). Reusable by any test that needs a remote host:
//
//   const sshd = await startSshd();
//   const host = await sshd.connect();        // an SshHost logged in with the test key
//   …
//   await host.close(); await sshd.stop();
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as netConnect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { SshHost, type SshHostOptions } from '../../src/remote/ssh/host.js';
import { resolveTarget } from '../../src/remote/ssh/config.js';
import { knownHostName } from '../../src/remote/ssh/knownhosts.js';

// a --host command started by a test keeps no connection behind it (src/remote/ssh/keep.ts) unless
// the test asks for it (test/remote/ssh-keep.test.ts): children inherit this
process.env.NSA_TOP_SSH_KEEP ??= '0';

const SSHD = ['/usr/sbin/sshd', '/usr/local/sbin/sshd', '/sbin/sshd'].find((p) => existsSync(p)) ?? null;
const UNSHARE = ['/usr/bin/unshare', '/bin/unshare'].find((p) => existsSync(p)) ?? null;

export interface TestSshd {
  readonly kind: 'openssh' | 'ssh2-server';
  /** why the ssh2 fallback runs ('' for OpenSSH) */
  readonly why: string;
  /** sessions start with an empty ~/.bashrc (asked with plainShell, and it could be done) */
  readonly plain: boolean;
  port: number;
  dir: string;
  /** private key the test user logs in with */
  userKey: string;
  /** an empty known_hosts in the temp dir (tests pass it explicitly; ~/.ssh is never touched) */
  knownHosts: string;
  /** `[127.0.0.1]:port ssh-ed25519 AAAA…` for the current host key */
  knownHostsLine(): string;
  pid(): number | null;
  /**
   * Sessions sshd started with a command (`Starting session: command …`, OpenSSH with logSessions
   * only; null otherwise): how many execs a client opened.
   */
  execs(): number | null;
  /** SSH connections sshd authenticated (`Accepted publickey`, OpenSSH with logSessions only; null otherwise) */
  connections(): number | null;
  /** pids of the per-connection sshd processes (children of the listener) */
  sessionPids(): number[];
  /** kill every per-connection process: connections drop, the listener stays */
  killSessions(): void;
  /** new host key (for the "changed key" test); takes effect for new connections after restart */
  regenerateHostKey(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
  connect(extra?: Partial<SshHostOptions>): Promise<SshHost>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function waitListening(port: number, ms = 10000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const ok = await new Promise<boolean>((r) => {
      const c = netConnect({ host: '127.0.0.1', port });
      c.once('connect', () => {
        c.destroy();
        r(true);
      });
      c.once('error', () => r(false));
    });
    if (ok) return;
    if (Date.now() - t0 > ms) throw new Error(`sshd did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function keygen(path: string, type: 'ed25519' | 'ecdsa' = 'ed25519'): void {
  rmSync(path, { force: true });
  rmSync(`${path}.pub`, { force: true });
  const r = spawnSync('ssh-keygen', ['-q', '-t', type, '-N', '', '-C', 'nsa-top-test', '-f', path], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

export async function startSshd(
  opts: {
    forceFallback?: boolean;
    /** the one host key the server presents (ed25519 unless said) */ hostKeyType?: 'ed25519' | 'ecdsa';
    /** log every session's command (LogLevel VERBOSE): `execs()` counts them */ logSessions?: boolean;
    /**
     * sessions start a login shell with nothing in the user's ~/.bashrc (an empty file bound over it
     * in sshd's own mount namespace, root only): a training box's shell as Debian ships it, for
     * benchmarks that must not measure this machine's rc files (root's pyenv init here: ~0.6 s per
     * session). `plain` says whether it took.
     */
    plainShell?: boolean;
    /** PATH of the sessions' commands (a directory of stand-in tools first, say) */ path?: string;
  } = {},
): Promise<TestSshd> {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-sshd-'));
  const hostKeyType = opts.hostKeyType ?? 'ed25519';
  const hostKey = join(dir, `host_${hostKeyType}`);
  const userKey = join(dir, 'id_ed25519');
  keygen(hostKey, hostKeyType);
  keygen(userKey);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(`${userKey}.pub`));
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, '');
  const port = await freePort();
  const force = opts.forceFallback ?? process.env.NSA_TEST_SSH_SERVER === 'ssh2';
  let kind: TestSshd['kind'] = SSHD && !force ? 'openssh' : 'ssh2-server';
  /** why the fallback runs, for the test output */
  let why = SSHD ? (force ? 'NSA_TEST_SSH_SERVER=ssh2' : '') : 'no sshd installed';
  let child: ChildProcess | null = null;
  let fallback: { close(): void } | null = null;
  /** sshd's stderr when logSessions is set (OpenSSH only) */
  let sessionLog = '';
  /** whether sessions start with an empty ~/.bashrc (opts.plainShell, where it could be done) */
  let plain = false;
  const cfg = join(dir, 'sshd_config');
  writeFileSync(
    cfg,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'UsePAM no',
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'MaxSessions 10',
      `LogLevel ${opts.logSessions ? 'VERBOSE' : 'ERROR'}`,
      ...(opts.path ? [`SetEnv PATH=${opts.path}`] : []),
      '',
    ].join('\n'),
  );

  const start = async () => {
    if (kind === 'openssh') {
      try {
        // sshd insists on its privilege-separation dir, even when not run as root
        if (!existsSync('/run/sshd')) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
      } catch {
        /* not root: sshd will say so if it minds */
      }
      const rc = join(userInfo().homedir, '.bashrc');
      plain = !!opts.plainShell && process.getuid?.() === 0 && existsSync(rc) && UNSHARE !== null;
      if (plain) writeFileSync(join(dir, 'empty'), '');
      // unshare execs (no fork) and the shell execs sshd: the child's pid is sshd's either way
      child = plain
        ? spawn(
            UNSHARE!,
            [
              '--mount',
              '--',
              'sh',
              '-c',
              'mount --bind "$1" "$2" && exec "$3" -D -e -f "$4"',
              'sh',
              join(dir, 'empty'),
              rc,
              SSHD!,
              cfg,
            ],
            { stdio: ['ignore', 'ignore', 'pipe'] },
          )
        : spawn(SSHD!, ['-D', '-e', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (b: Buffer) => {
        err = (err + b.toString()).slice(-2000);
        if (opts.logSessions) sessionLog += b.toString();
      });
      const exited = new Promise<never>((_, rej) =>
        child!.once('exit', (c) => rej(new Error(`sshd exited (${c}): ${err.trim()}`))),
      );
      exited.catch(() => {});
      try {
        await Promise.race([waitListening(port), exited]);
      } catch (e) {
        if (child.exitCode === null) child.kill('SIGKILL');
        child = null;
        // e.g. an unprivileged CI user without /run/sshd: test against ssh2's Server instead, and say so
        kind = 'ssh2-server';
        why = `OpenSSH sshd would not start here (${(e as Error).message.split('\n')[0]})`;
        fallback = await startSsh2Server(port, hostKey, `${userKey}.pub`, opts.path);
      }
    } else {
      fallback = await startSsh2Server(port, hostKey, `${userKey}.pub`, opts.path);
    }
  };
  const stopServer = async () => {
    if (child && child.exitCode === null) {
      const c = child;
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 3000))]);
      if (c.exitCode === null) c.kill('SIGKILL');
    }
    child = null;
    fallback?.close();
    fallback = null;
  };
  await start();
  const self: TestSshd = {
    get kind() {
      return kind;
    },
    get why() {
      return why;
    },
    get plain() {
      return plain;
    },
    port,
    dir,
    userKey,
    knownHosts,
    knownHostsLine() {
      const pub = readFileSync(`${hostKey}.pub`, 'utf8').trim().split(/\s+/);
      return `${knownHostName('127.0.0.1', port)} ${pub[0]} ${pub[1]}`;
    },
    pid: () => (child as ChildProcess | null)?.pid ?? null,
    execs: () =>
      kind === 'openssh' && opts.logSessions ? (sessionLog.match(/Starting session: command/g) ?? []).length : null,
    connections: () =>
      kind === 'openssh' && opts.logSessions ? (sessionLog.match(/Accepted publickey for /g) ?? []).length : null,
    sessionPids() {
      const p = (child as ChildProcess | null)?.pid;
      return p ? childPids(p) : [];
    },
    killSessions() {
      if (kind !== 'openssh') {
        (fallback as unknown as { dropAll(): void } | null)?.dropAll();
        return;
      }
      for (const p of self.sessionPids()) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    },
    async regenerateHostKey() {
      keygen(hostKey, hostKeyType);
    },
    async restart() {
      await stopServer();
      await start();
    },
    async stop() {
      self.killSessions();
      await stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
    async connect(extra = {}) {
      const target = resolveTarget(`${userInfo().username}@127.0.0.1:${port}`, {
        identity: userKey,
        configText: '',
        home: dir,
      });
      if (!readFileSync(knownHosts, 'utf8').includes(self.knownHostsLine()))
        writeFileSync(knownHosts, `${self.knownHostsLine()}\n`);
      return SshHost.connect({
        target,
        knownHostsFiles: [knownHosts],
        knownHostsWritePath: knownHosts,
        agentSocket: null,
        keepaliveIntervalMs: 1000,
        keepaliveCountMax: 3,
        backoffInitialMs: 200,
        backoffMaxMs: 2000,
        ...extra,
      });
    },
  };
  return self;
}

/** Fallback where OpenSSH's sshd is not installed: ssh2's Server running `sh -c` locally. */
async function startSsh2Server(
  port: number,
  hostKeyPath: string,
  userPubPath: string,
  path?: string,
): Promise<{ close(): void; dropAll(): void }> {
  const ssh2 = await import('ssh2');
  const { Server, utils } = ssh2.default ?? ssh2;
  const { timingSafeEqual } = await import('node:crypto');
  const allowed = utils.parseKey(readFileSync(userPubPath)) as import('ssh2').ParsedKey;
  const conns = new Set<import('ssh2').Connection>();
  const procs = new Set<ChildProcess>();
  const server = new Server({ hostKeys: [readFileSync(hostKeyPath)] }, (client) => {
    conns.add(client);
    client.on('close', () => conns.delete(client));
    client.on('error', () => {});
    client.on('authentication', (ctx) => {
      if (
        ctx.method === 'publickey' &&
        ctx.key.algo === allowed.type &&
        timingSafeEqual(ctx.key.data, allowed.getPublicSSH())
      ) {
        if (ctx.signature && ctx.blob && allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true)
          return ctx.reject();
        return ctx.accept();
      }
      ctx.reject(['publickey']);
    });
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        session.on('exec', (acc, _rej, info) => {
          const stream = acc();
          // its own session, like sshd's children: `kill -- -PID` reaches the whole command
          const p = spawn('sh', ['-c', info.command], {
            stdio: ['pipe', 'pipe', 'pipe'],
            detached: true,
            ...(path ? { env: { ...process.env, PATH: path } } : {}),
          });
          procs.add(p);
          stream.pipe(p.stdin).on('error', () => {});
          p.stdout.pipe(stream, { end: false });
          p.stderr.pipe(stream.stderr, { end: false });
          p.on('close', (code) => {
            procs.delete(p);
            try {
              stream.exit(code ?? 1);
              stream.end();
            } catch {
              /* closed */
            }
          });
          stream.on('close', () => p.kill('SIGHUP'));
        });
      });
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return {
    close() {
      for (const c of conns) c.end();
      for (const p of procs) p.kill('SIGKILL');
      server.close();
    },
    dropAll() {
      for (const c of conns) (c as unknown as { _sock?: { destroy(): void } })._sock?.destroy();
    },
  };
}
