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
import { killRecorded, recordPids, runPids } from './cleanup.js';
import { BIN } from './pty.js';
import { isolatedTmux } from './tmuxserver.js';

const T = isolatedTmux('nsa-top-hangup-', 'the hung-up terminal test');
const RUN = join(T.tmp, 'run');
let stopTrainer = () => {};
/** the cockpit and the replay under test, by pid and start time: one that failed to end is not left running */
const programs: { pid: number; startTime: string | null }[] = [];
after(() => {
  killRecorded(programs);
  killRecorded(runPids(RUN));
  stopTrainer();
  T.close();
});

test(
  'the terminal hangs up under the cockpit, then under a replay (with and without a SIGHUP): each quits as on q (the journal closed, its lock released) and exits 0, not by an abort',
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
    for (const until = Date.now() + 60_000; !existsSync(join(RUN, 'heartbeat_rank0.jsonl'));)
      if (Date.now() > until) assert.fail('no heartbeat from the trainer');
      else await new Promise((r) => setTimeout(r, 150));
    /** runs `args` in a pane of a fresh tmux server, waits for `ready`, kills the server (the pty
     * hangs up) and returns the program's exit code. The hangup's SIGHUP goes to the session's
     * leader, a shell that ignores it only to write that code down: the program meets the hung-up
     * terminal through its writes (and, with `sighup`, the SIGHUP as well). */
    const hungUp = async (name: string, args: string[], ready: () => boolean, sighup = false): Promise<string> => {
      const rc = join(T.tmp, `${name}.rc`);
      const shell = `trap '' HUP; "${process.execPath}" "${BIN}" ${args.map((a) => `"${a}"`).join(' ')}; echo $? > "${rc}"`;
      T.tmux('new-session', '-d', '-s', name, ...['-x', '120', '-y', '40'], '--', 'sh', '-c', shell);
      await T.until(`the ${name} on screen`, `${name}:0`, (rows) =>
        /^ [A-Z]{4,} /.test(rows[0] ?? '') && ready() ? null : 'no header',
      );
      const shellPid = Number(T.tmux('display-message', '-p', '-t', `${name}:0`, '#{pane_pid}').trim());
      // the program: the shell's child
      const program = readFileSync(`/proc/${shellPid}/task/${shellPid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      programs.push(...recordPids(program));
      T.tmux('kill-server');
      // under an SSH login shell, which dies of the hangup, the kernel also sends SIGHUP to the
      // program in the foreground: sent here by hand to the shell's child (the program, by its pid)
      if (sighup) for (const pid of program) process.kill(pid, 'SIGHUP');
      const deadline = Date.now() + 30_000;
      while (!(existsSync(rc) && readFileSync(rc, 'utf8').trim())) {
        if (Date.now() > deadline) assert.fail(`the ${name} did not end after its terminal hung up`);
        await new Promise((r) => setTimeout(r, 100));
      }
      return readFileSync(rc, 'utf8').trim();
    };
    const lock = join(RUN, '.nsa-top', 'journal.lock');
    assert.equal(
      await hungUp('cockpit', [RUN], () => existsSync(lock)),
      '0',
      'the cockpit ended with its own exit code',
    );
    assert.ok(!existsSync(lock), 'the journal was closed and its lock released');
    // the replay of what it recorded, hung up with the SIGHUP a login shell's death sends
    assert.equal(
      await hungUp('replay', ['replay', RUN], () => true, true),
      '0',
      'the replay ended with its own exit code',
    );
    // and with no SIGHUP at all (started under nohup, or a shell that ignores it): a replay that has
    // drawn its journal writes nothing more, so no write fails either; it looks at its terminal
    assert.equal(
      await hungUp('replay-quiet', ['replay', RUN], () => true, false),
      '0',
      'the replay, with no SIGHUP and nothing to draw, still ended with its own exit code',
    );
  },
);
