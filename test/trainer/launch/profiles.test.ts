import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import {
  builtinProfiles,
  formatIssue,
  loadProfiles,
  memoryClass,
  parseProfilesText,
  ProfileError,
  queryGpus,
  resolveLaunchPlan,
  type GpuInventory,
} from '../../../src/trainer/launch/profiles.js';
import { selfCommand } from '../../../src/self.js';
import { tempDir } from '../control/helpers.js';

const host = new LocalHost();
const gpus = (n: number, mem: number | null): GpuInventory => ({
  count: n,
  memTotalMiB: mem === null ? [] : Array(n).fill(mem),
  maxMemMiB: mem,
  source: n > 0 ? 'nvidia-smi' : 'none',
  error: null,
});

function plan(name: string, g: GpuInventory, extra: Partial<Parameters<typeof resolveLaunchPlan>[0]> = {}) {
  const f = builtinProfiles();
  return resolveLaunchPlan({
    profileName: name,
    profile: f.profiles[name]!,
    presets: f.presets,
    gpus: g,
    runDir: '/runs/x',
    cwd: '/repo',
    configOutDir: 'artifacts/m7c_125m',
    ...extra,
  });
}

test('every built-in profile validates and resolves on 0, 1 and 2 GPUs', async () => {
  const f = await loadProfiles(host);
  assert.ok(
    ['demo', 'cpu-smoke', 'm7c-prime', 'm7c-2xa100-production', 'm7c-1xa100-production'].every((n) => n in f.profiles),
  );
  for (const name of Object.keys(f.profiles))
    for (const g of [gpus(0, null), gpus(1, 40960), gpus(2, 81920)]) {
      const p = plan(name, g);
      assert.ok(p.command.length > 0);
      assert.ok(
        !p.command.includes('--config') || p.trainer === 'reference',
        `${name}: the real trainer never gets --config`,
      );
      if (p.trainer === 'nsa-vibe') assert.ok(p.env.CONFIG, `${name}: CONFIG passed via env`);
    }
});

test('config by GPU memory and process count by GPU count, like train_m7c_prime.sh', () => {
  assert.equal(memoryClass(81920), '80g');
  assert.equal(memoryClass(75000), '80g');
  assert.equal(memoryClass(40960), '40g');
  assert.equal(memoryClass(35000), '40g');
  assert.equal(memoryClass(24576), '24g');
  assert.equal(memoryClass(null), '24g');
  const two = plan('m7c-prime', gpus(2, 81920));
  assert.equal(two.env.CONFIG, 'configs/m7c_125m_80g.yaml');
  assert.deepEqual(two.command.slice(0, 3), ['torchrun', '--nproc_per_node=2', 'scripts/train_showcase.py']);
  assert.equal(two.outDir, '/repo/artifacts/m7c_125m');
  const one = plan('m7c-prime', gpus(1, 40960));
  assert.equal(one.env.CONFIG, 'configs/m7c_125m_40g.yaml');
  assert.deepEqual(one.command.slice(0, 3), ['python', '-u', 'scripts/train_showcase.py']);
  assert.ok(one.smoke, 'm7c-prime runs a smoke first');
  assert.equal(one.smoke!.env.CONFIG, 'configs/train_showcase.yaml');
  assert.ok(one.smoke!.command.includes('--steps'), 'the smoke really is bounded (the shell script ran 200 steps)');
});

test('the A100 PCIe production preset reaches the environment', () => {
  const p = plan('m7c-2xa100-production', gpus(2, 81920));
  for (const [k, v] of Object.entries({
    NSA_PREFILL_BATCHED: '1',
    NSA_DISABLE_AUX_STATS: '1',
    NSA_DDP_STATIC_GRAPH: '1',
    NSA_DDP_FIND_UNUSED: '0',
    NSA_DDP_BUCKET_MB: '25',
    NCCL_ALGO: 'Ring',
    NCCL_PROTO: 'Simple',
  }))
    assert.equal(p.env[k], v, k);
  assert.equal(p.env.CONFIG, 'configs/m7c_125m_2xa100_production.yaml');
});

test('demo: the reference trainer with 2 ranks writing into the run dir', () => {
  const p = plan('demo', gpus(0, null));
  assert.deepEqual(p.command.slice(0, selfCommand().length + 1), [...selfCommand(), 'train']);
  assert.equal(p.outDir, '/runs/x');
  const arg = (f: string) => p.command[p.command.indexOf(f) + 1];
  assert.equal(arg('--out'), '/runs/x');
  assert.equal(arg('--ranks'), '2');
  assert.equal(arg('--save-every'), '25');
  assert.equal(p.env.NSA_HEARTBEAT_EVERY, '1');
});

test('--config for the real trainer is refused, naming the line and the CONFIG way', () => {
  const text = `profiles:
  mine:
    trainer: nsa-vibe
    config: configs/m7c_125m_80g.yaml
    args:
      - --dataset
      - fineweb_edu
      - --config
      - configs/other.yaml
`;
  const r = parseProfilesText(text, 'p.yaml');
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(r.issues.length, 1);
  assert.equal(r.issues[0]!.line, 8);
  assert.match(r.issues[0]!.message, /no --config flag.*CONFIG=/);
});

test('a broken profile file gives errors that name the line', async () => {
  const dir = tempDir('prof');
  const bad = join(dir, 'bad.yaml');
  writeFileSync(
    bad,
    `profiles:
  a:
    trainer: reference
    procs: 0
    restart:
      max_restarts: lots
  b:
    trainer: reference
    env_presets: [no-such-preset]
  c:
    trainer: nope
`,
  );
  await assert.rejects(loadProfiles(host, bad), (e: unknown) => {
    assert.ok(e instanceof ProfileError);
    const lines = e.issues.map((i) => `${i.line}:${i.path}`);
    assert.ok(lines.includes('4:profiles.a.procs'), lines.join(' '));
    assert.ok(lines.includes('6:profiles.a.restart.max_restarts'), lines.join(' '));
    assert.ok(lines.includes('11:profiles.c.trainer'), lines.join(' '));
    return true;
  });
  const unknownPreset = join(dir, 'preset.yaml');
  writeFileSync(unknownPreset, 'profiles:\n  b:\n    trainer: reference\n    env_presets: [no-such-preset]\n');
  await assert.rejects(
    loadProfiles(host, unknownPreset),
    /preset\.yaml:4:\d+: profiles\.b\.env_presets\[0\]: unknown preset 'no-such-preset'/,
  );
  const syntax = join(dir, 'syntax.yaml');
  writeFileSync(syntax, 'profiles:\n  x:\n    trainer: reference\n    args: [a, b\n');
  await assert.rejects(loadProfiles(host, syntax), /syntax\.yaml:\d+:\d+: /);
  // the CLI: exit 2, the line on stderr; the built-ins check clean
  const cli = spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), 'profiles', '--check', '--file', bad], {
    encoding: 'utf8',
  });
  assert.equal(cli.status, 2);
  assert.match(cli.stderr, /bad\.yaml:6:\d+: profiles\.a\.restart\.max_restarts/);
  const ok = spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), 'profiles', '--check'], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
});

test('GPU inventory from nvidia-smi (a recorded answer on PATH); missing nvidia-smi is not an error', async () => {
  const bin = tempDir('fake-smi');
  mkdirSync(bin, { recursive: true });
  const smi = join(bin, 'nvidia-smi');
  writeFileSync(smi, '#!/bin/sh\nprintf "81920\\n81920\\n"\n');
  chmodSync(smi, 0o755);
  const oldPath = process.env.PATH;
  process.env.PATH = `${bin}:${oldPath}`;
  try {
    const g = await queryGpus(host);
    assert.deepEqual([g.count, g.maxMemMiB, g.source], [2, 81920, 'nvidia-smi']);
    const p = plan('m7c-prime', g);
    assert.equal(p.env.CONFIG, 'configs/m7c_125m_80g.yaml');
    assert.equal(p.procs, 2);
  } finally {
    process.env.PATH = oldPath;
  }
  process.env.PATH = '/nonexistent';
  try {
    const none = await queryGpus(host);
    assert.equal(none.source, 'none');
    assert.equal(none.count, 0);
  } finally {
    process.env.PATH = oldPath;
  }
});

// ---- torchrun's master port, and the run dir --show prints

function realProfileFile(dir: string, body: string): string {
  mkdirSync(join(dir, 'repo', 'configs'), { recursive: true });
  writeFileSync(join(dir, 'repo', 'configs', 'c.yaml'), 'train: {steps: 10, save_every: 5, out_dir: artifacts/c}\n');
  writeFileSync(join(dir, 'repo', 'train.py'), '');
  const f = join(dir, 'p.yaml');
  writeFileSync(
    f,
    `profiles:\n  two:\n    trainer: nsa-vibe\n    repo: ${join(dir, 'repo')}\n    python: /usr/bin/python3\n    script: train.py\n    config: configs/c.yaml\n    procs: 2\n${body}`,
  );
  return f;
}

const formatIssues = (issues: Parameters<typeof formatIssue>[0][]) => issues.map(formatIssue).join('\n');
const nsaTop = (args: string[], cwd: string) =>
  spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), ...args], { cwd, encoding: 'utf8', timeout: 120_000 });

test('master_port: torchrun gets --master_port; a second way to set the port is refused; not for one process or the reference trainer', async () => {
  const dir = tempDir('prof-port');
  const f = await loadProfiles(host, realProfileFile(dir, '    master_port: 29612\n'));
  const p = resolveLaunchPlan({
    profileName: 'two',
    profile: f.profiles.two!,
    presets: f.presets,
    gpus: gpus(0, null),
    runDir: '/runs/x',
    cwd: dir,
    configOutDir: 'artifacts/c',
  });
  assert.deepEqual(p.command.slice(0, 4), ['torchrun', '--master_port=29612', '--nproc_per_node=2', 'train.py']);
  assert.equal(p.masterPort, 29612);
  const twice = parseProfilesText(
    'profiles:\n  x:\n    trainer: nsa-vibe\n    config: c.yaml\n    master_port: 29612\n    env: { PET_MASTER_PORT: 29613 }\n',
    'x.yaml',
  );
  assert.equal(twice.ok, false);
  assert.match(
    !twice.ok ? formatIssues(twice.issues) : '',
    /x\.yaml:6:\d+: profiles\.x\.env\.PET_MASTER_PORT: the port is set twice: use master_port: only/,
  );
  const ref = parseProfilesText('profiles:\n  r:\n    trainer: reference\n    master_port: 29612\n', 'r.yaml');
  assert.match(
    !ref.ok ? formatIssues(ref.issues) : '',
    /r\.yaml:4:\d+: profiles\.r\.master_port: .*no torchrun rendezvous/,
  );
});

test('preflight checks the port the profile gives torchrun, not 29500', async () => {
  const dir = tempDir('prof-preflight');
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const busy = (srv.address() as AddressInfo).port;
  try {
    const f = realProfileFile(dir, `    master_port: ${busy}\n`);
    const r = nsaTop(['preflight', '--profile', 'two', '--profiles', f, '--json'], dir);
    const j = JSON.parse(r.stdout) as { lines: { check: string; status: string; text: string }[] };
    const port = j.lines.find((l) => l.check === 'port')!;
    assert.equal(port.status, 'FAIL', port.text);
    assert.match(port.text, new RegExp(`port ${busy} \\(torchrun's rendezvous\\) is already in use`));
  } finally {
    srv.close();
  }
});

test("profiles --show prints the run dir launch will create: artifacts/train_runs/ in the trainer's repo, not the current dir", () => {
  const dir = tempDir('prof-show');
  const f = realProfileFile(dir, '');
  const r = nsaTop(['profiles', '--file', f, '--show', 'two'], dir);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^run_dir: ${join(dir, 'repo', 'artifacts', 'train_runs', 'two_')}`, 'm'));
  assert.match(r.stdout, new RegExp(`^out_dir: ${join(dir, 'repo', 'artifacts', 'c')}$`, 'm'));
});
