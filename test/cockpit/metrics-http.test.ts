// The --metrics-listen responder (src/cockpit/metrics-http.ts) over real loopback sockets: requests
// on one kept-alive connection (one after another and pipelined in one write), HEAD, a request with
// a body answered and the connection closed (the body never read as a next request), Connection:
// close and HTTP/1.0, an oversized or malformed head, the absolute form and a query, an idle
// connection closed, and close() ending a scraper's kept-alive connection. A real Prometheus and
// curl-like clients (fetch) scrape it in test/cockpit/prometheus.test.ts and the bench.
import assert from 'node:assert/strict';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { MAX_HEAD, MiniHttpServer, parseHead } from '../../src/cockpit/metrics-http.js';

const seen: string[] = [];
const http = new MiniHttpServer(
  (method, path) => {
    seen.push(`${method} ${path}`);
    if (method !== 'GET' && method !== 'HEAD')
      return { status: 405, type: 'text/plain', body: Buffer.from('no\n'), headers: [['Allow', 'GET, HEAD']] };
    return path === '/metrics'
      ? { status: 200, type: 'text/plain; version=0.0.4', body: Buffer.from('m 1\n') }
      : { status: 404, type: 'text/plain', body: Buffer.from('not found\n') };
  },
  { idleMs: 300 },
);
let port = 0;
before(async () => {
  await new Promise<void>((r) => http.server.listen({ host: '127.0.0.1', port: 0 }, r));
  port = (http.server.address() as AddressInfo).port;
});
after(() => http.close());

/** a raw connection: what it received, and whether the server closed it */
function client(): { sock: Socket; got: () => string; ended: Promise<void> } {
  const sock = connect(port, '127.0.0.1');
  let got = '';
  sock.on('data', (b: Buffer) => (got += b.toString('latin1')));
  const ended = new Promise<void>((r) => sock.on('close', () => r()));
  return { sock, got: () => got, ended };
}

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const answers = (s: string) => s.split(/(?=HTTP\/1\.1 )/).filter(Boolean);

test('requests on one kept-alive connection, one after another and pipelined; HEAD has the length and no body', async () => {
  const c = client();
  c.sock.write('GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n');
  await until('the first answer', () => c.got().endsWith('m 1\n'));
  assert.match(c.got(), /^HTTP\/1\.1 200 OK\r\nContent-Type: text\/plain; version=0\.0\.4\r\nContent-Length: 4\r\n/);
  assert.match(c.got(), /\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\nConnection: keep-alive\r\n/);
  // pipelined: three requests in one write, bare LF line ends too, answered in order
  c.sock.write('HEAD /metrics HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\n\nGET http://h:1/metrics?x=1 HTTP/1.1\r\n\r\n');
  await until('three more answers', () => answers(c.got()).length === 4);
  const [, head, nope, abs] = answers(c.got());
  assert.match(head!, /^HTTP\/1\.1 200 OK\r\n[\s\S]*Content-Length: 4\r\n[\s\S]*\r\n\r\n$/, 'HEAD: no body');
  assert.match(nope!, /^HTTP\/1\.1 404 Not Found\r\n[\s\S]*\r\n\r\nnot found\n$/);
  assert.match(abs!, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nm 1\n$/);
  assert.deepEqual(seen.slice(-4), ['GET /metrics', 'HEAD /metrics', 'GET /nope', 'GET /metrics']);
  c.sock.destroy();
});

test('a body is never read as a request: answered, then the connection closes; so do Connection: close and HTTP/1.0', async () => {
  for (const req of [
    'POST /metrics HTTP/1.1\r\nContent-Length: 31\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n',
    'GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1f\r\nGET /metrics HTTP/1.1\r\n\r\n',
    'GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n',
    'GET /metrics HTTP/1.0\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n',
  ]) {
    const c = client();
    const before = seen.length;
    c.sock.write(req);
    await c.ended;
    assert.equal(answers(c.got()).length, 1, `one answer only: ${JSON.stringify(req)}`);
    assert.match(c.got(), /\r\nConnection: close\r\n/);
    assert.equal(seen.length, before + 1, 'the rest was never taken for a request');
  }
  assert.match(seen.at(-4)!, /^POST \/metrics$/);
});

test('a head too large or malformed: 431 or 400, and the connection closes', async () => {
  for (const [req, status] of [
    [`GET /metrics HTTP/1.1\r\nX: ${'a'.repeat(MAX_HEAD)}`, 431],
    ['HELLO\r\n\r\n', 400],
    ['GET /metrics HTTP/1.1\r\nBad Header : x\r\n\r\n', 400],
    ['GET /metrics HTTP/2.0\r\n\r\n', 505],
  ] as const) {
    const c = client();
    const before = seen.length;
    c.sock.write(req);
    await c.ended;
    assert.match(c.got(), new RegExp(`^HTTP/1\\.1 ${status} `), JSON.stringify(req.slice(0, 40)));
    assert.equal(seen.length, before, 'not routed');
  }
});

test('an idle connection is closed after the idle time; close() ends a kept-alive one', async () => {
  const idle = client();
  idle.sock.write('GET /metrics HTTP/1.1\r\n\r\n');
  const t0 = Date.now();
  await idle.ended;
  assert.ok(Date.now() - t0 >= 250, 'kept open while not idle for the idle time');
  // a second server, so the shared one stays up for the other tests
  const other = new MiniHttpServer(() => ({ status: 200, type: 'text/plain', body: Buffer.from('x') }));
  await new Promise<void>((r) => other.server.listen({ host: '127.0.0.1', port: 0 }, r));
  const sock = connect((other.server.address() as AddressInfo).port, '127.0.0.1');
  let got = '';
  sock.on('data', (b: Buffer) => (got += b.toString()));
  const ended = new Promise<void>((r) => sock.on('close', () => r()));
  sock.write('GET / HTTP/1.1\r\n\r\n');
  await until('the answer', () => got.endsWith('x'));
  await other.close();
  await ended;
});

test('parseHead: the path is the target up to ? or #, in origin or absolute form', () => {
  assert.deepEqual(parseHead('GET /metrics?a=b HTTP/1.1'), { method: 'GET', path: '/metrics', close: false });
  assert.deepEqual(parseHead('GET https://h:9/metrics#x HTTP/1.1\r\nconnection: Keep-Alive, Close'), {
    method: 'GET',
    path: '/metrics',
    close: true,
  });
  assert.deepEqual(parseHead('GET http://h:9 HTTP/1.1'), { method: 'GET', path: '/', close: false });
  assert.deepEqual(parseHead('GET / HTTP/1.1\r\nContent-Length: 0'), { method: 'GET', path: '/', close: false });
  assert.deepEqual(parseHead('get / HTTP/1.1'), { status: 400 });
});
