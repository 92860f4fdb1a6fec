// Raw input → one key at a time, in order. Ink's input parser splits escape sequences from text but
// hands a run of plain characters over as one string ("jjjjj", five Tabs, "gG" from a fast typist,
// a paste, a laggy SSH link flushing several keys at once), which a key table matching one key would
// drop whole. `KeyReader.read` turns each of Ink's (input, key) into the keys it carries, each with
// the flags Ink gives that character alone, and picks out the terminal's mouse reports (SGR 1006:
// `ESC [ < b ; x ; y M|m`), which must never reach a key table or a dialog's typed answer.
// Pure: no terminal here; the cockpit command turns mouse reporting on and off (MOUSE_ON / MOUSE_OFF).
import type { Key } from 'ink';

/** SGR mouse reporting: button presses and releases (1000), reported as SGR (1006) — coordinates of any size */
export const MOUSE_ON = '\x1b[?1000h\x1b[?1006h';
/** and off again: written on quit, on a signal, on a crash (the process's exit hook) and before a suspend */
export const MOUSE_OFF = '\x1b[?1006l\x1b[?1000l';

export interface MouseEvent {
  /** 1-based cell, as the terminal reports it */
  x: number;
  y: number;
  kind: 'press' | 'release' | 'wheel-up' | 'wheel-down';
  /** 0 left, 1 middle, 2 right (presses and releases) */
  button: number;
  shift: boolean;
  meta: boolean;
  ctrl: boolean;
  /** a motion report (drag), only if a mode asking for them is on */
  motion: boolean;
}

export type InputEvent = { kind: 'key'; input: string; key: Partial<Key> } | { kind: 'mouse'; mouse: MouseEvent };

// Ink strips the escape in front of a sequence it does not know: the mouse report reaches useInput as "[<0;10;5M"
const SGR_MOUSE = /^\x1b?\[<(\d+);(\d+);(\d+)([Mm])$/;

/** An SGR mouse report, or null. */
export function parseMouse(input: string): MouseEvent | null {
  const m = SGR_MOUSE.exec(input);
  if (!m) return null;
  const b = Number(m[1]);
  const base = b & ~(4 | 8 | 16 | 32);
  const wheel = (b & 64) !== 0;
  return {
    x: Number(m[2]),
    y: Number(m[3]),
    kind: wheel ? ((base & 1) === 0 ? 'wheel-up' : 'wheel-down') : m[4] === 'M' ? 'press' : 'release',
    button: wheel ? -1 : base & 3,
    shift: (b & 4) !== 0,
    meta: (b & 8) !== 0,
    ctrl: (b & 16) !== 0,
    motion: (b & 32) !== 0,
  };
}

const NO_KEY: Partial<Key> = {};

/** One character as Ink reports it when it arrives alone (input-parser + parse-keypress + useInput). */
export function charKey(ch: string): { input: string; key: Partial<Key> } {
  switch (ch) {
    case '\t':
      return { input: '', key: { tab: true } };
    case '\r':
    case '\n':
      return { input: '', key: { return: true } };
    case '\x7f':
      return { input: '', key: { delete: true } };
    case '\b':
      return { input: '', key: { backspace: true } };
    case '\x1b':
      return { input: '', key: { escape: true, meta: true } };
    case ' ':
      return { input: ' ', key: NO_KEY };
  }
  const c = ch.codePointAt(0)!;
  // ctrl-a … ctrl-z (minus the ones above), as Ink names them: the letter, with ctrl
  if (c >= 1 && c <= 26) return { input: String.fromCharCode(c + 96), key: { ctrl: true } };
  if (c < 32) return { input: '', key: { ctrl: true } };
  return { input: ch, key: /^[A-Z]$/.test(ch) ? { shift: true } : NO_KEY };
}

const NAMED_FLAGS: (keyof Key)[] = [
  'upArrow',
  'downArrow',
  'leftArrow',
  'rightArrow',
  'pageUp',
  'pageDown',
  'home',
  'end',
  'return',
  'escape',
  'tab',
  'backspace',
  'delete',
  'ctrl',
  'meta',
];

/**
 * Splits what Ink hands over into keys and mouse reports, in order. Stateful only for the legacy
 * X10 mouse report (`ESC [ M` + three bytes), which a terminal without SGR mode may still send: its
 * three bytes are coordinates, not keys (a click in column 68 would otherwise type `d`).
 */
export class KeyReader {
  private skip = 0;

  /** `raw`: the sequence Ink parsed this key from, where known (useKeys hears it) */
  read(input: string, key: Partial<Key>, raw = ''): InputEvent[] {
    const mouse = parseMouse(input);
    if (mouse) return [{ kind: 'mouse', mouse }];
    if (input === '[M' && !NAMED_FLAGS.some((f) => key[f] === true)) {
      this.skip = 3;
      return [];
    }
    // Esc and the next key read in one chunk (Esc, then q a moment later, into a busy cockpit or
    // over a laggy link) are the two keys, in order: nsa-top binds no Alt key. Otherwise the Esc was
    // lost and the key refused (a dump window left open, its q ignored). The raw sequence says so
    // ("\x1b" and one character, not a CSI or SS3 start); without it, Ink's meta flag on a lone
    // character does, for Esc and a letter or digit only: Ink gives "\x1b?" as a bare "?", "\x1b "
    // as a space with no character, "\x1b\x1b" as one Esc.
    const after =
      this.skip !== 0
        ? null
        : raw.length === 2 && raw[0] === '\x1b' && raw[1] !== '[' && raw[1] !== 'O'
          ? raw[1]!
          : key.meta &&
              !key.escape &&
              [...input].length === 1 &&
              input >= ' ' &&
              !NAMED_FLAGS.some((f) => f !== 'meta' && key[f])
            ? input
            : null;
    if (after !== null)
      return [
        { kind: 'key', ...charKey('\x1b') },
        { kind: 'key', ...charKey(after) },
      ];
    const named = NAMED_FLAGS.some((f) => key[f]);
    let chars = [...input];
    if (this.skip > 0 && !named) {
      const n = Math.min(this.skip, chars.length);
      this.skip -= n;
      chars = chars.slice(n);
      if (chars.length === 0) return [];
      input = chars.join('');
    } else this.skip = 0;
    // a named key (an arrow, esc, ctrl-x) or a single character: as Ink gave it
    if (named || chars.length <= 1) return [{ kind: 'key', input, key }];
    return chars.map((ch) => ({ kind: 'key' as const, ...charKey(ch) }));
  }
}
