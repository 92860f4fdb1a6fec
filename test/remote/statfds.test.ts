// /proc/PID/stat kept open between rounds (src/remote/local/statfds.ts) on a real process: each
// read through the kept fd says what a fresh open says now (a SIGSTOP is seen at the next read, not
// the first read's text again), a process gone is missing and its fd closed, and a pid no longer
// asked has its fd closed.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readlinkSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import { KeptProcFile, ProcStatFds } from '../../src/remote/local/statfds.js';
import { parseStat } from '../../src/remote/procs.js';

const linux = process.platform === 'linux';

async function waitFor<T>(what: string, f: () => T | null | undefined | false, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** this process's fds open on /proc/<pid>/<file> (pid '': the host's own /proc/<file>) */
function openOn(pid: number | '', file: string): number {
  const want = pid === '' ? `/proc/${file}` : `/proc/${pid}/${file}`;
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === want) n++;
    } catch {
      /* the readdir's own fd, gone */
    }
  }
  return n;
}

test(
  'a kept /proc/PID/stat reads what a fresh open reads, each time; a process gone is missing, its fd closed',
  { skip: !linux && 'needs /proc (Linux)' },
  async () => {
    const kid: ChildProcess = spawn('sleep', ['60'], { stdio: 'ignore' });
    const pid = kid.pid!;
    const fds = new ProcStatFds();
    try {
      const fresh = () => parseStat(readFileSync(`/proc/${pid}/stat`, 'latin1').trim())!;
      const kept = () => parseStat(fds.lines([pid]).get(pid) ?? '');
      const first = kept()!;
      assert.equal(first.pid, pid);
      assert.equal(first.startTime, fresh().startTime);
      assert.equal(fds.open, 1, 'its fd is kept');
      assert.equal(openOn(pid, 'stat'), 1);
      // a pid asked twice, and a pid with no process: one fd, nothing for the missing one
      const both = fds.lines([pid, pid, 2 ** 22 + 7]);
      assert.deepEqual([...both.keys()], [pid]);
      assert.equal(fds.open, 1);

      // the kernel renders the file again on every read through the kept fd
      process.kill(pid, 'SIGSTOP');
      await waitFor('the stop, through the kept fd', () => kept()?.state === 'T');
      assert.equal(fresh().state, 'T');
      assert.equal(openOn(pid, 'stat'), 1, 'still the one kept fd, not a new open each read');
      process.kill(pid, 'SIGCONT');
      await waitFor('running again, through the kept fd', () => kept()?.state !== 'T');

      // dead and reaped: missing, and the fd closed
      kid.kill('SIGKILL');
      await waitFor('reaped', () => kid.exitCode !== null || kid.signalCode !== null);
      await waitFor('gone from /proc', () => {
        try {
          readFileSync(`/proc/${pid}/stat`);
          return false;
        } catch {
          return true;
        }
      });
      assert.equal(fds.lines([pid]).has(pid), false, 'a process gone is missing');
      assert.equal(fds.open, 0, 'and its fd closed');

      // a pid no longer asked: its fd closed
      const other = new ProcStatFds('wchan');
      other.lines([process.pid]);
      assert.equal(other.open, 1);
      assert.equal(openOn(process.pid, 'wchan'), 1);
      other.lines([]);
      assert.equal(other.open, 0);
      assert.equal(openOn(process.pid, 'wchan'), 0, 'closed when no longer asked');
    } finally {
      if (kid.exitCode === null && kid.signalCode === null) kid.kill('SIGKILL');
      fds.close();
    }
  },
);

test(
  "a host /proc file kept open is rendered afresh at every read: /proc/stat's CPU ticks move on",
  { skip: !linux && 'needs /proc (Linux)' },
  async () => {
    const f = new KeptProcFile('/proc/stat');
    const buf = Buffer.alloc(1024);
    const ticks = () => {
      const line = f.read(buf, 1024)!.split('\n')[0]!;
      assert.match(line, /^cpu /);
      return line
        .trim()
        .split(/\s+/)
        .slice(1)
        .reduce((a, x) => a + Number(x), 0);
    };
    try {
      const t0 = ticks();
      assert.equal(openOn('', 'stat'), 1, 'one fd kept on /proc/stat');
      await waitFor('the CPU ticks to move on', () => ticks() > t0);
      assert.equal(openOn('', 'stat'), 1, 'and no new one per read');
      assert.equal(new KeptProcFile('/proc/no-such-file').read(buf, 1024), null);
    } finally {
      f.close();
    }
    assert.equal(openOn('', 'stat'), 0, 'closed');
  },
);
