// Single-rank fault injections leave the signatures a real run would: slow data shows in dt_fetch_s
// and the stdout fetch suffix, a leak in a climbing RSS, a gate collapse in the gate_* fields.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { heartbeats, tmp, trainToEnd } from './helpers.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { LocalHost } from '../../../src/remote/local/host.js';

test('slow-data@ms=60: every fetch takes at least 60 ms, in the heartbeat and on stdout', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '4', '--inject', 'slow-data@ms=60']);
    assert.equal(r.code, 0, r.stderr);
    const prog = heartbeats(t.out, 0).filter((h) => h.msg === 'progress');
    assert.equal(prog.length, 4);
    for (const p of prog) assert.ok((p.dt_fetch_s as number) >= 0.06, `dt_fetch_s ${p.dt_fetch_s}`);
    for (const m of r.stdout.matchAll(/\| fetch (\d+)ms/g)) assert.ok(Number(m[1]) >= 60);
  } finally {
    t.cleanup();
  }
});

test('leak@mb=24: resident memory climbs step after step; without it, it stays flat', async () => {
  const rss = async (extra: string[]) => {
    const t = tmp();
    try {
      const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '12', ...extra]);
      assert.equal(r.code, 0, r.stderr);
      const prog = heartbeats(t.out, 0).filter((h) => h.msg === 'progress');
      return (prog.at(-1)!.rss_mib as number) - (prog[0]!.rss_mib as number);
    } finally {
      t.cleanup();
    }
  };
  const leaky = await rss(['--inject', 'leak@mb=24']);
  const clean = await rss([]);
  assert.ok(leaky >= 11 * 24 * 0.8, `leaky run grew ${leaky} MiB over 11 steps`);
  assert.ok(clean < 11 * 24 * 0.3, `clean run grew ${clean} MiB`);
});

test('gate-collapse@step=5: gates look healthy before step 5 and collapsed from it on', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '8', '--inject', 'gate-collapse@step=5']);
    assert.equal(r.code, 0, r.stderr);
    const prog = heartbeats(t.out, 0).filter((h) => h.msg === 'progress');
    for (const p of prog) {
      if (p.step < 5) {
        assert.ok((p.gate_entropy_mean as number) > 0.9, `step ${p.step} entropy ${p.gate_entropy_mean}`);
        assert.equal(p.gate_collapse_frac, 0);
      } else {
        assert.ok((p.gate_entropy_mean as number) < 0.2, `step ${p.step} entropy ${p.gate_entropy_mean}`);
        assert.ok((p.gate_max_gate as number) > 0.95);
        assert.ok((p.gate_collapse_frac as number) > 0.5);
      }
    }
  } finally {
    t.cleanup();
  }
});

test('the real switches: NSA_DISABLE_AUX_STATS drops gate/sel/fb fields and side CSVs; NSA_DISABLE_CSV_LOGS drops the CSVs', async () => {
  const t = tmp();
  try {
    const r = await trainToEnd(['--out', t.out, '--config', t.cfg, '--steps', '3'], { NSA_DISABLE_AUX_STATS: '1' });
    assert.equal(r.code, 0, r.stderr);
    const p = heartbeats(t.out, 0).find((h) => h.msg === 'progress')!;
    assert.ok('loss' in p && 'dt_fetch_s' in p);
    assert.ok(!Object.keys(p).some((k) => /^(gate_|sel_|fb_)/.test(k)), JSON.stringify(p));
    assert.equal(existsSync(join(t.out, 'k_stats.csv')), false);
    assert.equal(existsSync(join(t.out, 'training.csv')), true);
    const t2 = tmp();
    try {
      const r2 = await trainToEnd(['--out', t2.out, '--config', t2.cfg, '--steps', '3'], { NSA_DISABLE_CSV_LOGS: '1' });
      assert.equal(r2.code, 0, r2.stderr);
      for (const f of ['training.csv', 'k_stats.csv', 'fallback_counters.csv'])
        assert.equal(existsSync(join(t2.out, f)), false, f);
      assert.ok(heartbeats(t2.out, 0).some((h) => h.msg === 'progress' && 'gate_entropy_mean' in h));
      assert.match(JSON.parse(readFileSync(join(t2.out, 'env.json'), 'utf8')).env.NSA_DISABLE_CSV_LOGS, /^1$/);
      const snap = await new RunModel(new LocalHost(), t2.out).poll();
      assert.equal(
        snap.seriesSource.loss,
        'tb',
        'with CSVs off the cockpit reads loss from tb/, as for the real trainer',
      );
      assert.equal(snap.series.loss.total, 3);
    } finally {
      t2.cleanup();
    }
  } finally {
    t.cleanup();
  }
});
