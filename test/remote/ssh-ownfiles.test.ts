// nsa-top's own writes over SSH (a real loopback sshd, test/helpers/sshd.ts): the guarded remote
// script appends, creates exclusively and replaces atomically, and refuses a link at the file or at
// .nsa-top — the link's target is never touched; a halt with a linked action log is taken over
// SSH as it is locally (and says NOT logged); one link loop in a run dir does not make the whole dir unreadable.
// A hard link at an own log (to training.csv, a heartbeat, env.json, a file outside the run) is
// set aside, never appended to: the victims' bytes and mtimes stay as they were.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import type { SshHost } from '../../src/remote/ssh/host.js';
import { currentActor, readActions, requestHalt } from '../../src/trainer/control/actions.js';
import { appendOwn, createOwn, OwnWriteError, writeOwnAtomic } from '../../src/trainer/control/ownfiles.js';
import { OWN_WRITE_SCRIPT } from '../../src/remote/ssh/files.js';
import { resolveRunDir } from '../../src/trainer/run/rundir.js';
import { RunModel } from '../../src/trainer/run/model.js';

const FIX = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'nsa-vibe', 'single');
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'nsa-top.js');
let sshd: TestSshd;
let host: SshHost;
const tmp = mkdtempSync(join(tmpdir(), 'nsa-ssh-own-'));
let n = 0;
function run(tag: string): string {
  const d = join(tmp, `${tag}-${n++}`);
  cpSync(FIX, d, { recursive: true });
  return d;
}
const bytes = (p: string) => readFileSync(p).toString('base64');

before(async () => {
  sshd = await startSshd();
  host = await sshd.connect({ watchIntervalMs: 250 });
});
after(async () => {
  await host?.close();
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

test('over SSH: append, exclusive create and atomic replace of nsa-top files; EEXIST keeps the first content', async () => {
  const d = run('ops');
  await appendOwn(host, d, '.nsa-top/actions.jsonl', '{"a":1}\n');
  await appendOwn(host, d, '.nsa-top/actions.jsonl', '{"a":2}\n');
  assert.equal(readFileSync(join(d, '.nsa-top', 'actions.jsonl'), 'utf8'), '{"a":1}\n{"a":2}\n');
  await createOwn(host, d, '.HALT', 'halt: one\n');
  const e = await createOwn(host, d, '.HALT', 'halt: two\n').catch((x: unknown) => x);
  assert.ok(e instanceof OwnWriteError && e.code === 'EEXIST', String(e));
  assert.equal(readFileSync(join(d, '.HALT'), 'utf8'), 'halt: one\n');
  await writeOwnAtomic(host, d, '.nsa-top/run.json', '{"v":1}\n');
  await writeOwnAtomic(host, d, '.nsa-top/run.json', '{"v":2}\n');
  assert.equal(readFileSync(join(d, '.nsa-top', 'run.json'), 'utf8'), '{"v":2}\n');
});

test('over SSH: a link at the file or at .nsa-top is refused, its target untouched', async () => {
  const d = run('links');
  mkdirSync(join(d, '.nsa-top'));
  symlinkSync('../heartbeat_rank0.jsonl', join(d, '.nsa-top', 'watchdog.jsonl'));
  symlinkSync('training.csv', join(d, '.anomaly_type'));
  const hb = bytes(join(d, 'heartbeat_rank0.jsonl'));
  const csv = bytes(join(d, 'training.csv'));
  await assert.rejects(
    appendOwn(host, d, '.nsa-top/watchdog.jsonl', '{"x":1}\n'),
    /watchdog\.jsonl on .*: is a symbolic link: refused/,
  );
  await assert.rejects(createOwn(host, d, '.anomaly_type', 'nan_loss\n'), /is a symbolic link|already exists/);
  assert.equal(bytes(join(d, 'heartbeat_rank0.jsonl')), hb);
  assert.equal(bytes(join(d, 'training.csv')), csv);
  // the atomic writer replaces a link by a file, never writes through it
  symlinkSync('../training.csv', join(d, '.nsa-top', 'launch.json'));
  await writeOwnAtomic(host, d, '.nsa-top/launch.json', '{}\n');
  assert.ok(lstatSync(join(d, '.nsa-top', 'launch.json')).isFile());
  assert.equal(bytes(join(d, 'training.csv')), csv);
  // .nsa-top itself a link
  const d2 = run('dirlink');
  const elsewhere = join(tmp, `elsewhere-${n++}`);
  mkdirSync(elsewhere);
  symlinkSync(elsewhere, join(d2, '.nsa-top'));
  await assert.rejects(appendOwn(host, d2, '.nsa-top/actions.jsonl', '{}\n'), /\.nsa-top.*is a symbolic link: refused/);
  assert.equal(existsSync(join(elsewhere, 'actions.jsonl')), false);
});

test('over SSH: a halt with a linked action log (or a linked .nsa-top) is taken, says NOT logged, training.csv untouched; without the link it is logged', async () => {
  const d = run('halt');
  mkdirSync(join(d, '.nsa-top'));
  symlinkSync('../training.csv', join(d, '.nsa-top', 'actions.jsonl'));
  const csv = bytes(join(d, 'training.csv'));
  const who = await currentActor(host);
  const rec = await requestHalt(host, d, 'now', who);
  assert.equal(rec.result, 'ok', rec.detail);
  assert.match(rec.detail, /; NOT logged: .*actions\.jsonl on .*: is a symbolic link: refused/);
  assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /, 'the halt fails open');
  assert.equal(bytes(join(d, 'training.csv')), csv);
  rmSync(join(d, '.HALT'));
  // .nsa-top itself a link to a directory outside the run: the halt is taken, nothing written there
  const elsewhere = join(tmp, `elsewhere-${n++}`);
  mkdirSync(elsewhere);
  const d2 = run('halt-dir');
  symlinkSync(elsewhere, join(d2, '.nsa-top'));
  const rec2 = await requestHalt(host, d2, 'now', who);
  assert.equal(rec2.result, 'ok', rec2.detail);
  assert.match(rec2.notLogged ?? '', /\.nsa-top: is a link|\.nsa-top.*symbolic link/);
  assert.ok(existsSync(join(d2, '.HALT')));
  assert.deepEqual(spawnSync('ls', ['-A', elsewhere], { encoding: 'utf8' }).stdout, '');
  rmSync(join(d, '.nsa-top', 'actions.jsonl'));
  const ok = await requestHalt(host, d, 'now', who);
  assert.equal(ok.result, 'ok', ok.detail);
  assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /);
  assert.equal((await readActions(host, d)).at(-1)?.result, 'ok');
});

const OLD = new Date('2024-01-02T03:04:05Z');
/** a file's bytes and mtime, set to a known past time first so any write shows */
function pin(path: string): () => void {
  utimesSync(path, OLD, OLD);
  const b = bytes(path);
  return () => {
    assert.equal(bytes(path), b, `${path}: its bytes changed`);
    assert.equal(statSync(path).mtimeMs, OLD.getTime(), `${path}: its mtime changed`);
  };
}
const asideOf = (dir: string, name: string) =>
  readdirSync(dir).filter((x) => new RegExp(`^${name.replace('.', '\\.')}\\.suspect-\\d{8}T\\d{6}Z(-\\d+)?$`).test(x));

test('over SSH: own logs hard-linked to training artifacts and to a file outside the run — a halt and the watchdog over --host change none of them', async () => {
  const outside = join(tmp, `outside-${n++}.txt`);
  writeFileSync(outside, 'not a run file\n');
  const d = run('hard');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  linkSync(join(d, 'training.csv'), join(nsa, 'actions.jsonl'));
  linkSync(join(d, 'heartbeat_rank0.jsonl'), join(nsa, 'watchdog.jsonl'));
  linkSync(join(d, 'env.json'), join(nsa, 'agent.log'));
  linkSync(outside, join(nsa, 'supervisor.log'));
  const checks = ['training.csv', 'heartbeat_rank0.jsonl', 'env.json', 'metrics.json'].map((f) => pin(join(d, f)));
  checks.push(pin(outside));
  // the halt (its record), then every own log appended to by the guarded remote script
  const rec = await requestHalt(host, d, 'now', await currentActor(host));
  assert.equal(rec.result, 'ok', rec.detail);
  assert.equal(rec.notLogged, undefined, rec.detail);
  assert.match(
    rec.detail,
    /actions\.jsonl has 2 hard links \(it is also another file\): set aside as actions\.jsonl\.suspect-/,
  );
  for (const f of ['agent.log', 'supervisor.log']) {
    const done = await appendOwn(host, d, `.nsa-top/${f}`, 'line\n');
    assert.match(done?.why ?? '', /has 2 hard links/, f);
    assert.equal(readFileSync(join(nsa, f), 'utf8'), 'line\n', f);
  }
  // the watchdog, the real CLI over --host (HOME a temp dir: the user's ~/.ssh is not touched)
  const home = join(tmp, `home-${n++}`);
  const wd = spawnSync(
    process.execPath,
    [
      BIN,
      'watchdog',
      d,
      '--once',
      '--no-gpu',
      '--host',
      `${userInfo().username}@127.0.0.1:${sshd.port}`,
      '-i',
      sshd.userKey,
      '--accept-new-host-key',
    ],
    { env: { ...process.env, HOME: home, SSH_AUTH_SOCK: '' }, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(wd.status, 0, wd.stderr);
  assert.match(wd.stderr, /watchdog\.jsonl has 2 hard links .*: set aside as watchdog\.jsonl\.suspect-/);
  for (const check of checks) check();
  for (const f of ['actions.jsonl', 'watchdog.jsonl', 'agent.log', 'supervisor.log']) {
    assert.equal(asideOf(nsa, f).length, 1, `${f}: ${readdirSync(nsa).join(' ')}`);
    assert.equal(statSync(join(nsa, f)).nlink, 1, f);
  }
  assert.equal(readFileSync(outside, 'utf8'), 'not a run file\n');
  assert.deepEqual(
    (await readActions(host, d)).map((r) => r.action),
    ['halt'],
    'the record is in the fresh log',
  );
});

test('the remote append script checks the file it opened, not only the name: a hard link that passes the name check (a lying ls) is refused, the victim untouched', (t) => {
  if (!existsSync('/proc/self/fd')) return void t.skip('needs /proc/PID/fd (Linux)');
  const d = run('race');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  linkSync(join(d, 'training.csv'), join(nsa, 'actions.jsonl'));
  const csv = pin(join(d, 'training.csv'));
  // the name check is passed as a link swapped in right after it would pass it
  const shim = join(tmp, `shim-${n++}`);
  mkdirSync(shim);
  // `ls -lnd -- NAME` says one link and ours; the open file (its /proc fd) is read by the real ls
  const ls = spawnSync('sh', ['-c', 'command -v ls'], { encoding: 'utf8' }).stdout.trim();
  writeFileSync(
    join(shim, 'ls'),
    `#!/bin/sh\ncase "$*" in *"/proc/"*) ;; "-lnd -- "*) echo "-rw-r--r-- 1 $(id -u) 0 1 Jan 1 00:00 x"; exit 0;; esac\nexec ${ls} "$@"\n`,
    { mode: 0o755 },
  );
  const r = spawnSync('sh', ['-c', OWN_WRITE_SCRIPT, 'sh', d, '.nsa-top', 'actions.jsonl', 'append'], {
    input: '{"action":"halt"}\n',
    encoding: 'utf8',
    env: { ...process.env, PATH: `${shim}:${process.env.PATH}` },
  });
  assert.equal(r.status, 46, r.stderr);
  assert.match(r.stderr, /actions\.jsonl: changed while it was checked \(links 2, uid \d+\): refused/);
  csv();
});

test('over SSH: one link loop in a run dir leaves the rest of it readable', async () => {
  const d = run('loop');
  symlinkSync('self', join(d, 'self'));
  symlinkSync('x2', join(d, 'x1'));
  symlinkSync('x1', join(d, 'x2'));
  writeFileSync(join(d, 'note.txt'), 'x\n');
  assert.equal(await resolveRunDir(host, d, '/'), d);
  const names = (await host.list(d)).map((e) => e.name);
  assert.ok(names.includes('training.csv') && names.includes('note.txt'), names.join(' '));
  const snap = await new RunModel(host, d).poll();
  assert.equal(snap.exists, true, snap.error ?? '');
  assert.equal(snap.step, 40);
});

test("over SSH: a write cut short by a full disk (a 64 KiB tmpfs) is nsa-top's own partial write", async (t) => {
  if (process.getuid?.() !== 0) return void t.skip('needs root to mount a tmpfs');
  const mnt = join(tmp, `full-${n++}`);
  mkdirSync(mnt);
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt], { encoding: 'utf8' });
  if (m.status !== 0) return void t.skip(`cannot mount a tmpfs here: ${m.stderr.trim()}`);
  try {
    const d = join(mnt, 'run');
    mkdirSync(join(d, '.nsa-top'), { recursive: true });
    writeFileSync(join(d, 'training.csv'), 'step,loss,lr,toks_per_s\n');
    spawnSync('sh', ['-c', `dd if=/dev/zero of=${join(mnt, 'fill')} bs=4k 2>/dev/null; true`]);
    const e = await createOwn(host, d, '.HALT', 'halt: manual_stop someone\n').catch((x: unknown) => x);
    assert.ok(e instanceof OwnWriteError, String(e));
    assert.equal(e.partial, true, e.message);
    assert.match(e.message, /created, but its content could not be written/);
  } finally {
    spawnSync('umount', [mnt]);
  }
});

test('over SSH: writes ride the watch loop byte-exact (no session each); data it cannot carry goes by exec', async () => {
  const d = run('loopw');
  const opened = () => host.stats().channels;
  await host.stat(d); // the loop is up
  const c0 = opened();
  // what a line protocol could lose: trailing blanks, backslashes, a `|` at a line's end, blank
  // lines, a leading `-`, no final line break, shell text, UTF-8, a line of 20 KiB
  const awkward = [
    `{"a":"x \\\\ y"}  \n`,
    'ends in a bar|\n\n\n-n -e\n$(touch pwned) `id` $HOME "\' ;\n',
    'épée 🚀\t\n',
    `${'z'.repeat(20_000)}\n`,
    'no final break',
  ];
  const log = join(d, '.nsa-top', 'actions.jsonl');
  for (const a of awkward) await appendOwn(host, d, '.nsa-top/actions.jsonl', a);
  assert.equal(readFileSync(log, 'utf8'), awkward.join(''));
  await host.writeFile(join(d, 'w1.txt'), '\n');
  await host.writeFile(join(d, 'w2.txt'), '');
  await host.appendFile(join(d, 'w2.txt'), 'a\\b|\n|');
  await writeOwnAtomic(host, d, '.nsa-top/run.json', '{"v":"\\n"}\n');
  await host.mkdirp(join(d, 'sub dir', '-x'));
  assert.equal(readFileSync(join(d, 'w1.txt'), 'utf8'), '\n');
  assert.equal(readFileSync(join(d, 'w2.txt'), 'utf8'), 'a\\b|\n|');
  assert.equal(readFileSync(join(d, '.nsa-top', 'run.json'), 'utf8'), '{"v":"\\n"}\n');
  assert.ok(statSync(join(d, 'sub dir', '-x')).isDirectory());
  assert.equal(existsSync(join(d, 'pwned')), false);
  assert.equal(opened() - c0, 0, 'no SSH channel for the writes the loop carries');
  // a CR, a NUL, or more than the loop takes: by exec, byte-exact all the same
  const big = Buffer.alloc(300 * 1024, 'q');
  await host.writeFile(join(d, 'cr.txt'), 'a\r\nb\0c');
  await host.writeFile(join(d, 'big.txt'), big);
  assert.equal(readFileSync(join(d, 'cr.txt'), 'utf8'), 'a\r\nb\0c');
  assert.ok(readFileSync(join(d, 'big.txt')).equals(big));
  assert.equal(opened() - c0, 2, 'one exec each for the CR/NUL write and the big one');
});

test('over SSH: the same look asked while it is in flight is one round trip; one asked after it answered, or after a write or a signal, is fresh', async () => {
  const d = run('memo');
  const f = join(d, 'note.txt');
  writeFileSync(f, 'one\n');
  const sent = () => host.stats().scripts;
  await host.stat(d); // the loop is up
  const s0 = sent();
  const sizes = await Promise.all([host.stat(f), host.stat(f), host.stat(f)]);
  assert.deepEqual(
    sizes.map((x) => x?.size),
    [4, 4, 4],
  );
  assert.equal(sent() - s0, 1, 'three stats asked together: one round trip');
  const [r1, r2] = await Promise.all([host.readFile(f), host.readFile(f)]);
  r1[0] = 0x58; // a caller's buffer is its own
  assert.equal(r2.toString(), 'one\n');
  // a change behind the host's back, then a look: seen at once (no answer outlives its round trip)
  chmodSync(f, 0o664);
  writeFileSync(f, 'fourfour\n');
  const st = await host.stat(f);
  assert.deepEqual([st?.size, (st?.mode ?? 0) & 0o777], [9, 0o664]);
  // a write through the host while a look is in flight: the look after the write is fresh
  const inFlight = host.stat(f);
  await host.writeFile(f, 'three\n');
  await inFlight;
  assert.equal((await host.stat(f))?.size, 6);
  // a signal (a stack dump makes files): the listing after it is fresh
  const listing = host.list(d);
  writeFileSync(join(d, 'stackdump_1.txt'), 'x\n');
  await host.signal(process.pid, 'SIG0');
  await listing;
  assert.ok((await host.list(d)).some((e) => e.name === 'stackdump_1.txt'));
});
