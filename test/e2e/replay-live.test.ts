// The journal's promise, end to end on one live reference run: a hang on rank 1 watched by the
// cockpit in a pane of an isolated tmux server (its own socket, no config), a stack dump, a halt and
// a relaunch (the CLI's audited commands). The pane is captured during the live stall; then
// `nsa-top replay RUN --at <that moment>` in a pane of the same size draws the same header and the
// same alert text (ages and the ×-ratio that grows with them ignored, and the REPLAY tag); the
// journal's markers list the dump, the halt and the relaunch; and the bundle's README tells the
// hang, the dump, the halt and the relaunch in that order.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { journalSource } from '../../src/journal/index.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { resolveRunDirsAt } from '../../src/trainer/run/rundir.js';
import { killRecorded, runPids } from './cleanup.js';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';

const T = isolatedTmux('nsa-top-replay-live-', 'the live replay test');
const { tmp, env: ENV, tmux, skip: noTmux } = T;
const RUN = join(tmp, 'run');

/** every process this test started: the hand-started trainer, its ranks, the relaunch's supervisor and ranks */
function ours(): { pid: number; startTime: string | null }[] {
  const sup = join(RUN, '.nsa-top', 'supervised');
  const dirs = existsSync(sup) ? readdirSync(sup).map((d) => join(sup, d)) : [];
  return [RUN, ...dirs].flatMap((d) => runPids(d));
}
let started: { pid: number; startTime: string | null }[] = [];
let stopTrainer = () => {};

after(() => {
  killRecorded([...started, ...ours()]);
  stopTrainer();
  T.close();
});

const capture = (t: string) => tmux('capture-pane', '-p', '-t', t).replace(/\n$/, '').split('\n');

async function until(what: string, t: string, check: (rows: string[]) => boolean, ms = 60_000): Promise<string[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const rows = capture(t);
    if (check(rows)) return rows;
    if (Date.now() > deadline) assert.fail(`${what}\n--- pane ---\n${rows.join('\n')}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** a line as compared: ages ("4s", "1.7s ago", "2m"), the ratio that grows with them and the REPLAY tag out */
const norm = (l: string) =>
  l
    .replace(/REPLAY \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+/, '')
    .replace(/\d+(\.\d+)?× /g, 'N× ')
    .replace(/\b\d+(\.\d+)?(ms|s|m|h)\b/g, 'AGE')
    .replace(/\s+/g, ' ')
    .trim();
/** the alerts the pane shows: each `CRIT …`/`WARN …` line of the Alerts panel, as compared */
const alertLines = (rows: string[]) =>
  rows.flatMap((r) => [...r.matchAll(/│((CRIT|WARN|INFO) [^│]*)│/g)].map((m) => norm(m[1]!))).sort();

function nsaTop(...args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: ENV, cwd: tmp, timeout: 60_000 });
}

test(
  'live hang in tmux → dump → halt → relaunch; replay --at the stall draws its header and alerts; markers and bundle tell it in order',
  { skip: noTmux, timeout: 240_000 },
  async () => {
    mkdirSync(RUN);
    const trainer = spawn(
      process.execPath,
      [BIN, 'train', '--out', RUN, '--ranks', '2', '--steps', '3000', '--log-every', '5', '--save-every', '5'].concat([
        '--inject',
        'hang@step=12,rank=1',
      ]),
      { cwd: tmp, stdio: 'ignore', env: { ...ENV, NSA_HEARTBEAT_EVERY: '1' } },
    );
    const deadline = Date.now() + 60_000;
    while (!existsSync(join(RUN, 'heartbeat_rank1.jsonl'))) {
      if (Date.now() > deadline) assert.fail('no heartbeat from the trainer');
      await new Promise((r) => setTimeout(r, 150));
    }
    started = ours();
    stopTrainer = () => {
      if (trainer.exitCode === null) trainer.kill('SIGKILL');
    };
    // the cockpit, with a short stall floor (NSA_WATCH_* are honoured) so the hang shows in seconds
    const W = ['-x', '160', '-y', '45'];
    tmux(
      'new-session',
      '-d',
      '-s',
      'live',
      ...W,
      '--',
      'env',
      'NSA_WATCH_HEARTBEAT_STALL_S=3',
      process.execPath,
      BIN,
      RUN,
    );
    tmux('set-option', '-t', 'live', 'remain-on-exit', 'on');
    await until(
      'the live cockpit STALLED with critical alerts',
      'live:0',
      (r) => /^ STALLED /.test(r[0] ?? '') && r.some((l) => /│CRIT /.test(l)),
    );
    // the moment compared is one where the pane holds still: while the stall settles, each rank's
    // heartbeat goes silent on its own tick, and a frame observed (and journalled) just before the
    // capture may be drawn just after it. A capture counts when the pane, 0.6 s later (past any
    // draw of what was observed by then), shows the same header and alerts.
    const { rows: stalled, at } = await (async () => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const rows = capture('live:0');
        const at = Date.now();
        await new Promise((r) => setTimeout(r, 600));
        const later = capture('live:0');
        const same = (a: string[], b: string[]) =>
          norm(a[0] ?? '') === norm(b[0] ?? '') && JSON.stringify(alertLines(a)) === JSON.stringify(alertLines(b));
        if (/^ STALLED /.test(rows[0] ?? '') && same(rows, later)) return { rows, at };
        if (Date.now() > deadline) assert.fail(`the stalled pane never held still\n${later.join('\n')}`);
      }
    })();

    // a stack dump of every rank names rank 1; a halt; the ranks go; a relaunch from the checkpoint
    const d = nsaTop('dump', RUN);
    assert.equal(d.status, 0, d.stderr + d.stdout);
    await until('the culprit named', 'live:0', (r) => /^ STALLED .*rank 1/.test(r[0] ?? ''));
    const h = nsaTop('halt', RUN);
    assert.equal(h.status, 0, h.stderr + h.stdout);
    // the hung rank never reads .HALT: this test stops the ranks it started (verified pids)
    const ranks = ours();
    killRecorded(ranks);
    stopTrainer();
    // reaped, not only killed (a zombie is still a process to the relaunch's preflight)
    const gone = Date.now() + 30_000;
    while (ranks.some((p) => existsSync(`/proc/${p.pid}`))) {
      if (Date.now() > gone) assert.fail(`the ranks did not go: ${JSON.stringify(ranks)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await until('the live cockpit HALTED', 'live:0', (r) => /^ (HALTED|STOPPED|CRASHED|DEAD)\b/.test(r[0] ?? ''));
    const re = nsaTop('relaunch', RUN, '--remove-stale-halt', '--yes');
    assert.equal(re.status, 0, re.stderr + re.stdout);
    started = started.concat(ours());
    await until('the relaunch running', 'live:0', (r) => /^ RUNNING /.test(r[0] ?? ''));
    started = started.concat(ours());
    // the cockpit has recorded the relaunch and the new segment (its journal is flushed every 2 s)
    const journal = join(RUN, '.nsa-top', 'journal.jsonl');
    await until('the relaunch in the journal', 'live:0', () => {
      const j = readFileSync(journal, 'utf8');
      return /"k":"action","rec":\{[^\n]*"action":"relaunch"/.test(j) && /"k":"restart"/.test(j);
    });
    tmux('send-keys', '-t', 'live:0', '-l', 'q');
    await until(
      'the cockpit quit (its journal flushed)',
      'live:0',
      () => tmux('display-message', '-p', '-t', 'live:0', '#{pane_dead}').trim() === '1',
    );

    // the replay at the moment of the capture, in a pane of the same size
    const iso = new Date(at).toISOString();
    tmux('new-session', '-d', '-s', 'replay', ...W, '--', process.execPath, BIN, 'replay', RUN, '--at', iso);
    const replayed = await until(
      'the replay at the stall',
      'replay:0',
      (r) => /^ STALLED +REPLAY /.test(r[0] ?? '') && r.some((l) => /│CRIT /.test(l)),
      30_000,
    );
    assert.equal(norm(replayed[0]!), norm(stalled[0]!), 'the header as it was');
    assert.deepEqual(alertLines(replayed), alertLines(stalled), 'the alerts as they were');
    tmux('send-keys', '-t', 'replay:0', '-l', 'q');

    // the timeline's markers: the stall, the dump, the halt, the relaunch, in that order
    const host = new LocalHost();
    const src = await journalSource(host, await resolveRunDirsAt(host, RUN));
    assert.ok(src, 'the cockpit recorded a journal');
    const first = (kind: string, re: RegExp) => {
      const m = src.markers.find((x) => x.kind === kind && re.test(x.label));
      assert.ok(m, `a ${kind} marker ${re}: ${JSON.stringify(src.markers.map((x) => `${x.kind} ${x.label}`))}`);
      return m.at;
    };
    const stall = first('state', /→ STALLED/);
    const dump = first('dump', /^stack dump rank 1/);
    const halt = first('action', /^halt by /);
    const relaunch = first('action', /^relaunch by /);
    const restart = first('restart', /^segment 1 /);
    assert.ok(stall <= dump && dump <= halt && halt <= relaunch && relaunch <= restart);

    // the bundle's story, in order
    const out = join(tmp, 'b.tar.gz');
    const b = nsaTop('bundle', RUN, '-o', out);
    assert.equal(b.status, 0, b.stderr);
    const x = join(tmp, 'x');
    mkdirSync(x);
    assert.equal(spawnSync('tar', ['-xzf', out, '-C', x]).status, 0);
    const md = readFileSync(join(x, 'README.md'), 'utf8');
    const told = md.split('## What happened, in order')[1]!.split('\n## ')[0]!.split('\n');
    const idx = (re: RegExp) => {
      const i = told.findIndex((l) => re.test(l));
      assert.ok(i >= 0, `${re} in the README's story:\n${told.join('\n')}`);
      return i;
    };
    assert.ok(idx(/CRITICAL raised: /) < idx(/DUMP rank 1: /), 'the critical alerts of the stall before the dump');
    const order = [
      idx(/STATE RUNNING → STALLED/),
      idx(/DUMP rank 1: /),
      idx(/STATE STALLED → STALLED \(culprit rank 1\)/),
      idx(/ACTION halt by /),
      idx(/ACTION relaunch by /),
    ];
    assert.deepEqual(
      [...order].sort((p, q) => p - q),
      order,
      told.join('\n'),
    );
  },
);
