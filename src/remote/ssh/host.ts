// SshHost: the Host interface over one SSH connection (ssh2), agentless — the remote box needs
// only POSIX tools (sh, find/ls, tail, head, kill) and /proc.
//
// - Host keys are verified against known_hosts (see knownhosts.ts): unknown → refused with the
//   fingerprint unless acceptNewHostKey (then appended); changed → always refused.
// - One connection; channels are rationed (a server allows ~10 per connection). pollDir() is
//   served by one long-lived watch channel (watch-script.ts) that the client ticks at
//   `watchIntervalMs`: a poll returns what the last frame brought, without a round trip.
// - Keepalive; on a drop the host reconnects with backoff and every follow resumes from the byte
//   after the last one received (chunks count only once complete): no byte lost, none twice.
// - Every argument reaching the remote shell is quoted (quote.ts); exec() learns the remote pid
//   (`echo $$; exec …`) so a timeout kills the remote command group with `kill`.
import { dur } from '../../format.js';
import { StreamLines } from '../streamlines.js';
import { ownError, splitOwnRel } from '../local/ownfiles.js';
import { connect as netConnect, type Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Client, type ClientChannel, type ConnectConfig } from 'ssh2';
import type {
  ConnState,
  DirEntry,
  DirPoll,
  ExecOptions,
  ExecResult,
  FileStat,
  Host,
  OwnWriteMode,
  ReadRequest,
  ReadResult,
  SignalName,
  StreamHandle,
  StreamOptions,
} from '../host.js';
import {
  appendKnownHost,
  checkHostKey,
  fingerprint,
  keyType,
  knownHostName,
  knownTypesFor,
  readKnownHosts,
} from './knownhosts.js';
import { envAssign, shJoin, shQuote } from '../quote.js';
import type { SshTarget } from './config.js';
import { WATCH_SCRIPT } from './watch-script.js';

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

export interface SshStats {
  /** channels opened since connect (exec, stream, watch) */
  channels: number;
  /** bytes on the TCP socket (all SSH overhead included) */
  socketBytesIn: number;
  socketBytesOut: number;
  /** frames received from the watch loop */
  frames: number;
  reconnects: number;
}

const DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024;
const FOLLOW_CHUNK = 4 * 1024 * 1024;
const FOLLOW_BUFFER_CAP = 64 * 1024 * 1024;
const LEASE_MS = 60_000;
const FRAME_WAIT_MS = 20_000;
const STALL_MS = 10_000;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface Follow {
  id: number;
  path: string;
  /** file offset of buf[0] */
  base: number;
  chunks: Buffer[];
  len: number;
  /** inode last seen (0 unknown, -1 gone) */
  ino: number;
  stat: FileStat | null;
  error?: string;
  pendingReset?: 'truncated' | 'replaced';
  /** offset up to which data was handed to the caller */
  delivered: number;
  lastUsed: number;
  paused: boolean;
  /** the tick seq after which this follow's data is valid (set on (re)registration) */
  validFromSeq: number;
}

interface WatchedDir {
  id: number;
  path: string;
  entries: DirEntry[] | null;
  lastUsed: number;
  validFromSeq: number;
}

interface OneShot {
  path: string;
  resolve(r: {
    stat: FileStat | null;
    reset?: 'truncated' | 'replaced';
    offset: number;
    data: Buffer;
    error?: string;
  }): void;
}

function modeOf(type: string, perm: string): number {
  const p = parseInt(perm, 8) || 0;
  return (type === 'd' ? 0o040000 : type === 'f' ? 0o100000 : type === 'l' ? 0o120000 : 0) | p;
}

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

/** `ls -lnai` line → entry (the fallback without GNU find; mtime has minute resolution). */
export function parseLsLine(line: string, nowMs: number): DirEntry | null {
  const m = /^\s*(\d+)\s+([-dlcbps])\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(\w{3})\s+(\d+)\s+(\d+:\d+|\d{4})\s(.*)$/.exec(
    line,
  );
  if (!m) return null;
  const name = m[7]!;
  if (name === '.' || name === '..') return null;
  const mon = MONTHS[m[4]!] ?? 0;
  const day = Number(m[5]);
  let mtimeMs: number;
  if (m[6]!.includes(':')) {
    const [hh, mm] = m[6]!.split(':').map(Number);
    const y = new Date(nowMs).getUTCFullYear();
    mtimeMs = Date.UTC(y, mon, day, hh, mm);
    if (mtimeMs > nowMs + 86400000) mtimeMs = Date.UTC(y - 1, mon, day, hh, mm);
  } else mtimeMs = Date.UTC(Number(m[6]), mon, day);
  return { name, isDir: m[2] === 'd', isFile: m[2] === '-', size: Number(m[3]), mtimeMs, ino: Number(m[1]) };
}

/** GNU find's %T@ (`sec.nanoseconds`) → ms exactly as Node computes Stats.mtimeMs. */
export function findTimeMs(t: string): number {
  const [sec, frac = ''] = t.split('.');
  const ns = Number(`${frac}000000000`.slice(0, 9));
  return Number(sec) * 1e3 + ns / 1e6;
}

function parseFindEntry(rest: string): DirEntry | null {
  // INO TYPE SIZE MTIME NAME
  const m = /^(\d+) (\S) (\d+) ([\d.]+) (.*)$/.exec(rest);
  if (!m) return null;
  return {
    name: m[5]!,
    isDir: m[2] === 'd',
    isFile: m[2] === 'f',
    size: Number(m[3]),
    mtimeMs: findTimeMs(m[4]!),
    ino: Number(m[1]),
  };
}

/** find's %y (or the ls fallback's d/f/o) of something that is not a regular file → the error naming it */
function notRegularType(type: string | undefined): string | undefined {
  if (type === 'f') return undefined;
  // the watch loop's `u`: a regular file this user may not read (never read as zeros)
  if (type === 'u') return 'EACCES: permission denied';
  const what =
    type === 'd'
      ? 'a directory'
      : type === 'p'
        ? 'a FIFO'
        : type === 's'
          ? 'a socket'
          : type === 'c'
            ? 'a character device'
            : type === 'b'
              ? 'a block device'
              : type === 'l' || type === 'L'
                ? 'a dangling or looping link'
                : 'not a regular file';
  return `not a regular file (${what}): not read`;
}

/** Parses the byte stream of the watch loop: lines, raw data after `s` headers, raw blocks up to a terminator (exported for tests). */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);
  private need = 0;
  private dataParts: Buffer[] = [];
  private dataHeader: string[] | null = null;
  private raw: { term: Buffer; done(b: Buffer): void } | null = null;
  constructor(
    private readonly onLine: (line: string) => void,
    private readonly onData: (header: string[], data: Buffer) => void,
  ) {}
  /** the bytes up to `term` are one raw block (the process table) */
  expectRaw(term: Buffer, done: (b: Buffer) => void): void {
    this.raw = { term, done };
  }
  push(b: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, b]) : b;
    for (;;) {
      if (this.raw) {
        const at = this.buf.indexOf(this.raw.term);
        if (at < 0) return;
        const r = this.raw;
        this.raw = null;
        const block = this.buf.subarray(0, at);
        this.buf = this.buf.subarray(at + r.term.length);
        r.done(block);
        continue;
      }
      if (this.need > 0) {
        if (this.buf.length === 0) return;
        const take = Math.min(this.need, this.buf.length);
        this.dataParts.push(this.buf.subarray(0, take));
        this.buf = this.buf.subarray(take);
        this.need -= take;
        if (this.need === 0) {
          const h = this.dataHeader!;
          const d = Buffer.concat(this.dataParts);
          this.dataParts = [];
          this.dataHeader = null;
          this.onData(h, d);
        }
        continue;
      }
      const nl = this.buf.indexOf(10);
      if (nl < 0) return;
      const line = this.buf.subarray(0, nl).toString('utf8');
      this.buf = this.buf.subarray(nl + 1);
      if (line.startsWith('s ')) {
        const f = line.split(' ');
        const len = Number(f[10]);
        if (Number.isFinite(len) && len > 0) {
          this.need = len;
          this.dataHeader = f;
          continue;
        }
        this.onData(f, Buffer.alloc(0));
        continue;
      }
      this.onLine(line);
    }
  }
}

export class SshHost implements Host {
  readonly kind = 'ssh' as const;
  readonly label: string;
  private client: Client | null = null;
  private sock: Socket | null = null;
  private state: ConnState = { state: 'closed' };
  private closing = false;
  private clockOffsetMs = 0;
  private gnuFind = true;
  private openChannels = 0;
  /** bumped per connection: channels of a dead connection are not counted against the new one */
  private gen = 0;
  private readonly chanWaiters: (() => void)[] = [];
  private readonly connWaiters: (() => void)[] = [];
  private readonly liveStreams = new Set<{ kill(): void; pid(): number | null }>();
  private readonly counters: SshStats = { channels: 0, socketBytesIn: 0, socketBytesOut: 0, frames: 0, reconnects: 0 };
  private sockBase = { in: 0, out: 0 };
  private reconnecting: Promise<void> | null = null;

  // watch loop
  private watch: { chan: ClientChannel; pid: number | null; nonce: string; parser: FrameParser } | null = null;
  private readonly lightWaiters = new Map<number, (b: Buffer | null) => void>();
  private watchStarting: Promise<void> | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  private nextId = 1;
  private tickSeq = 0;
  private doneSeq = 0;
  private inFlight = 0;
  private readonly dirs = new Map<string, WatchedDir>();
  private readonly follows = new Map<string, Follow>();
  private readonly followById = new Map<number, Follow>();
  private readonly dirById = new Map<number, WatchedDir>();
  private readonly oneShots = new Map<number, OneShot>();
  private readonly lastIno = new Map<string, number>();
  private readonly seqWaiters: { seq: number; resolve(): void }[] = [];
  private frameDir: WatchedDir | null = null;
  private frameEntries: DirEntry[] = [];

  private constructor(private readonly opts: SshHostOptions) {
    this.label = opts.target.label;
  }

  /** Connects (first attempt errors are thrown: host key, auth, network). */
  static async connect(opts: SshHostOptions): Promise<SshHost> {
    const h = new SshHost(opts);
    await h.connectOnce();
    return h;
  }

  connState(): ConnState {
    return this.state;
  }

  stats(): SshStats {
    const s = { ...this.counters };
    s.socketBytesIn += this.sock?.bytesRead ?? 0;
    s.socketBytesOut += this.sock?.bytesWritten ?? 0;
    return s;
  }

  now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  // ------------------------------------------------------------------ connection

  private knownFiles(): string[] {
    return (
      this.opts.knownHostsFiles ?? [
        join(homedir(), '.ssh', 'known_hosts'),
        join(homedir(), '.ssh', 'known_hosts2'),
        '/etc/ssh/ssh_known_hosts',
      ]
    );
  }

  private connectOnce(): Promise<void> {
    const t = this.opts.target;
    const texts = readKnownHosts(this.knownFiles());
    const preferred = knownTypesFor(texts, t.hostName, t.port);
    let hostKeyProblem: HostKeyError | null = null;
    const hostVerifier = (key: Buffer): boolean => {
      const v = checkHostKey(readKnownHosts(this.knownFiles()), t.hostName, t.port, key);
      const fp = fingerprint(key);
      const name = knownHostName(t.hostName, t.port);
      if (v.status === 'known') return true;
      if (v.status === 'revoked') {
        hostKeyProblem = new HostKeyError(
          `host key ${keyType(key)} ${fp} of ${name} is marked @revoked in known_hosts: refused`,
          'revoked',
          fp,
        );
        return false;
      }
      if (v.status === 'changed') {
        hostKeyProblem = new HostKeyError(
          `HOST KEY CHANGED for ${name}: the server now presents ${keyType(key)} ${fp}, which differs from the key in known_hosts. ` +
            `This may be an attack (or the host was reinstalled). Refused; if the change is expected, remove the old key with: ssh-keygen -R '${name}'`,
          'changed',
          fp,
        );
        return false;
      }
      if (this.opts.acceptNewHostKey) {
        const path = this.opts.knownHostsWritePath ?? join(homedir(), '.ssh', 'known_hosts');
        try {
          appendKnownHost(path, t.hostName, t.port, key);
        } catch (e) {
          hostKeyProblem = new HostKeyError(
            `could not record the host key in ${path}: ${(e as Error).message}`,
            'unknown',
            fp,
          );
          return false;
        }
        return true;
      }
      const other = v.otherTypes.length
        ? ` (known_hosts holds ${v.otherTypes.join(', ')} keys for it, not this type)`
        : '';
      hostKeyProblem = new HostKeyError(
        `unknown host key for ${name}${other}: ${keyType(key)} ${fp}. Verify the fingerprint, then re-run with --accept-new-host-key to trust it and record it in known_hosts.`,
        'unknown',
        fp,
      );
      return false;
    };
    const auth: NonNullable<ConnectConfig['authHandler']> = [];
    const agent = this.opts.agentSocket === undefined ? process.env.SSH_AUTH_SOCK : this.opts.agentSocket;
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
    if (auth.length === 0) {
      return Promise.reject(
        new SshConnectError(
          `no way to authenticate to ${this.label}: no identity file (-i) and no ssh-agent (SSH_AUTH_SOCK)`,
        ),
      );
    }
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
    const serverHostKey = [...new Set([...pref, ...defaultHostKeys])];

    return new Promise<void>((resolve, reject) => {
      const client = new Client();
      const sock = netConnect({ host: t.hostName, port: t.port });
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
      client.on('error', (e: Error & { level?: string }) => {
        if (ready) return; // 'close' follows and drives the reconnect
        if (hostKeyProblem) return fail(hostKeyProblem);
        let msg = e.message;
        if (e.level === 'client-authentication') {
          msg = `authentication to ${this.label} failed (tried ${[agent && !t.identitiesOnly ? 'ssh-agent' : '', ...t.identityFiles].filter(Boolean).join(', ') || 'nothing'})`;
          if (keyErrors.length) msg += `; unreadable keys: ${keyErrors.join('; ')}`;
        }
        fail(new SshConnectError(msg));
      });
      client.on('ready', () => {
        ready = true;
        settled = true;
        // retire the previous connection's socket counters
        if (this.sock) {
          this.counters.socketBytesIn += this.sock.bytesRead;
          this.counters.socketBytesOut += this.sock.bytesWritten;
        }
        this.client = client;
        this.sock = sock;
        this.gen++;
        this.openChannels = 0;
        for (const w of this.chanWaiters.splice(0)) w();
        this.state = { state: 'connected', since: Date.now() };
        for (const w of this.connWaiters.splice(0)) w();
        this.probe()
          .then(() => resolve())
          .catch((e) => resolve(void e));
      });
      client.on('close', () => {
        if (!ready)
          return fail(
            hostKeyProblem ?? new SshConnectError(`connection to ${t.hostName}:${t.port} closed during the handshake`),
          );
        if (this.client === client) this.onDrop('connection closed');
      });
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

  /** Clock offset and whether GNU find exists (one command at connect). */
  private async probe(): Promise<void> {
    const t0 = Date.now();
    const r = await this.exec(
      ['sh', '-c', 'date +%s%N; date +%s; find / -maxdepth 0 -printf "gnu\\n" 2>/dev/null || echo posix'],
      { timeoutMs: 10000 },
    );
    const t1 = Date.now();
    const lines = r.stdout.trim().split('\n');
    const ns = lines[0] ?? '';
    let remoteMs: number | null = null;
    if (/^\d{16,}$/.test(ns)) remoteMs = Number(ns.slice(0, -6));
    else if (/^\d+$/.test(lines[1] ?? '')) remoteMs = Number(lines[1]) * 1000 + 500;
    if (remoteMs !== null) this.clockOffsetMs = Math.round(remoteMs - (t0 + t1) / 2);
    this.gnuFind = !this.opts.posixOnly && (lines[2] ?? '') === 'gnu';
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
    this.stopWatchLocal();
    for (const s of [...this.liveStreams]) s.kill();
    if (this.reconnecting) return;
    this.counters.reconnects++;
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
          await this.connectOnce();
          break;
        } catch (e) {
          lastError = (e as Error).message;
          delay = Math.min(delay * 2, this.opts.backoffMaxMs ?? 15000);
        }
      }
      this.reconnecting = null;
      if (!this.closing && (this.follows.size || this.dirs.size)) await this.ensureWatch().catch(() => {});
    })();
  }

  private async waitConnected(deadline: number): Promise<Client> {
    while (!this.client) {
      if (this.closing) throw new SshConnectError('host closed');
      const left = deadline - Date.now();
      if (left <= 0)
        throw new SshConnectError(
          `not connected to ${this.label} (${this.state.state === 'reconnecting' ? `reconnecting, attempt ${this.state.attempt}: ${this.state.lastError}` : this.state.state})`,
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

  private async acquireChannel(deadline: number): Promise<number> {
    const max = this.opts.maxChannels ?? 8;
    while (this.openChannels >= max) {
      const left = deadline - Date.now();
      if (left <= 0) throw new SshConnectError(`no free SSH channel on ${this.label} (${max} in use)`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 1000));
        this.chanWaiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    this.openChannels++;
    this.counters.channels++;
    return this.gen;
  }

  private releaseChannel(gen: number): void {
    if (gen !== this.gen) return;
    this.openChannels = Math.max(0, this.openChannels - 1);
    this.chanWaiters.shift()?.();
  }

  private openExec(client: Client, cmd: string): Promise<ClientChannel> {
    return new Promise((resolve, reject) => {
      try {
        client.exec(cmd, (err, ch) => (err ? reject(err) : resolve(ch)));
      } catch (e) {
        reject(e as Error);
      }
    });
  }

  /** The remote command line: `cd DIR || exit 126; echo $$; exec env K=V argv…`, all quoted. */
  static commandLine(argv: string[], cwd?: string, env?: Record<string, string>): string {
    if (argv.length === 0) throw new Error('exec: empty argv');
    let s = '';
    if (cwd) s += `cd ${shQuote(cwd)} || exit 126; `;
    s += 'echo $$; exec ';
    const envs = Object.entries(env ?? {});
    if (envs.length) s += `env ${envs.map(([k, v]) => envAssign(k, v)).join(' ')} `;
    return s + shJoin(argv);
  }

  private remoteKill(pid: number, sig: 'TERM' | 'KILL'): void {
    if (!Number.isInteger(pid) || pid <= 1) return;
    if (this.watch) {
      // the watch loop is a shell already running: no channel, no login-shell start-up
      this.send(`k ${sig} ${pid}`);
      return;
    }
    void this.exec(
      ['sh', '-c', `kill -s ${sig} -- -$1 2>/dev/null || kill -s ${sig} $1 2>/dev/null; exit 0`, 'sh', String(pid)],
      { timeoutMs: 5000 },
    ).catch(() => {});
  }

  private async execRaw(
    argv: string[],
    opts: ExecOptions,
  ): Promise<{
    code: number | null;
    signal: string | null;
    stdout: Buffer;
    stderr: Buffer;
    timedOut: boolean;
    durationMs: number;
  }> {
    const started = Date.now();
    const deadline = started + opts.timeoutMs;
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const fail = (msg: string, timedOut = false) => ({
      code: null,
      signal: null,
      stdout: Buffer.alloc(0),
      stderr: Buffer.from(msg),
      timedOut,
      durationMs: Date.now() - started,
    });
    let client: Client;
    let gen: number;
    try {
      client = await this.waitConnected(deadline);
      gen = await this.acquireChannel(deadline);
    } catch (e) {
      return fail((e as Error).message, true);
    }
    let ch: ClientChannel;
    try {
      ch = await this.openExec(client, SshHost.commandLine(argv, opts.cwd, opts.env));
    } catch (e) {
      this.releaseChannel(gen);
      return fail(`could not open a channel: ${(e as Error).message}`);
    }
    return new Promise((resolve) => {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outLen = 0;
      let errLen = 0;
      let pid: number | null = null;
      let head: Buffer | null = Buffer.alloc(0);
      let timedOut = false;
      let code: number | null = null;
      let signal: string | null = null;
      let done = false;
      ch.on('data', (b: Buffer) => {
        if (head !== null) {
          head = Buffer.concat([head, b]);
          const nl = head.indexOf(10);
          if (nl < 0 && head.length < 32) return;
          const first = nl >= 0 ? head.subarray(0, nl).toString() : '';
          if (/^\d+$/.test(first)) {
            pid = Number(first);
            b = head.subarray(nl + 1);
          } else b = head;
          head = null;
        }
        if (outLen < max) out.push(b);
        outLen += b.length;
      });
      ch.stderr.on('data', (b: Buffer) => {
        if (errLen < max) err.push(b);
        errLen += b.length;
      });
      ch.on('exit', (c: number | null, sig?: string) => {
        code = c;
        if (sig) signal = sig.startsWith('SIG') ? sig : `SIG${sig}`;
      });
      const timer = setTimeout(
        () => {
          timedOut = true;
          if (pid !== null) this.remoteKill(pid, 'KILL');
          ch.close();
          finish();
        },
        Math.max(0, deadline - Date.now()),
      );
      const finish = () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.releaseChannel(gen);
        if (head !== null && head.length) out.push(head);
        resolve({
          code: timedOut ? null : code,
          signal: timedOut ? 'SIGKILL' : signal,
          stdout: Buffer.concat(out).subarray(0, max),
          stderr: Buffer.concat(err).subarray(0, max),
          timedOut,
          durationMs: Date.now() - started,
        });
      };
      ch.on('close', () => {
        // an exit status can trail the close by a moment
        setTimeout(
          () => {
            if (code === null && !timedOut && signal === null) err.push(Buffer.from('connection lost')); // dropped under us
            finish();
          },
          code === null ? 100 : 0,
        );
      });
      ch.on('error', () => finish());
      if (opts.input !== undefined) ch.end(opts.input);
      else ch.end();
    });
  }

  async exec(argv: string[], opts: ExecOptions): Promise<ExecResult> {
    const r = await this.execRaw(argv, opts);
    return {
      code: r.code,
      signal: r.signal,
      stdout: r.stdout.toString('utf8'),
      stderr: r.stderr.toString('utf8'),
      timedOut: r.timedOut,
      durationMs: r.durationMs,
    };
  }

  stream(argv: string[], opts: StreamOptions): StreamHandle {
    let resolveDone!: (v: { code: number | null; signal: string | null }) => void;
    const done = new Promise<{ code: number | null; signal: string | null }>((r) => (resolveDone = r));
    let stopped = false;
    let ch: ClientChannel | null = null;
    let pid: number | null = null;
    let finished = false;
    let channelHeld: number | null = null;
    const entry = {
      pid: () => pid,
      kill: () => {
        try {
          ch?.close();
        } catch {
          /* ignore */
        }
        finish(null, 'SIGHUP');
      },
    };
    const finish = (code: number | null, signal: string | null) => {
      if (finished) return;
      finished = true;
      this.liveStreams.delete(entry);
      if (channelHeld !== null) this.releaseChannel(channelHeld);
      channelHeld = null;
      resolveDone({ code, signal });
    };
    this.liveStreams.add(entry);
    void (async () => {
      const deadline = Date.now() + 30000;
      try {
        const client = await this.waitConnected(deadline);
        channelHeld = await this.acquireChannel(deadline);
        if (stopped) return finish(null, 'SIGTERM');
        ch = await this.openExec(client, SshHost.commandLine(argv, opts.cwd, opts.env));
      } catch (e) {
        opts.onStderr?.(`${(e as Error).message}`);
        return finish(null, null);
      }
      let first = true;
      let code: number | null = null;
      let signal: string | null = null;
      // bounded lines: a remote command that never prints a newline costs at most the cap
      const lines = new StreamLines(
        (line) => {
          if (first) {
            first = false;
            if (/^\d+$/.test(line)) {
              pid = Number(line);
              if (stopped) this.remoteKill(pid, 'TERM');
              return;
            }
          }
          opts.onLine(line);
        },
        (n) => opts.onOverflow?.(n),
      );
      const errLines = new StreamLines((l) => opts.onStderr?.(l));
      ch.on('data', (b: Buffer) => lines.push(b));
      ch.stderr.on('data', (b: Buffer) => errLines.push(b));
      ch.on('exit', (c: number | null, sig?: string) => {
        code = c;
        if (sig) signal = sig.startsWith('SIG') ? sig : `SIG${sig}`;
      });
      ch.on('close', () => {
        lines.end();
        finish(code, signal);
      });
      ch.end();
    })();
    return {
      done,
      stop: () => {
        if (stopped) return;
        stopped = true;
        if (pid !== null) this.remoteKill(pid, 'TERM');
        setTimeout(() => {
          // a remote command that ignores SIGTERM is not left running on the host
          if (pid !== null && !finished) this.remoteKill(pid, 'KILL');
          try {
            ch?.close();
          } catch {
            /* ignore */
          }
        }, 200).unref();
      },
    };
  }

  // ------------------------------------------------------------------ simple file operations

  private async sh(
    script: string,
    args: string[],
    opts: { timeoutMs?: number; input?: string | Buffer; maxOutputBytes?: number } = {},
  ) {
    return this.execRaw(['sh', '-c', script, 'sh', ...args], {
      timeoutMs: opts.timeoutMs ?? 30000,
      input: opts.input,
      maxOutputBytes: opts.maxOutputBytes,
    });
  }

  private errorFor(path: string, r: { code: number | null; stderr: Buffer; timedOut: boolean }, what: string): Error {
    const msg = r.stderr.toString('utf8').trim().split('\n').pop() ?? '';
    const e = new Error(
      `${what} ${path} on ${this.label}: ${r.timedOut ? 'timed out' : msg || `exit ${r.code}`}`,
    ) as NodeJS.ErrnoException;
    e.code =
      r.code === 3
        ? 'ENOENT'
        : r.code === 17
          ? 'EEXIST'
          : r.code === 4
            ? 'ENOTREG'
            : r.code === 13
              ? 'EACCES'
              : r.timedOut
                ? 'ETIMEDOUT'
                : 'EIO';
    return e;
  }

  private statScript(): string {
    return this.gnuFind
      ? `[ -e "$1" ] || exit 3; find -L "$1" -maxdepth 0 -printf '%i %y %s %T@ %m\\n'`
      : `[ -e "$1" ] || exit 3; set -- $(ls -lniLd "$1"); case $2 in d*) t=d;; -*) t=f;; *) t=o;; esac; echo "$1 $t $6 0 0"`;
  }

  async stat(path: string): Promise<FileStat | null> {
    const r = await this.sh(this.statScript(), [path], { timeoutMs: 15000 });
    if (r.code === 3) return null;
    if (r.code !== 0) throw this.errorFor(path, r, 'stat');
    const [ino, type, size, mt, perm] = r.stdout.toString().trim().split(' ');
    return {
      ino: Number(ino),
      size: Number(size),
      mtimeMs: findTimeMs(mt ?? '0'),
      isDir: type === 'd',
      isFile: type === 'f',
      mode: modeOf(type ?? '', perm ?? '0'),
    };
  }

  async list(dir: string): Promise<DirEntry[]> {
    // a dir that can be listed but not searched (mode 444) holds nothing readable: EACCES
    const script =
      `[ -d "$1" ] || exit 3; [ -r "$1" ] && [ -x "$1" ] || { echo "$1: Permission denied (EACCES)" >&2; exit 13; }; ` +
      (this.gnuFind ? `find -L "$1" -mindepth 1 -maxdepth 1 -printf '%i %y %s %T@ %f\\n'` : `ls -lnaiL "$1"`);
    const r = await this.sh(script, [dir], { timeoutMs: 15000 });
    const now = this.now();
    const out: DirEntry[] = [];
    for (const line of r.stdout.toString('utf8').split('\n')) {
      const e = this.gnuFind ? parseFindEntry(line) : parseLsLine(line, now);
      if (e) out.push(e);
    }
    // find/ls exit non-zero for one bad entry (a symlink loop, a dangling link) after listing the
    // rest: the listing stands; only a listing with nothing in it is the directory's own failure
    if (r.code !== 0 && (r.code === 3 || r.timedOut || out.length === 0)) throw this.errorFor(dir, r, 'list');
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async readRange(path: string, start: number, end?: number): Promise<Buffer> {
    if (!Number.isInteger(start) || start < 0) throw new Error(`invalid offset ${start}`);
    // only a regular file is read: `tail` of a FIFO would wait for a writer until the timeout
    const guard = `[ -e "$1" ] || exit 3; [ -f "$1" ] || { echo "not a regular file: not read" >&2; exit 4; }; `;
    const script = end === undefined ? `${guard}tail -c +"$2" "$1"` : `${guard}tail -c +"$2" "$1" | head -c "$3"`;
    const args = [path, String(start + 1)];
    if (end !== undefined) args.push(String(Math.max(0, end - start)));
    const r = await this.sh(script, args, { maxOutputBytes: 1 << 30, timeoutMs: 120000 });
    if (r.code !== 0) throw this.errorFor(path, r, 'read');
    return r.stdout;
  }

  async readFile(path: string, maxBytes?: number): Promise<Buffer> {
    return this.readRange(path, 0, maxBytes);
  }

  async writeFile(
    path: string,
    data: string | Buffer,
    opts: { exclusive?: boolean; mode?: number } = {},
  ): Promise<void> {
    const mode = opts.mode !== undefined ? (opts.mode & 0o7777).toString(8) : '';
    const script =
      (opts.exclusive
        ? `if [ -e "$1" ] || [ -L "$1" ]; then echo "$1: File exists" >&2; exit 17; fi; set -C; `
        : `[ -L "$1" ] && { echo "$1: is a symbolic link: refused" >&2; exit 40; }; `) +
      `cat > "$1" || exit 1; if [ -n "$2" ]; then chmod "$2" "$1" || exit 1; fi`;
    const r = await this.sh(script, [path, mode], { input: data });
    if (r.code !== 0) throw this.errorFor(path, r, 'write');
  }

  async appendFile(path: string, data: string | Buffer): Promise<void> {
    const r = await this.sh(
      `[ -L "$1" ] && { echo "$1: is a symbolic link: refused" >&2; exit 40; }; cat >> "$1"`,
      [path],
      { input: data },
    );
    if (r.code !== 0) throw this.errorFor(path, r, 'append to');
  }

  async mkdirp(path: string): Promise<void> {
    const r = await this.sh(`mkdir -p -- "$1"`, [path]);
    if (r.code !== 0) throw this.errorFor(path, r, 'mkdir');
  }

  async remove(path: string): Promise<void> {
    const r = await this.sh(
      `[ -e "$1" ] || [ -L "$1" ] || exit 3; [ -d "$1" ] && { echo "$1 is a directory" >&2; exit 1; }; rm -f -- "$1"`,
      [path],
    );
    if (r.code !== 0) throw this.errorFor(path, r, 'remove');
  }

  /**
   * nsa-top's own files on the remote box (see Host.writeOwn), by one guarded sh script: `cd -P`
   * into the root, then into `sub` only when it is a real directory (`[ -h ]` first), then the file
   * by its bare name, refused when it is a link or not a regular file. Where GNU dd is there the
   * write itself opens with O_NOFOLLOW (`oflag=nofollow`, `conv=excl`), so a link planted between
   * the check and the write is refused too; elsewhere `set -C` keeps an exclusive create exclusive.
   */
  async writeOwn(root: string, rel: string, data: string | Buffer, mode: OwnWriteMode): Promise<void> {
    const [sub, name] = splitOwnRel(rel);
    const r = await this.sh(OWN_WRITE_SCRIPT, [root, sub ?? '', name, mode], { input: data });
    if (r.code !== 0) throw this.ownErrorFor(`${root}/${rel}`, r, mode);
  }

  async removeOwn(root: string, rel: string): Promise<void> {
    const [sub, name] = splitOwnRel(rel);
    const r = await this.sh(OWN_REMOVE_SCRIPT, [root, sub ?? '', name]);
    if (r.code !== 0) throw this.ownErrorFor(`${root}/${rel}`, r, 'remove');
  }

  private ownErrorFor(
    path: string,
    r: { code: number | null; stderr: Buffer; timedOut: boolean },
    what: string,
  ): Error {
    const msg = r.stderr.toString('utf8').trim().split('\n').pop() ?? '';
    const code = r.timedOut ? 'ETIMEDOUT' : (OWN_CODES[r.code ?? -1] ?? 'EIO');
    const why = r.timedOut ? 'timed out' : msg.replace(/^[^:]*: /, '') || `exit ${r.code}`;
    const partial = r.code === 45 || (r.code === 44 && what === 'append');
    const text =
      r.code === 40
        ? 'is a symbolic link: refused (nsa-top never writes through a link)'
        : r.code === 42
          ? 'is not a directory: refused'
          : r.code === 43
            ? 'is not a regular file: refused'
            : r.code === 17
              ? 'already exists'
              : r.code === 45
                ? `created, but its content could not be written (${why})`
                : why;
    // the culprit: `.nsa-top` (the script names it by its full path) or the file itself
    const who = msg.startsWith('/') ? msg.slice(0, msg.indexOf(': ')) : path;
    return ownError(code, `${who} on ${this.label}`, text, partial);
  }

  /**
   * `kill -s SIG pid` on the remote box. With `expect.startTime`, the remote side first checks
   * /proc/PID/stat field 22 in the same command, so a recycled pid is never signalled.
   */
  async signal(pid: number, sig: SignalName, expect?: { startTime: string }): Promise<void> {
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`refusing to signal pid ${pid}`);
    const name = sig === 'SIG0' ? '0' : sig.replace(/^SIG/, '');
    if (!/^[A-Z0-9]+$/.test(name)) throw new Error(`invalid signal ${sig}`);
    let script = `kill -s ${name} "$1"`;
    const args = [String(pid)];
    if (expect) {
      if (!/^\d+$/.test(expect.startTime)) throw new Error(`invalid start time ${expect.startTime}`);
      script = `read -r s < /proc/"$1"/stat || exit 3; s=\${s##*) }; set -f; set -- "$1" "$2" $s; [ "\${22}" = "$2" ] || exit 4; ${script}`;
      args.push(expect.startTime);
    }
    const r = await this.sh(script, args, { timeoutMs: 15000 });
    if (r.code === 3) throw Object.assign(new Error(`pid ${pid} is gone`), { code: 'ESRCH' });
    if (r.code === 4)
      throw Object.assign(new Error(`pid ${pid} is another process now (start time changed): not signalled`), {
        code: 'ESRCH',
      });
    if (r.code !== 0) {
      const msg = r.stderr.toString().trim();
      const e = new Error(
        `kill -s ${name} ${pid} on ${this.label}: ${r.timedOut ? 'timed out' : msg || `exit ${r.code}`}`,
      ) as NodeJS.ErrnoException;
      e.code = /not permitted/i.test(msg) ? 'EPERM' : /no such process/i.test(msg) ? 'ESRCH' : 'EIO';
      throw e;
    }
  }

  // ------------------------------------------------------------------ watch loop / pollDir

  private async ensureWatch(): Promise<void> {
    if (this.watch) return;
    if (this.watchStarting) return this.watchStarting;
    this.watchStarting = (async () => {
      const client = await this.waitConnected(Date.now() + FRAME_WAIT_MS);
      const gen = await this.acquireChannel(Date.now() + FRAME_WAIT_MS);
      const nonce = randomBytes(16).toString('hex');
      let ch: ClientChannel;
      try {
        ch = await this.openExec(
          client,
          SshHost.commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch', this.gnuFind ? 'auto' : 'posix', nonce]),
        );
      } catch (e) {
        this.releaseChannel(gen);
        throw e;
      }
      let sawPid = false;
      const parser: FrameParser = new FrameParser(
        (line) => {
          if (!sawPid && /^\d+$/.test(line)) {
            sawPid = true;
            w.pid = Number(line);
            return;
          }
          if (line.startsWith('P ')) {
            const id = Number(line.slice(2));
            parser.expectRaw(Buffer.from(`\n@@P ${id} ${nonce}@@\n`), (b) => {
              const waiter = this.lightWaiters.get(id);
              this.lightWaiters.delete(id);
              waiter?.(b);
            });
            return;
          }
          this.onWatchLine(line);
        },
        (h, d) => this.onWatchData(h, d),
      );
      const w = { chan: ch, pid: null as number | null, nonce, parser };
      this.watch = w;
      this.inFlight = 0;
      ch.on('data', (b: Buffer) => parser.push(b));
      ch.stderr.on('data', () => {});
      ch.on('close', () => {
        this.releaseChannel(gen);
        if (this.watch === w) this.stopWatchLocal();
      });
      // (re)register everything: dirs, and follows from the byte after the last one received
      for (const d of this.dirs.values()) {
        d.validFromSeq = this.tickSeq + 1;
        this.send(`d ${d.id} ${d.path}|`);
      }
      for (const f of this.follows.values()) {
        if (f.paused) continue;
        f.validFromSeq = this.tickSeq + 1;
        this.send(`f ${f.id} ${f.base + f.len} ${f.ino} ${FOLLOW_CHUNK} ${f.path}|`);
      }
      this.tick();
      const iv = this.opts.watchIntervalMs ?? 1000;
      this.watchTimer = setInterval(() => {
        if (this.inFlight === 0) this.tick();
      }, iv);
      this.watchTimer.unref?.();
    })();
    try {
      await this.watchStarting;
    } finally {
      this.watchStarting = null;
    }
  }

  private stopWatchLocal(): void {
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = null;
    const w = this.watch;
    this.watch = null;
    this.frameDir = null;
    this.inFlight = 0;
    this.waitingSince = null;
    try {
      w?.chan.close();
    } catch {
      /* ignore */
    }
    // pending one-shot reads fail; pollDir retries them after reconnect
    for (const [id, o] of this.oneShots) {
      o.resolve({ stat: null, offset: 0, data: Buffer.alloc(0), error: 'connection lost' });
      this.oneShots.delete(id);
    }
    for (const s of this.seqWaiters.splice(0)) s.resolve();
    for (const [id, waiter] of this.lightWaiters) {
      this.lightWaiters.delete(id);
      waiter(null);
    }
  }

  private send(line: string): void {
    this.watch?.chan.write(`${line}\n`);
  }

  /** when the oldest unanswered tick was sent (null: none outstanding) */
  private waitingSince: number | null = null;

  /** pid of the remote watch loop (diagnostics and tests) */
  watchPid(): number | null {
    return this.watch?.pid ?? null;
  }

  /** ms the watch loop has owed an answer (a hung remote file system shows here), else 0 */
  watchStallMs(): number {
    return this.waitingSince === null ? 0 : Date.now() - this.waitingSince;
  }

  private tick(): number {
    const seq = ++this.tickSeq;
    if (this.inFlight === 0) this.waitingSince = Date.now();
    this.inFlight++;
    this.send(`t ${seq}`);
    return seq;
  }

  private waitSeq(seq: number, ms: number): Promise<boolean> {
    if (this.doneSeq >= seq) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        const i = this.seqWaiters.indexOf(w);
        if (i >= 0) this.seqWaiters.splice(i, 1);
        resolve(false);
      }, ms);
      const w = {
        seq,
        resolve: () => {
          clearTimeout(t);
          resolve(this.doneSeq >= seq);
        },
      };
      this.seqWaiters.push(w);
    });
  }

  private onWatchLine(line: string): void {
    const tag = line.slice(0, 2);
    const rest = line.slice(2);
    if (tag === 'B ') return;
    if (tag === 'Z ') {
      const seq = Number(rest);
      this.doneSeq = Math.max(this.doneSeq, seq);
      this.inFlight = Math.max(0, this.inFlight - 1);
      this.waitingSince = this.inFlight > 0 ? Date.now() : null;
      this.counters.frames++;
      for (const w of [...this.seqWaiters]) {
        if (w.seq <= this.doneSeq) {
          this.seqWaiters.splice(this.seqWaiters.indexOf(w), 1);
          w.resolve();
        }
      }
      return;
    }
    if (tag === 'L ') {
      this.frameDir = this.dirById.get(Number(rest)) ?? null;
      this.frameEntries = [];
      return;
    }
    if (tag === 'e ' || tag === 'l ') {
      if (!this.frameDir) return;
      const e = tag === 'e ' ? parseFindEntry(rest) : parseLsLine(rest, this.now());
      if (e) this.frameEntries.push(e);
      return;
    }
    if (tag === 'E ') {
      const d = this.frameDir;
      if (d && d.id === Number(rest))
        d.entries = this.frameEntries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      this.frameDir = null;
      return;
    }
    if (tag === 'N ') {
      const d = this.dirById.get(Number(rest));
      if (d) d.entries = null;
      return;
    }
    if (tag === 'm ') {
      const [k, id] = rest.split(' ');
      if (k === 'o') {
        const o = this.oneShots.get(Number(id));
        if (o) {
          this.oneShots.delete(Number(id));
          this.lastIno.delete(o.path);
          o.resolve({ stat: null, offset: 0, data: Buffer.alloc(0) });
        }
      } else {
        const f = this.followById.get(Number(id));
        if (f) {
          f.stat = null;
          f.ino = -1;
        }
      }
    }
  }

  private onWatchData(h: string[], data: Buffer): void {
    // s K ID INO SIZE MTIME TYPE MODE RESET OFF LEN
    const [, k, idS, inoS, sizeS, mtS, type, perm, rs, offS] = h;
    const id = Number(idS);
    const ino = Number(inoS);
    const stat: FileStat = {
      ino,
      size: Number(sizeS),
      mtimeMs: findTimeMs(mtS ?? '0'),
      isDir: type === 'd',
      isFile: type === 'f',
      mode: modeOf(type ?? '', perm ?? '0'),
    };
    const off = Number(offS);
    const reset = rs === 'r' ? 'replaced' : rs === 'x' ? 'truncated' : undefined;
    if (k === 'o') {
      const o = this.oneShots.get(id);
      if (!o) return;
      this.oneShots.delete(id);
      this.lastIno.set(o.path, ino);
      o.resolve({ stat, reset, offset: off, data, error: notRegularType(type) });
      return;
    }
    const f = this.followById.get(id);
    if (!f) return;
    f.stat = stat;
    f.ino = ino;
    f.error = notRegularType(type);
    if (reset) {
      f.chunks = [];
      f.len = 0;
      f.base = 0;
      f.delivered = 0;
      f.pendingReset = reset;
    }
    if (data.length) {
      if (off !== f.base + f.len) {
        // a re-follow at another offset: start the buffer there
        f.chunks = [];
        f.len = 0;
        f.base = off;
      }
      f.chunks.push(data);
      f.len += data.length;
      if (f.len > FOLLOW_BUFFER_CAP && !f.paused) {
        f.paused = true;
        this.send(`g ${f.id}`);
      }
    }
  }

  private oneShot(
    path: string,
    offset: number,
    maxBytes: number,
  ): Promise<{
    stat: FileStat | null;
    reset?: 'truncated' | 'replaced';
    offset: number;
    data: Buffer;
    error?: string;
  }> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.oneShots.set(id, { path, resolve });
      this.send(`o ${id} ${offset} ${this.lastIno.get(path) ?? 0} ${maxBytes} ${path}|`);
    });
  }

  /**
   * The process table read inside the watch loop: no channel and no login-shell start-up per
   * refresh. Args as procs.ts passes them to its script: runDir, '1'|'', mode, known pids
   * (space-separated), pids. Null when the loop is not up (the caller falls back to exec).
   */
  async runLight(name: 'procs', args: string[], timeoutMs: number): Promise<Buffer | null> {
    if (name !== 'procs' || !this.client) return null;
    const [rd = '', tk = '', mode = '', known = '', ...pids] = args;
    if (rd.includes('\n') || rd.includes('\0') || !/^(all|run|list)$/.test(mode) || !/^1?$/.test(tk)) return null;
    if (!/^[\d ]*$/.test(known) || pids.some((p) => !/^\d+$/.test(p))) return null;
    try {
      await this.ensureWatch();
    } catch {
      return null;
    }
    if (!this.watch) return null;
    const id = this.nextId++;
    const kn = known.split(' ').filter(Boolean).join(',') || '-';
    const answer = new Promise<Buffer | null>((resolve) => {
      const t = setTimeout(() => {
        this.lightWaiters.delete(id);
        resolve(null);
      }, timeoutMs);
      this.lightWaiters.set(id, (b) => {
        clearTimeout(t);
        resolve(b);
      });
    });
    this.send(`P ${id} ${tk || '-'} ${mode} ${kn} ${pids.join(',') || '-'} ${rd ? SshHost.safePath(rd) : ''}|`);
    return answer;
  }

  /** Absolute or ./-relative: a path starting with `-` never reaches find/tail as an option. */
  private static safePath(p: string): string {
    return p.startsWith('/') ? p : `./${p}`;
  }

  async pollDir(dir: string, reads: ReadRequest[], subdirs: string[] = []): Promise<DirPoll> {
    const now = Date.now();
    const bad = (p: string) => p.includes('\n') || p.includes('\0');
    if (bad(dir))
      return {
        dir,
        entries: null,
        subdirs: {},
        reads: reads.map((r) => ({
          path: r.path,
          stat: null,
          offset: r.offset,
          data: Buffer.alloc(0),
          error: 'path contains a newline',
        })),
        error: 'directory name contains a newline: not supported over SSH',
        hostNowMs: this.now(),
      };
    let live = this.client !== null;
    let downWhy = '';
    if (live) {
      try {
        await this.ensureWatch();
      } catch (e) {
        live = false;
        downWhy = (e as Error).message;
      }
    }
    if (!live) {
      const st = this.state;
      downWhy ||=
        st.state === 'reconnecting'
          ? `reconnecting to ${this.label} (attempt ${st.attempt}): ${st.lastError}`
          : `not connected to ${this.label}`;
      if (this.dirs.size === 0 && this.follows.size === 0) return this.cachedPoll(dir, reads, subdirs, downWhy);
    }
    let needFrame = false;
    const dirPaths = [dir, ...subdirs.map((s) => `${dir.replace(/\/+$/, '')}/${s}`)];
    for (const p of dirPaths) {
      let d = this.dirs.get(p);
      if (!d) {
        d = { id: this.nextId++, path: p, entries: null, lastUsed: now, validFromSeq: this.tickSeq + 1 };
        this.dirs.set(p, d);
        this.dirById.set(d.id, d);
        this.send(`d ${d.id} ${SshHost.safePath(p)}|`);
        needFrame = true;
      } else if (d.validFromSeq > this.doneSeq) needFrame = true;
      d.lastUsed = now;
    }
    // which request of each path is its follow; the others are one-shot reads
    type Plan = {
      req: ReadRequest;
      follow?: Follow;
      oneShot?: Promise<Awaited<ReturnType<SshHost['oneShot']>>>;
      error?: string;
    };
    const plans: Plan[] = [];
    const followClaimed = new Set<string>();
    for (const req of reads) {
      if (bad(req.path)) {
        plans.push({ req, error: 'path contains a newline: not supported over SSH' });
        continue;
      }
      const max = req.maxBytes ?? Number.MAX_SAFE_INTEGER;
      const f = this.follows.get(req.path);
      if (
        f &&
        !followClaimed.has(req.path) &&
        (f.pendingReset || (req.offset >= f.base && req.offset <= f.base + f.len && req.offset >= f.delivered))
      ) {
        followClaimed.add(req.path);
        f.lastUsed = now;
        if (f.validFromSeq > this.doneSeq) needFrame = true;
        if (f.paused && f.len - (req.offset - f.base) < FOLLOW_BUFFER_CAP / 2) {
          f.paused = false;
          f.validFromSeq = this.tickSeq + 1;
          this.send(`f ${f.id} ${f.base + f.len} ${f.ino} ${FOLLOW_CHUNK} ${SshHost.safePath(f.path)}|`);
        }
        plans.push({ req, follow: f });
        continue;
      }
      // sequential continuation of an earlier read of this path: start following it
      if (!f && !followClaimed.has(req.path) && this.seqEnd.get(req.path) === req.offset) {
        const nf: Follow = {
          id: this.nextId++,
          path: req.path,
          base: req.offset,
          chunks: [],
          len: 0,
          ino: this.lastIno.get(req.path) ?? 0,
          stat: null,
          delivered: req.offset,
          lastUsed: now,
          paused: false,
          validFromSeq: this.tickSeq + 1,
        };
        this.follows.set(req.path, nf);
        this.followById.set(nf.id, nf);
        this.send(`f ${nf.id} ${req.offset} ${nf.ino} ${FOLLOW_CHUNK} ${SshHost.safePath(req.path)}|`);
        followClaimed.add(req.path);
        needFrame = true;
        plans.push({ req, follow: nf });
        continue;
      }
      if (f && !followClaimed.has(req.path)) {
        // the caller went back (re-reads a rewritten file) or jumped: re-follow from its offset
        followClaimed.add(req.path);
        f.chunks = [];
        f.len = 0;
        f.base = req.offset;
        f.delivered = req.offset;
        f.lastUsed = now;
        f.paused = false;
        f.validFromSeq = this.tickSeq + 1;
        this.send(
          `f ${f.id} ${req.offset} ${this.lastIno.get(req.path) ?? f.ino} ${FOLLOW_CHUNK} ${SshHost.safePath(req.path)}|`,
        );
        needFrame = true;
        plans.push({ req, follow: f });
        continue;
      }
      if (!live) {
        plans.push({ req, error: downWhy });
        continue;
      }
      plans.push({ req, oneShot: this.oneShot(SshHost.safePath(req.path), req.offset, Math.min(max, 1 << 30)) });
      needFrame = true;
    }
    // one-shot answers and fresh registrations arrive by the end of the next frame
    let frameError: string | undefined = live ? undefined : downWhy;
    if (needFrame && live) {
      const seq = this.tick();
      const ok = await this.waitSeq(seq, FRAME_WAIT_MS);
      if (!ok) frameError = this.watch ? 'remote watch loop did not answer in time' : 'connection lost';
    }
    // leases: stop following what nobody asked for in a while
    for (const [p, f] of this.follows) {
      if (now - f.lastUsed > LEASE_MS) {
        this.send(`g ${f.id}`);
        this.follows.delete(p);
        this.followById.delete(f.id);
      }
    }
    for (const [p, d] of this.dirs) {
      if (now - d.lastUsed > LEASE_MS) {
        this.send(`u ${d.id}`);
        this.dirs.delete(p);
        this.dirById.delete(d.id);
      }
    }
    const results: ReadResult[] = [];
    for (const pl of plans) {
      const { req } = pl;
      if (pl.error) {
        results.push({ path: req.path, stat: null, offset: req.offset, data: Buffer.alloc(0), error: pl.error });
        continue;
      }
      if (pl.oneShot) {
        const r = await Promise.race([pl.oneShot, sleep(frameError ? 0 : 1000).then(() => null)]);
        if (!r) {
          results.push({
            path: req.path,
            stat: null,
            offset: req.offset,
            data: Buffer.alloc(0),
            error: frameError ?? 'no answer',
          });
          continue;
        }
        if (!r.error && r.stat) this.seqEnd.set(req.path, r.offset + r.data.length);
        results.push({ path: req.path, stat: r.stat, offset: r.offset, data: r.data, reset: r.reset, error: r.error });
        continue;
      }
      const f = pl.follow!;
      if (f.validFromSeq > this.doneSeq) {
        results.push({
          path: req.path,
          stat: f.stat,
          offset: req.offset,
          data: Buffer.alloc(0),
          error: frameError ?? 'no answer yet',
        });
        continue;
      }
      const stall = this.watchStallMs();
      if (live && stall > (this.opts.stallMs ?? STALL_MS) && f.len - Math.max(0, req.offset - f.base) <= 0) {
        // nothing new because the remote side is stuck (a hung file system?), not because the run is quiet
        results.push({
          path: req.path,
          stat: f.stat,
          offset: req.offset,
          data: Buffer.alloc(0),
          error: `remote reads stalled for ${dur(stall / 1000)} (hung file system?)`,
        });
        continue;
      }
      let reset: ReadResult['reset'];
      let from = req.offset;
      if (f.pendingReset) {
        reset = f.pendingReset;
        f.pendingReset = undefined;
        from = 0;
      }
      if (from < f.base) from = f.base;
      // drop what the caller has consumed
      this.dropBefore(f, from);
      const max = req.maxBytes ?? Number.MAX_SAFE_INTEGER;
      const all = f.chunks.length === 1 ? f.chunks[0]! : Buffer.concat(f.chunks);
      f.chunks = all.length ? [all] : [];
      const data = all.subarray(0, Math.min(all.length, max));
      f.delivered = from + data.length;
      this.seqEnd.set(req.path, f.delivered);
      if (f.stat) this.lastIno.set(req.path, f.stat.ino);
      const rr: ReadResult = { path: req.path, stat: f.stat, offset: from, data: Buffer.from(data) };
      if (reset) rr.reset = reset;
      if (f.error) rr.error = f.error;
      results.push(rr);
    }
    const main = this.dirs.get(dir);
    const sub: Record<string, DirEntry[] | null> = {};
    for (const s of subdirs) sub[s] = this.dirs.get(`${dir.replace(/\/+$/, '')}/${s}`)?.entries ?? null;
    const out: DirPoll = { dir, entries: main?.entries ?? null, subdirs: sub, reads: results, hostNowMs: this.now() };
    if (main && main.entries === null && main.validFromSeq <= this.doneSeq)
      out.error = `ENOENT: ${dir} is missing or unreadable on ${this.label}`;
    if (frameError && !main?.entries) out.error = frameError;
    return out;
  }

  /** end offset of the last read handed out per path, to notice sequential reading */
  private readonly seqEnd = new Map<string, number>();

  private dropBefore(f: Follow, from: number): void {
    const skip = from - f.base;
    if (skip <= 0) return;
    const all = Buffer.concat(f.chunks);
    const rest = all.subarray(Math.min(skip, all.length));
    f.chunks = rest.length ? [rest] : [];
    f.len = rest.length;
    f.base = from;
  }

  private cachedPoll(dir: string, reads: ReadRequest[], subdirs: string[], error: string): DirPoll {
    const main = this.dirs.get(dir);
    const sub: Record<string, DirEntry[] | null> = {};
    for (const s of subdirs) sub[s] = this.dirs.get(`${dir.replace(/\/+$/, '')}/${s}`)?.entries ?? null;
    const rs: ReadResult[] = reads.map((r) => {
      const f = this.follows.get(r.path);
      return { path: r.path, stat: f?.stat ?? null, offset: r.offset, data: Buffer.alloc(0), error };
    });
    const out: DirPoll = { dir, entries: main?.entries ?? null, subdirs: sub, reads: rs, hostNowMs: this.now() };
    if (!main?.entries) out.error = error;
    return out;
  }

  /** Drops the TCP connection without closing the host: for tests of the reconnect path. */
  dropConnectionForTest(): void {
    this.sock?.destroy();
  }

  async close(): Promise<void> {
    // remote commands of live streams do not die with the connection (no pty, no SIGHUP): end them
    const pids = [...this.liveStreams].map((s) => s.pid()).filter((p): p is number => p !== null && p > 1);
    if (pids.length && this.client) {
      await this.exec(
        [
          'sh',
          '-c',
          'for p in "$@"; do kill -s TERM -- -"$p" 2>/dev/null || kill -s TERM "$p" 2>/dev/null; done; exit 0',
          'sh',
          ...pids.map(String),
        ],
        { timeoutMs: 3000 },
      ).catch(() => {});
    }
    this.closing = true;
    this.stopWatchLocal();
    for (const s of [...this.liveStreams]) s.kill();
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

// ------------------------------------------------------------------ nsa-top's own files (remote)

/** exit codes of the scripts below → errno names */
const OWN_CODES: Record<number, string> = {
  3: 'ENOENT',
  17: 'EEXIST',
  40: 'ELOOP',
  42: 'ENOTDIR',
  43: 'EFTYPE',
  44: 'EIO',
  45: 'EIO',
};

/** $1 root, $2 sub ('' for none), $3 name, $4 append|exclusive|replace; data on stdin */
const OWN_WRITE_SCRIPT = `set -f
r=$1 sub=$2 n=$3 m=$4
cd -P -- "$r" 2>/dev/null || { echo "$r: cannot enter the directory" >&2; exit 3; }
if [ -n "$sub" ]; then
  [ -h "$sub" ] && { echo "$r/$sub: is a link" >&2; exit 40; }
  [ -e "$sub" ] || mkdir -- "$sub" 2>/dev/null
  [ -h "$sub" ] && { echo "$r/$sub: is a link" >&2; exit 40; }
  [ -d "$sub" ] || { echo "$r/$sub: not a directory" >&2; exit 42; }
  cd -P -- "$sub" || exit 42
fi
if [ -h "$n" ]; then
  # replace puts a file in the link's place (the rename never follows it); the others refuse
  [ "$m" = replace ] || { echo "$n: is a link" >&2; exit 40; }
  rm -f -- "$n" || exit 44
fi
if [ -e "$n" ] && [ ! -f "$n" ]; then echo "$n: not a regular file" >&2; exit 43; fi
nf=; if dd if=/dev/null of=/dev/null oflag=nofollow status=none 2>/dev/null; then nf=1; fi
case $m in
exclusive)
  [ -e "$n" ] && { echo "$n: File exists" >&2; exit 17; }
  if [ -n "$nf" ]; then e=$(dd of="$n" conv=excl oflag=nofollow status=none 2>&1); rc=$?
  else e=$( (set -C; cat > "$n") 2>&1 ); rc=$?; fi
  if [ $rc -ne 0 ]; then
    case $e in *[Ee]xists*) echo "$n: File exists" >&2; exit 17;; *[Tt]oo\\ many\\ levels*|*[Ss]ymbolic*) echo "$n: is a link" >&2; exit 40;; esac
    [ -f "$n" ] && { echo "$n: $e" >&2; exit 45; }
    echo "$n: $e" >&2; exit 44
  fi;;
append)
  if [ -n "$nf" ]; then dd of="$n" oflag=append,nofollow conv=notrunc status=none || exit 44
  else cat >> "$n" || exit 44; fi;;
replace)
  t=".$n.nsa-top.$$.tmp"
  if [ -n "$nf" ]; then dd of="$t" conv=excl oflag=nofollow status=none || { rm -f -- "$t"; exit 44; }
  else (set -C; cat > "$t") || { rm -f -- "$t"; exit 44; }; fi
  [ -d "$n" ] && { rm -f -- "$t"; echo "$n: not a regular file" >&2; exit 43; }
  mv -f -- "$t" "$n" || { rm -f -- "$t"; exit 44; };;
*) exit 2;;
esac`;

/** $1 root, $2 sub, $3 name: removes the name itself (a link is removed, never followed) */
const OWN_REMOVE_SCRIPT = `set -f
cd -P -- "$1" 2>/dev/null || exit 3
if [ -n "$2" ]; then [ -h "$2" ] && { echo "$1/$2: is a link" >&2; exit 40; }; cd -P -- "$2" 2>/dev/null || exit 3; fi
[ -e "$3" ] || [ -h "$3" ] || exit 3
[ -d "$3" ] && [ ! -h "$3" ] && { echo "$3: is a directory" >&2; exit 43; }
rm -f -- "$3" || exit 44`;
