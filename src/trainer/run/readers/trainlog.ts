// The trainer's stdout log (train.log and launcher variants): a bounded tail plus the few lines
// that matter wherever they are. Matching uses the exact prefixes of contract §1.17 (U+2014 em dash
// in the HALT/FATAL lines; U+2011 in "FineWeb‑Edu").
import { emptyLogTail, type LogTail } from '../snapshot.js';

const MAX_CKPT_FAILED = 20;

const RE = {
  boot: /^\[boot\] loading config (.*)$/,
  effective: /^\[boot\] effective config: (.*)$/,
  dataset: /^\[train\] dataset=(\S+)(?: tokenizer=(\S+))?/,
  halt: /\[train\] HALT file detected/,
  fatal: /\[train\]\[FATAL\] non-finite loss detected/,
  oom: /CUDA out of memory|OutOfMemoryError|CUDA error: out of memory/,
  resumed: /^\[train\] resumed from (.*)$/,
  resumeFailed: /^\[train\] resume failed: (.*)$/,
  // as history.ts reads it: the reference trainer's failed save (the real trainer swallows it)
  ckptFailed: /\[train\] checkpoint at step (\d+) FAILED\b/,
  ckptRemoved: /^\[train\] checkpoint retention: removed .*checkpoint_step(\d+)\.pt\b/,
  fallback: /\[warn\] Falling back to synthetic dataset/,
  loaderFailed: /\[error\] FineWeb.Edu loader failed: (.*)$/,
  stepsOverride: /^\[trace\] overriding steps to (\d+)/,
  world: /^\[ddp\] process group ready \| backend=(\S+) world_size=(\d+)/,
};

export class TrainLog {
  readonly tail: LogTail;
  dataset: string | null = null;
  tokenizer: string | null = null;
  syntheticFallback = false;
  loaderFailed: string | null = null;
  stepsOverride: number | null = null;
  worldSize: number | null = null;
  configPath: string | null = null;
  resumeFailed: string | null = null;
  /** a `[boot] loading config` line was read by this instance */
  sawBoot = false;

  constructor(
    file: string | null,
    private readonly maxLines: number,
  ) {
    this.tail = emptyLogTail(file);
  }

  line(text: string): void {
    const t = text.length > 2000 ? text.slice(0, 2000) + '…' : text;
    this.tail.lines.push(t);
    if (this.tail.lines.length > this.maxLines) this.tail.lines.splice(0, this.tail.lines.length - this.maxLines);
    if (text.charCodeAt(0) !== 91 /* [ */ && !text.includes('out of memory') && !text.includes('OutOfMemory')) return;
    let m: RegExpExecArray | null;
    if ((m = RE.boot.exec(text))) {
      // a new process started writing this log: flags of the previous run no longer apply
      this.configPath = m[1]!.trim();
      this.sawBoot = true;
      this.tail.haltSeen = false;
      this.tail.fatalNonFinite = false;
      this.tail.oom = false;
      this.tail.checkpointFailed = [];
    } else if ((m = RE.effective.exec(text))) this.tail.effectiveConfig = m[1]!.trim();
    else if ((m = RE.dataset.exec(text))) {
      this.dataset = m[1]!;
      this.tokenizer = m[2] ?? null;
    } else if (RE.halt.test(text)) this.tail.haltSeen = true;
    else if (RE.fatal.test(text)) this.tail.fatalNonFinite = true;
    else if ((m = RE.resumed.exec(text))) this.tail.resumedFrom = m[1]!.trim();
    else if ((m = RE.resumeFailed.exec(text))) this.resumeFailed = m[1]!.trim();
    else if ((m = RE.ckptFailed.exec(text))) {
      const f = this.tail.checkpointFailed;
      f.push({ step: Number(m[1]), text: text.trim().slice(0, 300) });
      if (f.length > MAX_CKPT_FAILED) f.splice(0, f.length - MAX_CKPT_FAILED);
    } else if ((m = RE.ckptRemoved.exec(text))) {
      const k = Number(m[1]);
      this.tail.checkpointsRemovedThrough = Math.max(this.tail.checkpointsRemovedThrough ?? 0, k);
    } else if (RE.fallback.test(text)) this.syntheticFallback = true;
    else if ((m = RE.loaderFailed.exec(text))) this.loaderFailed = m[1]!.trim();
    else if ((m = RE.stepsOverride.exec(text))) this.stepsOverride = Number(m[1]);
    else if ((m = RE.world.exec(text))) this.worldSize = Number(m[2]);
    if (RE.oom.test(text)) this.tail.oom = true;
  }

  /** Merge the lines before where this tail started (read later, huge logs only). */
  mergeHistory(h: TrainLog): void {
    const room = this.maxLines - this.tail.lines.length;
    if (room > 0) this.tail.lines.unshift(...h.tail.lines.slice(-room));
    const t = this.tail;
    t.effectiveConfig ??= h.tail.effectiveConfig;
    this.dataset ??= h.dataset;
    this.tokenizer ??= h.tokenizer;
    this.worldSize ??= h.worldSize;
    this.configPath ??= h.configPath;
    this.stepsOverride ??= h.stepsOverride;
    if (!this.sawBoot) {
      // same process as the history's last one: its flags still apply
      t.haltSeen ||= h.tail.haltSeen;
      t.fatalNonFinite ||= h.tail.fatalNonFinite;
      t.oom ||= h.tail.oom;
      t.resumedFrom ??= h.tail.resumedFrom;
      t.checkpointFailed = [...h.tail.checkpointFailed, ...t.checkpointFailed].slice(-MAX_CKPT_FAILED);
    }
    // removals stay removed whichever process did them
    if (h.tail.checkpointsRemovedThrough != null)
      t.checkpointsRemovedThrough = Math.max(t.checkpointsRemovedThrough ?? 0, h.tail.checkpointsRemovedThrough);
    if (!this.sawBoot) {
      this.syntheticFallback ||= h.syntheticFallback;
      this.loaderFailed ??= h.loaderFailed;
      this.resumeFailed ??= h.resumeFailed;
    }
  }
}
