// The observation reads a run's stop facts (actions.jsonl, the supervisor's log and state, the
// watchdog's decisions, the adoption record, run.info) again only when stopFactsKey says one of
// them changed: a halt, an escalation or a watchdog's stall recorded must change it, nothing else may.
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readStopFacts, stopFactsKey } from '../../../src/trainer/control/stopfacts.js';

test('stopFactsKey moves with every file the stop facts are read from, and only with them', async () => {
  const out = mkdtempSync(join(tmpdir(), 'nsa-stopkey-'));
  try {
    const nsa = join(out, '.nsa-top');
    mkdirSync(nsa);
    const h = new LocalHost();
    const k0 = await stopFactsKey(h, out);
    assert.equal(await stopFactsKey(h, out), k0, 'nothing changed: the same key');
    writeFileSync(join(out, 'training.csv'), 'step,loss\n1,5\n');
    writeFileSync(join(nsa, 'requests.json'), '[]');
    assert.equal(await stopFactsKey(h, out), k0, 'files the stop facts do not read leave it');
    const esc = {
      ts: Date.now(),
      who: { user: 'op', host: 'box', pid: 1, tty: null },
      action: 'escalate-sigint',
      target: { ranks: [0, 1] },
      result: 'ok',
      detail: 'SIGINT to ranks 0,1',
    };
    appendFileSync(join(nsa, 'actions.jsonl'), JSON.stringify(esc) + '\n');
    const k1 = await stopFactsKey(h, out);
    assert.notEqual(k1, k0, 'an action recorded');
    appendFileSync(join(nsa, 'watchdog.jsonl'), '{"event":"anomaly","type":"heartbeat_stall","ts":1}\n');
    const k2 = await stopFactsKey(h, out);
    assert.notEqual(k2, k1, "a watchdog's decision");
    // the supervisor's state, replaced whole (as it writes it): a new inode, same size
    writeFileSync(join(nsa, 'supervisor.json.tmp'), '{"state":"running"}');
    renameSync(join(nsa, 'supervisor.json.tmp'), join(nsa, 'supervisor.json'));
    const k3 = await stopFactsKey(h, out);
    assert.notEqual(k3, k2, "the supervisor's state");
    // (another size: within one tick of the clock a reused inode could carry the same mtime)
    writeFileSync(join(nsa, 'supervisor.json.tmp'), '{"state":"halted"}');
    renameSync(join(nsa, 'supervisor.json.tmp'), join(nsa, 'supervisor.json'));
    assert.notEqual(await stopFactsKey(h, out), k3, 'replaced again');
    // what the key stands for is what is read: the escalation is in the facts
    const facts = await readStopFacts(h, out);
    assert.equal(facts.stalls.length, 1);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
