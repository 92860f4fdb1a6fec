// Drive the built `nsa-top` in a real pseudo-terminal and read the screen through a headless xterm,
// the way an operator sees it.
import { fileURLToPath } from 'node:url';
import pty from 'node-pty';
import xterm from '@xterm/headless';

export const BIN = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));

export class Cockpit {
  readonly term: InstanceType<typeof xterm.Terminal>;
  readonly proc: pty.IPty;
  raw = '';
  exitCode: number | null = null;
  readonly exited: Promise<number>;

  constructor(args: string[], o: { cwd: string; cols?: number; rows?: number; env?: Record<string, string> }) {
    const cols = o.cols ?? 120;
    const rows = o.rows ?? 40;
    this.term = new xterm.Terminal({ cols, rows, allowProposedApi: true });
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'CI' && k !== 'NO_COLOR') env[k] = v;
    Object.assign(env, o.env ?? {});
    this.proc = pty.spawn(process.execPath, [BIN, ...args], { cols, rows, cwd: o.cwd, env, name: 'xterm-256color' });
    this.proc.onData((d) => {
      this.raw += d;
      if (this.raw.length > 4_000_000) this.raw = this.raw.slice(-1_000_000);
      this.term.write(d);
    });
    this.exited = new Promise((resolve) =>
      this.proc.onExit((e) => {
        this.exitCode = e.exitCode;
        resolve(e.exitCode);
      }),
    );
  }

  screen(): string {
    const b = this.term.buffer.active;
    const out: string[] = [];
    for (let y = 0; y < this.term.rows; y++) out.push(b.getLine(b.viewportY + y)?.translateToString(true) ?? '');
    return out.join('\n');
  }

  row(i: number): string {
    return this.screen().split('\n')[i] ?? '';
  }

  /** Wait until the screen matches; returns the match. Fails with the screen in the message. */
  async waitFor(re: RegExp, timeoutMs = 30_000, what = re.source): Promise<RegExpMatchArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      // let xterm finish parsing what has arrived
      await new Promise<void>((r) => this.term.write('', r));
      const m = this.screen().match(re);
      if (m) return m;
      if (this.exitCode !== null)
        throw new Error(
          `nsa-top exited (${this.exitCode}) while waiting for ${what}\n${this.screen()}\n${this.raw.slice(-2000)}`,
        );
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}\n${this.screen()}`);
      await new Promise((r) => setTimeout(r, 150));
    }
  }

  async waitRaw(re: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const m = this.raw.match(re);
      if (m) return m;
      if (Date.now() > until || this.exitCode !== null)
        throw new Error(`waiting for ${re.source} in the output:\n${this.raw.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 150));
    }
  }

  /** One key (or a typed string) at a time, with a pause so Ink sees separate keypresses. */
  async send(keys: string, gapMs = 120): Promise<void> {
    this.proc.write(keys);
    await new Promise((r) => setTimeout(r, gapMs));
  }

  async type(text: string): Promise<void> {
    for (const ch of text) await this.send(ch, 40);
  }

  /** Hang up; if it has not exited after `graceMs`, SIGKILL the process this test started. */
  async close(graceMs = 25_000): Promise<void> {
    if (this.exitCode !== null) return;
    try {
      this.proc.kill('SIGHUP');
    } catch {
      /* gone */
    }
    const t = new Promise((r) => setTimeout(r, graceMs, 'late'));
    if ((await Promise.race([this.exited, t])) === 'late') {
      try {
        process.kill(this.proc.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
      await Promise.race([this.exited, new Promise((r) => setTimeout(r, 2000))]);
    }
  }
}

export const ESC = '\x1b';
export const ENTER = '\r';
