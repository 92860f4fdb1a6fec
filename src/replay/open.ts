// Which history `nsa-top replay` plays, chosen in one place: nsa-top's own journal of the run when
// there is one (what a cockpit or watchdog observed and judged, src/journal), else the trainer's
// files read as they stood at each moment (./files.ts).
import type { Host } from '../remote/host.js';
import { journalSource } from '../journal/source.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import { trainerFilesSource, type FilesSourceOptions } from './files.js';
import type { ReplaySource } from './source.js';

/** why the journal was not used, when one was looked for and failed (shown in `missing`) */
export interface OpenedSource {
  source: ReplaySource;
  /** the journal could not be read: why (the trainer's files were used instead) */
  journalProblem: string | null;
}

export async function openReplaySource(host: Host, dirs: RunDirs, o: FilesSourceOptions = {}): Promise<OpenedSource> {
  let journalProblem: string | null = null;
  try {
    const j = await journalSource(host, dirs);
    if (j) return { source: j, journalProblem: null };
  } catch (e) {
    journalProblem = `nsa-top's journal could not be read (${(e as Error).message}): replaying from the trainer's files`;
  }
  const source = await trainerFilesSource(host, dirs, o);
  if (journalProblem) source.missing.unshift(journalProblem);
  return { source, journalProblem };
}
