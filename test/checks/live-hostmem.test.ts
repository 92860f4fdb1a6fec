// A leak on a CPU-only box, live: the reference trainer retains 20 MB more per step
// (--inject leak@mb=20) and the watchdog, reading the host's real /proc/meminfo, turns host-mem
// critical with a time-to-exhaustion estimate — one alert, not a warning beside a critical. The
// host's budget is scaled down by the threshold (NSA_TOP_HOST_MEM_CRIT_S), not by faking MemTotal.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-hostmem-'));
const kids: ReturnType<typeof spawn>[] = [];
after(() => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

test('--inject leak@mb=20: host-mem critical with "runs out in ~…" from the real /proc numbers, one alert', async (t) => {
  const runDir = join(tmp, 'run');
  // and the trend needs 5 s, not 30 (a real leak of 20 MB a step is steady from the start)
  const env = {
    ...process.env,
    NSA_TOP_HOST_MEM_CRIT_S: '100000000',
    NSA_TOP_HOST_MEM_WARN_S: '100000000',
    NSA_TOP_HOST_MEM_TREND_S: '5',
  };
  // at most 100 steps × 20 MB = 2 GB retained, and the trainer is killed as soon as the alert is seen
  const trainer = spawn(
    process.execPath,
    [
      bin,
      'train',
      '--out',
      runDir,
      '--steps',
      '100',
      '--log-every',
      '1',
      '--seq-len',
      '32',
      '--batch-size',
      '2',
      '--inject',
      'leak@mb=20',
      '--inject',
      'slow-data@ms=80',
    ],
    { stdio: 'ignore', env },
  );
  kids.push(trainer);
  // the watchdog opens a run that exists: the trainer's first heartbeat first
  for (const end = Date.now() + 60_000; !existsSync(join(runDir, 'heartbeat_rank0.jsonl'));) {
    assert.ok(Date.now() < end, 'the trainer wrote its first heartbeat');
    await new Promise((r) => setTimeout(r, 100));
  }
  const wd = spawn(process.execPath, [bin, 'watchdog', runDir, '--interval', '0.5'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  kids.push(wd);
  let out = '';
  let err = '';
  const alerts: { id: string; severity: string; title: string }[] = [];
  const active = new Map<string, string>();
  // resolved once host-mem is critical and no rank RSS alert for the same leak is in force beside it
  const seen = new Promise<{ id: string; severity: string; title: string } | null>((resolve) => {
    wd.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const lines = out.split('\n');
      out = lines.pop()!;
      for (const l of lines) {
        const j = JSON.parse(l) as { event: string; id: string; severity: string; title: string };
        if (j.event === 'alert') {
          active.set(j.id, j.severity);
          if (j.id === 'host-mem' || j.id.startsWith('mem-leak:')) alerts.push(j);
        }
        if (j.event === 'clear') active.delete(j.id);
        if (
          (j.event === 'state' || j.event === 'alert' || j.event === 'clear') &&
          active.get('host-mem') === 'critical'
        ) {
          const beside = [...active.keys()].filter((id) => id.startsWith('mem-leak:') && id.includes('process RSS'));
          if (beside.length === 0) resolve(alerts.filter((a) => a.id === 'host-mem').at(-1)!);
        }
      }
    });
    wd.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    wd.on('exit', () => resolve(null));
  });
  const crit = await seen;
  trainer.kill('SIGKILL');
  wd.kill('SIGTERM');
  assert.ok(crit, `host-mem critical seen (alerts: ${JSON.stringify(alerts)}; watchdog stderr: ${err})`);
  assert.match(
    crit.title,
    /^host RAM runs out in ~\S+ at \+\d+(\.\d)? MiB\/s \(\d+\.\d GiB of \d+\.\d GiB available\)$/,
  );
  t.diagnostic(crit.title);
  // one alert per cause: at most one host-mem episode, and it went warning → critical in place
  assert.ok(alerts.filter((a) => a.id === 'host-mem').every((a) => a.severity !== 'info'));
});
