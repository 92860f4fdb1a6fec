// STUB — this file belongs to the journal slice (NAME=journal), which replaces it at merge with the
// real reader of <out_dir>/.nsa-top/journal*. It is here only so the replay branch builds alone:
// with it, `nsa-top replay` always falls back to the trainer's files (src/replay/files.ts).
import type { Host } from '../remote/host.js';
import type { ReplaySource } from '../replay/source.js';
import type { RunDirs } from '../trainer/run/rundirs.js';

/** nsa-top's journal of this run as a replay source, or null when there is none. */
export async function journalSource(_host: Host, _dirs: RunDirs): Promise<ReplaySource | null> {
  return null;
}
