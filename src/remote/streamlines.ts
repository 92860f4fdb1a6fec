// Line splitting for the stdout/stderr of a long-lived command (nvidia-smi -lms, remote loops),
// bounded: a command that never prints a newline must cost at most `maxLine` bytes of memory
// (one such nvidia-smi grew a readline buffer to ~1.2 GB and crashed the cockpit with
// "RangeError: Invalid string length"). The splitting is the run readers' LineSplitter (the same
// bound, the same drop-to-next-newline); this adapts it to a stream's callbacks.
import { LineSplitter, type LineCallbacks } from '../lines.js';

export const STREAM_MAX_LINE = 64 * 1024;

export class StreamLines {
  private readonly split: LineSplitter;
  private readonly cb: LineCallbacks;

  /** onOverflow(maxLine): a line longer than the cap was dropped up to its newline */
  constructor(
    onLine: (line: string) => void,
    onOverflow: (bytes: number) => void = () => {},
    maxLine = STREAM_MAX_LINE,
  ) {
    this.split = new LineSplitter(maxLine);
    this.cb = { line: onLine, error: () => onOverflow(maxLine) };
  }

  push(b: Buffer): void {
    this.split.push(b, this.cb);
  }

  /** the stream ended: a last line without newline still counts */
  end(): void {
    this.split.flushPartial(this.cb);
  }
}
