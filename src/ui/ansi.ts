// Lines → ANSI strings (SGR only). One string per screen row keeps Ink's tree tiny: a frame is
// rows − 1 <Text> elements, whatever the panels contain.
import { boldOf, colorOf } from './palette.js';
import { sanitize } from '../sanitize.js';
import type { Line } from './text.js';

const SGR: Record<string, number> = {
  red: 31,
  green: 32,
  yellow: 33,
  blue: 34,
  magenta: 35,
  cyan: 36,
  white: 37,
  gray: 90,
};

export function lineToAnsi(line: Line, noColor: boolean): string {
  let out = '';
  for (const s of line) {
    const c = colorOf(s.role, noColor);
    const codes: number[] = [];
    if (c) codes.push(SGR[c]!);
    if (s.bold || boldOf(s.role)) codes.push(1);
    if (s.role === 'dim' && noColor) codes.push(2);
    if (s.inverse) codes.push(7);
    // a last line of defence for segments not made with t(): only nsa-top's own SGR codes pass
    const text = sanitize(s.text);
    out += codes.length ? `\x1b[${codes.join(';')}m${text}\x1b[0m` : text;
  }
  return out;
}

export function linesToAnsi(lines: Line[], noColor: boolean): string {
  return lines.map((l) => lineToAnsi(l, noColor)).join('\n');
}
