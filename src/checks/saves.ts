// Checkpoint saves that should be there and are not. The real trainer swallows a failed save
// (contract §1.16, TS:1489-1499), so the one trace it leaves is a checkpoint_step{N}.pt missing
// where save_every says one was written; the reference trainer also says so in its log. Pure:
// the report's "checkpoints saved" and `status` read the same answer.

/**
 * The steps k = save_every, 2·save_every, … below the segment's last step that have no checkpoint
 * (the step count restarts at 1 on a resume, so the current segment counts from save_every). At most
 * `max` of them, oldest first. Steps at or below `removedThrough` (the trainer's retention removed
 * them, LogTail.checkpointsRemovedThrough) are not missing.
 */
export function missingCheckpoints(
  saveEvery: number | null | undefined,
  have: Iterable<number>,
  lastStep: number | null | undefined,
  max = 20,
  removedThrough: number | null = null,
): number[] {
  if (!saveEvery || saveEvery <= 0 || lastStep === null || lastStep === undefined) return [];
  const got = new Set(have);
  const missing: number[] = [];
  // saves at or below removedThrough were removed by the trainer's own retention (--keep-checkpoints)
  const from =
    removedThrough && removedThrough > 0 ? (Math.floor(removedThrough / saveEvery) + 1) * saveEvery : saveEvery;
  for (let k = from; k < lastStep && missing.length < max; k += saveEvery) if (!got.has(k)) missing.push(k);
  return missing;
}
