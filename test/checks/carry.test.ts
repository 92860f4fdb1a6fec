// The judge's word on an earlier run's halt request at a relaunch (src/checks/carry.ts): ended when
// moot, carried only when asked, untouched while its ranks run; and what a new supervisor may claim.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentMayClaim, relaunchRequestFate, supervisorMayClaim } from '../../src/checks/carry.js';

const over = { carry: false, procsKnown: true, ranksAlive: 0, launcherAlive: false };

test('relaunchRequestFate: moot → end; asked → carry; ranks or launcher running → keep; unknown → keep', () => {
  const end = relaunchRequestFate(over);
  assert.equal(end.fate, 'end');
  assert.match(end.why, /moot: its run ended and nothing of it runs; ended so that it cannot halt the new run/);
  assert.equal(relaunchRequestFate({ ...over, carry: true }).fate, 'carry');
  const live = relaunchRequestFate({ ...over, ranksAlive: 2 });
  assert.equal(live.fate, 'keep');
  assert.match(live.why, /in force: 2 ranks of its run still running; untouched/);
  assert.equal(
    relaunchRequestFate({ ...over, ranksAlive: 1, carry: true }).fate,
    'keep',
    'in force: carry changes nothing',
  );
  assert.match(relaunchRequestFate({ ...over, launcherAlive: true }).why, /the launcher of its run still running/);
  assert.equal(relaunchRequestFate({ ...over, procsKnown: false }).fate, 'keep', 'unknown: never ended on a guess');
});

test('supervisorMayClaim: only a newer request, a carried one, or one of the live trainer it re-adopted', () => {
  const old = { requestTs: 1000, launchedAt: 2000, carried: false, adoptedLiveTrainer: false };
  assert.equal(supervisorMayClaim(old), false, "an earlier run's request");
  assert.equal(supervisorMayClaim({ ...old, requestTs: 2000 }), true, 'made after it started');
  assert.equal(supervisorMayClaim({ ...old, carried: true }), true, 'carried by the relaunch');
  assert.equal(
    supervisorMayClaim({ ...old, adoptedLiveTrainer: true }),
    true,
    'the trainer it was made for still runs',
  );
});

test('agentMayClaim: an agent carries what nobody alive carries — never while the run has a live supervisor of its own', () => {
  assert.deepEqual(agentMayClaim({ supervisor: null }), { ok: true });
  const v = agentMayClaim({ supervisor: { pid: 4242 } });
  assert.equal(v.ok, false);
  assert.match(
    v.ok ? '' : v.why,
    /the run's live supervisor \(pid 4242\) carries its requests and did not claim this one \(made before it started and not carried into it: an earlier run's\)/,
  );
});
