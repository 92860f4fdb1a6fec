// The collector's look at each proven rank between two reads of the process table
// (src/cockpit/rankpeek.ts), pure: which stat lines say a rank no longer runs as the table said.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lifeChanged, peekTargets } from '../../src/cockpit/rankpeek.js';
import type { ProcInfo, RunProcesses } from '../../src/remote/types.js';

const proc = (pid: number, state: ProcInfo['state'], startTime = '5000', o: Partial<ProcInfo> = {}): ProcInfo => ({
  pid,
  ppid: 1,
  startTime,
  state,
  cpuPct: null,
  rssKiB: null,
  wchan: null,
  argv: [],
  env: {},
  ...o,
});
// /proc/PID/stat as the kernel writes it: field 3 the state, field 22 the start time
const stat = (pid: number, state: string, startTime = '5000') =>
  `${pid} (python3) ${state} 1 ${pid} ${pid} 0 -1 4194560 100 0 0 0 10 5 0 0 20 0 3 0 ${startTime} 1000 200 18446744073709551615`;

test('a rank the table saw running: stopped, gone, a zombie or a recycled pid is a change; R/S/D is not', () => {
  const was = [proc(10, 'S'), proc(11, 'R')];
  const now = (l: [number, string][]) => new Map(l);
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'R')],
        [11, stat(11, 'S')],
      ]),
    ),
    false,
  );
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'D')],
        [11, stat(11, 'S')],
      ]),
    ),
    false,
    'I/O is running',
  );
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'S')],
        [11, stat(11, 'T')],
      ]),
    ),
    true,
    'SIGSTOP',
  );
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'S')],
        [11, stat(11, 't')],
      ]),
    ),
    true,
    'traced',
  );
  assert.equal(lifeChanged(was, now([[10, stat(10, 'S')]])), true, 'gone');
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'S')],
        [11, stat(11, 'Z')],
      ]),
    ),
    true,
    'a zombie',
  );
  assert.equal(
    lifeChanged(
      was,
      now([
        [10, stat(10, 'S')],
        [11, stat(11, 'S', '9999')],
      ]),
    ),
    true,
    'another process now',
  );
});

test('a rank the table saw stopped: running again (SIGCONT) is a change; still stopped is not', () => {
  const was = [proc(10, 'S'), proc(11, 'T')];
  assert.equal(
    lifeChanged(
      was,
      new Map([
        [10, stat(10, 'S')],
        [11, stat(11, 'T')],
      ]),
    ),
    false,
  );
  assert.equal(
    lifeChanged(
      was,
      new Map([
        [10, stat(10, 'S')],
        [11, stat(11, 'S')],
      ]),
    ),
    true,
  );
});

test("the ranks of this host are looked at; another node's and the launcher are not", () => {
  const p: RunProcesses = {
    at: 0,
    launcher: proc(9, 'S'),
    ranks: [
      { rank: 0, localRank: 0, proc: proc(10, 'S'), gpuMemMiB: null, gpuUuid: null, source: 'environ' },
      {
        rank: 1,
        localRank: 0,
        proc: proc(10, 'S', '7', { host: 'root@b:2222' }),
        gpuMemMiB: null,
        gpuUuid: null,
        source: 'environ',
      },
    ],
    unknown: [],
  };
  assert.deepEqual(
    peekTargets(p).map((x) => x.pid),
    [10],
  );
  assert.deepEqual(peekTargets(null), []);
});
