// Dumps labelled by rank, and the operator's set kept in view: the real trainer's
// stackdump_<second>.txt names no rank, so the dump action's record (actions.jsonl target.perRank)
// says which file is whose; the Dumps panel, `status` and `status --json` read it back. The
// trainer's own watchdog dumps are shown apart and never push the operator's set out of view.
// Built on the real 2-rank recording (test/fixtures/nsa-vibe/ddp2-dumps-halt: two signal dumps).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { formatStatus, statusJson } from '../../src/commands/status.js';
import { Checker } from '../../src/checks/index.js';
import { dumpsPanel } from '../../src/ui/panels/lists.js';
import { rankRows } from '../../src/ui/panels/ranks.js';
import { initialView } from '../../src/ui/view.js';
import type { ActionRecord } from '../../src/trainer/control/types.js';
import type { RunSnapshot, StackDump } from '../../src/trainer/run/snapshot.js';
import { claimedRank, dumpClaims, operatorDumpSets } from '../../src/checks/dumplabels.js';
import { baseState, fixtureSnapshot, FIXTURES } from './helpers.js';

const A = 'stackdump_1795305288.txt';
const B = 'stackdump_1795305290.txt';
const head = (name: string) => readFileSync(`${FIXTURES}ddp2-dumps-halt/${name}`, 'utf8').split('\n')[0]!;

function dumpRecord(ts: number, perRank: Record<string, unknown>[]): ActionRecord {
  return {
    ts,
    who: { user: 'alice', tty: null, tmux: null, host: 'box', pid: 1 },
    action: 'dump',
    target: { perRank },
    result: perRank.every((r) => r.status === 'dumped') ? 'ok' : 'partial',
    detail: 'k/n ranks dumped',
  };
}

/** The trainer's own in-process watchdog dump, newer than the operator's set. */
function watchdogDump(epoch: number): StackDump {
  return {
    name: `watchdog_stackdump_${epoch}.txt`,
    path: `/x/watchdog_stackdump_${epoch}.txt`,
    kind: 'watchdog',
    fsdp: false,
    epoch,
    mtimeMs: epoch * 1000,
    header: 'Watchdog at 2026-11-21T23:58:00Z; last_heartbeat=1795305200',
    signal: null,
    rank: null,
    pid: null,
    step: null,
    phase: null,
    threads: [
      { name: 'MainThread', ident: '1', frames: [{ file: 'train_showcase.py', line: 1300, func: 'main', code: null }] },
    ],
    parseErrors: 0,
  };
}

function panelText(run: RunSnapshot, actions: ActionRecord[]): string[] {
  const s = { ...baseState(run), actions };
  const out = dumpsPanel({ s, v: initialView(), w: 100, h: 40, now: Date.now(), focused: true, zoomed: false });
  return out.lines.map((l) => l.map((seg) => seg.text).join(''));
}

test("the operator's set: every rank by the record's claim, a lost rank named, watchdog dumps apart", async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  assert.deepEqual(run.dumps.map((d) => [d.name, d.rank]).sort(), [
    [A, null],
    [B, null],
  ]);
  run.dumps.push(watchdogDump(1795305500)); // newer than the operator's set
  // the record claims A for rank 1 and B for rank 0: the labels must come from it, not from the order
  const actions = [
    dumpRecord(1795305291000, [
      { rank: 0, pid: 32202, status: 'dumped', file: `/r/${B}`, header: head(B) },
      { rank: 1, pid: 32203, status: 'dumped', file: `/r/${A}`, header: head(A) },
    ]),
  ];
  const lines = panelText(run, actions);
  assert.match(lines[0]!, /^your set @ .* by alice · 2\/2 ranks: r0 r1$/);
  assert.ok(
    lines.some((l) => /trainer's own watchdog: 1 dump, newest .* not part of this set/.test(l)),
    lines.join('\n'),
  );
  assert.ok(!lines.some((l) => /\b1795305\d+/.test(l)), 'no dump is labelled by its second');
  // the two stacks differ (all_reduce vs backward): each group names its rank
  assert.ok(lines.some((l) => /^● r0\b/.test(l)) && lines.some((l) => /^● r1\b/.test(l)), lines.join('\n'));
  const claims = dumpClaims(actions);
  assert.equal(
    claimedRank(
      run.dumps.find((d) => d.name === A)!,
      claims,
    ),
    1,
  );
  assert.equal(
    claimedRank(
      run.dumps.find((d) => d.name === B)!,
      claims,
    ),
    0,
  );

  // a newer set where rank 1's stack was lost: named, and counted out of "k/n"
  const lost = [
    ...actions,
    dumpRecord(1795305400000, [
      { rank: 0, pid: 32202, status: 'dumped', file: `/r/${B}`, header: head(B) },
      {
        rank: 1,
        pid: 32203,
        status: 'no-answer',
        file: null,
        why: 'no stack written (lost) — no stack dump within 8.0s; state S',
      },
    ]),
  ];
  const l2 = panelText(run, lost);
  assert.match(l2[0]!, /· 1\/2 ranks: r0$/);
  assert.ok(
    l2.some((l) => /^r1: no stack written \(lost\)/.test(l)),
    l2.join('\n'),
  );
  assert.equal(
    operatorDumpSets(lost)[0]!.ranks[1]!.why,
    'no stack written (lost) — no stack dump within 8.0s; state S',
  );
});

test('a claimed file overwritten since is nobody\'s; without any record the set is labelled "r?", never by time', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const actions = [
    dumpRecord(1795305291000, [
      { rank: 0, pid: 32202, status: 'dumped', file: `/r/${A}`, header: 'Signal 10 at 2026-11-21T23:54:47.000000Z' },
      { rank: 1, pid: 32203, status: 'dumped', file: `/r/${B}`, header: head(B) },
    ]),
  ];
  assert.equal(
    claimedRank(
      run.dumps.find((d) => d.name === A)!,
      dumpClaims(actions),
    ),
    null,
  );
  const lines = panelText(run, actions);
  assert.match(lines[0]!, /1\/2 ranks: r1$/);
  assert.ok(
    lines.some((l) => l === `r0: ${A} was overwritten since`),
    lines.join('\n'),
  );
  const bare = panelText(run, []);
  assert.match(bare[0]!, /^set @ .* · 2 dumps: r\? r\?$/);
});

test("status text and --json name each dump by rank and carry the operator's sets", async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const actions = [
    dumpRecord(1795305291000, [
      { rank: 0, pid: 32202, status: 'dumped', file: `/r/${A}`, header: head(A) },
      { rank: 1, pid: 32203, status: 'no-answer', file: null, why: 'no stack written (lost) — gone' },
    ]),
  ];
  const text = formatStatus(run, undefined, actions);
  assert.match(text, /your newest set .* by alice: 1\/2 ranks dumped/);
  assert.match(text, /^ {4}rank 1: no stack written \(lost\) — gone$/m);
  assert.match(text, new RegExp(`^  rank 0  ${A}  signal 10 \\(nsa-top dump\\)`, 'm'));
  assert.match(text, new RegExp(`^  rank \\?  ${B}  signal 10 ·`, 'm'));
  const ev = new Checker().evaluate({ now: run.takenAt, run, procs: null, gpu: null });
  const j = statusJson(run, ev, undefined, actions);
  assert.deepEqual(j.dumps.map((d) => [d.name, d.claimedRank, d.byOperator]).sort(), [
    [A, 0, true],
    [B, null, false],
  ]);
  assert.equal(j.dumpSets.length, 1);
  assert.deepEqual(
    j.dumpSets[0]!.ranks.map((r) => [r.rank, r.file, r.status]),
    [
      [0, A, 'dumped'],
      [1, null, 'no-answer'],
    ],
  );
});

test("the Ranks panel's last dump of a rank comes from the dump record's claim (the real names carry no rank)", async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  const mtime = (n: string) => run.dumps.find((d) => d.name === n)!.mtimeMs;
  const actions = [
    dumpRecord(1795305291000, [
      { rank: 0, pid: 32202, status: 'dumped', file: `/r/${B}`, header: head(B) },
      { rank: 1, pid: 32203, status: 'dumped', file: `/r/${A}`, header: head(A) },
    ]),
  ];
  const rows = rankRows({ ...baseState(run), actions });
  assert.deepEqual(
    rows.map((r) => [r.rank, r.lastDumpMs]),
    [
      [0, mtime(B)],
      [1, mtime(A)],
    ],
  );
  assert.deepEqual(
    rankRows(baseState(run)).map((r) => r.lastDumpMs),
    [null, null],
    'no record: nobody can tell whose they are',
  );
});
