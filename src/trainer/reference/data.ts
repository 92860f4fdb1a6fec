// Byte-level data for the reference trainer: a UTF-8 text (or JSONL with a "text" field) split into a
// training part and a held-out tail for val.csv. Training batches come from B_global "lanes" spread
// over the training bytes; every step each lane yields its next window, so batches are decorrelated,
// deterministic, and rank r reads only its own lanes (disjoint from the other ranks'). The data
// position (cursor, epoch) goes into the checkpoint.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

export interface Corpus {
  name: string;
  source: string;
  train: Uint8Array;
  val: Uint8Array;
}

export class DataError extends Error {}

export function loadCorpus(path: string, valFraction: number, name?: string): Corpus {
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (err) {
    throw new DataError(`cannot read data ${path}: ${(err as Error).message}`);
  }
  let bytes: Uint8Array = raw;
  const firstLine =
    raw
      .subarray(0, Math.min(raw.length, 65536))
      .toString('utf8')
      .split('\n')
      .find((l) => l.trim() !== '') ?? '';
  if (path.endsWith('.jsonl') || firstLine.trimStart().startsWith('{')) {
    const texts: string[] = [];
    let lineNo = 0;
    for (const line of raw.toString('utf8').split('\n')) {
      lineNo++;
      if (line.trim() === '') continue;
      let rec: unknown;
      try {
        rec = JSON.parse(line);
      } catch {
        throw new DataError(`${path}:${lineNo}: not JSON (JSONL data needs one object with a "text" field per line)`);
      }
      const t = (rec as { text?: unknown }).text;
      if (typeof t !== 'string') throw new DataError(`${path}:${lineNo}: no string "text" field`);
      texts.push(t);
    }
    bytes = Buffer.from(texts.join('\n\n'), 'utf8');
  }
  if (bytes.length === 0) throw new DataError(`data ${path} is empty`);
  const nVal = Math.max(1, Math.floor(bytes.length * valFraction));
  return {
    name: name ?? basename(path).replace(/\.(txt|jsonl|json)$/i, ''),
    source: path,
    train: bytes.subarray(0, bytes.length - nVal),
    val: bytes.subarray(bytes.length - nVal),
  };
}

export interface DataPosition {
  cursor: number;
  epoch: number;
}

/** Batches of `window` bytes per sequence from `lanes` lanes; this rank owns [laneStart, laneStart+laneCount). */
export class LaneSampler {
  readonly laneLen: number;
  pos: DataPosition = { cursor: 0, epoch: 0 };

  constructor(
    private readonly train: Uint8Array,
    readonly lanes: number,
    readonly window: number,
    readonly stride: number,
    readonly laneStart: number,
    readonly laneCount: number,
  ) {
    this.laneLen = Math.floor(train.length / lanes);
    if (this.laneLen < window + stride)
      throw new DataError(
        `training data too small: ${train.length} bytes for a global batch of ${lanes} sequences of ${window} bytes (need at least ${lanes * (window + stride)})`,
      );
  }

  /** The batch for the current position; advances the position. */
  next(): Uint8Array {
    const out = new Uint8Array(this.laneCount * this.window);
    const off = this.pos.cursor;
    for (let j = 0; j < this.laneCount; j++) {
      const lane = this.laneStart + j;
      const start = lane * this.laneLen + off;
      out.set(this.train.subarray(start, start + this.window), j * this.window);
    }
    this.advance();
    return out;
  }

  /** Moves past one global batch without reading it (all ranks advance together). */
  advance(): void {
    const c = this.pos.cursor + this.stride;
    if (c + this.window > this.laneLen) {
      this.pos = { cursor: (this.pos.epoch + 1) % this.stride, epoch: this.pos.epoch + 1 };
      return;
    }
    this.pos = { cursor: c, epoch: this.pos.epoch };
  }
}

/** Rank r's share of a global batch of B sequences: B/W each, the remainder to the low ranks. */
export function shareOf(batchGlobal: number, world: number, rank: number): { start: number; count: number } {
  const base = Math.floor(batchGlobal / world);
  const rem = batchGlobal % world;
  const count = base + (rank < rem ? 1 : 0);
  const start = rank * base + Math.min(rank, rem);
  return { start, count };
}

/** Fixed held-out windows for eval: `batches` batches of `batch` sequences spread over the val tail. */
export function valBatches(val: Uint8Array, window: number, batch: number, batches: number): Uint8Array[] {
  const need = batch * batches;
  const span = val.length - window;
  if (span < 0) return [];
  const out: Uint8Array[] = [];
  for (let b = 0; b < batches; b++) {
    const buf = new Uint8Array(batch * window);
    for (let j = 0; j < batch; j++) {
      const k = b * batch + j;
      const start = need <= 1 ? 0 : Math.floor((span * k) / (need - 1));
      buf.set(val.subarray(start, start + window), j * window);
    }
    out.push(buf);
  }
  return out;
}
