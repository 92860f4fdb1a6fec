// The launch-side commands as a user meets them: the built binary, a pty for type-to-confirm.
// Needs `npm run build` first. Workload: the stand-in fake-trainer.mjs (quick, deterministic).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { readActions } from '../../../src/trainer/control/actions.js';
import { launchRun, readSupervisorState } from '../../../src/trainer/launch/launch.js';
import { selfCommand } from '../../../src/self.js';
import { tempDir } from '../control/helpers.js';
import { until } from './helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake-trainer.mjs', import.meta.url));
const pty = createRequire(import.meta.url)('node-pty') as typeof import('node-pty');

function profilesFile(dir: string, body: string): string {
  const f = join(dir, 'profiles.yaml');
  writeFileSync(f, `profiles:\n${body}`);
  return f;
}

const fakeProfile = (name: string, extra = '') => `  ${name}:
    trainer: reference
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FAKE)}]
    steps: 12
    save_every: 5
    restart: { max_restarts: 0 }
${extra}`;

function cli(args: string[], cwd?: string) {
  return spawnSync(selfCommand()[0]!, [...selfCommand().slice(1), ...args], {
    encoding: 'utf8',
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

const finished = (runDir: string) =>
  until('the supervisor to finish', async () => {
    const s = await readSupervisorState(host, runDir);
    return s &&
      ['halted', 'exited', 'failed'].includes(s.state) &&
      !(await verifyProcess(host, s.supervisor!).catch(() => false))
      ? s
      : null;
  });

/** Runs the binary in a pty, answers the first prompt, returns the exit code and the screen text. */
function inPty(args: string[], answer: string): Promise<{ code: number; text: string }> {
  return new Promise((resolve) => {
    const p = pty.spawn(selfCommand()[0]!, [...selfCommand().slice(1), ...args], {
      cols: 200,
      rows: 40,
      env: process.env as Record<string, string>,
    });
    let text = '';
    let answered = false;
    p.onData((d) => {
      text += d;
      if (!answered && /Type the run name/.test(text)) {
        answered = true;
        p.write(`${answer}\r`);
      }
    });
    p.onExit(({ exitCode }) => resolve({ code: exitCode, text }));
  });
}

test('relaunch asks to type the run name on a terminal, --yes otherwise; a wrong name changes nothing', async () => {
  const cwd = tempDir('cli-relaunch');
  const r = await launchRun(host, { profile: 'fake', profilesFile: profilesFile(cwd, fakeProfile('fake')), cwd });
  assert.equal((await finished(r.runDir)).state, 'exited');
  writeFileSync(join(r.runDir, '.HALT'), 'halt: heartbeat_stall\n');
  // the run FINISHED its 12 steps: it is relaunched only with more (src/checks/actions.ts)
  const more = ['--steps', '20'];

  const noTty = cli(['relaunch', r.runDir, ...more, '--remove-stale-halt', '--allow-command', 'node']);
  assert.equal(noTty.status, 2);
  assert.match(noTty.stderr, /--yes/);
  const noFlag = cli(['relaunch', r.runDir, ...more, '--yes', '--allow-command', 'node']);
  assert.equal(noFlag.status, 3, 'a .HALT without --remove-stale-halt is refused');
  assert.match(noFlag.stderr, /--remove-stale-halt/);

  const wrong = await inPty(['relaunch', r.runDir, ...more, '--remove-stale-halt', '--allow-command', 'node'], 'nope');
  assert.equal(wrong.code, 3);
  assert.match(wrong.text, /halt: heartbeat_stall/, 'the .HALT content is shown before asking');
  assert.match(wrong.text, /resuming from .*checkpoint_step10\.pt \(step 10\): newest complete weights/);
  assert.match(wrong.text, /not confirmed/);
  assert.ok(existsSync(join(r.runDir, '.HALT')));

  const right = await inPty(
    ['relaunch', r.runDir, ...more, '--remove-stale-halt', '--allow-command', 'node'],
    basename(r.runDir),
  );
  assert.equal(right.code, 0, right.text);
  assert.equal(existsSync(join(r.runDir, '.HALT')), false);
  assert.equal((await finished(r.runDir)).state, 'exited');
  assert.match(readFileSync(join(r.runDir, 'train.log'), 'utf8'), /resumed from .*checkpoint_step10\.pt at step 10/);
  const acts = (await readActions(host, r.runDir)).map((a) => `${a.action}:${a.result}`);
  // the relaunch is said as it begins (before the new trainer can boot), then its result
  assert.deepEqual(acts, ['launch:ok', 'relaunch:refused', 'remove-stale-halt:ok', 'relaunch:started', 'relaunch:ok']);
});

test('the smoke phase runs first; a failing smoke stops the launch before the real run', async () => {
  const cwd = tempDir('cli-smoke');
  const pf = profilesFile(
    cwd,
    fakeProfile('smoked', '    smoke: { steps: 3 }\n') +
      fakeProfile('bad-smoke', '    smoke: { steps: 5, args: [--inject, crash@step=2] }\n'),
  );
  const good = await launchRun(host, { profile: 'smoked', profilesFile: pf, cwd });
  const s1 = await finished(good.runDir);
  assert.equal(s1.state, 'exited');
  assert.equal(s1.phase, 'train');
  assert.match(readFileSync(join(good.runDir, 'smoke.log'), 'utf8'), /step 0003/);
  assert.ok(existsSync(join(good.runDir, 'smoke', 'heartbeat_rank0.jsonl')), 'the smoke writes into its own dir');
  assert.match(readFileSync(join(good.runDir, 'train.log'), 'utf8'), /step 0012/);

  const bad = await launchRun(host, { profile: 'bad-smoke', profilesFile: pf, cwd });
  const s2 = await finished(bad.runDir);
  assert.equal(s2.state, 'failed');
  assert.match(s2.note ?? '', /smoke failed/);
  assert.equal(existsSync(join(bad.runDir, 'heartbeat_rank0.jsonl')), false, 'the real run never started');
});

test('launch, attach and profiles say clearly what is wrong', () => {
  const cwd = tempDir('cli-errors');
  const unknown = cli(['launch', '--profile', 'no-such'], cwd);
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /unknown profile 'no-such' \(known: demo, cpu-smoke/);
  const missing = cli(['launch'], cwd);
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /--profile NAME is required/);
  const att = cli(['attach', join(cwd, 'nope')]);
  assert.equal(att.status, 2);
  assert.match(att.stderr, /no such run directory/);
  const list = cli(['profiles']);
  assert.equal(list.status, 0);
  assert.match(list.stdout, /^demo\s/m);
  assert.match(list.stdout, /^cpu-smoke\s/m);
});
