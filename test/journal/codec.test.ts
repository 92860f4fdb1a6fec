// The journal's lines (src/journal/codec.ts), pure: a patch applied to the state it was taken from
// gives the new state exactly (a sliding window, a grown list, a removed member, a null), a run of
// key + deltas read back rebuilds every state of a real fixture run as it was recorded, the events
// of a change are the alerts raised and cleared, the state's changes, new actions, dumps and
// restarts, and a line's version, time and kind are read without parsing it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Alert } from '../../src/checks/index.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import {
  applyPatch,
  decodeRecord,
  diffState,
  encodeRecord,
  eventsOf,
  jsonEqual,
  markerOf,
  peekRecord,
  plainState,
  stateOfRecord,
  throttleSamples,
} from '../../src/journal/codec.js';
import { fixtureState } from '../ui/helpers.js';

/** a small deterministic generator (the test must fail the same way twice) */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => (x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

test('a patch applied to the state it was taken from gives the new state, for random changes', () => {
  const r = rng(7);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  let a: Record<string, unknown> = { n: 1, s: 'x', o: { p: 1, q: [1, 2, 3] }, w: [], z: null };
  for (let round = 0; round < 2000; round++) {
    const b = JSON.parse(JSON.stringify(a)) as Record<string, unknown>;
    const op = pick(['num', 'slide', 'push', 'del', 'null', 'obj', 'arrobj', 'replace', 'lastmoved']);
    const w = b.w as unknown[];
    if (op === 'num') b.n = Math.round(r() * 100);
    else if (op === 'slide') {
      w.push({ step: round, v: r() });
      if (w.length > 5) w.splice(0, Math.ceil(r() * 2));
    } else if (op === 'push') w.push(round);
    else if (op === 'del') delete b[pick(['s', 'z', 'o'])];
    else if (op === 'null') b[pick(['s', 'z', 'n'])] = null;
    else if (op === 'obj') b.o = { ...(b.o as object), p: r() < 0.5 ? null : round, [`k${round % 3}`]: round };
    else if (op === 'arrobj') b.w = w.map((x, i) => (i === 0 ? { changed: round } : x));
    else if (op === 'replace') b.w = [round, 'a', { b: [round] }];
    else if (op === 'lastmoved' && w.length) w[w.length - 1] = { last: round };
    const d = diffState(a, b);
    if (jsonEqual(a, b)) assert.equal(d, null, `round ${round}: no change, no patch`);
    else {
      assert.ok(d, `round ${round} (${op}): a change has a patch`);
      // through JSON, as the file carries it
      const got = applyPatch(a, JSON.parse(JSON.stringify(d)) as Record<string, unknown>);
      assert.deepEqual(got, b, `round ${round} (${op}): ${JSON.stringify(d)}`);
    }
    a = b;
  }
});

test('a sliding window costs what is new, a grown list its new items', () => {
  const pts = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ step: from + i, v: from + i }));
  const d = diffState({ recent: pts(0, 300) }, { recent: pts(2, 300) });
  assert.deepEqual(d, { recent: { $s: 2, $m: 298, $p: pts(300, 2) } });
  const g = diffState({ actions: [1, 2] }, { actions: [1, 2, 3] });
  assert.deepEqual(g, { actions: { $s: 0, $m: 2, $p: [3] } });
  // an array changed everywhere is written whole
  assert.deepEqual(diffState({ x: [1, 2] }, { x: [3, 4] }), { x: [[3, 4]] });
  // per-rank rows changed in place: only what changed in them
  const rows = (s0: number, s1: number) => [
    { rank: 0, step: s0, pid: 10, file: 'heartbeat_rank0.jsonl' },
    { rank: 1, step: s1, pid: 11, file: 'heartbeat_rank1.jsonl' },
  ];
  assert.deepEqual(diffState({ ranks: rows(5, 5) }, { ranks: rows(6, 5) }), { ranks: { $e: { 0: { step: [6] } } } });
  assert.deepEqual(applyPatch({ ranks: rows(5, 5) }, { ranks: { $e: { 1: { step: [9] } } } }), { ranks: rows(5, 9) });
  assert.throws(() => applyPatch({ ranks: rows(5, 5) }, { ranks: { $e: { 2: [1] } } }), /bad array patch/);
  // a removed member and a member set to null are not the same change
  assert.deepEqual(diffState({ a: 1, b: 2 }, { a: null }), { a: [null], b: [] });
  assert.throws(() => applyPatch({ x: [1] }, { x: { $s: 3, $m: 0, $p: [] } }), /bad array patch/);
});

/** an alert as the Checker makes one */
const alert = (id: string, severity: Alert['severity'], title: string, rank?: number): Alert => ({
  id,
  rule: id.split(':')[0]!,
  severity,
  title,
  detail: '',
  since: 0,
  ...(rank !== undefined ? { rank } : {}),
});

/** the states of a fixture run as the collector would emit them: steps advancing, a stall, a dump, an action */
async function story(): Promise<CockpitState[]> {
  const s0 = await fixtureState('ddp2-dumps-halt');
  const base = plainState(s0) as unknown as CockpitState;
  const out: CockpitState[] = [];
  const t0 = 1_700_000_000_000;
  const loss = base.run.series.loss;
  for (let i = 0; i < 40; i++) {
    const recent = [
      ...loss.recent.slice(Math.min(i, loss.recent.length)),
      ...Array.from({ length: i }, (_, j) => ({ step: 1000 + j, t: t0 + j * 1000, value: 2 - j / 100, segment: 0 })),
    ];
    const stalled = i >= 20 && i < 30;
    const s: CockpitState = {
      ...base,
      at: t0 + i * 1000,
      run: {
        ...base.run,
        step: 1000 + Math.min(i, 20),
        series: { ...base.run.series, loss: { ...loss, recent, total: loss.total + i } },
        dumps: i >= 25 ? base.run.dumps : base.run.dumps.slice(0, 0),
      },
      runState: stalled ? 'STALLED' : i >= 30 ? 'HALTED' : 'RUNNING',
      runStateWhy: stalled ? `rank 1 silent ${i - 19} s` : 'steps advancing',
      alerts: stalled ? [alert('stall:run', 'critical', 'rank 1 stalled', 1)] : [],
      gpu: i % 3 === 0 ? null : base.gpu,
      actions:
        i >= 28
          ? [
              {
                ts: t0 + 28_000,
                who: { user: 'alice', tty: null, tmux: null, host: 'box', pid: 1 },
                action: 'halt',
                target: {},
                result: 'ok',
                detail: '.HALT written',
              },
            ]
          : [],
    };
    out.push(s);
  }
  return out;
}

test('key + deltas read back rebuild every recorded state of a fixture run exactly', async () => {
  const states = await story();
  const lines: string[] = [];
  let prev: Record<string, unknown> | null = null;
  states.forEach((s, i) => {
    const plain = plainState(s);
    delete plain.at;
    if (!prev || i % 15 === 0) lines.push(encodeRecord(s.at, 'key', { s: plain }));
    else {
      const d = diffState(prev, plain);
      if (d) lines.push(encodeRecord(s.at, 'delta', { d }));
    }
    prev = plain;
  });
  const keySize = lines[0]!.length;
  const deltas = lines.filter((l) => peekRecord(l)?.k === 'delta');
  assert.ok(deltas.length > 20, 'the states changed');
  // a delta is a small fraction of the whole state
  const biggest = Math.max(...deltas.map((l) => l.length));
  assert.ok(biggest < keySize / 5, `deltas are small: the biggest ${biggest} B of a ${keySize} B state`);
  let base: Record<string, unknown> | null = null;
  const rebuilt: Record<string, unknown>[] = [];
  for (const l of lines) {
    const r = decodeRecord(l)!;
    base = stateOfRecord(r.k === 'key' ? null : base, r);
    rebuilt.push(base!);
  }
  // the states with a line, compared with what was recorded (as JSON carries it)
  const recorded = states.filter(
    (s, i) => i === 0 || !jsonEqual(plainState(states[i - 1]!), { ...plainState(s), at: states[i - 1]!.at }),
  );
  assert.equal(rebuilt.length, recorded.length);
  recorded.forEach((s, i) => assert.deepEqual(rebuilt[i], plainState(s), `state ${i}`));
});

test('the events of a change: alerts raised and cleared, state changes with their why, actions, dumps', async () => {
  const states = await story();
  const evs = states.flatMap((s, i) =>
    eventsOf(i === 0 ? null : states[i - 1]!, s).map((e): Record<string, unknown> => ({ i, ...e })),
  );
  const kinds = evs.map((e) => `${e.i}:${e.k}`);
  assert.deepEqual(
    kinds.filter((k) => !k.endsWith(':dump')),
    ['0:state', '20:alert', '20:state', '28:action', '30:clear', '30:state'],
  );
  assert.ok(kinds.includes('25:dump'), `the fixture's dumps arrive at 25: ${kinds.join(' ')}`);
  const st = evs.find((e) => e.i === 20 && e.k === 'state')!;
  assert.deepEqual([st.from, st.to, st.why], ['RUNNING', 'STALLED', 'rank 1 silent 1 s']);
  const al = evs.find((e) => e.k === 'alert')!;
  assert.deepEqual([al.id, al.severity, al.title, al.rank], ['stall:run', 'critical', 'rank 1 stalled', 1]);
  // as markers
  const line = encodeRecord(states[28]!.at, 'action', { rec: states[28]!.actions[0] });
  assert.deepEqual(markerOf(decodeRecord(line)!), { at: states[28]!.at, kind: 'action', label: 'halt by alice: ok' });
  const a = encodeRecord(1, 'alert', { id: 'stall:run', severity: 'critical', title: 'rank 1 stalled', rank: 1 });
  assert.equal(markerOf(decodeRecord(a)!)!.label, 'critical rank 1 stalled');
});

test('v, t and k lead every line; another version or a broken line is not read', () => {
  const l = encodeRecord(1234.6, 'note', { text: 'x' });
  assert.ok(l.startsWith('{"v":1,"t":1235,"k":"note"'), l);
  assert.deepEqual(peekRecord(l), { v: 1, t: 1235, k: 'note' });
  assert.equal(decodeRecord(l.replace('"v":1', '"v":2')), null);
  assert.equal(decodeRecord('{"v":1,"t":1'), null);
  assert.equal(peekRecord('not json'), null);
});

test('GPU, host and process samples are kept at a modest cadence; a change that matters at once', async () => {
  const s = await fixtureState('single');
  const g = (status: 'ok' | 'absent', at: number) => ({ status, at, gpus: [], latencyMs: 1 }) as never;
  const a = { ...s, at: 0, gpu: g('ok', 0) };
  const b = { ...s, at: 5000, gpu: g('ok', 5000) };
  assert.equal(throttleSamples(a, b, 0).sampled, false);
  assert.equal(throttleSamples(a, b, 0).state.gpu, a.gpu);
  assert.equal(throttleSamples(a, { ...b, at: 10_000 }, 0).sampled, true);
  assert.equal(throttleSamples(a, { ...b, gpu: g('absent', 5000) }, 0).sampled, true);
  // the rank processes' CPU waits for the cadence; another process, or a stopped one, does not
  const procs = (pid: number, state: string, cpuPct: number) =>
    ({ ranks: [{ rank: 0, proc: { pid, startTime: '9', state, cpuPct } }], launcher: null, unproven: [] }) as never;
  const p0 = { ...a, procs: procs(10, 'R', 90) };
  assert.equal(throttleSamples(p0, { ...b, procs: procs(10, 'R', 40) }, 0).state.procs, p0.procs);
  assert.equal(throttleSamples(p0, { ...b, procs: procs(10, 'T', 0) }, 0).sampled, true);
  assert.equal(throttleSamples(p0, { ...b, procs: procs(11, 'R', 90) }, 0).sampled, true);
});

test('a live state is diffed as its JSON copy would be: `at` left out, undefined and NaN as JSON writes them, shared members free', async () => {
  const states = await story();
  const plain = (s: CockpitState) => {
    const p = plainState(s);
    delete p.at;
    return p;
  };
  const live = (s: CockpitState) => s as unknown as Record<string, unknown>;
  for (let i = 1; i < states.length; i++)
    assert.deepEqual(
      diffState(live(states[i - 1]!), live(states[i]!), 'at'),
      diffState(plain(states[i - 1]!), plain(states[i]!)),
      `state ${i}`,
    );
  // what JSON does not keep: an undefined member is absent, NaN and Infinity are null
  const a = { at: 1, x: 1, u: undefined, n: NaN, arr: [1, NaN, undefined, 3], keep: { deep: [1, 2] } };
  const b = { at: 2, x: 1, u: 5, n: Infinity, arr: [1, NaN, undefined, 4], keep: a.keep, gone: undefined };
  const d = diffState(a, b, 'at');
  assert.deepEqual(JSON.parse(JSON.stringify(d)), { u: [5], arr: { $s: 0, $m: 3, $p: [4] } });
  const pa = JSON.parse(JSON.stringify({ ...a, at: undefined })) as Record<string, unknown>;
  assert.deepEqual(applyPatch(pa, JSON.parse(JSON.stringify(d)) as Record<string, unknown>), {
    ...pa,
    u: 5,
    arr: [1, null, null, 4],
  });
  assert.equal(diffState(a, { ...a, at: 99 }, 'at'), null, 'only `at` moved: nothing to write');
});
