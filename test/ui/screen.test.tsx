// Screen tests: the cockpit drawn from real fixture runs (read by RunModel, judged by the Checker)
// into a headless xterm at several sizes, with layout invariants and the facts an operator needs.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { render } from 'ink';
import { createElement } from 'react';
import { Checker } from '../../src/checks/index.js';
import { evaluationFields, type CockpitState } from '../../src/cockpit/state.js';
import type { CockpitActions } from '../../src/cockpit/actions.js';
import { linesToAnsi } from '../../src/ui/ansi.js';
import { App } from '../../src/ui/App.js';
import { compose } from '../../src/ui/compose.js';
import { layout, type Slot } from '../../src/ui/layout.js';
import { type Line, lineWidth, plain } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { fixtureSnapshot, fixtureState, judgedState, xtermScreen } from './helpers.js';

const SIZES: [number, number][] = [
  [80, 24],
  [120, 40],
  [200, 60],
];

async function judged(name: string, over: Partial<CockpitState> = {}): Promise<CockpitState> {
  const s = await fixtureState(name);
  const now = s.run.takenAt;
  const ev = new Checker().evaluate({ now, run: s.run, procs: null, gpu: null });
  return { ...s, at: now, ...evaluationFields(ev), ...over };
}

async function screenOf(s: CockpitState, cols: number, rows: number, view = initialView()) {
  const f = compose(s, view, cols, rows, s.at);
  const scr = await xtermScreen(cols, rows, [linesToAnsi(f.lines, false).split('\n').join('\r\n')]);
  return { f, scr, text: scr.rows.join('\n') };
}

for (const name of ['ddp2-dumps-halt', 'single']) {
  for (const [cols, rows] of SIZES) {
    test(`${name} at ${cols}x${rows}: frame is rows-1 tall, no line spills, key facts visible`, async () => {
      const s = await judged(name);
      const { f, scr, text } = await screenOf(s, cols, rows);
      assert.equal(f.lines.length, rows - 1, 'frame height');
      for (const [i, l] of f.lines.entries()) assert.equal(lineWidth(l), cols, `line ${i} width: ${plain(l)}`);
      // written into a real terminal emulator the frame does not scroll: the last row stays empty
      assert.equal(scr.rows[rows - 1]!.trim(), '', 'last row untouched');
      assert.match(scr.rows[0]!, new RegExp(name === 'single' ? 'FINISHED|EXITED' : 'HALTED'));
      assert.match(text, name === 'single' ? /step 40\/40/ : /step 31\/400/);
      assert.match(text, /loss 5\.70\d\d/);
      assert.match(text, /world 2 DDP|world 1/);
      assert.match(text, /PREFILL_BATCHED=1/);
      // every panel's title is on screen (compact screens show tab groups)
      for (const title of ['Training', 'Ranks', 'GPUs', 'Gates'])
        assert.ok(text.includes(title), `${title} panel at ${cols}x${rows}`);
    });
  }
}

test('the halted DDP run names its stop and shows the dump set; no odd rank, as the rule says', async () => {
  const s = await judged('ddp2-dumps-halt');
  assert.match(s.runStateWhy, /HALT/);
  const { text } = await screenOf(s, 120, 40);
  assert.match(text, /HALTED/);
  assert.match(text, /2 dumps/);
  // two dumps taken 2 s apart while steps still advanced: the rule names no odd rank, nor does the panel
  assert.equal(s.dumpOdd, null);
  assert.doesNotMatch(text, /ODD/);
  assert.match(text, /all_reduce/);
  assert.match(text, /backward/);
});

test('layout: slots never overlap and stay inside the frame, for every size from 80x23 to 220x70', () => {
  for (let cols = 80; cols <= 220; cols += 7) {
    for (let rows = 23; rows <= 70; rows += 5) {
      for (const [zoom, bannerRows, alertRows] of [
        [null, 0, 0],
        ['log' as const, 0, 0],
        [null, 2, 40],
        ['log' as const, 1, 0],
        [null, 1, 3],
      ] as const) {
        const L = layout({ cols, rows, focus: 'training', zoom, gpuRows: 4, rankRows: 3, bannerRows, alertRows });
        assert.equal(L.kind, 'ok');
        if (L.kind !== 'ok') continue;
        const cells = new Set<number>();
        let area = 0;
        for (const sl of L.slots as Slot[]) {
          assert.ok(
            sl.x >= 0 && sl.y >= 0 && sl.x + sl.w <= cols && sl.y + sl.h <= rows - 1,
            `slot ${sl.active} inside ${cols}x${rows}`,
          );
          assert.ok(sl.h >= 1 && sl.w >= 10, `slot ${sl.active} has room`);
          for (let y = sl.y; y < sl.y + sl.h; y++)
            for (let x = sl.x; x < sl.x + sl.w; x++) {
              const k = y * 1000 + x;
              assert.ok(!cells.has(k), `overlap at ${x},${y} (${cols}x${rows})`);
              cells.add(k);
            }
          area += sl.w * sl.h;
        }
        assert.equal(area, cols * (rows - 1), `slots tile the frame at ${cols}x${rows}`);
      }
    }
  }
});

test('below 80x23 (an 80x24 terminal under tmux) the cockpit says the terminal is too small, still within rows-1', async () => {
  const s = await judged('single');
  for (const [cols, rows] of [
    [79, 30],
    [100, 22],
    [40, 10],
  ] as [number, number][]) {
    const f = compose(s, initialView(), cols, rows, s.at);
    assert.ok(f.lines.length <= rows - 1);
    assert.match(plain(f.lines[0]!), /terminal too small/);
    for (const l of f.lines) assert.equal(lineWidth(l), cols);
  }
});

test('NO_COLOR: no colour escapes, but the state is still marked (inverse)', async () => {
  const s = await judged('ddp2-dumps-halt');
  const f = compose(s, initialView(), 120, 40, s.at);
  const mono = linesToAnsi(f.lines, true);
  assert.doesNotMatch(mono, /\x1b\[(3[0-7]|9[0-7])(;|m)/);
  assert.match(mono, /\x1b\[[0-9;]*7m HALTED/);
  const colour = linesToAnsi(f.lines, false);
  assert.match(colour, /\x1b\[3[0-7]/);
});

test('read-only shows on the header and the footer key hints', async () => {
  const s = await judged('single', { readOnly: true });
  const { text } = await screenOf(s, 120, 40);
  assert.match(text, /READ-ONLY/);
  assert.match(text, /dump:read-only/);
  assert.match(text, /halt:read-only/);
});

test('GPU panel: capability-aware (nothing shown for unreported fields), hang and absence said in words', async () => {
  const s0 = await judged('ddp2-dumps-halt');
  const dev = {
    index: 0,
    name: 'NVIDIA A100-SXM4-80GB',
    uuid: 'GPU-a',
    mig: null,
    memUsedMiB: 40960,
    memTotalMiB: 81920,
    utilPct: 97,
    powerW: null,
    powerLimitW: null,
    tempC: 65,
    smClockMHz: null,
    memClockMHz: null,
  };
  const procs = {
    at: s0.at,
    launcher: null,
    unknown: [],
    ranks: [0, 1].map((rank) => ({
      rank,
      localRank: rank,
      gpuMemMiB: 20000 + rank,
      gpuUuid: 'GPU-a',
      source: 'environ' as const,
      proc: {
        pid: 100 + rank,
        ppid: 1,
        startTime: '1',
        state: 'R' as const,
        cpuPct: 99,
        rssKiB: 2e6,
        wchan: null,
        argv: ['python'],
        env: {},
      },
    })),
  };
  const ok = await screenOf(
    { ...s0, gpu: { status: 'ok', at: s0.at, devices: [dev], apps: [], latencyMs: 30 }, procs },
    120,
    40,
  );
  assert.match(ok.text, /A100/);
  assert.match(ok.text, /40\.0G\/80\.0G/);
  assert.match(ok.text, /97%/);
  assert.match(ok.text, /65°C/);
  assert.doesNotMatch(ok.text, / 0W|\/0W/, 'power not reported → not drawn');
  assert.match(ok.text, /r0 19\.5G r1 19\.5G/);
  const hung = await screenOf(
    { ...s0, gpu: { status: 'not-answering', since: s0.at - 42_000, at: s0.at, lastGood: null } },
    120,
    40,
  );
  assert.match(hung.text, /nvidia-smi not answering for 42s/);
  const none = await screenOf({ ...s0, gpu: { status: 'no-nvidia-tools', at: s0.at } }, 120, 40);
  assert.match(none.text, /no NVIDIA tools/);
});

test('a stopped rank is named in the header and coloured in the ranks panel, from the evaluation', async () => {
  const run = await fixtureSnapshot('ddp2-dumps-halt');
  run.ended = false;
  run.metrics = null;
  run.control.halt = { present: false, content: null, mtimeMs: null };
  run.log.haltSeen = false;
  const lastTs = Math.max(...run.ranks.map((r) => r.lastTs ?? 0));
  const procs = (st1: 'S' | 'T') => ({
    at: 0,
    launcher: null,
    unknown: [],
    ranks: [0, 1].map((rank) => ({
      rank,
      localRank: rank,
      gpuMemMiB: null,
      gpuUuid: null,
      source: 'environ' as const,
      proc: {
        pid: 32202 + rank,
        ppid: 1,
        startTime: '1',
        state: rank === 1 ? st1 : ('S' as const),
        cpuPct: 0,
        rssKiB: 1000,
        wchan: null,
        argv: ['python'],
        env: {},
      },
    })),
  });
  const s = judgedState({ now: lastTs + 2000, run, procs: procs('T'), gpu: null });
  assert.equal(s.runState, 'STALLED', 'a stopped rank: not RUNNING, 2 s after its last step');
  const { f, text, scr } = await screenOf(s, 80, 24);
  assert.match(scr.rows[0]!, /STALLED.*rank 1 \(pid 32203\) is stopped/);
  assert.match(text, /CRIT rank 1 \(pid 32203\) is stop/);
  const row1 = f.lines.find(
    (l) => /^│ 1 32203/.test(plain(l).slice(plain(l).indexOf('│ 1 32203'))) && plain(l).includes('│ 1 32203'),
  );
  assert.ok(
    row1?.some((seg) => seg.text.includes('1 32203') && seg.role === 'crit'),
    'rank 1 coloured critical',
  );
  // the frozen step: no rate, no ETA
  const progress = scr.rows.slice(0, 3).join('\n');
  assert.doesNotMatch(progress, /step\/s|ETA/);
  // resumed (SIGCONT): running again, rank 1 no longer critical
  const ok = judgedState({ now: lastTs + 2000, run, procs: procs('S'), gpu: null });
  assert.equal(ok.runState, 'RUNNING');
  const { f: f2 } = await screenOf(ok, 80, 24);
  const row = f2.lines.find((l) => plain(l).includes('│ 1 32203'));
  assert.ok(row?.some((seg) => seg.text.includes('1 32203') && seg.role === 'ok'));
});

test('zoom shows one panel over the whole middle; tab groups switch to the focused panel', async () => {
  const s = await judged('ddp2-dumps-halt');
  const v = { ...initialView(), focus: 'log' as const, zoom: 'log' as const };
  const { text } = await screenOf(s, 80, 24, v);
  assert.match(text, /HALT file detected/);
  assert.doesNotMatch(text, /┌ Training/);
  const grouped = await screenOf(s, 80, 24, { ...initialView(), focus: 'dumps' });
  assert.match(grouped.text, /all_reduce/);
});

function fakeTerminal(cols: number, rows: number) {
  const out = new PassThrough() as PassThrough & { columns: number; rows: number; isTTY: boolean };
  out.columns = cols;
  out.rows = rows;
  out.isTTY = true;
  const chunks: string[] = [];
  out.on('data', (d: Buffer) => chunks.push(d.toString('utf8')));
  return { out, chunks };
}

const noActions: CockpitActions = {
  readOnly: true,
  dump: async () => ({ results: [], pySpy: false }),
  halt: async () => ({ ok: false, result: 'refused', detail: '' }),
  cancelHalt: async () => ({ ok: true, result: 'ok', detail: '' }),
  escalate: async () => ({ ok: false, result: 'refused', detail: '' }),
  relaunch: async () => ({ ok: false, result: 'refused', detail: '' }),
  ack: async () => ({ ok: false, result: 'refused', detail: '' }),
};

test('the Ink app renders the frame into a terminal and re-lays out on resize', async () => {
  const s = await judged('ddp2-dumps-halt');
  const { out, chunks } = fakeTerminal(120, 40);
  const store = { get: () => s, subscribe: () => () => {} };
  const stdin = new PassThrough() as unknown as NodeJS.ReadStream;
  const inst = render(
    createElement(App, {
      store,
      actions: noActions,
      interactive: false,
      noColor: false,
      renderMs: { current: null },
      tickMs: 60_000,
    }),
    {
      stdout: out as unknown as NodeJS.WriteStream,
      stdin,
      patchConsole: false,
      maxFps: 30,
    },
  );
  try {
    await new Promise((r) => setTimeout(r, 150));
    const a = await xtermScreen(120, 40, [chunks.join('').replace(/\n/g, '\r\n')]);
    assert.match(a.rows[0]!, /HALTED/);
    assert.match(a.rows.join('\n'), /step 31\/400/);
    assert.ok(a.rows.every((r) => r.length <= 120));
    // shrink to the compact layout: after a clear (what the command does on resize) the new frame fits
    const before = chunks.length;
    out.columns = 80;
    out.rows = 24;
    out.emit('resize');
    await new Promise((r) => setTimeout(r, 150));
    const after = chunks.slice(before).join('');
    const b = await xtermScreen(80, 24, ['\x1b[2J\x1b[H' + after.replace(/\n/g, '\r\n')]);
    assert.match(b.rows[0]!, /HALTED/);
    assert.match(b.rows.join('\n'), /┌ Training/);
    assert.equal(b.rows[23]!.trim(), '', 'frame stays rows-1 tall after resize');
  } finally {
    inst.unmount(); // a failed assertion must not leave Ink holding the event loop (the file would never end)
  }
});

test('the frame painter draws the same screen as the composer and repaints only changed rows', async () => {
  const { FramePainter } = await import('../../src/ui/paint.js');
  const s = await judged('ddp2-dumps-halt');
  const writes: string[] = [];
  const p = new FramePainter((x) => writes.push(x), false);
  const f1 = compose(s, initialView(), 120, 40, s.at);
  p.paint(f1.lines, 120, 40);
  const a = await xtermScreen(120, 40, writes);
  for (let y = 0; y < 39; y++) assert.equal(a.rows[y]!.trimEnd(), plain(f1.lines[y]!).trimEnd(), `row ${y}`);
  assert.equal(a.rows[39]!.trim(), '');
  // three hours later only the rows with ages change (a finished run's ages read in hours, so a
  // few seconds may change nothing; hours always change them)
  const f2 = compose(s, initialView(), 120, 40, s.at + 3 * 3_600_000);
  const before = writes.length;
  p.paint(f2.lines, 120, 40);
  const delta = writes.slice(before).join('');
  const changed = f2.lines.filter((l, i) => plain(l) !== plain(f1.lines[i]!)).length;
  assert.ok(changed > 0 && changed < 39, `some rows change (${changed})`);
  assert.equal(
    (delta.match(/\x1b\[\d+;\d+H/g) ?? []).length - 1,
    changed,
    'one cursor move per changed row (plus the parking one)',
  );
  // within a row only the changed part is written: far less than the rows themselves
  const { lineToAnsi } = await import('../../src/ui/ansi.js');
  const rowsBytes = f2.lines
    .filter((l, i) => plain(l) !== plain(f1.lines[i]!))
    .reduce((n, l) => n + lineToAnsi(l, false).length, 0);
  // (less than the rows alone, cursor moves and the synchronized-update bracket included; the
  // row-by-row painter wrote the rows plus all of that)
  assert.ok(delta.length < rowsBytes, `${delta.length} bytes written where the changed rows are ${rowsBytes}`);
  assert.ok(/\x1b\[\d+;([2-9]|\d\d+)H/.test(delta), 'some row is written from a column other than the first');
  const b = await xtermScreen(120, 40, writes);
  for (let y = 0; y < 39; y++)
    assert.equal(b.rows[y]!.trimEnd(), plain(f2.lines[y]!).trimEnd(), `row ${y} after the update`);
  // nothing changed: nothing written
  const n = writes.length;
  p.paint(f2.lines, 120, 40);
  assert.equal(writes.length, n);
});

// The screen's clock (src/ui/useScreen.ts): while states come it draws no frame of its own (each
// new state pushes it back); once they stop, the ages keep counting — a frame 1.5 periods after
// the last state, then one a period.
test('the clock draws no frame of its own while states come; after the last state, one 1.5 periods on, then one a period', async () => {
  const { FramePainter } = await import('../../src/ui/paint.js');
  /** notes when each frame was drawn (written or not: an unchanged frame writes nothing) */
  class NotingPainter extends FramePainter {
    drawn: number[] = [];
    override paint(lines: Line[], cols: number, rows: number): void {
      this.drawn.push(Date.now());
      super.paint(lines, cols, rows);
    }
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const TICK = 200;
  let state = await judged('ddp2-dumps-halt');
  const listeners = new Set<(s: CockpitState) => void>();
  const store = {
    get: () => state,
    subscribe: (fn: (s: CockpitState) => void) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
  };
  const { out } = fakeTerminal(120, 40);
  const painter = new NotingPainter(() => {}, true);
  const inst = render(
    createElement(App, {
      store,
      actions: noActions,
      interactive: false,
      noColor: true,
      renderMs: { current: null },
      painter,
      tickMs: TICK,
    }),
    { stdout: out as unknown as NodeJS.WriteStream, stdin: new PassThrough() as never, patchConsole: false },
  );
  try {
    for (let i = 0; i < 250 && painter.drawn.length === 0; i++) await sleep(20);
    const first = painter.drawn.length;
    assert.ok(first > 0, 'the first frame is drawn');
    // a new state every 50 ms (a new object each time, as the collector emits): a frame each, and
    // none of the clock's
    let sent = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(50);
      state = { ...state };
      sent++;
      for (const l of listeners) l(state);
    }
    const lastState = Date.now();
    assert.equal(painter.drawn.length - first, sent, 'a frame per state and no other while states come');
    // the states stop: the ages keep counting (a generous deadline: the box may be loaded)
    for (let i = 0; i < 500 && painter.drawn.length < first + sent + 2; i++) await sleep(20);
    const ticks = painter.drawn.slice(first + sent);
    assert.ok(ticks.length >= 2, `the clock draws once the states stop (${ticks.length} frames)`);
    // timers never fire early: the first not before 1.5 periods, the next not before a period after it
    const gap = ticks[0]! - lastState;
    assert.ok(gap >= TICK * 1.5 - 5, `first frame ${gap} ms after the last state`);
    assert.ok(ticks[1]! - ticks[0]! >= TICK - 5, `then ${ticks[1]! - ticks[0]!} ms apart`);
  } finally {
    inst.unmount();
  }
});

test("with the collector's rounds the ages ride on them: a frame for a round without a new state, none for one with", async () => {
  const { FramePainter } = await import('../../src/ui/paint.js');
  const drawn: number[] = [];
  /** notes when each frame was drawn (written or not: an unchanged frame writes nothing) */
  class NotingPainter extends FramePainter {
    override paint(lines: Line[], cols: number, rows: number): void {
      drawn.push(Date.now());
      super.paint(lines, cols, rows);
    }
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const TICK = 200;
  let state = await judged('ddp2-dumps-halt');
  const listeners = new Set<(s: CockpitState) => void>();
  const rounds = new Set<() => void>();
  const store = {
    get: () => state,
    subscribe: (fn: (s: CockpitState) => void) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    onRound: (fn: () => void) => {
      rounds.add(fn);
      return () => rounds.delete(fn);
    },
    intervalMs: TICK,
  };
  const round = (withState: boolean) => {
    if (withState) {
      state = { ...state };
      for (const l of listeners) l(state);
    }
    for (const r of rounds) r();
  };
  const { out } = fakeTerminal(120, 40);
  const inst = render(
    createElement(App, {
      store,
      actions: noActions,
      interactive: false,
      noColor: true,
      renderMs: { current: null },
      painter: new NotingPainter(() => {}, true),
      tickMs: TICK,
    }),
    { stdout: out as unknown as NodeJS.WriteStream, stdin: new PassThrough() as never, patchConsole: false },
  );
  try {
    for (let i = 0; i < 250 && (drawn.length === 0 || rounds.size === 0); i++) await sleep(20);
    assert.equal(rounds.size, 1, 'the screen listens to the rounds');
    let n = drawn.length;
    // rounds that bring a state: the state's frame only
    for (let i = 0; i < 3; i++) {
      await sleep(TICK);
      round(true);
    }
    assert.equal(drawn.length - n, 3, 'a frame per new state, none for its round');
    // rounds without a state: the ages are drawn again, once a round
    n = drawn.length;
    for (let i = 0; i < 3; i++) {
      await sleep(TICK);
      round(false);
    }
    assert.equal(drawn.length - n, 3, 'a frame per round without a state');
    // and nothing between rounds: no timer of its own
    n = drawn.length;
    await sleep(TICK * 3);
    assert.equal(drawn.length, n, 'no frame without a round');
  } finally {
    inst.unmount();
  }
});
