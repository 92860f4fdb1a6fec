// Read-only is enforced at the action too (not only at the key and the dialog): a read-only
// CockpitActions refuses dump, halt, escalate and relaunch without touching the run or a process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActions } from '../../src/cockpit/actions.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { readProc } from '../../src/remote/procs.js';
import { baseState } from '../ui/helpers.js';
import { emptySnapshot } from '../../src/trainer/run/snapshot.js';

test('read-only actions refuse everything and change nothing', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-ro-'));
  // a real process standing in for a rank: it would die on SIGUSR1/SIGINT (no handler)
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  try {
    const host = new LocalHost();
    const p = (await readProc(host, child.pid!))!;
    const s = {
      ...baseState(emptySnapshot(dir)),
      procs: {
        at: Date.now(),
        launcher: null,
        unknown: [],
        ranks: [{ rank: 0, localRank: 0, proc: p, gpuMemMiB: null, gpuUuid: null, source: 'environ' as const }],
      },
    };
    let relaunched = false;
    const a = createActions({
      host,
      runDir: dir,
      readOnly: true,
      state: () => s,
      relaunch: async () => ((relaunched = true), { ok: true, result: 'ok', detail: '' }),
    });
    const d = await a.dump(() => {});
    assert.deepEqual(
      d.results.map((r) => r.outcome),
      ['refused'],
    );
    assert.equal((await a.halt('now')).result, 'refused');
    assert.equal((await a.escalate('SIGINT')).result, 'refused');
    assert.equal((await a.relaunch({ removeStaleHalt: true })).result, 'refused');
    assert.equal(relaunched, false);
    assert.deepEqual(readdirSync(dir), [], 'no .HALT, no actions.jsonl, no dump');
    assert.equal(child.exitCode, null);
    assert.equal(child.signalCode, null, 'the process was not signalled');
  } finally {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('r on a run nsa-top neither started nor saw running: the refusal says to use a profile, and nothing was asked or written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-norec-'));
  try {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(
      join(dir, 'checkpoint_step40.pt'),
      Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(64), Buffer.from('PK\x05\x06'), Buffer.alloc(18)]),
    );
    let relaunched = false;
    const a = createActions({
      host: new LocalHost(),
      runDir: dir,
      readOnly: false,
      state: () => baseState(emptySnapshot(dir)),
      relaunch: async () => ((relaunched = true), { ok: true, result: 'ok', detail: '' }),
    });
    const info = await a.prepareRelaunch!();
    assert.match(
      info.refusal ?? '',
      /not started by nsa-top.*nsa-top launch --profile NAME -- --resume .*checkpoint_step40\.pt/s,
    );
    assert.equal(relaunched, false);
    assert.deepEqual(readdirSync(dir), ['checkpoint_step40.pt']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
