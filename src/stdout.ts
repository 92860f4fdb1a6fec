// What a one-shot command prints, written to fd 1 at once (writeSync): `status` never builds
// process.stdout, whose stream (net or tty, and node:stream under them) is ~10 ms of a ~200 ms
// status through a pipe. A reader that has gone (EPIPE: `nsa-top status | head -1`) drops the rest
// quietly and the command keeps its own exit code (what cli.ts's handler does for process.stdout);
// a descriptor that would block (EAGAIN: one its opener made non-blocking) gets the rest through
// process.stdout, which waits for it.
import { writeSync } from 'node:fs';

let gone = false;

export function writeStdout(text: string | Buffer): void {
  if (gone || text.length === 0) return;
  const buf = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') {
        gone = true;
        return;
      }
      if (code !== 'EAGAIN') throw e;
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EPIPE') throw err;
      });
      process.stdout.write(buf.subarray(off));
      return;
    }
  }
}
