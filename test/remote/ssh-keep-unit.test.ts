// The kept connection's pure parts (src/remote/ssh/keep.ts, keeper.ts): NSA_TOP_SSH_KEEP's values,
// the socket directory's checks, the frames, and what a warm session is told to become. No process.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createServer, connect, type Socket } from 'node:net';
import {
  dirProblem,
  frame,
  FrameReader,
  keepSeconds,
  keepSocketFor,
  KeptClient,
  type KeptChannel,
} from '../../src/remote/ssh/keep.js';
import { ReadyLine, warmInput } from '../../src/remote/ssh/keeper.js';
import { commandLine } from '../../src/remote/ssh/exec.js';
import { WATCH_SCRIPT } from '../../src/remote/ssh/watch-script.js';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-keep-unit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

test('NSA_TOP_SSH_KEEP: unset 60 s, 0 off, a number of seconds; anything else is bad input (exit 2)', () => {
  assert.equal(keepSeconds({}), 60);
  assert.equal(keepSeconds({ NSA_TOP_SSH_KEEP: '0' }), 0);
  assert.equal(keepSeconds({ NSA_TOP_SSH_KEEP: '2.5' }), 2.5);
  for (const v of ['-1', 'yes', '1e3', '100000'])
    assert.throws(
      () => keepSeconds({ NSA_TOP_SSH_KEEP: v }),
      (e: Error & { exitCode?: number }) => e.exitCode === 2 && e.message.includes(`NSA_TOP_SSH_KEEP=${v}`),
    );
});

test('the socket directory must be a directory of ours closed to others, not a link', () => {
  const ok = join(tmp, 'ok');
  mkdirSync(ok, { mode: 0o700 });
  chmodSync(ok, 0o700);
  assert.equal(dirProblem(ok), null);
  chmodSync(ok, 0o750);
  assert.match(dirProblem(ok)!, /open to others \(mode 750\)/);
  chmodSync(ok, 0o700);
  const link = join(tmp, 'link');
  symlinkSync(ok, link);
  assert.match(dirProblem(link)!, /not a directory/);
  const file = join(tmp, 'file');
  writeFileSync(file, '');
  assert.match(dirProblem(file)!, /not a directory/);
  assert.match(dirProblem(join(tmp, 'none'))!, /ENOENT/);
});

test('the socket is named by a hash of the target (no user, host or key path in it)', () => {
  const t = {
    user: 'alice',
    hostName: 'gpu-box.example',
    port: 22,
    identityFiles: ['/home/alice/.ssh/id_secret_name'],
    identitiesOnly: false,
    label: 'alice@gpu-box.example',
  };
  const a = keepSocketFor(t as never, undefined, false).path;
  assert.match(a, /\/[0-9a-f]{24}\.sock$/);
  assert.doesNotMatch(a, /alice|gpu-box|secret/);
  assert.notEqual(keepSocketFor({ ...t, port: 2222 } as never, undefined, false).path, a);
  assert.notEqual(keepSocketFor({ ...t, identityFiles: ['/k2'] } as never, undefined, false).path, a);
  assert.equal(keepSocketFor({ ...t } as never, undefined, false).path, a);
});

test('frames survive any cut of the byte stream', () => {
  const bytes = Buffer.concat([frame('q', '{"op":"hello"}'), frame('o', Buffer.alloc(70_000, 7)), frame('n')]);
  for (const step of [1, 3, 4096, bytes.length]) {
    const got: [string, number][] = [];
    const r = new FrameReader((k, p) => got.push([k, p.length]));
    for (let i = 0; i < bytes.length; i += step) r.push(bytes.subarray(i, i + step));
    assert.deepEqual(got, [
      ['q', 14],
      ['o', 70_000],
      ['n', 0],
    ]);
  }
});

test('a warm session becomes the watch loop from one short line, any other command line whole up to its mark', () => {
  const nonce = 'ab'.repeat(16);
  const mark = 'nsa-top-warm-0123';
  assert.equal(
    warmInput(commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch', 'auto', nonce]), mark),
    `W auto ${nonce}\n`,
  );
  assert.equal(
    warmInput(commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch', 'posix', nonce]), mark),
    `W posix ${nonce}\n`,
  );
  // the watch script with other words is not the watch loop: sent whole
  const odd = commandLine(['sh', '-c', WATCH_SCRIPT, 'nsa-top-watch', 'auto', 'x; rm -rf /']);
  assert.equal(warmInput(odd, mark), `L\n${odd}\n${mark}\n`);
  const cmd = commandLine(['sh', '-c', 'echo "$1"', 'sh', 'a\nb']);
  assert.equal(warmInput(cmd, mark), `L\n${cmd}\n${mark}\n`);
  // a command line holding the mark as a line cannot be told apart from it: a fresh channel instead
  assert.equal(warmInput(commandLine(['printf', `x\n${mark}\ny`]), mark), null);
});

test("a warm session is ready at its ready line, which its claimer never sees (a chatty ~/.bashrc's output it does)", () => {
  const mark = 'nsa-top-warm-0123';
  const r = new ReadyLine(mark);
  const push = (t: string) => r.push(Buffer.from(t)).toString();
  // the login shell still running: held, not ready
  assert.equal(push('conda: base\n'), '');
  assert.equal(push(`nsa-top-warm-9999 ready\n${mark} re`), '');
  assert.equal(r.done, false);
  // the line's end arrives with the claimer's first output (claimed before its line): the line goes
  assert.equal(push('ady\n12345\nout'), 'conda: base\nnsa-top-warm-9999 ready\n12345\nout');
  assert.equal(r.done, true);
  // after it, everything as it comes, the mark's line too
  assert.equal(push(`${mark} ready\n`), `${mark} ready\n`);
});

test("a channel's bytes that come with its open wait for the caller's listeners (attached after its await)", async () => {
  // a stand-in keeper in this process: it answers an exec with the open, the output, the exit and
  // the close in one write, as a busy keeper's frames can arrive together
  const path = join(tmp, 'k.sock');
  const server = createServer((sock: Socket) => {
    const r = new FrameReader((kind, payload) => {
      const req = JSON.parse(payload.toString()) as { op: string };
      if (kind === 'q' && req.op === 'exec')
        sock.end(
          Buffer.concat([
            frame('k', '{"warm":true}'),
            frame('o', '4242\nhello'),
            frame('e', 'warn'),
            frame('x', '{"code":3,"signal":null}'),
          ]),
        );
    });
    sock.on('data', (b: Buffer) => r.push(b));
  });
  await new Promise<void>((r) => server.listen(path, r));
  const control = connect(path);
  await new Promise((r) => control.once('connect', r));
  const kc = new KeptClient(path, control, 1);
  try {
    for (let i = 0; i < 3; i++) {
      const ch = await new Promise<KeptChannel>((resolve, reject) =>
        kc.exec('true', (e, c) => (e ? reject(e) : resolve(c))),
      );
      await Promise.resolve(); // the caller's own await hops
      let out = '';
      let err = '';
      let code: number | null = null;
      ch.on('data', (b: Buffer) => (out += b.toString()));
      ch.stderr.on('data', (b: Buffer) => (err += b.toString()));
      ch.on('exit', (c: number | null) => (code = c));
      await new Promise((r) => ch.once('close', r));
      assert.deepEqual({ out, err, code }, { out: '4242\nhello', err: 'warn', code: 3 });
    }
  } finally {
    kc.end();
    await new Promise((r) => server.close(r));
  }
});
