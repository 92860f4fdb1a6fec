// r on a FINISHED run: the relaunch dialog asks how many steps to train to (as `nsa-top relaunch
// --steps N`), refuses a count that is not past the steps trained in the judge's words — the same
// words the CLI prints — and relaunches with the count. The App on a fake TTY (no process).
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actionVerdicts, relaunchWantsSteps, type ActionInput } from '../../src/checks/index.js';
import { parseSteps } from '../../src/ui/dialogs/index.js';
import { relaunchDisabled } from '../../src/ui/keymap.js';
import { procs } from '../checks/helpers.js';
import { appOnTty, baseState, recordingActions } from './helpers.js';

const finished: ActionInput = {
  runState: 'FINISHED',
  runStateWhy: 'trained 300 of 300 steps',
  ranksAlive: 0,
  haltPresent: false,
  requestActive: false,
  supervisor: null,
  stepsReached: 300,
};

test('the judge: a FINISHED run wants a step count past what it trained; other refusals are not turned into a question', () => {
  assert.deepEqual(relaunchWantsSteps(finished), { past: 300 });
  assert.equal(relaunchWantsSteps({ ...finished, relaunchSteps: 400 }), null, 'given: nothing more to ask');
  assert.equal(actionVerdicts({ ...finished, relaunchSteps: 400 }).relaunch.ok, true);
  const low = actionVerdicts({ ...finished, relaunchSteps: 300 }).relaunch;
  assert.equal(low.ok, false);
  assert.match(low.why, /--steps 300 is not past the 300 steps it trained — ask for more \(N > 300\)/);
  // a run that is not FINISHED: no step count makes a live run relaunchable
  assert.equal(relaunchWantsSteps({ ...finished, runState: 'RUNNING', ranksAlive: 2 }), null);
  assert.equal(relaunchWantsSteps({ ...finished, runState: 'HALTED' }), null, 'a halted run relaunches as it is');
  // a supervisor in charge refuses whatever the step count
  const sup = { state: 'running' as const, supervisor: { pid: 7, startTime: '1' }, supervisorGone: false };
  assert.equal(relaunchWantsSteps({ ...finished, supervisor: sup as never }), null);
  assert.deepEqual(parseSteps(' 600 '), { n: 600 });
  for (const bad of ['', 'abc', '12.5', '-3', '0']) assert.ok('error' in parseSteps(bad), bad);
});

test('r on a FINISHED run asks for the steps, refuses too few in the CLI words, then relaunches to N', async () => {
  const s = baseState();
  s.runState = 'FINISHED';
  s.runStateWhy = 'trained 300 of 300 steps';
  s.procs = procs([]);
  s.run = { ...s.run, step: 300, totalSteps: 300, identity: { ...s.run.identity, name: 'fin' } };
  assert.equal(relaunchDisabled(s), null, 'r is on: it asks for the steps');
  assert.match(relaunchDisabled(s, 300)!.why, /not past the 300 steps/);
  // what the trainer layer says will run (prepareRelaunch): the recorded command, with --steps N when asked
  const asked: (number | null | undefined)[] = [];
  const actions = recordingActions(false, {
    prepareRelaunch: async (steps) => {
      asked.push(steps);
      return {
        refusal: null,
        resume: null,
        fresh: false,
        warnings: [],
        skipped: [],
        adopted: null,
        willRun: [`command: nsa-top train --steps ${steps ?? 300}`],
        notFollowed: [],
      };
    },
  });
  const app = await appOnTty(s, actions, 100, 30);
  try {
    await app.press('r');
    await app.until(() => /train to how many steps \(more than 300\)\?/.test(app.screen()));
    assert.match(app.screen(), /the run is FINISHED: it trained 300 steps/);
    let mark = app.mark();
    await app.press('2', '0', '0', '\r');
    await app.until(() => /is not past/.test(app.since(mark)));
    assert.match(
      app.since(mark),
      /the run is FINISHED \(trained 300 of 300 steps\): --steps 200 is not past the 300 steps/,
      'the words `nsa-top relaunch --steps 200` prints',
    );
    mark = app.mark();
    await app.press('\x7f', '\x7f', '\x7f', 'x', '\r');
    await app.until(() => /is not a step count/.test(app.since(mark)));
    mark = app.mark();
    await app.press('\x7f', '6', '0', '0', '\r');
    await app.until(() => /type the run name/.test(app.since(mark)));
    assert.match(app.since(mark), /trains to step 600: --steps 600 replaces the recorded command's step count/);
    // the command shown is the one that will run: asked with the steps typed, never the old --steps 300
    assert.deepEqual(asked, [600]);
    assert.match(app.since(mark), /command: nsa-top train --steps 600/);
    assert.doesNotMatch(app.since(mark), /--steps 300/);
    await app.press('f', 'i', 'n', '\r');
    await app.until(() => actions.calls.length > 0);
    assert.deepEqual(actions.calls, ['relaunch steps 600']);
  } finally {
    app.unmount();
  }
});
