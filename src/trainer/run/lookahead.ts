// What one look at a run reads besides the followed files (Host.look's look-ahead): the run's
// records that `status`, an observation round, the adoption and the stop facts each stat or read —
// over SSH asked together, in one round trip, instead of one round trip each (a `status --host`
// asked ~60 in turn). A name missing from the run costs nothing: it is answered as missing.
import { join } from 'node:path';
import type { LookAhead } from '../../remote/host.js';
import { NSA_DIR } from './readers/names.js';
import { hostStatsArgv } from '../../remote/hoststats.js';

/** the records in `.nsa-top/` a look stats or reads (the small ones first: a look-ahead brings
 * bytes in this order within its cap) */
const NSA_FILES = [
  'run.json',
  'launch.json',
  'supervisor.json',
  'requests.json',
  'stop.json',
  'actions.jsonl',
  'watchdog.jsonl',
  'supervisor.log',
];

/**
 * The look-ahead of a look at the run in `dirs` (its launcher dir and out_dir, the same dir when
 * unsupervised):
 * - `resolve`: what finding the run reads (the dir's stat and listing, run.info, the out_dir's
 *   pointer, whether a supervisor runs it);
 * - `first`: a first look, which reads the records (and lists the dirs);
 * - `again`: a look again, which wants the records' stats only (its parts read a record only when
 *   its stat changed).
 */
export function lookAheadOf(dirs: { runDir: string; outDir: string }, mode: 'resolve' | 'first' | 'again'): LookAhead {
  const roots = [...new Set([dirs.runDir, dirs.outDir])];
  if (mode === 'resolve')
    return {
      files: roots.flatMap((d) => [
        d,
        join(d, 'run.info'),
        join(d, NSA_DIR, 'run.json'),
        join(d, NSA_DIR, 'supervisor.json'),
      ]),
      dirs: roots,
      contents: true,
    };
  const files: string[] = [];
  for (const d of roots) files.push(join(d, 'run.info'));
  for (const name of NSA_FILES) for (const d of roots) files.push(join(d, NSA_DIR, name));
  for (const d of roots) files.push(join(d, 'train.log'));
  // a first look also brings the out_dir's (and its tb/'s) small files and listings: the run
  // model's first poll takes them from the look instead of a frame and a read round of its own
  const readDirs = [dirs.outDir, join(dirs.outDir, 'tb')];
  // …and the host's resources for the run dir's disk (the observation's HostStatsReader asks the same)
  const execs = [hostStatsArgv([dirs.outDir])];
  // …and the process table the observation reads for the run's ranks (findRunProcesses on the
  // out_dir) — unless the dir is a launcher dir (run.info): its out_dir's look asks for that one's
  const procs = { runDir: dirs.outDir, unlessFile: join(dirs.outDir, 'run.info') };
  return mode === 'first'
    ? { files: [...roots, ...files], dirs: roots, readDirs, contents: true, execs, procs }
    : { files };
}
