// report: grading on the real fixtures (pure, via the real RunModel) and the binary's exit codes.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
import { gradeRun } from '../../src/checks/report.js';
import { FIXTURES, fixture, liveFixture, proc, procs } from './helpers.js';
import { nsaTopAsync } from '../helpers/cli.js';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-report-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
cpSync(FIXTURES, join(tmp, 'fx'), { recursive: true });

test('ddp2 fixture (halted at step 31 of 400): phase 1 is NO-GO with the step evidence; phase 0 GO', async () => {
  const run = await fixture('ddp2-dumps-halt');
  const ev = new Checker().evaluate({ now: run.hostNowMs, run, procs: null, gpu: null });
  const r = gradeRun({ run, ev });
  assert.equal(r.target, 1, 'a 400-step run is graded up to phase 1');
  assert.equal(r.verdict, 'NO-GO');
  assert.equal(r.exitCode, 1);
  assert.match(r.phases[1]!.why, /300 steps: the run stopped at step 31 of 400/);
  assert.equal(r.phases[0]!.verdict, 'GO');
  assert.equal(
    r.phases[0]!.criteria.find((c) => c.id === 'heartbeats')!.status,
    'pass',
    'rank 1 booted: its heartbeat file counts',
  );
});

test('a live run short of the phase cannot be judged yet (exit 2); a critical alert is NO-GO at every phase', async () => {
  const { run, lastTs } = await liveFixture('ddp2-dumps-halt');
  // a dataset run of the intended model (the recorded one is a synthetic toy: phase 1 NO-GO outright)
  run.identity.model = { dim: 768, nLayers: 12, nHeads: 12, nKvGroups: 2, dK: 64, dV: 64, vocab: 50257 };
  run.identity.dataset = 'fineweb_edu';
  run.data = { ...run.data, withFetch: 30, dtFetchAbsent: false, syntheticFallback: false };
  const live = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  const r = gradeRun({ run, ev: live }, 1);
  assert.equal(r.verdict, 'CANNOT JUDGE');
  assert.equal(r.exitCode, 2);
  assert.equal(r.phases[1]!.criteria.find((c) => c.id === 'steps-300')!.status, 'pending');
  run.control.anomaly = { type: 'nan_loss', mtimeMs: lastTs };
  const bad = new Checker().evaluate({ now: lastTs + 1000, run, procs: procs([proc(0), proc(1)]), gpu: null });
  const r0 = gradeRun({ run, ev: bad }, 0);
  assert.equal(r0.verdict, 'NO-GO');
  assert.match(r0.phases[0]!.why, /no critical alert: loss went non-finite/);
});

test('single fixture: phase 0 GO with step-time and gap evidence from heartbeat times; phase 3 NO-GO on synthetic data', async () => {
  const run = await fixture('single');
  const ev = new Checker().evaluate({ now: run.hostNowMs, run, procs: null, gpu: null });
  const r = gradeRun({ run, ev });
  assert.equal(r.target, 0);
  assert.equal(r.verdict, 'GO');
  const r3 = gradeRun({ run, ev }, 3);
  assert.equal(r3.verdict, 'NO-GO');
  assert.equal(r3.phases[3]!.criteria.find((c) => c.id === 'real-data')!.status, 'fail');
});

test('binary: exit codes 0 / 1 / 2, --json and --md', async () => {
  const empty = mkdtempSync(join(tmp, 'empty-'));
  // the calls side by side (each only reads its run)
  const [single, ddp, md, none, missing, badPhase] = await Promise.all(
    [
      [join(tmp, 'fx', 'single')],
      [join(tmp, 'fx', 'ddp2-dumps-halt'), '--json'],
      [join(tmp, 'fx', 'single'), '--md', '--phase', '1'],
      [empty],
      [join(tmp, 'nope')],
      ['--phase', '7'],
    ].map((args) => nsaTopAsync(['report', ...args])),
  );
  assert.equal(single.status, 0, single.stderr);
  assert.match(single.stdout, /VERDICT\s+GO for phase 0/);
  assert.match(
    single.stdout,
    /steady step times\s+median [\d.]+ s\/step/,
    'step times come from the heartbeat progress times (the CSV has none)',
  );
  assert.equal(ddp.status, 1);
  const j = JSON.parse(ddp.stdout);
  assert.equal(j.verdict, 'NO-GO');
  assert.ok(
    typeof j.charts.loss === 'string' && j.charts.loss.includes('┤'),
    'an ASCII loss chart is part of the evidence',
  );
  assert.equal(md.status, 1);
  assert.match(md.stdout, /^# Acceptance report: single/m);
  assert.match(md.stdout, /\| ✘ \| 300 steps \|/);
  assert.equal(none.status, 2);
  assert.match(none.stderr, /holds no run artifacts/);
  assert.equal(missing.status, 2);
  assert.equal(badPhase.status, 2);
});
