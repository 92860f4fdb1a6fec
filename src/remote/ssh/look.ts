// One look over SSH (Host.look): the answers of a look's stats, listings and reads, kept for the
// look, and its look-ahead — every file and directory it names stat'ed, listed and (small whole
// files) read by one script in the watch loop's shell, one round trip, instead of one round trip
// each as the look's parts come to them (a `status --host` asked ~60 in turn, the same file up to
// six times).
//
// The look-ahead script ($1 nonce, $2 per-file cap, $3 total cap, $4 number of dirs, $5 how many of
// them are read dirs (the first ones); then the dirs, then the files, `/` first), its answer cut by
// the nonce's markers:
//   @@N D@@ <find listing of the dir, as SshFiles.list prints it> @@N E <find's exit, - unlistable>@@
//   (once per dir), then @@N S NOW@@ (NOW: the box's clock, s) and one line per file that exists,
//   `R INO TYPE SIZE MTIME MODE UID NLINK DEV PATH` (R = r readable, u not; the fields of
//   SshFiles.stat) — the files named, then the regular files in each read dir (a name with a line
//   break left out) — then @@N C TOT@@ and TOT raw bytes: the files that are regular, readable and at
//   most the per-file cap — those unchanged for 2 s before NOW first, then the others, each in that
//   order (a path once) — while the total stays within its cap,
//   concatenated (short ones padded): first each file being written as exactly its stat'ed size
//   (dd: its first SIZE bytes, zeros past a shrunk end), then the settled ones by one cat, then
//   @@N V RC@@ (RC: 0 when every dd and cat read their files whole) and `INO SIZE MTIME PATH` of
//   each of them read again after the bytes: a settled file whose stat moved (and every settled one
//   after it: cat read on past its size) is not taken from the block; a file being written is taken
//   when it only grew (the same inode, a larger size: its first SIZE bytes are the ones stat'ed, as
//   a one-shot read of it would bring them) or did not move, and costs no other file; nothing is
//   taken when RC is not 0.
// `/` is stat'ed first: a listing of stats without it means find failed, and no file is answered as
// missing from it.
import { randomBytes } from 'node:crypto';
import type { DirPoll, Host, Look, LookAhead, OwnWriteMode, ReadRequest, SignalExpect, SignalName } from '../host.js';
import type { DirEntry, ExecOptions, FileStat, ProcTable, ProcTableRequest, StreamOptions } from '../host.js';
import type { RawResult } from './exec.js';
import type { ExecResult } from '../host.js';
import { parseFindEntry, sortByName, statOf } from './listing.js';
import { tableCovers } from '../procs.js';

/** a file larger than this is not brought by a look-ahead (it is read on its own, as asked): the
 * run model reads a line file up to 1 MiB whole from its start (a larger one from its tail) */
export const LOOK_FILE_MAX = 1024 * 1024;
/** the bytes one look-ahead brings at most */
export const LOOK_TOTAL_MAX = 4 * 1024 * 1024;
/** an answer larger than this is not kept for the look (asked again, it is read again) */
const LOOK_KEEP_MAX = 4 * 1024 * 1024;

/**
 * the awk that picks the files whose bytes are brought (a line each, then their total): each path
 * once, regular, readable, within the per-file cap — those unchanged for 2 s (`now`, the box's
 * clock) first, as their path, then the ones being written, as `SIZE PATH`, each while the total
 * stays within its cap. A settled file whose stat moved while the bytes were read costs the files
 * after it too (cat read on past its size); the files a live run appends to every step are read
 * each to its size (dd), so one that grew meanwhile costs nothing.
 */
const PICK =
  `awk -v cap="$cap" -v tot="$tot" -v now="$now" ` +
  `'function take(p, z) { if (t + z <= tot) { t += z; print p } } ` +
  `{ p = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", p) } (p in s) { next } { s[p] = 1 } ` +
  `$1 == "r" && $3 == "f" && $4 <= cap { if ($5 < now - 2) { a[++na] = p; az[na] = $4 } else { b[++nb] = p; bz[nb] = $4 } } ` +
  `END { for (i = 1; i <= na; i++) take(a[i], az[i]); for (i = 1; i <= nb; i++) take(bz[i] " " b[i], bz[i]); print t + 0 }'`;

/** a list of paths up to this many bytes is passed to cat and find as arguments (each absolute, so
 * never taken for an option); a longer one goes through xargs (two processes more on the look's path) */
const ARGS_DIRECT = 65536;

/** find's stat line of a file: `R INO TYPE SIZE MTIME MODE UID NLINK DEV PATH` */
const STAT_FMT = `\\( -readable -printf 'r ' -o -printf 'u ' \\) -printf '%i %y %s %T@ %m %U %n %D %p\\n'`;

export const LOOK_SCRIPT = [
  "set -f; N=$1 cap=$2 tot=$3 nd=$4 nr=$5; shift 5; nl=$(printf '\\nx'); nl=${nl%x}; rs=;",
  'while [ "$nd" -gt 0 ] && [ $# -gt 0 ]; do d=$1; shift; nd=$((nd - 1)); printf \'@@%s D@@\\n\' "$N";',
  'if [ -d "$d" ] && [ -r "$d" ] && [ -x "$d" ]; then',
  `find -L "$d" -mindepth 1 -maxdepth 1 -printf '%i %y %s %T@ %f\\n' 2>/dev/null; printf '@@%s E %s@@\\n' "$N" "$?";`,
  // a read dir: its regular files' stat lines, after the files named
  `[ "$nr" -gt 0 ] && { x=$(find -L "$d" -mindepth 1 -maxdepth 1 ! -name "*$nl*" -type f ${STAT_FMT} 2>/dev/null); [ -z "$x" ] || rs="$rs$nl$x"; };`,
  `else printf '@@%s E -@@\\n' "$N"; fi; nr=$((nr - 1)); done;`,
  '[ $# -gt 0 ] || exit 0;',
  `st=$(find -L "$@" -maxdepth 0 ${STAT_FMT} 2>/dev/null; [ -z "$rs" ] || printf '%s\\n' "\${rs#"$nl"}");`,
  `now=$(date +%s); printf '@@%s S %s@@\\n%s\\n' "$N" "$now" "$st";`,
  // one pick: the paths (L, no line break in any) and their total (T, the last line)
  `P=$(printf '%s\\n' "$st" | ${PICK}); T=\${P##*"$nl"}; L=; [ "$T" = "$P" ] || L=\${P%"$nl"*};`,
  "case $T in '' | *[!0-9]*) T=0;; esac;",
  `printf '@@%s C %s@@\\n' "$N" "$T";`,
  '[ "$T" -gt 0 ] || exit 0;',
  // the pick's lines: a settled file's path (A, for cat), a file being written's `SIZE PATH` (B, for
  // dd); L becomes the paths, in the pick's order (settled first)
  `A=; B=; Q=; IFS=$nl; for e in $L; do case $e in /*) A="$A$e$nl"; Q="$Q$e$nl";; *) B="$B$e$nl"; Q="$Q\${e#* }$nl";; esac; done; unset IFS; L=\${Q%"$nl"};`,
  // the bytes go out on fd 3 (the real stdout); the readers' exit comes back on fd 4: a file that
  // could not be read (short: the files after it would shift) makes the whole block unanswered
  'exec 3>&1;',
  // (the paths as cat's arguments, split at line breaks with globbing off; a list that might not fit
  // one command line goes through xargs)
  // first each file being written, as exactly its stat'ed size (a file grown since costs no other
  // file), then the settled ones: one of those that moved while cat read it shifts only the settled
  // files after it, never the live ones (val.csv appended at an eval cost every growing file once)
  `x=$( { { r=0; IFS=$nl; for e in $B; do z=\${e%% *}; [ "$z" -gt 0 ] || continue; dd if="\${e#* }" bs="$z" count=1 iflag=fullblock conv=sync status=none 2>/dev/null || { r=9; head -c "$z" /dev/zero; }; done;`,
  `[ -z "$A" ] || { if [ \${#A} -le ${ARGS_DIRECT} ]; then cat -- $A; else printf '%s' "$A" | xargs -d '\\n' cat --; fi; } 2>/dev/null || r=$?;`,
  `echo "$r" >&4; cat /dev/zero; } | head -c "$T" >&3; } 4>&1 );`,
  `printf '@@%s V %s@@\\n' "$N" "$x";`,
  `if [ \${#L} -le ${ARGS_DIRECT} ]; then IFS=$nl; find -L $L -maxdepth 0 -printf '%i %s %T@ %p\\n';`,
  `else printf '%s\\n' "$L" | xargs -d '\\n' sh -c 'exec find -L "$@" -maxdepth 0 -printf "%i %s %T@ %p\\n"' sh; fi 2>/dev/null; exit 0`,
].join(' ');

/** A file as a look-ahead found it: whole (its bytes and the stat they go with), missing, or not a regular file. */
export type WholeFile = { kind: 'data'; data: Buffer; stat: FileStat } | { kind: 'missing' } | { kind: 'not-regular' };

/** What one look-ahead answered, per path (a path it cannot answer for is absent: asked on its own). */
export interface LookAnswer {
  /** SshFiles.stat's script answer (code 0 and its line, or 3: missing) */
  stats: Map<string, RawResult>;
  /** SshFiles.list's script answer (code 0 and the listing) */
  lists: Map<string, RawResult>;
  /** dirs the look found missing or not listable (`E -`: their listing is nothing) */
  unlisted: Set<string>;
  whole: Map<string, WholeFile>;
}

/** What a look-ahead answered for one pollDir of a read dir (SshLook.pollDir → DirPoller). */
export interface LookPoll {
  /** the look-ahead's answer these come from (the same for every poll it answers) */
  token: object;
  /** listings by path (null: missing or not listable) */
  lists: Map<string, DirEntry[] | null>;
  /** files brought whole, by path */
  whole: Map<string, { data: Buffer; stat: FileStat }>;
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
export function lookArgs(
  ahead: LookAhead,
  nonce: string,
): { args: string[]; files: string[]; dirs: string[]; readDirs: string[] } {
  const ok = (p: string) => p.startsWith('/') && !/[\n\r\0]/.test(p);
  // read dirs first (the script reads the first `nr` dirs), and only with contents
  const readDirs = ahead.contents ? [...new Set((ahead.readDirs ?? []).filter(ok))] : [];
  const dirs = [...new Set([...readDirs, ...(ahead.dirs ?? []).filter(ok)])];
  const files = [...new Set((ahead.files ?? []).filter(ok))];
  const tot = ahead.contents ? LOOK_TOTAL_MAX : 0;
  return {
    args: [
      nonce,
      String(LOOK_FILE_MAX),
      String(tot),
      String(dirs.length),
      String(readDirs.length),
      ...dirs,
      '/',
      ...files,
    ],
    files,
    dirs,
    readDirs,
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
  const ans: LookAnswer = { stats: new Map(), lists: new Map(), unlisted: new Set(), whole: new Map() };
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
    else if (code === '-' && end === body) ans.unlisted.add(d);
    at = close + 3;
  }
  const sOpen = mark('S ');
  if (out.indexOf(sOpen, at) !== at) return ans;
  const sEnd = out.indexOf('@@\n', at + sOpen.length);
  if (sEnd < 0) return ans;
  // the box's clock as the script picked by it (files unchanged for 2 s go first)
  const now = Number(out.subarray(at + sOpen.length, sEnd).toString());
  if (!Number.isInteger(now)) return ans;
  const cAt = out.indexOf(mark('C '), sEnd);
  if (cAt < 0) return ans;
  const seen = new Map<string, string[]>();
  for (const line of out
    .subarray(sEnd + 3, cAt)
    .toString('utf8')
    .split('\n')) {
    const f = line.split(' ');
    if (f.length < 10) continue;
    // a path twice (named, and in a read dir): its first line, as the script's pick takes it
    const p = f.slice(9).join(' ');
    if (!seen.has(p)) seen.set(p, f.slice(0, 9));
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
  // the same pick as the script's, over the same lines, in the same order: the settled files, then
  // the ones being written
  const picked: [string, string[]][] = [];
  let sum = 0;
  const small = [...seen].filter(([, f]) => f[0] === 'r' && f[2] === 'f' && Number(f[3]) <= LOOK_FILE_MAX);
  const settled = (f: string[]) => Number(f[4]) < now - 2;
  for (const [p, f] of [...small.filter(([, f]) => settled(f)), ...small.filter(([, f]) => !settled(f))]) {
    const size = Number(f[3]);
    if (sum + size > LOOK_TOTAL_MAX) continue;
    picked.push([p, f]);
    sum += size;
  }
  if (sum !== tot) return ans;
  let off = 0;
  /** no settled file moved so far (cat read each to its end: one that grew shifted the rest) */
  let intact = true;
  // the block's order: the files being written (dd), then the settled ones (cat)
  for (const [p, f] of [...picked.filter(([, f]) => !settled(f)), ...picked.filter(([, f]) => settled(f))]) {
    const size = Number(f[3]);
    const slice = block.subarray(off, off + size);
    off += size;
    if (!intact) continue;
    const again = after.get(p);
    if (settled(f)) {
      intact = again === `${f[1]} ${f[3]} ${f[4]}`;
      if (!intact) continue;
    } else if (again !== `${f[1]} ${f[3]} ${f[4]}`) {
      // a file being written was read to its stat'ed size (dd): taken when it only grew since
      const [ino, sz] = (again ?? '').split(' ');
      if (ino !== f[1] || !(Number(sz) > size)) continue;
    }
    // a named file, or a read dir's (its stat answered too: SshFiles.stat's line)
    if (!ans.stats.has(p)) ans.stats.set(p, result(0, `${f.slice(1).join(' ')}\n`));
    const stat = statOf(f[1], f[2], f[3], f[4], f[5]);
    ans.whole.set(p, { kind: 'data', data: Buffer.from(slice), stat });
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
  /** quick execs asked ahead (LookAhead.execs), by argv */
  private readonly execs = new Map<string, { gen: number; answer: Promise<ExecResult> }>();
  /** read dirs asked (LookAhead.readDirs): the look-ahead that lists them and brings their files */
  private readonly readDirs = new Map<string, { gen: number; answer: Promise<LookAnswer | null> }>();
  /** the process table asked ahead (LookAhead.procs): taken once, by the first read it covers */
  private procs: { gen: number; req: ProcTableRequest; table: Promise<ProcTable | null> } | null = null;

  constructor(private readonly gen: () => number) {}

  /** Seeds the memo with a look-ahead in flight (its answer, or null: none). */
  seed(paths: { files: string[]; dirs: string[]; readDirs?: string[] }, answer: Promise<LookAnswer | null>): void {
    const g = this.gen();
    const a = answer.catch(() => null);
    for (const p of paths.files) {
      this.answers.set(`stat\0${p}`, { gen: g, answer: a.then((x) => x?.stats.get(p) ?? null) });
      this.whole.set(p, { gen: g, file: a.then((x) => x?.whole.get(p) ?? null) });
    }
    for (const d of paths.dirs)
      this.answers.set(`list\0${d}`, { gen: g, answer: a.then((x) => x?.lists.get(d) ?? null) });
    for (const d of paths.readDirs ?? []) this.readDirs.set(d, { gen: g, answer: a });
  }

  /** Seeds the memo with a quick exec asked ahead (LookAhead.execs). */
  seedExec(argv: string[], answer: Promise<ExecResult>): void {
    answer.catch(() => {});
    this.execs.set(argv.join('\0'), { gen: this.gen(), answer });
  }

  /** Seeds the memo with the process table asked ahead for `req` (LookAhead.procs). */
  seedProcs(req: ProcTableRequest, table: Promise<ProcTable | null>): void {
    this.procs = { gen: this.gen(), req, table: table.catch(() => null) };
  }

  /**
   * The table asked ahead, once, when it is the one `req` would read (tableCovers; no write,
   * signal or non-quick exec since it was asked); else null and `req` is read on its own.
   */
  async procTable(req: ProcTableRequest): Promise<ProcTable | null> {
    const e = this.procs;
    if (!e || e.gen !== this.gen()) return null;
    this.procs = null;
    const table = await e.table;
    return table && this.gen() === e.gen && tableCovers(e.req, table, req) ? table : null;
  }

  /** The answer of a quick exec of `argv` asked ahead in this look (null: none, or a write since). */
  execAnswer(argv: string[]): Promise<ExecResult> | null {
    const e = this.execs.get(argv.join('\0'));
    return e && e.gen === this.gen() ? e.answer : null;
  }

  /**
   * A pollDir of `dir` (and `subdirs`, `sub` joins them) answered from a look-ahead that read `dir`:
   * the listings it took and the files it brought whole. Null at once (no wait) when no look-ahead
   * of this look read `dir`: the poll goes to the watch loop as ever.
   */
  async poll(dir: string, subdirs: string[], sub: (s: string) => string): Promise<LookPoll | null> {
    const g = this.gen();
    const e = this.readDirs.get(dir);
    if (!e || e.gen !== g) return null;
    const ans = await e.answer;
    if (!ans || this.gen() !== g) return null;
    const lists = new Map<string, DirEntry[] | null>();
    for (const d of [dir, ...subdirs.map(sub)]) {
      const l = ans.lists.get(d);
      if (l)
        lists.set(
          d,
          sortByName(
            l.stdout
              .toString('utf8')
              .split('\n')
              .flatMap((x) => parseFindEntry(x) ?? []),
          ),
        );
      else if (ans.unlisted.has(d)) lists.set(d, null);
    }
    const whole = new Map<string, { data: Buffer; stat: FileStat }>();
    for (const [p, w] of ans.whole) if (w.kind === 'data') whole.set(p, w);
    return { token: ans, lists, whole };
  }

  /** `ahead` less what this look has asked already */
  unasked(ahead: LookAhead): LookAhead {
    const g = this.gen();
    const fresh = (key: string) => this.answers.get(key)?.gen !== g;
    return {
      ...ahead,
      files: ahead.files?.filter((p) => fresh(`stat\0${p}`)),
      dirs: ahead.dirs?.filter((d) => fresh(`list\0${d}`)),
      readDirs: ahead.readDirs?.filter((d) => this.readDirs.get(d)?.gen !== g),
      execs: ahead.execs?.filter((a) => this.execs.get(a.join('\0'))?.gen !== g),
      // one table ahead per look and run dir (a look again at the run found elsewhere — a launcher
      // dir's out_dir — asks for that one's instead)
      procs: ahead.procs && this.procs?.req.runDir !== ahead.procs.runDir ? ahead.procs : undefined,
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

  /**
   * The file a look-ahead of this look brought whole (or found missing, or not regular), else null:
   * asked for by name, or brought with a read dir's small files — status's resume pick reads the
   * heartbeat the look already brought for the poll (a second copy of it over the wire, ~0.1 s)
   */
  async wholeFile(path: string): Promise<WholeFile | null> {
    const g = this.gen();
    const e = this.whole.get(path);
    if (e && e.gen === g) {
      const f = await e.file;
      return f && this.gen() === g ? f : null;
    }
    for (const [dir, d] of this.readDirs) {
      if (d.gen !== g || !path.startsWith(dir.endsWith('/') ? dir : `${dir}/`)) continue;
      const w = (await d.answer)?.whole.get(path);
      if (w?.kind === 'data' && this.gen() === g) return w;
    }
    return null;
  }

  clear(): void {
    this.answers.clear();
    this.whole.clear();
    this.readDirs.clear();
    this.execs.clear();
    this.procs = null;
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
  /** pollDir, its listings and first reads answered from `memo`'s look-ahead where it read the dir */
  lookPollDir(dir: string, reads: ReadRequest[], subdirs: string[] | undefined, memo: LookMemo): Promise<DirPoll>;
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
    return this.m ? this.host.lookPollDir(dir, reads, subdirs, this.m) : this.host.pollDir(dir, reads, subdirs);
  }
  exec(argv: string[], opts: ExecOptions) {
    // a probe asked ahead by this look (LookAhead.execs): its answer
    const plain = opts.quick && !opts.env && !opts.cwd && opts.input === undefined;
    return (plain && this.m?.execAnswer(argv)) || this.host.exec(argv, opts);
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
  async readProcTable(req: ProcTableRequest, timeoutMs: number) {
    // the table this look asked ahead (LookAhead.procs), where it is the one asked for
    const ahead = await this.m?.procTable(req);
    if (ahead) return ahead;
    return this.host.readProcTable ? this.host.readProcTable(req, timeoutMs) : null;
  }
  now(): number {
    return this.host.now();
  }
  /** a look's close ends the look: the connection is its host's to close */
  async close(): Promise<void> {
    this.end();
  }
}
