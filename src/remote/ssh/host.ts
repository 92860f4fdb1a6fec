// SshHost: the Host interface over one SSH connection (ssh2), agentless — the remote box needs
// only POSIX tools (sh, find/ls, tail, head, kill) and /proc. It composes:
//
// - connection.ts: connect, host keys against known_hosts, keepalive, reconnect with backoff;
// - channels.ts: channels are rationed (a server allows ~10 per connection);
// - exec.ts: exec() and stream(), every argument quoted, the remote pid learned (`echo $$`) so a
//   timeout kills the remote command group;
// - files.ts: stat, list, reads and writes (nsa-top's own files too), signals — guarded sh scripts
//   (listing.ts parses what find and ls print);
// - watch.ts: one long-lived watch channel (watch-script.ts, its stream cut by frames.ts) ticked at
//   `watchIntervalMs`, which also reads the process table and sends kills without a channel each;
// - poll.ts: pollDir() served from the watch loop's frames, without a round trip. After a drop
//   every follow resumes from the byte after the last one received: no byte lost, none twice.
// (the delegating methods below take their return types from the parts)

import type {
  ExecOptions,
  ExecResult,
  Host,
  Look,
  LookAhead,
  OwnWriteMode,
  ProcTableRequest,
  ReadRequest,
  SignalExpect,
  SignalName,
  StreamOptions,
} from '../host.js';
import { ChannelLimiter } from './channels.js';
import { clockOffsetOf, probeBox, SshConnection, type BoxFacts, type SshHostOptions } from './connection.js';
import { execResultOf, RemoteCommands } from './exec.js';
import { SshFiles } from './files.js';
import { DirPoller, subdirPath } from './poll.js';
import {
  LOOK_SCRIPT,
  LookMemo,
  lookArgs,
  lookNonce,
  parseLookAnswer,
  SshLook,
  type LookAnswer,
  type LookedHost,
} from './look.js';
import { WatchLoop, type ScriptAnswer } from './watch.js';
import { FIRST_ASKS, HOST_FACTS_ARGV, UID_ARGV } from '../firstasks.js';
import { candidateRequestAhead } from '../procs.js';
import { sshTrace } from './trace.js';

export { HostKeyError, SshConnectError, type SshHostOptions } from './connection.js';
export { FrameParser } from './frames.js';
export { findTimeMs, parseLsLine } from './listing.js';

export interface SshStats {
  /** channels opened since connect (exec, stream, watch) */
  channels: number;
  /** bytes on the TCP socket (all SSH overhead included) */
  socketBytesIn: number;
  socketBytesOut: number;
  /** frames received from the watch loop */
  frames: number;
  /** scripts (looks, signals, writes) sent to the watch loop: its round trips other than frames */
  scripts: number;
  /** one-shot reads of files the watch loop was asked for (`o`, or in a bulk read) */
  reads: number;
  reconnects: number;
}

export class SshHost implements Host, LookedHost {
  readonly kind = 'ssh' as const;
  readonly label: string;
  private readonly box: BoxFacts = { clockOffsetMs: 0, gnuFind: true };
  private readonly conn: SshConnection;
  private readonly channels: ChannelLimiter;
  private readonly cmds: RemoteCommands;
  private readonly files: SshFiles;
  private readonly watch: WatchLoop;
  private readonly poller: DirPoller;
  /** FIRST_ASKS asked once per connection, by argv, until an exec takes its answer */
  private readonly firstAnswers = new Map<string, Promise<ScriptAnswer | null>>();
  private firstAsked = false;

  private constructor(opts: SshHostOptions) {
    this.label = opts.target.label;
    this.channels = new ChannelLimiter(opts.maxChannels ?? 8, this.label);
    this.conn = new SshConnection(opts, {
      connected: async () => {
        this.channels.reset();
        this.firstAnswers.clear();
        this.firstAsked = false;
        this.files.forgetLooks();
        this.box.gnuFind = !opts.posixOnly;
        // the watch loop starts with the connection: every look after this one rides it (one SSH
        // session per connection), and the box is probed through it too
        const facts =
          (await this.probeInLoop()) ?? (await probeBox((argv, o) => this.cmds.exec(argv, o), opts.posixOnly ?? false));
        if (facts.clockOffsetMs !== null) this.box.clockOffsetMs = facts.clockOffsetMs;
        this.box.gnuFind = facts.gnuFind;
      },
      dropped: () => {
        this.watch.stopLocal();
        this.cmds.killStreams();
      },
      reconnected: async () => {
        if (!this.watch.idle) await this.watch.ensure();
      },
    });
    this.cmds = new RemoteCommands(this.conn, this.channels, (pid, sig) => this.watch.kill(pid, sig));
    this.files = new SshFiles(
      this.cmds,
      this.label,
      this.box,
      (build, args, ms) => this.watch.runScript(build, args, ms),
      (script, args, input, ms) => this.watch.runWrite(script, args, input, ms),
    );
    this.watch = new WatchLoop(this.conn, this.channels, this.box, opts.watchIntervalMs ?? 1000);
    this.poller = new DirPoller(
      this.watch,
      {
        label: this.label,
        connected: () => this.conn.client !== null,
        state: () => this.conn.state,
        now: () => this.now(),
      },
      opts.stallMs,
    );
  }

  /**
   * The box's clock and tools, from the watch loop's hello (the loop is started here): its `date`
   * is the last thing the loop does before the line goes out, so the box's clock is read at most
   * the line's one-way trip before it arrives (on loopback well under a ms; the round trip of a
   * `date` of its own cost a round trip before the first look). The hello's uid and CPU count
   * answer the first asks (firstasks.ts) too. Null when the loop cannot start: probeBox execs instead.
   */
  private async probeInLoop(): Promise<{ clockOffsetMs: number | null; gnuFind: boolean } | null> {
    try {
      await this.watch.ensure();
    } catch {
      return null;
    }
    if (!(await this.watch.waitHello(10_000))) return null;
    const h = this.watch.helloFacts;
    if (!h) return null;
    const answer = (stdout: string, code = 0): Promise<ScriptAnswer> =>
      Promise.resolve({
        code,
        signal: null,
        stdout: Buffer.from(stdout),
        stderr: Buffer.alloc(0),
        timedOut: false,
        durationMs: 0,
      });
    if (/^\d+$/.test(h.uid) && /^\d+$/.test(h.cpus)) {
      // FIRST_ASKS' answers, as their execs print them
      this.firstAnswers.set(UID_ARGV.join('\0'), answer(`${h.uid}\n`));
      this.firstAnswers.set(
        HOST_FACTS_ARGV.join('\0'),
        answer(`${h.cpus}\n${h.gpu ? 'gpu-tools\n' : ''}`, h.gpu ? 0 : 1),
      );
      this.firstAsked = true;
    }
    return { clockOffsetMs: clockOffsetOf(h.clock, h.at, h.at), gnuFind: this.box.gnuFind };
  }

  /** Connects (first attempt errors are thrown: host key, auth, network). */
  static async connect(opts: SshHostOptions): Promise<SshHost> {
    const h = new SshHost(opts);
    await h.conn.connect();
    return h;
  }

  connState() {
    return this.conn.state;
  }

  stats(): SshStats {
    const sock = this.conn.socketBytes();
    return {
      channels: this.channels.opened,
      socketBytesIn: sock.in,
      socketBytesOut: sock.out,
      frames: this.watch.frames,
      scripts: this.watch.scriptsSent,
      reads: this.watch.readsAsked,
      reconnects: this.conn.reconnects,
    };
  }

  now(): number {
    return Date.now() + this.box.clockOffsetMs;
  }

  async exec(argv: string[], opts: ExecOptions) {
    // a command may change anything: no look answered before it answers after it (a quick one is
    // a probe that changes nothing: command -v, getconf, id -u, /proc)
    if (!opts.quick) this.files.forgetLooks();
    // asked once per connection, all together (firstasks.ts): the first ask takes that answer
    const key = argv.join('\0');
    const plain = opts.quick && !opts.env && !opts.cwd && opts.input === undefined;
    if (plain && FIRST_ASKS.some((a) => a.join('\0') === key)) this.askFirst();
    const first = plain ? this.firstAnswers.get(key) : undefined;
    if (first) {
      this.firstAnswers.delete(key);
      const r = await first;
      if (r && !r.timedOut) return execResultOf(r);
    }
    if (opts.quick && opts.input === undefined && !opts.cwd) {
      // env rides as `env K=V …` arguments (a name that is not a plain name goes by exec)
      const env = Object.entries(opts.env ?? {});
      if (env.every(([k]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k))) {
        const args = env.length ? ['env', ...env.map(([k, v]) => `${k}=${v}`), ...argv] : argv;
        const r = await this.watch.runScript(() => 'exec "$@"', args, opts.timeoutMs);
        if (r) return execResultOf(r);
      }
    }
    try {
      return await this.cmds.exec(argv, opts);
    } finally {
      this.files.forgetLooks();
    }
  }

  /** a quick probe of a look-ahead, run aside in the loop (lookAhead); by exec where the loop cannot */
  private async quickAside(argv: string[], timeoutMs: number): Promise<ExecResult> {
    const r = await this.watch.runScript(() => 'exec "$@"', argv, timeoutMs, true);
    return r ? execResultOf(r) : this.exec(argv, { timeoutMs, quick: true });
  }

  stream(argv: string[], opts: StreamOptions) {
    return this.cmds.stream(argv, opts);
  }

  stat(path: string) {
    return this.files.stat(path);
  }

  list(dir: string) {
    return this.files.list(dir);
  }

  readRange(path: string, start: number, end?: number) {
    return this.files.readRange(path, start, end);
  }

  readFile(path: string, maxBytes?: number) {
    return this.files.readFile(path, maxBytes);
  }

  writeFile(path: string, data: string | Buffer, opts?: { exclusive?: boolean; mode?: number }) {
    return this.files.writeFile(path, data, opts);
  }

  appendFile(path: string, data: string | Buffer) {
    return this.files.appendFile(path, data);
  }

  mkdirp(path: string) {
    return this.files.mkdirp(path);
  }

  remove(path: string) {
    return this.files.remove(path);
  }

  writeOwn(root: string, rel: string, data: string | Buffer, mode: OwnWriteMode, fileMode?: number) {
    return this.files.writeOwn(root, rel, data, mode, fileMode);
  }

  removeOwn(root: string, rel: string) {
    return this.files.removeOwn(root, rel);
  }

  signal(pid: number, sig: SignalName, expect?: SignalExpect) {
    return this.files.signal(pid, sig, expect);
  }

  /**
   * The quick asks every command makes first (firstasks.ts), sent once per connection, unawaited,
   * right behind the first look-ahead (or with the first of them asked): the first exec of each
   * takes its answer, without a round trip of its own.
   */
  private askFirst(): void {
    if (this.firstAsked || this.conn.closing) return;
    this.firstAsked = true;
    for (const argv of FIRST_ASKS)
      this.firstAnswers.set(
        argv.join('\0'),
        this.watch.runScript(() => 'exec "$@"', [...argv], 10_000),
      );
  }

  /** A look (Host.look): its file looks answered once, `ahead` asked in one round trip (look.ts). */
  look(ahead?: LookAhead): Look {
    const memo = new LookMemo(() => this.files.gen);
    if (ahead) this.lookAhead(ahead, memo);
    return new SshLook(this, memo, true);
  }

  lookStat(path: string, memo: LookMemo) {
    return this.files.stat(path, memo);
  }

  lookList(dir: string, memo: LookMemo) {
    return this.files.list(dir, memo);
  }

  lookRead(path: string, start: number, end: number | undefined, memo: LookMemo) {
    return this.files.readRange(path, start, end, memo);
  }

  /** One script in the watch loop's shell for everything `ahead` names (look.ts); its answers seed `memo`. */
  lookAhead(ahead: LookAhead, memo: LookMemo): void {
    if (this.conn.closing || !this.box.gnuFind) return;
    const nonce = lookNonce();
    const { args, files, dirs, readDirs } = lookArgs(ahead, nonce);
    if (files.length + dirs.length === 0) return;
    // the look, the probes it will run (the host's resources) and the process table it will read
    // for the run's ranks go out together and run side by side in the loop's shell (`aside`: one
    // after another they were ~0.2 + 0.1 + 0.1 s of forks on a 2-core box), answered together
    const execs = ahead.execs ?? [];
    const procs = ahead.procs;
    const aside = execs.length + (procs ? 1 : 0) > 0;
    const answer = this.watch
      .runScript(() => LOOK_SCRIPT, args, 20_000, aside)
      .then((r) => (r && r.code === 0 ? parseLookAnswer(r.stdout, nonce, files, dirs) : null));
    memo.seed({ files, dirs, readDirs }, answer);
    for (const argv of execs) memo.seedExec(argv, this.quickAside(argv, 10_000));
    if (procs) {
      const req = candidateRequestAhead(this, procs.runDir);
      const table = this.watch.readProcTable(req, 15_000, true);
      // (not taken when the look found the file that says it goes on elsewhere)
      const elsewhere = (a: LookAnswer | null) => !!procs.unlessFile && a?.stats.get(procs.unlessFile)?.code === 0;
      memo.seedProcs(
        req,
        answer.then((a) => (elsewhere(a) ? null : table)),
      );
    }
    this.askFirst();
  }

  pollDir(dir: string, reads: ReadRequest[], subdirs: string[] = []) {
    return this.poller.pollDir(dir, reads, subdirs);
  }

  /** pollDir in a look: where its look-ahead read the dir, the listings and first reads come from it */
  async lookPollDir(dir: string, reads: ReadRequest[], subdirs: string[] | undefined, memo: LookMemo) {
    const pre = await memo.poll(dir, subdirs ?? [], (s) => subdirPath(dir, s));
    return this.poller.pollDir(dir, reads, subdirs ?? [], pre);
  }

  readProcTable(req: ProcTableRequest, timeoutMs: number) {
    return this.watch.readProcTable(req, timeoutMs);
  }

  viewAgeMs(): number | null {
    return this.watch.viewAgeMs();
  }

  /** pid of the remote watch loop (diagnostics and tests) */
  watchPid(): number | null {
    return this.watch.watchPid();
  }

  /** ms the watch loop has owed an answer (a hung remote file system shows here), else 0 */
  watchStallMs(): number {
    return this.watch.watchStallMs();
  }

  /** Drops the TCP connection without closing the host: for tests of the reconnect path. */
  dropConnectionForTest(): void {
    this.conn.dropForTest();
  }

  async close(): Promise<void> {
    sshTrace('closing');
    // remote commands of live streams do not die with the connection (no pty, no SIGHUP): end them
    const pids = this.cmds.streamPids();
    if (pids.length && this.conn.client) {
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
    this.conn.closing = true;
    this.watch.stopLocal();
    this.cmds.killStreams();
    await this.conn.close();
    sshTrace(`closed (still active here: ${process.getActiveResourcesInfo().join(', ') || 'nothing'})`);
  }
}
