// `report` finds a NaN in any source (issue 24 item 10): one only training.csv holds — early in a
// CSV big enough to be read tail first — one only TensorBoard holds, one only the heartbeat holds.
// The built binary on copies of the recorded single-rank fixture.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { TbWriter } from '../../src/trainer/reference/tb-writer.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-report-nan-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function copy(name: string): string {
  const d = join(tmp, name);
  cpSync(FIXTURE, d, { recursive: true });
  return d;
}

function lossFinite(dir: string): { status: string; evidence: string } {
  const r = spawnSync(process.execPath, [bin, 'report', dir, '--json'], { encoding: 'utf8', timeout: 120_000 });
  assert.ok(r.status === 0 || r.status === 1, `report exit ${r.status}: ${r.stderr}`);
  const rep = JSON.parse(r.stdout) as { phases: { criteria: { id: string; status: string; evidence: string }[] }[] };
  const c = rep.phases.flatMap((p) => p.criteria).find((x) => x.id === 'loss-finite');
  assert.ok(c, 'the report has the loss-finite criterion');
  return c;
}

test('control: the fixture as recorded has a finite loss', () => {
  assert.equal(lossFinite(copy('clean')).status, 'pass');
});

test('a NaN at step 100 of a 13 MB training.csv (read tail first) fails "finite loss"', () => {
  const d = copy('big-csv');
  const rows: string[] = [];
  for (let s = 1; s <= 400_000; s++)
    rows.push(`${s},${s === 100 ? 'nan' : (5.7 - s * 1e-7).toFixed(6)},3.000000e-04,800`);
  writeFileSync(join(d, 'training.csv'), rows.join('\n') + '\n');
  assert.ok(statSync(join(d, 'training.csv')).size > 8 * 2 ** 20, 'bigger than the 4 MiB read per poll, twice');
  const c = lossFinite(d);
  assert.equal(c.status, 'fail', c.evidence);
  assert.match(c.evidence, /1 non-finite loss/);
});

test('a NaN only TensorBoard holds (training.csv finite) fails "finite loss" and names TensorBoard', () => {
  const d = copy('tb');
  const tb = new TbWriter(d);
  for (let s = 1; s <= 40; s++)
    tb.scalars(s, [
      { tag: 'train/loss', value: s === 20 ? NaN : 5.7 },
      { tag: 'train/toks_per_s', value: 800 },
    ]);
  const c = lossFinite(d);
  assert.equal(c.status, 'fail', c.evidence);
  assert.match(c.evidence, /1 non-finite loss value\(s\) in TensorBoard/);
});

test('a NaN only the heartbeat holds (training.csv finite) fails "finite loss"', () => {
  const d = copy('hb');
  const p = join(d, 'heartbeat_rank0.jsonl');
  const lines = readFileSync(p, 'utf8').split('\n');
  const i = lines.findIndex((l) => l.includes('"step": 20,') && l.includes('"msg": "progress"'));
  assert.ok(i >= 0, 'the fixture has a progress record at step 20');
  lines[i] = lines[i]!.replace(/"loss": [-0-9.e]+/, '"loss": NaN');
  writeFileSync(p, lines.join('\n'));
  const c = lossFinite(d);
  assert.equal(c.status, 'fail', c.evidence);
  assert.match(c.evidence, /loss NaN at step 20/);
});
