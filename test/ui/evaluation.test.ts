// Every colour and verdict on screen comes from the evaluation: each fixture run (and states built
// from it: a stopped rank, a dead rank, a frozen fast run, a gate collapse) is judged by the Checker,
// composed, and the header badge, the why, each rank row, each gate reading, rate/ETA and the halt
// dialog are checked against the evaluation — and follow it when the thresholds change.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { thresholdsFromEnv, type Thresholds } from '../../src/checks/index.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import type { ProcState, RunProcesses } from '../../src/remote/types.js';
import type { RunSnapshot } from '../../src/trainer/run/snapshot.js';
import { compose } from '../../src/ui/compose.js';
import { dialogView } from '../../src/ui/dialogs/index.js';
import { HEALTH_ROLE } from '../../src/ui/panels/header.js';
import { plain, type Line } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { fixtureSnapshot, judgedState } from './helpers.js';

function procsOf(states: ProcState[], pid0 = 32202): RunProcesses {
  return {
    at: 0,
    launcher: null,
    unknown: [],
    ranks: states.map((state, rank) => ({
      rank,
      localRank: rank,
      gpuMemMiB: null,
      gpuUuid: null,
      source: 'environ' as const,
      proc: {
        pid: pid0 + rank,
        ppid: 1,
        startTime: '1',
        state,
        cpuPct: 0,
        rssKiB: 1000,
        wchan: null,
        argv: ['python'],
        env: {},
      },
    })),
  };
}

async function live(name: 'ddp2-dumps-halt' | 'single'): Promise<{ run: RunSnapshot; lastTs: number }> {
  const run = await fixtureSnapshot(name);
  run.ended = false;
  run.metrics = null;
  run.control.halt = { present: false, content: null, mtimeMs: null };
  run.log.haltSeen = false;
  return { run, lastTs: Math.max(...run.ranks.map((r) => r.lastTs ?? 0)) };
}

const frame = (s: CockpitState, cols = 160, rows = 48) => compose(s, initialView(), cols, rows, s.at).lines;

/** Asserts each judgement drawn on the frame is the evaluation's. */
function assertPresentsEvaluation(s: CockpitState, label: string): void {
  const lines = frame(s);
  const head = lines[0]!;
  const badge = head.find((seg) => seg.inverse && seg.text.trim() === s.runState);
  assert.ok(badge, `${label}: the badge says ${s.runState}`);
  assert.equal(badge!.role, HEALTH_ROLE[s.stateHealth!], `${label}: badge colour from stateHealth`);
  assert.ok(
    plain(head).includes(s.runStateWhy.slice(0, 40)),
    `${label}: the why is the evaluation's: ${s.runStateWhy}`,
  );
  const progress = plain(lines[2]!);
  if (s.advancing) assert.doesNotMatch(progress, /no step for/, label);
  else assert.doesNotMatch(progress, /step\/s|ETA/, `${label}: no rate or ETA for a run that does not advance`);
  if (s.noStepSinceMs != null) assert.match(progress, /no step for/, label);
  // every rank row coloured as the evaluation says
  for (const rh of s.rankHealth ?? []) {
    const row = lines.map((l) => l.find((seg) => new RegExp(`^\\s*${rh.rank} \\d+ `).test(seg.text))).find(Boolean);
    assert.ok(row, `${label}: a row for rank ${rh.rank}`);
    assert.equal(row!.role, HEALTH_ROLE[rh.health], `${label}: rank ${rh.rank} coloured ${rh.health}`);
  }
  // every gate reading coloured as the evaluation says, with the threshold in force
  for (const g of s.gates?.readings ?? []) {
    if (g.value === null) continue;
    const shown = g.key === 'collapse' ? `${(g.value * 100).toFixed(1)}%` : g.value.toFixed(3);
    const seg = lines.flatMap((l: Line) => l).find((x) => x.text === shown && x.role === HEALTH_ROLE[g.health]);
    assert.ok(seg, `${label}: gate ${g.key} ${shown} coloured ${g.health}`);
  }
  const text = lines.map(plain).join('\n');
  if (s.gates)
    assert.ok(text.includes(s.gates.watchdog.text.slice(0, 30)), `${label}: the gate countdown is the evaluation's`);
}

test('each fixture run, as judged, is what the screen shows', async () => {
  for (const name of ['single', 'ddp2-dumps-halt'] as const) {
    const run = await fixtureSnapshot(name);
    assertPresentsEvaluation(judgedState({ run, procs: procsOf([]), gpu: null }), `${name} ended`);
    const { run: lr, lastTs } = await live(name);
    const n = lr.ranks.length;
    const running = judgedState({ now: lastTs + 1000, run: lr, procs: procsOf(Array(n).fill('S')), gpu: null });
    assert.equal(running.runState, 'RUNNING');
    assertPresentsEvaluation(running, `${name} live`);
    const frozen = judgedState({ now: lastTs + 60_000, run: lr, procs: procsOf(Array(n).fill('S')), gpu: null });
    assert.equal(frozen.runState, 'STALLED', `${name}: 60 s without a step at 0.4 s/step is overdue`);
    assertPresentsEvaluation(frozen, `${name} overdue`);
  }
  const { run, lastTs } = await live('ddp2-dumps-halt');
  const stopped = judgedState({ now: lastTs + 2000, run, procs: procsOf(['S', 'T']), gpu: null });
  assert.equal(stopped.culprit?.rank, 1);
  assertPresentsEvaluation(stopped, 'rank 1 stopped');
  const dead = judgedState({ now: lastTs + 2000, run, procs: procsOf(['S']), gpu: null });
  assert.equal(dead.runState, 'STALLED');
  assert.match(dead.runStateWhy, /^rank 1 process is gone/);
  assertPresentsEvaluation(dead, 'rank 1 dead');
  // metrics.json written while both ranks still live: HALTING, not HALTED
  const { run: ended } = await live('ddp2-dumps-halt');
  ended.ended = true;
  const halting = judgedState({ now: lastTs + 2000, run: ended, procs: procsOf(['S', 'S']), gpu: null });
  assert.equal(halting.runState, 'HALTING');
  assertPresentsEvaluation(halting, 'ended, ranks alive');
  const halted = judgedState({ now: lastTs + 2000, run: ended, procs: procsOf([]), gpu: null });
  assert.equal(halted.runState, 'HALTED');
});

test('the Ranks panel follows the run cadence, not fixed seconds: a 240 s log interval is fine at 200 s', async () => {
  const { run, lastTs } = await live('single');
  run.stepTimeS = 12;
  run.identity.train = { ...run.identity.train!, logEvery: 20 };
  const slow = judgedState({ now: lastTs + 200_000, run, procs: procsOf(['S']), gpu: null });
  assert.equal(slow.runState, 'RUNNING');
  assert.equal(slow.rankHealth?.find((r) => r.rank === 0)?.health, 'ok');
  assertPresentsEvaluation(slow, '240 s cadence at 200 s');
  // the same silence on a run that logs every 0.4 s: rank 0 is the one that stopped
  const { run: fast } = await live('single');
  const quick = judgedState({ now: lastTs + 200_000, run: fast, procs: procsOf(['S']), gpu: null });
  assert.equal(quick.runState, 'STALLED');
  assert.notEqual(quick.rankHealth?.find((r) => r.rank === 0)?.health, 'ok');
  assertPresentsEvaluation(quick, 'fast cadence at 200 s');
});

test('the Gates panel shows the thresholds in force: NSA_WATCH_GATE_ENTROPY_MIN moves verdict, colour and label', async () => {
  const { run, lastTs } = await live('single');
  // three consecutive records at entropy 0.25
  for (const s of [run.series.gateEntropy]) for (const p of s.recent.slice(-3)) p.value = 0.25;
  run.gates = { ...run.gates!, entropyMean: 0.25 };
  const at = (t: Partial<Thresholds>) =>
    judgedState({ now: lastTs + 1000, run, procs: procsOf(['S']), gpu: null }, { thresholds: t });
  const dflt = at({});
  assert.equal(dflt.gates?.readings.find((r) => r.key === 'entropy')?.health, 'ok', '0.25 is above the default 0.2');
  assert.match(frame(dflt).map(plain).join('\n'), /flag <0\.2\b/);
  assertPresentsEvaluation(dflt, 'default gates');
  const env = at(thresholdsFromEnv({ NSA_WATCH_GATE_ENTROPY_MIN: '0.3' }));
  const e = env.gates?.readings.find((r) => r.key === 'entropy');
  assert.equal(e?.limit, 0.3);
  assert.equal(e?.health, 'critical', 'three records under 0.3: the collapse rule holds');
  assert.equal(env.alerts.find((a) => a.id === 'gates:collapse')?.severity, 'critical');
  const text = frame(env).map(plain).join('\n');
  assert.match(text, /flag <0\.3\b/);
  assert.doesNotMatch(text, /flag <0\.2\b/);
  assert.equal(env.gates?.watchdog.health, 'critical');
  assertPresentsEvaluation(env, 'NSA_WATCH_GATE_ENTROPY_MIN=0.3');
});

test('the halt dialog never says "loses nothing" while a rank is hung', async () => {
  const { run, lastTs } = await live('ddp2-dumps-halt');
  run.identity.trainer = 'nsa-top-reference'; // a trainer that saves on HALT
  const risk = { steps: 0, lastCheckpointStep: 20, savesOnHalt: true };
  const ok = judgedState(
    { now: lastTs + 1000, run, procs: procsOf(['S', 'S']), gpu: null },
    { over: { stepsAtRisk: risk } },
  );
  const said = (s: CockpitState) =>
    dialogView({ kind: 'halt-choose', startedAt: s.at }, s, s.at, 100).lines.map(plain).join('\n');
  assert.match(said(ok), /loses nothing/);
  const hung = judgedState(
    { now: lastTs + 1000, run, procs: procsOf(['S', 'T']), gpu: null },
    { over: { stepsAtRisk: risk } },
  );
  const text = said(hung).replace(/\n/g, ' ');
  assert.doesNotMatch(text, /loses nothing/);
  assert.match(text, /rank 1 .*stopped/);
  assert.match(text, /loses 11 steps \(since the checkpoint at step 20\)/);
});

test('the GPUs panel colours what the checks judge: memory near full, temperature, idle', async () => {
  const { run, lastTs } = await live('single');
  const dev = (o: Record<string, unknown>) => ({
    index: 0,
    name: 'NVIDIA A100',
    uuid: 'GPU-0',
    mig: null,
    memUsedMiB: 20000,
    memTotalMiB: 81920,
    utilPct: 60,
    powerW: 250,
    powerLimitW: 400,
    tempC: 50,
    smClockMHz: null,
    memClockMHz: null,
    ...o,
  });
  const gpu = (o: Record<string, unknown>) => ({
    status: 'ok' as const,
    at: lastTs,
    latencyMs: 5,
    apps: [],
    devices: [dev(o)],
  });
  for (const [o, field, want] of [
    [{ tempC: 90 }, 'temp', 'critical'],
    [{ tempC: 80 }, 'temp', 'warning'],
    [{ memUsedMiB: 80000 }, 'mem', 'critical'],
    [{ utilPct: 2 }, 'util', 'warning'],
  ] as const) {
    const s = judgedState({ now: lastTs + 1000, run, procs: procsOf(['S']), gpu: gpu(o) });
    const h = s.gpuHealth?.[0]?.[field];
    assert.equal(h, want, `${JSON.stringify(o)}: ${field}`);
    const shown = field === 'temp' ? `${o.tempC}°C` : field === 'util' ? `${o.utilPct}%` : null;
    if (shown) {
      const seg = frame(s)
        .flatMap((l) => l)
        .find((x) => x.text.trim() === shown);
      assert.equal(seg?.role, HEALTH_ROLE[want], `${shown} coloured ${want}`);
    }
  }
});
