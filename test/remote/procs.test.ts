// The process table through LocalHost, against real processes this test spawns: a fake
// `nsa-top train` launcher with rank children (RANK/LOCAL_RANK/WORLD_SIZE/NSA_TOP_RUN_DIR env),
// a torchrun-shaped launcher whose "python" workers (node behind a symlink named python3) carry
// RANK and CONFIG like the real trainer, and decoys that must not be taken for ranks.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  mkdtempSync,
  mkdirSync,
  writeFileSync,
  symlinkSync,
  readFileSync,
  readlinkSync,
  existsSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { LocalHost } from '../../src/remote/local/host.js';
import { quietTuning, statLinesLocal } from '../../src/remote/local/procs.js';
import { provenChanged } from '../../src/cockpit/rankpeek.js';
import type { ProcInfo, RunProcesses } from '../../src/remote/types.js';
import { findRunProcesses } from '../../src/trainer/run/processes.js';
import {
  listProcesses,
  parseProcScriptOutput,
  parseStat,
  PROC_SCRIPT,
  procScriptArgs,
  readProc,
  splitHeadOutput,
  verifyProcess,
} from '../../src/remote/procs.js';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-procs-'));
const host = new LocalHost();
const groups: ChildProcess[] = [];
after(() => {
  for (const c of groups) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

// A script that plays either launcher. As launcher it spawns `n` children running itself with a
// rank env, writes their pids to $PIDS_FILE and idles; as a rank it optionally forks one
// "data-loader worker" (same argv, same env) and idles.
const SCRIPT = `
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const idle = () => setInterval(() => {}, 1 << 30);
const role = process.env.ROLE;
if (role === 'launcher') {
  const n = Number(process.env.NPROC || '2');
  const kids = [];
  for (let r = 0; r < n; r++) {
    const env = { ...process.env, ROLE: 'rank', RANK: String(r), LOCAL_RANK: String(r), WORLD_SIZE: String(n) };
    const argv = JSON.parse(process.env.CHILD_ARGV);
    const c = spawn(argv[0], argv.slice(1), { env, stdio: 'ignore', argv0: argv[0] });
    kids.push(c.pid);
  }
  // written whole, then renamed: a reader never sees a half-written list
  fs.writeFileSync(process.env.PIDS_FILE + '.tmp', JSON.stringify(kids));
  fs.renameSync(process.env.PIDS_FILE + '.tmp', process.env.PIDS_FILE);
  idle();
} else if (role === 'rank' && process.env.RANK === '0' && !process.env.IS_WORKER) {
  const argv = JSON.parse(process.env.CHILD_ARGV);
  const w = spawn(argv[0], argv.slice(1), { env: { ...process.env, IS_WORKER: '1' }, stdio: 'ignore', argv0: argv[0] });
  fs.writeFileSync(process.env.PIDS_FILE + '.worker.tmp', String(w.pid));
  fs.renameSync(process.env.PIDS_FILE + '.worker.tmp', process.env.PIDS_FILE + '.worker');
  idle();
} else {
  idle();
}
`;

const bin = join(tmp, 'bin');
mkdirSync(bin);
const python3 = join(bin, 'python3');
symlinkSync(process.execPath, python3);
writeFileSync(join(bin, 'nsa-top.js'), SCRIPT);
writeFileSync(join(bin, 'torchrun'), SCRIPT);

async function waitFor<T>(
  f: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  what: string,
  ms = 10000,
): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function startGroup(argv: string[], opts: { cwd: string; env: Record<string, string> }): ChildProcess {
  const c = spawn(argv[0]!, argv.slice(1), {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: 'ignore',
    detached: true,
    argv0: argv[0],
  });
  groups.push(c);
  return c;
}

/** What the run's own records would say of a live process: a boot record and a heartbeat naming
 * its pid, written just after it started (the proof a rank needs besides its environment). */
async function recordOf(
  rank: number,
  pid: number,
): Promise<{ rank: number; pid: number; lastTs: number; bootTs: number }> {
  const p = await waitFor(() => readProc(host, pid), `pid ${pid}`);
  return { rank, pid, lastTs: p.startedAtMs! + 1000, bootTs: p.startedAtMs! + 500 };
}

async function pidsOf(file: string, withWorker = false): Promise<{ ranks: number[]; worker?: number }> {
  // (the writer renames a whole file into place; a partial read would still only mean "not yet")
  const readList = (): number[] | null => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as number[];
    } catch {
      return null;
    }
  };
  const ranks = await waitFor(() => existsSync(file) && readList(), file);
  if (!withWorker) return { ranks };
  const worker = await waitFor(
    () => existsSync(`${file}.worker`) && Number(readFileSync(`${file}.worker`, 'utf8')),
    'worker',
  );
  return { ranks, worker };
}

test('parseStat keeps comm whole when it holds spaces and parentheses', () => {
  // field N of stat is tail[N - 3]: state, ppid=1, …, starttime (22) = 987654, rss (24) = 21
  const tail = ['S', ...Array.from({ length: 30 }, (_, i) => (i + 1 === 19 ? '987654' : String(i + 1)))].join(' ');
  fc.assert(
    fc.property(
      fc.string({ maxLength: 20 }).filter((s) => !s.includes('\n')),
      fc.integer({ min: 1, max: 4194304 }),
      (comm, pid) => {
        const f = parseStat(`${pid} (${comm}) ${tail}`);
        assert.ok(f);
        assert.equal(f.pid, pid);
        assert.equal(f.comm, comm);
        assert.equal(f.state, 'S');
        assert.equal(f.ppid, 1);
        assert.equal(f.utime, 11);
        assert.equal(f.stime, 12);
        assert.equal(f.startTime, '987654');
        assert.equal(f.rssPages, 21);
      },
    ),
  );
  assert.equal(parseStat('garbage'), null);
});

test('a crafted argv that imitates a head header makes that entry unknown, not spoofed', () => {
  const out = '==> /dev/null <==\n\n==> 10/cmdline <==\nevil\0\n==> 11/cmdline <==\nfake\0\n==> 11/cmdline <==\nreal\0';
  const m = splitHeadOutput(out);
  assert.equal(m.get('11/cmdline'), null);
  assert.equal(m.get('/dev/null'), '');
});

test('readProc / verifyProcess: pid plus start time, and a dead or mismatched process is refused', async () => {
  // a long argument too: command lines are read into a buffer that grows (10 kB > its first 4 KiB)
  const long = 'x'.repeat(10_000);
  const c = spawn(process.execPath, ['-e', 'setInterval(()=>{},1e9)', long, 'marker-arg with space'], {
    stdio: 'ignore',
    env: { ...process.env, RANK: '3' },
  });
  try {
    // (a child read between fork and exec still shows its parent's argv and environ)
    const info = await waitFor(async () => {
      const i = await readProc(host, c.pid!);
      // (and its RSS is read once node has mapped itself, not in the first instant after exec)
      return i?.argv.at(-1) === 'marker-arg with space' && i.rssKiB! > 1000 && i;
    }, 'child');
    assert.equal(info.pid, c.pid);
    assert.deepEqual(info.argv.slice(-2), [long, 'marker-arg with space']);
    assert.equal(info.env.RANK, '3');
    assert.equal(info.ppid, process.pid);
    assert.ok(info.rssKiB! > 1000);
    assert.ok(/^\d+$/.test(info.startTime));
    assert.equal(await verifyProcess(host, { pid: c.pid!, startTime: info.startTime }), true);
    assert.equal(await verifyProcess(host, { pid: c.pid!, startTime: String(Number(info.startTime) + 1) }), false);
    c.kill('SIGKILL');
    await new Promise((r) => c.once('exit', r));
    assert.equal(await verifyProcess(host, { pid: c.pid!, startTime: info.startTime }), false);
    assert.equal(await readProc(host, c.pid!), null);
  } finally {
    c.kill('SIGKILL');
  }
});

test('listProcesses sees every process and measures CPU % between two refreshes', async () => {
  const busy = spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' });
  const idle = spawn('sleep', ['30'], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const first = await listProcesses(host);
    assert.equal(first.find((p) => p.pid === busy.pid)?.cpuPct, null, 'one sample: CPU unknown, not 0');
    await new Promise((r) => setTimeout(r, 1000));
    const all = await listProcesses(host);
    assert.ok(all.find((p) => p.pid === process.pid));
    const b = all.find((p) => p.pid === busy.pid);
    const s = all.find((p) => p.pid === idle.pid);
    assert.ok(b && s, 'children listed');
    // the box is shared (2 cores, many engineers): a busy loop gets what it gets, a sleeper ~0
    assert.ok(b.cpuPct !== null && b.cpuPct > 3, `busy loop shows CPU (${b.cpuPct})`);
    assert.ok(s.cpuPct !== null && s.cpuPct < 1 && s.cpuPct < b.cpuPct!, `a sleeper shows ~0 (${s.cpuPct})`);
    assert.equal(s.state, 'S');
  } finally {
    busy.kill('SIGKILL');
    idle.kill('SIGKILL');
  }
});

test('nsa-top reference trainer: launcher and its ranks from environ; a data-loader worker is not a rank; another run is ignored', async () => {
  const runDir = join(tmp, 'runs', 'ref run (1)');
  const other = join(tmp, 'runs', 'other');
  mkdirSync(runDir, { recursive: true });
  mkdirSync(other, { recursive: true });
  const nsaTop = join(bin, 'nsa-top.js');
  const mk = (dir: string, pidsFile: string) =>
    startGroup([process.execPath, nsaTop, 'train', '--out-dir', dir], {
      cwd: tmp,
      env: {
        ROLE: 'launcher',
        NPROC: '2',
        PIDS_FILE: pidsFile,
        NSA_TOP_RUN_DIR: dir,
        CHILD_ARGV: JSON.stringify([process.execPath, nsaTop, 'train', '--rank-worker']),
      },
    });
  const l1 = mk(runDir, join(tmp, 'ref.pids'));
  const l2 = mk(other, join(tmp, 'other.pids'));
  const { ranks: kids, worker } = await pidsOf(join(tmp, 'ref.pids'), true);
  const { ranks: otherKids } = await pidsOf(join(tmp, 'other.pids'));
  const gpu = {
    at: Date.now(),
    latencyMs: 1,
    devices: [],
    apps: [{ pid: kids[1]!, gpuUuid: 'GPU-b', usedMemMiB: 1234 }],
  };
  // its environment alone is a hint, not proof: with no record of the run naming them, no ranks
  const bare = await findRunProcesses(host, runDir, { heartbeatPids: [] });
  assert.deepEqual(bare.ranks, []);
  assert.deepEqual(
    (bare.unproven ?? [])
      .filter((u) => u.envOnly)
      .map((u) => u.pid)
      .sort(),
    [...kids, worker!].sort(),
    'the ranks and the data-loader worker',
  );
  // rank 0's boot record proves it, and its launcher; rank 1, a child of that launcher, is proven by
  // descent (a rank still starting has written no record yet). Even a stale heartbeat hint pointing
  // at the other run's rank must not pull it in
  const hints = [await recordOf(0, kids[0]!), { ...(await recordOf(1, otherKids[1]!)) }];
  const rp = await findRunProcesses(host, runDir, { heartbeatPids: hints, gpu });
  assert.equal(rp.error, undefined);
  assert.equal(rp.launcher?.pid, l1.pid);
  assert.deepEqual(
    rp.ranks.map((r) => [r.rank, r.localRank, r.proc.pid, r.source]),
    [
      [0, 0, kids[0], 'environ'],
      [1, 1, kids[1], 'environ'],
    ],
  );
  assert.equal(rp.ranks[1]!.gpuMemMiB, 1234);
  assert.equal(rp.ranks[1]!.gpuUuid, 'GPU-b');
  assert.equal(rp.ranks[0]!.gpuMemMiB, null, 'no compute-app entry: unknown, not 0');
  const all = [rp.launcher!.pid, ...rp.ranks.map((r) => r.proc.pid), ...rp.unknown.map((u) => u.pid)];
  assert.ok(!all.includes(worker!), 'the rank-0 worker child is not a rank');
  for (const p of otherKids) assert.ok(!all.includes(p), 'the other run is not ours');
  assert.ok(!all.includes(l2.pid!));
  // the same run found through a path spelled differently (trailing slash, ..)
  const rp2 = await findRunProcesses(host, `${join(tmp, 'runs', 'x', '..', 'ref run (1)')}/`, {
    heartbeatPids: hints,
  });
  assert.deepEqual(
    rp2.ranks.map((r) => r.proc.pid),
    kids,
  );
  // every rank is identified by pid + start time that verifyProcess accepts
  for (const r of rp.ranks) assert.equal(await verifyProcess(host, r.proc), true);
});

test('torchrun + python workers of the real trainer: matched through CONFIG, cwd and env.json', async () => {
  const repo = join(tmp, 'nsa-vibe');
  const runDir = join(repo, 'artifacts', 'm7c_125m_2xa100_prod');
  mkdirSync(runDir, { recursive: true });
  mkdirSync(join(repo, 'scripts'));
  writeFileSync(join(repo, 'scripts', 'train_showcase.py'), SCRIPT);
  writeFileSync(
    join(runDir, 'env.json'),
    JSON.stringify({ env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml', WORLD_SIZE: '2' } }),
  );
  // the proof: CONFIG names a yaml whose train.out_dir (relative to the rank's cwd) is the run dir
  mkdirSync(join(repo, 'configs'), { recursive: true });
  writeFileSync(
    join(repo, 'configs', 'm7c_125m_2xa100_production.yaml'),
    'model: {dim: 64}\ntrain:\n  steps: 10\n  out_dir: artifacts/m7c_125m_2xa100_prod\n',
  );
  writeFileSync(join(repo, 'configs', 'train_showcase.yaml'), 'train: {out_dir: "artifacts/train_showcase"}\n');
  const l = startGroup([python3, join(bin, 'torchrun'), '--nproc_per_node=2', 'scripts/train_showcase.py'], {
    cwd: repo,
    env: {
      ROLE: 'launcher',
      NPROC: '2',
      PIDS_FILE: join(tmp, 'tr.pids'),
      CONFIG: 'configs/m7c_125m_2xa100_production.yaml',
      CHILD_ARGV: JSON.stringify([python3, 'scripts/train_showcase.py']),
    },
  });
  const { ranks: kids } = await pidsOf(join(tmp, 'tr.pids'), true);
  // the real trainer's shape: rank 0 writes progress, rank 1's heartbeat file holds only `boot`
  const rp = await findRunProcesses(host, runDir, {
    heartbeatPids: [await recordOf(0, kids[0]!), await recordOf(1, kids[1]!)],
  });
  assert.equal(rp.launcher?.pid, l.pid);
  assert.equal(rp.launcher?.argv[1], join(bin, 'torchrun'));
  assert.deepEqual(
    rp.ranks.map((r) => [r.rank, r.proc.pid, r.source, r.proc.argv[0]]),
    [
      [0, kids[0], 'environ', python3],
      [1, kids[1], 'environ', python3],
    ],
  );
  assert.equal(rp.ranks[0]!.proc.cwd, repo);
  assert.equal(rp.ranks[0]!.proc.env.WORLD_SIZE, '2');
  // a run dir whose env.json names another config is not this launcher's
  const otherDir = join(repo, 'artifacts', 'train_showcase');
  mkdirSync(otherDir, { recursive: true });
  writeFileSync(join(otherDir, 'env.json'), JSON.stringify({ env: { CONFIG: 'configs/train_showcase.yaml' } }));
  const none = await findRunProcesses(host, otherDir, { heartbeatPids: [] });
  assert.equal(none.launcher, null);
  assert.deepEqual(none.ranks, []);
});

test('a heartbeat pid alone proves nothing: a trainer-looking process it names is listed as unproven, with why', async () => {
  const repo = join(tmp, 'bare');
  const runDir = join(tmp, 'elsewhere', 'run');
  mkdirSync(join(repo, 'scripts'), { recursive: true });
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(repo, 'scripts', 'train_showcase.py'), SCRIPT);
  // a trainer of some other run (no NSA_TOP_RUN_DIR, no CONFIG) that a copied heartbeat names
  const p = startGroup([python3, 'scripts/train_showcase.py'], { cwd: repo, env: { ROLE: 'solo' } });
  const info = await waitFor(() => readProc(host, p.pid!), 'solo');
  const started = info.startedAtMs!;
  const rp = await findRunProcesses(host, runDir, {
    heartbeatPids: [{ rank: 0, pid: p.pid!, lastTs: started + 5000, bootTs: started + 1000 }],
  });
  assert.deepEqual(rp.ranks, []);
  assert.deepEqual(rp.unknown, []);
  assert.equal(rp.unproven?.length, 1);
  assert.equal(rp.unproven![0]!.pid, p.pid);
  assert.match(
    rp.unproven![0]!.why,
    /heartbeat_rank0 names pid \d+, but its environment names neither NSA_TOP_RUN_DIR nor a CONFIG/,
  );
  // the same process with the run dir in its environment is a rank; a boot record that predates
  // its start means the pid was recycled
  const q = startGroup([python3, 'scripts/train_showcase.py'], {
    cwd: repo,
    env: { ROLE: 'solo', NSA_TOP_RUN_DIR: runDir },
  });
  const qi = await waitFor(async () => {
    const i = await readProc(host, q.pid!);
    return i && i.argv.at(-1) === 'scripts/train_showcase.py' && i;
  }, 'tied');
  const ok = await findRunProcesses(host, runDir, {
    heartbeatPids: [{ rank: 0, pid: q.pid!, lastTs: qi.startedAtMs! + 5000, bootTs: qi.startedAtMs! + 1000 }],
  });
  assert.deepEqual(
    ok.ranks.map((r) => [r.rank, r.proc.pid]),
    [[0, q.pid]],
  );
  const stale = await findRunProcesses(host, runDir, {
    heartbeatPids: [{ rank: 0, pid: q.pid!, lastTs: qi.startedAtMs! - 50_000, bootTs: qi.startedAtMs! - 60_000 }],
  });
  assert.deepEqual(stale.ranks, []);
  assert.match(stale.unproven![0]!.why, /after the boot record .* that names pid \d+: the pid was recycled/);
  // a boot record long after the process started: not the writer either
  const old = await findRunProcesses(host, runDir, {
    heartbeatPids: [{ rank: 0, pid: q.pid!, lastTs: qi.startedAtMs! + 3_600_000, bootTs: qi.startedAtMs! + 3_600_000 }],
  });
  assert.deepEqual(old.ranks, []);
  assert.match(old.unproven![0]!.why, /long before the boot record/);
  // and a heartbeat pid that is not a trainer at all (a plain `sleep`) is named as such
  const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
  try {
    await waitFor(() => readProc(host, sleeper.pid!), 'sleep');
    const rs = await findRunProcesses(host, runDir, {
      heartbeatPids: [{ rank: 0, pid: sleeper.pid! }, await recordOf(1, q.pid!)],
    });
    assert.deepEqual(
      rs.ranks.map((r) => r.proc.pid),
      [q.pid],
      'only the proven trainer',
    );
    assert.match(
      rs.unproven?.find((u) => u.pid === sleeper.pid)?.why ?? '',
      /its command \(sleep 30\) is not a trainer nsa-top knows/,
    );
  } finally {
    sleeper.kill('SIGKILL');
  }
});

test("nsa-top's own tools and python watchers that name the run are not its trainers", async () => {
  const runDir = join(tmp, 'watched run');
  mkdirSync(runDir, { recursive: true });
  mkdirSync(join(tmp, 'vibe', 'scripts'), { recursive: true });
  const idleJs = join(tmp, 'vibe', 'scripts', '_watchdog.py');
  writeFileSync(idleJs, 'setInterval(() => {}, 1 << 30)');
  const nsaTop = join(bin, 'nsa-top.js');
  // a supervisor (`nsa-top supervise`, cwd = run dir) whose child is the real launcher
  const sup = startGroup([process.execPath, nsaTop, 'supervise'], {
    cwd: runDir,
    env: {
      ROLE: 'launcher',
      NPROC: '1',
      PIDS_FILE: join(tmp, 'sup.pids'),
      NSA_TOP_RUN_DIR: runDir,
      CHILD_ARGV: JSON.stringify([process.execPath, nsaTop, 'train', '--out-dir', runDir]),
    },
  });
  const cockpit = startGroup([process.execPath, nsaTop, 'cockpit', runDir], { cwd: tmp, env: { ROLE: 'idle' } });
  const watchdog = startGroup([python3, idleJs, '--dir', runDir], { cwd: join(tmp, 'vibe'), env: { ROLE: 'idle' } });
  const {
    ranks: [launcherPid],
  } = await pidsOf(join(tmp, 'sup.pids'));
  // the supervisor's child is `nsa-top train --out-dir runDir` with RANK=0 from the fake: make
  // sure it is seen as the trainer and the tools are not
  await new Promise((r) => setTimeout(r, 300));
  const rp = await findRunProcesses(host, runDir, {
    heartbeatPids: [{ rank: 0, pid: cockpit.pid! }, await recordOf(1, launcherPid!)],
  });
  const all = [rp.launcher?.pid, ...rp.ranks.map((r) => r.proc.pid), ...rp.unknown.map((u) => u.pid)];
  assert.ok(all.includes(launcherPid), 'the train process is found');
  for (const [what, p] of [
    ['supervisor', sup.pid],
    ['cockpit', cockpit.pid],
    ['_watchdog.py', watchdog.pid],
  ] as const) {
    assert.ok(!all.includes(p), `${what} is not a trainer`);
  }
});

test('a rank that died unreaped stays a rank, in state Z, with the environ seen while it lived', async () => {
  const runDir = join(tmp, 'zombie run');
  mkdirSync(join(tmp, 'zrepo', 'scripts'), { recursive: true });
  mkdirSync(runDir, { recursive: true });
  const script = join(tmp, 'zrepo', 'scripts', 'train_showcase.py');
  writeFileSync(script, `setTimeout(() => process.exit(3), Number(process.env.LIVE_MS))`);
  // sh starts the "rank" in the background, then becomes `sleep`, which never reaps it (its pid
  // file written whole, then renamed: a reader never sees a half-written one)
  const parent = startGroup(
    [
      'sh',
      '-c',
      `"$0" "$1" & echo $! > "$2.tmp" && mv "$2.tmp" "$2"; exec sleep 60`,
      python3,
      script,
      join(tmp, 'z.pid'),
    ],
    {
      cwd: join(tmp, 'zrepo'),
      env: { RANK: '1', LOCAL_RANK: '1', WORLD_SIZE: '2', NSA_TOP_RUN_DIR: runDir, LIVE_MS: '1500' },
    },
  );
  void parent;
  const pid = await waitFor(
    () => existsSync(join(tmp, 'z.pid')) && Number(readFileSync(join(tmp, 'z.pid'), 'utf8')),
    'rank pid',
  );
  const rec = await recordOf(1, pid);
  const alive = await waitFor(async () => {
    const r = await findRunProcesses(host, runDir, { heartbeatPids: [rec] });
    return r.ranks.length === 1 && r.ranks[0]!.proc.argv.length > 0 && r;
  }, 'live rank');
  assert.deepEqual([alive.ranks[0]!.rank, alive.ranks[0]!.source], [1, 'environ']);
  const dead = await waitFor(async () => {
    const r = await findRunProcesses(host, runDir, { heartbeatPids: [rec] });
    return r.ranks[0]?.proc.state === 'Z' && r;
  }, 'zombie');
  assert.deepEqual(
    [dead.ranks[0]!.rank, dead.ranks[0]!.proc.pid, dead.ranks[0]!.source, dead.ranks[0]!.proc.env.RANK],
    [1, pid, 'environ', '1'],
  );
});

test('ranks started with node options before nsa-top.js (node --enable-source-maps --import=… --require X nsa-top.js train) are still ranks', async () => {
  const runDir = join(tmp, 'runs', 'node-options');
  mkdirSync(runDir, { recursive: true });
  const nsaTop = join(bin, 'nsa-top.js');
  const preload = join(tmp, 'preload.cjs');
  writeFileSync(preload, '');
  const nodeArgs = [process.execPath, '--enable-source-maps', '--import=data:text/javascript,0', '--require', preload];
  const l = startGroup([...nodeArgs, nsaTop, 'train', '--out', runDir], {
    cwd: tmp,
    env: {
      ROLE: 'launcher',
      NPROC: '2',
      PIDS_FILE: join(tmp, 'opts.pids'),
      NSA_TOP_RUN_DIR: runDir,
      CHILD_ARGV: JSON.stringify([...nodeArgs, nsaTop, 'train', '--rank-worker']),
    },
  });
  const { ranks: kids } = await pidsOf(join(tmp, 'opts.pids'));
  const rp = await findRunProcesses(host, runDir, { heartbeatPids: [await recordOf(0, kids[0]!)] });
  assert.equal(rp.launcher?.pid, l.pid, 'the launcher is recognised past node options');
  assert.deepEqual(
    rp.ranks.map((r) => [r.rank, r.proc.pid]),
    [
      [0, kids[0]],
      [1, kids[1]],
    ],
  );
});

test('the in-process process table (LocalHost) reads what the shell script reads: run, list and all modes', async () => {
  // LocalHost answers the process table without a child process; the script stays the path over
  // SSH and the fallback. Both must describe the same processes the same way.
  const scriptOnly = new Proxy(new LocalHost(), {
    get(t, k) {
      if (k === 'readProcTable') return undefined;
      const v = Reflect.get(t, k) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  const inProcess = new LocalHost();
  const runDir = join(tmp, 'equiv-run');
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(runDir, 'env.json'), '{"env":\n{"CONFIG": "configs/equiv.yaml"}}\n');
  const l = startGroup([process.execPath, join(bin, 'nsa-top.js'), 'train', '--out', runDir], {
    cwd: runDir,
    env: {
      ROLE: 'launcher',
      NPROC: '2',
      PIDS_FILE: join(tmp, 'equiv.pids'),
      NSA_TOP_RUN_DIR: runDir,
      CHILD_ARGV: JSON.stringify([process.execPath, join(bin, 'nsa-top.js'), 'train', '--rank']),
    },
  });
  const { ranks: kids } = await pidsOf(join(tmp, 'equiv.pids'));
  // what changes between two reads by nature (CPU % needs two samples, RSS and state move, the start
  // time in ms is estimated from uptime at read time) is left out; identity, argv, env and cwd are not
  const strip = (p: ProcInfo | null | undefined) =>
    p
      ? { ...p, cpuPct: null, cpuTotalS: null, ageS: null, startedAtMs: null, rssKiB: null, state: null, wchan: null }
      : p;
  const hints = [await recordOf(0, kids[0]!)];
  const a = await findRunProcesses(inProcess, runDir, { heartbeatPids: hints });
  const b = await findRunProcesses(scriptOnly, runDir, { heartbeatPids: hints });
  assert.equal(a.launcher?.pid, l.pid);
  assert.deepEqual(
    a.ranks.map((r) => r.proc.pid),
    kids,
  );
  assert.deepEqual(strip(a.launcher), strip(b.launcher));
  assert.deepEqual(
    a.ranks.map((r) => ({ ...r, proc: strip(r.proc) })),
    b.ranks.map((r) => ({ ...r, proc: strip(r.proc) })),
  );
  assert.ok(Math.abs(a.launcher!.startedAtMs! - b.launcher!.startedAtMs!) < 1000);
  // CPU used since start and the age, both ways (the straggler view's one-look share)
  assert.ok(a.launcher!.ageS! > 0 && b.launcher!.ageS! > 0 && a.launcher!.cpuTotalS! >= 0);
  assert.ok(a.launcher!.rssKiB! > 1000 && /^[RSDZTtIX]$/.test(a.launcher!.state));
  assert.equal(a.launcher?.cwd, runDir);
  assert.equal(a.ranks[1]?.proc.env.RANK, '1');
  // list mode (what verifyProcess and the signal path use)
  assert.deepEqual(strip(await readProc(inProcess, kids[0]!)), strip(await readProc(scriptOnly, kids[0]!)));
  assert.equal(await readProc(inProcess, 2 ** 22 + 7), null);
  // all mode: the same view of the group's processes
  const mine = new Set([l.pid!, ...kids]);
  const pick = (ps: Awaited<ReturnType<typeof listProcesses>>) =>
    ps
      .filter((p) => mine.has(p.pid))
      .map(strip)
      .sort((x, y) => x!.pid - y!.pid);
  const allA = pick(await listProcesses(inProcess));
  assert.equal(allA.length, 3);
  assert.deepEqual(allA, pick(await listProcesses(scriptOnly)));
});

test("nsa-top's own single-process trainer started by hand (train --out DIR) is rank 0 of DIR by its own command, and of no other run", async () => {
  const runDir = join(tmp, 'runs', 'single');
  const other = join(tmp, 'runs', 'single-other');
  mkdirSync(runDir, { recursive: true });
  mkdirSync(other, { recursive: true });
  const nsaTop = join(bin, 'nsa-top.js');
  const p = startGroup([process.execPath, nsaTop, 'train', '--out', runDir, '--steps', '10'], {
    cwd: tmp,
    env: { ROLE: 'idle' },
  });
  await waitFor(async () => (await readProc(host, p.pid!))?.argv.at(-1) === '10', 'single trainer');
  const rp = await findRunProcesses(host, runDir, { heartbeatPids: [await recordOf(0, p.pid!)] });
  assert.equal(rp.launcher, null);
  assert.deepEqual(
    rp.ranks.map((r) => [r.rank, r.proc.pid]),
    [[0, p.pid]],
  );
  const no = await findRunProcesses(host, other, { heartbeatPids: [{ rank: 0, pid: p.pid! }] });
  assert.deepEqual(no.ranks, []);
  assert.match(no.unproven?.[0]?.why ?? '', /no proof|environment/);
});

test('a working directory whose name holds a newline cannot forge the cwd of another process (local and script)', async () => {
  const victim = startGroup([python3, join(bin, 'torchrun')], { cwd: tmp, env: { ROLE: 'idle' } });
  await waitFor(() => readProc(host, victim.pid!), 'victim');
  const evil = join(tmp, `evil\nD ${victim.pid} /forged`);
  mkdirSync(evil, { recursive: true });
  const e = startGroup([python3, join(bin, 'torchrun')], { cwd: evil, env: { ROLE: 'idle' } });
  await waitFor(() => readProc(host, e.pid!), 'evil');
  const scriptOnly = new Proxy(new LocalHost(), {
    get(t, k) {
      if (k === 'readProcTable') return undefined;
      const v = Reflect.get(t, k) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  for (const h of [new LocalHost(), scriptOnly]) {
    const all = await findRunProcesses(h, tmp, { heartbeatPids: [] }).then(() => listProcesses(h));
    const v = all.find((p) => p.pid === victim.pid);
    assert.equal(v?.cwd, tmp, 'the victim keeps its own cwd');
    assert.equal(all.find((p) => p.pid === e.pid)?.cwd ?? null, null, 'the crafted cwd is left out');
  }
});

test("'run' mode skips processes already seen not to look like trainers, yet sees a new one at once and a young one that execs into a trainer by the next full scan", async (t) => {
  if (process.platform !== 'linux' || !existsSync('/usr/bin/python3')) {
    t.skip('needs Linux /proc and /usr/bin/python3');
    return;
  }
  const local = new LocalHost();
  const table = async () => {
    const tb = await local.readProcTable({ runDir: '', sysconf: false, mode: 'run', known: [], pids: [] }, 15000);
    assert.ok(tb);
    return new Map(tb.procs.map((r) => [Number(r.stat.slice(0, r.stat.indexOf(' '))), parseStat(r.stat)?.comm]));
  };
  // a shell (not trainer-looking) that turns into python3 in place, keeping its pid
  const trigger = join(tmp, 'exec-now');
  const sh = spawn(
    'sh',
    [
      '-c',
      `while [ ! -e "$1" ]; do sleep 0.05; done; exec /usr/bin/python3 -c 'import time; time.sleep(60)'`,
      'sh',
      trigger,
    ],
    { stdio: 'ignore', detached: true },
  );
  groups.push(sh);
  const waitFor = async (what: string, ok: () => Promise<boolean> | boolean, ms = 15000) => {
    const end = Date.now() + ms;
    while (!(await ok())) {
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await waitFor('the shell to start', () => existsSync(`/proc/${sh.pid}/stat`));
  assert.equal((await table()).has(sh.pid!), false, 'a shell is not a candidate');
  // a new trainer-looking pid is read on the very next refresh, full scan or not
  const py = spawn('/usr/bin/python3', ['-c', 'import time; time.sleep(60)'], { stdio: 'ignore', detached: true });
  groups.push(py);
  await waitFor('python3 to exec', () => readFileSync(`/proc/${py.pid}/comm`, 'utf8').startsWith('python'));
  assert.match((await table()).get(py.pid!) ?? '', /^python/, 'a new python3 is seen at once');
  // the shell (seconds old: no firm verdict yet) turns into python3 in place: seen by the next full
  // scan (5 s), never missed for good
  writeFileSync(trigger, '');
  await waitFor('the shell to exec python3', () => readFileSync(`/proc/${sh.pid}/comm`, 'utf8').startsWith('python'));
  const t0 = Date.now();
  await waitFor('the exec to be seen', async () => (await table()).has(sh.pid!), 12000);
  assert.ok(Date.now() - t0 < 8000, `seen after ${Date.now() - t0} ms`);
});

test("'run' mode keeps a command line between refreshes, yet an exec in place — even of the same program — is seen at once", async (t) => {
  if (process.platform !== 'linux' || !existsSync('/usr/bin/python3')) {
    t.skip('needs Linux /proc and /usr/bin/python3');
    return;
  }
  const local = new LocalHost();
  const argvOf = async (pid: number) => {
    const tb = await local.readProcTable({ runDir: '', sysconf: false, mode: 'run', known: [], pids: [pid] }, 15000);
    assert.ok(tb);
    return (tb.cmdline.get(pid) ?? '').split('\0').filter(Boolean);
  };
  // python3 that execs python3 again (same program, same comm, same pid and start time), new argv
  const trigger = join(tmp, 'reexec-now');
  const py = spawn(
    '/usr/bin/python3',
    [
      '-c',
      'import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\nos.execv("/usr/bin/python3", ["python3", "-c", "import time; time.sleep(60)", "after-exec"])',
      trigger,
      'before-exec',
    ],
    { stdio: 'ignore', detached: true },
  );
  groups.push(py);
  const end = Date.now() + 15000;
  while (!readFileSync(`/proc/${py.pid}/cmdline`, 'utf8').includes('before-exec')) {
    assert.ok(Date.now() < end, 'python3 did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal((await argvOf(py.pid!)).at(-1), 'before-exec');
  assert.equal((await argvOf(py.pid!)).at(-1), 'before-exec', 'kept between refreshes');
  writeFileSync(trigger, '');
  // (the first program's text names after-exec too: the exec is done when before-exec is gone)
  while (readFileSync(`/proc/${py.pid}/cmdline`, 'utf8').includes('before-exec')) {
    assert.ok(Date.now() < end, 'python3 did not exec');
    await new Promise((r) => setTimeout(r, 50));
  }
  // the very next refresh: the exec moved the new image's code and stack (stat fields 26 and 28)
  assert.equal((await argvOf(py.pid!)).at(-1), 'after-exec');
});

test("'run' mode: an old process judged not a trainer is not read again until its recheck — unless it is the parent of a trainer-looking process (a launcher that exec'd in place)", async (t) => {
  if (process.platform !== 'linux' || !existsSync('/usr/bin/python3')) {
    t.skip('needs Linux /proc and /usr/bin/python3');
    return;
  }
  // every read a full scan, every verdict firm at once, a recheck far away
  const saved = { ...quietTuning };
  Object.assign(quietTuning, { fullScanMs: 0, firmAgeS: 0, recheckMs: 600_000 });
  t.after(() => Object.assign(quietTuning, saved));
  const local = new LocalHost();
  const table = async () => {
    const tb = await local.readProcTable({ runDir: '', sysconf: false, mode: 'run', known: [], pids: [] }, 15000);
    assert.ok(tb);
    return new Map(tb.procs.map((r) => [Number(r.stat.slice(0, r.stat.indexOf(' '))), parseStat(r.stat)!]));
  };
  const waitFor = async (what: string, ok: () => boolean, ms = 15000) => {
    const end = Date.now() + ms;
    while (!ok()) {
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const comm = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      return '';
    }
  };
  // two shells that turn into python3 in place on a trigger: `lone` stays alone, `launcher` starts a
  // python3 child (a rank) first thing after its exec
  const trigger = join(tmp, 'firm-exec-now');
  const wait = `while [ ! -e "$1" ]; do sleep 0.05; done; exec /usr/bin/python3 -c "$2"`;
  const lone = spawn('sh', ['-c', wait, 'sh', trigger, 'import time; time.sleep(60)'], {
    stdio: 'ignore',
    detached: true,
  });
  const launcher = spawn(
    'sh',
    [
      '-c',
      wait,
      'sh',
      trigger,
      'import subprocess, sys, time\nsubprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])\ntime.sleep(60)',
    ],
    { stdio: 'ignore', detached: true },
  );
  groups.push(lone, launcher);
  await waitFor('the shells to start', () => comm(lone.pid!) === 'sh' && comm(launcher.pid!) === 'sh');
  const before = await table();
  assert.equal(before.has(lone.pid!), false, 'a shell is not a candidate');
  assert.equal(before.has(launcher.pid!), false, 'a shell is not a candidate');
  writeFileSync(trigger, '');
  let child = 0;
  await waitFor('both to exec python3 and the launcher to start its child', () => {
    const kids = readFileSync(`/proc/${launcher.pid}/task/${launcher.pid}/children`, 'utf8').trim();
    child = Number(kids.split(' ')[0] || 0);
    return (
      comm(lone.pid!).startsWith('python') &&
      comm(launcher.pid!).startsWith('python') &&
      child > 0 &&
      comm(child).startsWith('python')
    );
  });
  const after = await table();
  // the new pid is read at once, and its parent, judged a shell before, is read again with it
  assert.match(after.get(child)?.comm ?? '', /^python/, 'the new rank is seen at once');
  assert.equal(after.get(child)?.ppid, launcher.pid);
  assert.match(after.get(launcher.pid!)?.comm ?? '', /^python/, 'its parent is read again: the launcher is seen');
  // the firm verdict on the lone shell holds (its stat is not read) until its recheck
  assert.equal(after.has(lone.pid!), false, 'a firm verdict is not re-read every full scan');
  quietTuning.recheckMs = 0;
  assert.match((await table()).get(lone.pid!)?.comm ?? '', /^python/, 'seen at the recheck');
});

test("the collector's look at each proven rank (rankpeek) reads /proc/PID/stat in place: stopped, running again, gone", async (t) => {
  if (process.platform !== 'linux') {
    t.skip('needs Linux /proc');
    return;
  }
  const local = new LocalHost();
  const p = spawn('sleep', ['30'], { stdio: 'ignore', detached: true });
  groups.push(p);
  const line = () => statLinesLocal([p.pid!, 0, 2 ** 22 + 7]).get(p.pid!);
  const stateNow = () => parseStat(line() ?? '')?.state;
  const until = async (what: string, ok: () => boolean) => {
    const end = Date.now() + 15000;
    while (!ok()) {
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await until('sleep to exec', () => parseStat(line() ?? '')?.comm === 'sleep');
  assert.deepEqual(
    [...statLinesLocal([p.pid!, 0, 2 ** 22 + 7]).keys()],
    [p.pid],
    'a pid without a process is left out',
  );
  const f = parseStat(line()!)!;
  const rank = {
    pid: p.pid!,
    ppid: f.ppid,
    startTime: f.startTime,
    state: f.state,
    cpuPct: null,
    rssKiB: null,
    wchan: null,
    argv: [],
    env: {},
  };
  const procs = {
    at: Date.now(),
    launcher: null,
    ranks: [{ rank: 0, proc: rank }],
    unknown: [],
  } as unknown as RunProcesses;
  assert.equal(await provenChanged(local, procs), false, 'runs as the table said');
  process.kill(p.pid!, 'SIGSTOP');
  await until('the stop', () => stateNow() === 'T');
  assert.equal(await provenChanged(local, procs), true, 'stopped');
  process.kill(p.pid!, 'SIGCONT');
  await until('the continue', () => stateNow() !== 'T');
  assert.equal(await provenChanged(local, procs), false, 'runs again');
  process.kill(p.pid!, 'SIGKILL');
  await until('the end', () => line() === undefined);
  assert.equal(await provenChanged(local, procs), true, 'gone');
});

test("'run' mode keeps a trainer's parent whatever its comm (torch 2.x's torchrun is not \"torchrun\"), in process and in the script", async (t) => {
  // seen on an H100: the launcher of the real trainer never reached the table, so a rank's death
  // under a supervisor read as a hang (STALLED, critical) instead of the restart's teardown
  const dir = join(tmp, 'odd-launcher');
  mkdirSync(dir, { recursive: true });
  const script = join(dir, 'pt_elastic');
  writeFileSync(script, '#!/bin/sh\npython3 -c "import time; time.sleep(60)"\n', { mode: 0o755 });
  const launcher = spawn(script, [], { stdio: 'ignore' });
  t.after(() => {
    try {
      process.kill(-launcher.pid!, 'SIGKILL');
    } catch {
      /* not a group */
    }
    launcher.kill('SIGKILL');
  });
  const req = { runDir: '', sysconf: false, mode: 'run' as const, known: [], pids: [] };
  let child: number | null = null;
  for (let i = 0; i < 100 && child === null; i++) {
    const kids = readFileSync(`/proc/${launcher.pid}/task/${launcher.pid}/children`, 'utf8').trim();
    if (kids) child = Number(kids.split(/\s+/)[0]);
    else await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(child, 'the python child started');
  // until the child runs python itself: a PATH lookup may go through pyenv's shim, a bash script
  // named python3 (its comm already "python3") that execs python only after running pyenv
  const exe = () => {
    try {
      return readlinkSync(`/proc/${child}/exe`);
    } catch {
      return '';
    }
  };
  for (let i = 0; i < 200 && !/\/python[\d.]*$/.test(exe()); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(exe(), /\/python[\d.]*$/, 'the child runs python');
  const local = new LocalHost();
  const pidsIn = (stats: string[]) => stats.map((s) => parseStat(s)?.pid);
  const inProcess = (await local.readProcTable({ ...req }, 15000))!;
  assert.ok(
    pidsIn(inProcess.procs.map((p) => p.stat)).includes(child!),
    'the python child is a trainer-looking process',
  );
  assert.ok(
    pidsIn(inProcess.procs.map((p) => p.stat)).includes(launcher.pid),
    'its parent (comm pt_elastic) is kept too',
  );
  const r = await local.exec(['sh', '-c', PROC_SCRIPT, 'nsa-top-procs', ...procScriptArgs(req)], { timeoutMs: 15000 });
  const viaScript = parseProcScriptOutput(r.stdout);
  assert.ok(pidsIn(viaScript.procs.map((p) => p.stat)).includes(launcher.pid), 'the script keeps the parent too');
});
