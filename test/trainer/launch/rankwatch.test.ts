// The pure parts of the supervisor's first-gone evidence: a zombie's wait status, which of the ranks
// one look found gone went first, when the judge prefers it to the launcher's summary, and how
// status (its supervisor line and --json) and report's history carry it. No process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { causeRank } from '../../../src/checks/boot.js';
import { firstOf, statEnd, waitStatusText } from '../../../src/trainer/launch/rankwatch.js';
import { supervisorState } from '../../helpers/supervisor.js';
import type { Observation } from '../../../src/cockpit/observe.js';
import { formatControl, supervisorField } from '../../../src/commands/status.js';
import type { SupervisorState } from '../../../src/trainer/control/types.js';
import { HistoryFold, LogFold } from '../../../src/trainer/run/history.js';

test("wait status: exit code or signal; a zombie's stat line gives it (field 52)", () => {
  assert.equal(waitStatusText(9), 'SIGKILL');
  assert.equal(waitStatusText(1 << 8), 'exit 1');
  assert.equal(waitStatusText(0), 'exit 0');
  assert.equal(waitStatusText(15 | 0x80), 'SIGTERM', 'core-dump bit ignored');
  const fields = (state: string, code: number) =>
    `4242 (python3) ${state} 1 ${Array.from({ length: 17 }, () => '0').join(' ')} 777 ${Array.from({ length: 29 }, () => '0').join(' ')} ${code}`;
  assert.deepEqual(statEnd(fields('Z', 9)), { state: 'Z', startTime: '777', how: 'SIGKILL' });
  assert.deepEqual(statEnd(fields('S', 0)), { state: 'S', startTime: '777', how: null }, 'alive: no end');
});

test('which rank went first: the only one gone in a look, or the only one a hard signal ended', () => {
  const g = (rank: number, how: string | null) => ({ rank, pid: 100 + rank, at: 1, how });
  assert.equal(firstOf([g(1, null)])?.rank, 1);
  assert.equal(firstOf([g(0, 'SIGTERM'), g(1, 'SIGKILL')])?.rank, 1, "the launcher's SIGTERM to the rest is not first");
  assert.equal(firstOf([g(0, 'exit 1'), g(1, 'SIGSEGV')])?.rank, 1);
  assert.equal(firstOf([g(0, null), g(1, null)]), null, 'two gone, nothing to tell them apart: say nothing');
  assert.equal(firstOf([g(0, 'SIGKILL'), g(1, 'SIGKILL')]), null);
});

test("the judge names the supervisor's first-gone rank over torchrun's summary, for this trainer's exit only", () => {
  const exitAt = 10_000;
  const said = { rank: 0, how: 'exit 1' };
  const sup = (firstGone: { rank: number; pid: number; at: number; how: string | null } | null, startAt = 1000) =>
    supervisorState(
      '/r',
      { pid: 1, startTime: '1' },
      { firstGone, startCheckpoints: [{ at: startAt, path: null, mtimeMs: null }] },
    );
  assert.deepEqual(causeRank(sup({ rank: 1, pid: 5, at: 9000, how: 'SIGKILL' }), exitAt, said), {
    rank: 1,
    text: 'rank 1 went first (SIGKILL)',
    said: '; torchrun says: exit 1 of rank 0',
  });
  // the same rank in both: no second opinion to quote
  assert.deepEqual(causeRank(sup({ rank: 0, pid: 5, at: 9000, how: null }), exitAt, said), {
    rank: 0,
    text: 'rank 0 went first (exit 1)',
    said: '',
  });
  // a record from before this trainer's start (an earlier trainer's) is not evidence for this exit
  assert.deepEqual(causeRank(sup({ rank: 1, pid: 5, at: 500, how: 'SIGKILL' }), exitAt, said), {
    rank: 0,
    text: 'exit 1 of rank 0',
    said: '',
  });
  assert.equal(causeRank(sup(null), exitAt, null), null);
});

test("status and report carry the first-gone rank: status's supervisor line and --json, report's history", () => {
  // status: the supervisor as judged, its last exit with the rank that went first (this exit's only)
  const exit = { at: 10_000, code: 1, signal: null };
  const sup = (at: number) =>
    supervisorState(
      '/r',
      { pid: 1, startTime: '1' },
      {
        state: 'backoff',
        restarts: 1,
        exitCodes: [exit],
        lastCause: 'exit 1',
        firstGone: { rank: 1, pid: 77, at, how: 'SIGKILL' },
        startCheckpoints: [{ at: 1000, path: null, mtimeMs: null }],
      },
    );
  const obs = (s: SupervisorState) => ({ supervisor: s, requests: [], carrier: null }) as unknown as Observation;
  assert.deepEqual(supervisorField(obs(sup(9800)))?.lastExit?.firstGone, {
    rank: 1,
    pid: 77,
    at: 9800,
    how: 'SIGKILL',
    node: null,
  });
  assert.match(
    formatControl(obs(sup(9800)), 12_000),
    /^supervisor alive \(pid 1\), backoff · 1 of 2 restarts used; last exit exit 1 \(rank 1, pid 77, went first: SIGKILL\) 2 ?s ago\n$/,
  );
  assert.equal(supervisorField(obs(sup(500)))?.lastExit?.firstGone, null, "an earlier trainer's record");
  // a multi-node run: the judge's merge names the node whose supervisor saw it (pids are per node)
  const onB = sup(9800);
  onB.firstGone = { ...onB.firstGone!, node: 'root@b' };
  assert.match(
    formatControl(obs(onB), 12_000),
    /last exit exit 1 \(rank 1 on node root@b, pid 77, went first: SIGKILL\) /,
  );

  // report: the supervisor's "trainer exited" line names the rank; the crashed segment's restart says it
  const fold = new HistoryFold(600);
  const log = new LogFold();
  const beat = (ts: number, msg: string, step: number, pid: number) =>
    fold.line(JSON.stringify({ ts, msg, step, pid, rank: 0 }));
  log.line('[boot] loading config c.yaml');
  beat(100, 'boot', 0, 10);
  for (let s = 1; s <= 5; s++) beat(100 + s, 'progress', s, 10);
  log.line('step 0005 | loss 5.0');
  log.line(
    '[nsa-top supervisor] 2026-11-26T20:00:00.000Z trainer exited: code 1 (rank 1, pid 11, went first: SIGKILL)',
  );
  log.line('[nsa-top supervisor] 2026-11-26T20:00:06.000Z start: torchrun …');
  log.line('[boot] loading config c.yaml');
  beat(120, 'boot', 0, 20);
  beat(121, 'progress', 1, 20);
  const segs = fold.finish(log.procs, 100, { events: [], stalls: [] });
  assert.equal(segs[0]!.end, 'crashed', segs[0]!.endWhy);
  assert.match(
    segs[0]!.endWhy,
    /; restarted 15 ?s later after rank 1 died first \(SIGKILL\), seen by the supervisor, as segment #1/,
  );
  const crash = fold.events.find((e) => e.kind === 'crash');
  assert.equal(crash?.rank, 1, JSON.stringify(crash));
});
