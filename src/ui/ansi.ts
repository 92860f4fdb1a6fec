// Lines → ANSI strings (SGR only). One string per screen row keeps Ink's tree tiny: a frame is
// rows − 1 <Text> elements, whatever the panels contain.
import { boldOf, colorOf } from './palette.js';
import { sanitize } from '../sanitize.js';
import type { Line, Seg } from './text.js';

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

/** The SGR that opens a segment's style ('' for none), by role and attributes. */
function sgrOf(s: Seg, noColor: boolean): string {
  const c = colorOf(s.role, noColor);
  const codes: number[] = [];
  if (c) codes.push(SGR[c]!);
  if (s.bold || boldOf(s.role)) codes.push(1);
  if (s.role === 'dim' && noColor) codes.push(2);
  if (s.inverse) codes.push(7);
  return codes.length ? `\x1b[${codes.join(';')}m` : '';
}

// the painter writes every changed row every frame: the few styles a frame uses are worked out once
const sgrCache = new Map<string, string>();
function sgrCached(s: Seg, noColor: boolean): string {
  const key = `${s.role ?? ''}${s.bold ? 'b' : ''}${s.inverse ? 'i' : ''}${noColor ? 'n' : ''}`;
  let sgr = sgrCache.get(key);
  if (sgr === undefined) {
    sgr = sgrOf(s, noColor);
    sgrCache.set(key, sgr);
  }
  return sgr;
}

export function lineToAnsi(line: Line, noColor: boolean): string {
  let out = '';
  for (let i = 0; i < line.length; i++) {
    const s = line[i]!;
    const sgr = sgrCached(s, noColor);
    // a last line of defence for segments not made with t(): only nsa-top's own SGR codes pass
    const text = sanitize(s.text);
    out += sgr ? `${sgr}${text}\x1b[0m` : text;
  }
  return out;
}

export function linesToAnsi(lines: Line[], noColor: boolean): string {
  return lines.map((l) => lineToAnsi(l, noColor)).join('\n');
}
