// Where the watchdog's metrics go (the rendering is ./metrics.ts, pure): `/metrics` over node's own
// http server, bound to exactly the address it is given (--metrics-listen HOST:PORT), and a
// node_exporter textfile (--metrics-file PATH) replaced whole each round through ownfiles.ts. Both
// carry the same text, rendered once per watchdog round from the round's observation and judgement.
// A scrape that comes when the watchdog's next round is nearly due is answered after that round,
// which runs at once (Watchdog.freshRound): one wake of the process serves both, and the scrape gets
// the newest judgement. A scraper that comes about once an interval may also hold a round back, once,
// to fall in step with it (never past a stall's deadline); it can bring a round at most a third of an
// interval earlier and never adds one. Failures to write the file are said on stderr (once
// per distinct reason) and never end the watch.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Evaluation, Thresholds } from '../checks/index.js';
import { sanitize } from '../sanitize.js';
import { TEXTFILE_MARK_LINE, writeTextfileAtomic } from '../trainer/control/ownfiles.js';
import { DumpCounter, renderMetrics, renderSelfOnly, type ExporterSelf, type MetricsObservation } from './metrics.js';

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * HOST:PORT (an IPv6 address in brackets: [::1]:9464), or the one-line reason it is not one. The
 * host is required: the server binds only what it is told (0.0.0.0 must be said to be meant).
 */
export function parseListen(s: string): { host: string; port: number } | string {
  const m = /^\[([0-9A-Fa-f:.%\w]+)\]:(\d+)$/.exec(s) ?? /^([^:[\]\s]+):(\d+)$/.exec(s);
  if (!m) return `--metrics-listen needs HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464), not ${JSON.stringify(s)}`;
  const port = Number(m[2]);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    return `--metrics-listen: port ${m[2]} is not between 0 and 65535`;
  return { host: m[1]!, port };
}

/** The address a bound server listens on, as HOST:PORT. */
export function addressOf(server: Server): string {
  const a = server.address() as AddressInfo;
  return a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

export interface ExporterOptions {
  version: string;
  hostname: string;
  thresholds: Thresholds;
  /** the run's name for the `run` label until the first round names it */
  runLabel: string;
  listen?: { host: string; port: number } | null;
  file?: string | null;
  /** the textfile's rewrite interval while the judgement holds (default TEXTFILE_EVERY_MS) */
  fileEveryMs?: number;
  readOnly?: boolean;
}

/** One round the watchdog looked at: what metrics.ts renders. */
export type MetricsRound = MetricsObservation & { ev: Evaluation };

/** the textfile's rewrite interval while the judgement holds (its step, ages and counters move) */
export const TEXTFILE_EVERY_MS = 5000;

export class MetricsExporter {
  private server: Server | null = null;
  private text: string;
  /** the text's bytes, once a scrape asked (null: not encoded since the last rendering) */
  private body: Buffer | null = null;
  private readonly self: ExporterSelf;
  private writing: Promise<void> | null = null;
  private pending = false;
  private ours: number | null = null;
  private last: MetricsRound | null = null;
  private failedWhy: string | null = null;
  private dirty = false;
  private lastWriteError = '';
  /** what the textfile last written says (state, alerts, blindness), and when it was written */
  private fileKey = '';
  private fileAtMs = -Infinity;
  /** a round the textfile does not hold yet */
  private unwritten = false;
  private readonly dumps = new DumpCounter();
  /** the textfile writes that failed (tests, the bench) */
  writeFailures = 0;
  /** what a scrape waits for before it is answered (Watchdog.freshRound); null: answered at once */
  private freshen: (() => Promise<void> | null) | null = null;

  constructor(private readonly o: ExporterOptions) {
    this.self = {
      version: o.version,
      hostname: o.hostname,
      observations: 0,
      observationErrors: 0,
      lastGoodMs: null,
      roundMs: null,
    };
    this.text = renderSelfOnly(this.self, o.runLabel);
  }

  /**
   * Binds the server (when asked). Rejects with one line on a port in use, an address this machine
   * does not have, or a privileged port.
   */
  async start(): Promise<void> {
    const l = this.o.listen;
    if (!l) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }).end('GET /metrics\n');
        return;
      }
      if (path === '/metrics') {
        const answer = () => {
          const body = this.bytes();
          // the Date header said here: node's own caches its text and sets a timer to drop it at
          // the next whole second, a second wake of the process for every scrape
          res.sendDate = false;
          res.writeHead(200, {
            'Content-Type': CONTENT_TYPE,
            'Content-Length': body.length,
            Date: new Date().toUTCString(),
          });
          res.end(req.method === 'HEAD' ? undefined : body);
        };
        const waited = this.freshen?.();
        if (!waited) answer();
        else void waited.then(answer, answer);
        return;
      }
      res
        .writeHead(path === '/' ? 200 : 404, { 'Content-Type': 'text/plain; charset=utf-8' })
        .end(path === '/' ? 'nsa-top watchdog: metrics at /metrics\n' : 'not found: GET /metrics\n');
    });
    // a scraper that holds its connection open must not keep the watchdog from exiting
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        const at = `${l.host.includes(':') ? `[${l.host}]` : l.host}:${l.port}`;
        const why =
          e.code === 'EADDRINUSE'
            ? 'the port is in use'
            : e.code === 'EADDRNOTAVAIL'
              ? 'this machine has no such address'
              : e.code === 'EACCES'
                ? 'not allowed (a privileged port?)'
                : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN'
                  ? 'no such host'
                  : e.message;
        reject(new Error(`--metrics-listen ${at}: cannot listen: ${why}`));
      };
      server.once('error', onError);
      server.listen({ host: l.host, port: l.port, exclusive: true }, () => {
        server.off('error', onError);
        resolve();
      });
    });
    this.server = server;
  }

  /**
   * What a scrape waits for before it is answered: a promise of the round it brought forward (or
   * the one under way), or null when the last round is recent and the next not yet due.
   */
  scrapesWait(freshen: () => Promise<void> | null): void {
    this.freshen = freshen;
  }

  /** what the watchdog's start line says of it */
  describe(): { listen: string | null; file: string | null } {
    return { listen: this.server ? addressOf(this.server) : null, file: this.o.file ?? null };
  }

  /** the exposition served now: the newest round, rendered once (on the first scrape after it when
   * no textfile is written, so a 15 s scrape interval does not pay for a render every round) */
  current(): string {
    if (this.dirty) this.render();
    return this.text;
  }

  /** current() as the bytes a scrape is sent: encoded once per rendering, whatever the scrapes */
  private bytes(): Buffer {
    const text = this.current();
    return (this.body ??= Buffer.from(text, 'utf8'));
  }

  private render(): void {
    this.dirty = false;
    this.body = null;
    const l = this.last;
    if (!l) this.text = renderSelfOnly(this.self, this.o.runLabel);
    else if (this.failedWhy !== null)
      this.text = renderMetrics({ ...l, fresh: false, errors: [this.failedWhy] }, l.ev, this.o.thresholds, this.self);
    else this.text = renderMetrics(l, l.ev, this.o.thresholds, this.self);
  }

  /** A round observed and judged: kept, and the textfile replaced (one write in flight at most). */
  round(look: MetricsRound, roundMs: number): void {
    this.self.observations++;
    this.self.roundMs = roundMs;
    if (look.fresh) this.self.lastGoodMs = Date.now();
    this.self.dumpsTaken = this.dumps.update(look.run);
    this.last = look;
    this.failedWhy = null;
    this.dirty = true;
    this.flush();
  }

  /** A round that failed (nothing judged): counted, and the last judgement is served as blind
   * (nsatop_watchdog_observation_ok 0); its observation's age says how old it is. */
  failed(message: string): void {
    this.self.observations++;
    this.self.observationErrors++;
    this.failedWhy = message;
    this.dirty = true;
    this.flush();
  }

  /** the judgement an alert rule reads off the textfile: a change is written at once */
  private judged(): string {
    const l = this.last;
    const alerts = l ? l.ev.alerts.map((a) => `${a.id}:${a.severity}`).join(',') : '';
    return `${this.failedWhy ?? ''}|${l?.fresh}|${l?.ev.runState}|${alerts}`;
  }

  private flush(): void {
    if (!this.o.file) return;
    this.unwritten = true;
    // node_exporter reads the textfile when Prometheus scrapes it (every 15 s or more): a new
    // judgement (state, alerts, blindness) is written in the round it appears, the rest — the
    // step, ages, counters — at most every TEXTFILE_EVERY_MS. Rewriting it every round was
    // ~0.8 ms of CPU a round (an atomic replace: open, write, rename), ~0.08 % of a core at 1 Hz.
    const key = this.judged();
    if (key === this.fileKey && Date.now() - this.fileAtMs < (this.o.fileEveryMs ?? TEXTFILE_EVERY_MS)) return;
    this.fileKey = key;
    this.fileAtMs = Date.now();
    this.write();
  }

  /** one write in flight at most; one asked for meanwhile follows it, with the newest round */
  private write(): void {
    if (this.writing) {
      this.pending = true;
      return;
    }
    this.writing = this.writeFile().finally(() => {
      this.writing = null;
      if (this.pending) {
        this.pending = false;
        this.write();
      }
    });
  }

  private async writeFile(): Promise<void> {
    const path = this.o.file!;
    this.unwritten = false;
    try {
      // the round's bytes, encoded once for the file and every scrape of the round
      this.ours = await writeTextfileAtomic(path, Buffer.concat([TEXTFILE_MARK_LINE, this.bytes()]), {
        readOnly: this.o.readOnly,
        ours: this.ours,
      });
      this.lastWriteError = '';
    } catch (e) {
      this.writeFailures++;
      const msg = (e as Error).message;
      if (msg !== this.lastWriteError)
        process.stderr.write(`nsa-top watchdog: --metrics-file not written: ${sanitize(msg)}\n`);
      this.lastWriteError = msg;
    }
  }

  /** the textfile writes asked for so far are done */
  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Stops serving; a textfile write in flight finishes (the file keeps the last round). */
  async close(): Promise<void> {
    await this.idle();
    // the file keeps the last round, whatever the cadence skipped
    if (this.o.file && this.unwritten) await this.writeFile();
    const s = this.server;
    this.server = null;
    if (!s) return;
    await new Promise<void>((r) => {
      s.close(() => r());
      s.closeAllConnections();
    });
  }
}
