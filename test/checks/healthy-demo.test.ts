// The healthy default demo (2 ranks, 3000 steps, no fault), recorded from `nsa-top train` with the
// demo profile's settings (test/fixtures/reference/demo-healthy: rank 0's boot and progress records,
// training/val CSVs, metrics.json), replayed record by record into a run dir that the real RunModel
// follows and one Checker judges, as the cockpit does. From step ~1150 on, one row of 512 has a max
// gate above 0.9 while the gate is healthy (entropy ~0.88, collapse 0): that used to be a critical
// "gate collapse" on 292 of 601 records.
import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Checker } from '../../src/checks/index.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { RunModel } from '../../src/trainer/run/model.js';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'reference', 'demo-healthy');

test('the healthy default demo: no critical on any record, nothing above info at its end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-healthy-'));
  try {
    for (const f of ['env.json', 'config.yaml']) copyFileSync(join(SRC, f), join(dir, f));
    copyFileSync(join(SRC, 'heartbeat_rank1.jsonl'), join(dir, 'heartbeat_rank1.jsonl'));
    const recs = readFileSync(join(SRC, 'heartbeat_rank0.jsonl'), 'utf8').split('\n').filter(Boolean);
    const csv = (f: string) => {
      const [head, ...rows] = readFileSync(join(SRC, f), 'utf8').split('\n').filter(Boolean);
      writeFileSync(join(dir, f), head + '\n');
      return { f, rows: rows.map((line) => ({ step: Number(line.split(',')[0]), line })), i: 0 };
    };
    const csvs = [csv('training.csv'), csv('val.csv')];
    const model = new RunModel(new LocalHost(), dir);
    const checker = new Checker();
    let progress = 0,
      overMax = 0;
    const crit: string[] = [];
    let last: ReturnType<Checker['evaluate']> | null = null;
    for (const line of recs) {
      appendFileSync(join(dir, 'heartbeat_rank0.jsonl'), line + '\n');
      const r = JSON.parse(line);
      if (r.msg !== 'progress') continue;
      progress++;
      if (r.gate_max_gate > 0.9) overMax++;
      for (const c of csvs)
        while (c.i < c.rows.length && c.rows[c.i]!.step <= r.step)
          appendFileSync(join(dir, c.f), c.rows[c.i++]!.line + '\n');
      last = checker.evaluate({ now: r.ts * 1000 + 100, run: await model.poll(), procs: null, gpu: null });
      for (const a of last.alerts) if (a.severity === 'critical') crit.push(`step ${r.step}: ${a.title}`);
    }
    assert.equal(progress, 601);
    assert.ok(
      overMax >= 250,
      `the recording carries the signal that used to alarm (${overMax} records with max gate > 0.9)`,
    );
    assert.deepEqual(crit.slice(0, 5), [], `${crit.length} records with a critical`);
    assert.equal(last!.gateHaltIn, null);
    // the run ends: metrics.json, then one more look
    copyFileSync(join(SRC, 'metrics.json'), join(dir, 'metrics.json'));
    const run = await model.poll();
    const end = checker.evaluate({ now: run.hostNowMs, run, procs: null, gpu: null });
    assert.equal(end.runState, 'FINISHED');
    assert.deepEqual(
      end.alerts.filter((a) => a.severity !== 'info').map((a) => `${a.severity} ${a.id}: ${a.title}`),
      [],
    );
    assert.deepEqual(
      end.history.filter((a) => a.severity !== 'info').map((a) => `${a.severity} ${a.id}: ${a.title}`),
      [],
      'nothing was raised and cleared either',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
