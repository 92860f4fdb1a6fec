// hang@step=K,rank=R on a live 2-rank reference run under `nsa-top watchdog --dump-on-stall --halt`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { has, lines, waitFor, watched } from './live-helpers.js';

test('hang@step=30,rank=1: stall flagged, every rank dumped before the halt, first anomaly written; rank 1 named odd one out', async () => {
  const r = await watched(400, ['hang@step=30,rank=1'], ['--stall', '3', '--dump-on-stall', '--halt'], {
    whileRunning: async (_dir, out, trainer) => {
      await waitFor('the halt decision', () => lines(out()).some((l) => l.event === 'halt'), 45_000);
      // the dumps are on disk now: the next look names the odd rank from them
      await waitFor(
        'the odd-rank verdict',
        () =>
          lines(out()).some(
            (l) => l.event === 'verdict' && l.verdicts!.some((v) => v.kind === 'odd-rank' && v.rank === 1),
          ),
        10_000,
      );
      trainer.kill('SIGINT'); // a hung step never sees .HALT: stop the drill
    },
  });
  assert.ok(has(r.alerts, 'stall:run', 'critical'));
  assert.equal(r.ls.find((l) => l.event === 'anomaly')!['type'], 'heartbeat_stall');
  const dump = r.ls.find((l) => l.event === 'dump') as unknown as { perRank: { rank: number; status: string }[] };
  assert.deepEqual(dump.perRank.map((p) => `${p.rank}:${p.status}`).sort(), ['0:dumped', '1:dumped']);
  assert.ok(
    r.ls.findIndex((l) => l.event === 'dump') < r.ls.findIndex((l) => l.event === 'halt'),
    'evidence first, then the halt',
  );
  assert.equal(readFileSync(join(r.dir, '.anomaly_type'), 'utf8').trim(), 'heartbeat_stall');
  assert.equal(readFileSync(join(r.dir, '.HALT'), 'utf8').trim(), 'halt: heartbeat_stall');
  assert.equal(r.code, 1);
  assert.ok(
    readFileSync(join(r.dir, '.nsa-top', 'watchdog.jsonl'), 'utf8').includes('"event":"anomaly"'),
    'decisions are also appended to .nsa-top/watchdog.jsonl',
  );
});
