// Text that came from a run dir, a process or a remote host, made safe to print on a terminal.
// A run dir is input nsa-top does not control: a file name, a CONFIG value, a dump frame or a log
// line can carry ESC sequences (OSC 2 sets the window title, OSC 52 writes the clipboard, ESC[2J
// clears the screen) and C0/C1 control characters. Everything printed for a human goes through
// here; JSON output does not (JSON.stringify escapes control characters itself, so it stays exact).
//
// No imports: the commands, the checks' printers and the UI all use it.

// ESC-introduced sequences: CSI (ESC [ … final), OSC / DCS / SOS / PM / APC strings (up to BEL or
// ST, or to the end when unterminated), and two-character escapes. Their 8-bit C1 forms too
// (\x9b CSI, \x9d OSC, \x90 DCS, \x98 SOS, \x9e PM, \x9f APC).
const SEQ =
  /(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?/g;
// every remaining C0 control but TAB and LF, DEL, and C1
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
const ANY = /[\x00-\x1f\x7f-\x9f]/;

/**
 * One line of display text: escape sequences and control characters removed, tabs as two spaces,
 * line breaks as spaces.
 */
export function sanitize(s: string): string {
  if (!ANY.test(s)) return s;
  return s
    .replace(SEQ, '')
    .replace(/\t/g, '  ')
    .replace(/\r?\n|\r/g, ' ')
    .replace(CONTROL, '');
}

/** Multi-line display text (a command's whole human output): as sanitize, but line breaks kept. */
export function sanitizeText(s: string): string {
  if (!ANY.test(s)) return s;
  return s.replace(SEQ, '').replace(/\r\n/g, '\n').replace(CONTROL, '');
}

const JSON_C1 = /[\x7f-\x9f]/g;

/**
 * JSON text as JSON.stringify wrote it, with DEL and the C1 controls (which stringify leaves raw;
 * \x9b is CSI to an 8-bit terminal) written as \u escapes: the same JSON value, exactly, and
 * nothing a terminal acts on.
 */
export function jsonSafe(json: string): string {
  return json.replace(JSON_C1, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

/**
 * jsonSafe(json) as UTF-8 bytes, the form output takes. The bytes are searched (memchr) for DEL
 * and the C1 controls (C2 80–C2 9F in UTF-8) and the replacing runs only where one is there: a
 * regular expression over a 1.4 MB two-byte string (status --json of a long run) took ~20 ms of a
 * ~200 ms status; the search takes ~0.2 ms.
 */
export function jsonSafeBytes(json: string): Buffer {
  const b = Buffer.from(json, 'utf8');
  let raw = b.indexOf(0x7f) !== -1;
  for (let i = b.indexOf(0xc2); !raw && i !== -1; i = b.indexOf(0xc2, i + 1)) {
    const next = b[i + 1]!;
    raw = next >= 0x80 && next <= 0x9f;
  }
  return raw ? Buffer.from(jsonSafe(json), 'utf8') : b;
}
