// The HTTP side of `--metrics-listen` (./metrics-server.ts): a small HTTP/1.1 responder over a TCP
// server, for the one thing a scraper does — GET (or HEAD) a path, with keep-alive. node's `http`
// did the same with a readable and a writable stream, their events and a parser's callbacks per
// request: ~0.6 ms of CPU per scrape on the shared 2-core box, as much as the watchdog's whole look at
// the run (bench/watchdog-metrics.bench.ts, a scrape a second); this answers in one write.
//
// What it takes is narrow on purpose, and anything else ends the connection after a short answer:
// a request line `METHOD TARGET HTTP/1.x` and header lines, ended by an empty line, at most
// MAX_HEAD bytes, arriving within HEAD_MS; no request body (a Content-Length other than 0 or a
// Transfer-Encoding is answered, then the connection is closed, so a body is never taken for the
// next request). HTTP/1.1 keeps the connection open unless the client says `Connection: close`;
// HTTP/1.0 closes it. An idle connection is closed after IDLE_MS (node's keepAliveTimeout was 5 s),
// at most MAX_CONNECTIONS are open at once, and a client that does not read its answers is dropped.
import { createServer, type Server, type Socket } from 'node:net';

/** one answer: status, headers (Content-Length, Date and Connection are added), body */
export interface HttpReply {
  status: number;
  type: string;
  body: Buffer;
  headers?: [string, string][];
}

/** what the server is asked: the method and the path (the target up to `?`, origin or absolute form) */
export type HttpRoute = (method: string, path: string) => HttpReply;

export const MAX_HEAD = 16 * 1024;
export const HEAD_MS = 10_000;
export const IDLE_MS = 5000;
export const MAX_CONNECTIONS = 64;
/** answers queued to a client that does not read them */
const MAX_UNREAD = 1024 * 1024;

const REASON: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  431: 'Request Header Fields Too Large',
  505: 'HTTP Version Not Supported',
};

/** A TCP server answering HTTP/1.x requests with `route`; listen() it as any net.Server. */
export class MiniHttpServer {
  readonly server: Server;
  private readonly open = new Set<Socket>();

  private readonly idleMs: number;
  private readonly headMs: number;

  constructor(
    private readonly route: HttpRoute,
    o: { idleMs?: number; headMs?: number } = {},
  ) {
    this.idleMs = o.idleMs ?? IDLE_MS;
    this.headMs = o.headMs ?? HEAD_MS;
    this.server = createServer({ noDelay: true }, (sock) => this.serve(sock));
    this.server.maxConnections = MAX_CONNECTIONS;
  }

  /** Stops listening and ends every open connection (a keep-alive scraper must not hold the exit). */
  close(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.open) s.destroy();
      this.open.clear();
    });
  }

  private serve(sock: Socket): void {
    this.open.add(sock);
    sock.on('close', () => this.open.delete(sock));
    sock.on('error', () => {});
    sock.setTimeout(this.idleMs, () => sock.destroy());
    let pending: Buffer | null = null;
    let since = 0;
    let closing = false;
    sock.on('data', (chunk: Buffer) => {
      if (closing) return;
      if (pending === null) since = Date.now();
      pending = pending ? Buffer.concat([pending, chunk]) : chunk;
      while (pending !== null && !closing) {
        const end = headEnd(pending);
        if (end === null) {
          if (pending.length > MAX_HEAD) closing = this.answer(sock, error(431), true);
          else if (Date.now() - since > this.headMs) sock.destroy();
          return;
        }
        const head = pending.toString('latin1', 0, end.at);
        pending = end.next < pending.length ? pending.subarray(end.next) : null;
        since = Date.now();
        const req = parseHead(head);
        if ('status' in req) closing = this.answer(sock, error(req.status), true);
        else closing = this.answer(sock, this.route(req.method, req.path), req.close, req.method === 'HEAD');
      }
    });
  }

  /** writes one answer; true when the connection is closed after it */
  private answer(sock: Socket, r: HttpReply, close: boolean, headOnly = false): boolean {
    let head = `HTTP/1.1 ${r.status} ${REASON[r.status] ?? 'Unknown'}\r\nContent-Type: ${r.type}\r\nContent-Length: ${r.body.length}\r\n`;
    for (const [k, v] of r.headers ?? []) head += `${k}: ${v}\r\n`;
    head += `Date: ${httpDate()}\r\n${close ? 'Connection: close' : `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.max(1, Math.floor(this.idleMs / 1000))}`}\r\n\r\n`;
    sock.cork();
    sock.write(head, 'latin1');
    if (!headOnly) sock.write(r.body);
    sock.uncork();
    if (close) sock.end();
    else if (sock.writableLength > MAX_UNREAD) sock.destroy();
    return close;
  }
}

function error(status: number): HttpReply {
  return { status, type: 'text/plain; charset=utf-8', body: Buffer.from(`${REASON[status] ?? 'error'}\n`) };
}

/** where the head ends (the empty line, CRLF or bare LF) and the next request starts, or null */
function headEnd(b: Buffer): { at: number; next: number } | null {
  for (let i = b.indexOf(10); i >= 0; i = b.indexOf(10, i + 1)) {
    if (b[i + 1] === 10) return { at: i, next: i + 2 };
    if (b[i + 1] === 13 && b[i + 2] === 10) return { at: i, next: i + 3 };
  }
  return null;
}

type Head = { method: string; path: string; close: boolean } | { status: number };

/** the request line and the headers that matter here; a status for what is not taken */
export function parseHead(head: string): Head {
  const lines = head.split(/\r?\n/);
  const m = /^([A-Z]+) (\S+) HTTP\/(\d)\.(\d)$/.exec(lines[0]!.replace(/\r$/, ''));
  if (!m) return { status: 400 };
  if (m[3] !== '1') return { status: 505 };
  let close = m[4] === '0';
  for (const line of lines.slice(1)) {
    const c = line.indexOf(':');
    if (c <= 0 || /\s/.test(line[c - 1]!)) return { status: 400 };
    const name = line.slice(0, c).toLowerCase();
    const value = line
      .slice(c + 1)
      .trim()
      .toLowerCase();
    if (name === 'connection' && value.split(/\s*,\s*/).includes('close')) close = true;
    // a body is never read: answered, then the connection ends (the body is not a next request)
    else if ((name === 'content-length' && value !== '0') || name === 'transfer-encoding') close = true;
  }
  let target = m[2]!;
  const abs = /^https?:\/\/[^/?#]*/i.exec(target);
  if (abs) target = target.slice(abs[0].length) || '/';
  const q = target.search(/[?#]/);
  return { method: m[1]!, path: q >= 0 ? target.slice(0, q) : target, close };
}

let dateAt = 0;
let dateText = '';
/** the Date header, made once a second */
function httpDate(): string {
  const now = Date.now();
  if (now - dateAt >= 1000 || now < dateAt) {
    dateAt = now - (now % 1000);
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}
