// --ranks 2: the launcher, per-rank files, .HALT at one step boundary for every rank, per-rank stack
// dumps, and the injections that involve several ranks (hang, crash, nan). Real processes and signals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyCheckpoint } from '../../../src/trainer/reference/checkpoint.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { findRunProcesses, runRecordHints } from '../../../src/trainer/run/processes.js';
import { csvRows, heartbeats, readLines, tmp, train, trainToEnd, waitFor } from './helpers.js';

const dumpsIn = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('stackdump_'));
const bootPids = (out: string, world: number) =>
  Array.from({ length: world }, (_, r) => heartbeats(out, r).find((h) => h.msg === 'boot')?.pid ?? null);

test('two ranks: per-rank env and boot, one dump per rank on SIGUSR1, .HALT stops both at the same step with a checkpoint', async () => {
  const t = tmp();
  try {
    const p = train(['--out', t.out, '--config', t.cfg, '--steps', '100000', '--ranks', '2', '--log-every', '2'], {
      NSA_HEARTBEAT_EVERY: '1',
    });
    const pids = await waitFor('both ranks booted', () => {
      const ps = bootPids(t.out, 2);
      return ps.every((x) => x !== null) ? (ps as number[]) : null;
    });
    assert.notEqual(pids[0], pids[1]);
    assert.ok(!pids.includes(p.child.pid!), 'ranks are separate processes under the launcher');
    await waitFor('a few logged steps', () => readLines(join(t.out, 'training.csv')).length >= 3);

    // SIGUSR1 to both ranks at once: one file each, distinct names, training goes on.
    process.kill(pids[0]!, 'SIGUSR1');
    process.kill(pids[1]!, 'SIGUSR1');
    const names = await waitFor('two dumps', () => (dumpsIn(t.out).length >= 2 ? dumpsIn(t.out) : null));
    assert.equal(names.length, 2);
    for (const n of names) assert.match(n, /^stackdump_\d+_rank[01]_\d+\.txt$/);
    assert.equal(names.filter((n) => n.includes(`_rank1_${pids[1]}.`)).length, 1);
    assert.equal(names.filter((n) => n.includes(`_rank0_${pids[0]}.`)).length, 1);
    for (const n of names) {
      const text = readFileSync(join(t.out, n), 'utf8').split('\n');
      assert.match(text[0]!, /^Signal 10 at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      assert.match(
        text[1]!,
        /^# nsa-top-reference rank=[01] pid=\d+ step=\d+ phase=(fetch|forward|backward|allreduce-wait|optimizer|checkpoint|eval|logging|idle)$/,
      );
      assert.ok(text.includes(`--- Thread: MainThread (${/pid=(\d+)/.exec(text[1]!)![1]}) ---`));
      assert.match(text.join('\n'), /\n {2}File ".+", line \d+, in runRank\n/);
    }
    const rowsBefore = readLines(join(t.out, 'training.csv')).length;
    await waitFor(
      'training continues after the dumps',
      () => readLines(join(t.out, 'training.csv')).length > rowsBefore + 1,
    );

    // The cockpit's process matcher finds the launcher and both ranks of this run, proven by their
    // own boot records (the environment alone proves nothing).
    const procs = await findRunProcesses(new LocalHost(), t.out, await runRecordHints(new LocalHost(), t.out));
    assert.equal(procs.launcher?.pid, p.child.pid);
    assert.deepEqual(procs.ranks.map((x) => x.proc.pid).sort(), [...pids].sort());

    // The launcher itself ignores SIGUSR1.
    p.child.kill('SIGUSR1');
    await waitFor('launcher note', () => p.stdout().includes('SIGUSR1 ignored by the launcher'));

    writeFileSync(join(t.out, '.HALT'), 'halt: manual_stop\n');
    const r = await p.exit;
    assert.equal(r.code, 0, p.stderr());
    assert.ok(p.stdout().includes('[train] HALT file detected — stopping gracefully.'));
    const last0 = heartbeats(t.out, 0)
      .filter((h) => h.msg === 'beat')
      .at(-1)!.step;
    const last1 = heartbeats(t.out, 1)
      .filter((h) => h.msg === 'beat')
      .at(-1)!.step;
    assert.equal(last0, last1, 'both ranks stopped at the same step');
    assert.deepEqual(await verifyCheckpoint(join(t.out, `checkpoint_step${last0}.pt`)), { ok: true, step: last0 });
    const metrics = JSON.parse(readFileSync(join(t.out, 'metrics.json'), 'utf8'));
    assert.equal(metrics.last_step, last0);
    assert.equal(
      readFileSync(join(t.out, '.HALT'), 'utf8'),
      'halt: manual_stop\n',
      'the trainer never rewrites an operator .HALT',
    );

    const env = JSON.parse(readFileSync(join(t.out, 'env.json'), 'utf8'));
    assert.equal(env.env.WORLD_SIZE, '2');
    assert.ok(['0', '1'].includes(env.env.RANK));
    assert.equal(env.env.NSA_TOP_RUN_DIR, t.out);
    assert.equal(
      p.stdout().match(/^\[ddp\] process group ready \| backend=ipc world_size=2 timeout_min=15$/gm)?.length,
      1,
    );

    const snap = await new RunModel(new LocalHost(), t.out).poll();
    assert.deepEqual(snap.ranks.map((x) => x.rank).sort(), [0, 1]);
    assert.equal(snap.identity.worldSize, 2);
    const byRank = new Map(snap.dumps.map((d) => [d.name, d.rank]));
    assert.deepEqual([...new Set(byRank.values())].sort(), [0, 1]);
    assert.equal(snap.control.halt.present, true);
  } finally {
    t.cleanup();
  }
});

test('hang@step=3,rank=1: rank 1 blocks (dump says injected-hang), rank 0 waits in the all-reduce; SIGTERM to the launcher keeps step 2', async () => {
  const t = tmp();
  try {
    const p = train(
      ['--out', t.out, '--config', t.cfg, '--steps', '100000', '--ranks', '2', '--inject', 'hang@step=3,rank=1'],
      { NSA_HEARTBEAT_EVERY: '1' },
    );
    await waitFor('rank 1 reports the hang', () => p.stderr().includes('hang@step=3: rank 1'));
    await waitFor('rank 0 at step 3', () => heartbeats(t.out, 0).some((h) => h.msg === 'beat' && h.step === 3));
    const pids = bootPids(t.out, 2) as number[];
    process.kill(pids[0]!, 'SIGUSR1');
    process.kill(pids[1]!, 'SIGUSR1');
    const names = await waitFor('two dumps', () => (dumpsIn(t.out).length >= 2 ? dumpsIn(t.out) : null));
    const second = (n: string) => readFileSync(join(t.out, n), 'utf8').split('\n')[1]!;
    const r0 = names.find((n) => n.includes('_rank0_'))!;
    const r1 = names.find((n) => n.includes('_rank1_'))!;
    assert.match(second(r0), /rank=0 pid=\d+ step=3 phase=allreduce-wait$/);
    assert.match(second(r1), /rank=1 pid=\d+ step=3 phase=injected-hang$/);
    assert.equal(readLines(join(t.out, 'training.csv')).length, 2, 'no step after the hang');

    p.child.kill('SIGTERM');
    const r = await p.exit;
    assert.equal(r.code, 143, p.stderr());
    assert.deepEqual(await verifyCheckpoint(join(t.out, 'checkpoint_step2.pt')), { ok: true, step: 2 });
    assert.ok(existsSync(join(t.out, 'metrics.json')));
  } finally {
    t.cleanup();
  }
});

test('crash@step=3,rank=1: the launcher tears rank 0 down and exits non-zero; no metrics.json, like a real crash', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd([
      '--out',
      t.out,
      '--config',
      t.cfg,
      '--steps',
      '20',
      '--ranks',
      '2',
      '--inject',
      'crash@step=3,rank=1',
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /rank 1 \(pid \d+\) exited with code 1 — tearing down the other ranks/);
    assert.match(r.stderr, /injected crash at step 3 on rank 1/);
    assert.equal(existsSync(join(t.out, 'metrics.json')), false);
    assert.deepEqual(
      csvRows(join(t.out, 'training.csv')).map((x) => Number(x[0])),
      [1, 2],
    );
  } finally {
    t.cleanup();
  }
});

test('nan@step=3 on two ranks: coherent abort — FATAL line, .anomaly_type, .HALT, metrics.json, exit 0, NaN step not logged', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd([
      '--out',
      t.out,
      '--config',
      t.cfg,
      '--steps',
      '20',
      '--ranks',
      '2',
      '--inject',
      'nan@step=3,rank=1',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.includes('[train][FATAL] non-finite loss detected — aborting run.'));
    assert.equal(readFileSync(join(t.out, '.anomaly_type'), 'utf8'), 'nan_loss\n');
    assert.equal(readFileSync(join(t.out, '.HALT'), 'utf8'), 'halt: nan_loss\n');
    assert.deepEqual(
      csvRows(join(t.out, 'training.csv')).map((x) => Number(x[0])),
      [1, 2],
    );
    assert.ok(existsSync(join(t.out, 'metrics.json')));
    assert.ok(!heartbeats(t.out, 0).some((h) => h.msg === 'progress' && h.step === 3));
  } finally {
    t.cleanup();
  }
});

test('if the launcher is SIGKILLed, its ranks notice and exit (no orphans)', async () => {
  const t = tmp();
  try {
    const p = train(['--out', t.out, '--config', t.cfg, '--steps', '100000', '--ranks', '2']);
    const pids = await waitFor('both ranks booted', () => {
      const ps = bootPids(t.out, 2);
      return ps.every((x) => x !== null) ? (ps as number[]) : null;
    });
    p.child.kill('SIGKILL');
    await p.exit;
    const gone = (pid: number) => {
      try {
        process.kill(pid, 0);
      } catch {
        return true;
      }
      try {
        return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return true;
      }
    };
    await waitFor('ranks gone', () => pids.every(gone), 20_000);
  } finally {
    t.cleanup();
  }
});

test('a collective that never completes times out after NSA_PG_TIMEOUT_MIN: the launcher tears down and exits 1', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd(
      ['--out', t.out, '--config', t.cfg, '--steps', '50', '--ranks', '2', '--inject', 'hang@step=2,rank=1'],
      { NSA_PG_TIMEOUT_MIN: '0.03' },
    );
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /timeout_min=0\.03/);
    assert.match(
      r.stderr,
      /collective at step 2 timed out after 0\.03 min \(NSA_PG_TIMEOUT_MIN\) waiting on rank\(s\) 1/,
    );
    assert.deepEqual(
      await verifyCheckpoint(join(t.out, 'checkpoint_step1.pt')),
      { ok: true, step: 1 },
      'rank 0 kept the last completed step',
    );
  } finally {
    t.cleanup();
  }
});

test('the in-process watchdog: a rank with no step for the stall time writes watchdog_stackdump_* and a watchdog_dump record', async () => {
  const t = tmp();
  try {
    const p = train(
      ['--out', t.out, '--config', t.cfg, '--steps', '100000', '--ranks', '2', '--inject', 'hang@step=3,rank=1'],
      {
        NSA_TOP_WATCHDOG_STALL_S: '1',
        NSA_TOP_WATCHDOG_POLL_S: '0.2',
      },
    );
    const wd = (r: number) => heartbeats(t.out, r).filter((h) => h.msg === 'watchdog_dump');
    await waitFor('watchdog records on both ranks', () => wd(0).length >= 1 && wd(1).length >= 1);
    for (const r of [0, 1]) {
      const rec = wd(r)[0]!;
      assert.equal(rec.step, 0, 'like the real trainer, watchdog records carry step 0');
      const path = String(rec.path);
      assert.match(path, new RegExp(`/watchdog_stackdump_\\d+_rank${r}_\\d+(_\\d+)?\\.txt$`));
      const text = readFileSync(path, 'utf8').split('\n');
      assert.match(text[0]!, /^Watchdog at \d{4}-\d\d-\d\dT[\d:.]+Z; last_heartbeat=[\d.]+$/);
      assert.match(
        text[1]!,
        new RegExp(
          `^# nsa-top-reference rank=${r} pid=\\d+ step=3 phase=${r === 1 ? 'injected-hang' : 'allreduce-wait'}$`,
        ),
      );
    }
    const snap = await new RunModel(new LocalHost(), t.out).poll();
    assert.ok(snap.dumps.some((d) => d.kind === 'watchdog' && d.rank === 1 && d.phase === 'injected-hang'));
    p.child.kill('SIGTERM');
    assert.equal((await p.exit).code, 143);
  } finally {
    t.cleanup();
  }
});
