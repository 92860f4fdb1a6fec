// File operations on the remote box, each one guarded sh script (stat, list, reads, writes,
// nsa-top's own files, signals). The looks (stat, list, a bounded read) and signals run inside the
// watch loop's shell when it is up (`x`, watch-script.ts): no SSH session each. Unbounded reads
// and anything with a line break in an argument go by exec, as does everything while the loop is
// down. The poll path does not come here: it rides the watch loop.
// Writes (stdin data, scripts of many lines) ride the loop too (`w`) when their data is small and
// has no NUL or CR; else, and while the loop is down, they go by exec.
import {
  CATCHABLE_SIGNALS,
  noHandlerError,
  type DirEntry,
  type FileStat,
  type OwnWriteDone,
  type OwnWriteMode,
  type SignalName,
  type SignalExpect,
} from '../host.js';
import { ownError, splitOwnRel } from '../local/ownfiles.js';
import type { BoxFacts } from './connection.js';
import type { RawResult, RemoteCommands } from './exec.js';
import { parseFindEntry, parseLsLine, sortByName, statOf } from './listing.js';
import type { LookMemo } from './look.js';

/** A failed script: its exit code, stderr, and whether it ran out of time. */
type Failure = Pick<RawResult, 'code' | 'stderr' | 'timedOut'>;

/** the last line the script wrote on stderr (its own message) */
const lastLine = (r: Failure) => r.stderr.toString('utf8').trim().split('\n').pop() ?? '';

/** exit codes of the plain file scripts → errno names (anything else: EIO, or ETIMEDOUT) */
const ERRNO_OF_EXIT: Record<number, string> = { 3: 'ENOENT', 17: 'EEXIST', 4: 'ENOTREG', 13: 'EACCES' };

/** what the read script says of a path that is not a regular file */
const NOT_REGULAR = 'not a regular file: not read';

/** a read larger than this goes by exec (it would hold up the watch loop's frames) */
const LOOP_READ_MAX = 16 * 1024 * 1024;

/** runs a one-line script inside the watch loop; null: it cannot now (see WatchLoop.runScript) */
export type LoopRunner = (build: () => string, args: string[], timeoutMs: number) => Promise<RawResult | null>;

/** runs a script with data on its stdin inside the watch loop; null: it cannot now (see WatchLoop.runWrite) */
export type LoopWriter = (
  script: string,
  args: string[],
  input: string | Buffer | null,
  timeoutMs: number,
) => Promise<RawResult | null>;

export class SshFiles {
  /** looks in flight, by what they ask (see memoLook) */
  private readonly memo = new Map<string, Promise<RawResult>>();

  constructor(
    private readonly cmds: RemoteCommands,
    private readonly label: string,
    private readonly box: BoxFacts,
    private readonly loop: LoopRunner | null = null,
    private readonly loopWrite: LoopWriter | null = null,
  ) {}

  /** a write (data on stdin, or none): in the watch loop when it can take it, else over exec */
  private async change(script: string, args: string[], input?: string | Buffer): Promise<RawResult> {
    this.forgetLooks();
    try {
      const r = this.loopWrite ? await this.loopWrite(script, args, input ?? null, 30000) : null;
      return r ?? (await this.cmds.sh(script, args, { input }));
    } finally {
      this.forgetLooks();
    }
  }

  /** a script without stdin: in the watch loop when it can take it, else over exec */
  private async look(
    build: () => string,
    args: string[],
    opts: { timeoutMs: number; maxOutputBytes?: number },
  ): Promise<RawResult> {
    const r = this.loop ? await this.loop(build, args, opts.timeoutMs) : null;
    return r ?? this.cmds.sh(build(), args, opts);
  }

  /**
   * The same look (stat, list, a bounded read) asked while it is in flight shares its answer: over
   * SSH each look is a round trip (5–80 ms under load), and the parts of a refresh ask for the same
   * files at once. A look asked after the last one answered is asked afresh, so a Host stays
   * sequentially consistent (a change made before a call is seen by it). Any write, signal or
   * non-quick exec through this host drops what is in flight from sharing.
   */
  private memoLook(kind: string, run: () => Promise<RawResult>, args: string[]): Promise<RawResult> {
    const key = `${kind}\0${args.join('\0')}`;
    const m = this.memo.get(key);
    if (m) return m;
    const r = run();
    this.memo.set(key, r);
    const done = () => {
      if (this.memo.get(key) === r) this.memo.delete(key);
    };
    r.then(done, done);
    return r;
  }

  /** bumped by forgetLooks: an answer a look kept from before it is not served (look.ts) */
  gen = 0;

  /** Looks asked from now on are asked afresh (something may have changed the files). */
  forgetLooks(): void {
    this.memo.clear();
    this.gen++;
  }

  private errorFor(path: string, r: Failure, what: string): Error {
    const msg = lastLine(r);
    const e = new Error(
      `${what} ${path} on ${this.label}: ${r.timedOut ? 'timed out' : msg || `exit ${r.code}`}`,
    ) as NodeJS.ErrnoException;
    e.code = ERRNO_OF_EXIT[r.code ?? -1] ?? (r.timedOut ? 'ETIMEDOUT' : 'EIO');
    return e;
  }

  private statScript(): string {
    return this.box.gnuFind
      ? `[ -e "$1" ] || exit 3; find -L "$1" -maxdepth 0 -printf '%i %y %s %T@ %m %U %n %D\\n'`
      : `[ -e "$1" ] || exit 3; set -- $(ls -lniLd "$1"); case $2 in d*) t=d;; -*) t=f;; *) t=o;; esac; echo "$1 $t $6 0 0 $4 $3"`;
  }

  /** `look`: the memo of a look (Host.look) that answers first */
  async stat(path: string, look?: LookMemo): Promise<FileStat | null> {
    const ask = () =>
      this.memoLook('stat', () => this.look(() => this.statScript(), [path], { timeoutMs: 15000 }), [path]);
    const r = look ? await look.ask('stat', [path], ask) : await ask();
    if (r.code === 3) return null;
    if (r.code !== 0) throw this.errorFor(path, r, 'stat');
    const [ino, type, size, mt, perm, uid, nlink, dev] = r.stdout.toString().trim().split(' ');
    const st = statOf(ino, type, size, mt, perm);
    // owner, links and device (find's %U %n %D; the ls fallback has no device): for pointer checks
    const num = (x: string | undefined) => (x !== undefined && /^\d+$/.test(x) ? Number(x) : undefined);
    if (num(uid) !== undefined) st.uid = num(uid);
    if (num(nlink) !== undefined) st.nlink = num(nlink);
    if (num(dev) !== undefined) st.dev = num(dev);
    return st;
  }

  async list(dir: string, look?: LookMemo): Promise<DirEntry[]> {
    // a dir that can be listed but not searched (mode 444) holds nothing readable: EACCES
    const script = () =>
      `[ -d "$1" ] || exit 3; [ -r "$1" ] && [ -x "$1" ] || { echo "$1: Permission denied (EACCES)" >&2; exit 13; }; ` +
      (this.box.gnuFind ? `find -L "$1" -mindepth 1 -maxdepth 1 -printf '%i %y %s %T@ %f\\n'` : `ls -lnaiL "$1"`);
    const ask = () => this.memoLook('list', () => this.look(script, [dir], { timeoutMs: 15000 }), [dir]);
    const r = look ? await look.ask('list', [dir], ask) : await ask();
    const now = Date.now() + this.box.clockOffsetMs;
    const out: DirEntry[] = [];
    for (const line of r.stdout.toString('utf8').split('\n')) {
      const e = this.box.gnuFind ? parseFindEntry(line) : parseLsLine(line, now);
      if (e) out.push(e);
    }
    // find/ls exit non-zero for one bad entry (a symlink loop, a dangling link) after listing the
    // rest: the listing stands; only a listing with nothing in it is the directory's own failure
    if (r.code !== 0 && (r.code === 3 || r.timedOut || out.length === 0)) throw this.errorFor(dir, r, 'list');
    return sortByName(out);
  }

  async readRange(path: string, start: number, end?: number, look?: LookMemo): Promise<Buffer> {
    if (!Number.isInteger(start) || start < 0) throw new Error(`invalid offset ${start}`);
    if (look) {
      // a file the look's look-ahead brought whole (or found missing, or not a regular file)
      const w = await look.wholeFile(path);
      if (w?.kind === 'data')
        return Buffer.from(w.data.subarray(start, end === undefined ? undefined : Math.max(start, end)));
      if (w) {
        const code = w.kind === 'missing' ? 3 : 4;
        throw this.errorFor(
          path,
          { code, stderr: Buffer.from(code === 4 ? NOT_REGULAR : ''), timedOut: false },
          'read',
        );
      }
      const r = await look.ask('read', [path, String(start), String(end ?? '')], () => this.readRaw(path, start, end));
      if (r.code !== 0) throw this.errorFor(path, r, 'read');
      return Buffer.from(r.stdout);
    }
    const r = await this.readRaw(path, start, end);
    if (r.code !== 0) throw this.errorFor(path, r, 'read');
    return r.stdout;
  }

  /** readRange's script answer (its own stdout: never one another caller holds) */
  private async readRaw(path: string, start: number, end?: number): Promise<RawResult> {
    // only a regular file is read: `tail` of a FIFO would wait for a writer until the timeout
    const guard = `[ -e "$1" ] || exit 3; [ -f "$1" ] || { echo "${NOT_REGULAR}" >&2; exit 4; }; `;
    const script = end === undefined ? `${guard}tail -c +"$2" "$1"` : `${guard}tail -c +"$2" "$1" | head -c "$3"`;
    const args = [path, String(start + 1)];
    if (end !== undefined) args.push(String(Math.max(0, end - start)));
    const opts = { maxOutputBytes: 1 << 30, timeoutMs: 120000 };
    if (end !== undefined && end - start <= LOOP_READ_MAX) {
      const r = await this.memoLook('read', () => this.look(() => script, args, { ...opts, timeoutMs: 30000 }), args);
      return { ...r, stdout: Buffer.from(r.stdout) };
    }
    // to the end of the file: in the loop when it is small (most are), else by exec in full
    const capped = end === undefined ? `${guard}tail -c +"$2" "$1" | head -c ${LOOP_READ_MAX + 1}` : null;
    const small = capped && this.loop ? await this.loop(() => capped, args, 30000) : null;
    return small && (small.code !== 0 || small.stdout.length <= LOOP_READ_MAX)
      ? small
      : await this.cmds.sh(script, args, opts);
  }

  async readFile(path: string, maxBytes?: number, look?: LookMemo): Promise<Buffer> {
    return this.readRange(path, 0, maxBytes, look);
  }

  async writeFile(
    path: string,
    data: string | Buffer,
    opts: { exclusive?: boolean; mode?: number } = {},
  ): Promise<void> {
    const mode = opts.mode !== undefined ? (opts.mode & 0o7777).toString(8) : '';
    const script =
      (opts.exclusive
        ? `if [ -e "$1" ] || [ -L "$1" ]; then echo "$1: File exists" >&2; exit 17; fi; set -C; `
        : `[ -L "$1" ] && { echo "$1: is a symbolic link: refused" >&2; exit 40; }; `) +
      `cat > "$1" || exit 1; if [ -n "$2" ]; then chmod "$2" "$1" || exit 1; fi`;
    const r = await this.change(script, [path, mode], data);
    if (r.code !== 0) throw this.errorFor(path, r, 'write');
  }

  async appendFile(path: string, data: string | Buffer): Promise<void> {
    const r = await this.change(
      `[ -L "$1" ] && { echo "$1: is a symbolic link: refused" >&2; exit 40; }; cat >> "$1"`,
      [path],
      data,
    );
    if (r.code !== 0) throw this.errorFor(path, r, 'append to');
  }

  async mkdirp(path: string): Promise<void> {
    const r = await this.change(`mkdir -p -- "$1"`, [path]);
    if (r.code !== 0) throw this.errorFor(path, r, 'mkdir');
  }

  async remove(path: string): Promise<void> {
    const r = await this.change(
      `[ -e "$1" ] || [ -L "$1" ] || exit 3; [ -d "$1" ] && { echo "$1 is a directory" >&2; exit 1; }; rm -f -- "$1"`,
      [path],
    );
    if (r.code !== 0) throw this.errorFor(path, r, 'remove');
  }

  /**
   * nsa-top's own files on the remote box (see Host.writeOwn), by one guarded sh script: `cd -P`
   * into the root, then into `sub` only when it is a real directory (`[ -h ]` first), then the file
   * by its bare name, refused when it is a link or not a regular file. Where GNU dd is there the
   * write itself opens with O_NOFOLLOW (`oflag=nofollow`, `conv=excl`), so a link planted between
   * the check and the write is refused too; elsewhere `set -C` keeps an exclusive create exclusive.
   * Before an append, `ls -ln` checks the file is nsa-top's own alone — one link, owned by the user (a hard link
   * passes every link test above); one that is not is renamed aside to `<name>.suspect-<ts>` and a
   * fresh file takes the data, as locally (src/remote/local/ownfiles.ts). Where /proc is, the file
   * the script opened is checked again through /proc/$$/fd/3 before any byte is written (one link,
   * the user's, the name's inode), so a link swapped in after the name check is refused too.
   */
  async writeOwn(
    root: string,
    rel: string,
    data: string | Buffer,
    mode: OwnWriteMode,
    fileMode?: number,
  ): Promise<OwnWriteDone | undefined> {
    const [sub, name] = splitOwnRel(rel);
    // only 0600 is asked for (a private record): the script creates it under umask 077
    const priv = fileMode !== undefined && (fileMode & 0o077) === 0 ? 'private' : '';
    const r = await this.change(OWN_WRITE_SCRIPT, [root, sub ?? '', name, mode, priv], data);
    if (r.code !== 0) throw this.ownErrorFor(`${root}/${rel}`, r, mode);
    const m = /^set-aside (\S+) (.+)$/m.exec(r.stdout.toString('utf8'));
    return m ? { setAside: m[1]!, why: m[2]! } : undefined;
  }

  async removeOwn(root: string, rel: string): Promise<void> {
    const [sub, name] = splitOwnRel(rel);
    const r = await this.change(OWN_REMOVE_SCRIPT, [root, sub ?? '', name]);
    if (r.code !== 0) throw this.ownErrorFor(`${root}/${rel}`, r, 'remove');
  }

  private ownErrorFor(path: string, r: Failure, what: string): Error {
    const msg = lastLine(r);
    const code = r.timedOut ? 'ETIMEDOUT' : (OWN_CODES[r.code ?? -1] ?? 'EIO');
    const why = r.timedOut ? 'timed out' : msg.replace(/^[^:]*: /, '') || `exit ${r.code}`;
    const partial = r.code === 45 || (r.code === 44 && what === 'append');
    const text =
      r.code === 45 ? `created, but its content could not be written (${why})` : (OWN_TEXTS[r.code ?? -1] ?? why);
    // the culprit: `.nsa-top` (the script names it by its full path) or the file itself
    const who = msg.startsWith('/') ? msg.slice(0, msg.indexOf(': ')) : path;
    return ownError(code, `${who} on ${this.label}`, text, partial);
  }

  /**
   * `kill -s SIG pid` on the remote box. With `expect.startTime`, the remote side first checks
   * /proc/PID/stat field 22 in the same command, so a recycled pid is never signalled.
   */
  async signal(pid: number, sig: SignalName, expect?: SignalExpect): Promise<void> {
    if (!Number.isInteger(pid) || pid <= 1) throw new Error(`refusing to signal pid ${pid}`);
    const name = sig === 'SIG0' ? '0' : sig.replace(/^SIG/, '');
    if (!/^[A-Z0-9]+$/.test(name)) throw new Error(`invalid signal ${sig}`);
    const sigNo = expect?.requireHandler ? CATCHABLE_SIGNALS[sig] : undefined;
    if (expect?.requireHandler && sigNo === undefined)
      throw new Error(`${sig} cannot be caught: no handler to require`);
    let script = `kill -s ${name} "$1"`;
    const args = [String(pid)];
    if (expect) {
      if (!/^\d+$/.test(expect.startTime)) throw new Error(`invalid start time ${expect.startTime}`);
      // the handler: SigCgt's last 8 hex digits (signals 1-32) hold the signal's bit; read in the
      // same command as the start time and the kill
      const handler =
        sigNo === undefined
          ? ''
          : `c=; while read -r k v; do if [ "$k" = "SigCgt:" ]; then c=$v; fi; done < /proc/"$1"/status || exit 3; ` +
            `case "$c" in '' | *[!0-9a-fA-F]*) exit 5 ;; esac; [ \${#c} -gt 8 ] && c=\${c#"\${c%????????}"}; ` +
            `[ $(( (0x$c >> ${sigNo - 1}) & 1 )) -eq 1 ] || exit 5; `;
      script = `read -r s < /proc/"$1"/stat || exit 3; s=\${s##*) }; set -f; set -- "$1" "$2" $s; [ "\${22}" = "$2" ] || exit 4; ${handler}${script}`;
      args.push(expect.startTime);
    }
    // a signal may make files (a stack dump): no look answered before it answers after it
    this.forgetLooks();
    const r = await this.look(() => script, args, { timeoutMs: 15000 });
    this.forgetLooks();
    if (r.code === 3) throw Object.assign(new Error(`pid ${pid} is gone`), { code: 'ESRCH' });
    if (r.code === 5 && sigNo !== undefined) throw noHandlerError(pid, sig);
    if (r.code === 4)
      throw Object.assign(new Error(`pid ${pid} is another process now (start time changed): not signalled`), {
        code: 'ESRCH',
      });
    if (r.code !== 0) {
      const msg = r.stderr.toString().trim();
      const e = new Error(
        `kill -s ${name} ${pid} on ${this.label}: ${r.timedOut ? 'timed out' : msg || `exit ${r.code}`}`,
      ) as NodeJS.ErrnoException;
      e.code = /not permitted/i.test(msg) ? 'EPERM' : /no such process/i.test(msg) ? 'ESRCH' : 'EIO';
      throw e;
    }
  }
}

// ------------------------------------------------------------------ nsa-top's own files (remote)

/** exit codes of the scripts below → errno names */
const OWN_CODES: Record<number, string> = {
  3: 'ENOENT',
  17: 'EEXIST',
  40: 'ELOOP',
  42: 'ENOTDIR',
  43: 'EFTYPE',
  44: 'EIO',
  45: 'EIO',
  46: 'ESUSPECT',
};

/** what the exit codes of the scripts below say about the file */
const OWN_TEXTS: Record<number, string> = {
  40: 'is a symbolic link: refused (nsa-top never writes through a link)',
  42: 'is not a directory: refused',
  43: 'is not a regular file: refused',
  17: 'already exists',
};

/**
 * $1 root, $2 sub ('' for none), $3 name, $4 append|exclusive|replace, $5 'private' (0600); data
 * on stdin. Exported for
 * a test that runs it under sh with an `ls` that lies about the name (the race between the name
 * check and the open).
 */
export const OWN_WRITE_SCRIPT = `set -f
r=$1 sub=$2 n=$3 m=$4
[ "$5" = private ] && umask 077
cd -P -- "$r" 2>/dev/null || { echo "$r: cannot enter the directory" >&2; exit 3; }
if [ -n "$sub" ]; then
  [ -h "$sub" ] && { echo "$r/$sub: is a link" >&2; exit 40; }
  [ -e "$sub" ] || mkdir -- "$sub" 2>/dev/null
  [ -h "$sub" ] && { echo "$r/$sub: is a link" >&2; exit 40; }
  [ -d "$sub" ] || { echo "$r/$sub: not a directory" >&2; exit 42; }
  cd -P -- "$sub" || exit 42
fi
if [ -h "$n" ]; then
  # replace puts a file in the link's place (the rename never follows it); the others refuse
  [ "$m" = replace ] || { echo "$n: is a link" >&2; exit 40; }
  rm -f -- "$n" || exit 44
fi
if [ -e "$n" ] && [ ! -f "$n" ]; then echo "$n: not a regular file" >&2; exit 43; fi
nf=; if dd if=/dev/null of=/dev/null oflag=nofollow status=none 2>/dev/null; then nf=1; fi
case $m in
exclusive)
  [ -e "$n" ] && { echo "$n: File exists" >&2; exit 17; }
  if [ -n "$nf" ]; then e=$(dd of="$n" conv=excl oflag=nofollow status=none 2>&1); rc=$?
  else e=$( (set -C; cat > "$n") 2>&1 ); rc=$?; fi
  if [ $rc -ne 0 ]; then
    case $e in *[Ee]xists*) echo "$n: File exists" >&2; exit 17;; *[Tt]oo\\ many\\ levels*|*[Ss]ymbolic*) echo "$n: is a link" >&2; exit 40;; esac
    [ -f "$n" ] && { echo "$n: $e" >&2; exit 45; }
    echo "$n: $e" >&2; exit 44
  fi;;
append)
  # a hard link passes every test above: append only to a file with one link, owned by this user;
  # any other is renamed aside (never written, never deleted) and a fresh file takes the data
  # (ls -ln: POSIX everywhere; BusyBox find may lack -links)
  u=$(id -u) c=notrunc l=1 o=$u
  [ -e "$n" ] && { set -- $(ls -lnd -- "$n") x x x; l=$2 o=$3; }
  if [ "$l" != 1 ] || [ "$o" != "$u" ]; then
    why="has $l hard links (it is also another file)"
    [ "$l" = 1 ] && why="is owned by uid $o, not by this user (uid $u)"
    b="$n.suspect-$(date -u +%Y%m%dT%H%M%SZ)"; s=$b; i=0
    while [ -e "$s" ] || [ -h "$s" ]; do i=$((i+1)); s="$b-$i"; done
    mv -- "$n" "$s" 2>/dev/null || { echo "$n: $why: refused, and it could not be set aside" >&2; exit 46; }
    echo "set-aside $s $why"; c=excl
  fi
  if [ -n "$nf" ] && [ -d "/proc/$$/fd" ]; then
    # the check above was on the name: open it, then check the open file itself (its /proc fd) —
    # one link, ours, the same inode as the name (not a link swapped in) — before any byte is written
    dd of="$n" oflag=append,nofollow conv=$c status=none </dev/null || exit 44
    exec 3>>"$n" || exit 44
    set -- $(ls -lnLd "/proc/$$/fd/3") x x x; l=$2 o=$3
    i3=$(ls -iLd "/proc/$$/fd/3"); i3=\${i3%% *}; i=$(ls -id -- "$n"); i=\${i%% *}
    if [ "$l" != 1 ] || [ "$o" != "$u" ] || [ "$i3" != "$i" ]; then
      exec 3>&-; echo "$n: changed while it was checked (links $l, uid $o): refused" >&2; exit 46
    fi
    cat >&3 || exit 44
  elif [ -n "$nf" ]; then dd of="$n" oflag=append,nofollow conv=$c status=none || exit 44
  else cat >> "$n" || exit 44; fi;;
replace)
  t=".$n.nsa-top.$$.tmp"
  if [ -n "$nf" ]; then dd of="$t" conv=excl oflag=nofollow status=none || { rm -f -- "$t"; exit 44; }
  else (set -C; cat > "$t") || { rm -f -- "$t"; exit 44; }; fi
  [ -d "$n" ] && { rm -f -- "$t"; echo "$n: not a regular file" >&2; exit 43; }
  mv -f -- "$t" "$n" || { rm -f -- "$t"; exit 44; };;
*) exit 2;;
esac`;

/** $1 root, $2 sub, $3 name: removes the name itself (a link is removed, never followed) */
const OWN_REMOVE_SCRIPT = `set -f
cd -P -- "$1" 2>/dev/null || exit 3
if [ -n "$2" ]; then [ -h "$2" ] && { echo "$1/$2: is a link" >&2; exit 40; }; cd -P -- "$2" 2>/dev/null || exit 3; fi
[ -e "$3" ] || [ -h "$3" ] || exit 3
[ -d "$3" ] && [ ! -h "$3" ] && { echo "$3: is a directory" >&2; exit 43; }
rm -f -- "$3" || exit 44`;
