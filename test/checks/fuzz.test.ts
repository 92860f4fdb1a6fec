// The rules never throw on odd snapshots (NaN/Infinity/negative values, nulls, empty and
// mismatched series, odd process states and GPU fields): the cockpit and the watchdog run them
// every refresh. Each alert stays well formed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Checker } from '../../src/checks/index.js';
import { gradeRun } from '../../src/checks/report.js';
import type { ProcState } from '../../src/remote/types.js';
import { gpu, liveRun, proc, procs, series } from './helpers.js';

const num = fc.oneof(
  fc.double({ noNaN: false }),
  fc.constantFrom(0, -1, 1e308, Number.NaN, Number.POSITIVE_INFINITY),
  fc.integer({ min: -5, max: 100000 }),
);
const vals = fc.array(num, { maxLength: 40 });
const state = fc.constantFrom<ProcState>('R', 'S', 'D', 'T', 't', 'Z', 'I', 'X', '?');

test('evaluate and gradeRun never throw, and every alert is well formed', () => {
  fc.assert(
    fc.property(
      fc.record({
        loss: vals,
        tps: vals,
        ent: vals,
        max: vals,
        col: vals,
        fetch: vals,
        mem: vals,
        step: fc.option(fc.integer({ min: -3, max: 100000 }), { nil: null }),
        total: fc.option(fc.integer({ min: 0, max: 100000 }), { nil: null }),
        ageMs: fc.integer({ min: -10_000, max: 10_000_000 }),
        states: fc.array(state, { maxLength: 4 }),
        util: fc.option(fc.integer({ min: 0, max: 100 }), { nil: null }),
        power: fc.option(fc.double({ min: 0, max: 500, noNaN: true }), { nil: null }),
        halt: fc.boolean(),
        ended: fc.boolean(),
        beat: fc.boolean(),
        gradNorm: fc.option(num, { nil: null }),
      }),
      (x) => {
        const t = 1_700_000_000_000;
        const run = liveRun({ step: 10, t });
        run.step = x.step;
        run.totalSteps = x.total;
        run.ended = x.ended;
        run.series.loss = series(x.loss);
        run.series.toksPerS = series(x.tps);
        run.series.gateEntropy = series(x.ent);
        run.series.gateMax = series(x.max, { step0: 2 });
        run.series.collapseFrac = series(x.col);
        run.series.dtFetchS = series(x.fetch);
        run.series.memReservedMiB = series(x.mem);
        run.control.halt = { present: x.halt, content: null, mtimeMs: x.halt ? t - x.ageMs : null };
        if (x.beat) run.ranks.push({ ...run.ranks[0]!, rank: 1, events: { beat: 3 }, lastStep: x.step });
        run.lastProgress = {
          ts: t,
          step: x.step ?? 0,
          rank: 0,
          pid: 1,
          loss: x.loss[0] ?? null,
          toksPerS: null,
          dtFetchS: x.fetch[0] ?? null,
          fetchP50Ms: null,
          fetchP95Ms: null,
          gradNorm: x.gradNorm,
          gpuMemAllocMiB: null,
          gpuMemReservedMiB: null,
          gate: null,
          sel: null,
          fallbacks: null,
          extra: { rss_mib: x.mem[0] },
        };
        const c = new Checker({ stallFloorS: 1 });
        for (let i = 0; i < 2; i++) {
          const ev = c.evaluate({
            now: t + x.ageMs,
            run,
            procs: procs(x.states.map((s, r) => proc(r, s, { gpuUuid: `GPU-${r}` }))),
            gpu: gpu(x.states.map(() => ({ utilPct: x.util, powerW: x.power }))),
          });
          const ids = new Set<string>();
          for (const a of ev.alerts) {
            assert.ok(['info', 'warning', 'critical'].includes(a.severity));
            assert.ok(a.title.length > 0 && !a.title.includes('undefined'), a.title);
            assert.ok(Number.isFinite(a.since), `${a.id} since ${a.since}`);
            assert.ok(!ids.has(a.id), `duplicate ${a.id}`);
            ids.add(a.id);
          }
          const rep = gradeRun({ run, ev });
          assert.ok([0, 1, 2].includes(rep.exitCode));
        }
      },
    ),
    { numRuns: 300 },
  );
});
