// A FINISHED run is not relaunched without --steps: `nsa-top relaunch` refuses it (exit 3) with the
// judge's reason — the words the cockpit's r shows — and `relaunch --steps N` trains on to N, the
// recorded command changed so later restarts do too.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { withSteps } from '../../../src/trainer/launch/launch.js';
import { tempDir } from '../control/helpers.js';

const bin = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));

async function until<T>(what: string, f: () => T | null, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== null) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('withSteps: the last --steps wins and is replaced; none: appended', () => {
  assert.deepEqual(withSteps(['t', '--steps', '5', '--steps=7'], 9), {
    command: ['t', '--steps', '5', '--steps=9'],
    was: '7',
  });
  assert.deepEqual(withSteps(['t', '--steps', '5'], 9).command, ['t', '--steps', '9']);
  assert.deepEqual(withSteps(['t'], 9), { command: ['t', '--steps', '9'], was: null });
});

test('relaunch of a FINISHED run: refused without --steps (exit 3, the reason), trains on with --steps N', async () => {
  const cwd = tempDir('relaunch-steps');
  after(() => rmSync(cwd, { recursive: true, force: true }));
  const t0 = Date.now();
  const lap = (what: string) => console.log(`# ${what} at ${Date.now() - t0} ms`);
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
  const l = cli(['launch', '--profile', 'cpu-smoke', '--steps', '10']);
  assert.equal(l.status, 0, l.stderr);
  const runDir = /run dir\s+(\S+)/.exec(l.stdout)![1]!;
  const state = () => {
    try {
      return (JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')) as { state: string }).state;
    } catch {
      return null;
    }
  };
  lap('launched');
  await until('the run to finish', () => (state() === 'exited' ? true : null));
  lap('finished');
  const plain = cli(['relaunch', runDir, '--yes']);
  assert.equal(plain.status, 3, plain.stderr);
  assert.match(
    plain.stderr,
    /relaunch refused: the run is FINISHED \(.*\): it trained all its steps — a relaunch would stop at once; train longer with: nsa-top relaunch RUN_DIR --steps N \(N > 10\)/,
  );
  const fewer = cli(['relaunch', runDir, '--yes', '--steps', '10']);
  assert.equal(fewer.status, 3);
  assert.match(fewer.stderr, /--steps 10 is not past the 10 steps it trained/);
  lap('refused twice');
  const more = cli(['relaunch', runDir, '--yes', '--steps', '15']);
  lap('relaunched');
  assert.equal(more.status, 0, more.stderr);
  assert.match(more.stdout, /relaunch ok: resuming from .*checkpoint_step10\.pt.*; steps 10 → 15/);
  // what it showed before going on is what ran: the command with --steps 15, not the recorded 10
  assert.match(more.stderr, /--steps 15\b/);
  assert.doesNotMatch(more.stderr, /--steps 10\b/);
  const plan = JSON.parse(readFileSync(join(runDir, '.nsa-top', 'launch.json'), 'utf8')) as { command: string[] };
  assert.equal(plan.command[plan.command.indexOf('--steps') + 1], '15');
  const metrics = () => {
    try {
      return JSON.parse(readFileSync(join(runDir, 'metrics.json'), 'utf8')) as { last_step?: number };
    } catch {
      return null;
    }
  };
  await until('the relaunched run to finish at step 15', () =>
    metrics()?.last_step === 15 && state() === 'exited' ? true : null,
  );
  lap('trained to 15');
});
