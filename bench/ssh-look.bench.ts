// The cockpit and `status` over SSH against the same commands locally, on one live run (the
// reference trainer, one rank) and a real OpenSSH sshd on loopback, all in this one run (the
// machine is shared: compare within a run, never across runs). Reported:
// - cockpit --host: ms to its first text ("connecting to HOST…") and to the run on screen (RUNNING),
//   beside a local cockpit's time to the run;
// - status --host vs local status: medians of LOOKS runs each, interleaved, and their ratio;
// - SSH sessions sshd started per `status --host` (its log, LogLevel VERBOSE);
// - dump --host vs a local dump (medians of DUMPS, interleaved) and sshd's sessions per dump;
// - the floor no client can cut: OpenSSH's own `ssh HOST true` (a session's login shell runs the
//   user's ~/.bashrc; here root's pyenv init costs ~0.6 s), and `status --host` against a second sshd
//   whose sessions start with an empty ~/.bashrc (Debian's default shell start), so the ratio can be
//   read with and without this machine's rc files.
// NSA_BENCH_FILTER=ssh-look npm run bench
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { startSshd } from '../test/helpers/sshd.js';
import { BIN, Cockpit } from '../test/e2e/pty.js';
import { killRecorded, runPids } from '../test/e2e/cleanup.js';
import { loadAverage } from './proc.js';

const LOOKS = Number(process.env.NSA_BENCH_LOOKS ?? 5);
const DUMPS = Number(process.env.NSA_BENCH_DUMPS ?? 3);
const tmp = mkdtempSync(join(tmpdir(), 'nsa-bench-ssh-look-'));
const runDir = join(tmp, 'run');
const sshd = await startSshd({ logSessions: true });
const plainSshd = await startSshd({ plainShell: true });
const env = { ...process.env, HOME: join(tmp, 'home'), SSH_AUTH_SOCK: '' } as Record<string, string>;
const argsFor = (s: typeof sshd) => [
  '--host',
  `${userInfo().username}@127.0.0.1:${s.port}`,
  '-i',
  s.userKey,
  '--accept-new-host-key',
];
const hostArgs = argsFor(sshd);
const plainArgs = argsFor(plainSshd);
/** OpenSSH's client: one session running `true` (its login shell's start is the floor) */
function sshTrue(s: typeof sshd): number {
  const t0 = performance.now();
  const r = spawnSync(
    'ssh',
    [
      '-p',
      String(s.port),
      '-i',
      s.userKey,
      '-o',
      'BatchMode=yes',
      '-o',
      `UserKnownHostsFile=${s.knownHosts}`,
      '-o',
      'StrictHostKeyChecking=accept-new',
      `${userInfo().username}@127.0.0.1`,
      'true',
    ],
    { env, encoding: 'utf8' },
  );
  if (r.status !== 0) return NaN;
  return performance.now() - t0;
}
const trainer = spawn(
  process.execPath,
  [BIN, 'train', '--out', runDir, '--ranks', '1', '--steps', '100000', '--log-every', '1', '--save-every', '0'],
  { cwd: tmp, stdio: 'ignore' },
);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function cockpit(extra: string[]): Promise<{ firstMs: number; runMs: number }> {
  const t0 = performance.now();
  const c = new Cockpit([runDir, ...extra, '--read-only'], { cwd: tmp, env, cols: 120, rows: 30 });
  let firstMs = NaN;
  try {
    for (;;) {
      await new Promise<void>((r) => c.term.write('', r));
      const s = c.screen();
      if (Number.isNaN(firstMs) && s.trim()) firstMs = performance.now() - t0;
      if (/RUNNING/.test(s)) return { firstMs, runMs: performance.now() - t0 };
      if (performance.now() - t0 > 60_000 || c.exitCode !== null) throw new Error(`no run on screen:\n${s}`);
      await sleep(10);
    }
  } finally {
    c.proc.kill('SIGTERM');
    await c.exited;
  }
}

function dump(extra: string[]): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [BIN, 'dump', runDir, '--json', ...extra], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`dump ${extra.join(' ')}: ${r.stdout}${r.stderr}`);
  return performance.now() - t0;
}

function status(extra: string[]): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [BIN, 'status', runDir, '--json', ...extra], { env, encoding: 'utf8' });
  if (r.status !== 0 && r.status !== 1) throw new Error(`status ${extra.join(' ')}: ${r.stderr}`);
  return performance.now() - t0;
}

try {
  for (let i = 0; ; i++) {
    try {
      if (readFileSync(join(runDir, 'heartbeat_rank0.jsonl'), 'utf8').split('\n').length > 8) break;
    } catch {
      /* not yet */
    }
    if (i > 600) throw new Error('the trainer did not start');
    await sleep(100);
  }
  // the first look at a hand-launched run records its adoption (writes): not part of the figures
  status(hostArgs);
  status(plainArgs);
  const ssh = [];
  const local = [];
  for (let i = 0; i < 2; i++) {
    ssh.push(await cockpit(hostArgs));
    local.push(await cockpit([]));
  }
  const remoteMs: number[] = [];
  const localMs: number[] = [];
  const sessions: number[] = [];
  const plainMs: number[] = [];
  const floorMs: number[] = [];
  const plainFloorMs: number[] = [];
  for (let i = 0; i < LOOKS; i++) {
    floorMs.push(sshTrue(sshd));
    plainFloorMs.push(sshTrue(plainSshd));
    plainMs.push(status(plainArgs));
    localMs.push(status([]));
    await sleep(500); // sshd logs the previous look's last lines
    const e0 = sshd.execs() ?? 0;
    remoteMs.push(status(hostArgs));
    await sleep(500);
    sessions.push((sshd.execs() ?? 0) - e0);
  }
  const dumpRemote: number[] = [];
  const dumpLocal: number[] = [];
  const dumpSessions: number[] = [];
  for (let i = 0; i < DUMPS; i++) {
    dumpLocal.push(dump([]));
    await sleep(500);
    const e0 = sshd.execs() ?? 0;
    dumpRemote.push(dump(hostArgs));
    await sleep(500);
    dumpSessions.push((sshd.execs() ?? 0) - e0);
  }
  const f = (n: number) => `${n.toFixed(0).padStart(7)} ms`;
  console.log(`\nssh server: ${sshd.kind}${sshd.why ? ` (${sshd.why})` : ''}; load average ${loadAverage()}`);
  console.log(
    `cockpit --host: first text ${f(median(ssh.map((x) => x.firstMs)))}, run on screen ${f(median(ssh.map((x) => x.runMs)))}`,
  );
  console.log(`cockpit local:  run on screen ${f(median(local.map((x) => x.runMs)))}`);
  console.log(
    `status --host ${f(median(remoteMs))} vs local ${f(median(localMs))}: ${(median(remoteMs) / median(localMs)).toFixed(1)}x (medians of ${LOOKS})`,
  );
  console.log(
    `status --host ${f(median(plainMs))} vs local ${f(median(localMs))}: ${(median(plainMs) / median(localMs)).toFixed(1)}x with an empty ~/.bashrc${plainSshd.plain ? '' : ' (NOT measured: needs root and unshare; the figure is the as-is shell)'}`,
  );
  console.log(
    `floor, OpenSSH's \`ssh HOST true\`: ${f(median(floorMs))} with this machine's ~/.bashrc, ${f(median(plainFloorMs))} with an empty one`,
  );
  console.log(
    `SSH sessions per status --host: ${sshd.kind === 'openssh' ? sessions.join(' ') : 'not counted (no OpenSSH log)'}`,
  );
  console.log(
    `dump --host   ${f(median(dumpRemote))} vs local ${f(median(dumpLocal))}: ${(median(dumpRemote) / median(dumpLocal)).toFixed(1)}x (medians of ${DUMPS}); SSH sessions per dump --host: ${sshd.kind === 'openssh' ? dumpSessions.join(' ') : 'not counted'}`,
  );
} finally {
  killRecorded(runPids(runDir));
  if (trainer.exitCode === null) trainer.kill('SIGKILL');
  await sshd.stop();
  await plainSshd.stop();
  rmSync(tmp, { recursive: true, force: true });
}
