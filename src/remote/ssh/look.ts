// One look over SSH (Host.look): the answers of a look's stats, listings and reads, kept for the
// look, and its look-ahead — every file and directory it names stat'ed, listed and (small whole
// files) read by one script in the watch loop's shell, one round trip, instead of one round trip
// each as the look's parts come to them (a `status --host` asked ~60 in turn, the same file up to
// six times).
//
// The look-ahead script ($1 nonce, $2 per-file cap, $3 total cap, $4 number of dirs; then the dirs,
// then the files, `/` first), its answer cut by the nonce's markers:
//   @@N D@@ <find listing of the dir, as SshFiles.list prints it> @@N E <find's exit, - unlistable>@@
//   (once per dir), then @@N S@@ and one line per file that exists,
//   `R INO TYPE SIZE MTIME MODE UID NLINK DEV PATH` (R = r readable, u not; the fields of
//   SshFiles.stat), then @@N C TOT@@ and TOT raw bytes: the files that are regular, readable and at
//   most the per-file cap, in that order while the total stays within its cap, concatenated (short
//   ones padded), then @@N V RC@@ (RC: cat's exit, 0 when every file was read whole) and
//   `INO SIZE MTIME PATH` of each of them read again after the bytes: a file whose stat moved (and
//   every one after it) is not taken from the block, nor is anything when RC is not 0.
// `/` is stat'ed first: a listing of stats without it means find failed, and no file is answered as
// missing from it.
import { randomBytes } from 'node:crypto';
import type { Host, Look, LookAhead, OwnWriteMode, ReadRequest, SignalExpect, SignalName } from '../host.js';
import type { ExecOptions, ProcTableRequest, StreamOptions } from '../host.js';
import type { RawResult } from './exec.js';

/** a file larger than this is not brought by a look-ahead (it is read on its own, as asked) */
export const LOOK_FILE_MAX = 256 * 1024;
/** the bytes one look-ahead brings at most */
export const LOOK_TOTAL_MAX = 1024 * 1024;
/** an answer larger than this is not kept for the look (asked again, it is read again) */
const LOOK_KEEP_MAX = 4 * 1024 * 1024;

/** the awk that picks the files whose bytes are brought (m=p: their paths, m=t: their total) */
const PICK =
  `awk -v cap="$cap" -v tot="$tot" -v m="$1" '$1 == "r" && $3 == "f" && $4 <= cap && t + $4 <= tot ` +
  `{ t += $4; p = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", p); if (m == "p") print p } ` +
  `END { if (m == "t") print t + 0 }'`;

export const LOOK_SCRIPT = [
  'set -f; N=$1 cap=$2 tot=$3 nd=$4; shift 4;',
  'while [ "$nd" -gt 0 ] && [ $# -gt 0 ]; do d=$1; shift; nd=$((nd - 1)); printf \'@@%s D@@\\n\' "$N";',
  'if [ -d "$d" ] && [ -r "$d" ] && [ -x "$d" ]; then',
  `find -L "$d" -mindepth 1 -maxdepth 1 -printf '%i %y %s %T@ %f\\n' 2>/dev/null; printf '@@%s E %s@@\\n' "$N" "$?";`,
  `else printf '@@%s E -@@\\n' "$N"; fi; done;`,
  '[ $# -gt 0 ] || exit 0;',
  `st=$(find -L "$@" -maxdepth 0 \\( -readable -printf 'r ' -o -printf 'u ' \\) -printf '%i %y %s %T@ %m %U %n %D %p\\n' 2>/dev/null);`,
  `printf '@@%s S@@\\n%s\\n' "$N" "$st";`,
  `pick() { printf '%s\\n' "$st" | ${PICK}; };`,
  "T=$(pick t); case $T in '' | *[!0-9]*) T=0;; esac;",
  `printf '@@%s C %s@@\\n' "$N" "$T";`,
  '[ "$T" -gt 0 ] || exit 0;',
  // the bytes go out on fd 3 (the real stdout); cat's exit comes back on fd 4: a file that could not
  // be read (short: the files after it would shift) makes the whole block unanswered
  'exec 3>&1;',
  `x=$( { { pick p | xargs -d '\\n' cat -- 2>/dev/null; echo "$?" >&4; cat /dev/zero; } | head -c "$T" >&3; } 4>&1 );`,
  `printf '@@%s V %s@@\\n' "$N" "$x";`,
  `pick p | xargs -d '\\n' sh -c 'exec find -L "$@" -maxdepth 0 -printf "%i %s %T@ %p\\n"' sh 2>/dev/null; exit 0`,
].join(' ');

/** A file as a look-ahead found it: whole (its bytes), missing, or not a regular file. */
export type WholeFile = { kind: 'data'; data: Buffer } | { kind: 'missing' } | { kind: 'not-regular' };

/** What one look-ahead answered, per path (a path it cannot answer for is absent: asked on its own). */
export interface LookAnswer {
  /** SshFiles.stat's script answer (code 0 and its line, or 3: missing) */
  stats: Map<string, RawResult>;
  /** SshFiles.list's script answer (code 0 and the listing) */
  lists: Map<string, RawResult>;
  whole: Map<string, WholeFile>;
}

const result = (code: number, stdout: string | Buffer = '', stderr = ''): RawResult => ({
  code,
  signal: null,
  stdout: Buffer.isBuffer(stdout) ? stdout : Buffer.from(stdout),
  stderr: Buffer.from(stderr),
  timedOut: false,
  durationMs: 0,
});

/** The arguments of LOOK_SCRIPT for `ahead` (only absolute paths of one line: the others are asked on their own). */
export function lookArgs(ahead: LookAhead, nonce: string): { args: string[]; files: string[]; dirs: string[] } {
  const ok = (p: string) => p.startsWith('/') && !/[\n\r\0]/.test(p);
  const dirs = [...new Set((ahead.dirs ?? []).filter(ok))];
  const files = [...new Set((ahead.files ?? []).filter(ok))];
  const tot = ahead.contents ? LOOK_TOTAL_MAX : 0;
  return {
    args: [nonce, String(LOOK_FILE_MAX), String(tot), String(dirs.length), ...dirs, '/', ...files],
    files,
    dirs,
  };
}

/** A fresh nonce for one look-ahead's markers. */
export function lookNonce(): string {
  return randomBytes(12).toString('hex');
}

/**
 * LOOK_SCRIPT's output → what it can answer for. Anything not as expected (a marker missing, `/`
 * not stat'ed, a stat that moved while the bytes were read) leaves those paths out: they are asked
 * on their own, as without a look-ahead.
 */
export function parseLookAnswer(out: Buffer, nonce: string, files: string[], dirs: string[]): LookAnswer {
  const ans: LookAnswer = { stats: new Map(), lists: new Map(), whole: new Map() };
  const mark = (s: string) => Buffer.from(`@@${nonce} ${s}`);
  let at = 0;
  for (const d of dirs) {
    const open = mark('D@@\n');
    if (out.indexOf(open, at) !== at) return ans;
    const body = at + open.length;
    const end = out.indexOf(mark('E '), body);
    if (end < 0) return ans;
    const close = out.indexOf('@@\n', end + mark('E ').length);
    if (close < 0) return ans;
    const code = out.subarray(end + mark('E ').length, close).toString();
    if (code === '0') ans.lists.set(d, result(0, out.subarray(body, end)));
    at = close + 3;
  }
  const sOpen = mark('S@@\n');
  if (out.indexOf(sOpen, at) !== at) return ans;
  const cAt = out.indexOf(mark('C '), at);
  if (cAt < 0) return ans;
  const seen = new Map<string, string[]>();
  for (const line of out
    .subarray(at + sOpen.length, cAt)
    .toString('utf8')
    .split('\n')) {
    const f = line.split(' ');
    if (f.length < 10) continue;
    seen.set(f.slice(9).join(' '), f.slice(0, 9));
  }
  // no `/`: find did not run as expected (no GNU find, killed): nothing is missing on its word
  if (!seen.has('/')) return ans;
  for (const p of files) {
    const f = seen.get(p);
    // a dangling or looping link is not there for `[ -e ]` (what SshFiles.stat asks)
    if (!f || f[2] === 'l') {
      ans.stats.set(p, result(3));
      ans.whole.set(p, { kind: 'missing' });
      continue;
    }
    ans.stats.set(p, result(0, `${f.slice(1).join(' ')}\n`));
    if (f[2] !== 'f') ans.whole.set(p, { kind: 'not-regular' });
  }
  const cEnd = out.indexOf('@@\n', cAt + mark('C ').length);
  if (cEnd < 0) return ans;
  const tot = Number(out.subarray(cAt + mark('C ').length, cEnd).toString());
  if (!Number.isInteger(tot) || tot <= 0) return ans;
  const block = out.subarray(cEnd + 3, cEnd + 3 + tot);
  // cat read every file (0) — else a short one shifted the rest: nothing is taken from the block
  const vOpen = mark('V 0@@\n');
  const vAt = cEnd + 3 + tot;
  if (block.length !== tot || out.indexOf(vOpen, vAt) !== vAt) return ans;
  const after = new Map<string, string>();
  for (const line of out
    .subarray(vAt + vOpen.length)
    .toString('utf8')
    .split('\n')) {
    const f = line.split(' ');
    if (f.length >= 4) after.set(f.slice(3).join(' '), f.slice(0, 3).join(' '));
  }
  // the same pick as the script's, over the same lines, in the same order
  const picked: [string, string[]][] = [];
  let sum = 0;
  for (const [p, f] of seen) {
    const size = Number(f[3]);
    if (f[0] !== 'r' || f[2] !== 'f' || size > LOOK_FILE_MAX || sum + size > LOOK_TOTAL_MAX) continue;
    picked.push([p, f]);
    sum += size;
  }
  if (sum !== tot) return ans;
  let off = 0;
  let intact = true;
  for (const [p, f] of picked) {
    const size = Number(f[3]);
    const slice = block.subarray(off, off + size);
    off += size;
    intact &&= after.get(p) === `${f[1]} ${f[3]} ${f[4]}`;
    if (intact && files.includes(p)) ans.whole.set(p, { kind: 'data', data: Buffer.from(slice) });
  }
  return ans;
}

/**
 * The answers of one look, shared by its looks. An answer is served only while no write, signal
 * or non-quick exec went through the host since it was asked (`gen`).
 */
export class LookMemo {
  private readonly answers = new Map<string, { gen: number; answer: Promise<RawResult | null> }>();
  private readonly whole = new Map<string, { gen: number; file: Promise<WholeFile | null> }>();

  constructor(private readonly gen: () => number) {}

  /** Seeds the memo with a look-ahead in flight (its answer, or null: none). */
  seed(paths: { files: string[]; dirs: string[] }, answer: Promise<LookAnswer | null>): void {
    const g = this.gen();
    const a = answer.catch(() => null);
    for (const p of paths.files) {
      this.answers.set(`stat\0${p}`, { gen: g, answer: a.then((x) => x?.stats.get(p) ?? null) });
      this.whole.set(p, { gen: g, file: a.then((x) => x?.whole.get(p) ?? null) });
    }
    for (const d of paths.dirs)
      this.answers.set(`list\0${d}`, { gen: g, answer: a.then((x) => x?.lists.get(d) ?? null) });
  }

  /** `ahead` less what this look has asked already */
  unasked(ahead: LookAhead): LookAhead {
    const g = this.gen();
    const fresh = (key: string) => this.answers.get(key)?.gen !== g;
    return {
      ...ahead,
      files: ahead.files?.filter((p) => fresh(`stat\0${p}`)),
      dirs: ahead.dirs?.filter((d) => fresh(`list\0${d}`)),
    };
  }

  /** The answer to `kind args` asked earlier in this look, else `run`'s (kept for the look). */
  async ask(kind: string, args: string[], run: () => Promise<RawResult>): Promise<RawResult> {
    const key = `${kind}\0${args.join('\0')}`;
    const g = this.gen();
    const e = this.answers.get(key);
    if (e && e.gen === g) {
      const r = await e.answer;
      if (r) return r;
    }
    const p = run();
    // a timeout or a lost loop is not an answer to keep, nor a large read (the look would hold it)
    const keep = (r: RawResult) => (r.code === null || r.stdout.length > LOOK_KEEP_MAX ? null : r);
    this.answers.set(key, { gen: g, answer: p.then(keep).catch(() => null) });
    return p;
  }

  /** The file a look-ahead of this look brought whole (or found missing, or not regular), else null. */
  async wholeFile(path: string): Promise<WholeFile | null> {
    const e = this.whole.get(path);
    if (!e || e.gen !== this.gen()) return null;
    const f = await e.file;
    return f && e.gen === this.gen() ? f : null;
  }

  clear(): void {
    this.answers.clear();
    this.whole.clear();
  }
}

/** What a look needs of the SSH host it looks through (SshHost, without a cycle of imports). */
export interface LookedHost extends Host {
  look(ahead?: LookAhead): Look;
  /** the file looks, answered from `memo` first */
  lookStat(path: string, memo: LookMemo): ReturnType<Host['stat']>;
  lookList(dir: string, memo: LookMemo): ReturnType<Host['list']>;
  lookRead(path: string, start: number, end: number | undefined, memo: LookMemo): Promise<Buffer>;
  /** sends a look-ahead into `memo` (nothing when the watch loop cannot take it) */
  lookAhead(ahead: LookAhead, memo: LookMemo): void;
}

/** A look through an SshHost (Host.look): its file looks answered once, everything else the host's. */
export class SshLook implements Look {
  readonly kind = 'ssh' as const;
  readonly label: string;
  readonly base: Host;
  private ended = false;

  constructor(
    private readonly host: LookedHost,
    private readonly memo: LookMemo,
    /** the look that made the memo: its end clears it (a look's look only stops using it) */
    private readonly owner: boolean,
  ) {
    this.label = host.label;
    this.base = host;
  }

  private get m(): LookMemo | null {
    return this.ended ? null : this.memo;
  }

  look(ahead?: LookAhead): Look {
    if (!this.m) return this.host.look(ahead);
    // what this look asked already is not asked again
    if (ahead) this.host.lookAhead(this.memo.unasked(ahead), this.memo);
    return new SshLook(this.host, this.memo, false);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.owner) this.memo.clear();
  }

  connState() {
    return this.host.connState();
  }
  viewAgeMs(): number | null {
    return this.host.viewAgeMs?.() ?? null;
  }
  stat(path: string) {
    return this.m ? this.host.lookStat(path, this.m) : this.host.stat(path);
  }
  list(dir: string) {
    return this.m ? this.host.lookList(dir, this.m) : this.host.list(dir);
  }
  readRange(path: string, start: number, end?: number) {
    return this.m ? this.host.lookRead(path, start, end, this.m) : this.host.readRange(path, start, end);
  }
  readFile(path: string, maxBytes?: number) {
    return this.readRange(path, 0, maxBytes);
  }
  pollDir(dir: string, reads: ReadRequest[], subdirs?: string[]) {
    return this.host.pollDir(dir, reads, subdirs);
  }
  exec(argv: string[], opts: ExecOptions) {
    return this.host.exec(argv, opts);
  }
  stream(argv: string[], opts: StreamOptions) {
    return this.host.stream(argv, opts);
  }
  signal(pid: number, sig: SignalName, expect?: SignalExpect) {
    return this.host.signal(pid, sig, expect);
  }
  writeFile(path: string, data: string | Buffer, opts?: { exclusive?: boolean; mode?: number }) {
    return this.host.writeFile(path, data, opts);
  }
  appendFile(path: string, data: string | Buffer) {
    return this.host.appendFile(path, data);
  }
  mkdirp(path: string) {
    return this.host.mkdirp(path);
  }
  remove(path: string) {
    return this.host.remove(path);
  }
  writeOwn(root: string, rel: string, data: string | Buffer, mode: OwnWriteMode, fileMode?: number) {
    return this.host.writeOwn(root, rel, data, mode, fileMode);
  }
  removeOwn(root: string, rel: string) {
    return this.host.removeOwn(root, rel);
  }
  readProcTable(req: ProcTableRequest, timeoutMs: number) {
    return this.host.readProcTable ? this.host.readProcTable(req, timeoutMs) : Promise.resolve(null);
  }
  now(): number {
    return this.host.now();
  }
  /** a look's close ends the look: the connection is its host's to close */
  async close(): Promise<void> {
    this.end();
  }
}
