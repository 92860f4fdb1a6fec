// The supervisor's automatic restart resumes from the newest WEIGHTS, not the highest step number:
// with a trainer that follows the real one's rules (fake_train.py: --resume loads weights only and
// the step count restarts at 1, same checkpoint names every segment), a run that reached step 60,
// was relaunched, saved checkpoint_step20.pt and crashed must restart from that file — the issue's
// "every auto-restart works from an older segment's file". Needs `npm run build` first.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { verifyProcess } from '../../../src/remote/procs.js';
import { currentActor } from '../../../src/trainer/control/actions.js';
import type { SupervisorState } from '../../../src/trainer/control/types.js';
import { launchRun, readSupervisorState, relaunch } from '../../../src/trainer/launch/launch.js';
import { tempDir } from '../control/helpers.js';

const host = new LocalHost();
const FAKE = fileURLToPath(new URL('./fake_train.py', import.meta.url));
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const sups: SupervisorState['supervisor'][] = [];
after(async () => {
  for (const s of sups) if (s && (await verifyProcess(host, s).catch(() => false))) process.kill(s.pid, 'SIGKILL');
});

const finished = async (runDir: string, ms = 60_000): Promise<SupervisorState> => {
  const end = Date.now() + ms;
  for (;;) {
    const s = await readSupervisorState(host, runDir);
    if (s?.supervisor) sups.push(s.supervisor);
    if (
      s &&
      ['halted', 'exited', 'failed'].includes(s.state) &&
      !(await verifyProcess(host, s.supervisor!).catch(() => false))
    )
      return s;
    if (Date.now() > end) throw new Error(`supervisor of ${runDir} did not finish: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

test("a crash after a resume restarts from the later segment's checkpoint_step20.pt, not the earlier segment's checkpoint_step60.pt", async () => {
  const root = tempDir('resume-newest');
  const repo = join(root, 'repo');
  const out = join(root, 'out');
  mkdirSync(join(repo, 'configs'), { recursive: true });
  writeFileSync(join(repo, 'configs', 'run.yaml'), `train: {steps: 60, save_every: 20, out_dir: "${out}"}\n`);
  const pf = join(root, 'p.yaml');
  writeFileSync(
    pf,
    `profiles:\n  real-ish:\n    trainer: nsa-vibe\n    repo: ${repo}\n    command: [${JSON.stringify(PY)}, -u, ${JSON.stringify(FAKE)}]\n    config: configs/run.yaml\n    procs: 1\n    env: { FAKE_STEP_MS: 30, FAKE_CRASH_RESUMED_AT: 25 }\n    restart: { max_restarts: 1, backoff_s: 0.2, backoff_factor: 1 }\n`,
  );
  const r = await launchRun(host, { profile: 'real-ish', profilesFile: pf, cwd: root });
  assert.equal((await finished(r.runDir)).state, 'exited', 'segment 0 ran its 60 steps');
  // segment 1: resumed from step 60, restarts at step 1, writes checkpoint_step20.pt, crashes at 25;
  // the supervisor restarts it (segment 2) — from which file?
  const rl = await relaunch(host, r.runDir, await currentActor(host), {
    removeStaleHalt: false,
    allowCommand: ['python3'], // the stand-in is not named train_showcase.py
  });
  assert.equal(rl.result, 'ok', rl.detail);
  assert.match(rl.detail, /resuming from .*checkpoint_step60\.pt/);
  const st = await finished(r.runDir);
  assert.equal(st.state, 'failed', 'the resumed run crashed twice: its one restart is used up');
  const log = readFileSync(join(r.runDir, 'train.log'), 'utf8');
  const resumes = [...log.matchAll(/\[nsa-top supervisor\] \S+ resuming from (\S+) \(step (\d+)\): (.*)/g)];
  assert.equal(resumes.length, 2, log.slice(-3000));
  assert.equal(resumes[1]![1], join(out, 'checkpoint_step20.pt'), 'the restart resumes from the newest weights');
  assert.match(resumes[1]![3]!, /checkpoint_step60\.pt has a higher step but segment #0 wrote it earlier/);
  assert.match(log, /\[train\] resumed from .*checkpoint_step20\.pt/);
});
