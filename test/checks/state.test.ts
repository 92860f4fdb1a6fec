// The run state is honest within seconds: liveness before metrics.json, a stopped or dead rank named
// at once, the watchdog's action threshold kept apart from what the operator sees, and one reading of
// a stack dump's main-thread frame for the odd-rank rule and the Dumps panel.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, staleVerdict } from '../../src/checks/index.js';
import { newestDumpSet } from '../../src/ui/dumps.js';
import { fixture, liveFixture, proc, procs } from './helpers.js';

test('metrics.json written while a rank still lives is HALTING; HALTED / FINISHED only once none lives', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  run.ended = true; // the real trainer writes metrics.json on .HALT, then its ranks take a while to exit
  const both = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(both.runState, 'HALTING');
  assert.match(both.runStateWhy, /stopped at step 31 of 400, metrics\.json written; rank\(s\) 0,1 still alive/);
  assert.equal(both.advancing, false);
  const one = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(1)]), gpu: null });
  assert.equal(one.runState, 'HALTING', 'one rank left is still a live run');
  assert.equal(new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([]), gpu: null }).runState, 'HALTED');
  const fin = await fixture('single');
  const lastF = Math.max(...fin.ranks.map((r) => r.lastTs ?? 0));
  assert.equal(new Checker().evaluate({ now: lastF + 1000, run: fin, procs: procs([proc(0)]), gpu: null }).runState, 'HALTING');
  assert.equal(new Checker().evaluate({ now: lastF + 1000, run: fin, procs: procs([]), gpu: null }).runState, 'FINISHED');
});

test('a stopped rank: STALLED at once and named; the watchdog acts only past its own threshold', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  const ev = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0, 'S'), proc(1, 'T')]), gpu: null });
  assert.equal(ev.runState, 'STALLED', '1 s after the last step, with rank 1 stopped');
  assert.match(ev.runStateWhy, /^rank 1 \(pid 1001\) is stopped \(T\)/);
  assert.deepEqual(ev.culprit && { rank: ev.culprit.rank }, { rank: 1 });
  assert.equal(ev.stateHealth, 'critical');
  assert.equal(ev.advancing, false);
  assert.equal(ev.ranks.find((r) => r.rank === 1)?.health, 'critical');
  assert.equal(ev.ranks.find((r) => r.rank === 0)?.health, 'ok');
  assert.deepEqual(ev.actOn, [], 'nothing for the watchdog to act on yet');
  // resumed (SIGCONT): running again
  assert.equal(new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null }).runState, 'RUNNING');
  // a dead rank is named too
  const dead = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0)]), gpu: null });
  assert.equal(dead.runState, 'STALLED');
  assert.equal(dead.culprit?.rank, 1);
  assert.ok(dead.actOn.some((a) => a.id === 'rank-died:1'), 'a death is acted on at once, as before');
});

test('ddp2 dumps were taken while steps advanced: no odd rank for the rule, nor for the Dumps panel', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  for (const d of run.dumps) d.rank = d.epoch === 1795305288 ? 0 : 1;
  const ev = new Checker().evaluate({ now: lastTs + 60_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(ev.runState, 'STALLED');
  assert.equal(ev.dumpOdd, null);
  assert.equal(ev.culprit, null);
  assert.match(ev.runStateWhy, /^all ranks silent since \d\d:\d\d:\d\dZ \(/);
  const set = newestDumpSet(run.dumps, new Map(), null); // the evaluation's dumpOdd, null above
  assert.ok(set && set.groups.length === 2);
  assert.ok(set!.groups.every((g) => !g.odd));
});

test('the same dumps taken after the step froze: the main-thread frame (not the dump handler) names rank 1, and the panel marks the same rank', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  for (const d of run.dumps) {
    d.rank = d.epoch === 1795305288 ? 0 : 1;
    d.mtimeMs = lastTs + 30_000;
    d.epoch = Math.floor((lastTs + 30_000) / 1000);
  }
  const ev = new Checker().evaluate({ now: lastTs + 60_000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  assert.equal(ev.runState, 'STALLED');
  // rank 0 waits in all_reduce, rank 1 is in backward: the innermost frames under the handler
  assert.equal(ev.dumpOdd?.rank, 1);
  assert.match(ev.dumpOdd!.where, /^backward \(__init__\.py:197\)/);
  assert.match(ev.dumpOdd!.others, /^all_reduce \(distributed_c10d\.py:1541\)/);
  assert.equal(ev.culprit?.rank, 1);
  assert.match(ev.runStateWhy, /^rank 1's stack dump shows backward/);
  const set = newestDumpSet(run.dumps, new Map(), ev.dumpOdd!.rank);
  assert.deepEqual(set!.groups.filter((g) => g.odd).map((g) => g.members.map((m) => m.rank)), [[1]]);
});

test('STALE says the age and what was last seen', () => {
  const v = staleVerdict({ state: 'RUNNING', why: 'step 5' }, 17, 'host reconnecting, try 3');
  assert.equal(v.state, 'STALE');
  assert.match(v.why, /^no fresh data for 17 s \(host reconnecting, try 3\); last seen RUNNING$/);
});
