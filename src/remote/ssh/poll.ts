// SshHost.pollDir: one round of a directory poll served by the watch loop (see Host.pollDir).
// The listings and followed bytes are those of the loop's last frame and cost no round trip; a
// path read for the first time, or re-read from an earlier offset, is a one-shot read answered by
// the next frame; reading a path again from where the last read ended makes it a follow.
// A poll in a look whose look-ahead read the dir (look.ts, LookAhead.readDirs) takes the listings
// and first reads the look-ahead brought instead: no frame and no read round of its own (the dirs
// are registered all the same, and a path read so is followed from where that read ended).
import { dur } from '../../format.js';
import type { ConnState, DirEntry, DirPoll, ReadRequest, ReadResult } from '../host.js';
import { FRAME_WAIT_MS, safePath, type Follow, type OneShotAnswer, type WatchLoop } from './watch.js';
import type { LookPoll } from './look.js';

const STALL_MS = 10_000;

/** How one read request of a poll is served. */
interface Plan {
  req: ReadRequest;
  follow?: Follow;
  oneShot?: Promise<OneShotAnswer>;
  /** answered from a look-ahead (LookPoll) */
  looked?: ReadResult;
  error?: string;
}

/** What the connection says right now. */
export interface PollLink {
  readonly label: string;
  connected(): boolean;
  state(): ConnState;
  /** host wall clock (ms) */
  now(): number;
}

const hasNewline = (p: string) => p.includes('\n') || p.includes('\0');
const noData = (req: ReadRequest, error: string, stat: ReadResult['stat'] = null): ReadResult => ({
  path: req.path,
  stat,
  offset: req.offset,
  data: Buffer.alloc(0),
  error,
});
export const subdirPath = (dir: string, s: string) => `${dir.replace(/\/+$/, '')}/${s}`;

export class DirPoller {
  /** end offset of the last read handed out per path, to notice sequential reading */
  private readonly seqEnd = new Map<string, number>();

  constructor(
    private readonly loop: WatchLoop,
    private readonly link: PollLink,
    private readonly stallMs = STALL_MS,
  ) {}

  /** `pre`: what a look-ahead of the caller's look brought of this dir (SshLook.pollDir) */
  async pollDir(
    dir: string,
    reads: ReadRequest[],
    subdirs: string[] = [],
    pre: LookPoll | null = null,
  ): Promise<DirPoll> {
    const now = Date.now();
    if (hasNewline(dir)) return this.refused(dir, reads);
    const { live, downWhy } = await this.liveness();
    // down and nothing registered: what is cached is all there is
    if (!live && this.loop.idle) return this.cachedPoll(dir, reads, subdirs, downWhy);
    if (!live) pre = null;
    // which request of each path is its follow; the others are one-shot reads
    const claimed = new Set<string>();
    const plans: Plan[] = [];
    let needFrame = false;
    for (const req of reads) {
      const p = this.plan(req, claimed, live, downWhy, now, pre);
      plans.push(p.plan);
      needFrame ||= p.needFrame;
    }
    // a poll of first reads the look-ahead answered all of goes on with its listing too (the run
    // model's second poll of a round: the files that listing showed)
    const firstReads = plans.length > 0 && plans.every((p) => p.looked);
    const looked = new Set<string>();
    const dirs = [dir, ...subdirs.map((s) => subdirPath(dir, s))];
    if (this.watchDirs(dirs, now, pre, firstReads, looked)) needFrame = true;
    // one-shot answers and fresh registrations arrive by the end of the next frame
    const frameError = live ? (needFrame ? await this.awaitFrame() : undefined) : downWhy;
    this.loop.expireLeases(now);
    const results: ReadResult[] = [];
    for (const pl of plans) results.push(await this.answer(pl, frameError, live));
    return this.assemble(dir, subdirs, results, frameError, looked);
  }

  /** A directory name with a newline cannot travel over the loop's line protocol. */
  private refused(dir: string, reads: ReadRequest[]): DirPoll {
    return {
      dir,
      entries: null,
      subdirs: {},
      reads: reads.map((r) => noData(r, 'path contains a newline')),
      error: 'directory name contains a newline: not supported over SSH',
      hostNowMs: this.link.now(),
    };
  }

  /** Whether the loop is (or can be brought) up; else why not. */
  private async liveness(): Promise<{ live: boolean; downWhy: string }> {
    let live = this.link.connected();
    let downWhy = '';
    if (live) {
      try {
        await this.loop.ensure();
      } catch (e) {
        live = false;
        downWhy = (e as Error).message;
      }
    }
    if (!live) {
      const st = this.link.state();
      downWhy ||=
        st.state === 'reconnecting'
          ? `reconnecting to ${this.link.label} (attempt ${st.attempt}): ${st.lastError}`
          : `not connected to ${this.link.label}`;
    }
    return { live, downWhy };
  }

  /**
   * Registers the directories to list; true when one of them has no frame yet and no listing from
   * `pre` (those it lists are taken from it, and added to `looked`).
   */
  private watchDirs(
    paths: string[],
    now: number,
    pre: LookPoll | null,
    firstReads: boolean,
    looked: Set<string>,
  ): boolean {
    let needFrame = false;
    for (const p of paths) {
      const { dir, fresh } = this.loop.watchDir(p, now);
      if (!fresh && dir.validFromSeq <= this.loop.doneSeq) continue;
      const l = pre?.lists.get(p);
      // a dir newly watched, or still on this look-ahead's listing with only its first reads asked
      // (a poll with nothing new to read — a round again — waits for a frame: fresh sizes)
      if (pre && l !== undefined && (fresh || (dir.lookedBy === pre.token && firstReads))) {
        // the look-ahead's listing stands until a frame brings the loop's own
        dir.entries = l;
        dir.lookedBy = pre.token;
        looked.add(p);
      } else needFrame = true;
    }
    return needFrame;
  }

  /** How `req` is served: its path's follow, a new follow, a re-follow, or a one-shot read. */
  private plan(
    req: ReadRequest,
    claimed: Set<string>,
    live: boolean,
    downWhy: string,
    now: number,
    pre: LookPoll | null,
  ): { plan: Plan; needFrame: boolean } {
    if (hasNewline(req.path))
      return { plan: { req, error: 'path contains a newline: not supported over SSH' }, needFrame: false };
    const f = this.loop.follows.get(req.path);
    const first = !claimed.has(req.path);
    // a path never read (nor followed) that the look-ahead brought whole: its bytes from there
    const w =
      live && !f && !this.seqEnd.has(req.path) && !this.loop.lastIno.has(req.path)
        ? pre?.whole.get(req.path)
        : undefined;
    if (w && req.offset <= w.data.length) {
      const data = w.data.subarray(req.offset, req.offset + (req.maxBytes ?? w.data.length));
      return {
        plan: { req, looked: { path: req.path, stat: w.stat, offset: req.offset, data: Buffer.from(data) } },
        needFrame: false,
      };
    }
    if (
      f &&
      first &&
      (f.pendingReset || (req.offset >= f.base && req.offset <= f.base + f.len && req.offset >= f.delivered))
    ) {
      claimed.add(req.path);
      f.lastUsed = now;
      const needFrame = f.validFromSeq > this.loop.doneSeq;
      this.loop.resumeIfDrained(f, req.offset);
      return { plan: { req, follow: f }, needFrame };
    }
    // sequential continuation of an earlier read of this path: start following it
    if (!f && first && this.seqEnd.get(req.path) === req.offset) {
      claimed.add(req.path);
      return { plan: { req, follow: this.loop.startFollow(req.path, req.offset, now) }, needFrame: true };
    }
    if (f && first) {
      // the caller went back (re-reads a rewritten file) or jumped: re-follow from its offset
      claimed.add(req.path);
      this.loop.refollow(f, req.offset, now);
      return { plan: { req, follow: f }, needFrame: true };
    }
    if (!live) return { plan: { req, error: downWhy }, needFrame: false };
    const max = req.maxBytes ?? Number.MAX_SAFE_INTEGER;
    return {
      plan: { req, oneShot: this.loop.oneShot(safePath(req.path), req.offset, Math.min(max, 1 << 30)) },
      needFrame: true,
    };
  }

  /** Ticks the loop and waits for that frame; an error when it did not come. */
  private async awaitFrame(): Promise<string | undefined> {
    const seq = this.loop.tick();
    const ok = await this.loop.waitSeq(seq, FRAME_WAIT_MS);
    if (ok) return undefined;
    return this.loop.up ? 'remote watch loop did not answer in time' : 'connection lost';
  }

  private async answer(pl: Plan, frameError: string | undefined, live: boolean): Promise<ReadResult> {
    const { req } = pl;
    if (pl.error) return noData(req, pl.error);
    if (pl.looked) {
      // as a one-shot read: the next read from where it ended follows the path, from this inode
      this.seqEnd.set(req.path, pl.looked.offset + pl.looked.data.length);
      if (pl.looked.stat) this.loop.lastIno.set(req.path, pl.looked.stat.ino);
      return pl.looked;
    }
    if (pl.oneShot) return this.fromOneShot(req, pl.oneShot, frameError);
    return this.fromFollow(req, pl.follow!, frameError, live);
  }

  private async fromOneShot(
    req: ReadRequest,
    pending: Promise<OneShotAnswer>,
    frameError: string | undefined,
  ): Promise<ReadResult> {
    // the grace timer is cleared once the answer came: a pending one would hold the process up to
    // a second after close (the CLI exits when nothing is pending)
    let t: NodeJS.Timeout | undefined;
    const late = new Promise<null>((r) => (t = setTimeout(() => r(null), frameError ? 0 : 1000)));
    const r = await Promise.race([pending, late]).finally(() => clearTimeout(t));
    if (!r) return noData(req, frameError ?? 'no answer');
    if (!r.error && r.stat) this.seqEnd.set(req.path, r.offset + r.data.length);
    return { path: req.path, stat: r.stat, offset: r.offset, data: r.data, reset: r.reset, error: r.error };
  }

  /** The follow's buffered bytes from the request's offset (what was consumed before is dropped). */
  private fromFollow(req: ReadRequest, f: Follow, frameError: string | undefined, live: boolean): ReadResult {
    if (f.validFromSeq > this.loop.doneSeq) return noData(req, frameError ?? 'no answer yet', f.stat);
    const stall = this.loop.watchStallMs();
    if (live && stall > this.stallMs && f.len - Math.max(0, req.offset - f.base) <= 0) {
      // nothing new because the remote side is stuck (a hung file system?), not because the run is quiet
      return noData(req, `remote reads stalled for ${dur(stall / 1000)} (hung file system?)`, f.stat);
    }
    let reset: ReadResult['reset'];
    let from = req.offset;
    if (f.pendingReset) {
      reset = f.pendingReset;
      f.pendingReset = undefined;
      from = 0;
    }
    if (from < f.base) from = f.base;
    this.loop.dropBefore(f, from);
    const max = req.maxBytes ?? Number.MAX_SAFE_INTEGER;
    const all = f.chunks.length === 1 ? f.chunks[0]! : Buffer.concat(f.chunks);
    f.chunks = all.length ? [all] : [];
    const data = all.subarray(0, Math.min(all.length, max));
    f.delivered = from + data.length;
    this.seqEnd.set(req.path, f.delivered);
    if (f.stat) this.loop.lastIno.set(req.path, f.stat.ino);
    const rr: ReadResult = { path: req.path, stat: f.stat, offset: from, data: Buffer.from(data) };
    if (reset) rr.reset = reset;
    if (f.error) rr.error = f.error;
    return rr;
  }

  /** The listings as the last frame (or this poll's look-ahead: `looked`) brought them, with the reads. */
  private listings(dir: string, subdirs: string[], looked?: Set<string>) {
    const main = this.loop.dirs.get(dir);
    const sub: Record<string, DirEntry[] | null> = {};
    const subErr: Record<string, string> = {};
    for (const s of subdirs) {
      const p = subdirPath(dir, s);
      const d = this.loop.dirs.get(p);
      sub[s] = d?.entries ?? null;
      // listed by a frame and still no entries: gone, or not listable (the listing does not say which)
      if (d && d.entries === null && (d.validFromSeq <= this.loop.doneSeq || looked?.has(p)))
        subErr[s] = `cannot list ${s}/ on ${this.link.label} (missing or unreadable)`;
    }
    return { main, sub, subErr };
  }

  private assemble(
    dir: string,
    subdirs: string[],
    reads: ReadResult[],
    frameError: string | undefined,
    looked?: Set<string>,
  ): DirPoll {
    const { main, sub, subErr } = this.listings(dir, subdirs, looked);
    const out: DirPoll = { dir, entries: main?.entries ?? null, subdirs: sub, reads, hostNowMs: this.link.now() };
    if (Object.keys(subErr).length) out.subdirErrors = subErr;
    if (main && main.entries === null && (main.validFromSeq <= this.loop.doneSeq || looked?.has(dir)))
      out.error = `ENOENT: ${dir} is missing or unreadable on ${this.link.label}`;
    if (frameError && !main?.entries) out.error = frameError;
    return out;
  }

  private cachedPoll(dir: string, reads: ReadRequest[], subdirs: string[], error: string): DirPoll {
    const { main, sub } = this.listings(dir, subdirs);
    const rs = reads.map((r) => noData(r, error, this.loop.follows.get(r.path)?.stat ?? null));
    const out: DirPoll = { dir, entries: main?.entries ?? null, subdirs: sub, reads: rs, hostNowMs: this.link.now() };
    if (!main?.entries) out.error = error;
    return out;
  }
}
