// The real-trainer path of a profile: CONFIG by GPU memory, out_dir from the config, smoke with the
// toy config, plain python for one (here: no) GPU. `python` is a shim running the stand-in trainer,
// which, like scripts/train_showcase.py, reads only CONFIG and writes to its train.out_dir.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { readActions } from '../../../src/trainer/control/actions.js';
import { launchRun, readSupervisorState } from '../../../src/trainer/launch/launch.js';
import { tempDir } from '../control/helpers.js';
import { until } from './helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake-trainer.mjs', import.meta.url));

test('a real-trainer profile: CONFIG via env by GPU memory, out_dir from the config, smoke first, pointer in the out_dir', async () => {
  const repo = tempDir('nsa-vibe-repo');
  mkdirSync(join(repo, 'scripts'));
  mkdirSync(join(repo, 'configs'));
  mkdirSync(join(repo, 'bin'));
  writeFileSync(join(repo, 'scripts', 'train_showcase.py'), '# stand-in\n');
  writeFileSync(join(repo, 'configs', 'm7c_125m_24g.yaml'), 'train:\n  steps: 50000\n  out_dir: artifacts/m7c_125m\n');
  writeFileSync(join(repo, 'configs', 'train_showcase.yaml'), 'train:\n  out_dir: artifacts/train_showcase\n');
  const py = join(repo, 'bin', 'python');
  writeFileSync(py, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(FAKE)} "$@"\n`);
  chmodSync(py, 0o755);
  const pf = join(repo, 'profiles.yaml');
  writeFileSync(
    pf,
    `profiles:
  m7c:
    trainer: nsa-vibe
    python: ${py}
    config:
      by_gpu_memory: { 80g: configs/m7c_125m_80g.yaml, 40g: configs/m7c_125m_40g.yaml, 24g: configs/m7c_125m_24g.yaml }
    procs: gpus
    args: [--dataset, fineweb_edu]
    env_presets: [a100-pcie-production]
    smoke: { config: configs/train_showcase.yaml, steps: 3 }
    restart: { max_restarts: 0 }
`,
  );
  const oldPath = process.env.PATH;
  process.env.PATH = `/nonexistent-no-gpus:${oldPath}`; // no nvidia-smi here anyway
  let r;
  try {
    r = await launchRun(host, { profile: 'm7c', profilesFile: pf, cwd: repo, steps: 12 });
  } finally {
    process.env.PATH = oldPath;
  }
  assert.equal(r.outDir, join(repo, 'artifacts', 'm7c_125m'));
  assert.ok(r.runDir.startsWith(join(repo, 'artifacts', 'train_runs', 'm7c_')));
  const st = await until('the run to end', async () => {
    const s = await readSupervisorState(host, r.outDir); // the out_dir leads back to the supervisor
    return s && s.state === 'exited' && !(await verifyProcess(host, s.supervisor!).catch(() => false)) ? s : null;
  });
  assert.equal(st.exitCodes.length, 1);
  const info = readFileSync(join(r.runDir, 'run.info'), 'utf8');
  assert.match(info, /^config: configs\/m7c_125m_24g\.yaml {2}# no GPU memory reading/m);
  assert.match(info, /^command: \S*python -u scripts\/train_showcase\.py --steps 12 --dataset fineweb_edu$/m);
  assert.match(info, /^env: CONFIG=configs\/m7c_125m_24g\.yaml$/m);
  assert.match(info, /^env: NSA_PREFILL_BATCHED=1$/m);
  assert.match(info, new RegExp(`^out_dir: ${r.outDir}$`, 'm'));
  assert.match(
    readFileSync(join(r.runDir, 'smoke.log'), 'utf8'),
    /\[boot\] loading config configs\/train_showcase\.yaml/,
  );
  assert.ok(
    existsSync(join(repo, 'artifacts', 'train_showcase', 'heartbeat_rank0.jsonl')),
    'the smoke ran on the toy config',
  );
  assert.match(
    readFileSync(join(r.runDir, 'train.log'), 'utf8'),
    /\[boot\] loading config configs\/m7c_125m_24g\.yaml/,
  );
  assert.ok(readdirSync(r.outDir).includes('checkpoint_step10.pt'));
  assert.deepEqual(JSON.parse(readFileSync(join(r.outDir, '.nsa-top', 'run.json'), 'utf8')).runDir, r.runDir);
  const acts = await readActions(host, r.runDir);
  assert.deepEqual(
    acts.map((a) => a.action),
    ['launch'],
  );
  assert.ok(
    existsSync(join(r.outDir, '.nsa-top', 'actions.jsonl')),
    'the action log lives with the trainer artifacts the cockpit watches',
  );
});

test('a real-trainer profile outside its checkout fails before creating anything', async () => {
  const cwd = tempDir('nsa-vibe-empty');
  await assert.rejects(
    launchRun(host, { profile: 'm7c-prime', cwd }),
    /scripts\/train_showcase\.py not found .*Nothing was started/,
  );
  assert.equal(existsSync(join(cwd, 'artifacts')), false);
});
