// The straggler view on live 2-rank reference runs under the real watchdog: `slow@rank=1,x=1.5` is
// named within 3 log intervals, and a clean run beside it (same machine, same time) stays quiet.
// Both runs and both watchdogs share the one window of time, to keep the wall time small.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { lines, start, tmp, waitFor, type Line } from './live-helpers.js';

const YAML = `model: {dim: 32, n_layers: 1, n_heads: 2, n_kv_groups: 1, d_k: 16, d_v: 16}
nsa: {l: 8, d: 4, l_sel: 8, n_sel: 2, w: 16, phi: avg}
train: {steps: 1000000, seq_len: 64, batch_size: 8, lr: 3.0e-3, warmup_steps: 2, log_every: 400, eval_every: 0, save_every: 0, seed: 7}
`;

function progressTs(dir: string): number[] {
  return readFileSync(join(dir, 'heartbeat_rank0.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"progress"'))
    .map((l) => (JSON.parse(l) as { ts: number }).ts * 1000);
}

function run(cfg: string, inject: string[]) {
  const dir = join(tmp(), 'run');
  const trainer = start([
    'train',
    '--out',
    dir,
    '--config',
    cfg,
    '--ranks',
    '2',
    ...inject.flatMap((i) => ['--inject', i]),
  ]);
  return { dir, trainer, wd: null as ReturnType<typeof start> | null };
}

test('slow@rank=1,x=1.5 is named the straggler within 3 log intervals; a clean run stays quiet', async () => {
  const cfg = join(tmp(), 'tiny.yaml');
  writeFileSync(cfg, YAML);
  const slow = run(cfg, ['slow@rank=1,x=1.5']);
  const clean = run(cfg, []);
  try {
    // the watchdogs start once both runs step (boot time is no straggler's)
    for (const r of [slow, clean])
      await waitFor(
        `${r.dir} stepping`,
        () =>
          (() => {
            try {
              return progressTs(r.dir).length >= 1;
            } catch {
              return false;
            }
          })(),
        60_000,
      );
    slow.wd = start(['watchdog', slow.dir, '--interval', '0.5', '--stall', '30']);
    clean.wd = start(['watchdog', clean.dir, '--interval', '0.5', '--stall', '30']);
    const t0 = Date.now();
    const named = await waitFor(
      'the straggler alert',
      () => lines(slow.wd!.out()).find((l) => l.event === 'alert' && l.id === 'straggler:rank1'),
      60_000,
    );
    const namedAt = Date.now();
    // the clean run is watched at least as long again, with scored looks, and raises nothing
    const scored = await waitFor(
      'the clean run scored',
      () => lines(clean.wd!.out()).find((l) => l.event === 'straggler'),
      60_000,
    );
    await waitFor('as long again on the clean run', () => Date.now() - namedAt >= namedAt - t0, 60_000);
    const cleanLines = lines(clean.wd!.out());
    const view = lines(slow.wd!.out()).find((l) => l.event === 'straggler' && (l['straggler'] as Line | null)) as
      (Line & { straggler: { rank: number; score: number }; min: { rank: number }; max: { rank: number } }) | undefined;
    // log intervals of the slow run (the step rate it really had)
    const ts = await waitFor(
      'two log intervals',
      () => (progressTs(slow.dir).length >= 3 ? progressTs(slow.dir) : null),
      90_000,
    );
    const gaps = ts.slice(1).map((t, i) => t - ts[i]!);
    const interval = gaps.sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!;
    const took = (named['ts'] as number) - t0;
    process.stderr.write(
      `straggler named after ${took} ms (log interval ${Math.round(interval)} ms); slow view ${JSON.stringify(view?.['ranks'])}; clean ${JSON.stringify(scored['ranks'])}\n`,
    );
    assert.equal(named['rank'], 1);
    assert.equal(named['severity'], 'warning');
    assert.ok(took <= 3 * interval, `named after ${took} ms, 3 log intervals are ${Math.round(3 * interval)} ms`);
    assert.ok(view, `the watchdog logs the view that names it: ${slow.wd!.out().slice(-3000)}`);
    assert.equal(view.straggler.rank, 1);
    assert.equal(view.min.rank, 1);
    assert.equal(view.max.rank, 0);
    assert.ok(view.straggler.score < 0.85);
    // quiet: scored (a full window of looks), nobody named, no straggler alert
    assert.equal(scored['straggler'], null);
    assert.ok((scored['looks'] as number) >= 3);
    assert.ok(
      !cleanLines.some((l) => l.event === 'alert' && String(l.id).startsWith('straggler')),
      `no alarm: ${JSON.stringify(cleanLines.filter((l) => l.event === 'alert' || l.event === 'straggler'))}`,
    );
    assert.ok(
      !cleanLines.some((l) => l.event === 'straggler' && l['straggler'] !== null),
      JSON.stringify(cleanLines.filter((l) => l.event === 'straggler')),
    );
  } finally {
    for (const r of [slow, clean]) {
      r.wd?.child.kill('SIGTERM');
      r.trainer.child.kill('SIGTERM');
    }
    await Promise.all([slow, clean].flatMap((r) => [r.trainer.done, r.wd?.done]));
  }
});
