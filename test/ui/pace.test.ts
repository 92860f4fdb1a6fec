// The straggler view and the operator's numbers on screen: the Ranks panel's pace column, its
// marker and min/max line; MFU ("unknown peak" said), restarts and the checkpoint's age in the
// header's progress line. All from the one evaluation (judgedState). No process: unit tier.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Checker } from '../../src/checks/index.js';
import { evaluationFields } from '../../src/cockpit/state.js';
import type { ProcState } from '../../src/remote/types.js';
import { progressLine } from '../../src/ui/panels/header.js';
import { ranksPanel } from '../../src/ui/panels/ranks.js';
import { plain } from '../../src/ui/text.js';
import { initialView } from '../../src/ui/view.js';
import { gpu, liveRun, proc, procs, series } from '../checks/helpers.js';
import { baseState } from './helpers.js';

const T0 = 1_700_000_000_000;

function state(looks: [number, ProcState, string | null][][], gpuName?: string) {
  const ch = new Checker();
  let last;
  for (const [i, ranks] of looks.entries()) {
    const t = T0 + i * 1000;
    const run = liveRun({ step: 100 + i, t });
    run.ranks.push({ ...run.ranks[0]!, rank: 1, pid: 1001, file: 'heartbeat_rank1.jsonl' });
    run.identity.model = { dim: 768, nLayers: 12, nHeads: 12, nKvGroups: 2, dK: 64, dV: 64, vocab: 256 };
    run.identity.worldSize = 2;
    run.series.toksPerS = series([40_000, 41_000, 40_500], { step0: 60, every: 20 });
    const p = procs(
      ranks.map(([cpu, st, w], r) => {
        const x = proc(r, st, { cpuPct: cpu });
        x.proc.wchan = w;
        return x;
      }),
    );
    p.at = t;
    const g = gpu([{ name: gpuName ?? 'NVIDIA A100-SXM4-80GB' }, { name: gpuName ?? 'NVIDIA A100-SXM4-80GB' }]);
    const ev = ch.evaluate({ now: t, run, procs: p, gpu: g });
    last = { ...baseState(run), at: t, procs: p, gpu: g, ...evaluationFields(ev) };
  }
  return last!;
}

const ranksText = (s: ReturnType<typeof state>, w: number) =>
  ranksPanel({ s, v: initialView(), w, h: 20, now: s.at, focused: false, zoomed: false }).lines.map(plain);

test('Ranks panel: a pace column, the straggler marked ◀, min/max with the rank', () => {
  const slow = Array.from({ length: 5 }, () => [
    [60, 'S', 'futex_wait_queue'],
    [95, 'R', null],
  ]) as [number, ProcState, string | null][][];
  const s = state(slow);
  for (const w of [90, 60]) {
    const lines = ranksText(s, w);
    assert.match(lines[0]!, /pace/);
    const r1 = lines.find((l) => /^\s*1 /.test(l))!;
    assert.match(r1, /0\.6\d◀/, `${w} cols: ${r1}`);
    const r0 = lines.find((l) => /^\s*0 /.test(l))!;
    assert.match(r0, /1\.00 /);
  }
  assert.ok(ranksText(s, 90).some((l) => /pace min 0\.6\d \(rank 1\) · max 1\.00 \(rank 0\) · 5 looks/.test(l)));
});

test('header: MFU from the evaluation; "unknown peak" when the GPU is not in the table', () => {
  const clean = Array.from({ length: 2 }, () => [
    [60, 'R', null],
    [60, 'R', null],
  ]) as [number, ProcState, string | null][][];
  assert.match(plain(progressLine(state(clean))), /MFU [\d.]+ %/);
  assert.match(plain(progressLine(state(clean, 'NVIDIA B300'))), /MFU \? \(unknown peak\)/);
});
