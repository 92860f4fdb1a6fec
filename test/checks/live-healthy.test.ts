// A healthy 2-rank reference run under the real watchdog binary: nothing above info, FINISHED,
// exit 0; and `report` is honest about it (phase 0 GO, phase 1 NO-GO: 100 steps are not 300).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { start, watched } from './live-helpers.js';

test('healthy run: nothing above info, FINISHED, watchdog exits 0; report: phase 0 GO (0), phase 1 NO-GO (1)', async () => {
  const r = await watched(100, [], ['--stall', '10']);
  const loud = r.alerts.filter((a) => a.severity !== 'info');
  assert.deepEqual(
    loud.map((a) => `${a.severity} ${a.id}: ${a['title']}`),
    [],
  );
  assert.equal(r.ls.at(-1)?.state, 'FINISHED');
  assert.equal(r.code, 0);
  assert.ok(!existsSync(join(r.dir, '.anomaly_type')));
  const p0 = start(['report', r.dir, '--phase', '0', '--json']);
  assert.equal(await p0.done, 0);
  assert.equal(JSON.parse(p0.out()).verdict, 'GO');
  const p1 = start(['report', r.dir, '--phase', '1']);
  assert.equal(await p1.done, 1);
  assert.match(p1.out(), /300 steps: the run finished at step 100 of 100/);
});
