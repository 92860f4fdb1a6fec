// A kept SSH connection (NSA_TOP_SSH_KEEP, default 60 s): what OpenSSH's ControlMaster /
// ControlPersist does for ssh(1). The first `--host` command connects directly; as it closes it
// starts `nsa-top ssh-keep` (src/commands/ssh-keep.ts → keeper.ts), a small detached process with
// its own connection to the same target (same identity, known_hosts, host-key verification; it
// never accepts a new key) and one warm session whose login start-up files already ran. The next
// command within the window reaches it over a unix socket and pays neither the handshake nor the
// login shell. This side (loaded by every --host command, so small):
// - keepSeconds(): NSA_TOP_SSH_KEEP (unset: 60; 0: off; N: seconds; else exit 2);
// - keepSocketFor(): the socket's path, in a directory only the user can use (0700, the user's,
//   not a link; checked before use: anything else is refused and the command connects directly),
//   named by a hash of the target and the options that decide trust (no secret in it);
// - KeptClient: the ssh2 Client's `exec` over the socket, one unix connection per channel (and a
//   control one whose close is the connection's drop); frames.
// - spawnKeeper(): the detached keeper, its spec in the environment (not argv).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { selfCommand } from '../../self.js';
import type { SshTarget } from './config.js';
import { sshTrace } from './trace.js';

export { KEEP_DEFAULT_S, KEEP_ENV, keepSeconds } from './keepenv.js';
export const KEEP_SPEC_ENV = 'NSA_TOP_SSH_KEEP_SPEC';
/** the keeper's answer to a hello (its SSH connection is up) must come within this */
export const HELLO_WAIT_MS = 4000;
/** a channel's open (a warm session claimed, or a fresh one opened) must come within this */
export const OPEN_WAIT_MS = 8000;

/** What a keeper is started for (NSA_TOP_SSH_KEEP_SPEC, JSON): no secret, paths only. */
export interface KeepSpec {
  target: SshTarget;
  knownHostsFiles?: string[];
  agentSocket?: string | null;
  idleS: number;
  socket: string;
}

/** The directory of the sockets: $XDG_RUNTIME_DIR/nsa-top/ssh, else ~/.cache/nsa-top/ssh. */
export function keepDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_RUNTIME_DIR;
  return xdg && xdg.startsWith('/') ? join(xdg, 'nsa-top', 'ssh') : join(homedir(), '.cache', 'nsa-top', 'ssh');
}

/** Why `dir` may not hold our sockets (null: it is a directory, the user's, 0700 or tighter, no link). */
export function dirProblem(dir: string): string | null {
  let st;
  try {
    st = lstatSync(dir);
  } catch (e) {
    return `${dir}: ${(e as Error).message}`;
  }
  if (!st.isDirectory()) return `${dir} is not a directory`;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return `${dir} is owned by uid ${st.uid}, not ${uid}`;
  if ((st.mode & 0o077) !== 0) return `${dir} is open to others (mode ${(st.mode & 0o777).toString(8)})`;
  return null;
}

/** The socket path for `target` (and why it cannot be used: refused dir, path too long). */
export function keepSocketFor(
  target: SshTarget,
  knownHostsFiles: string[] | undefined,
  create: boolean,
): { path: string; problem: string | null } {
  const dir = keepDir();
  const key = JSON.stringify([
    'v1',
    process.getuid?.() ?? null,
    homedir(),
    target.user,
    target.hostName,
    target.port,
    target.identityFiles,
    target.identitiesOnly,
    knownHostsFiles ?? null,
  ]);
  const path = join(dir, `${createHash('sha256').update(key).digest('hex').slice(0, 24)}.sock`);
  if (path.length > 100) return { path, problem: `${path} is too long for a unix socket` };
  if (create) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch {
      /* dirProblem says what */
    }
  }
  return { path, problem: dirProblem(dir) };
}

/** Removes a socket nobody answers on, if it is still the one found dead (its inode and change time). */
export function removeDeadSocket(path: string, seen: { ino: number; ctimeMs: number } | null): void {
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) return;
    if (seen && (st.ino !== seen.ino || st.ctimeMs !== seen.ctimeMs)) return;
    unlinkSync(path);
    sshTrace(`kept: removed a dead socket`);
  } catch {
    /* gone already */
  }
}

// ------------------------------------------------------------------------------------ frames
// One byte of kind, four of length (big endian), the payload. Client → keeper: q (request, JSON),
// i (stdin), n (stdin's end), s (signal name), c (close the channel). Keeper → client: h (hello
// answer, JSON), k (channel open, JSON), f (failed: message), o (stdout), e (stderr), x (exit,
// JSON {code, signal}).

export function frame(kind: string, payload: Buffer | string = ''): Buffer {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const h = Buffer.alloc(5);
  h.write(kind, 0, 1, 'latin1');
  h.writeUInt32BE(p.length, 1);
  return Buffer.concat([h, p]);
}

/** Cuts a byte stream into frames (a frame's bytes are joined once, when all of them arrived). */
export class FrameReader {
  private chunks: Buffer[] = [];
  private len = 0;
  constructor(private readonly onFrame: (kind: string, payload: Buffer) => void) {}
  push(b: Buffer): void {
    this.chunks.push(b);
    this.len += b.length;
    while (this.len >= 5) {
      if (this.chunks[0]!.length < 5) this.chunks = [Buffer.concat(this.chunks, this.len)];
      const n = this.chunks[0]!.readUInt32BE(1);
      if (this.len < 5 + n) return;
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.len);
      const rest = all.subarray(5 + n);
      this.chunks = rest.length ? [rest] : [];
      this.len = rest.length;
      this.onFrame(String.fromCharCode(all[0]!), all.subarray(5, 5 + n));
    }
  }
}

/** A unix connection to `path` (null: nobody listens; the dead socket was removed). */
export function openUnix(path: string): Promise<Socket | null> {
  let seen: { ino: number; ctimeMs: number } | null = null;
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) return Promise.resolve(null);
    seen = { ino: st.ino, ctimeMs: st.ctimeMs };
  } catch {
    return Promise.resolve(null);
  }
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNREFUSED') removeDeadSocket(path, seen);
      resolve(null);
    });
  });
}

/** The keeper's hello answer: its pid, and whether its SSH connection is up. */
export interface KeeperHello {
  ok: boolean;
  pid: number;
  /** a warm session waits, its login shell started (a keeper refills it once its clients are gone: keeper.ts) */
  warm?: boolean;
  /** the next warm session is starting */
  warming?: boolean;
  error?: string;
}

/** Sends a request on `sock` and waits (at most `ms`) for the first frame back. */
function request(sock: Socket, req: object, ms: number): Promise<{ kind: string; payload: Buffer } | null> {
  return new Promise((resolve) => {
    const t = setTimeout(() => done(null), ms);
    const reader = new FrameReader((kind, payload) => done({ kind, payload }));
    const onData = (b: Buffer) => reader.push(b);
    const onEnd = () => done(null);
    function done(r: { kind: string; payload: Buffer } | null) {
      clearTimeout(t);
      sock.off('data', onData);
      sock.off('close', onEnd);
      sock.off('error', onEnd);
      resolve(r);
    }
    sock.on('data', onData);
    sock.once('close', onEnd);
    sock.once('error', onEnd);
    sock.write(frame('q', JSON.stringify(req)));
  });
}

/** Asks the keeper at `path` whether it is up (tests and the client's first step). */
export async function keeperHello(
  path: string,
  sock?: Socket | null,
): Promise<{ hello: KeeperHello; sock: Socket } | null> {
  const s = sock ?? (await openUnix(path));
  if (!s) return null;
  const r = await request(s, { op: 'hello' }, HELLO_WAIT_MS);
  if (!r || r.kind !== 'h') {
    s.destroy();
    return null;
  }
  try {
    return { hello: JSON.parse(r.payload.toString()) as KeeperHello, sock: s };
  } catch {
    s.destroy();
    return null;
  }
}

/** The channel a KeptClient's exec gives: what exec.ts and watch.ts use of ssh2's ClientChannel. */
export class KeptChannel extends EventEmitter {
  readonly stderr = new EventEmitter();
  constructor(private readonly sock: Socket) {
    super();
  }
  write(data: string | Buffer): boolean {
    if (!this.sock.destroyed) this.sock.write(frame('i', typeof data === 'string' ? Buffer.from(data) : data));
    return true;
  }
  end(data?: string | Buffer): this {
    if (data !== undefined) this.write(data);
    if (!this.sock.destroyed) this.sock.write(frame('n'));
    return this;
  }
  signal(name: string): boolean {
    if (!this.sock.destroyed) this.sock.write(frame('s', name));
    return true;
  }
  close(): void {
    if (!this.sock.destroyed) this.sock.end(frame('c'));
  }
}

/** ssh2's Client as far as SshConnection uses it, over a keeper's socket. */
export class KeptClient extends EventEmitter {
  private closed = false;
  constructor(
    private readonly path: string,
    private readonly control: Socket,
    readonly keeperPid: number,
  ) {
    super();
    // the control connection's end is the kept connection's drop (the keeper exited)
    control.on('data', () => {});
    control.once('close', () => this.markClosed());
    control.on('error', () => {});
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.control.destroy();
    this.emit('close');
  }

  exec(cmd: string, cb: (err: Error | undefined, ch: KeptChannel) => void): boolean {
    void (async () => {
      const sock = this.closed ? null : await openUnix(this.path);
      if (!sock) {
        this.markClosed();
        return cb(new Error('the kept connection is gone'), undefined as never);
      }
      const ch = new KeptChannel(sock);
      let opened = false;
      /** events held until the caller attached its listeners (null: delivered as they come) */
      let held: (() => void)[] | null = null;
      const deliver = (f: () => void) => (held ? held.push(f) : f());
      const reader = new FrameReader((kind, payload) => {
        if (!opened) {
          opened = true;
          clearTimeout(t);
          if (kind === 'k') {
            sshTrace(`kept: channel open (${payload.toString()})`);
            // what follows in the same read must wait for the caller's listeners, attached after
            // its `await` (ssh2's channel is a stream that holds its data until then)
            held = [];
            setImmediate(() => {
              const q = held ?? [];
              held = null;
              for (const f of q) f();
            });
            return cb(undefined, ch);
          }
          sock.destroy();
          return cb(new Error(kind === 'f' ? payload.toString() : 'the keeper answered nonsense'), undefined as never);
        }
        deliver(() => {
          if (kind === 'o') ch.emit('data', payload);
          else if (kind === 'e') ch.stderr.emit('data', payload);
          else if (kind === 'x') {
            const x = JSON.parse(payload.toString()) as { code: number | null; signal: string | null };
            if (x.signal) ch.emit('exit', null, x.signal);
            else ch.emit('exit', x.code);
          }
        });
      });
      // a keeper that cannot open a channel in time (its connection dead, not yet noticed): this
      // connection counts as dropped, and the host reconnects directly
      const t = setTimeout(() => {
        if (opened) return;
        opened = true;
        sock.destroy();
        this.markClosed();
        cb(new Error('the kept connection did not open a channel in time'), undefined as never);
      }, OPEN_WAIT_MS);
      sock.on('data', (b: Buffer) => reader.push(b));
      sock.on('error', () => {});
      sock.once('close', () => {
        clearTimeout(t);
        if (!opened) {
          opened = true;
          return cb(new Error('the keeper closed the channel before it opened'), undefined as never);
        }
        deliver(() => ch.emit('close'));
      });
      sock.write(frame('q', JSON.stringify({ op: 'exec', cmd })));
    })();
    return true;
  }

  end(): void {
    this.markClosed();
  }
}

/** A KeptClient on the keeper at `path` once it says its connection is up; null otherwise. */
export async function openKept(path: string, pre?: Socket | null): Promise<KeptClient | null> {
  const h = await keeperHello(path, pre);
  if (!h) return null;
  if (!h.hello.ok) {
    h.sock.destroy();
    sshTrace(`kept: the keeper is not connected (${h.hello.error ?? '?'})`);
    return null;
  }
  sshTrace(`kept: using the keeper (pid ${h.hello.pid})`);
  return new KeptClient(path, h.sock, h.hello.pid);
}

/** Starts the keeper for `spec`, detached; its spec travels in the environment. */
export function spawnKeeper(spec: KeepSpec): void {
  const [node, ...pre] = selfCommand();
  try {
    const child = spawn(node!, [...pre, 'ssh-keep'], {
      detached: true,
      stdio: 'ignore',
      cwd: '/',
      env: { ...process.env, [KEEP_SPEC_ENV]: JSON.stringify(spec) },
    });
    child.on('error', () => {});
    child.unref();
    sshTrace(`kept: started a keeper (pid ${child.pid ?? '?'})`);
  } catch {
    /* the next command connects directly */
  }
}
