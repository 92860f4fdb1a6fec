// --keep-checkpoints N: the reference trainer keeps the newest N checkpoints it wrote and deletes
// only its own older ones — never a file it did not write (a foreign one, an earlier process's, the
// one it resumed from). What it removed is not "missing" to status. The demo profile keeps 5 and
// `profiles` and `demo` agree on its length. (nsa-top itself never deletes a training artifact.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { missingCheckpoints } from '../../../src/checks/saves.js';
import { builtinProfiles, resolveLaunchPlan } from '../../../src/trainer/launch/profiles.js';
import { command as demoCommand } from '../../../src/commands/demo.js';
import { tmp, trainToEnd } from './helpers.js';

const bin = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));
const t = tmp();
after(() => t.cleanup());
const ckpts = () =>
  readdirSync(t.out)
    .map((n) => /^checkpoint_step(\d+)\.pt$/.exec(n)?.[1])
    .filter((x): x is string => x !== undefined)
    .map(Number)
    .sort((a, b) => a - b);

test('keeps the newest N it wrote; a foreign checkpoint and an earlier process’s are never deleted; status sees no MISSING', async () => {
  const a = await trainToEnd([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '30',
    '--save-every',
    '5',
    '--keep-checkpoints',
    '3',
  ]);
  assert.equal(a.code, 0, a.stderr);
  // a checkpoint this trainer did not write, planted mid-run's name space
  writeFileSync(join(t.out, 'checkpoint_step2.pt'), 'not ours');
  assert.deepEqual(ckpts(), [2, 20, 25, 30]);
  assert.equal((a.stdout.match(/checkpoint retention: removed/g) ?? []).length, 3, a.stdout);
  // a second process resumes: it wrote 35, 40, 45 and keeps 2 of its own; 20, 25, 30 (the first
  // process's, 30 the one it resumed from) and the foreign 2 stay
  const b = await trainToEnd([
    '--config',
    t.cfg,
    '--out',
    t.out,
    '--steps',
    '45',
    '--save-every',
    '5',
    '--keep-checkpoints',
    '2',
    '--resume',
  ]);
  assert.equal(b.code, 0, b.stderr);
  assert.deepEqual(ckpts(), [2, 20, 25, 30, 40, 45]);
  // the log as a supervised run's train.log holds it: status names no removed save as MISSING
  writeFileSync(join(t.out, 'train.log'), a.stdout + b.stdout);
  const st = spawnSync(process.execPath, [bin, 'status', t.out], { encoding: 'utf8', timeout: 60_000 });
  assert.doesNotMatch(st.stdout, /MISSING/, st.stdout);
  assert.deepEqual(missingCheckpoints(5, [20, 25, 30, 40, 45], 45, 20, 35), []);
  assert.deepEqual(missingCheckpoints(5, [20, 25, 30, 45], 45, 20, 30), [35, 40]);
});

test('the demo profile keeps 5 checkpoints and is as long as `demo` says', () => {
  const f = builtinProfiles();
  const p = f.profiles['demo']!;
  const plan = resolveLaunchPlan({
    profileName: 'demo',
    profile: p,
    presets: f.presets,
    gpus: { count: 0, memTotalMiB: [], maxMemMiB: null, source: 'none', error: null },
    runDir: '/runs/x',
    cwd: '/repo',
    configOutDir: null,
  });
  const arg = (x: string) => plan.command[plan.command.indexOf(x) + 1];
  assert.equal(arg('--keep-checkpoints'), '5');
  assert.equal(arg('--steps'), '3000');
  assert.match(p.description ?? '', /3000 steps/);
  assert.match(demoCommand.options.steps!.help, /3000/);
  assert.equal(
    (demoCommand.options.steps as { default?: unknown }).default,
    undefined,
    "demo takes the profile's length",
  );
});
