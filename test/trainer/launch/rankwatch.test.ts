// The pure parts of the supervisor's first-gone evidence: a zombie's wait status, which of the ranks
// one look found gone went first, and when the judge prefers it to the launcher's summary. No process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { causeRank } from '../../../src/checks/boot.js';
import { firstOf, statEnd, waitStatusText } from '../../../src/trainer/launch/rankwatch.js';
import { supervisorState } from '../../helpers/supervisor.js';

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
