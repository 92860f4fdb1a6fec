// Read-only by any spelling (issue 24 item 7): NSA_TOP_READ_ONLY = 1/true/yes/on in any case is
// read-only for every command and the cockpit; 0/false/no/off/empty is not; anything else is a
// one-line error with exit 2, never silently off. Real CLI processes on a real run dir.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { acknowledgeAlert, currentActor } from '../../../src/trainer/control/actions.js';
import { READ_ONLY_REFUSAL } from '../../../src/trainer/control/audit.js';
import { killKids, startKid } from './helpers.js';
import { readOnlyEnv, readOnlyMode } from '../../../src/trainer/control/ownfiles.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-readonly-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NSA_TOP_READ_ONLY: undefined, ...env },
  });
}

/** a finished single-rank run whose loss went NaN, with a launch record: every effect has a target */
function nanRun(): string {
  const d = mkdtempSync(join(tmp, 'run-'));
  cpSync(join(ROOT, 'test', 'fixtures', 'nsa-vibe', 'single'), d, { recursive: true });
  rmSync(join(d, 'metrics.json'));
  appendFileSync(join(d, 'training.csv'), '41,nan,0.0,500\n');
  return d;
}

test('readOnlyEnv: the spellings that are on, off, and bad', () => {
  for (const v of ['1', 'true', 'TRUE', 'yes', 'Yes', 'on', 'ON', ' true '])
    assert.equal(readOnlyEnv({ NSA_TOP_READ_ONLY: v }), true, v);
  for (const v of [undefined, '', '0', 'false', 'False', 'no', 'NO', 'off', 'Off'])
    assert.equal(readOnlyEnv({ NSA_TOP_READ_ONLY: v }), false, String(v));
  for (const v of ['2', 'y', 'enabled', 'true1', 'read-only']) {
    const r = readOnlyEnv({ NSA_TOP_READ_ONLY: v });
    assert.equal(typeof r, 'object', v);
    assert.match((r as { error: string }).error, /^NSA_TOP_READ_ONLY="[^"\n]*" is neither on \(1, true, yes, on\)/);
  }
});

test('NSA_TOP_READ_ONLY=true (and yes, On) refuses halt, stop, dump, relaunch, ack and watchdog --halt', async () => {
  const d = nanRun();
  const listing = readdirSync(d).sort();
  for (const [spelling, cmds] of [
    ['true', ['halt', 'stop', 'dump']],
    ['yes', ['halt']],
    ['On', ['halt', 'dump']],
  ] as const) {
    for (const c of cmds) {
      const r = cli([c, d, '--json'], { NSA_TOP_READ_ONLY: spelling });
      assert.equal(r.status, 3, `${c} with ${spelling}: ${r.stdout}${r.stderr}`);
      assert.equal(JSON.parse(r.stdout).detail, READ_ONLY_REFUSAL, `${c} with ${spelling}`);
    }
  }
  const rl = cli(['relaunch', d, '--yes'], { NSA_TOP_READ_ONLY: 'true' });
  assert.equal(rl.status, 3, rl.stderr);
  assert.match(rl.stderr, new RegExp(`relaunch refused: ${READ_ONLY_REFUSAL}`));
  const wd = cli(['watchdog', d, '--halt', '--no-gpu'], { NSA_TOP_READ_ONLY: 'true' });
  const halt = wd.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((e) => e.event === 'halt');
  assert.equal(halt?.result, 'refused', wd.stdout + wd.stderr);
  // ack (a cockpit action): the audited path reads the same switch in this process
  const saved = process.env.NSA_TOP_READ_ONLY;
  process.env.NSA_TOP_READ_ONLY = 'true';
  try {
    assert.equal(readOnlyMode(), true);
    const ack = await acknowledgeAlert(
      host,
      d,
      { id: 'nan-loss', since: new Date().toISOString(), severity: 'critical' } as never,
      await currentActor(host),
    );
    assert.deepEqual([ack.result, ack.detail], ['refused', READ_ONLY_REFUSAL]);
  } finally {
    if (saved === undefined) delete process.env.NSA_TOP_READ_ONLY;
    else process.env.NSA_TOP_READ_ONLY = saved;
  }
  assert.deepEqual(readdirSync(d).sort(), listing, 'no .HALT, .anomaly_type, .nsa-top or dump written');
});

test('NSA_TOP_READ_ONLY=maybe is a one-line error with exit 2 in every command and the cockpit; off is not read-only', async () => {
  const d = nanRun();
  for (const args of [['status', d], ['halt', d], ['report', d], ['watchdog', d, '--halt', '--once'], [d], []]) {
    const r = cli(args, { NSA_TOP_READ_ONLY: 'maybe' });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.equal(
      r.stderr,
      'nsa-top: NSA_TOP_READ_ONLY="maybe" is neither on (1, true, yes, on) nor off (0, false, no, off, empty)\n',
    );
    assert.equal(r.stdout, '');
  }
  assert.ok(!existsSync(join(d, '.HALT')) && !existsSync(join(d, '.nsa-top')), 'nothing written');
  // off by a spelling other than unset: the halt acts (on a live rank of the run: an ended run has
  // nothing to halt, as in the cockpit)
  const kid = await startKid(new LocalHost(), d, undefined, { DUMP_RANK: '1', HB_RANK: '1' });
  const h = cli(['halt', d, '--json'], { NSA_TOP_READ_ONLY: 'Off' });
  killKids([kid]);
  await kid.exited;
  assert.equal(JSON.parse(h.stdout).result, 'ok', h.stdout + h.stderr);
  assert.ok(existsSync(join(d, '.HALT')), 'halt wrote .HALT with NSA_TOP_READ_ONLY=Off');
});
