// The bundle's README (src/bundle/story.ts), pure: "What happened, in order" tells what the journal
// said as it happened — the run state's changes with the culprit's rank, critical alerts raised and
// cleared — among the launch, the dumps, the actions and the restart read from the run's own files,
// so a hang, its dump, the halt and the relaunch read in the order they happened; warnings and the
// journal's other lines are not told twice; a flapping journal is told up to a cap, then counted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JOURNAL_EVENTS_MAX, storyReadme, type JournalEvent, type StoryInput } from '../../src/bundle/story.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import { eventsOf, markerOf } from '../../src/journal/codec.js';
import type { ActionRecord } from '../../src/trainer/control/types.js';
import { fixtureState } from '../ui/helpers.js';

const T0 = Date.parse('2026-11-26T03:00:00Z');
const at = (s: number) => T0 + s * 1000;
const who = { user: 'alice', host: 'box', pid: 1, via: 'cockpit' } as unknown as ActionRecord['who'];

function input(journal: JournalEvent[], extra: Partial<StoryInput> = {}): StoryInput {
  return {
    name: 'drill',
    dir: '/runs/drill',
    host: 'local',
    bundledAt: at(600),
    nsaTopVersion: '0.0.0',
    report: null,
    state: { runState: 'HALTED', why: 'halted by alice' },
    lastAdvance: null,
    actions: [
      { ts: at(40), who, action: 'dump', target: {}, result: 'ok', detail: 'dumped 2 ranks' },
      { ts: at(60), who, action: 'halt', target: {}, result: 'ok', detail: '.HALT written' },
    ],
    dumps: [{ name: 'stack_rank1.txt', ts: at(41), rank: 1, kind: 'signal', file: 'dumps/rank1/stack_rank1.txt' }],
    stopEvents: [],
    stalls: [],
    journal,
    contents: [],
    cut: [],
    refused: [],
    notes: [],
    redactions: 0,
    ...extra,
  };
}

/** the numbered lines of "What happened, in order" */
const order = (md: string) =>
  md
    .split('## What happened, in order')[1]!
    .split('\n## ')[0]!
    .split('\n')
    .filter((l) => /^\d+\. /.test(l));

test('the story tells the hang (state, culprit, critical alert), the dump, the halt and the relaunch in order', () => {
  const journal: JournalEvent[] = [
    { t: at(0), k: 'state', from: null, to: 'RUNNING', why: 'step 10 advancing', culprit: null },
    { t: at(30), k: 'state', from: 'RUNNING', to: 'STALLED', why: 'all ranks silent since 03:00:20', culprit: null },
    { t: at(30), k: 'alert', id: 'stall:run', severity: 'critical', title: 'step frozen', rank: null },
    { t: at(31), k: 'alert', id: 'slow', severity: 'warning', title: 'tok/s low', rank: 0 },
    { t: at(45), k: 'state', from: 'STALLED', to: 'STALLED', why: 'rank 1 in nccl wait', culprit: { rank: 1 } },
    { t: at(45), k: 'alert', id: 'rank:1', severity: 'critical', title: 'rank 1 stuck in allreduce', rank: 1 },
    { t: at(62), k: 'clear', id: 'stall:run', severity: 'critical', title: 'step frozen' },
    { t: at(62), k: 'state', from: 'STALLED', to: 'HALTED', why: '.HALT honoured', culprit: null },
    { t: at(70), k: 'state', from: 'HALTED', to: 'RESTARTING', why: 'the supervisor relaunches', culprit: null },
    { t: at(80), k: 'state', from: 'RESTARTING', to: 'RUNNING', why: 'step 11 advancing', culprit: null },
    { t: at(80), k: 'dump', file: 'stack_rank1.txt', rank: 1 },
  ];
  const lines = order(storyReadme(input(journal)));
  const idx = (re: RegExp) => {
    const i = lines.findIndex((l) => re.test(l));
    assert.ok(i >= 0, `${re} in:\n${lines.join('\n')}`);
    return i;
  };
  const hang = idx(/03:00:30Z {2}STATE RUNNING → STALLED — all ranks silent since 03:00:20$/);
  const crit = idx(/CRITICAL raised: step frozen$/);
  const culprit = idx(/STATE STALLED → STALLED \(culprit rank 1\) — rank 1 in nccl wait/);
  const rankCrit = idx(/CRITICAL raised: rank 1 stuck in allreduce \(rank 1\)/);
  const dump = idx(/DUMP rank 1: stack_rank1\.txt/);
  const halt = idx(/ACTION halt by alice: ok/);
  const cleared = idx(/CRITICAL cleared: step frozen/);
  const halted = idx(/STATE STALLED → HALTED/);
  const restarting = idx(/STATE HALTED → RESTARTING — the supervisor relaunches/);
  const running = idx(/STATE RESTARTING → RUNNING/);
  assert.ok(idx(/nsa-top began watching: RUNNING/) < hang);
  assert.ok(hang < crit && crit < dump && dump < culprit && culprit < rankCrit && rankCrit < halt);
  assert.ok(halt < cleared && cleared < halted && halted < restarting && restarting < running);
  // warnings are not the story; the journal's dump line is not told twice (the dump file tells it)
  assert.equal(
    lines.some((l) => /tok\/s low/.test(l)),
    false,
  );
  assert.equal(lines.filter((l) => /stack_rank1/.test(l)).length, 1);
});

test('a flapping journal is told up to the cap, then counted', () => {
  const journal: JournalEvent[] = [];
  for (let i = 0; i < JOURNAL_EVENTS_MAX + 15; i++)
    journal.push({ t: at(i), k: i % 2 ? 'clear' : 'alert', id: 'x', severity: 'critical', title: 'flap' });
  const lines = order(storyReadme(input(journal, { actions: [], dumps: [] })));
  assert.equal(lines.filter((l) => /CRITICAL (raised|cleared): flap/.test(l)).length, JOURNAL_EVENTS_MAX);
  assert.match(lines.at(-1)!, /… 15 more state changes and critical alerts in the journal \(see journal\/\)$/);
});

test("the journal's state line carries the culprit, and a newly named culprit is a line of its own", async () => {
  const s = await fixtureState('single');
  const running: CockpitState = { ...s, runState: 'RUNNING', culprit: null };
  const stalled: CockpitState = { ...running, runState: 'STALLED', runStateWhy: 'frozen' };
  const named: CockpitState = {
    ...stalled,
    runStateWhy: 'rank 1 in nccl',
    culprit: { rank: 1, why: 'rank 1 in nccl' },
  };
  const st = (a: CockpitState | null, b: CockpitState) => eventsOf(a, b).filter((e) => e.k === 'state');
  assert.deepEqual(st(running, stalled), [
    { k: 'state', from: 'RUNNING', to: 'STALLED', why: 'frozen', culprit: null },
  ]);
  const n = st(stalled, named);
  assert.deepEqual(n, [
    {
      k: 'state',
      from: 'STALLED',
      to: 'STALLED',
      why: 'rank 1 in nccl',
      culprit: { rank: 1, why: 'rank 1 in nccl' },
    },
  ]);
  assert.deepEqual(st(named, { ...named, runStateWhy: 'rank 1 in nccl still' }), []);
  assert.equal(markerOf({ v: 1, t: 5, ...n[0]!, k: 'state' })!.label, 'STALLED: culprit rank 1');
});
