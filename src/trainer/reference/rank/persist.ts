// Rank 0's checkpoints (contract §1: periodic, on HALT, on a stop signal, at the end, and after an
// abandoned collective) and its periodic eval on the held-out bytes.
import { statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { ActivityStack } from '../activity.js';
import { writeCheckpoint } from '../checkpoint.js';
import { valBatches, type DataPosition } from '../data.js';
import { appendLog, valCsvRow } from '../writers.js';
import { out, type Rank } from './setup.js';

export class Checkpoints {
  private lastSavedStep: number;
  /** the checkpoints this process wrote, oldest first, with the inode each got (retention deletes only these) */
  private written: { path: string; ino: number; dev: number }[] = [];

  constructor(
    private readonly r: Rank,
    private readonly act: ActivityStack,
  ) {
    this.lastSavedStep = r.spec.resumePath ? r.startStep : -1;
  }

  /** saves step `atStep` (rank 0, once per step, never step 0); a failure is said, never fatal */
  save(atStep: number, pos: DataPosition, why: string, lossLast: number | null): void {
    const { rank, dir, T, opt, model, corpus, n } = this.r;
    if (rank !== 0 || atStep === this.lastSavedStep || atStep <= 0) return;
    this.act.run('checkpoint', () => {
      const st = opt.exportState();
      let p: string;
      try {
        p = writeCheckpoint(dir, {
          header: {
            format: 'nsa-top-reference-checkpoint',
            version: 1,
            step: atStep,
            time: new Date().toISOString(),
            config: this.r.spec.cfg,
            world_size: this.r.world,
            data: {
              cursor: pos.cursor,
              epoch: pos.epoch,
              lanes: T.batch_size,
              train_bytes: corpus.train.length,
              source: corpus.source,
            },
            rng: { seed: T.seed },
            optimizer: { kind: 'adamw', t: st.t },
            n_params: n,
            layout: model.layout.map((l) => ({ ...l })),
            sections: ['params', 'adam_m', 'adam_v'],
            loss_last: lossLast,
          },
          params: model.params,
          m: st.m,
          v: st.v,
        });
      } catch (err) {
        // Like the real trainer, a failed save does not stop training; unlike it, it says so loudly.
        process.stderr.write(`[train] checkpoint at step ${atStep} FAILED (${why}): ${(err as Error).message}\n`);
        return;
      }
      if (why !== 'periodic') out(`[train] checkpoint saved: ${p} (${why})`);
      this.lastSavedStep = atStep;
      this.retain(p);
    });
  }

  /**
   * --keep-checkpoints N: after a save, the oldest of the checkpoints this process wrote beyond the
   * newest N are deleted — each only while its path still holds the very file written (same inode):
   * never one another process wrote, the one resumed from, or a file put in its place.
   */
  private retain(path: string): void {
    const keep = this.r.spec.keepCheckpoints;
    try {
      const st = statSync(path);
      this.written = this.written.filter((w) => w.path !== path);
      this.written.push({ path, ino: st.ino, dev: st.dev });
    } catch {
      return;
    }
    if (!(keep > 0)) return;
    while (this.written.length > keep) {
      const old = this.written.shift()!;
      try {
        const st = statSync(old.path);
        if (st.ino !== old.ino || st.dev !== old.dev || !st.isFile()) continue;
        unlinkSync(old.path);
        out(`[train] checkpoint retention: removed ${old.path} (keeping the newest ${keep} this trainer wrote)`);
      } catch {
        /* gone already */
      }
    }
  }
}

/** val.csv's row at an eval step (rank 0, every eval_every steps) */
export function evaluate(r: Rank, act: ActivityStack, s: number): void {
  const T = r.T;
  if (r.rank !== 0 || T.eval_every <= 0 || s % T.eval_every !== 0) return;
  act.run('eval', () => {
    const vb = valBatches(r.corpus.val, r.window, Math.min(T.batch_size, 8), 4);
    if (vb.length === 0) return;
    let sum = 0;
    for (const b of vb) sum += r.model.forward(b, b.length / r.window).loss;
    const vl = sum / vb.length;
    if (Number.isFinite(vl)) appendLog(join(r.dir, 'val.csv'), valCsvRow(s, vl));
  });
}
