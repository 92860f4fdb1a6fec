// One line on the alternate screen while the cockpit is not up yet: over SSH the operator sees
// "connecting to HOST…" the moment nsa-top starts (before Ink, React and the SSH stack load, and
// the handshake), then "reading N files…"; the cockpit's first frame paints over it. Tiny and
// free of imports on purpose: cli.ts writes the first line before it loads the cockpit's chunk.
const ALT_ON = '\x1b[?1049h\x1b[H\x1b[?25l';
const ALT_OFF = '\x1b[?25h\x1b[?1049l';

let on = false;
const restore = () => process.stdout.write(ALT_OFF);

/**
 * Shows `text` on the top row of the alternate screen (a terminal only); null leaves the alternate
 * screen, so an error (a failed connect) is printed on the normal screen where it stays.
 */
export function progressLine(text: string | null): void {
  if (!process.stdout.isTTY) return;
  if (text === null) {
    if (on) restore();
    process.off('exit', restore);
    on = false;
    return;
  }
  if (!on) process.once('exit', restore);
  // a host or path is data: no control character reaches the terminal
  process.stdout.write(`${on ? '' : ALT_ON}\x1b[H\x1b[2K nsa-top: ${text.replace(/[\x00-\x1f\x7f]/g, '?')}`);
  on = true;
}
