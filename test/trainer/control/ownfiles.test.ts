// nsa-top's own writes under hostile run dirs, on real files: a link planted at the action log,
// at watchdog.jsonl or at .nsa-top itself is never written through; run.info cannot send writes
// outside the run; read-only refuses every write of every command; a .HALT directory is shown;
// an unsearchable dir or unreadable artifact is said (as an unprivileged user); a full disk (a real
// 64 KiB tmpfs) leaves a 0-byte .HALT that nsa-top reports as its own failed write.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { currentActor, readActions, requestHalt } from '../../../src/trainer/control/actions.js';
import {
  appendOwn,
  createOwn,
  ownNameProblem,
  OwnWriteError,
  writeOwnAtomic,
} from '../../../src/trainer/control/ownfiles.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { resolveRunDirs } from '../../../src/trainer/run/rundirs.js';
import { relaunch } from '../../../src/trainer/launch/launch.js';
import { spawnWithoutDac, withoutDacSkip } from '../../helpers/unprivileged.js';
import { submitHaltAfterCheckpoint } from '../../../src/trainer/control/requests.js';
import { killKids, startKid, tempDir, type Kid } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const FIX = join(ROOT, 'test', 'fixtures', 'nsa-vibe', 'single');
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-own-'));
chmodSync(tmp, 0o755);
after(() => rmSync(tmp, { recursive: true, force: true }));

let n = 0;
/** a copy of the finished single-rank fixture run */
function run(tag: string): string {
  const d = join(tmp, `${tag}-${n++}`);
  cpSync(FIX, d, { recursive: true });
  return d;
}
/** a finished run whose loss went NaN: `watchdog --halt` acts on it (nan_loss is critical), then exits (the run ended) */
function nanRun(tag: string): string {
  const d = run(tag);
  rmSync(join(d, 'metrics.json'));
  appendFileSync(join(d, 'training.csv'), '41,nan,0.0,500\n');
  return d;
}
function cli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
}
const events = (s: string) =>
  s
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const bytes = (p: string) => readFileSync(p).toString('base64');

test('a linked action log: the halt is taken all the same and says it was NOT logged, training.csv is untouched; without the link it is logged', async () => {
  const d = run('halt-link');
  mkdirSync(join(d, '.nsa-top'));
  symlinkSync('../training.csv', join(d, '.nsa-top', 'actions.jsonl'));
  const before = bytes(join(d, 'training.csv'));
  const who = await currentActor(host);
  const rec = await requestHalt(host, d, 'now', who);
  assert.equal(rec.result, 'ok', rec.detail);
  assert.match(rec.detail, /^\.HALT written .*; NOT logged: .*actions\.jsonl: is a symbolic link: refused/);
  assert.match(rec.notLogged ?? '', /actions\.jsonl: is a symbolic link/);
  assert.equal(bytes(join(d, 'training.csv')), before, 'training.csv untouched');
  assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /, 'a safety halt fails open');
  assert.ok(lstatSync(join(d, '.nsa-top', 'actions.jsonl')).isSymbolicLink(), 'the link is left as it is');
  rmSync(join(d, '.nsa-top', 'actions.jsonl'));
  rmSync(join(d, '.HALT'));
  const ok = await requestHalt(host, d, 'now', who);
  assert.equal(ok.result, 'ok', ok.detail);
  assert.equal(ok.notLogged, undefined);
  assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /);
  assert.equal((await readActions(host, d)).at(-1)?.action, 'halt');
  assert.equal(bytes(join(d, 'training.csv')), before);
});

test('watchdog --halt with a linked action log and a linked watchdog.jsonl: nothing written through either link, each refusal named, the halt taken', () => {
  const d = nanRun('wd-link');
  mkdirSync(join(d, '.nsa-top'));
  symlinkSync('../training.csv', join(d, '.nsa-top', 'actions.jsonl'));
  symlinkSync('../heartbeat_rank0.jsonl', join(d, '.nsa-top', 'watchdog.jsonl'));
  const csv = bytes(join(d, 'training.csv'));
  const hb = bytes(join(d, 'heartbeat_rank0.jsonl'));
  const r = cli(['watchdog', d, '--halt', '--no-gpu']);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(bytes(join(d, 'training.csv')), csv);
  assert.equal(bytes(join(d, 'heartbeat_rank0.jsonl')), hb);
  assert.match(r.stderr, /watchdog\.jsonl: is a symbolic link: refused/);
  assert.equal(r.stderr.match(/watchdog\.jsonl: is a symbolic link/g)?.length, 1, 'said once, not per line');
  const halt = events(r.stdout).find((e) => e.event === 'halt');
  assert.equal(halt?.result, 'ok', String(halt?.detail));
  assert.match(String(halt?.detail), /NOT logged: .*actions\.jsonl: is a symbolic link/);
  assert.match(String(halt?.notLogged), /actions\.jsonl: is a symbolic link/);
  assert.match(r.stderr, /\.HALT ok, NOT logged: .*actions\.jsonl: is a symbolic link/);
  assert.equal(readFileSync(join(d, '.HALT'), 'utf8'), 'halt: nan_loss\n', "the watchdog's safety halt fails open");
});

test('.nsa-top itself a link to another directory: nothing is written there, and a halt still goes ahead', async () => {
  const d = run('dir-link');
  const elsewhere = join(tmp, `elsewhere-${n++}`);
  mkdirSync(elsewhere);
  symlinkSync(elsewhere, join(d, '.nsa-top'));
  const r = cli(['watchdog', d, '--once', '--no-gpu']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /\.nsa-top: is a symbolic link: refused/);
  const rec = await requestHalt(host, d, 'now', await currentActor(host));
  assert.equal(rec.result, 'ok', rec.detail);
  assert.match(rec.notLogged ?? '', /\.nsa-top: is a symbolic link: refused/);
  assert.ok(existsSync(join(d, '.HALT')), 'the halt is not blocked by its log');
  // the CLI says it on stderr too, and exits 0: the halt was taken
  rmSync(join(d, '.HALT'));
  // a live rank of the run (its boot record in heartbeat_rank1.jsonl): a finished run has nothing to halt
  const kid = await startKid(host, d, undefined, { DUMP_RANK: '1', HB_RANK: '1' });
  const c = cli(['halt', d]);
  killKids([kid]);
  await kid.exited;
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, /^halt ok: \.HALT written .*; NOT logged: /);
  assert.match(c.stderr, /nsa-top halt: ok, NOT logged: .*\.nsa-top: is a symbolic link/);
  assert.ok(existsSync(join(d, '.HALT')));
  assert.deepEqual(spawnSync('ls', ['-A', elsewhere], { encoding: 'utf8' }).stdout, '');
});

test('.nsa-top a link, a live rank: halt --after-checkpoint cannot keep its request and says so (and that a halt now is not blocked); a halt now is taken', async () => {
  const d = tempDir('req-link');
  const elsewhere = join(tmp, `elsewhere-${n++}`);
  mkdirSync(elsewhere);
  symlinkSync(elsewhere, join(d, '.nsa-top'));
  const kids: Kid[] = [];
  try {
    kids.push(await startKid(host, d));
    const who = await currentActor(host);
    const r = await submitHaltAfterCheckpoint(host, d, who);
    assert.equal(r.record.result, 'failed', r.record.detail);
    assert.match(
      r.record.detail,
      /^the request cannot be kept: .*\.nsa-top: is a symbolic link: refused.*a halt now .* is not blocked by this/,
    );
    assert.ok(!existsSync(join(d, '.HALT')));
    const now = await requestHalt(host, d, 'now', who);
    assert.equal(now.result, 'ok', now.detail);
    assert.ok(existsSync(join(d, '.HALT')));
    assert.deepEqual(spawnSync('ls', ['-A', elsewhere], { encoding: 'utf8' }).stdout, '');
  } finally {
    killKids(kids);
    rmSync(d, { recursive: true, force: true });
  }
});

test("run.info's out_dir cannot send writes out of the run: a relative ../../ that holds no run is not taken", async () => {
  const outside = join(tmp, `outside-${n++}`);
  const launcher = join(outside, 'x', 'run');
  mkdirSync(join(outside, 'x'), { recursive: true });
  cpSync(FIX, launcher, { recursive: true });
  writeFileSync(join(launcher, 'run.info'), 'run_dir: x\nout_dir: ../../\n');
  // what an older nsa-top left at the file-system root: a .nsa-top/ alone does not make a run
  mkdirSync(join(outside, '.nsa-top'));
  writeFileSync(join(outside, '.nsa-top', 'watchdog.jsonl'), '{"old":1}\n');
  const dirs = await resolveRunDirs(host, launcher);
  assert.equal(dirs.outDir, launcher);
  assert.match(dirs.outDirProblem ?? '', /out_dir \.\.\/\.\.\/: .*holds no run/);
  const r = cli(['watchdog', launcher, '--once', '--no-gpu'], {});
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /run\.info's out_dir \.\.\/\.\.\/: .* holds no run/);
  assert.deepEqual(
    spawnSync('ls', ['-A', outside], { encoding: 'utf8' }).stdout.trim().split('\n'),
    ['.nsa-top', 'x'],
    'nothing created outside the run',
  );
  assert.equal(readFileSync(join(outside, '.nsa-top', 'watchdog.jsonl'), 'utf8'), '{"old":1}\n');
  assert.ok(existsSync(join(launcher, '.nsa-top', 'watchdog.jsonl')), 'decisions kept inside the run itself');
  // an out_dir that holds a run is taken, relative to the launcher dir (not the caller's cwd)
  const real = run('real-out');
  writeFileSync(join(launcher, 'run.info'), `out_dir: ../../../${real.split('/').pop()}\n`);
  assert.equal((await resolveRunDirs(host, launcher)).outDir, real);
});

test('only nsa-top names are written, only into a run dir, and a FIFO at the log is refused without blocking', async () => {
  assert.equal(ownNameProblem('.nsa-top/actions.jsonl'), null);
  assert.equal(ownNameProblem('.HALT'), null);
  assert.equal(ownNameProblem('pyspy_1795300000_rank0_123.txt'), null);
  for (const bad of [
    'training.csv',
    '../x',
    '.nsa-top/../training.csv',
    '.nsa-top/a/b',
    'heartbeat_rank0.jsonl',
    '.nsa-top/',
  ])
    assert.ok(ownNameProblem(bad), bad);
  const d = run('names');
  await assert.rejects(appendOwn(host, d, 'training.csv', 'x\n'), /not one of nsa-top's own files/);
  const empty = join(tmp, `empty-${n++}`);
  mkdirSync(empty);
  await assert.rejects(createOwn(host, empty, '.HALT', 'halt: x\n'), /holds no run/);
  assert.ok(!existsSync(join(empty, '.HALT')));
  mkdirSync(join(d, '.nsa-top'));
  execFileSync('mkfifo', [join(d, '.nsa-top', 'actions.jsonl')]);
  await assert.rejects(appendOwn(host, d, '.nsa-top/actions.jsonl', '{}\n'), /FIFO|not a regular file/);
  // a link at the file for the atomic writer: the rename replaces the link, the target is untouched
  symlinkSync('../training.csv', join(d, '.nsa-top', 'run.json'));
  const csv = bytes(join(d, 'training.csv'));
  await writeOwnAtomic(host, d, '.nsa-top/run.json', '{}\n');
  assert.equal(bytes(join(d, 'training.csv')), csv);
  assert.ok(lstatSync(join(d, '.nsa-top', 'run.json')).isFile());
});

test('read-only is global: NSA_TOP_READ_ONLY=1 and --read-only stop watchdog --halt from writing anything', () => {
  for (const [args, env] of [
    [[], { NSA_TOP_READ_ONLY: '1' }],
    [['--read-only'], {}],
  ] as [string[], Record<string, string>][]) {
    const d = nanRun('ro');
    const r = cli(['watchdog', d, '--halt', '--no-gpu', ...args], env);
    assert.equal(r.status, 1, r.stderr);
    const ev = events(r.stdout);
    assert.equal(ev.find((e) => e.event === 'halt')?.result, 'refused');
    assert.match(String(ev.find((e) => e.event === 'anomaly')?.why), /read-only/);
    for (const f of ['.HALT', '.anomaly_type', '.nsa-top'])
      assert.ok(!existsSync(join(d, f)), `${f} not written (${JSON.stringify(env)} ${args})`);
  }
});

test('a .HALT that is a directory is shown, reported by a halt, and named by the rules', async () => {
  const d = run('halt-dir');
  mkdirSync(join(d, '.HALT'));
  const snap = await new RunModel(host, d).poll();
  assert.equal(snap.control.halt.present, true);
  assert.match(snap.control.halt.content ?? '', /not a regular file: a directory/);
  const r = cli(['status', d]);
  assert.match(r.stdout, /\.HALT present \("\[not a regular file: a directory\]"\)/);
  const rec = await requestHalt(host, d, 'now', await currentActor(host));
  assert.equal(rec.result, 'ok');
  assert.match(rec.detail, /not a regular file \(a directory\)/);
  assert.ok(statSync(join(d, '.HALT')).isDirectory(), 'left as it is');
  // it blocks a relaunch like a stale .HALT, and nsa-top does not remove a directory
  mkdirSync(join(d, '.nsa-top'), { recursive: true });
  writeFileSync(
    join(d, '.nsa-top', 'launch.json'),
    JSON.stringify({ version: 1, command: ['true'], runDir: d, outDir: d, cwd: d, env: {} }),
  );
  const who = await currentActor(host);
  const refused = await relaunch(host, d, who, { removeStaleHalt: false, allowCommand: ['true'] });
  assert.equal(refused.result, 'refused');
  assert.match(refused.detail, /\.HALT present \("not a regular file: a directory/);
  const failed = await relaunch(host, d, who, { removeStaleHalt: true, allowCommand: ['true'] });
  assert.equal(failed.result, 'failed');
  assert.match(failed.detail, /could not remove \.HALT: .*is a directory/);
  assert.ok(statSync(join(d, '.HALT')).isDirectory());
  assert.ok(!existsSync(join(d, '.nsa-top', 'supervisor.json')), 'no supervisor started');
});

test(
  'as an unprivileged user: an unsearchable run dir is an error (exit 2), unreadable artifacts a named warning',
  { skip: withoutDacSkip },
  () => {
    const asUnprivileged = (args: string[]) =>
      spawnWithoutDac([process.execPath, BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
    const d444 = run('r444');
    chmodSync(d444, 0o444);
    for (const cmd of ['status', 'report']) {
      const r = asUnprivileged([cmd, d444]);
      assert.equal(r.status, 2, `${cmd}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /cannot read run dir .*EACCES/);
      assert.doesNotMatch(r.stdout, /no errors/);
    }
    const w = asUnprivileged(['watchdog', d444, '--once', '--no-gpu']);
    assert.equal(w.status, 2, w.stderr);
    chmodSync(d444, 0o755);
    const df = run('unreadable-files');
    for (const f of ['training.csv', 'heartbeat_rank0.jsonl']) chmodSync(join(df, f), 0o000);
    const s = asUnprivileged(['status', df]);
    assert.match(s.stderr, /warning: cannot read heartbeat_rank0\.jsonl, training\.csv .*permission denied/);
    const wd = asUnprivileged(['watchdog', df, '--once', '--no-gpu']);
    const al = events(wd.stdout).find((e) => e.id === 'files:unreadable');
    assert.equal(al?.severity, 'warning');
    assert.match(String(al?.title), /cannot read 2 artifacts: .*heartbeat_rank0\.jsonl/);
  },
);

function mountTiny(dir: string): string | null {
  if (process.getuid?.() !== 0) return 'needs root to mount a tmpfs';
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? null : `cannot mount a tmpfs here: ${r.stderr.trim()}`;
}

test("a full disk (a 64 KiB tmpfs): the 0-byte .HALT and .anomaly_type are reported as nsa-top's own failed writes", async (t) => {
  const mnt = join(tmp, `full-${n++}`);
  mkdirSync(mnt);
  const why = mountTiny(mnt);
  if (why) return void t.skip(why);
  try {
    const d = join(mnt, 'run');
    mkdirSync(join(d, '.nsa-top'), { recursive: true });
    writeFileSync(join(d, 'training.csv'), 'step,loss,lr,toks_per_s\n1,5.5,0.0001,500\n');
    const who = await currentActor(host);
    // an action log with room left in its last page, as a run's log usually has
    await requestHalt(host, d, 'after-checkpoint', who, { timeoutMs: 0 });
    // fill the disk
    spawnSync('sh', ['-c', `dd if=/dev/zero of=${join(mnt, 'fill')} bs=4k 2>/dev/null; true`]);
    const rec = await requestHalt(host, d, 'now', who);
    assert.equal(rec.result, 'failed');
    assert.match(rec.detail, /created, but its content could not be written \(ENOSPC\)/);
    assert.match(rec.detail, /the empty \.HALT is nsa-top's own/);
    assert.doesNotMatch(rec.detail, /already present/);
    assert.equal(statSync(join(d, '.HALT')).size, 0);
    // later, the empty .HALT is still known as nsa-top's own cut-short write, not someone else's
    const again = await requestHalt(host, d, 'now', who);
    assert.match(again.detail, /\.HALT already present \(empty: nsa-top's own write cut short at .* by /);
    rmSync(join(d, '.HALT'));
    // the watchdog's own .anomaly_type and .HALT, the same way
    const e = await createOwn(host, d, '.anomaly_type', 'nan_loss\n').catch((x: unknown) => x);
    assert.ok(e instanceof OwnWriteError && e.partial, String(e));
  } finally {
    spawnSync('umount', [mnt]);
  }
});
