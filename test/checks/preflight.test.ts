// preflight: the judgements on facts, and the binary on this machine (no GPU: it must say so, not
// crash) and against a recorded nvidia-smi with foreign compute apps.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  checkpointNeed,
  judgeConfig,
  judgeDisk,
  judgeEnv,
  judgeGpus,
  judgeHalt,
  judgePort,
} from '../../src/checks/preflight.js';
import { listeningPorts } from '../../src/remote/ports.js';
import { gpu } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');

function nsaTop(args: string[], env: Record<string, string> = {}, cwd = ROOT) {
  return spawnSync(process.execPath, [BIN, ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
}

test('GPU judgements: no NVIDIA tools is said plainly (FAIL only when the trainer needs CUDA); foreign apps FAIL; a lost GPU FAIL', () => {
  const none = judgeGpus({ status: 'no-nvidia-tools', at: 0 }, false, null);
  assert.equal(none[0]!.status, 'INFO');
  assert.match(none[0]!.text, /no GPU on this machine/);
  assert.equal(judgeGpus({ status: 'no-nvidia-tools', at: 0 }, true, 2)[0]!.status, 'FAIL');
  const busy = gpu([{}, {}]);
  if (busy.status === 'ok') busy.apps = [{ pid: 4242, gpuUuid: 'GPU-0', usedMemMiB: 30000 }];
  const l = judgeGpus(busy, true, 2);
  assert.equal(l.find((x) => x.check === 'gpu-memory')!.status, 'FAIL');
  assert.match(l.find((x) => x.check === 'gpu-memory')!.text, /pid 4242/);
  assert.equal(judgeGpus(gpu([{ memUsedMiB: 3 }]), true, 2)[0]!.status, 'FAIL', 'one GPU where the profile wants two');
  assert.equal(
    judgeGpus(gpu([{ memUsedMiB: 3 }, { memUsedMiB: 3 }]), true, 2).every((x) => x.status === 'PASS'),
    true,
  );
  assert.equal(
    judgeGpus({ status: 'not-answering', since: 0, at: 12_000, lastGood: null }, true, null)[0]!.status,
    'FAIL',
  );
});

test('config judgements: missing keys, divisibility, the toy tell, save_every 0', () => {
  assert.match(judgeConfig('c.yaml', { model: { dim: 64 } }, null, true)[0]!.text, /missing model\.n_heads/);
  const base = {
    model: { dim: 768, n_layers: 12, n_heads: 12, n_kv_groups: 2, d_k: 64, d_v: 64 },
    nsa: { l: 32, d: 16, l_sel: 64, n_sel: 16, w: 512 },
    train: {
      steps: 50000,
      seq_len: 2048,
      batch_size: 2,
      lr: 2e-4,
      seed: 1,
      log_every: 20,
      out_dir: 'a',
      save_every: 5000,
    },
  };
  const ok = judgeConfig('c.yaml', base, null, true);
  assert.deepEqual(
    ok.map((x) => x.status),
    ['PASS'],
  );
  assert.match(ok[0]!.text, /dim 768 × 12 layers/);
  assert.equal(judgeConfig('c.yaml', { ...base, nsa: { ...base.nsa, d: 24 } }, null, true)[0]!.status, 'FAIL');
  const toy = judgeConfig(
    't.yaml',
    {
      ...base,
      model: { dim: 128, n_heads: 8, n_kv_groups: 2, d_k: 16, d_v: 16 },
      train: { ...base.train, seq_len: 128, save_every: 0 },
    },
    null,
    true,
  );
  assert.ok(toy.some((x) => x.status === 'WARN' && /toy model/.test(x.text)));
  assert.ok(toy.some((x) => x.check === 'checkpoints' && x.status === 'WARN'));
  assert.equal(
    judgeConfig(null, null, null, true)[0]!.status,
    'FAIL',
    'the real trainer without a config trains the toy default',
  );
});

test('disk, stale .HALT, port, env judgements', () => {
  const need = checkpointNeed(125e6, 2, 50000, 5000);
  assert.equal(need.count, 10);
  assert.equal(judgeDisk('/d', 1 * 2 ** 30, need, null)[0]!.status, 'FAIL');
  assert.equal(judgeDisk('/d', 100 * 2 ** 30, need, null)[0]!.status, 'PASS');
  assert.equal(judgeDisk('/d', null, need, 'df failed')[0]!.status, 'WARN');
  const h = judgeHalt('/run', { present: true, content: 'halt: nan_loss' }, 'nan_loss');
  assert.equal(h[0]!.status, 'FAIL');
  assert.match(h[0]!.fix!, /rm \/run\/\.HALT \/run\/\.anomaly_type/);
  const tcp =
    '  sl  local_address rem_address   st\n   0: 00000000:7C1C 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000\n   1: 0100007F:1F90 0100007F:D2F0 01 0\n';
  const ports = listeningPorts(tcp);
  assert.ok(ports.has(0x7c1c) && ports.has(31772) && !ports.has(8080), 'only LISTEN rows count');
  assert.equal(judgePort(31772, ports, true, null)[0]!.status, 'FAIL');
  assert.equal(judgePort(29500, ports, true, null)[0]!.status, 'PASS');
  const env = judgeEnv('p', ['x'], { NSA_PREFILL_BATCHED: '1' }, { NSA_STOPGRAD_GATES: '1' }, []);
  assert.ok(env.some((x) => x.status === 'WARN' && /NSA_STOPGRAD_GATES=1 exported in this shell/.test(x.text)));
  assert.equal(judgeEnv('p', ['gone'], {}, {}, ['gone'])[0]!.status, 'FAIL');
});

test('the binary on this machine (no GPU): says so plainly, does not crash; a GPU profile is not ready (exit 1); unknown profile exit 2', () => {
  const plain = nsaTop(['preflight'], { PATH: '/usr/bin:/bin' });
  assert.equal(plain.status, 0, plain.stderr);
  assert.match(plain.stdout, /no GPU on this machine/);
  const gpuProfile = nsaTop(['preflight', '--profile', 'm7c-2xa100-production', '--json'], { PATH: '/usr/bin:/bin' });
  assert.equal(gpuProfile.status, 1, gpuProfile.stderr);
  const j = JSON.parse(gpuProfile.stdout) as { lines: { check: string; status: string }[] };
  assert.equal(j.lines.find((l) => l.check === 'gpus')!.status, 'FAIL');
  const bad = nsaTop(['preflight', '--profile', 'no-such-profile']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown profile 'no-such-profile'/);
});

test('the binary with a recorded 2×A100 nvidia-smi holding foreign apps, and a stale .HALT in the run dir', () => {
  const smi = mkdtempSync(join(tmpdir(), 'nsa-preflight-smi-'));
  const run = mkdtempSync(join(tmpdir(), 'nsa-preflight-run-'));
  try {
    cpSync(join(ROOT, 'test', 'fixtures', 'nvidia-smi', 'a100x2'), smi, { recursive: true });
    writeFileSync(join(run, '.HALT'), 'halt: manual_stop\n');
    const r = nsaTop(['preflight', '--profile', 'cpu-smoke', '--run-dir', run], {
      PATH: `${join(ROOT, 'test', 'fixtures', 'nvidia-smi', 'bin')}:${process.env.PATH}`,
      NSA_FAKE_SMI_DIR: smi,
    });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /PASS\s+gpus\s+2 GPU\(s\) visible: NVIDIA A100-SXM4-80GB/);
    assert.match(r.stdout, /FAIL\s+gpu-memory\s+foreign compute apps hold GPU memory: pid 48213/);
    assert.match(r.stdout, /FAIL\s+halt\s+stale .*\.HALT \("halt: manual_stop"\)/);
  } finally {
    rmSync(smi, { recursive: true, force: true });
    rmSync(run, { recursive: true, force: true });
  }
});
