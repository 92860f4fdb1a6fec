// One observation over SSH as locally: the host's CPU count (`getconf _NPROCESSORS_ONLN` once per
// connection) and whether it has nvidia-smi are part of what every surface judges, so `status --host`
// raises the same critical alerts as a local `status` (before, a run over SSH was judged without a
// CPU count and an impossible CPU throughput went unnamed). A real sshd on loopback; HOME is a temp dir.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSshd, type TestSshd } from '../helpers/sshd.js';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-observe-ssh-'));
let sshd: TestSshd | null = null;
after(async () => {
  await sshd?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

const T0 = 1_790_000_000;

test('status --host judges with the host CPU count and GPU tools, as a local status does: the same state and critical alerts', async () => {
  sshd = await startSshd();
  console.log(`# ssh server under test: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}`);
  // a run on the CPU that claims the 125M config at 9000 tok/s: impossible for any CPU
  const run = join(tmp, 'run');
  mkdirSync(run, { recursive: true });
  writeFileSync(
    join(run, 'env.json'),
    JSON.stringify({ torch: '2.4', env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml', WORLD_SIZE: '1' } }),
  );
  let text = JSON.stringify({ ts: T0, iso: 'x', rank: 0, pid: 4242, step: 0, msg: 'boot' }) + '\n';
  for (let s = 1; s <= 30; s++)
    text +=
      JSON.stringify({
        ts: T0 + s,
        iso: 'x',
        pid: 4242,
        rank: 0,
        step: s,
        msg: 'progress',
        loss: 5 - s / 1000,
        toks_per_s: 9000,
      }) +
      '\n' +
      JSON.stringify({ ts: T0 + s + 0.01, iso: 'x', rank: 0, pid: 4242, step: s, msg: 'step_end' }) +
      '\n';
  writeFileSync(join(run, 'heartbeat_rank0.jsonl'), text);
  writeFileSync(join(run, 'metrics.json'), JSON.stringify({ device: 'cpu', steps: 30 }));
  const env = { ...process.env, HOME: join(tmp, 'home'), SSH_AUTH_SOCK: '' };
  const status = (extra: string[]) =>
    spawnSync(process.execPath, [bin, 'status', run, '--json', ...extra], { env, encoding: 'utf8', timeout: 60_000 });
  const local = status([]);
  const remote = status([
    '--host',
    `${userInfo().username}@127.0.0.1:${sshd.port}`,
    '-i',
    sshd.userKey,
    '--accept-new-host-key',
  ]);
  assert.ok(local.status === 0 || local.status === 1, local.stderr);
  assert.equal(remote.status, local.status, remote.stderr);
  const crit = (out: string) =>
    (JSON.parse(out).alerts as { id: string; level: string }[])
      .filter((a) => a.level === 'critical')
      .map((a) => a.id)
      .sort();
  assert.ok(crit(local.stdout).includes('throughput:impossible'), `not vacuous: ${crit(local.stdout).join(',')}`);
  assert.deepEqual(crit(remote.stdout), crit(local.stdout));
  assert.deepEqual(JSON.parse(remote.stdout).state, JSON.parse(local.stdout).state);
});
