// The SSH connection of an SshHost: host keys verified against known_hosts (see knownhosts.ts):
// unknown → refused with the fingerprint unless acceptNewHostKey (then appended); changed (any
// key known_hosts does not hold, for a host it names with a key of any type) or
// revoked → always refused. Authentication by identity files and ssh-agent. Keepalive; on a drop
// it reconnects with backoff, and the hooks tell the host's parts what happened. The first
// attempt goes through a keeper of the target where one answers (keep.ts: its channels then
// travel over a unix socket); where none does, one is started as the connection closes.
import { connect as netConnect, type Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import type { Client, ClientChannel, ConnectConfig } from 'ssh2';
import type { ConnState, ExecOptions, ExecResult } from '../host.js';
import {
  appendKnownHost,
  checkHostKey,
  fingerprint,
  keyType,
  knownHostName,
  knownTypesFor,
  readKnownHosts,
} from './knownhosts.js';
import type { SshTarget } from './config.js';
import { sshTrace } from './trace.js';
import { openKept, openUnix, spawnKeeper } from './keep.js';

export interface SshHostOptions {
  target: SshTarget;
  acceptNewHostKey?: boolean;
  /** files consulted for host keys (default ~/.ssh/known_hosts, ~/.ssh/known_hosts2, /etc/ssh/ssh_known_hosts) */
  knownHostsFiles?: string[];
  /** where an accepted key is appended (default ~/.ssh/known_hosts) */
  knownHostsWritePath?: string;
  /** ssh-agent socket (default $SSH_AUTH_SOCK); null disables the agent */
  agentSocket?: string | null;
  keepaliveIntervalMs?: number;
  keepaliveCountMax?: number;
  readyTimeoutMs?: number;
  /** how often the watch loop is ticked (default 1000 ms) */
  watchIntervalMs?: number;
  /** channels open at once, all kinds (default 8; OpenSSH's MaxSessions is 10) */
  maxChannels?: number;
  /** reconnect backoff (default 500 ms doubling to 15 s) */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** the watch loop owing an answer this long marks follows as stalled (default 10 s) */
  stallMs?: number;
  /** test hook: use the `ls` fallback even where GNU find exists */
  posixOnly?: boolean;
  /** cuts a connect still under way short (an early connection nobody claimed: src/remote/early.ts) */
  signal?: AbortSignal;
  /** a TCP connection to the target opened before the SSH code loaded (src/remote/early.ts): the
   *  first connect is made on it (its failure is that connect's); reconnects open their own */
  sock?: EarlySocket;
  /** a kept connection (keep.ts): tried first; where none answers, one is started as this host closes */
  keep?: KeepOption;
}

/** Where a kept connection is looked for (keep.ts keepSocketFor) and for how long one is kept. */
export interface KeepOption {
  path: string;
  /** why the socket's directory is refused (then the connection is direct and nothing is kept) */
  problem: string | null;
  idleS: number;
  /** a unix connection to it opened early (src/remote/early.ts): null when nobody listened */
  pre?: Promise<import('node:net').Socket | null>;
}

/** A TCP connection opened early, and the error it met before the handshake took it (if any). */
export interface EarlySocket {
  sock: Socket;
  error: Error | null;
}

export class HostKeyError extends Error {
  /** the CLI's exit code for it (2: cannot proceed as asked) */
  readonly exitCode = 2;
  constructor(
    message: string,
    readonly status: 'unknown' | 'changed' | 'revoked',
    readonly fingerprint: string,
  ) {
    super(message);
    this.name = 'HostKeyError';
  }
}

export class SshConnectError extends Error {
  override name = 'SshConnectError';
  readonly exitCode = 2;
}

/** ssh2's Client class, loaded on first use (a CommonJS package: its exports may come as `default`). */
async function ssh2Client(): Promise<typeof Client> {
  const m = (await import('ssh2')) as typeof import('ssh2') & { default?: typeof import('ssh2') };
  return (m.default ?? m).Client;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** What the rest of the host does when the connection changes. */
export interface ConnectionHooks {
  /** a connection is up (called synchronously first: reset what counts per connection; then probe) */
  connected(): Promise<void>;
  /** the connection dropped under us: stop what ran on it */
  dropped(): void;
  /** a dropped connection is back */
  reconnected(): Promise<void>;
}

/** What the remote box told at connect. */
export interface BoxFacts {
  /** remote wall clock minus ours, ms */
  clockOffsetMs: number;
  /** GNU find (-printf) is there; else the `ls` fallback */
  gnuFind: boolean;
}

export class SshConnection {
  client: Client | null = null;
  private sock: Socket | null = null;
  state: ConnState = { state: 'closed' };
  closing = false;
  reconnects = 0;
  private readonly retired = { in: 0, out: 0 };
  private readonly connWaiters: (() => void)[] = [];
  private reconnecting: Promise<void> | null = null;

  /** SshHostOptions.sock until the first connect takes it */
  private earlySock: EarlySocket | null;
  /** SshHostOptions.keep until the first connect takes it */
  private keepFirst: KeepOption | null;
  /** no keeper answered: start one as this host closes (if it ever connected) */
  private spawnOnClose = false;
  private everConnected = false;

  constructor(
    private readonly opts: SshHostOptions,
    private readonly hooks: ConnectionHooks,
  ) {
    this.earlySock = opts.sock ?? null;
    this.keepFirst = opts.keep ?? null;
  }

  /** bytes on the TCP sockets so far (all SSH overhead included) */
  socketBytes(): { in: number; out: number } {
    return {
      in: this.retired.in + (this.sock?.bytesRead ?? 0),
      out: this.retired.out + (this.sock?.bytesWritten ?? 0),
    };
  }

  private knownFiles(): string[] {
    return (
      this.opts.knownHostsFiles ?? [
        join(homedir(), '.ssh', 'known_hosts'),
        join(homedir(), '.ssh', 'known_hosts2'),
        '/etc/ssh/ssh_known_hosts',
      ]
    );
  }

  /**
   * One attempt: resolves once connected and the hooks ran (errors: host key, auth, network). The
   * first attempt goes through a keeper when one answers (keep.ts), else directly.
   */
  async connect(): Promise<void> {
    const k = this.keepFirst;
    this.keepFirst = null;
    if (k && (await this.connectKept(k))) return;
    return this.connectDirect();
  }

  /** Through the keeper at k.path: true once connected (and the hooks ran); false: connect directly. */
  private async connectKept(k: KeepOption): Promise<boolean> {
    if (k.problem) {
      process.stderr.write(`nsa-top: not keeping the SSH connection: ${k.problem}\n`);
      return false;
    }
    const sock = k.pre ? await k.pre : await openUnix(k.path);
    if (!sock) {
      this.spawnOnClose = true;
      return false;
    }
    const client = await openKept(k.path, sock);
    if (!client || this.closing) {
      client?.end();
      return false;
    }
    this.client = client as unknown as Client;
    this.state = { state: 'connected', since: Date.now() };
    this.everConnected = true;
    client.once('close', () => {
      if (this.client === (client as unknown as Client)) this.onDrop('the kept connection closed');
    });
    const up = this.hooks.connected();
    for (const w of this.connWaiters.splice(0)) w();
    await up.catch(() => {});
    return true;
  }

  private async connectDirect(): Promise<void> {
    const t = this.opts.target;
    const texts = readKnownHosts(this.knownFiles());
    const preferred = knownTypesFor(texts, t.hostName, t.port);
    let hostKeyProblem: HostKeyError | null = null;
    const hostVerifier = (key: Buffer): boolean => {
      hostKeyProblem = verifyHostKey(this.opts, this.knownFiles(), key);
      return hostKeyProblem === null;
    };
    const agent = this.opts.agentSocket === undefined ? process.env.SSH_AUTH_SOCK : this.opts.agentSocket;
    const { auth, keyErrors } = authMethods(t, agent);
    if (auth.length === 0) {
      throw new SshConnectError(
        `no way to authenticate to ${this.opts.target.label}: no identity file (-i) and no ssh-agent (SSH_AUTH_SOCK)`,
      );
    }
    const serverHostKey = hostKeyAlgorithms(preferred);
    // ssh2 loads here, not with this module: a command served by a keeper never needs it (its
    // require took ~120 ms at load 12 on this 2-core box)
    const ClientClass = await ssh2Client();

    return new Promise<void>((resolve, reject) => {
      const client = new ClientClass();
      sshTrace(`connect ${t.hostName}:${t.port}`);
      // the first attempt is made on the early TCP connection, if any: its failure is this attempt's
      const early = this.earlySock;
      this.earlySock = null;
      const sock = early?.sock ?? netConnect({ host: t.hostName, port: t.port });
      sock.once('connect', () => sshTrace('tcp connected'));
      client.once('handshake', () => sshTrace('key exchange done'));
      let ready = false;
      let settled = false;
      const fail = (e: Error) => {
        if (settled) return;
        settled = true;
        try {
          client.end();
        } catch {
          /* ignore */
        }
        sock.destroy();
        reject(e);
      };
      sock.on('error', (e) => {
        if (!ready) fail(new SshConnectError(`cannot reach ${t.hostName}:${t.port}: ${e.message}`));
      });
      const signal = this.opts.signal;
      const abandoned = () => fail(new SshConnectError(`connection to ${t.hostName}:${t.port} abandoned`));
      if (signal?.aborted) abandoned();
      signal?.addEventListener('abort', abandoned, { once: true });
      sock.once('close', () => signal?.removeEventListener('abort', abandoned));
      client.on('error', (e: Error & { level?: string }) => {
        if (ready) return; // 'close' follows and drives the reconnect
        if (hostKeyProblem) return fail(hostKeyProblem);
        let msg = e.message;
        if (e.level === 'client-authentication') {
          msg = `authentication to ${this.opts.target.label} failed (tried ${[agent && !t.identitiesOnly ? 'ssh-agent' : '', ...t.identityFiles].filter(Boolean).join(', ') || 'nothing'})`;
          if (keyErrors.length) msg += `; unreadable keys: ${keyErrors.join('; ')}`;
        }
        fail(new SshConnectError(msg));
      });
      client.on('ready', () => {
        sshTrace('authenticated');
        ready = true;
        settled = true;
        // retire the previous connection's socket counters
        if (this.sock) {
          this.retired.in += this.sock.bytesRead;
          this.retired.out += this.sock.bytesWritten;
        }
        this.client = client;
        this.sock = sock;
        this.state = { state: 'connected', since: Date.now() };
        this.everConnected = true;
        const up = this.hooks.connected();
        for (const w of this.connWaiters.splice(0)) w();
        up.then(() => resolve()).catch((e) => resolve(void e));
      });
      client.on('close', () => {
        if (!ready)
          return fail(
            hostKeyProblem ?? new SshConnectError(`connection to ${t.hostName}:${t.port} closed during the handshake`),
          );
        if (this.client === client) this.onDrop('connection closed');
      });
      if (early && sock.destroyed) {
        // it met its end before the handshake: refused, or the server hung up
        return fail(
          new SshConnectError(
            early.error
              ? `cannot reach ${t.hostName}:${t.port}: ${early.error.message}`
              : `connection to ${t.hostName}:${t.port} closed during the handshake`,
          ),
        );
      }
      try {
        client.connect({
          sock,
          username: t.user,
          host: t.hostName,
          port: t.port,
          hostVerifier,
          authHandler: auth,
          keepaliveInterval: this.opts.keepaliveIntervalMs ?? 5000,
          keepaliveCountMax: this.opts.keepaliveCountMax ?? 3,
          readyTimeout: this.opts.readyTimeoutMs ?? 15000,
          algorithms: { serverHostKey: serverHostKey as never },
        });
      } catch (e) {
        fail(new SshConnectError((e as Error).message));
      }
    });
  }

  private onDrop(why: string): void {
    if (this.closing) return;
    const old = this.client;
    this.client = null;
    try {
      old?.end();
    } catch {
      /* ignore */
    }
    this.hooks.dropped();
    if (this.reconnecting) return;
    this.reconnects++;
    const since = Date.now();
    this.reconnecting = (async () => {
      let attempt = 0;
      let lastError = why;
      let delay = this.opts.backoffInitialMs ?? 500;
      while (!this.closing) {
        attempt++;
        this.state = { state: 'reconnecting', since, attempt, lastError };
        await sleep(delay);
        if (this.closing) break;
        try {
          await this.connect();
          break;
        } catch (e) {
          lastError = (e as Error).message;
          delay = Math.min(delay * 2, this.opts.backoffMaxMs ?? 15000);
        }
      }
      this.reconnecting = null;
      if (!this.closing) await this.hooks.reconnected().catch(() => {});
    })();
  }

  async waitConnected(deadline: number): Promise<Client> {
    while (!this.client) {
      if (this.closing) throw new SshConnectError('host closed');
      const left = deadline - Date.now();
      if (left <= 0)
        throw new SshConnectError(
          `not connected to ${this.opts.target.label} (${this.state.state === 'reconnecting' ? `reconnecting, attempt ${this.state.attempt}: ${this.state.lastError}` : this.state.state})`,
        );
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 1000));
        this.connWaiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.client;
  }

  openExec(client: Client, cmd: string): Promise<ClientChannel> {
    return new Promise((resolve, reject) => {
      try {
        client.exec(cmd, (err, ch) => (err ? reject(err) : resolve(ch)));
      } catch (e) {
        reject(e as Error);
      }
    });
  }

  /** Drops the TCP connection without closing: for tests of the reconnect path. */
  dropForTest(): void {
    this.sock?.destroy();
  }

  /** Ends the connection for good (waits a moment for the server to close it); starts a keeper where wanted. */
  async close(): Promise<void> {
    const k = this.opts.keep;
    if (k && this.spawnOnClose && this.everConnected) {
      this.spawnOnClose = false;
      spawnKeeper({
        target: this.opts.target,
        knownHostsFiles: this.opts.knownHostsFiles,
        agentSocket: this.opts.agentSocket,
        idleS: k.idleS,
        socket: k.path,
      });
    }
    this.closing = true;
    this.state = { state: 'closed' };
    const c = this.client;
    this.client = null;
    for (const w of this.connWaiters.splice(0)) w();
    if (c) {
      await new Promise<void>((r) => {
        const t = setTimeout(r, 1000);
        c.once('close', () => {
          clearTimeout(t);
          r();
        });
        c.end();
      });
    }
    this.sock?.destroy();
  }
}

/**
 * The host key against known_hosts: null when it is trusted (known, or new and accepted — then
 * recorded), else the error that refuses it (unknown, changed, revoked).
 */
function verifyHostKey(opts: SshHostOptions, knownFiles: string[], key: Buffer): HostKeyError | null {
  const t = opts.target;
  const v = checkHostKey(readKnownHosts(knownFiles), t.hostName, t.port, key);
  const fp = fingerprint(key);
  const name = knownHostName(t.hostName, t.port);
  if (v.status === 'known') return null;
  if (v.status === 'revoked') {
    return new HostKeyError(
      `host key ${keyType(key)} ${fp} of ${name} is marked @revoked in known_hosts: refused`,
      'revoked',
      fp,
    );
  }
  if (v.status === 'changed') {
    const differs = v.knownTypes.includes(keyType(key))
      ? 'which differs from the key in known_hosts'
      : `but known_hosts holds only ${v.knownTypes.join(', ')} for it (a key of a new type is a changed key, as OpenSSH's accept-new has it)`;
    return new HostKeyError(
      `HOST KEY CHANGED for ${name}: the server now presents ${keyType(key)} ${fp}, ${differs}. ` +
        `This may be an attack (or the host was reinstalled). Refused; if the change is expected, remove the old key with: ssh-keygen -R '${name}'`,
      'changed',
      fp,
    );
  }
  if (opts.acceptNewHostKey) {
    const path = opts.knownHostsWritePath ?? join(homedir(), '.ssh', 'known_hosts');
    try {
      appendKnownHost(path, t.hostName, t.port, key);
    } catch (e) {
      return new HostKeyError(`could not record the host key in ${path}: ${(e as Error).message}`, 'unknown', fp);
    }
    return null;
  }
  return new HostKeyError(
    `unknown host key for ${name}: ${keyType(key)} ${fp}. Verify the fingerprint, then re-run with --accept-new-host-key to trust it and record it in known_hosts.`,
    'unknown',
    fp,
  );
}

/** Identity files first (or the agent first unless IdentitiesOnly), and the keys that could not be read. */
function authMethods(
  t: SshTarget,
  agent: string | null | undefined,
): { auth: NonNullable<ConnectConfig['authHandler']>; keyErrors: string[] } {
  const auth: NonNullable<ConnectConfig['authHandler']> = [];
  const keyErrors: string[] = [];
  for (const f of t.identityFiles) {
    try {
      auth.push({ type: 'publickey', username: t.user, key: readFileSync(f) } as never);
    } catch (e) {
      keyErrors.push(`${f}: ${(e as Error).message}`);
    }
  }
  if (agent && !t.identitiesOnly) auth.unshift({ type: 'agent', username: t.user, agent } as never);
  else if (agent) auth.push({ type: 'agent', username: t.user, agent } as never);
  return { auth, keyErrors };
}

/** The host key algorithms to offer: the types known_hosts holds for the host first. */
function hostKeyAlgorithms(preferred: string[]): string[] {
  const defaultHostKeys = [
    'ssh-ed25519',
    'ecdsa-sha2-nistp256',
    'ecdsa-sha2-nistp384',
    'ecdsa-sha2-nistp521',
    'rsa-sha2-512',
    'rsa-sha2-256',
    'ssh-rsa',
  ];
  const algoOf = (kt: string) => (kt === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [kt]);
  const pref = preferred.flatMap(algoOf).filter((a) => defaultHostKeys.includes(a));
  return [...new Set([...pref, ...defaultHostKeys])];
}

/** Clock offset (null: the box did not tell) and whether GNU find exists (one command at connect). */
export async function probeBox(
  exec: (argv: string[], opts: ExecOptions) => Promise<ExecResult>,
  posixOnly: boolean,
): Promise<{ clockOffsetMs: number | null; gnuFind: boolean }> {
  const t0 = Date.now();
  const r = await exec(
    ['sh', '-c', 'date +%s%N; date +%s; find / -maxdepth 0 -printf "gnu\\n" 2>/dev/null || echo posix'],
    { timeoutMs: 10000 },
  );
  const t1 = Date.now();
  const lines = r.stdout.trim().split('\n');
  return { clockOffsetMs: clockOffsetOf(r.stdout, t0, t1), gnuFind: !posixOnly && (lines[2] ?? '') === 'gnu' };
}

/**
 * The box's clock minus ours from `date +%s%N; date +%s` asked between t0 and t1 (ours): the
 * midpoint of the round trip (null: the box did not tell; whole seconds where %N is not supported).
 */
export function clockOffsetOf(out: string, t0: number, t1: number): number | null {
  const lines = out.trim().split('\n');
  const ns = lines[0] ?? '';
  let remoteMs: number | null = null;
  if (/^\d{16,}$/.test(ns)) remoteMs = Number(ns.slice(0, -6));
  else if (/^\d+$/.test(lines[1] ?? '')) remoteMs = Number(lines[1]) * 1000 + 500;
  return remoteMs !== null ? Math.round(remoteMs - (t0 + t1) / 2) : null;
}
