// `nsa-top stop` on a run no supervisor carries (started by hand, or its supervisor died): the command
// carries the escalation itself — .HALT, SIGINT once .HALT has had its grace, SIGKILL after — where it
// used to write .HALT and leave a hung run hung ("nothing escalates it"). Real reference trainer, real
// signals; every step in actions.jsonl.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { start, tmp, TRAIN2, waitFor } from '../../checks/live-helpers.js';
import { isolatedTmux } from '../../e2e/tmuxserver.js';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'nsa-top.js');

function cli(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const actions = (dir: string) =>
  readFileSync(join(dir, '.nsa-top', 'actions.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { action: string; result: string; target: Record<string, unknown> });

function ranksAlive(dir: string): number[] {
  const j = JSON.parse(cli(['status', dir, '--json']).out) as { ranks: { pid: number | null }[] };
  return j.ranks
    .map((r) => r.pid)
    .filter((p): p is number => p !== null)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`NSA_TOP_RUN_DIR=${dir}`);
      } catch {
        return false;
      }
    });
}

/** after the link dropped: the stop exited 0, no rank lives, and its last steps were .HALT and SIGINT */
async function ranToItsEnd(
  trainer: { done: Promise<unknown> },
  dir: string,
  code: number | string | null,
  why: string,
) {
  // (bounded: a stop that died with the link leaves the hung trainer running until the test's cleanup)
  await Promise.race([trainer.done, new Promise((r) => setTimeout(r, 30_000))]);
  assert.equal(String(code), '0', why);
  assert.deepEqual(ranksAlive(dir), []);
  assert.deepEqual(
    actions(dir)
      .map((a) => `${a.action}:${a.result}`)
      .slice(-2),
    ['halt:ok', 'escalate-sigint:ok'],
  );
}

test('a hung run started by hand: stop escalates to SIGINT itself, counting the grace from the .HALT the ranks were given', async () => {
  const dir = tmp();
  const trainer = start(['train', '--out', dir, '--steps', '400', ...TRAIN2, '--inject', 'hang@step=15,rank=1']);
  await waitFor('the hang (status: STALLED)', () => cli(['status', dir]).out.includes('STATE     STALLED'), 90_000);
  // the operator wrote .HALT a while ago; a hung step never sees it
  assert.equal(cli(['halt', dir]).code, 0);
  await new Promise((r) => setTimeout(r, 3000));
  const t0 = Date.now();
  const stop = cli(['stop', dir, '--halt-grace', '2', '--sigint-grace', '5']);
  const took = Date.now() - t0;
  assert.equal(stop.code, 0, stop.out + stop.err);
  assert.match(stop.out, /^stop: \.HALT is [\d.]+s old \(grace 2s\): its grace is over$/m);
  assert.match(stop.out, /^stop: SIGINT ok: SIGINT sent to 2\/2 ranks/m);
  assert.match(stop.out, /^stop ok: every rank on local stopped \(sigint\)/m);
  assert.doesNotMatch(stop.out, /nothing escalates it/);
  assert.ok(took < 20_000, `SIGINT at once, not after another grace (${took} ms)`);
  await trainer.done;
  assert.deepEqual(ranksAlive(dir), []);
  const acts = actions(dir).map((a) => `${a.action}:${a.result}`);
  assert.deepEqual(acts.slice(-3), ['halt:ok', 'halt:ok', 'escalate-sigint:ok']);
  const st = cli(['status', dir]);
  assert.match(st.out, /STATE {5}HALTED — stopped by SIGINT at step 15 of 400/);
});

test('a healthy run started by hand: stop writes .HALT, the ranks leave on their own, nothing is signalled', async () => {
  const dir = tmp();
  const trainer = start(['train', '--out', dir, '--steps', '2000', ...TRAIN2]);
  await waitFor('a running run', () => cli(['status', dir]).out.includes('STATE     RUNNING'), 90_000);
  const stop = cli(['stop', dir, '--halt-grace', '30', '--json']);
  assert.equal(stop.code, 0, stop.out + stop.err);
  const j = JSON.parse(stop.out) as { result: string; detail: string; steps: { action: string }[] };
  assert.equal(j.result, 'ok');
  assert.match(j.detail, /^every rank on local stopped \(\.HALT\) in [\d.]+ s$/);
  assert.deepEqual(
    j.steps.map((s) => s.action),
    ['halt'],
  );
  await trainer.done;
  assert.ok(!actions(dir).some((a) => a.action.startsWith('escalate')), 'no signal sent');
});

test('the SSH link drops mid-stop (SIGHUP, its output closed): the escalation goes on and SIGINTs the hung ranks', async () => {
  const dir = tmp();
  const trainer = start(['train', '--out', dir, '--steps', '400', ...TRAIN2, '--inject', 'hang@step=15,rank=1']);
  await waitFor('the hang (status: STALLED)', () => cli(['status', dir]).out.includes('STATE     STALLED'), 90_000);
  const stop = spawn(process.execPath, [BIN, 'stop', dir, '--halt-grace', '4', '--sigint-grace', '5'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  stop.stdout!.on('data', (b) => (out += b));
  await waitFor('the stop waiting out its grace', () => /waiting up to 4 s/.test(out), 20_000);
  // the terminal goes: nobody reads its output any more, and the session hangs it up
  stop.stdout!.destroy();
  stop.stderr!.destroy();
  stop.kill('SIGHUP');
  const code = await new Promise<number | null>((r) => stop.on('exit', (c) => r(c)));
  await ranToItsEnd(trainer, dir, code, 'the stop ran to its end');
});

// A real terminal, as an SSH session gives one: when the link drops, the pty is hung up — SIGHUP,
// and from then on every write to it fails with EIO (not EPIPE, as a closed pipe does). Live on the
// real trainer, the stop's first line after the hangup (its SIGINT) was an uncaught EIO: the stop
// died there, and a rank that ignored SIGINT would never have had its SIGKILL.
const T = isolatedTmux('nsa-top-stop-hup-', 'the hung-up terminal stop test');
after(() => T.close());

test(
  'the SSH link drops mid-stop in a real terminal (its pty hung up: EIO on every write): the stop still runs to its end',
  { skip: T.skip },
  async () => {
    const dir = tmp();
    const trainer = start(['train', '--out', dir, '--steps', '400', ...TRAIN2, '--inject', 'hang@step=15,rank=1']);
    await waitFor('the hang (status: STALLED)', () => cli(['status', dir]).out.includes('STATE     STALLED'), 90_000);
    // the hangup's SIGHUP goes to the session's leader, this shell, which ignores it only to write
    // down how the stop ended; the stop meets what a hung-up terminal does to its writes (EIO) and
    // to node's exit. (The SIGHUP itself, which an SSH login shell passes on: the test above.)
    const rc = join(T.tmp, 'stop.rc');
    T.tmux(
      'new-session',
      '-d',
      '-s',
      'stop',
      '-x',
      '120',
      '-y',
      '30',
      '--',
      'sh',
      '-c',
      `trap '' HUP; "${process.execPath}" "${BIN}" stop "${dir}" --halt-grace 4 --sigint-grace 5; echo $? > "${rc}"`,
    );
    await T.until('the stop waiting out its grace', 'stop:0', (rows) =>
      rows.some((l) => /waiting up to 4 s/.test(l)) ? null : 'no "waiting up to 4 s" yet',
    );
    // the terminal goes: its server ends, the pty is hung up under the stop
    T.tmux('kill-server');
    const code = await waitFor(
      'the stop to end',
      () => (existsSync(rc) ? readFileSync(rc, 'utf8').trim() || null : null),
      40_000,
    );
    await ranToItsEnd(trainer, dir, code, 'the stop ran to its end (not killed by a write to the hung-up terminal)');
  },
);
