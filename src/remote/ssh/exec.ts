// Remote commands over the connection: exec() and stream(), each on a channel of its own. Every
// argument reaching the remote shell is quoted (quote.ts); the command line starts with `echo $$`
// so the remote pid is known, and a timeout or stop() kills the remote command group with `kill`.
import { StreamLines } from '../streamlines.js';
import type { Client, ClientChannel } from 'ssh2';
import type { ExecOptions, ExecResult, StreamHandle, StreamOptions } from '../host.js';
import { envAssign, shJoin, shQuote } from '../quote.js';
import type { SshConnection } from './connection.js';
import type { ChannelLimiter } from './channels.js';
import { sshTraceSpan } from './trace.js';

const DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024;

/** exec()'s result with the output as bytes */
export interface RawResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  durationMs: number;
}

/** a raw answer (bytes) as an exec's (text): an exec session's, or a script's in the watch loop */
export function execResultOf(r: RawResult): ExecResult {
  return {
    code: r.code,
    signal: r.signal,
    stdout: r.stdout.toString('utf8'),
    stderr: r.stderr.toString('utf8'),
    timedOut: r.timedOut,
    durationMs: r.durationMs,
  };
}

/** The remote command line: `cd DIR || exit 126; echo $$; exec env K=V argv…`, all quoted. */
export function commandLine(argv: string[], cwd?: string, env?: Record<string, string>): string {
  if (argv.length === 0) throw new Error('exec: empty argv');
  let s = '';
  if (cwd) s += `cd ${shQuote(cwd)} || exit 126; `;
  s += 'echo $$; exec ';
  const envs = Object.entries(env ?? {});
  if (envs.length) s += `env ${envs.map(([k, v]) => envAssign(k, v)).join(' ')} `;
  return s + shJoin(argv);
}

export class RemoteCommands {
  private readonly liveStreams = new Set<{ kill(): void; pid(): number | null }>();

  constructor(
    private readonly conn: SshConnection,
    private readonly channels: ChannelLimiter,
    /** sends the kill through the watch loop when it runs; false when it does not */
    private readonly killViaWatch: (pid: number, sig: 'TERM' | 'KILL') => boolean,
  ) {}

  remoteKill(pid: number, sig: 'TERM' | 'KILL'): void {
    if (!Number.isInteger(pid) || pid <= 1) return;
    // the watch loop is a shell already running: no channel, no login-shell start-up
    if (this.killViaWatch(pid, sig)) return;
    void this.exec(
      ['sh', '-c', `kill -s ${sig} -- -$1 2>/dev/null || kill -s ${sig} $1 2>/dev/null; exit 0`, 'sh', String(pid)],
      { timeoutMs: 5000 },
    ).catch(() => {});
  }

  async execRaw(argv: string[], opts: ExecOptions): Promise<RawResult> {
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
      client = await this.conn.waitConnected(deadline);
      gen = await this.channels.acquire(deadline);
    } catch (e) {
      return fail((e as Error).message, true);
    }
    let ch: ClientChannel;
    const traced = sshTraceSpan(`exec session: ${argv.join(' ').slice(0, 60)}`);
    try {
      ch = await this.conn.openExec(client, commandLine(argv, opts.cwd, opts.env));
    } catch (e) {
      this.channels.release(gen);
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
        traced();
        clearTimeout(timer);
        this.channels.release(gen);
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
    return execResultOf(await this.execRaw(argv, opts));
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
      if (channelHeld !== null) this.channels.release(channelHeld);
      channelHeld = null;
      resolveDone({ code, signal });
    };
    this.liveStreams.add(entry);
    void (async () => {
      const deadline = Date.now() + 30000;
      try {
        const client = await this.conn.waitConnected(deadline);
        channelHeld = await this.channels.acquire(deadline);
        if (stopped) return finish(null, 'SIGTERM');
        ch = await this.conn.openExec(client, commandLine(argv, opts.cwd, opts.env));
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

  /** `sh -c SCRIPT sh ARGS…`, output as bytes (the file operations' scripts) */
  sh(
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

  /** remote pids of the live streams (their commands do not die with the connection: no pty, no SIGHUP) */
  streamPids(): number[] {
    return [...this.liveStreams].map((s) => s.pid()).filter((p): p is number => p !== null && p > 1);
  }

  /** Ends every live stream here (the connection is gone or closing). */
  killStreams(): void {
    for (const s of [...this.liveStreams]) s.kill();
  }
}
