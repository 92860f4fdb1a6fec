// Replay from the trainer's files alone, on every recorded real-trainer run in test/fixtures (the
// copies of ../shared/fixtures): the timeline each one's files allow (its span, its markers), what
// it says it cannot show, the state the one judge gives at chosen moments, the player's keys, and
// that a replay neither writes nor signals. No process is started (the unit tier).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../src/remote/local/host.js';
import { resolveRunDirsAt } from '../../src/trainer/run/rundir.js';
import { openReplaySource } from '../../src/replay/open.js';
import { FilesSource } from '../../src/replay/files.js';
import { AsOfHost } from '../../src/replay/asof.js';
import { momentOfStep, Player } from '../../src/replay/player.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/nsa-vibe/', import.meta.url));
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-top-replay-'));
after(async () => {
  rmSync(tmp, { recursive: true, force: true });
  await host.close();
});

/** every run dir under the fixtures (a dir with a heartbeat and no journal of nsa-top's), by its path below them */
function fixtureRuns(dir = FIXTURES, out: string[] = []): string[] {
  const names = readdirSync(dir);
  if (names.some((n) => /^heartbeat(_rank\d+)?\.jsonl$/.test(n)) && !existsSync(join(dir, '.nsa-top', 'journal.jsonl')))
    out.push(relative(FIXTURES, dir));
  for (const n of names) if (statSync(join(dir, n)).isDirectory()) fixtureRuns(join(dir, n), out);
  return out;
}

const opened = new Map<string, Promise<FilesSource>>();
/** each run is read and swept once for the whole file (the tests share it) */
function sourceOf(dir: string): Promise<FilesSource> {
  let p = opened.get(dir);
  if (!p) {
    p = (async () => {
      const { source } = await openReplaySource(host, await resolveRunDirsAt(host, dir), { samples: 60 });
      assert.ok(source instanceof FilesSource, 'no journal: the trainer files');
      return source;
    })();
    opened.set(dir, p);
  }
  return p;
}

/** a tree's names, sizes and mtimes: what a replay must leave as it found it */
function treeOf(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n);
      const st = statSync(p);
      out.push(`${relative(dir, p)} ${st.isDirectory() ? 'dir' : st.size} ${st.mtimeMs}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

const Z = (hms: string, day = '2026-11-21') => Date.parse(`${day}T${hms}Z`);

test('every fixture run replays from its files: a span from its records, markers in it, what it cannot show', async () => {
  const runs = fixtureRuns();
  for (const want of ['single', 'ddp2-dumps-halt', 'ddp2-crash-resume/artifacts/ddp2-crash-resume'])
    assert.ok(runs.includes(want), `fixture ${want} found (${runs.join(', ')})`);
  for (const name of runs) {
    const src = await sourceOf(join(FIXTURES, name));
    assert.match(src.origin, /^trainer files only/, name);
    // the span is the run's own (2026-11-2x), not the copy's mtimes (today)
    assert.ok(src.span.end - src.span.start < 3600_000 && src.span.end > src.span.start, `${name}: a span of the run`);
    assert.ok(src.span.end < Date.parse('2026-11-25T00:00:00Z'), `${name}: its end is the run's, not the copy's`);
    for (const m of src.markers)
      assert.ok(m.at >= src.span.start && m.at <= src.span.end, `${name}: ${m.label} in span`);
    assert.deepEqual(
      src.markers.map((m) => m.at),
      [...src.markers.map((m) => m.at)].sort((a, b) => a - b),
      `${name}: oldest first`,
    );
    assert.ok(
      src.missing.some((m) => m.startsWith('no process history')),
      name,
    );
    assert.ok(
      src.missing.some((m) => m.startsWith('no GPU history')),
      name,
    );
    assert.ok(
      src.missing.some((m) => /file time\(s\) guessed .*metrics\.json/.test(m)),
      `${name}: copied mtimes said`,
    );
    const end = await src.stateAt(src.span.end);
    assert.ok(['FINISHED', 'HALTED'].includes(end.runState), `${name} ends ${end.runState}: ${end.runStateWhy}`);
    assert.equal(end.readOnly, true);
    assert.equal(end.procs, null);
    assert.equal(end.collectError ?? null, null, `${name}: no collection error (${end.collectError})`);
  }
});

test('ddp2-dumps-halt: the dumps and .HALT on the timeline, RUNNING in between, HALTED by .HALT at the end', async () => {
  const src = await sourceOf(join(FIXTURES, 'ddp2-dumps-halt'));
  // the first boot and the last step_end of the heartbeats
  assert.equal(Math.round(src.span.start), Math.round(1795305284.6131446 * 1000));
  assert.equal(Math.round(src.span.end), Math.round(1795305297.359796 * 1000));
  const dumps = src.markers.filter((m) => m.kind === 'dump');
  assert.deepEqual(
    dumps.map((m) => m.label),
    ['stack dump stackdump_1795305288.txt', 'stack dump stackdump_1795305290.txt'],
  );
  assert.equal(dumps[0]!.at, Date.parse('2026-11-21T23:54:48.469Z'), 'timed by its "Signal 10 at" line');
  const halt = src.markers.find((m) => m.kind === 'action' && m.label.startsWith('.HALT'));
  assert.ok(halt, 'the .HALT marker');
  assert.ok(halt.at >= Z('23:54:57'), '.HALT no earlier than the log line that saw it');
  assert.ok(src.markers.some((m) => m.kind === 'state' && /→ HALTED$/.test(m.label)));
  const mid = await src.stateAt(Z('23:54:50'));
  assert.equal(mid.runState, 'RUNNING', mid.runStateWhy);
  // step 14's heartbeat is at 23:54:49.685, step 15's at 23:54:50.195
  assert.equal(mid.run.step, 14);
  assert.equal(mid.run.dumps.length, 1, 'the second dump is not written yet');
  assert.equal(mid.run.control.halt.present, false, '.HALT not there yet');
  const end = await src.stateAt(src.span.end);
  assert.equal(end.runState, 'HALTED');
  assert.match(end.runStateWhy, /stopped by \.HALT at step 31 of 400/);
  assert.equal(await momentOfStep(src, 16), src.timeOfStep(16));
  assert.equal((await src.stateAt(src.timeOfStep(16)!)).run.step, 16);
});

test('ddp2-crash-resume: STALLED with every rank silent after the crash, the relaunch marked, RUNNING again, FINISHED', async () => {
  const src = await sourceOf(join(FIXTURES, 'ddp2-crash-resume/artifacts/ddp2-crash-resume'));
  const day = '2026-11-24';
  const stalled = await src.stateAt(Z('05:13:03', day));
  assert.equal(stalled.runState, 'STALLED', stalled.runStateWhy);
  assert.equal(stalled.run.step, 51);
  assert.match(
    stalled.runStateWhy,
    /all ranks silent since .*no step advance for .* at step 51; process table unknown/,
  );
  assert.ok(stalled.alerts.some((a) => a.severity === 'critical' && /step frozen at 51/.test(a.title)));
  const restart = src.markers.find((m) => m.kind === 'restart');
  assert.ok(restart, src.markers.map((m) => m.label).join('; '));
  assert.ok(restart.at > Z('05:13:03', day) && restart.at < Z('05:13:30', day));
  const kinds = src.markers.map((m) => `${m.kind}:${m.label}`);
  assert.ok(kinds.includes('state:RUNNING → STALLED'), kinds.join('; '));
  assert.ok(kinds.some((k) => /^alert:critical step frozen at 51/.test(k)));
  assert.ok(
    kinds.some((k) => /^clear:cleared: critical step frozen/.test(k)),
    'the stall cleared once it ran again',
  );
  assert.deepEqual(
    src.markers.filter((m) => m.kind === 'checkpoint').map((m) => m.label),
    [20, 40, 60, 80, 100].map((s) => `checkpoint step ${s}`),
  );
  // the log at the stall shows the first run's lines only: the resume banner is not there yet
  assert.equal(
    stalled.run.log.lines.some((l) => l.includes('resumed from')),
    false,
  );
  const again = await src.stateAt(restart.at + 20_000);
  assert.equal(again.runState, 'RUNNING', again.runStateWhy);
  assert.ok((again.run.step ?? 0) > 40, `resumed past checkpoint 40: step ${again.run.step}`);
  assert.equal((await src.stateAt(src.span.end)).runState, 'FINISHED');
});

test('believable mtimes are used as they are; a replay writes nothing, signals nothing, and leaves the run as it was', async () => {
  const dir = join(tmp, 'halt-mtimes');
  cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
  // as the trainer left them: .HALT touched mid-run, metrics.json at the end
  utimesSync(join(dir, '.HALT'), Z('23:54:53') / 1000, Z('23:54:53') / 1000);
  for (const n of readdirSync(dir).filter((n) => n !== '.HALT'))
    utimesSync(join(dir, n), Z('23:54:57.5') / 1000, Z('23:54:57.5') / 1000);
  const before = treeOf(dir);
  const src = await sourceOf(dir);
  const halt = src.markers.find((m) => m.label.startsWith('.HALT'));
  assert.deepEqual(halt, { at: Z('23:54:53'), kind: 'action', label: '.HALT written' });
  assert.equal(
    src.missing.some((m) => m.includes('guessed')),
    false,
    'no time guessed',
  );
  const halting = await src.stateAt(Z('23:54:54'));
  assert.equal(halting.runState, 'HALTING', halting.runStateWhy);
  assert.match(halting.runStateWhy, /^\.HALT requested 1(\.0)?s ago; heartbeats still arriving/);
  // every effect refused by the host a replay judges through
  const h = new AsOfHost(src.idx, src.span.end);
  await assert.rejects(h.signal(), /replay: a recording is only read/);
  await assert.rejects(h.writeOwn(), /replay: a recording is only read/);
  await assert.rejects(h.appendFile(), /replay/);
  await assert.rejects(h.exec(), /no process history/);
  assert.deepEqual(treeOf(dir), before, 'the run dir is as it was');
  assert.equal(existsSync(join(dir, '.nsa-top')), false);
});

test('the player: opens at a moment, jumps marker to marker, steps, plays and stops at the end', async () => {
  const src = await sourceOf(join(FIXTURES, 'ddp2-dumps-halt'));
  const p = new Player(src, { at: Z('23:54:47'), run: 'r', frameMs: 20, speed: 60 });
  const first = await p.open();
  assert.equal(first.replay?.at, Z('23:54:47'));
  assert.equal(first.readOnly, true);
  p.jump(1);
  await p.settled();
  assert.equal(p.get()?.replay?.at, Date.parse('2026-11-21T23:54:48.469Z'), 'the first dump');
  assert.equal(p.get()?.run.dumps.length, 1);
  p.jump(-1);
  await p.settled();
  assert.ok(p.at < Z('23:54:47'));
  p.step(1);
  await p.settled();
  assert.equal(p.get()?.replay?.at, p.at);
  p.speed(1);
  assert.equal(p.speedNow, 120);
  p.start();
  try {
    p.toggle();
    assert.equal(p.playing, true);
    const deadline = Date.now() + 30_000;
    while (p.playing && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await p.settled();
    assert.equal(p.playing, false, 'stopped at the end');
    assert.equal(p.get()?.replay?.at, src.span.end);
    assert.equal(p.get()?.runState, 'HALTED');
  } finally {
    p.stop();
  }
});

test('a recorded run with a journal (the real trainer on an H200) replays from it: its GPU, its ranks on it', async () => {
  const { source } = await openReplaySource(host, await resolveRunDirsAt(host, join(FIXTURES, 'ddp2-h200-gpu')));
  assert.ok(!(source instanceof FilesSource), 'the journal the cockpit recorded, not the trainer files');
  assert.match(source.origin, /^journal/);
  // 14:10:05 UTC: the cockpit had GPU telemetry: one H200, both ranks' processes on it
  const st = await source.stateAt(Date.parse('2026-11-26T14:10:05Z'));
  assert.equal(st.runState, 'RUNNING');
  assert.ok(st.gpu?.status === 'ok', 'GPU telemetry in the journal');
  if (st.gpu?.status !== 'ok') return;
  assert.deepEqual(
    st.gpu.devices.map((d) => d.name),
    ['NVIDIA H200'],
  );
  assert.deepEqual(st.gpu.apps.map((a) => a.pid).sort(), [649, 650]);
});
