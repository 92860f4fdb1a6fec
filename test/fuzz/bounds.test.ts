// Bounded by design: what a run's files claim never sizes an allocation or a recursion. Each case
// here once crashed or hung a command (issue 14); now it is a named warning on the file and the
// rest of the run still reads.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
import { gradeRun } from '../../src/checks/report.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { parseTrainerConfig } from '../../src/trainer/run/readers/config.js';
import { RunModel } from '../../src/trainer/run/model.js';
import { copyFixture } from '../trainer/run/helpers.js';
import { deepJson } from './gen.js';

async function snap(dir: string) {
  const m = new RunModel(new LocalHost(), dir);
  await m.poll();
  return m.poll();
}

test('WORLD_SIZE=1000000000 in env.json: a named warning, the world size from the files, and report grades', async () => {
  const f = copyFixture('single');
  try {
    writeFileSync(
      join(f.dir, 'env.json'),
      JSON.stringify({ env: { CONFIG: 'configs/single.yaml', WORLD_SIZE: '1000000000' } }),
    );
    const s = await snap(f.dir);
    assert.equal(s.identity.worldSize, 1);
    assert.match(s.files['env.json']!.lastError ?? '', /WORLD_SIZE 1000000000 is beyond 65536 ranks: ignored/);
    const rep = gradeRun({ run: s, ev: new Checker().evaluate({ now: s.hostNowMs, run: s, procs: null, gpu: null }) });
    assert.ok([0, 1, 2].includes(rep.exitCode));
  } finally {
    f.done();
  }
});

test('heartbeat_rank999999999.jsonl: refused by name, no per-rank slot for it', async () => {
  const f = copyFixture('single');
  try {
    writeFileSync(
      join(f.dir, 'heartbeat_rank999999999.jsonl'),
      '{"ts": 1790000000, "msg": "boot", "rank": 999999999}\n',
    );
    const s = await snap(f.dir);
    assert.deepEqual(
      s.ranks.map((r) => r.rank),
      [0],
    );
    assert.equal(s.identity.worldSize, 1);
    assert.match(
      s.files['heartbeat_rank999999999.jsonl']!.lastError ?? '',
      /rank 999999999 is beyond 65536 ranks: not read/,
    );
  } finally {
    f.done();
  }
});

test('a 500,000-deep JSON value in a heartbeat: a named parse error, and the snapshot still prints as JSON', async () => {
  const f = copyFixture('single');
  try {
    appendFileSync(
      join(f.dir, 'heartbeat_rank0.jsonl'),
      `{"ts": 1790000000, "msg": "x", "deep": ${deepJson(500_000)}}\n`,
    );
    const s = await snap(f.dir);
    assert.match(s.files['heartbeat_rank0.jsonl']!.lastError ?? '', /JSON nested deeper than 64 levels: refused/);
    assert.ok(JSON.stringify(s).length > 0);
    assert.equal(s.step, 40, 'the rest of the run still reads');
  } finally {
    f.done();
  }
});

test('YAML nested thousands deep is refused before the parser recurses', () => {
  for (const text of ['- '.repeat(3000) + 'x\n', '['.repeat(5000), `a:\n${' '.repeat(400)}b: 1\n`]) {
    const r = parseTrainerConfig(text);
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.error, /nested deeper than 64 levels/);
  }
  assert.equal(parseTrainerConfig('model:\n  dim: 64\ntrain:\n  steps: 40\n').ok, true, 'a real config still parses');
});

test('a directory named like an artifact is reported by name', async () => {
  const f = copyFixture('single');
  try {
    mkdirSync(join(f.dir, 'gate_collapse_details.json'));
    const s = await snap(f.dir);
    assert.match(s.files['gate_collapse_details.json']!.lastError ?? '', /not a regular file \(a directory\)/);
  } finally {
    f.done();
  }
});
