// End to end: `nsa-top bundle` of a live reference run after an injected hang, a dump of every rank
// and a halt (one run shared by every assertion), of the real trainer's recorded fixture (rankless
// dumps), and of the same run read over the loopback sshd. The bundle holds every listed file, its
// README tells the hang, the dump and the halt in order, no planted secret survives anywhere in it,
// it is mode 0600, never written over a file or into the run, never over its cap, and a planted
// symlink or hard link out of the run dir is refused and named.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { startHungRun, type HungRun } from './liverun.js';
import { BIN } from './pty.js';
import { startSshd, type TestSshd } from '../helpers/sshd.js';

const FIXTURE = '/work/shared/fixtures/nsa-vibe/ddp2-dumps-halt';
const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-bundle-'));
const runDir = join(cwd, 'run');
const ENV = { ...process.env, NSA_WATCH_HEARTBEAT_STALL_S: '3', NSA_TOP_HALT_GRACE_S: '5' };
// planted in the trainer's environment (the reference trainer records NSA_* in env.json), by name and by shape
const PLANTED: Record<string, string> = {
  NSA_HF_TOKEN: 'plain-value-' + 'by-name-7741',
  NSA_WANDB_API_KEY: 'wandb-' + '0f1e2d3c4b5a69788796a5b4c3d2e1f0',
  NSA_DB_PASSWORD: 'correct-' + 'horse-battery',
  NSA_NOTE_GH: 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8',
  NSA_NOTE_SK: 'sk-' + 'proj-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf',
  NSA_NOTE_HF: 'hf_' + 'QwErTyUiOpAsDfGhJkLzXcVbNm123456',
  NSA_NOTE_AWS: 'AKIA' + 'IOSFODNN7EXAMPLQ',
  NSA_NOTE_HOOK: 'https://hooks.slack.com/services/' + 'T000/B000/XXXXSECRETXXXX',
  NSA_NOTE_DB: 'https://ops:' + 'Hunter2Hunter2' + '@db.example/x',
  NSA_NOTE_JWT: 'eyJhbGciOiJIUzI1NiJ9' + '.eyJzdWIiOiJvcGVyYXRvciJ9.' + 'c2lnbmF0dXJlLW9mLXRoZS1qd3Q',
};
/** the secret part of each planted value: none of these may appear anywhere in a bundle */
const SECRETS = [...Object.values(PLANTED).slice(0, 8), 'Hunter2Hunter2', 'c2lnbmF0dXJlLW9mLXRoZS1qd3Q'];
const OUTSIDE = 'OUTSIDE-THE-RUN-' + 'must-not-be-bundled';
let run: HungRun | null = null;
let sshd: TestSshd | null = null;

after(async () => {
  run?.stop();
  await sshd?.stop().catch(() => {});
  rmSync(cwd, { recursive: true, force: true });
});

function nsaTop(args: string[], env: NodeJS.ProcessEnv = ENV) {
  return spawnSync(process.execPath, [BIN, ...args], { cwd, env, encoding: 'utf8', timeout: 90_000 });
}

async function until<T>(what: string, f: () => T | null | undefined | false, ms = 60_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** the bundle's files, extracted by the system's tar (it checks the format too) */
function extract(file: string): { dir: string; names: string[]; all: string } {
  const dir = mkdtempSync(join(cwd, 'x-'));
  const r = spawnSync('tar', ['-xzf', file, '-C', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const names: string[] = [];
  const walk = (d: string, pre: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p, `${pre}${n}/`);
      else names.push(`${pre}${n}`);
    }
  };
  walk(dir, '');
  return { dir, names, all: names.map((n) => readFileSync(join(dir, n), 'utf8')).join('\n') };
}

function noSecret(all: string) {
  for (const s of SECRETS) assert.ok(!all.includes(s), `a planted secret survived: ${s}`);
  assert.ok(!all.includes(OUTSIDE), 'a file outside the run dir was read through a link');
}

test(
  'a hung, dumped and halted live run: every file, the story in order, no secret, 0600, links refused, capped',
  { timeout: 150_000 },
  async () => {
    run = startHungRun({ cwd, runDir, hang: 'step=8,rank=1', logEvery: 2, saveEvery: 4, env: { ...ENV, ...PLANTED } });
    // the hang: the heartbeats stand still past the watchdog's 3 s stall floor (file times: no process
    // started per look), then the watchdog says STALLED, and writes its watchdog.jsonl
    await run.silent(3000);
    await until(
      'the watchdog sees the stall',
      () => /STALLED/.test(nsaTop(['watchdog', '--once', runDir]).stdout),
      90_000,
    );
    const dump = nsaTop(['dump', runDir, '--json']);
    assert.ok(dump.status === 0 || dump.status === 1, dump.stderr);
    const halt = nsaTop(['halt', runDir]);
    assert.equal(halt.status, 0, halt.stderr + halt.stdout);
    // planted: a link and a hard link out of the run dir
    const outside = join(cwd, 'outside.txt');
    writeFileSync(outside, OUTSIDE + '\n');
    symlinkSync(outside, join(runDir, 'leak.log'));
    linkSync(outside, join(runDir, 'hard.log'));

    const out = join(cwd, 'b.tar.gz');
    const r = nsaTop(['bundle', runDir, '-o', out]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /bundle: .*b\.tar\.gz/);
    assert.equal(statSync(out).mode & 0o777, 0o600, 'mode 0600');
    const b = extract(out);
    for (const n of [
      'README.md',
      'report.txt',
      'report.json',
      'status.json',
      'run/env.json',
      'run/nsa-top/actions.jsonl',
      'run/nsa-top/watchdog.jsonl',
      'run/heartbeat_rank0.jsonl',
      'checkpoints.txt',
      'versions.json',
      'host.txt',
    ])
      assert.ok(b.names.includes(n), `${n} in ${b.names.join(' ')}`);
    assert.ok(
      b.names.some((n) => /^dumps\/rank1\//.test(n)),
      `rank 1's dump grouped: ${b.names.join(' ')}`,
    );
    assert.ok(!b.names.some((n) => /\.pt$/.test(n)), 'no checkpoint copied');
    assert.match(readFileSync(join(b.dir, 'checkpoints.txt'), 'utf8'), /checkpoint_step4\.pt\t\d+\t20/);
    assert.match(readFileSync(join(b.dir, 'versions.json'), 'utf8'), /"nsaTop": "\d+\.\d+\.\d+"/);
    JSON.parse(readFileSync(join(b.dir, 'status.json'), 'utf8'));
    JSON.parse(readFileSync(join(b.dir, 'report.json'), 'utf8'));
    noSecret(b.all);
    assert.match(readFileSync(join(b.dir, 'run/env.json'), 'utf8'), /"NSA_HF_TOKEN": "<redacted>"/);
    const md = readFileSync(join(b.dir, 'README.md'), 'utf8');
    assert.match(md, /State now: \*\*(STALLED|HALTING)\*\*/);
    assert.match(md, /CRITICAL .*(heartbeat silent|step frozen)/);
    assert.match(md, /leak\.log`: a symbolic link — not followed/);
    assert.match(md, /hard\.log`: a hard link/);
    assert.match(md, /nvidia-smi/);
    const at = (re: RegExp) => {
      const i = md.search(re);
      assert.ok(i >= 0, `${re} in the README:\n${md}`);
      return i;
    };
    const order = [
      at(/\d\. \S+ {2}(STALL|HANG): .*step 8/),
      at(/\d\. \S+ {2}DUMP rank 1/),
      at(/\d\. \S+ {2}ACTION dump/),
      at(/\d\. \S+ {2}ACTION halt/),
    ];
    assert.deepEqual(
      [...order].sort((x, y) => x - y),
      order,
      md,
    );

    // never over a file, never into the run
    const again = nsaTop(['bundle', runDir, '-o', out]);
    assert.equal(again.status, 2);
    assert.match(again.stderr, /exists/);
    const inside = nsaTop(['bundle', runDir, '-o', join(runDir, 'x.tar.gz')]);
    assert.equal(inside.status, 2);
    assert.match(inside.stderr, /inside the run dir/);
    assert.ok(!existsSync(join(runDir, 'x.tar.gz')));
    // the cap: the largest items cut first, the README says so
    const small = join(cwd, 'small.tar.gz');
    const c = nsaTop(['bundle', runDir, '-o', small, '--max-mb', '0.3']);
    assert.equal(c.status, 0, c.stderr);
    assert.ok(statSync(small).size <= 0.3 * 2 ** 20, String(statSync(small).size));
    const cb = extract(small);
    assert.match(readFileSync(join(cb.dir, 'README.md'), 'utf8'), /## Cut to stay under the size cap\n\n- `/);
    noSecret(cb.all);
  },
);

test(
  "the real trainer's recorded run: rankless dumps under dumps/unclaimed/, nothing written into it",
  { timeout: 60_000 },
  (t) => {
    if (!existsSync(FIXTURE)) {
      t.skip(`no fixture at ${FIXTURE}`);
      return;
    }
    const copy = join(cwd, 'fixture');
    spawnSync('cp', ['-r', FIXTURE, copy]);
    const before = readdirSync(copy, { recursive: true }).map(String);
    const out = join(cwd, 'fx.tar.gz');
    const r = nsaTop(['bundle', copy, '-o', out]);
    assert.equal(r.status, 0, r.stderr);
    const b = extract(out);
    const dumps = b.names.filter((n) => n.startsWith('dumps/'));
    assert.deepEqual(dumps.sort(), [
      'dumps/unclaimed/stackdump_1795305288.txt',
      'dumps/unclaimed/stackdump_1795305290.txt',
    ]);
    const md = readFileSync(join(b.dir, 'README.md'), 'utf8');
    assert.match(md, /State now: \*\*HALTED\*\*/);
    assert.match(md, /DUMP rank \? \(no claim names it\)/);
    assert.match(md, /\.HALT written in the run dir/);
    // nothing written into the run but the bundle's own record in nsa-top's action log
    const added = readdirSync(copy, { recursive: true })
      .map(String)
      .filter((n) => !before.includes(n));
    assert.deepEqual(
      added.filter((n) => n !== '.nsa-top' && n !== join('.nsa-top', 'actions.jsonl')),
      [],
      'nothing written into the run',
    );
    const log = readFileSync(join(copy, '.nsa-top', 'actions.jsonl'), 'utf8');
    assert.match(log, /"action":"bundle","target":\{[^\n]*"path":"[^"]*fx\.tar\.gz"[^\n]*"result":"ok"/);
  },
);

test(
  'over --host: the recorded run read through the loopback sshd, the tar written here; a link there is refused too',
  { timeout: 90_000 },
  async () => {
    const remoteRun = join(cwd, 'remote-run');
    spawnSync('cp', ['-r', FIXTURE, remoteRun]);
    const outside = join(cwd, 'outside-remote.txt');
    writeFileSync(outside, OUTSIDE + '\n');
    symlinkSync(outside, join(remoteRun, 'leak.log'));
    writeFileSync(
      join(remoteRun, 'env.json'),
      JSON.stringify({ torch: '2.4.0', env: { CONFIG: 'c.yaml', ...PLANTED } }),
    );
    sshd = await startSshd();
    const target = `${userInfo().username}@127.0.0.1:${sshd.port}`;
    const viaSsh = join(cwd, 'ssh.tar.gz');
    const s = nsaTop(
      ['bundle', remoteRun, '-o', viaSsh, '--host', target, '-i', sshd.userKey, '--accept-new-host-key'],
      {
        ...ENV,
        HOME: join(cwd, 'home'),
        SSH_AUTH_SOCK: '',
      },
    );
    assert.equal(s.status, 0, s.stderr);
    assert.equal(statSync(viaSsh).mode & 0o777, 0o600);
    const sb = extract(viaSsh);
    for (const n of ['README.md', 'report.txt', 'status.json', 'run/env.json', 'run/train.log', 'host.txt'])
      assert.ok(sb.names.includes(n), `${n} over ssh: ${sb.names.join(' ')}`);
    assert.ok(sb.names.some((n) => /^dumps\/unclaimed\//.test(n)));
    const smd = readFileSync(join(sb.dir, 'README.md'), 'utf8');
    assert.match(smd, new RegExp(`on ${target.replace(/[.]/g, '\\.')}`));
    assert.match(smd, /leak\.log`: a symbolic link — not followed/);
    assert.match(readFileSync(join(sb.dir, 'run/env.json'), 'utf8'), /"NSA_HF_TOKEN": "<redacted>"/);
    noSecret(sb.all);
  },
);
