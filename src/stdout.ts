// What a one-shot command prints, written to fd 1 at once (writeSync): `status` never builds
// process.stdout, whose stream (net or tty, and node:stream under them) is ~10 ms of a ~200 ms
// status through a pipe. A reader that has gone (EPIPE: `nsa-top status | head -1`; EIO: a terminal
// hung up, its SSH link dropped) drops the rest quietly and the command keeps its own exit code
// (what cli.ts's handler does for process.stdout);
// a descriptor that would block (EAGAIN: one its opener made non-blocking) gets the rest through
// process.stdout, which waits for it.
import { closeSync, fstatSync, openSync, writeSync } from 'node:fs';
import { tty } from './builtins.js';

let gone = false;

/** The write error of an output whose reader has gone: a closed pipe (EPIPE), a terminal hung up
 *  (EIO: an SSH link dropped under it), or the stream already ended for one of those. */
export function readerGone(code: string | undefined): boolean {
  return code === 'EPIPE' || code === 'EIO' || code === 'ERR_STREAM_DESTROYED';
}

export function writeStdout(text: string | Buffer): void {
  if (gone || text.length === 0) return;
  const buf = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (readerGone(code)) {
        gone = true;
        return;
      }
      if (code !== 'EAGAIN') throw e;
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (!readerGone(err.code)) throw err;
      });
      process.stdout.write(buf.subarray(off));
      return;
    }
  }
}

/**
 * For a command that outlived its terminal's hangup on purpose (an SSH link dropped: stop's
 * escalation goes on), just before it exits: its stdio descriptors that are terminals are moved
 * onto /dev/null. Node 20 restores the terminal it started on at exit and aborts when the terminal
 * has gone (tcsetattr fails with EIO: nodejs/node#51519, fixed in later Node); it leaves a
 * descriptor that is no longer the file it started with alone. Only once no other I/O is in flight:
 * each number is closed and /dev/null opened at once, which takes the lowest free number (that one).
 */
export function releaseHungUpTerminal(): void {
  for (const fd of [0, 1, 2]) {
    try {
      if (!fstatSync(fd).isCharacterDevice()) continue;
      closeSync(fd);
      const got = openSync('/dev/null', fd === 0 ? 'r' : 'w');
      // another number: fd was not the lowest free one (leave the rest as they are)
      if (got !== fd) {
        closeSync(got);
        return;
      }
    } catch {
      /* a descriptor already closed, or /dev/null missing: nothing more to do */
    }
  }
}

/**
 * A command and its terminal's hangup (an SSH link dropped): SIGHUP, or its output failing as to a
 * gone reader when no SIGHUP reaches it, calls `onHangUp` once (the cockpit and a replay quit; the
 * stop's escalation goes on — SIGHUP no longer ends it). `stopListening` when that part is over;
 * `release` last, after what is finished on the way out (an escalation, an action under way, the
 * journal): after a hangup it moves the dead terminal off stdio (above).
 *
 * `probeMs`: for a command that may sit without writing (a paused replay), neither sign may come:
 * no write fails, and a shell that ignores SIGHUP (`nohup`, `trap '' HUP`) passes the ignoring on.
 * Every `probeMs` it asks whether each output that was a terminal still is one: a hung-up terminal
 * answers no (its ioctls fail with EIO; seen in tmux after kill-server: true, then false within the
 * next look). One ioctl a look; the timer does not keep the process alive.
 */
export function watchHangUp(
  outs: (NodeJS.WriteStream & { fd?: number })[],
  onHangUp: () => void = () => {},
  o: { probeMs?: number } = {},
): { stopListening(): void; release(): void } {
  let hungUp = false;
  const hangUp = () => {
    if (hungUp) return;
    hungUp = true;
    onHangUp();
  };
  const onOutError = (e: NodeJS.ErrnoException) => {
    if (readerGone(e.code)) hangUp();
  };
  process.on('SIGHUP', hangUp);
  for (const out of outs) out.on('error', onOutError);
  const ttys = outs.flatMap((out) => (out.isTTY && out.fd !== undefined ? [out.fd] : []));
  const probe =
    o.probeMs && ttys.length
      ? setInterval(() => {
          if (ttys.some((fd) => !tty().isatty(fd))) hangUp();
        }, o.probeMs).unref()
      : null;
  return {
    stopListening() {
      process.off('SIGHUP', hangUp);
      for (const out of outs) out.off('error', onOutError);
      if (probe) clearInterval(probe);
    },
    release() {
      if (hungUp) releaseHungUpTerminal();
    },
  };
}
