// Run matching over ProcInfo data (no processes started): which processes are this run's ranks,
// its launcher, and why the others are not. The same rules against real processes, read through
// a Host, are in test/remote/procs.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ProcInfo, RunProcesses } from '../../../src/remote/types.js';
import {
  configReadRefusal,
  isToolProcess,
  matchRun,
  runVerdict,
  whyNotRunProcess,
} from '../../../src/trainer/run/ranks.js';

const proc = (pid: number, over: Partial<ProcInfo> = {}): ProcInfo => ({
  pid,
  ppid: 1,
  startTime: String(pid * 10),
  state: 'S',
  cpuPct: null,
  rssKiB: 1,
  wchan: null,
  argv: ['/usr/bin/python3', '-u', 'scripts/train_showcase.py'],
  env: { NSA_TOP_RUN_DIR: '/runs/r', RANK: '0', WORLD_SIZE: '1' },
  cwd: '/repo',
  ...over,
});

test("matchRun: a tied trainer that started long before the run's first record is not a rank, unless the heartbeats name it", () => {
  const t0 = Date.UTC(2026, 0, 1, 12);
  const ctx = { runDirs: new Set(['/runs/r']) };
  const old = proc(100, { startedAtMs: t0 - 20 * 60_000 });
  const fresh = proc(200, { startedAtMs: t0 - 60_000 });
  // a data-loader worker of the old trainer (same argv and environment, started recently)
  const worker = { ...proc(300, { startedAtMs: t0 - 30_000 }), ppid: 100 };
  const r = matchRun(
    [old, fresh, worker],
    ctx,
    [{ rank: 0, pid: 200, lastTs: t0 + 1000, bootTs: t0 - 50_000 }],
    null,
    t0,
    undefined,
    t0,
  );
  assert.deepEqual(
    r.ranks.map((x) => x.proc.pid),
    [200],
    'neither the old trainer nor its worker',
  );
  assert.match(
    r.unproven?.find((u) => u.pid === 100)?.why ?? '',
    /names this run in its environment, but it started at .*, long before the run's first record/,
  );
  // named by the heartbeats (its records go on after a rotated heartbeat file): judged by them
  const named = matchRun([old], ctx, [{ rank: 0, pid: 100, lastTs: t0 + 5000, bootTs: null }], null, t0, undefined, t0);
  assert.deepEqual(
    named.ranks.map((x) => x.proc.pid),
    [100],
  );
  // a boot record that names it long after it started: another process with the same pid
  const boot = matchRun([old], ctx, [{ rank: 0, pid: 100, lastTs: t0 + 5000, bootTs: t0 }], null, t0, undefined, t0);
  assert.deepEqual(boot.ranks, []);
  assert.match(boot.unproven![0]!.why, /long before the boot record/);
});

test('matchRun: ranks by RANK under their launcher, a worker of a rank is not a rank, another run is ignored', () => {
  const env = (rank: string, dir = '/runs/r') => ({ NSA_TOP_RUN_DIR: dir, RANK: rank, WORLD_SIZE: '2' });
  const launcher = proc(10, {
    argv: ['torchrun', '--nproc-per-node', '2', 'scripts/train_showcase.py'],
    env: { NSA_TOP_RUN_DIR: '/runs/r' },
  });
  const r0 = proc(11, { ppid: 10, env: env('0') });
  const r1 = proc(12, { ppid: 10, env: env('1') });
  const worker = proc(13, { ppid: 11, env: env('0') });
  const other = proc(20, { env: env('0', '/runs/other') });
  for (const p of [launcher, r0, r1, worker, other]) p.startedAtMs = 1000;
  // rank 0's boot record names it; rank 1 (no record yet: still starting) is proven by descent
  // from rank 0's launcher
  const hints = [{ rank: 0, pid: 11, lastTs: 5000, bootTs: 2000 }];
  const r = matchRun([launcher, r0, r1, worker, other], { runDirs: new Set(['/runs/r']) }, hints, null, 1);
  assert.equal(r.launcher?.pid, 10);
  assert.deepEqual(
    r.ranks.map((x) => [x.rank, x.proc.pid, x.source]),
    [
      [0, 11, 'environ'],
      [1, 12, 'environ'],
    ],
  );
  assert.deepEqual(r.unknown, []);
  assert.equal(r.unproven, undefined);
});

test('isToolProcess: nsa-top subcommands other than train and python watchers, never a trainer', () => {
  assert.equal(isToolProcess(proc(1, { argv: ['node', '--import=x', '/opt/nsa-top.js', 'cockpit', '/runs/r'] })), true);
  assert.equal(isToolProcess(proc(1, { argv: ['node', '/opt/nsa-top.js', 'train', '--out', '/runs/r'] })), false);
  assert.equal(isToolProcess(proc(1, { argv: ['python3', 'scripts/_watchdog.py'], env: {} })), true);
  assert.equal(isToolProcess(proc(1)), false);
});

test('configReadRefusal: a CONFIG is read only for a candidate that may be this run', () => {
  const p = proc(5, { env: { CONFIG: 'configs/a.yaml' }, cwd: '/repo' });
  const dirs = new Set(['/repo/artifacts/train_runs/x']);
  assert.equal(configReadRefusal(p, '/repo/configs/a.yaml', null, new Set([5]), dirs), null, 'named by a heartbeat');
  assert.equal(configReadRefusal(p, '/repo/configs/a.yaml', 'configs/a.yaml', new Set(), dirs), null);
  assert.match(configReadRefusal(p, '/repo/configs/a.yaml', 'configs/b.yaml', new Set(), dirs) ?? '', /not the CONFIG/);
  assert.equal(configReadRefusal(p, '/repo/configs/a.yaml', null, new Set(), dirs), null, 'its cwd holds the run dir');
  assert.match(
    configReadRefusal(p, '/repo/configs/a.yaml', null, new Set(), new Set(['/elsewhere/x'])) ?? '',
    /no env\.json/,
  );
});

test('runVerdict / whyNotRunProcess: the proof a signal asks for, by pid and start time', () => {
  const rank = proc(11);
  const rp: RunProcesses = {
    at: 1,
    launcher: proc(10),
    ranks: [{ rank: 0, localRank: 0, proc: rank, gpuMemMiB: null, gpuUuid: null, source: 'environ' }],
    unknown: [],
    unproven: [
      {
        pid: 30,
        startTime: '300',
        rank: null,
        argv: [],
        why: 'pid 30 is odd: not a rank of this run, never signalled',
      },
    ],
  };
  assert.equal(runVerdict(rp, { pid: 11, startTime: '110' }, false), null);
  assert.equal(
    runVerdict(rp, { pid: 11, startTime: '111' }, false),
    undefined,
    'another start time: not this rank, judged afresh',
  );
  assert.match(runVerdict(rp, { pid: 10, startTime: '100' }, false) ?? '', /is the launcher/);
  assert.equal(runVerdict(rp, { pid: 10, startTime: '100' }, true), null);
  assert.equal(runVerdict(rp, { pid: 30, startTime: '300' }, false), 'pid 30 is odd');
  assert.match(
    runVerdict({ ...rp, ranks: [], launcher: null, error: 'boom' }, { pid: 11, startTime: '110' }, false) ?? '',
    /could not read the process table: boom/,
  );
  assert.equal(whyNotRunProcess(null, { pid: 7, startTime: '1' }), 'pid 7 is gone');
  assert.match(whyNotRunProcess(proc(7), { pid: 7, startTime: '1' }), /another process/);
  assert.match(
    whyNotRunProcess(proc(7, { argv: ['bash'] }), { pid: 7, startTime: '70' }),
    /not a trainer nsa-top knows/,
  );
  assert.match(whyNotRunProcess(proc(7), { pid: 7, startTime: '70' }), /not among this run's proven ranks/);
});

test('matchRun: the environment alone is a hint, never proof — impostors, recycled pids, a rotated boot record', () => {
  const t0 = Date.UTC(2026, 0, 1, 12);
  const ctx = { runDirs: new Set(['/runs/r']) };
  const env = (rank: string) => ({ NSA_TOP_RUN_DIR: '/runs/r', RANK: rank, WORLD_SIZE: '2' });
  const launcher = proc(10, {
    argv: ['torchrun', '--nproc-per-node', '2', 'scripts/train_showcase.py'],
    env: { NSA_TOP_RUN_DIR: '/runs/r' },
    startedAtMs: t0 - 60_000,
  });
  const r0 = proc(11, { ppid: 10, env: env('0'), startedAtMs: t0 - 59_000 });
  const r1 = proc(12, { ppid: 10, env: env('1'), startedAtMs: t0 - 59_000 });
  // records: rank 0 booted at t0 - 50 s and wrote until t0; rank 1's file holds only its boot
  const hints = [
    { rank: 0, pid: 11, lastTs: t0, bootTs: t0 - 50_000 },
    { rank: 1, pid: 12, lastTs: t0 - 50_000, bootTs: t0 - 50_000 },
  ];
  // the real trainer's shape proves both ranks
  const real = matchRun([launcher, r0, r1], ctx, hints, null, t0);
  assert.deepEqual(
    real.ranks.map((x) => [x.rank, x.proc.pid]),
    [
      [0, 11],
      [1, 12],
    ],
  );
  // an impostor started after the run's last record, with the run's NSA_TOP_RUN_DIR and RANK, by
  // hand (not under the launcher): not a rank, named with why
  const impostor = proc(40, { env: env('1'), startedAtMs: t0 + 10_000 });
  const withImp = matchRun([launcher, r0, r1, impostor], ctx, hints, null, t0);
  assert.deepEqual(
    withImp.ranks.map((x) => x.proc.pid),
    [11, 12],
  );
  const u = withImp.unproven?.find((x) => x.pid === 40);
  assert.equal(u?.envOnly, true);
  assert.match(u?.why ?? '', /no record of the run names pid 40 .* not a child of the run's launcher/);
  assert.equal(runVerdict(withImp, { pid: 40, startTime: '400' }, false)?.includes('no record of the run'), true);
  // the same impostor when no record is left at all (rotated files): still not a rank
  const none = matchRun([launcher, r0, r1, impostor], ctx, [], null, t0);
  assert.deepEqual(none.ranks, []);
  // rank 1 died; its pid reused by a process with the same command, after its boot record
  const reused = proc(12, { ppid: 1, env: env('1'), startedAtMs: t0 + 200, startTime: '999' });
  const rr = matchRun([launcher, r0, reused], ctx, hints, null, t0);
  assert.deepEqual(
    rr.ranks.map((x) => x.proc.pid),
    [11],
  );
  assert.match(rr.unproven?.find((x) => x.pid === 12)?.why ?? '', /after the boot record .* recycled/);
  // with the boot record rotated away, the last heartbeat naming the pid still tells
  const noBoot = [{ rank: 1, pid: 12, lastTs: t0 - 50_000, bootTs: null }];
  const rb = matchRun([reused], ctx, noBoot, null, t0);
  assert.deepEqual(rb.ranks, []);
  assert.match(rb.unproven?.[0]?.why ?? '', /after the last heartbeat .* recycled/);
  // even under the launcher, a recycled pid is refused by its records (not rescued by descent)
  const reusedUnder = { ...reused, ppid: 10 };
  const ru = matchRun([launcher, r0, reusedUnder], ctx, hints, null, t0);
  assert.deepEqual(
    ru.ranks.map((x) => x.proc.pid),
    [11],
  );
  // a record without a start time to tie it to: not proof
  const unknownStart = { ...r0, startedAtMs: null };
  assert.deepEqual(matchRun([unknownStart], ctx, hints, null, t0).ranks, []);
  // a launcher known by its environment only proves nothing below it
  const l2 = matchRun([launcher, r1], ctx, [], null, t0);
  assert.deepEqual(l2.ranks, []);
  assert.equal(l2.launcher?.pid, 10, 'still shown as the launcher');
  // …unless nsa-top's supervisor started it (verified by pid + start time)
  const sup = matchRun([launcher, r1], { ...ctx, roots: [{ pid: 10, startTime: '100' }] }, [], null, t0);
  assert.deepEqual(
    sup.ranks.map((x) => [x.rank, x.proc.pid]),
    [[1, 12]],
  );
  const stale = matchRun([launcher, r1], { ...ctx, roots: [{ pid: 10, startTime: '101' }] }, [], null, t0);
  assert.deepEqual(stale.ranks, [], 'a recorded child whose start time differs is not the child');
});
