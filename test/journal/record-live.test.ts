// The journal end to end on one live reference run (a hang on rank 1, a stack dump of every rank, a
// halt): the cockpit's collector emits, the recorder writes, and the journal read back as a
// ReplaySource gives at the moment of the stall the state the collector emitted then — STALLED, the
// same culprit and alert titles; its markers hold the stall, the dump, the halt; a second recorder
// on the run says who records instead of writing; a stale lock is taken over; `status --at` answers
// from the journal and refuses a moment outside it. Rotation keeps the journal under its cap with
// every part readable from its start.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createActions } from '../../src/cockpit/actions.js';
import { Collector } from '../../src/cockpit/collector.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import { JournalRecorder, journalSource } from '../../src/journal/index.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { resolveRunDirsAt } from '../../src/trainer/run/rundir.js';
import { startHungRun } from '../e2e/liverun.js';
import { BIN } from '../e2e/pty.js';
import { fixtureState } from '../ui/helpers.js';

async function until<T>(
  what: string,
  ms: number,
  fn: () => T | null | undefined | false | Promise<T | null | undefined | false>,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** a copy of the ddp2-dumps-halt fixture run in a temp dir (removed by the caller), and its state */
async function fixtureRun(prefix: string) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const { cpSync } = await import('node:fs');
  const { FIXTURES } = await import('../ui/helpers.js');
  cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
  const host = new LocalHost();
  return { dir, host, dirs: await resolveRunDirsAt(host, dir), base: await fixtureState('ddp2-dumps-halt') };
}

const titles = (s: CockpitState) => s.alerts.map((a) => `${a.severity} ${a.title}`).sort();

test(
  'a live hang, dump and halt recorded; stateAt(the stall) is the state the collector emitted then',
  { timeout: 150_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-journal-'));
    const runDir = join(cwd, 'run');
    // a short stall floor (NSA_WATCH_* are honoured by the collector's checker, read at construction)
    process.env.NSA_WATCH_HEARTBEAT_STALL_S = '3';
    const run = startHungRun({ cwd, runDir, hang: 'step=14,rank=1', logEvery: 5, saveEvery: 25 });
    const host = new LocalHost();
    let rec: JournalRecorder | null = null;
    let collector: Collector | null = null;
    try {
      await run.firstBeat();
      const dirs = await resolveRunDirsAt(host, runDir);
      // a stale lock (a pid that has exited) is taken over
      mkdirSync(join(runDir, '.nsa-top'), { recursive: true });
      const gone = spawnSync('true').pid!;
      writeFileSync(
        join(runDir, '.nsa-top', 'journal.lock'),
        JSON.stringify({ pid: gone, startTime: '1', host: hostname(), as: 'cockpit', since: 0 }),
      );
      collector = new Collector({ host, runDir, dirs, intervalMs: 400, readOnly: false });
      rec = new JournalRecorder({ host, dirs, as: 'cockpit', flushEveryMs: 300, keyEveryMs: 5000 });
      assert.match(await rec.start(), /^recording to .*journal\.jsonl$/, 'the stale lock was taken over');
      // one writer: a second cockpit on the run says who records
      const second = new JournalRecorder({ host, dirs, as: 'cockpit' });
      assert.equal(await second.start(), `recording by pid ${process.pid} (cockpit)`);
      await second.close();
      const live: CockpitState[] = [];
      collector.subscribe((s) => {
        live.push(s);
        rec!.record(s);
      });
      collector.start();
      const stalled = await until('the live state STALLED', 90_000, () => live.find((s) => s.runState === 'STALLED'));
      // the dump of every rank and a halt, through the cockpit's own (audited) actions
      const acts = createActions({ host, runDir, dirs, readOnly: false, state: () => collector!.get() });
      const dumped = await acts.dump(() => {});
      assert.ok(
        dumped.results.some((r) => r.outcome === 'dumped'),
        JSON.stringify(dumped.results),
      );
      const named = await until('the culprit named after the dump', 30_000, () =>
        live.find((s) => s.runState === 'STALLED' && s.culprit?.rank === 1),
      );
      const halted = await acts.halt('now');
      assert.equal(halted.ok, true, halted.detail);
      await until('the halt in the journal', 20_000, () =>
        live.some((s) => s.actions.some((a) => a.action === 'halt')),
      );
      // one more round, then the recorder closes
      const rounds = live.length;
      await until('one more round after the halt', 20_000, () => live.length > rounds);
      collector.stop();
      await rec.close();
      assert.equal(readdirSync(join(runDir, '.nsa-top')).includes('journal.lock'), false, 'the lock is given back');
      const mode = statSync(join(runDir, '.nsa-top', 'journal.jsonl')).mode & 0o777;
      assert.equal(mode, 0o600);

      const src = await journalSource(host, dirs);
      assert.ok(src, 'the run has a journal');
      assert.match(src.origin, /^journal, 1 file, /);
      assert.equal(src.skipped, 0);
      for (const want of [stalled, named]) {
        const got = await src.stateAt(want.at);
        assert.equal(got.runState, 'STALLED');
        assert.equal(got.runStateWhy, want.runStateWhy);
        assert.deepEqual(got.culprit ?? null, want.culprit ?? null);
        assert.deepEqual(titles(got), titles(want));
        assert.equal(got.run.step, want.run.step);
      }
      // every emitted state is the one read back (apart from the samples kept every 10 s)
      for (const want of live) {
        const got = await src.stateAt(want.at);
        assert.equal(`${got.runState} ${got.runStateWhy}`, `${want.runState} ${want.runStateWhy}`, `at ${want.at}`);
      }
      const kinds = new Set(src.markers.map((m) => m.kind));
      for (const k of ['alert', 'state', 'dump', 'action'] as const)
        assert.ok(kinds.has(k), `a ${k} marker: ${JSON.stringify(src.markers)}`);
      assert.ok(src.markers.some((m) => m.kind === 'state' && /→ STALLED/.test(m.label)));
      assert.ok(src.markers.some((m) => m.kind === 'action' && /^halt by /.test(m.label)));
      // the order of the story: stalled, dumped, halted
      const firstAt = (re: RegExp) => src.markers.find((m) => re.test(m.label))!.at;
      assert.ok(firstAt(/→ STALLED/) <= firstAt(/^stack dump/) && firstAt(/^stack dump/) <= firstAt(/^halt by/));

      // status --at answers from the journal, and refuses a moment outside it
      const cli = (...args: string[]) =>
        spawnSync(process.execPath, [BIN, 'status', runDir, ...args], { encoding: 'utf8', cwd });
      const j = cli('--at', new Date(named.at).toISOString(), '--json');
      assert.equal(j.status, 1, j.stderr);
      const body = JSON.parse(j.stdout) as {
        state: { runState: string };
        culprit: { rank: number };
        alerts: { title: string }[];
      };
      assert.equal(body.state.runState, 'STALLED');
      assert.equal(body.culprit.rank, 1);
      assert.deepEqual(body.alerts.map((a) => a.title).sort(), named.alerts.map((a) => a.title).sort());
      const txt = cli('--at', `step=${stalled.run.step}`);
      assert.match(txt.stdout, /^state +\w+/m, txt.stderr);
      const out = cli('--at', new Date(src.span.start - 3_600_000).toISOString());
      assert.equal(out.status, 2);
      assert.match(out.stderr.trim(), /is outside the journal \(/);
      assert.equal(out.stderr.trim().split('\n').length, 1);
      const bad = cli('--at', 'yesterday');
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /neither a time/);
    } finally {
      collector?.stop();
      await rec?.close();
      delete process.env.NSA_WATCH_HEARTBEAT_STALL_S;
      run.stop();
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);

test('rotation keeps the journal within its cap, each part readable from its start; no journal: null', async () => {
  const { dir, host, dirs, base } = await fixtureRun('nsa-top-journal-rot-');
  try {
    assert.equal(await journalSource(host, dirs), null);
    // 0.5 MB in all: 4 parts of 128 KB; a keyframe every 20 states
    const rec = new JournalRecorder({
      host,
      dirs,
      as: 'cockpit',
      maxMb: 0.5,
      keyEveryMs: 20_000,
      flushEveryMs: 60_000,
    });
    assert.match(await rec.start(), /^recording to/);
    const t0 = 1_700_000_000_000;
    for (let i = 0; i < 1500; i++) {
      rec.record({ ...base, at: t0 + i * 1000, run: { ...base.run, step: i }, runStateWhy: `look ${i}` });
      if (i % 10 === 9) await rec.flush();
    }
    await rec.close();
    const parts = readdirSync(join(dir, '.nsa-top'))
      .filter((f) => f.startsWith('journal'))
      .sort();
    assert.deepEqual(parts, ['journal.1.jsonl', 'journal.2.jsonl', 'journal.3.jsonl', 'journal.jsonl']);
    let total = 0;
    for (const p of parts) {
      const text = readFileSync(join(dir, '.nsa-top', p), 'utf8');
      total += text.length;
      const [l0, l1] = text.split('\n');
      assert.match(l0!, /^\{"v":1,"t":\d+,"k":"open"/, p);
      assert.match(l1!, /^\{"v":1,"t":\d+,"k":"key"/, p);
    }
    assert.ok(total <= 0.5 * 1048576 * 1.1, `within the cap: ${total} B`);
    const src = (await journalSource(host, dirs))!;
    assert.match(src.origin, /^journal, 4 files/);
    assert.equal(src.span.end, t0 + 1499 * 1000);
    assert.ok(src.span.start > t0, 'the oldest part was removed');
    const oldest = Math.ceil((src.span.start - t0) / 1000);
    assert.ok(oldest > 1000 && oldest < 1400, `the newest states are kept: from ${oldest}`);
    for (const i of [oldest, oldest + 1, 1400, 1459, 1460, 1499]) {
      const s = await src.stateAt(t0 + i * 1000 + 500);
      assert.equal(s.run.step, i);
      assert.equal(s.runStateWhy, `look ${i}`);
    }
    assert.equal(await src.timeOfStep(1450), t0 + 1450 * 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a long run's state (~1.2 MB, every series full) is a keyframe once, then deltas: not a key every look", async () => {
  const { dir, host, dirs, base } = await fixtureRun('nsa-top-journal-big-');
  try {
    // eight series of 2000 recent points and 400 older buckets, as a run past its 2000th logged
    // step has: each look slides every window by one point
    const names = ['loss', 'toksPerS', 'lr', 'gateEntropy', 'gateMax', 'collapseFrac', 'dtFetchS', 'valLoss'];
    const history = Array.from({ length: 400 }, (_, j) => ({
      stepFrom: j * 10,
      stepTo: j * 10 + 5,
      tFrom: null,
      tTo: null,
      min: 2.1,
      max: 2.3,
      last: 2.2,
      count: 2,
      segment: 0,
    }));
    const seriesAt = (i: number) =>
      Object.fromEntries(
        names.map((n, k) => [
          n,
          {
            recent: Array.from({ length: 2000 }, (_, j) => ({
              step: (i + j) * 5,
              t: null,
              value: 1 + ((i + j + k) % 97) / 1000,
              segment: 0,
            })),
            history,
            total: i + 2000,
            nonFinite: 0,
          },
        ]),
      );
    const rec = new JournalRecorder({ host, dirs, as: 'cockpit', flushEveryMs: 60_000 });
    assert.match(await rec.start(), /^recording to/);
    const t0 = 1_700_000_000_000;
    const looks = 180; // three minutes of looks, a second apart
    for (let i = 0; i < looks; i++) {
      const run = { ...base.run, step: i, series: seriesAt(i) } as unknown as CockpitState['run'];
      rec.record({ ...base, at: t0 + i * 1000, run });
      if (i % 30 === 29) await rec.flush();
    }
    await rec.close();
    const text = readFileSync(join(dir, '.nsa-top', 'journal.jsonl'), 'utf8');
    const kinds = text
      .trimEnd()
      .split('\n')
      .map((l) => /"k":"(\w+)"/.exec(l)![1]);
    const keyLine = text.split('\n').find((l) => l.includes('"k":"key"'))!;
    assert.ok(keyLine.length > 1_000_000, `the state is a long run's: ${keyLine.length} B`);
    assert.equal(kinds.filter((k) => k === 'key').length, 1, 'one keyframe in three minutes of a 1 MB state');
    assert.equal(kinds.filter((k) => k === 'delta').length, looks - 1);
    assert.ok(text.length < 1.5 * keyLine.length, `the deltas are what is new: ${text.length} B in all`);
    const src = (await journalSource(host, dirs))!;
    const last = await src.stateAt(t0 + (looks - 1) * 1000);
    assert.equal(last.run.step, looks - 1);
    const loss = (last.run.series as unknown as Record<string, { recent: { step: number }[] }>)['loss']!;
    assert.equal(loss.recent.length, 2000);
    assert.equal(loss.recent.at(-1)!.step, (looks - 1 + 1999) * 5);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
