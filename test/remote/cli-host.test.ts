// The built binary with --host against a real sshd: the host-key refusal a user sees, the
// --accept-new-host-key path that records the key in ~/.ssh/known_hosts, then a plain reconnect.
// HOME points at a temp dir, so the user's own ~/.ssh is never read or written.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-cli-host-'));
let sshd: TestSshd | null = null;
after(async () => {
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

test('nsa-top watchdog --host: unknown key refused with its fingerprint, accepted with --accept-new-host-key, known afterwards', async () => {
  sshd = await startSshd();
  console.log(`# ssh server under test: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  const home = join(tmp, 'home');
  const runDir = join(tmp, 'run');
  cpSync(FIXTURE, runDir, { recursive: true });
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const args = [
    'watchdog',
    runDir,
    '--once',
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
  ];
  const run = (extra: string[] = []) =>
    spawnSync(process.execPath, [bin, ...args, ...extra], { env, encoding: 'utf8', timeout: 60000 });
  const fp = spawnSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${sshd.dir}/host_ed25519.pub`], {
    encoding: 'utf8',
  }).stdout.split(' ')[1]!;

  const refused = run();
  assert.equal(refused.status, 2, refused.stderr);
  assert.ok(refused.stderr.includes(fp), `the fingerprint is shown: ${refused.stderr}`);
  assert.match(refused.stderr, /--accept-new-host-key/);
  assert.equal(existsSync(join(home, '.ssh', 'known_hosts')), false, 'nothing recorded');

  const accepted = run(['--accept-new-host-key']);
  assert.notEqual(accepted.status, 2, accepted.stderr);
  assert.match(accepted.stdout, /\{/, 'the watchdog printed its decisions');
  assert.match(
    readFileSync(join(home, '.ssh', 'known_hosts'), 'utf8'),
    new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 `),
  );

  const again = run();
  assert.equal(again.status, accepted.status, again.stderr);
});

test('nsa-top status --host --json equals the local status of the same run (but for when and where it was taken)', async () => {
  sshd ??= await startSshd();
  const home = join(tmp, 'home-status');
  const runDir = join(tmp, 'run-status');
  // old mtimes: checkpoints count as complete only once settled, for both readers alike
  cpSync(FIXTURE, runDir, { recursive: true, preserveTimestamps: true });
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const status = (extra: string[]) =>
    spawnSync(process.execPath, [bin, 'status', runDir, '--json', ...extra], { env, encoding: 'utf8', timeout: 60000 });
  const local = status([]);
  assert.equal(local.status, 0, local.stderr);
  const remote = status([
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
    '--accept-new-host-key',
  ]);
  assert.equal(remote.status, 0, remote.stderr);
  const ages: number[] = [];
  const strip = (text: string) => {
    const j = JSON.parse(text) as Record<string, unknown>;
    assert.notEqual(j.host, undefined);
    // the host's resources are read afresh by each (the same machine here): compared on their own
    for (const k of ['takenAt', 'host', 'hostNowMs', 'hostResources']) delete j[k];
    // an age is measured when each look is taken (seconds apart here): compared on its own
    const ck = (j.numbers as { lastCheckpoint?: { ageS?: number } } | undefined)?.lastCheckpoint;
    if (ck?.ageS !== undefined) {
      ages.push(ck.ageS);
      delete ck.ageS;
    }
    return j;
  };
  // the Host panel's figures, locally and over SSH: the same machine's RAM and the run dir's disk
  type Res = {
    memTotalMiB: number;
    memAvailMiB: number;
    load: number[];
    disks: { role: string; mount: string | null; totalMiB: number }[];
  };
  const lr = (JSON.parse(local.stdout) as { hostResources: Res }).hostResources;
  const rr = (JSON.parse(remote.stdout) as { hostResources: Res }).hostResources;
  for (const x of [lr, rr]) {
    assert.ok(x.memTotalMiB > 0 && x.memAvailMiB > 0 && x.memAvailMiB <= x.memTotalMiB, JSON.stringify(x));
    assert.equal(x.load.length, 3);
    assert.equal(x.disks[0]?.role, 'run dir');
  }
  assert.equal(Math.round(rr.memTotalMiB), Math.round(lr.memTotalMiB));
  assert.ok(Math.abs(rr.disks[0]!.totalMiB - lr.disks[0]!.totalMiB) < 1, 'the same file system');
  assert.ok(rr.disks[0]!.mount !== null, 'df named the mount over SSH');
  const r = JSON.parse(remote.stdout) as { host: string; step: number };
  assert.match(r.host, /127\.0\.0\.1/, 'the remote snapshot says where it was taken');
  assert.equal(r.step, 40);
  assert.deepEqual(strip(remote.stdout), strip(local.stdout));
  assert.ok(ages.length !== 2 || Math.abs(ages[0]! - ages[1]!) < 60, `checkpoint ages ${ages.join(' vs ')}`);
  const bad = status(['--host']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--host needs user@box/);
});

test('nsa-top status --host --json on a run dir of hundreds of files (read in bulk) equals the local status', async () => {
  sshd ??= await startSshd();
  const home = join(tmp, 'home-many');
  const runDir = join(tmp, 'run-many');
  cpSync(FIXTURE, runDir, { recursive: true, preserveTimestamps: true });
  // a heartbeat file per rank of a large job, an old stack dump per rank, a directory and a FIFO named
  // like artifacts: the directory and the FIFO are named, never read
  const old = new Date(Date.now() - 3600_000);
  for (let r = 2; r < 300; r++) {
    const hb = join(runDir, `heartbeat_rank${r}.jsonl`);
    writeFileSync(hb, `{"ts": 1, "rank": ${r}, "pid": ${1000 + r}, "msg": "boot"}\n`);
    utimesSync(hb, old, old);
  }
  for (let r = 0; r < 40; r++) {
    const d = join(runDir, `stackdump_${1700000000 + r}.txt`);
    writeFileSync(d, `Thread 0x1 (most recent call first):\n  File "train_showcase.py", line ${100 + r} in main\n`);
    utimesSync(d, old, old);
  }
  mkdirSync(join(runDir, 'heartbeat_rank300.jsonl'));
  spawnSync('mkfifo', [join(runDir, 'heartbeat_rank301.jsonl')]);
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const status = (extra: string[]) =>
    spawnSync(process.execPath, [bin, 'status', runDir, '--json', ...extra], {
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
  const local = status([]);
  const remote = status([
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
    '--accept-new-host-key',
  ]);
  const ages: number[] = [];
  const strip = (text: string) => {
    const j = JSON.parse(text) as Record<string, unknown>;
    for (const k of ['takenAt', 'host', 'hostNowMs', 'hostResources']) delete j[k];
    // an age is measured when each look is taken (seconds apart here): compared on its own
    const ck = (j.numbers as { lastCheckpoint?: { ageS?: number } } | undefined)?.lastCheckpoint;
    if (ck?.ageS !== undefined) {
      ages.push(ck.ageS);
      delete ck.ageS;
    }
    return j;
  };
  const l = strip(local.stdout) as { ranks: unknown[]; dumps: unknown[] };
  assert.ok(l.ranks.length >= 300 && l.dumps.length > 0, 'the local reader saw every rank and the dumps');
  assert.deepEqual(strip(remote.stdout), l, remote.stderr);
  assert.ok(ages.length !== 2 || Math.abs(ages[0]! - ages[1]!) < 60, `checkpoint ages ${ages.join(' vs ')}`);
});

test('nsa-top halt --host on a live run writes .HALT over SSH and the trainer stops; halt, stop and dump take --host', async () => {
  sshd ??= await startSshd();
  const home = join(tmp, 'home-halt');
  const runDir = join(tmp, 'run-halt');
  const env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  const trainer = spawn(
    process.execPath,
    [
      bin,
      'train',
      '--out',
      runDir,
      '--steps',
      '2000',
      '--log-every',
      '1',
      '--seq-len',
      '32',
      '--batch-size',
      '2',
      '--inject',
      'slow-data@ms=100',
      // no checkpoints: one written in the 5 s before a status is checked by its resume pick (a stat
      // and two reads of its end across a 700 ms wait), which is not what the asks below count; at a
      // save every 50 steps (~5 s here) nearly every status met one
      '--save-every',
      '0',
    ],
    { stdio: 'ignore', env },
  );
  const exited = new Promise<number | null>((res) => trainer.on('exit', (c) => res(c)));
  after(() => {
    if (trainer.exitCode === null && trainer.signalCode === null) trainer.kill('SIGKILL');
  });
  const hb = join(runDir, 'heartbeat_rank0.jsonl');
  for (const end = Date.now() + 60_000; !(existsSync(hb) && /"progress"/.test(readFileSync(hb, 'utf8')));) {
    assert.ok(Date.now() < end, 'the trainer logged a step');
    await new Promise((r) => setTimeout(r, 100));
  }
  const ssh = ['--host', `${userInfo().username}@127.0.0.1:${sshd.port}`, '-i', sshd.userKey, '--accept-new-host-key'];
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], { env, encoding: 'utf8', timeout: 60_000 });
  // what one status --host asks of the watch loop on a live run (the first one records the run's
  // adoption, a write that starts its look afresh: the second is the plain one): the look's script
  // and the host's resources, no write, and the process table once — all three asked together and
  // run side by side (a, p), their answers before any second frame, none a round trip of its own
  assert.equal(cli(['status', runDir, ...ssh]).status, 0);
  const looked = spawnSync(process.execPath, [bin, 'status', runDir, ...ssh], {
    env: { ...env, NSA_TOP_SSH_TRACE: '1' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(looked.status, 0, looked.stderr);
  const trace = looked.stderr.split('\n');
  const asked = (re: RegExp) => trace.filter((l) => re.test(l)).length;
  assert.deepEqual(
    {
      aside: asked(/ loop a \d+:/),
      scripts: asked(/ loop x \d+:/),
      writes: asked(/ loop w \d+:/),
      tables: asked(/ loop p \d+:/),
      procs: asked(/ loop P \d+:/),
    },
    { aside: 2, scripts: 0, writes: 0, tables: 1, procs: 0 },
    looked.stderr,
  );
  // (a later frame may come, answered after the command is done with the loop: not one it waits for)
  const at = (re: RegExp) => trace.findIndex((l) => re.test(l));
  const second = at(/ loop frame 2 /);
  assert.ok(second < 0 || at(/ loop p \d+:/) < second, `the table came with the look:\n${looked.stderr}`);
  const h = cli(['halt', runDir, ...ssh]);
  assert.equal(h.status, 0, h.stderr);
  assert.match(h.stdout, /^halt ok: /);
  assert.match(readFileSync(join(runDir, '.HALT'), 'utf8'), /halt: manual_stop/);
  assert.equal(await exited, 0, 'the trainer stopped on the .HALT written over SSH');
  const acts = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8');
  assert.match(acts, /"action":"halt".*127\.0\.0\.1/, 'the action log names the host');
  // (stop --host opens its host through the same hostRun as halt; --help lists --host for both)
  for (const c of ['halt', 'stop', 'dump']) assert.match(cli([c, '--help']).stdout, /^ {2}--host H/m, c);
});
