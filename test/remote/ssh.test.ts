// SshHost against a real OpenSSH sshd on loopback (test/helpers/sshd.ts): the same run dir read
// over SSH and locally gives the same RunSnapshot; a connection killed mid-follow loses and
// duplicates nothing; host keys are verified; hostile names stay names; signals go by `kill`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createHmac, randomBytes } from 'node:crypto';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { hostOf, sigCaught } from '../../src/remote/host.js';
import { HostKeyError, SshHost } from '../../src/remote/ssh/host.js';
import { openHost } from '../../src/remote/index.js';
import { HOST_FACTS_ARGV, UID_ARGV } from '../../src/remote/firstasks.js';
import { resolveTarget } from '../../src/remote/ssh/config.js';
import { listProcesses, readProc } from '../../src/remote/procs.js';
import { findRunProcesses } from '../../src/trainer/run/processes.js';
import { RunModel } from '../../src/trainer/run/model.js';

const FIXTURES = new URL('../fixtures/nsa-vibe/', import.meta.url).pathname;
let sshd: TestSshd;
let host: SshHost;
const local = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-ssh-test-'));
/** longer than one watch tick of the host under test */
const TICK = 500;

before(async () => {
  sshd = await startSshd();
  console.log(
    `# ssh server under test: ${sshd.kind === 'openssh' ? 'OpenSSH sshd' : `ssh2 Server fallback (${sshd.why})`} on 127.0.0.1:${sshd.port}`,
  );
  host = await sshd.connect({ watchIntervalMs: 250 });
});
after(async () => {
  await host?.close();
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

/** the host's methods bound to it, as a plain object a test can override members of */
function bindHost(h: SshHost): import('../../src/remote/host.js').Host {
  const o: Record<string, unknown> = { kind: h.kind, label: h.label };
  for (const k of [
    'connState',
    'stat',
    'list',
    'readRange',
    'readFile',
    'pollDir',
    'exec',
    'stream',
    'signal',
    'writeFile',
    'appendFile',
    'mkdirp',
    'remove',
    'now',
    'close',
    'readProcTable',
  ] as const) {
    o[k] = (h[k] as (...a: unknown[]) => unknown).bind(h);
  }
  return o as unknown as import('../../src/remote/host.js').Host;
}

function strip(s: unknown): unknown {
  // fields that legitimately differ between two readers of the same dir
  const o = JSON.parse(JSON.stringify(s)) as Record<string, unknown>;
  delete o.takenAt;
  delete o.hostNowMs;
  delete o.host;
  return o;
}

test('status over SSH equals local status for the same run dir (RunModel snapshots)', async () => {
  for (const fx of ['single', 'ddp2-dumps-halt']) {
    const dir = join(tmp, `parity-${fx}`);
    cpSync(join(FIXTURES, fx), dir, { recursive: true });
    const a = new RunModel(local, dir);
    const b = new RunModel(host, dir);
    const sa = await a.poll();
    const sb = await b.poll();
    assert.equal(sb.host, host.label);
    assert.deepEqual(strip(sb), strip(sa), `${fx}: first snapshot`);
    // the run moves on: a new CSV row, a new heartbeat, a new stack dump
    appendFileSync(join(dir, 'training.csv'), '999,1.2345,0.0001,1234\n');
    const hb = readFileSync(join(dir, 'heartbeat_rank0.jsonl'), 'utf8').trim().split('\n').pop()!;
    appendFileSync(join(dir, 'heartbeat_rank0.jsonl'), `${hb}\n`);
    writeFileSync(
      join(dir, 'stackdump_1795309999.txt'),
      'Signal 10 at 2026-11-22T00:00:00Z\n\nThread 0x1 (most recent call first):\n  File "x.py", line 1 in f\n',
    );
    const sa2 = await a.poll();
    // over SSH the new bytes arrive with the next watch tick: poll until they are in
    let sb2 = await b.poll();
    for (let i = 0; i < 40 && JSON.stringify(strip(sb2)) !== JSON.stringify(strip(sa2)); i++) {
      await new Promise((r) => setTimeout(r, 250));
      sb2 = await b.poll();
    }
    assert.deepEqual(strip(sb2), strip(sa2), `${fx}: after the run moved`);
    assert.notDeepEqual(strip(sa2), strip(sa), 'the change is visible');
  }
});

test('pollDir over SSH: listing and bytes equal LocalHost; followed files cost no channel per poll', async () => {
  const dir = join(tmp, 'poll');
  cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
  const reads = [
    { path: join(dir, 'training.csv'), offset: 0 },
    { path: join(dir, 'heartbeat_rank0.jsonl'), offset: 100 },
  ];
  const l = await local.pollDir(dir, reads);
  const r = await host.pollDir(dir, reads);
  assert.deepEqual(r.entries, l.entries);
  assert.deepEqual(
    r.reads.map((x) => [x.offset, x.data.toString('base64'), x.stat?.size, x.stat?.ino, x.reset]),
    l.reads.map((x) => [x.offset, x.data.toString('base64'), x.stat?.size, x.stat?.ino, x.reset]),
  );
  const next = r.reads.map((x) => ({ path: x.path, offset: x.offset + x.data.length }));
  await host.pollDir(dir, next); // second sequential read: becomes a follow
  const ch0 = host.stats().channels;
  for (let i = 0; i < 3; i++) {
    appendFileSync(join(dir, 'training.csv'), `${1000 + i},1,1,1\n`);
    await new Promise((res) => setTimeout(res, TICK));
    const p = await host.pollDir(dir, next);
    next[0]!.offset += p.reads[0]!.data.length;
    next[1]!.offset += p.reads[1]!.data.length;
  }
  assert.equal(host.stats().channels, ch0, 'no channel opened by polls of followed files');
  assert.equal(next[0]!.offset, readFileSync(join(dir, 'training.csv')).length);
});

test('a truncated and a replaced file are reported like LocalHost does', async () => {
  const dir = join(tmp, 'resets');
  mkdirSync(dir);
  const f = join(dir, 'heartbeat_rank0.jsonl');
  writeFileSync(f, 'a\nb\nc\n');
  let off = 0;
  const poll = async () => {
    const p = await host.pollDir(dir, [{ path: f, offset: off }]);
    const rr = p.reads[0]!;
    off = rr.offset + rr.data.length;
    return rr;
  };
  await poll();
  await poll();
  writeFileSync(f, 'x\n'); // truncated in place (same inode, smaller)
  await new Promise((r) => setTimeout(r, TICK));
  const t = await poll();
  assert.equal(t.reset, 'truncated');
  assert.equal(t.offset, 0);
  assert.equal(t.data.toString(), 'x\n');
  writeFileSync(`${f}.new`, 'a replacement file\n');
  const { renameSync } = await import('node:fs');
  renameSync(`${f}.new`, f); // replaced: a new inode at the same path, bigger than our offset
  await new Promise((r) => setTimeout(r, TICK));
  const rp = await poll();
  assert.equal(rp.reset, 'replaced');
  assert.equal(rp.offset, 0);
  assert.equal(rp.data.toString(), 'a replacement file\n');
});

test('connection killed mid-follow: reconnects and resumes every follow, no row lost or duplicated', async () => {
  // its own sshd: killing or freezing sessions must not touch the other tests' connection
  const own = await startSshd();
  const h = await own.connect({ watchIntervalMs: 200 });
  try {
    const dir = join(tmp, 'reconnect');
    mkdirSync(dir);
    const csv = join(dir, 'training.csv');
    const hb = join(dir, 'heartbeat_rank0.jsonl');
    writeFileSync(csv, '');
    writeFileSync(hb, '');
    // a writer appending rows while we read, until told to stop (after both kills and the link back:
    // a fixed count of rows could end before the second kill on a loaded machine, and the follow
    // would then resume over a file that no longer grows)
    const stop = join(dir, 'stop');
    const writer = spawn(
      process.execPath,
      [
        '-e',
        `const fs=require('fs');let i=0;const t=setInterval(()=>{fs.appendFileSync(${JSON.stringify(csv)},i+',1.5,0.001,100\\n');fs.appendFileSync(${JSON.stringify(hb)},JSON.stringify({step:i,msg:'beat'})+'\\n');if(++i>=6000||fs.existsSync(${JSON.stringify(stop)}))clearInterval(t)},10)`,
      ],
      { stdio: 'ignore' },
    );
    const got = { [csv]: [] as Buffer[], [hb]: [] as Buffer[] };
    const off = { [csv]: 0, [hb]: 0 };
    let sawReconnecting = false;
    let killed = 0;
    let secondKillAt = -1;
    const writerDone = new Promise((r) => writer.once('exit', r));
    let finished = false;
    void writerDone.then(() => (finished = true));
    const t0 = Date.now();
    for (let i = 0; ; i++) {
      const p = await h.pollDir(
        dir,
        [csv, hb].map((path) => ({ path, offset: off[path]! })),
      );
      for (const rr of p.reads) {
        if (rr.error || !rr.stat) continue;
        assert.equal(rr.reset, undefined, 'no spurious reset');
        assert.equal(rr.offset, off[rr.path], 'data starts where we asked');
        got[rr.path]!.push(rr.data);
        off[rr.path]! += rr.data.length;
      }
      const st = h.connState();
      if (st.state === 'reconnecting') sawReconnecting = true;
      // the second kill once the first one's reconnect is done; the writer stops once the second's is
      if ((i === 5 || (i >= 25 && killed === 1 && st.state === 'connected')) && killed < 2) {
        assert.ok(own.sessionPids().length > 0 || own.kind !== 'openssh', 'a session process to kill');
        own.killSessions();
        killed++;
        secondKillAt = killed === 2 ? i : -1;
      }
      if (secondKillAt >= 0 && i >= secondKillAt + 10 && st.state === 'connected' && !existsSync(stop))
        writeFileSync(stop, '');
      const done = finished && off[csv] === readFileSync(csv).length && off[hb] === readFileSync(hb).length;
      if (done && h.connState().state === 'connected') break;
      assert.ok(Date.now() - t0 < 40000, `caught up within 40 s (state ${JSON.stringify(h.connState())})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(killed, 2);
    assert.ok(sawReconnecting, 'connState reported reconnecting');
    assert.ok(h.stats().reconnects >= 1);
    const csvText = Buffer.concat(got[csv]!).toString();
    assert.equal(csvText, readFileSync(csv, 'utf8'), 'every CSV byte exactly once');
    const rows = csvText
      .trim()
      .split('\n')
      .map((l) => Number(l.split(',')[0]));
    assert.ok(rows.length >= 40, `${rows.length} rows`);
    assert.deepEqual(
      rows,
      Array.from({ length: rows.length }, (_, i) => i),
    );
    assert.equal(Buffer.concat(got[hb]!).toString(), readFileSync(hb, 'utf8'), 'every heartbeat byte exactly once');
  } finally {
    await h.close();
    await own.stop();
  }
});

test('a silent peer (session frozen, TCP still open) is caught by keepalive and the host reconnects', async () => {
  // its own sshd: killing or freezing sessions must not touch the other tests' connection
  const own = await startSshd();
  const h = await own.connect({ watchIntervalMs: 200, keepaliveIntervalMs: 300, keepaliveCountMax: 2 });
  const frozen: number[] = [];
  try {
    const dir = join(tmp, 'keepalive');
    mkdirSync(dir);
    const f = join(dir, 'training.csv');
    writeFileSync(f, '1,1,1,1\n');
    let off = 0;
    let text = '';
    const poll = async () => {
      const p = await h.pollDir(dir, [{ path: f, offset: off }]);
      const rr = p.reads[0]!;
      if (!rr.error && rr.stat) {
        text += rr.data.toString();
        off += rr.data.length;
      }
    };
    await poll();
    await poll();
    // freeze this connection's sshd session processes (children of our listener, nobody else's)
    if (own.kind !== 'openssh') return;
    for (const p of own.sessionPids()) {
      process.kill(p, 'SIGSTOP');
      frozen.push(p);
    }
    appendFileSync(f, '2,1,1,1\n');
    let sawReconnecting = false;
    const t0 = Date.now();
    while ((off < readFileSync(f).length || h.connState().state !== 'connected') && Date.now() - t0 < 20000) {
      if (h.connState().state === 'reconnecting') sawReconnecting = true;
      await poll();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(sawReconnecting, 'the frozen connection was given up');
    assert.equal(text, '1,1,1,1\n2,1,1,1\n');
  } finally {
    for (const p of frozen) {
      try {
        process.kill(p, 'SIGCONT');
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await h.close();
    await own.stop();
  }
});

test('a stuck remote side (watch loop stopped) is reported as stalled, then recovers with nothing lost', async () => {
  const h = await sshd.connect({ watchIntervalMs: 150, stallMs: 800 });
  try {
    const dir = join(tmp, 'stall');
    mkdirSync(dir);
    const f = join(dir, 'training.csv');
    writeFileSync(f, '1,1,1,1\n');
    let off = 0;
    let text = '';
    const poll = async () => {
      const p = await h.pollDir(dir, [{ path: f, offset: off }]);
      const rr = p.reads[0]!;
      if (!rr.error) {
        text += rr.data.toString();
        off += rr.data.length;
      }
      return rr;
    };
    await poll();
    await poll();
    // this connection's own loop (sshd runs it for us on this machine), nobody else's
    const pid = h.watchPid();
    assert.ok(pid !== null, 'the remote watch loop reported its pid');
    const loop = await readProc(local, pid);
    assert.ok(loop?.argv.includes('nsa-top-watch'), 'and that pid is the watch loop');
    const watchers = [loop!];
    for (const w of watchers) process.kill(w.pid, 'SIGSTOP');
    try {
      appendFileSync(f, '2,1,1,1\n');
      await new Promise((r) => setTimeout(r, 1500));
      const rr = await poll();
      assert.match(rr.error ?? '', /stalled for \d+s \(hung file system\?\)/);
    } finally {
      for (const w of watchers) process.kill(w.pid, 'SIGCONT');
    }
    const t0 = Date.now();
    while (off < readFileSync(f).length && Date.now() - t0 < 10000) {
      await poll();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(text, '1,1,1,1\n2,1,1,1\n');
  } finally {
    await h.close();
  }
});

test('without GNU find (plain POSIX ls): the same listing and bytes', async () => {
  const h = await sshd.connect({ posixOnly: true, watchIntervalMs: 250 });
  try {
    const dir = join(tmp, 'posix dir');
    cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
    const reads = [
      { path: join(dir, 'training.csv'), offset: 10 },
      { path: join(dir, 'env.json'), offset: 0 },
    ];
    const l = await local.pollDir(dir, reads, ['tb']);
    const r = await h.pollDir(dir, reads, ['tb']);
    const shape = (p: typeof l) => p.entries?.map((e) => [e.name, e.size, e.ino, e.isDir, e.isFile]);
    assert.deepEqual(shape(r), shape(l));
    for (const [i, e] of (r.entries ?? []).entries())
      assert.ok(Math.abs(e.mtimeMs - l.entries![i]!.mtimeMs) < 61_000, 'ls gives minutes');
    assert.deepEqual(
      r.reads.map((x) => x.data.toString()),
      l.reads.map((x) => x.data.toString()),
    );
    assert.deepEqual(r.subdirs, { tb: null });
    assert.equal((await h.stat(join(dir, 'env.json')))?.size, 313);
    assert.equal(await h.stat(join(dir, 'nope')), null);
  } finally {
    await h.close();
  }
});

test('sshd restarted under a follow: the host reconnects by itself and resumes', async () => {
  // its own sshd: killing or freezing sessions must not touch the other tests' connection
  const own = await startSshd();
  const h = await own.connect({ watchIntervalMs: 200 });
  try {
    const dir = join(tmp, 'restart');
    mkdirSync(dir);
    const f = join(dir, 'training.csv');
    writeFileSync(f, '1,1,1,1\n');
    let off = 0;
    const chunks: string[] = [];
    const poll = async () => {
      const p = await h.pollDir(dir, [{ path: f, offset: off }]);
      const rr = p.reads[0]!;
      if (!rr.error && rr.stat) {
        chunks.push(rr.data.toString());
        off += rr.data.length;
      }
    };
    await poll();
    await poll();
    await own.restart();
    appendFileSync(f, '2,1,1,1\n');
    const t0 = Date.now();
    while (off < readFileSync(f).length && Date.now() - t0 < 20000) {
      await poll();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(chunks.join(''), '1,1,1,1\n2,1,1,1\n');
    assert.equal(h.connState().state, 'connected');
  } finally {
    await h.close();
    await own.stop();
  }
});

test('unknown host key: refused with its SHA256 fingerprint; --accept-new-host-key records it; a changed key is always refused', async () => {
  const kh = join(tmp, 'kh_unknown');
  writeFileSync(kh, '');
  const target = resolveTarget(`${userInfo().username}@127.0.0.1:${sshd.port}`, {
    identity: sshd.userKey,
    configText: '',
    home: tmp,
  });
  const base = { target, knownHostsFiles: [kh], knownHostsWritePath: kh, agentSocket: null };
  const fp = (await import('node:child_process'))
    .spawnSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${sshd.dir}/host_ed25519.pub`], { encoding: 'utf8' })
    .stdout.split(' ')[1]!;
  await assert.rejects(SshHost.connect(base), (e: unknown) => {
    assert.ok(e instanceof HostKeyError);
    assert.equal(e.status, 'unknown');
    assert.equal(e.fingerprint, fp, 'the fingerprint ssh-keygen -l shows');
    assert.match(e.message, /--accept-new-host-key/);
    assert.ok(e.message.includes(fp));
    return true;
  });
  assert.equal(readFileSync(kh, 'utf8'), '', 'nothing recorded without the flag');
  const h = await SshHost.connect({ ...base, acceptNewHostKey: true });
  await h.close();
  assert.match(readFileSync(kh, 'utf8'), new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 `));
  const h2 = await SshHost.connect(base); // now known: no flag needed
  assert.equal((await h2.exec(['echo', 'ok'], { timeoutMs: 5000 })).stdout, 'ok\n');
  await h2.close();

  // a hashed entry (HashKnownHosts yes) is honoured too
  const hashed = join(tmp, 'kh_hashed');
  const salt = randomBytes(20);
  const name = `[127.0.0.1]:${sshd.port}`;
  const [, type, key] = sshd.knownHostsLine().split(' ');
  writeFileSync(
    hashed,
    `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')} ${type} ${key}\n`,
  );
  const h3 = await SshHost.connect({ ...base, knownHostsFiles: [hashed], knownHostsWritePath: hashed });
  await h3.close();

  // the server's key changes: refused, with or without the flag, and known_hosts is left alone
  const before = readFileSync(kh, 'utf8');
  const otherKey = join(tmp, 'otherkey');
  (await import('node:child_process')).spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', otherKey]);
  const other = readFileSync(`${otherKey}.pub`, 'utf8').split(' ');
  writeFileSync(kh, `${name} ${other[0]} ${other[1]}\n`);
  for (const accept of [false, true]) {
    await assert.rejects(SshHost.connect({ ...base, acceptNewHostKey: accept }), (e: unknown) => {
      assert.ok(e instanceof HostKeyError);
      assert.equal(e.status, 'changed');
      assert.match(e.message, /HOST KEY CHANGED/);
      return true;
    });
  }
  assert.equal(readFileSync(kh, 'utf8').split('\n').length, 2, 'changed key not appended');
  void before;
});

test('a hostile directory name stays a name: nothing runs, every operation works on it', async () => {
  const canary = join(tmp, 'canary');
  writeFileSync(canary, 'alive');
  const pwned = join(tmp, 'pwned');
  const names = ['a; rm -rf ~', `$(touch ${pwned}) \`touch ${pwned}\``, '-rf it\'s "q" & | > < x\\y*?[z] ', ' lead'];
  for (const [i, n] of names.entries()) {
    const dir = join(tmp, 'hostile', n);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'training.csv'), '1,2.0,0.1,10\n');
    const p = await host.pollDir(dir, [{ path: join(dir, 'training.csv'), offset: 0 }]);
    assert.equal(p.error, undefined, n);
    assert.deepEqual(
      p.entries?.map((e) => e.name),
      ['training.csv'],
      n,
    );
    assert.equal(p.reads[0]!.data.toString(), '1,2.0,0.1,10\n', n);
    assert.equal((await host.stat(dir))?.isDir, true, n);
    assert.deepEqual(
      (await host.list(dir)).map((e) => e.name),
      ['training.csv'],
    );
    const e = await host.exec(['printf', '%s', n], { timeoutMs: 5000, cwd: dir, env: { NSA_X: n } });
    assert.equal(e.stdout, n);
    if (i > 1) continue;
    await host.writeFile(join(dir, '.HALT'), 'halt: test\n', { exclusive: true });
    await assert.rejects(host.writeFile(join(dir, '.HALT'), 'again', { exclusive: true }), /exists/i);
    await host.appendFile(join(dir, '.HALT'), 'more\n');
    assert.equal((await host.readFile(join(dir, '.HALT'))).toString(), 'halt: test\nmore\n');
    await host.remove(join(dir, '.HALT'));
    assert.equal(existsSync(join(dir, '.HALT')), false);
  }
  assert.equal(existsSync(pwned), false, 'no command substitution ran');
  assert.equal(readFileSync(canary, 'utf8'), 'alive');
  await assert.rejects(host.remove(join(tmp, 'hostile')), /directory/, 'remove never takes a directory');
});

// the execs that are not about the timeout get a bound far above their time: on a loaded 2-core box
// (two suites side by side) the missing command's exec did not end within 5 s, and its code read null
const NOT_THE_TIMEOUT_MS = 30_000;

test('exec: argv, env, cwd, exit codes, and a timeout kills the remote command', async () => {
  const r = await host.exec(['sh', '-c', 'echo "$1|$NSA_A|$(pwd)"; echo e >&2; exit 7', 'sh', "a b'c"], {
    timeoutMs: NOT_THE_TIMEOUT_MS,
    env: { NSA_A: '$HOME;x' },
    cwd: tmp,
  });
  assert.equal(r.stdout, `a b'c|$HOME;x|${tmp}\n`);
  assert.equal(r.stderr, 'e\n');
  assert.equal(r.code, 7);
  const marker = `nsa-top-timeout-${process.pid}`;
  const t = await host.exec(['sh', '-c', 'sleep 60; :', marker], { timeoutMs: 700 });
  assert.equal(t.timedOut, true);
  let still = (await listProcesses(local)).filter((p) => p.argv.includes(marker));
  for (let i = 0; i < 100 && still.length; i++) {
    await new Promise((res) => setTimeout(res, 200));
    still = (await listProcesses(local)).filter((p) => p.argv.includes(marker));
  }
  assert.deepEqual(still, [], 'the remote command was killed');
  const missing = await host.exec(['definitely-not-a-command-xyz'], { timeoutMs: NOT_THE_TIMEOUT_MS });
  assert.equal(missing.code, 127);
  const input = await host.exec(['cat'], { timeoutMs: NOT_THE_TIMEOUT_MS, input: 'through stdin' });
  assert.equal(input.stdout, 'through stdin');
});

test('stream: lines as they come; stop() ends the remote command', async () => {
  const marker = `nsa-top-stream-${process.pid}`;
  const lines: string[] = [];
  const s = host.stream(['sh', '-c', 'i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.05; done', marker], {
    onLine: (l) => lines.push(l),
  });
  const t0 = Date.now();
  while (lines.length < 5 && Date.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(lines.slice(0, 3), ['tick 0', 'tick 1', 'tick 2']);
  s.stop();
  await s.done;
  let still = (await listProcesses(local)).filter((p) => p.argv.includes(marker));
  for (let i = 0; i < 100 && still.length; i++) {
    await new Promise((res) => setTimeout(res, 200));
    still = (await listProcesses(local)).filter((p) => p.argv.includes(marker));
  }
  assert.deepEqual(still, [], 'the remote loop was stopped');
});

test('signals over SSH go by kill, only to the process whose start time matches', async () => {
  const flag = join(tmp, 'usr1');
  const c = spawn(
    process.execPath,
    [
      '-e',
      `process.on('SIGUSR1',()=>require('fs').appendFileSync(${JSON.stringify(flag)},'x'));require('fs').writeFileSync(${JSON.stringify(`${flag}.ready`)},'');setInterval(()=>{},1e9)`,
    ],
    { stdio: 'ignore' },
  );
  try {
    const info = await (async () => {
      for (;;) {
        const p = await readProc(host, c.pid!);
        if (p && p.argv.length > 1) return p;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    // the handler installed, not a fixed sleep: a signal through the watch loop is quick. SigCgt is
    // not enough: node catches SIGUSR1 from its start (its inspector), before the script's listener
    // is there — a signal then opened the inspector and the test failed under load. The child says
    // when its listener is in place.
    for (const t0 = Date.now(); Date.now() - t0 < 30_000; await new Promise((r) => setTimeout(r, 50))) {
      const m = /^SigCgt:\s*(\S+)/m.exec(readFileSync(`/proc/${c.pid}/status`, 'utf8'));
      if (m && sigCaught(m[1]!, 10) && existsSync(`${flag}.ready`)) break;
    }
    await assert.rejects(
      host.signal(c.pid!, 'SIGUSR1', { startTime: String(Number(info.startTime) + 1) }),
      /another process/,
    );
    assert.equal(existsSync(flag), false, 'a mismatched start time signals nothing');
    await host.signal(c.pid!, 'SIGUSR1', { startTime: info.startTime });
    const t0 = Date.now();
    while (!existsSync(flag) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    assert.equal(readFileSync(flag, 'utf8'), 'x');
    await host.signal(c.pid!, 'SIG0');
  } finally {
    c.kill('SIGKILL');
  }
});

test('the process table over SSH matches the local one (one command per refresh)', async () => {
  const runDir = join(tmp, 'procrun');
  mkdirSync(runDir);
  const bin = join(tmp, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'nsa-top.js'), 'setInterval(()=>{},1e9)');
  const c = spawn(process.execPath, [join(bin, 'nsa-top.js'), 'train', '--out-dir', runDir, '--ranks', '2'], {
    stdio: 'ignore',
    env: { ...process.env, NSA_TOP_RUN_DIR: runDir },
  });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const l = await findRunProcesses(local, runDir, { heartbeatPids: [] });
    const ch0 = host.stats().channels;
    const r = await findRunProcesses(host, runDir, { heartbeatPids: [] });
    assert.equal(l.launcher?.pid, c.pid);
    assert.equal(r.launcher?.pid, c.pid);
    assert.equal(r.launcher?.startTime, l.launcher?.startTime);
    assert.deepEqual(r.launcher?.argv, l.launcher?.argv);
    // the process table rides the watch loop: no channel per refresh, even on this box where
    // other processes come and go
    const ch1 = host.stats().channels;
    for (let i = 0; i < 3; i++) await findRunProcesses(host, runDir, { heartbeatPids: [] });
    assert.equal(host.stats().channels - ch1, 0, 'no channel per refresh');
    assert.ok(ch1 - ch0 <= 1);
    // and without a watch loop (a fresh host that never polled) it is one exec per refresh
    const h2 = await sshd.connect();
    try {
      const c0 = h2.stats().channels;
      const viaExec = await findRunProcesses({ ...bindHost(h2), readProcTable: undefined }, runDir, {
        heartbeatPids: [],
      });
      assert.equal(viaExec.launcher?.pid, c.pid);
      assert.equal(h2.stats().channels - c0, 1);
    } finally {
      await h2.close();
    }
  } finally {
    c.kill('SIGKILL');
  }
});

test('ssh-agent: logs in with a key only the agent holds (SSH_AUTH_SOCK)', async () => {
  const sock = join(tmp, 'agent.sock');
  const agent = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
  try {
    const t0 = Date.now();
    while (!existsSync(sock) && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    const add = (await import('node:child_process')).spawnSync('ssh-add', [sshd.userKey], {
      env: { ...process.env, SSH_AUTH_SOCK: sock },
      encoding: 'utf8',
    });
    assert.equal(add.status, 0, add.stderr);
    const target = resolveTarget(`${userInfo().username}@127.0.0.1:${sshd.port}`, {
      configText: '',
      home: join(tmp, 'no-home'),
    });
    assert.deepEqual(target.identityFiles, [], 'no key file: only the agent can log in');
    const h = await SshHost.connect({ target, knownHostsFiles: [sshd.knownHosts], agentSocket: sock });
    assert.equal((await h.exec(['echo', 'agent'], { timeoutMs: 5000 })).stdout, 'agent\n');
    await h.close();
    await assert.rejects(
      SshHost.connect({ target, knownHostsFiles: [sshd.knownHosts], agentSocket: null }),
      /no way to authenticate/,
    );
  } finally {
    agent.kill('SIGTERM');
  }
});

test('openHost: ~/.ssh/config alias (HostName/User/Port/IdentityFile) and the --host form', async () => {
  const home = join(tmp, 'home');
  mkdirSync(join(home, '.ssh'), { recursive: true });
  const kh = join(home, '.ssh', 'known_hosts');
  writeFileSync(kh, `${sshd.knownHostsLine()}\n`);
  const cfg = `Host other\n  Port 1\nHost trainbox gpu-*\n  HostName 127.0.0.1\n  User ${userInfo().username}\n  Port ${sshd.port}\n  IdentityFile ${sshd.userKey}\n`;
  const ssh = { knownHostsFiles: [kh], knownHostsWritePath: kh, agentSocket: null };
  const h = await openHost({ host: 'trainbox', sshConfigText: cfg, home, ssh });
  assert.equal(h.kind, 'ssh');
  assert.equal(h.label, `${userInfo().username}@trainbox:${sshd.port}`);
  assert.equal((await h.exec(['echo', 'via alias'], { timeoutMs: 5000 })).stdout, 'via alias\n');
  await h.close();
  const h2 = await openHost({
    host: `${userInfo().username}@127.0.0.1:${sshd.port}`,
    identity: sshd.userKey,
    sshConfigText: '',
    home,
    ssh,
  });
  assert.equal((await h2.exec(['echo', 'direct'], { timeoutMs: 5000 })).stdout, 'direct\n');
  await h2.close();
  assert.equal((await openHost({})).kind, 'local');
  await assert.rejects(
    openHost({ host: 'x@127.0.0.1:1', identity: sshd.userKey, sshConfigText: '', home, ssh }),
    /cannot reach/,
  );
});

test('a first look that reads the run dir: its polls take the listing and first reads from the look-ahead (no frame, no read round), a round again waits for a frame, the next read follows on; a probe asked ahead is answered from it', async () => {
  const dir = join(tmp, 'lookpoll');
  mkdirSync(join(dir, 'tb'), { recursive: true });
  const csv = join(dir, 'training.csv');
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, 'a: 1\n');
  writeFileSync(csv, 'step,loss\n1,2.5\n');
  writeFileSync(join(dir, 'tb', 'ev'), 'xyz');
  // no timer ticks: every frame here is one a poll asked for
  const h = await sshd.connect({ watchIntervalMs: 600_000 });
  const names = (es: { name: string }[] | null | undefined) => (es ?? []).map((e) => e.name);
  try {
    for (const t0 = Date.now(); h.stats().frames < 1 && Date.now() - t0 < 20_000;)
      await new Promise((r) => setTimeout(r, 20));
    const f0 = h.stats().frames;
    const s0 = h.stats().scripts;
    const probe = ['sh', '-c', 'echo probe; cat /proc/loadavg'];
    const look = h.look({ dirs: [dir], readDirs: [dir, join(dir, 'tb')], contents: true, execs: [probe] });
    // the run model's first round: the listing (and tb/'s), then the files it shows
    const p1 = await look.pollDir(dir, [], ['tb']);
    assert.deepEqual(names(p1.entries), names(await local.list(dir)));
    assert.deepEqual(names(p1.subdirs['tb']), ['ev']);
    const p2 = await look.pollDir(dir, [
      { path: csv, offset: 0 },
      { path: cfg, offset: 0, maxBytes: 2 },
    ]);
    assert.equal(p2.reads[0]!.data.toString(), 'step,loss\n1,2.5\n');
    assert.equal(p2.reads[0]!.stat?.size, 16);
    assert.equal(p2.reads[0]!.stat?.ino, (await local.stat(csv))!.ino);
    assert.equal(p2.reads[1]!.data.toString(), 'a:');
    assert.equal(h.stats().frames, f0, 'no frame: the look-ahead answered both polls');
    assert.match((await look.exec(probe, { timeoutMs: 5000, quick: true })).stdout, /^probe\n/);
    assert.equal(h.stats().scripts - s0, 2, 'one look-ahead and the probe asked behind it: nothing else');
    // a round again (nothing new to read) lists afresh: a frame, never the look-ahead's sizes twice
    writeFileSync(join(dir, 'late.txt'), 'late\n');
    appendFileSync(csv, '2,1.5\n');
    const p3 = await look.pollDir(dir, [], ['tb']);
    assert.ok(names(p3.entries).includes('late.txt'), 'listed by a frame');
    assert.equal(p3.entries!.find((e) => e.name === 'training.csv')!.size, 22);
    // the next read from where the first ended follows the file: its new bytes, by the next frame
    const p4 = await look.pollDir(dir, [{ path: csv, offset: 16 }], ['tb']);
    assert.equal(p4.reads[0]!.data.toString(), '2,1.5\n');
    assert.equal(p4.reads[0]!.offset, 16);
    assert.ok(h.stats().frames > f0);
    look.end();
  } finally {
    await h.close();
  }
});

test('a look (Host.look): its look-ahead in one round trip, each file asked once, the same answers as the host; a write starts it afresh', async () => {
  const dir = join(tmp, 'look');
  mkdirSync(join(dir, '.nsa-top'), { recursive: true });
  writeFileSync(join(dir, 'run.info'), 'out_dir: .\n');
  writeFileSync(join(dir, '.nsa-top', 'launch.json'), '{"kind":"adopted"}\n');
  mkdirSync(join(dir, 'tb'));
  const [info, plan, missing, other] = ['run.info', '.nsa-top/launch.json', 'nope', 'other.txt'].map((n) =>
    join(dir, n),
  ) as [string, string, string, string];
  writeFileSync(other, 'other\n');
  const fresh = await sshd.connect({ watchIntervalMs: 250 });
  try {
    const s1 = fresh.stats().scripts;
    const look = fresh.look({ files: [dir, info, plan, missing, join(dir, 'tb')], dirs: [dir], contents: true });
    assert.equal(hostOf(look), fresh, 'per-host caches key by the host looked through');
    const seen = {
      dir: await look.stat(dir),
      info: await look.stat(info),
      infoBytes: await look.readFile(info, 256 * 1024),
      plan: await look.readRange(plan, 2, 8),
      missing: await look.stat(missing),
      listing: await look.list(dir),
    };
    await assert.rejects(look.readFile(missing), { code: 'ENOENT' });
    await assert.rejects(look.readFile(join(dir, 'tb')), (e: NodeJS.ErrnoException) => e.code === 'ENOTREG');
    // asked again within the look: its first answer
    await look.stat(info);
    await look.list(dir);
    // the quick asks every command makes first (firstasks.ts) came with the watch loop's hello: the
    // first exec of each takes that answer, no script of its own
    assert.equal(fresh.stats().scripts - s1, 1, 'one script for every stat, read and listing');
    const uid = await fresh.exec([...UID_ARGV], { timeoutMs: 5000, quick: true });
    assert.equal(uid.stdout.trim(), String(process.getuid!()));
    const facts = (await fresh.exec([...HOST_FACTS_ARGV], { timeoutMs: 5000, quick: true })).stdout;
    assert.match(facts, /^\d+\n/);
    assert.equal(fresh.stats().scripts - s1, 1, 'answered from the hello');
    // the same as the asks themselves answer
    assert.equal(facts, (await fresh.exec([...HOST_FACTS_ARGV], { timeoutMs: 5000, quick: true })).stdout);
    await fresh.exec([...UID_ARGV], { timeoutMs: 5000, quick: true });
    assert.equal(fresh.stats().scripts - s1, 3, 'asked again: once each');
    // not in the look-ahead: asked once, then answered from the look
    await look.stat(other);
    await look.readFile(other);
    await look.stat(other);
    await look.readFile(other);
    assert.equal(fresh.stats().scripts - s1, 5, 'a stat and a read of a file the look-ahead did not name, each once');
    // the same answers the host gives on its own
    assert.deepEqual(seen.dir, await fresh.stat(dir));
    assert.deepEqual(seen.info, await fresh.stat(info));
    assert.equal(seen.missing, null);
    assert.equal(seen.infoBytes.toString(), 'out_dir: .\n');
    assert.equal(seen.plan.toString(), '{"kind":"adopted"}\n'.slice(2, 8));
    assert.deepEqual(seen.listing, await fresh.list(dir));
    assert.deepEqual(seen.listing, await local.list(dir));

    // a change made by another hand during the look is one look's news: seen once the look is over…
    writeFileSync(info, 'out_dir: /elsewhere\n');
    assert.equal((await look.readFile(info)).toString(), 'out_dir: .\n');
    // …or at once after a write through the host (nothing answered before a change answers after it)
    await fresh.appendFile(join(dir, 'own.log'), 'x\n');
    assert.equal((await look.readFile(info)).toString(), 'out_dir: /elsewhere\n');
    // a look's look shares its answers and asks only what is new; once ended, a look is the host itself
    const s2 = fresh.stats().scripts;
    await look.stat(info);
    assert.equal(fresh.stats().scripts, s2 + 1, 'not asked since the write: asked afresh, once');
    const child = look.look!({ files: [info] });
    assert.deepEqual(await child.stat(info), await look.stat(info));
    assert.equal(fresh.stats().scripts, s2 + 1, 'a look-ahead of what the look asked already sends nothing');
    look.end();
    await look.stat(info);
    await look.stat(info);
    assert.equal(fresh.stats().scripts, s2 + 3, 'an ended look asks every time');
  } finally {
    await fresh.close();
  }
});
