// A run dir with hundreds of files: over SSH each new file is one read answered in turn, and a
// one-shot look (status) is judged on what came back in time. The files that decide the verdict
// (metrics.json, env.json, .HALT, the config) must be asked for before the per-rank heartbeats.
import assert from 'node:assert/strict';

import { cpSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import type { ReadRequest } from '../../../src/remote/host.js';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { tempDir } from './helpers.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/nsa-vibe/single/', import.meta.url));

test('the first poll of a big run dir asks for metrics.json, env.json and the log before 400 heartbeat files', async () => {
  const t = tempDir();
  try {
    const dir = join(t.dir, 'run');
    cpSync(FIXTURE, dir, { recursive: true });
    for (let r = 2; r < 400; r++)
      writeFileSync(join(dir, `heartbeat_rank${r}.jsonl`), `{"ts": 1, "rank": ${r}, "pid": 1, "msg": "boot"}\n`);
    const host = new LocalHost();
    const asked: string[][] = [];
    const pollDir = host.pollDir.bind(host);
    host.pollDir = (d: string, reads: ReadRequest[], sub?: string[]) => {
      asked.push(reads.map((r) => basename(r.path)));
      return pollDir(d, reads, sub);
    };
    const snap = await new RunModel(host, dir).poll();
    assert.equal(snap.metrics !== null, true, 'metrics.json was read');
    const reads = asked.find((a) => a.length > 100)!;
    const at = (name: string) => reads.indexOf(name);
    const firstHb = reads.findIndex((n) => /^heartbeat_rank([1-9]\d*)\.jsonl$/.test(n));
    for (const name of ['metrics.json', 'env.json', 'train.log', 'training.csv', 'heartbeat_rank0.jsonl']) {
      assert.ok(at(name) >= 0, `${name} is read`);
      assert.ok(at(name) < firstHb, `${name} (at ${at(name)}) is asked for before the other ranks (from ${firstHb})`);
    }
  } finally {
    t.done();
  }
});
