// The keeper (`nsa-top ssh-keep`, started detached by a --host command as it closes; keep.ts is
// the client's side). It binds its unix socket first (a second keeper for the same target finds
// it taken and exits: one per target), then connects with the same SshConnection as any command
// (host key verified against known_hosts, never a new key accepted), and keeps one warm session
// open: a login shell already started that waits for the command it is to become (WARM_SCRIPT).
// A client's exec claims the warm session (the keeper starts the next one) or, while none is
// ready, opens a fresh channel; either way the channel's bytes, exit and close travel over that
// client's unix connection. It exits when no client has been connected for the idle window, when
// its SSH connection drops, on SIGTERM/SIGINT/SIGHUP or a `stop` request, and removes its socket
// (only while it is still the one it bound).
import { randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import type { Client, ClientChannel } from 'ssh2';
import { shQuote } from '../quote.js';
import { SshConnection } from './connection.js';
import { commandLine } from './exec.js';
import { WATCH_FACTS, WATCH_SCRIPT } from './watch-script.js';
import { dirProblem, frame, FrameReader, openUnix, type KeepSpec } from './keep.js';

/**
 * The warm session's script. It probes the box's constant facts first (WATCH_FACTS: the loop's
 * start takes them as $3, no probe of its own), then its first line says what it becomes: `W MODE
 * NONCE`, the watch loop (watch.ts opens it first, every command: its script is already here, as
 * $2, so only that line travels), or `L` followed by a command line's lines up to the mark line (random per session):
 * then it becomes `sh -c` of them, as the user's shell would have run that command line
 * (commandLine's lines are POSIX sh). Either way the channel's stdin after that is the command's.
 * Before it waits it prints `MARK ready`: the login shell (its ~/.bashrc) and the probe are done —
 * the keeper takes that line out of what it hands the claimer (ReadyLine below).
 */
const WARM_SCRIPT = `e=$1; w=$2; f=$(${WATCH_FACTS}); printf '%s ready\\n' "$e"; IFS= read -r l || exit 0
case $l in "W "*) set -- $l; echo $$; exec sh -c "$w" nsa-top-watch "$2" "$3" "$f";; esac
c=; while IFS= read -r l; do if [ "$l" = "$e" ]; then exec sh -c "$c"; fi; c="$c$l
"; done; exit 0`;
/** the watch loop's command line but for its last two words (mode, nonce) */
const WATCH_PREFIX = `${commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch'])} `;

/** What the warm session is told to become for `cmd`: the watch loop in one short line, else `cmd` whole. */
export function warmInput(cmd: string, mark: string): string | null {
  if (cmd.startsWith(WATCH_PREFIX)) {
    const m = /^(auto|posix) ([0-9a-f]{8,64})$/.exec(cmd.slice(WATCH_PREFIX.length));
    if (m) return `W ${m[1]} ${m[2]}\n`;
  }
  if (cmd.split('\n').includes(mark)) return null;
  return `L\n${cmd}\n${mark}\n`;
}

/** the keeper's keepalive (ssh2's: a ping every interval while nothing else arrives) */
const KEEPALIVE_MS = 2000;
/**
 * How long after a claim the next warm session starts while a client is still connected (with none
 * connected: at once). Its start is a login shell, and a ~/.bashrc that loads pyenv or conda costs
 * a second of the box's CPU (this box's: 1.2 s); started at the claim, it ran beside the very command
 * that claimed the last one (on this 2-core box a kept `status --host` took 1359 ms with it, 932 without).
 */
const WARM_REFILL_MS = 3000;

interface Warm {
  ch: ClientChannel;
  mark: string;
  /** what it printed before it was claimed (a chatty ~/.bashrc): handed to the claimer first */
  early: { kind: 'o' | 'e'; data: Buffer }[];
  closed: boolean;
  /** its stdout's filter; done: it said `MARK ready` (its login shell has started, it waits for its command) */
  ready: ReadyLine;
}

/**
 * Takes a warm session's ready line (`MARK ready`) out of its stdout, which goes to its claimer: what
 * comes before the line (a chatty ~/.bashrc) is held until the line is whole, then passed on without
 * it; everything after passes as it comes. A session may be claimed before its line: the claimer's
 * bytes go through the same filter, and its command's output can only follow the line.
 */
export class ReadyLine {
  done = false;
  private held = Buffer.alloc(0);
  private readonly line: Buffer;
  constructor(mark: string) {
    this.line = Buffer.from(`${mark} ready\n`);
  }
  push(d: Buffer): Buffer {
    if (this.done) return d;
    this.held = Buffer.concat([this.held, d]);
    const i = this.held.indexOf(this.line);
    if (i < 0) return Buffer.alloc(0);
    this.done = true;
    const out = Buffer.concat([this.held.subarray(0, i), this.held.subarray(i + this.line.length)]);
    this.held = Buffer.alloc(0);
    return out;
  }
}

export async function runKeeper(spec: KeepSpec): Promise<number> {
  const dir = dirname(spec.socket);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    /* dirProblem says what */
  }
  const problem = dirProblem(dir);
  if (problem) {
    process.stderr.write(`nsa-top ssh-keep: ${problem}\n`);
    return 2;
  }
  let ready: 'connecting' | 'up' | string = 'connecting';
  const readyWaiters: (() => void)[] = [];
  let active = 0;
  let idleTimer: NodeJS.Timeout | null = null;
  let shuttingDown = false;
  let warm: Warm | null = null;
  let warming: Promise<Warm | null> | null = null;
  let warmFailures = 0;
  let refillTimer: NodeJS.Timeout | null = null;
  let boundIno: number | null = null;

  const conn = new SshConnection(
    {
      target: spec.target,
      knownHostsFiles: spec.knownHostsFiles,
      agentSocket: spec.agentSocket,
      acceptNewHostKey: false,
      // a cut link is noticed in ~6 s (and a hello is refused sooner: `silentMs` below)
      keepaliveIntervalMs: KEEPALIVE_MS,
      keepaliveCountMax: 3,
    },
    {
      connected: async () => {},
      // a drop is the end: clients connect directly (and start a new keeper) from then on
      dropped: () => void shutdown(),
      reconnected: async () => {},
    },
  );

  const server: Server = createServer((sock) => onClient(sock));
  const listen = () =>
    new Promise<NodeJS.ErrnoException | null>((resolve) => {
      server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
      server.listen(spec.socket, () => resolve(null));
    });
  let err = await listen();
  if (err?.code === 'EADDRINUSE') {
    // a live keeper: it is the one; a dead socket is removed (openUnix) and bound once more
    const other = await openUnix(spec.socket);
    if (other) {
      other.destroy();
      return 0;
    }
    err = await listen();
  }
  if (err) {
    process.stderr.write(`nsa-top ssh-keep: cannot listen on ${spec.socket}: ${err.message}\n`);
    return 2;
  }
  try {
    chmodSync(spec.socket, 0o600);
    boundIno = lstatSync(spec.socket).ino;
  } catch {
    /* the directory is private anyway */
  }
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(s, () => void shutdown());

  function armIdle(): void {
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = active === 0 ? setTimeout(() => void shutdown(), spec.idleS * 1000) : null;
  }

  async function shutdown(): Promise<void> {
    if (shuttingDown) return;
    shuttingDown = true;
    if (typeof ready === 'string' && ready === 'up') ready = 'shutting down';
    if (idleTimer) clearTimeout(idleTimer);
    if (refillTimer) clearTimeout(refillTimer);
    // the socket first (the next command connects directly), then the connection
    try {
      if (boundIno !== null && lstatSync(spec.socket).ino === boundIno) unlinkSync(spec.socket);
    } catch {
      /* gone */
    }
    server.close();
    try {
      warm?.ch.close();
    } catch {
      /* closed */
    }
    const t = setTimeout(() => process.exit(0), 1500);
    t.unref();
    await conn.close().catch(() => {});
    process.exit(0);
  }

  function openChannel(cmd: string): Promise<ClientChannel> {
    const client = conn.client as Client | null;
    if (!client) return Promise.reject(new Error('the kept connection is down'));
    return conn.openExec(client, cmd);
  }

  /** Starts the next warm session once no client is connected, or WARM_REFILL_MS from now. */
  function refillLater(): void {
    if (warm || warming || refillTimer) return;
    if (active === 0) return startWarm();
    refillTimer = setTimeout(startWarm, WARM_REFILL_MS);
  }

  /** Starts the next warm session (one at a time). */
  function startWarm(): void {
    if (refillTimer) clearTimeout(refillTimer);
    refillTimer = null;
    if (warm || warming || shuttingDown || ready !== 'up' || warmFailures >= 3) return;
    const mark = `nsa-top-warm-${randomBytes(12).toString('hex')}`;
    warming = openChannel(`exec sh -c ${shQuote(WARM_SCRIPT)} nsa-top-warm ${mark} ${shQuote(WATCH_SCRIPT)}`).then(
      (ch) => {
        const w: Warm = { ch, mark, early: [], closed: false, ready: new ReadyLine(mark) };
        ch.on('data', (d: Buffer) => {
          const x = w.ready.push(d);
          if (x.length > 0) w.early.push({ kind: 'o', data: x });
        });
        ch.stderr.on('data', (d: Buffer) => w.early.push({ kind: 'e', data: d }));
        ch.on('close', () => {
          w.closed = true;
          if (warm === w) {
            warm = null;
            warmFailures++;
            startWarm();
          }
        });
        warm = w;
        warming = null;
        return w;
      },
      () => {
        warming = null;
        warmFailures++;
        return null;
      },
    );
  }

  /** A channel for `cmd`: the warm session (claimed) or a fresh one. */
  async function channelFor(
    cmd: string,
  ): Promise<{ ch: ClientChannel; early: Warm['early']; warm: boolean; out: ReadyLine | null }> {
    let w = warm ?? (warming ? await warming : null);
    const input = w && !w.closed ? warmInput(cmd, w.mark) : null;
    if (w && input === null) w = null;
    if (w && input !== null) {
      if (warm === w) warm = null;
      w.ch.removeAllListeners('data');
      w.ch.stderr.removeAllListeners('data');
      w.ch.removeAllListeners('close');
      w.ch.write(input);
      warmFailures = 0;
      refillLater();
      return { ch: w.ch, early: w.early, warm: true, out: w.ready };
    }
    const ch = await openChannel(cmd);
    refillLater();
    return { ch, early: [], warm: false, out: null };
  }

  function onClient(sock: Socket): void {
    active++;
    armIdle();
    let ch: ClientChannel | null = null;
    let chClosed = false;
    let asked = false;
    sock.on('error', () => {});
    sock.once('close', () => {
      active--;
      armIdle();
      // the last client gone: a refill that waited for it starts now
      if (active === 0 && refillTimer) startWarm();
      if (ch && !chClosed) ch.close();
    });
    const reader = new FrameReader((kind, payload) => {
      if (!asked) {
        asked = true;
        if (kind !== 'q') return sock.destroy();
        let req: { op?: string; cmd?: string };
        try {
          req = JSON.parse(payload.toString()) as typeof req;
        } catch {
          return sock.destroy();
        }
        if (req.op === 'hello') return void hello(sock);
        if (req.op === 'stop') return void shutdown();
        if (req.op === 'exec' && typeof req.cmd === 'string') return void exec(req.cmd);
        return sock.destroy();
      }
      if (!ch) return; // before the open was answered the client sends nothing
      if (kind === 'i') ch.write(payload);
      else if (kind === 'n') ch.end();
      else if (kind === 's') ch.signal(payload.toString());
      else if (kind === 'c') ch.close();
    });
    sock.on('data', (b: Buffer) => reader.push(b));

    async function exec(cmd: string): Promise<void> {
      let got;
      try {
        if (ready === 'connecting') await new Promise<void>((r) => readyWaiters.push(r));
        got = await channelFor(cmd);
      } catch (e) {
        if (!sock.destroyed) sock.end(frame('f', (e as Error).message));
        return;
      }
      ch = got.ch;
      if (sock.destroyed) {
        ch.close();
        return;
      }
      const c = ch;
      sock.write(frame('k', JSON.stringify({ warm: got.warm })));
      for (const x of got.early) sock.write(frame(x.kind, x.data));
      const out = got.out;
      c.on('data', (b: Buffer) => {
        const d = out ? out.push(b) : b;
        if (d.length === 0) return;
        if (!sock.write(frame('o', d))) {
          c.pause();
          sock.once('drain', () => c.resume());
        }
      });
      c.stderr.on('data', (d: Buffer) => sock.write(frame('e', d)));
      c.on('exit', (code: number | null, signal?: string) =>
        sock.write(frame('x', JSON.stringify({ code: code ?? null, signal: signal ?? null }))),
      );
      c.on('close', () => {
        chClosed = true;
        sock.end();
      });
    }
  }

  // when the server last sent anything (its keepalive answers come every KEEPALIVE_MS when idle)
  let lastRx = Date.now();
  let rxBytes = 0;
  const rxTimer = setInterval(() => {
    const n = conn.socketBytes().in;
    if (n !== rxBytes) {
      rxBytes = n;
      lastRx = Date.now();
    }
  }, 250);
  rxTimer.unref();
  const silentMs = () => Date.now() - lastRx;

  async function hello(sock: Socket): Promise<void> {
    if (ready === 'connecting') await new Promise<void>((r) => readyWaiters.push(r));
    // a server silent past its keepalive answer: the link may be cut; the client connects directly
    const silent = ready === 'up' && silentMs() > KEEPALIVE_MS + 2500;
    const ok = ready === 'up' && !silent;
    const error = ok ? undefined : silent ? `the server has not answered for ${silentMs()} ms` : ready;
    if (!sock.destroyed)
      sock.write(
        frame(
          'h',
          JSON.stringify({
            ok,
            pid: process.pid,
            warm: !!warm?.ready,
            warming: !!warming || (!!warm && !warm.ready),
            ...(ok ? {} : { error }),
          }),
        ),
      );
    // the control connection stays open: its close tells the client the keeper went away
  }

  armIdle();
  try {
    await conn.connect();
    ready = 'up';
  } catch (e) {
    ready = (e as Error).message;
  }
  for (const w of readyWaiters.splice(0)) w();
  if (ready !== 'up') {
    // hellos were answered with why; then make way for the next command's direct connection
    setTimeout(() => void shutdown(), 200);
    return 0;
  }
  startWarm();
  return await new Promise<number>(() => {});
}
