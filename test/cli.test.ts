import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../bin/nsa-top.js', import.meta.url));

test('the built binary answers --help with every public command', () => {
  const r = spawnSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  for (const c of ['status', 'demo', 'train', 'watchdog', 'report', 'preflight', 'launch', 'relaunch', 'attach']) {
    assert.match(r.stdout, new RegExp(`\\b${c}\\b`));
  }
});
