// Hard links planted at nsa-top's own appended files, on real files and processes: each of its logs
// (actions.jsonl, watchdog.jsonl, agent.log, supervisor.log) hard-linked to a training artifact or to
// a file outside the run, then `halt`, `watchdog --once`, `dump` and the detached agent run. A hard
// link passes O_NOFOLLOW, so this is the open file's own check (one link, this user, the dir's file
// system): the suspect name is renamed aside to `<name>.suspect-<ts>` and a fresh file takes the
// line. Done when no file outside `.nsa-top/` changes — its bytes and its mtime. And the agent's halt
// fails open: an action log it cannot write (a symlink) does not stop its .HALT. Needs `npm run build`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chownSync,
  closeSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { killKids, startKid } from './helpers.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { selfCommand } from '../../../src/self.js';
import { currentActor, readActions, requestHalt } from '../../../src/trainer/control/actions.js';
import { appendOwn, openOwnAppendSync } from '../../../src/trainer/control/ownfiles.js';
import type { ControlRequest } from '../../../src/trainer/control/types.js';
import { tmp as trainTmp, train, waitFor } from '../reference/helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const FIX = join(ROOT, 'test', 'fixtures', 'nsa-vibe', 'single');
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-hardlinks-'));
const agents: { pid: number; startTime: string }[] = [];
after(async () => {
  for (const a of agents) if (await verifyProcess(host, a).catch(() => false)) process.kill(a.pid, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
});

let n = 0;
function run(tag: string): string {
  const d = join(tmp, `${tag}-${n++}`);
  cpSync(FIX, d, { recursive: true });
  return d;
}

function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const [node, ...pre] = selfCommand();
  return spawnSync(node!, [...pre, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
}

const OLD = new Date('2024-01-02T03:04:05Z');
/** a file's bytes and mtime, set to a known past time first so any write shows */
function pin(path: string): () => void {
  utimesSync(path, OLD, OLD);
  const bytes = readFileSync(path).toString('base64');
  return () => {
    assert.equal(readFileSync(path).toString('base64'), bytes, `${path}: its bytes changed`);
    assert.equal(statSync(path).mtimeMs, OLD.getTime(), `${path}: its mtime changed`);
  };
}

const asideOf = (dir: string, name: string) =>
  readdirSync(dir).filter((x) => x.startsWith(`${name}.suspect-`) && /\.suspect-\d{8}T\d{6}Z(-\d+)?$/.test(x));

test('halt, watchdog --once and dump with each own log hard-linked to a training artifact or a file outside the run: nothing outside .nsa-top changes', async () => {
  const outside = join(tmp, 'outside.txt');
  writeFileSync(outside, 'not a run file\n');
  const layouts: [string, (d: string) => string][] = [
    ['training.csv', (d) => join(d, 'training.csv')],
    ['heartbeat_rank0.jsonl', (d) => join(d, 'heartbeat_rank0.jsonl')],
    ['env.json', (d) => join(d, 'env.json')],
    ['a file outside the run', () => outside],
  ];
  let cases = 0;
  for (const [what, victimOf] of layouts) {
    const d = run('cli');
    const nsa = join(d, '.nsa-top');
    mkdirSync(nsa);
    const victim = victimOf(d);
    // both logs on the same victim: the halt's record, the watchdog's decisions, the dump's refusal
    linkSync(victim, join(nsa, 'actions.jsonl'));
    linkSync(victim, join(nsa, 'watchdog.jsonl'));
    const unchanged = pin(victim);
    const others = ['training.csv', 'heartbeat_rank0.jsonl', 'env.json', 'metrics.json'].map((f) => pin(join(d, f)));

    const wd = cli(['watchdog', d, '--once', '--no-gpu']);
    assert.equal(wd.status, 0, `${what}: watchdog --once: ${wd.stderr}`);
    assert.match(wd.stderr, /watchdog\.jsonl has 3 hard links .*: set aside as watchdog\.jsonl\.suspect-/, what);
    unchanged();

    // a live rank of the run (its boot record in heartbeat_rank1.jsonl): a finished run has nothing to halt
    const kid = await startKid(host, d, undefined, { DUMP_RANK: '1', HB_RANK: '1' });
    const h = cli(['halt', d, '--json']);
    killKids([kid]);
    await kid.exited;
    assert.equal(h.status, 0, `${what}: halt: ${h.stderr}`);
    const hj = JSON.parse(h.stdout) as { result: string; detail: string; notLogged?: string };
    assert.equal(hj.result, 'ok');
    assert.equal(hj.notLogged, undefined, 'the record was kept, in a fresh log');
    assert.match(hj.detail, /actions\.jsonl has 3 hard links .*set aside as actions\.jsonl\.suspect-/, what);
    unchanged();

    const dump = cli(['dump', d, '--json']);
    assert.notEqual(dump.status, null, `${what}: dump did not finish`);
    unchanged();
    for (const check of others) check();
    if (victim === outside) assert.equal(readFileSync(outside, 'utf8'), 'not a run file\n');

    // the suspect names are kept (renamed, never deleted), the fresh logs are nsa-top's own alone
    assert.equal(asideOf(nsa, 'actions.jsonl').length, 1, readdirSync(nsa).join(' '));
    assert.equal(asideOf(nsa, 'watchdog.jsonl').length, 1, readdirSync(nsa).join(' '));
    for (const f of ['actions.jsonl', 'watchdog.jsonl']) assert.equal(statSync(join(nsa, f)).nlink, 1, f);
    assert.equal(statSync(victim).nlink, 3, 'the victim keeps its bytes under the two set-aside names');
    assert.match(readFileSync(join(d, '.HALT'), 'utf8'), /^halt: manual_stop /);
    assert.ok(
      readFileSync(join(nsa, 'watchdog.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .every((l) => typeof (JSON.parse(l) as { event?: unknown }).event === 'string'),
      'the fresh watchdog.jsonl holds only its decisions',
    );
    assert.ok(
      spawnSync('sh', ['-c', `cat "$1"/* | grep -c '"action":"halt"'`, 'sh', d], { encoding: 'utf8' }).stdout.trim() ===
        '0',
      'no action record in any run file',
    );
    cases++;
  }
  assert.equal(cases, layouts.length);
});

test('the action log hard-linked: the record goes to a fresh log that readActions reads; a second link later is set aside again under another name', async () => {
  const d = run('again');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  linkSync(join(d, 'training.csv'), join(nsa, 'actions.jsonl'));
  const csv = pin(join(d, 'training.csv'));
  const who = await currentActor(host);
  const first = await requestHalt(host, d, 'now', who);
  assert.equal(first.result, 'ok', first.detail);
  assert.deepEqual(
    (await readActions(host, d)).map((r) => r.action),
    ['halt'],
  );
  rmSync(join(d, '.HALT'));
  // a second planted link in the same second: another name, the first suspect file kept
  rmSync(join(nsa, 'actions.jsonl'));
  linkSync(join(d, 'training.csv'), join(nsa, 'actions.jsonl'));
  await appendOwn(host, d, '.nsa-top/actions.jsonl', '');
  assert.equal(asideOf(nsa, 'actions.jsonl').length, 2, readdirSync(nsa).join(' '));
  csv();
});

test('writers racing on one hard-linked log (two cockpits): the victim is set aside once, no fresh log is moved aside, every line lands whole', async () => {
  const d = run('race');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  linkSync(join(d, 'heartbeat_rank0.jsonl'), join(nsa, 'watchdog.jsonl'));
  const hb = pin(join(d, 'heartbeat_rank0.jsonl'));
  const lines = Array.from({ length: 8 }, (_, i) => `{"event":"w${i}"}`);
  const done = await Promise.all(lines.map((l) => appendOwn(host, d, '.nsa-top/watchdog.jsonl', `${l}\n`)));
  hb();
  assert.equal(asideOf(nsa, 'watchdog.jsonl').length, 1, readdirSync(nsa).join(' '));
  assert.ok(
    done.some((x) => x?.setAside),
    'one writer set it aside',
  );
  assert.deepEqual(readFileSync(join(nsa, 'watchdog.jsonl'), 'utf8').trim().split('\n').sort(), [...lines].sort());
});

test("a text log opened for a detached helper (supervisor.log, agent.log): set aside, and the fresh log's first line says where the old one went", () => {
  const d = run('sync');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  linkSync(join(d, 'env.json'), join(nsa, 'supervisor.log'));
  const env = pin(join(d, 'env.json'));
  const fd = openOwnAppendSync(d, '.nsa-top/supervisor.log');
  try {
    writeSync(fd, 'supervise: started\n');
  } finally {
    closeSync(fd);
  }
  env();
  const lines = readFileSync(join(nsa, 'supervisor.log'), 'utf8').split('\n');
  assert.match(
    lines[0]!,
    /^nsa-top: .*supervisor\.log has 2 hard links .*renamed to supervisor\.log\.suspect-\S+ \(kept, not deleted\)/,
  );
  assert.equal(lines[1], 'supervise: started');
  assert.equal(asideOf(nsa, 'supervisor.log').length, 1);
});

test('an own log owned by another user is set aside, not appended to (needs root to make one)', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('SKIPPED: needs root to chown a file to another user');
    return;
  }
  const d = run('owner');
  const nsa = join(d, '.nsa-top');
  mkdirSync(nsa);
  writeFileSync(join(nsa, 'watchdog.jsonl'), 'planted\n');
  chownSync(join(nsa, 'watchdog.jsonl'), 65534, 65534);
  const done = await appendOwn(host, d, '.nsa-top/watchdog.jsonl', '{"event":"x"}\n');
  assert.match(done?.why ?? '', /owned by uid 65534, not by this user \(uid 0\)/);
  assert.equal(readFileSync(join(nsa, done!.setAside), 'utf8'), 'planted\n');
  assert.equal(readFileSync(join(nsa, 'watchdog.jsonl'), 'utf8'), '{"event":"x"}\n');
});

test('the detached agent: agent.log hard-linked to env.json and the action log to a file outside the run — neither changes, and the agent still writes .HALT after the next checkpoint', async () => {
  const t = trainTmp();
  const outside = join(tmp, 'outside-agent.txt');
  writeFileSync(outside, 'keep me\n');
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '60',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  try {
    await waitFor(
      'env.json and a first checkpoint',
      () => existsSync(join(t.out, 'env.json')) && readdirSync(t.out).some((x) => /^checkpoint_step\d+\.pt$/.test(x)),
      60_000,
    );
    const nsa = join(t.out, '.nsa-top');
    mkdirSync(nsa, { recursive: true });
    linkSync(join(t.out, 'env.json'), join(nsa, 'agent.log'));
    linkSync(outside, join(nsa, 'actions.jsonl'));
    const env = pin(join(t.out, 'env.json'));
    const out = pin(outside);
    const r = cli(['halt', t.out, '--after-checkpoint', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const req = (JSON.parse(r.stdout) as { request: ControlRequest }).request;
    assert.equal(req.owner?.kind, 'agent');
    agents.push(req.owner!);
    const exit = await Promise.race([p.exit, new Promise<null>((res) => setTimeout(() => res(null), 90_000).unref())]);
    assert.ok(exit, 'the trainer stopped on the agent’s .HALT');
    assert.ok(existsSync(join(t.out, '.HALT')));
    await waitFor(
      'the agent to leave',
      async () => !(await verifyProcess(host, req.owner!).catch(() => false)),
      30_000,
    );
    env();
    out();
    assert.equal(readFileSync(outside, 'utf8'), 'keep me\n');
    assert.match(readFileSync(join(nsa, 'agent.log'), 'utf8'), /^nsa-top: .*agent\.log has 2 hard links/);
    assert.equal(asideOf(nsa, 'agent.log').length, 1);
    assert.equal(asideOf(nsa, 'actions.jsonl').length, 1);
    assert.ok(
      (await readActions(host, t.out)).some((a) => a.action === 'halt-after-checkpoint' && a.result === 'ok'),
      'the agent’s steps are in the fresh action log',
    );
  } finally {
    p.child.kill('SIGKILL');
    rmSync(t.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
});

test("the agent's halt fails open: with the action log a symlink it cannot write through, the request is taken, .HALT written after the next checkpoint, and the result says NOT logged", async () => {
  const t = trainTmp();
  const p = train([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '100000',
    '--save-every',
    '60',
    '--log-every',
    '5',
    '--inject',
    'slow-data@ms=15',
  ]);
  try {
    await waitFor(
      'a first checkpoint',
      () => existsSync(t.out) && readdirSync(t.out).some((x) => /^checkpoint_step\d+\.pt$/.test(x)),
      60_000,
    );
    const nsa = join(t.out, '.nsa-top');
    mkdirSync(nsa, { recursive: true });
    const outside = join(tmp, 'outside-agent-log.jsonl');
    symlinkSync(outside, join(nsa, 'actions.jsonl'));
    const r = cli(['halt', t.out, '--after-checkpoint', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout) as { result: string; notLogged?: string; request: ControlRequest };
    assert.equal(j.result, 'started');
    assert.match(j.notLogged ?? '', /actions\.jsonl: is a symbolic link: refused/);
    assert.match(r.stderr, /NOT logged: .*actions\.jsonl: is a symbolic link/);
    agents.push(j.request.owner!);
    const exit = await Promise.race([p.exit, new Promise<null>((res) => setTimeout(() => res(null), 90_000).unref())]);
    assert.ok(exit, 'the trainer stopped on the agent’s .HALT');
    assert.match(readFileSync(join(t.out, '.HALT'), 'utf8'), /^halt: manual_stop /);
    await waitFor(
      'the agent to leave',
      async () => !(await verifyProcess(host, j.request.owner!).catch(() => false)),
      30_000,
    );
    assert.match(readFileSync(join(nsa, 'agent.log'), 'utf8'), /\.HALT written/);
    assert.equal(existsSync(outside), false, 'nothing written through the link');
  } finally {
    p.child.kill('SIGKILL');
    rmSync(t.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }
});
