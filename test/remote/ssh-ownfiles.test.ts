// nsa-top's own writes over SSH (a real loopback sshd, test/helpers/sshd.ts): the guarded remote
// script appends, creates exclusively and replaces atomically, and refuses a link at the file or at
// .nsa-top — the link's target is never touched; a halt with a linked action log is refused over
// SSH as it is locally; one link loop in a run dir does not make the whole dir unreadable.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';
import type { SshHost } from '../../src/remote/ssh/host.js';
import { currentActor, readActions, requestHalt } from '../../src/trainer/control/actions.js';
import { appendOwn, createOwn, OwnWriteError, writeOwnAtomic } from '../../src/trainer/control/ownfiles.js';
import { resolveRunDir } from '../../src/trainer/run/rundir.js';
import { RunModel } from '../../src/trainer/run/model.js';

const FIX = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'nsa-vibe', 'single');
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

test('over SSH: a halt with a linked action log is refused and training.csv untouched; without the link it works', async () => {
  const d = run('halt');
  mkdirSync(join(d, '.nsa-top'));
  symlinkSync('../training.csv', join(d, '.nsa-top', 'actions.jsonl'));
  const csv = bytes(join(d, 'training.csv'));
  const who = await currentActor(host);
  const rec = await requestHalt(host, d, 'now', who);
  assert.equal(rec.result, 'refused');
  assert.match(rec.detail, /actions\.jsonl on .*: is a symbolic link: refused/);
  assert.equal(existsSync(join(d, '.HALT')), false);
  assert.equal(bytes(join(d, 'training.csv')), csv);
  rmSync(join(d, '.nsa-top', 'actions.jsonl'));
  const ok = await requestHalt(host, d, 'now', who);
  assert.equal(ok.result, 'ok', ok.detail);
  assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /);
  assert.equal((await readActions(host, d)).at(-1)?.result, 'ok');
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
