// The headless commands refuse what the cockpit refuses, in the same words (src/checks/actions.ts):
// `halt`, `halt --after-checkpoint`, `stop` and `dump` on a FINISHED run are refused, exit 3, and
// write nothing. Needs `npm run build` first (the binary is what runs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { actionVerdicts } from '../../src/checks/index.js';
import { FIXTURES } from '../checks/helpers.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const cli = (args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env } });
const dir = mkdtempSync(join(tmpdir(), 'nsa-fit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test("a FINISHED run: halt, halt --after-checkpoint, stop and dump are refused (exit 3) with the cockpit's reason; no .HALT", () => {
  const run = join(dir, 'single');
  cpSync(join(FIXTURES, 'single'), run, { recursive: true });
  const st = cli(['status', run, '--json']);
  const state = (JSON.parse(st.stdout) as { state: { runState: string; why: string } }).state;
  assert.equal(state.runState, 'FINISHED', st.stderr);
  // the verdict the cockpit's keys read (src/ui/keymap.ts), on the same state
  const v = actionVerdicts({
    runState: 'FINISHED',
    runStateWhy: state.why,
    ranksAlive: 0,
    haltPresent: false,
    requestActive: false,
    supervisor: null,
  });
  const halt = cli(['halt', run]);
  assert.equal(halt.status, 3, halt.stdout + halt.stderr);
  assert.equal(halt.stderr, `halt refused: ${v.haltNow.why}\n`);
  assert.match(
    halt.stderr,
    /^halt refused: the run is FINISHED \(reached step \d+ of \d+; metrics\.json written\): nothing to halt\n$/,
  );
  const ack = cli(['halt', run, '--after-checkpoint', '--json']);
  assert.equal(ack.status, 3);
  const j = JSON.parse(ack.stdout) as { result: string; exitCode: number; detail: string };
  assert.deepEqual([j.result, j.exitCode, j.detail], ['refused', 3, v.haltAfterCheckpoint.why]);
  const stop = cli(['stop', run]);
  assert.equal(stop.status, 3);
  assert.equal(stop.stderr, `stop refused: ${v.stop.why}\n`);
  const dump = cli(['dump', run]);
  assert.equal(dump.status, 3);
  assert.equal(dump.stderr, `dump refused: ${v.dump.why}\n`);
  assert.equal(existsSync(join(run, '.HALT')), false, 'nothing written');
  assert.equal(existsSync(join(run, '.nsa-top', 'requests.json')), false, 'no request handed to an agent');
});
