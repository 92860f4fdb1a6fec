// The terminal goes away under the cockpit, as when the SSH link to the training box drops: the pty
// is hung up, and every write to it fails with EIO. The cockpit quits as it does on `q` (an action
// under way finishes and is logged, the journal is closed and its lock released) and exits with its
// own code. It used to die on its first frame after the hangup (the EIO was thrown), or, quitting on
// the SIGHUP, to abort in Node 20's exit, which restores the terminal it started on and asserts when
// that fails (nodejs/node#51519): SIGABRT, and a core file where the system keeps them.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killRecorded, runPids } from './cleanup.js';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';

const T = isolatedTmux('nsa-top-hangup-', 'the hung-up terminal test');
const RUN = join(T.tmp, 'run');
let stopTrainer = () => {};
after(() => {
  killRecorded(runPids(RUN));
  stopTrainer();
  T.close();
});

test(
  'the terminal hangs up under the cockpit: it quits as on q (journal closed, its lock released) and exits 0, not by an abort',
  { skip: T.skip, timeout: 90_000 },
  async () => {
    // a live reference run (the cockpit records the journal of a run it watches live)
    const trainer = spawn(
      process.execPath,
      [BIN, 'train', '--out', RUN, '--ranks', '2', '--steps', '3000', '--log-every', '5', '--save-every', '0'],
      { cwd: T.tmp, stdio: 'ignore', env: T.env },
    );
    stopTrainer = () => {
      if (trainer.exitCode === null) trainer.kill('SIGKILL');
    };
    const rc = join(T.tmp, 'rc');
    // the hangup's SIGHUP goes to the session's leader, this shell, which ignores it only to write
    // down how the cockpit ended; the cockpit meets the hung-up terminal through its writes
    const shell = `trap '' HUP; "${process.execPath}" "${BIN}" "${RUN}"; echo $? > "${rc}"`;
    T.tmux('new-session', '-d', '-s', 'c', ...['-x', '120', '-y', '40'], '--', 'sh', '-c', shell);
    await T.until('the cockpit on screen', 'c:0', (rows) => (/^ [A-Z]{4,} /.test(rows[0] ?? '') ? null : 'no header'));
    const lock = join(RUN, '.nsa-top', 'journal.lock');
    for (const until = Date.now() + 15_000; !existsSync(lock); await new Promise((r) => setTimeout(r, 100)))
      if (Date.now() > until) assert.fail('the cockpit does not record the journal (no lock)');
    T.tmux('kill-server');
    const deadline = Date.now() + 30_000;
    while (!(existsSync(rc) && readFileSync(rc, 'utf8').trim())) {
      if (Date.now() > deadline) assert.fail('the cockpit did not end after its terminal hung up');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(readFileSync(rc, 'utf8').trim(), '0', 'the cockpit ended with its own exit code');
    assert.ok(!existsSync(lock), 'the journal was closed and its lock released');
  },
);
