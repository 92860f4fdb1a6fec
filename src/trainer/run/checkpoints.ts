// Which checkpoint can a run resume from? The one holding the NEWEST WEIGHTS that is COMPLETE.
// Newest = written last: the real trainer's --resume loads weights only and restarts its step count
// at 1, so after a resume a later segment's checkpoint_step20.pt holds newer weights than an
// earlier segment's checkpoint_step60.pt (and may overwrite an earlier segment's file of the same
// name). pickResumeCheckpoint orders by the run's own history (segments from the heartbeat's boot
// records), then mtime, then step — never by step alone — and cross-checks the trainer's log
// ("[train] resumed from" / "resume failed"). Complete (the real launcher's `ls -t` picks a
// half-written file as happily as a good one):
//  - its size is stable across two stats about a second apart (or it is a few seconds old), and
//  - it is readable: a torch zip (.pt) has its end-of-central-directory record (PK\x05\x06) in the
//    last 64 KiB; nsa-top's reference trainer ends every checkpoint with a u32 CRC and the ASCII
//    trailer "NSACKEND".
// A skipped file is named with the reason in `why`.
import { clock, dur } from '../../format.js';
import { basename, join } from 'node:path';
import { hostOf, type FileStat, type Host } from '../../remote/host.js';

export interface CompleteCheckpoint {
  path: string;
  step: number;
  /** files newer by step that were skipped, and why */
  why: string[];
}

export const CKPT_RE = /^checkpoint_(fsdp_)?step(\d+)(\.[A-Za-z0-9]+)?$/;
const TRAILER = Buffer.from('NSACKEND', 'ascii');
const EOCD = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const TAIL = 64 * 1024 + 22;
const REF_MAGIC = Buffer.from('NSATOPCK', 'ascii');
const CRC_CHECK_MAX = 64 * 1024 * 1024;

export interface CheckpointCheckOptions {
  /** a file not modified for this long counts as settled without a second stat (default 5000) */
  settledMs?: number;
  /** wait between the two stats otherwise (default 1000) */
  stableWaitMs?: number;
  /**
   * files another look has already judged complete (status: the run model's own judgement, whose
   * evidence includes the saving rank having stepped past the file: build.ts checkpointsOf): one
   * still at that size and mtime needs no settle wait (its end is still read)
   */
  settled?: SeenSettled | Promise<SeenSettled>;
}

type SeenSettled = readonly { path: string; size: number; mtimeMs: number }[];

/** whether `st` is `path` as a look already judged complete (CheckpointCheckOptions.settled) */
function seenSettled(seen: SeenSettled | undefined, path: string, st: { size: number; mtimeMs: number }): boolean {
  return !!seen?.some((s) => s.path === path && s.size === st.size && s.mtimeMs === st.mtimeMs);
}

/** A real end-of-central-directory record ends the file exactly (22 bytes + its comment). */
function hasEocd(tail: Buffer): boolean {
  for (let i = tail.lastIndexOf(EOCD); i >= 0; i = i > 0 ? tail.lastIndexOf(EOCD, i - 1) : -1) {
    if (i + 22 <= tail.length && i + 22 + tail.readUInt16LE(i + 20) === tail.length) return true;
  }
  return false;
}

/** Reads the tail and says whether the file is structurally complete; null = fine. */
export async function checkpointTailProblem(host: Host, path: string, size: number): Promise<string | null> {
  if (size === 0) return 'empty file';
  const start = Math.max(0, size - TAIL);
  const tail = await host.readRange(path, start, size);
  if (tail.length < Math.min(size, TAIL)) return `short read (${tail.length} of ${Math.min(size, TAIL)} bytes)`;
  if (tail.length >= TRAILER.length + 4 && tail.subarray(tail.length - TRAILER.length).equals(TRAILER)) {
    // nsa-top reference format: u32 LE CRC-32 of every byte before it, then the trailer.
    // Checked in full when small enough to read cheaply (the reference trainer's are ~1 MB).
    if (size > CRC_CHECK_MAX) return null;
    const all = size <= tail.length && start === 0 ? tail : await host.readRange(path, 0, size);
    if (all.length !== size) return `short read (${all.length} of ${size} bytes)`;
    const body = all.subarray(0, size - TRAILER.length - 4);
    const want = all.readUInt32LE(size - TRAILER.length - 4);
    // node:zlib (with the stream modules it loads) only here: most looks never check a CRC
    const { crc32 } = await import('node:zlib');
    return crc32(body) >>> 0 === want ? null : 'CRC mismatch (corrupt or overwritten in place)';
  }
  if (hasEocd(tail)) return null;
  const head = await host.readRange(path, 0, Math.min(size, 8));
  if (head.subarray(0, 2).equals(Buffer.from('PK')))
    return 'zip without its end-of-central-directory record in the last 64 KiB (still being written?)';
  if (head.subarray(0, 8).equals(REF_MAGIC)) return 'no NSACKEND trailer (still being written?)';
  // Legacy (non-zip) torch pickles cannot be checked structurally; size stability must do.
  if (head[0] === 0x80) return null;
  return 'neither a torch zip nor an nsa-top checkpoint (no end record, no NSACKEND trailer)';
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Every checkpoint_step*.* file in `dir`, highest step first (NOT the resume order: see pickResumeCheckpoint). */
export async function listCheckpoints(
  host: Host,
  dir: string,
): Promise<{ name: string; path: string; step: number; size: number; mtimeMs: number }[]> {
  let entries;
  try {
    entries = await host.list(dir);
  } catch {
    return [];
  }
  const out = [];
  for (const e of entries) {
    if (!e.isFile) continue;
    const m = CKPT_RE.exec(e.name);
    if (!m) continue;
    out.push({ name: e.name, path: join(dir, e.name), step: Number(m[2]), size: e.size, mtimeMs: e.mtimeMs });
  }
  // newest step first; among equal steps (fsdp and plain) the newer file first
  return out.sort((a, b) => b.step - a.step || b.mtimeMs - a.mtimeMs);
}

/** The checkpoint to resume from (see pickResumeCheckpoint), or null. */
export async function newestCompleteCheckpoint(
  host: Host,
  dir: string,
  opts: CheckpointCheckOptions = {},
): Promise<CompleteCheckpoint | null> {
  return (await scanCheckpoints(host, dir, opts)).found;
}

/** Like newestCompleteCheckpoint, but also says why when none qualifies (`why`: skipped files). */
export async function scanCheckpoints(
  host: Host,
  dir: string,
  opts: CheckpointCheckOptions = {},
): Promise<{ found: CompleteCheckpoint | null; why: string[] }> {
  const r = await pickResumeCheckpoint(host, dir, opts);
  return { found: r.found ? { path: r.found.path, step: r.found.step, why: r.skipped } : null, why: r.skipped };
}

// ---------------------------------------------------------------------------------------------
// The newest weights: segment order, then mtime, then step

/** One run segment = one trainer process (a heartbeat `boot` record with a new pid). */
export interface RunSegmentMark {
  /** 0-based, in boot order: the same numbering as status --json `segments[].index` in the usual case */
  index: number;
  /** ms epoch of the boot record */
  startTs: number;
  pid: number | null;
  /** the last step rank 0 logged in this segment (null: none logged) */
  lastStep: number | null;
}

export interface ResumeChoice {
  path: string;
  name: string;
  step: number;
  mtimeMs: number;
  /** the segment that wrote it (0-based, see RunSegmentMark), -1 = before the first recorded boot, null = no history */
  segment: number | null;
  /** one line: why this file */
  why: string;
}

export interface ResumePick {
  found: ResumeChoice | null;
  /** files passed over as incomplete or unreadable, with the reason */
  skipped: string[];
  /** things the operator should know: overwritten/overwritable files, a failed resume in the log */
  warnings: string[];
  segments: RunSegmentMark[];
}

const HB_RE = /^heartbeat_rank(\d+)\.jsonl$/;
const SCAN_CHUNK = 4 * 1024 * 1024;
const SCAN_MAX = 512 * 1024 * 1024;

/** The heartbeat file the segments are read from: rank 0's (the lowest rank present). */
async function segmentHeartbeat(
  host: Host,
  outDir: string,
): Promise<{ name: string; rank: number; size: number } | null> {
  let entries;
  try {
    entries = await host.list(outDir);
  } catch {
    return null;
  }
  let hb: { name: string; rank: number; size: number } | null = null;
  for (const e of entries) {
    const m = e.isFile ? HB_RE.exec(e.name) : null;
    if (m && (!hb || Number(m[1]) < hb.rank)) hb = { name: e.name, rank: Number(m[1]), size: e.size };
  }
  return hb;
}

/** a step-bearing line: it names a step, and not step 0 (a boot's) */
const STEP_LINE = /"step":\s*(\d+)/;
const isStepLine = (line: string) => line.includes('"step"') && !/"step":\s*0[,}]/.test(line);
const NL = 0x0a;
const BOOT = Buffer.from('"boot"');

/**
 * The last step-bearing line of buf[from, to) (whole lines), searched backwards line by line — in a
 * heartbeat the line just before a boot is nearly always one — or null.
 */
function lastStepLineIn(buf: Buffer, from: number, to: number): string | null {
  let end = to;
  while (end > from) {
    // (a negative offset would count from the buffer's end)
    const nl = end >= 2 ? buf.lastIndexOf(NL, end - 2) : -1;
    const start = nl < from ? from : nl + 1;
    const line = buf.toString('utf8', start, end);
    if (isStepLine(line)) return line;
    end = start;
  }
  return null;
}

/** a heartbeat line's boot record (its ts, its pid or null), or null: not a boot, or a torn line */
function bootOf(line: string): { ts: number; pid: number | null } | null {
  try {
    const j = JSON.parse(line) as { ts?: unknown; pid?: unknown; msg?: unknown };
    return j.msg === 'boot' && typeof j.ts === 'number'
      ? { ts: j.ts, pid: typeof j.pid === 'number' ? j.pid : null }
      : null;
  } catch {
    return null;
  }
}

/**
 * The run's segments from rank 0's heartbeat (the lowest rank present): every `boot` record of a
 * new pid starts one, and its last step is the last step-bearing line before the next boot. Reads
 * the file in chunks and looks only at the lines around a boot: `status` scans heartbeats up to
 * 64 MiB for this, and splitting every line into a string cost it ~80-160 ms of CPU per 16 MiB.
 */
export async function readRunSegments(
  host: Host,
  outDir: string,
  chunk: number = SCAN_CHUNK,
): Promise<RunSegmentMark[]> {
  const hb = await segmentHeartbeat(host, outDir);
  if (!hb) return [];
  const path = join(outDir, hb.name);
  const segs: RunSegmentMark[] = [];
  const end = Math.min(hb.size, SCAN_MAX);
  /** the current segment's last step-bearing line in what was scanned before */
  let lastStepLine: string | null = null;
  const closeSegment = (line: string | null) => {
    const cur = segs[segs.length - 1];
    const m = cur && line ? STEP_LINE.exec(line) : null;
    if (cur && m && Number(m[1]) > 0) cur.lastStep = Number(m[1]);
  };
  /** the whole lines buf[0, last) */
  const scan = (buf: Buffer, last: number) => {
    let since = 0; // the lines after the latest boot here
    for (let p = buf.indexOf(BOOT); p >= 0 && p < last; p = buf.indexOf(BOOT, p + 1)) {
      const ls = buf.lastIndexOf(NL, p) + 1;
      const nl = buf.indexOf(NL, p);
      const le = nl < 0 || nl >= last ? last : nl;
      const b = bootOf(buf.toString('utf8', ls, le));
      if (!b) continue; // (it may be a step line: the search below sees it)
      const pid = b.pid;
      if (segs.length) lastStepLine = lastStepLineIn(buf, since, ls) ?? lastStepLine;
      const cur = segs[segs.length - 1];
      if (!cur || cur.pid !== pid || pid === null) {
        closeSegment(lastStepLine);
        segs.push({ index: segs.length, startTs: b.ts * 1000, pid, lastStep: null });
        lastStepLine = null;
      }
      since = le;
      p = le;
    }
    if (segs.length) lastStepLine = lastStepLineIn(buf, since, last) ?? lastStepLine;
  };
  let carry: Buffer = Buffer.alloc(0);
  for (let off = 0; off < end; off += chunk) {
    let buf: Buffer;
    try {
      buf = await host.readRange(path, off, Math.min(end, off + chunk));
    } catch {
      break;
    }
    if (buf.length === 0) break;
    if (carry.length) buf = Buffer.concat([carry, buf]);
    const last = buf.lastIndexOf(NL) + 1;
    scan(buf, last);
    carry = buf.subarray(last);
  }
  if (carry.length) scan(carry, carry.length); // the last line, without its newline
  closeSegment(lastStepLine);
  return segs;
}

/** Resume outcomes the trainer printed, in order: `[train] resumed from X` / `[train] resume failed: E`. */
export async function readResumeLog(host: Host, logFile: string): Promise<{ ok: boolean; text: string }[]> {
  const st = await host.stat(logFile).catch(() => null);
  if (!st || !st.isFile) return [];
  const start = Math.max(0, st.size - 64 * 1024 * 1024);
  let text: string;
  try {
    text = (await host.readRange(logFile, start, st.size)).toString('utf8');
  } catch {
    return [];
  }
  const out: { ok: boolean; text: string }[] = [];
  for (const m of text.matchAll(/\[train\] (resumed from (.+)|resume failed: (.*))/g)) {
    out.push(m[2] !== undefined ? { ok: true, text: m[2].trim() } : { ok: false, text: (m[3] ?? '').trim() });
  }
  return out;
}

/** The segment whose time span holds `mtimeMs`; -1 before the first boot; null without history. */
export function segmentOf(segs: RunSegmentMark[], mtimeMs: number): number | null {
  if (segs.length === 0) return null;
  let k = -1;
  for (const s of segs) if (s.startTs <= mtimeMs) k = s.index;
  return k;
}

/** Pure ordering: later segment first, then later mtime, then higher step. */
export function orderByWritten<T extends { segment: number | null; mtimeMs: number; step: number }>(files: T[]): T[] {
  return [...files].sort((a, b) => (b.segment ?? -1) - (a.segment ?? -1) || b.mtimeMs - a.mtimeMs || b.step - a.step);
}

/**
 * The checkpoint to resume from: the newest weights that are complete. `logFiles`: the trainer's
 * stdout logs (a supervised run's train.log, an adopted run's recorded stdout) for the cross-check.
 */
export async function pickResumeCheckpoint(
  host: Host,
  outDir: string,
  opts: CheckpointCheckOptions & {
    logFiles?: string[];
    segments?: RunSegmentMark[];
    /** a heartbeat history larger than this is not scanned for segments (status answers from the
     *  tail): the order is then mtime's, which is the same order (a file's segment is found from
     *  its mtime); only the segment labels and the overwrite warning need the scan */
    segmentScanMaxBytes?: number;
  } = {},
): Promise<ResumePick> {
  const listed = await listCheckpoints(host, outDir);
  let segs: RunSegmentMark[] = opts.segments ?? [];
  let unscanned: string | null = null;
  if (!opts.segments && listed.length > 0) {
    const hb = opts.segmentScanMaxBytes !== undefined ? await segmentHeartbeat(host, outDir) : null;
    if (hb && hb.size > opts.segmentScanMaxBytes!)
      unscanned = `${hb.name} (${(hb.size / 2 ** 20).toFixed(0)} MiB) not scanned for segments: ordered by write time`;
    else segs = await readRunSegments(host, outDir);
  }
  const files = listed.map((c) => ({ ...c, segment: segmentOf(segs, c.mtimeMs) }));
  const ordered = orderByWritten(files);
  const skipped: string[] = [];
  const warnings: string[] = [];
  let found: ResumeChoice | null = null;
  // the settle wait's stats are the host's own, never a look's answers (Host.look)
  const settle = new SettleWait(hostOf(host), ordered, opts);
  for (const c of ordered) {
    const problem = await completenessProblem(host, c.path, opts, settle);
    if (problem) {
      skipped.push(`${c.name}: ${problem}`);
      continue;
    }
    found = { path: c.path, name: c.name, step: c.step, mtimeMs: c.mtimeMs, segment: c.segment, why: '' };
    break;
  }
  const newest = segs.length - 1;
  const segText = (k: number | null) =>
    k === null
      ? ''
      : k < 0
        ? 'before the first recorded boot'
        : `by segment #${k}${segs[k]?.pid ? ` (pid ${segs[k]!.pid}${k === newest ? ', the newest' : ''})` : k === newest ? ' (the newest)' : ''}`;
  if (found) {
    const f = found;
    const higher = files.filter((c) => c.step > f.step && c.path !== f.path).sort((a, b) => b.step - a.step);
    const parts = [
      `newest complete weights: written ${clock(f.mtimeMs)}${f.segment !== null ? ` ${segText(f.segment)}` : ''}`,
    ];
    if (higher.length) {
      const h = higher[0]!;
      const older = h.segment !== null && f.segment !== null && h.segment < f.segment;
      parts.push(
        `${h.name} has a higher step but ${older ? `segment #${h.segment} wrote it earlier (${clock(h.mtimeMs)}); the trainer restarts its step count at 1 on --resume` : h.mtimeMs <= f.mtimeMs ? `was written earlier (${clock(h.mtimeMs)})` : 'is not complete'}`,
      );
    }
    if (segs.length === 0) parts.push('no heartbeat history: ordered by mtime');
    f.why = parts.join('; ');
  }
  // the trainer's own log: which file the newest start resumed from, and whether that worked
  const outcomes: { ok: boolean; text: string }[] = [];
  for (const lf of opts.logFiles ?? []) outcomes.push(...(await readResumeLog(host, lf)));
  const last = outcomes[outcomes.length - 1];
  if (found && last) {
    if (last.ok) found.why += `; log: the last start resumed from ${basename(last.text)}`;
    else if (found.segment !== null && found.segment === newest && segs.length > 1)
      warnings.push(
        `the log says the newest start's resume failed (${last.text}): it trained from scratch, so ${found.name} holds from-scratch weights; an older segment's file may hold more training`,
      );
  }
  // the naming scheme: a segment resumed with --resume counts from 1 again and reuses names
  if (found && segs.length > 1) {
    const earlier = files
      .filter((c) => c.segment !== null && c.segment >= 0 && c.segment < newest)
      .sort((a, b) => a.step - b.step);
    if (earlier.length)
      warnings.push(
        `checkpoint names repeat across segments (the trainer restarts at step 1 on --resume): ${earlier.map((c) => c.name).join(', ')} (segment ${[...new Set(earlier.map((c) => `#${c.segment}`))].join(', ')}) will be overwritten when a later segment reaches ${earlier.length === 1 ? 'that step' : 'those steps'}; copy them away to keep them`,
      );
  }
  if (unscanned) warnings.push(unscanned);
  return { found, skipped, warnings, segments: segs };
}

/**
 * The settle wait of a pick, shared: the first recently written file it looks at waits once for
 * every candidate the listing shows written as recently, and each is judged on its own two stats
 * across that one wait. A pick over several fresh files (a freshly copied run dir, FSDP shards, a
 * run saving every few seconds, a file skipped as incomplete before an older fresh one) waited
 * stableWaitMs per file, one after another: status on a copied fixture with two took 1.4 s.
 */
class SettleWait {
  private stats: Map<string, { before: FileStat; after: FileStat }> | null = null;

  constructor(
    private readonly host: Host,
    private readonly candidates: readonly { path: string; mtimeMs: number }[],
    private readonly opts: CheckpointCheckOptions,
  ) {}

  /** `path`'s stats across a wait of stableWaitMs (`st`: its stat now, recently written) */
  async across(path: string, st: FileStat): Promise<{ before: FileStat; after: FileStat | null }> {
    const settledMs = this.opts.settledMs ?? 5000;
    const stableWaitMs = this.opts.stableWaitMs ?? 1000;
    if (!this.stats) {
      const at = this.candidates.findIndex((c) => c.path === path);
      const seen = await this.opts.settled;
      const fresh = this.candidates
        .slice(at + 1)
        .filter((c) => this.host.now() - c.mtimeMs < settledMs && !seen?.some((x) => x.path === c.path))
        .map((c) => c.path);
      const befores = await Promise.all(fresh.map((p) => this.host.stat(p).catch(() => null)));
      await sleep(stableWaitMs);
      const afters = await Promise.all([path, ...fresh].map((p) => this.host.stat(p).catch(() => null)));
      this.stats = new Map();
      fresh.forEach((p, i) => {
        const before = befores[i];
        const after = afters[i + 1];
        if (before && after) this.stats!.set(p, { before, after });
      });
      return { before: st, after: afters[0]! };
    }
    const known = this.stats.get(path);
    if (known?.after) {
      // unchanged since the shared wait: judged on its two stats across it; changed: still being written
      if (known.after.size === st.size && known.after.mtimeMs === st.mtimeMs) return known;
      return { before: known.after, after: st };
    }
    // recently written but not looked at across the shared wait: a wait of its own
    await sleep(stableWaitMs);
    return { before: st, after: await this.host.stat(path).catch(() => null) };
  }
}

/** The completeness check of one file (size settled, structurally whole); null = complete. */
async function completenessProblem(
  look: Host,
  path: string,
  opts: CheckpointCheckOptions,
  settle: SettleWait,
): Promise<string | null> {
  // a stat, a wait, a stat again: asked of the host itself, never answered from a look (Host.look)
  const host = hostOf(look);
  const settledMs = opts.settledMs ?? 5000;
  const stableWaitMs = opts.stableWaitMs ?? 1000;
  let st = await host.stat(path).catch(() => null);
  if (!st) return 'vanished';
  // the other look's word is waited for only here, where it spares a wait
  if (host.now() - st.mtimeMs < settledMs && !seenSettled(await opts.settled, path, st)) {
    const { before, after: again } = await settle.across(path, st);
    if (!again) return 'vanished';
    if (again.size !== before.size || again.mtimeMs !== before.mtimeMs)
      return `still being written (size ${before.size} → ${again.size} bytes within ${dur(stableWaitMs / 1000, 'precise')})`;
    st = again;
  }
  try {
    const p = await checkpointTailProblem(host, path, st.size);
    return p ? `skipped, ${p}` : null;
  } catch (e) {
    return `skipped, unreadable: ${(e as Error).message}`;
  }
}
