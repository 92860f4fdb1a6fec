// The run's journal (docs/journal.md): what a cockpit or watchdog observed and judged, recorded
// (./writer.ts, lines in ./codec.ts) and read back as a ReplaySource (./source.ts).
import type { Judged } from '../cockpit/observe.js';
import type { Host } from '../remote/host.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import { LookState } from './observed.js';
import { JournalRecorder } from './writer.js';

export { JournalRecorder, DEFAULT_JOURNAL_MAX_MB, JOURNAL_FILE, JOURNAL_LOCK, journalPart } from './writer.js';
export { journalSource, journalCriticals, type JournalSource } from './source.js';

export interface RecordChoice {
  noRecord?: boolean;
  maxMb?: number;
  readOnly?: boolean;
  version?: string;
}

/** The watchdog's journal: started (the lock taken, or who holds it said), then one record a round. */
export async function watchJournal(
  host: Host,
  dirs: RunDirs,
  c: RecordChoice,
): Promise<{ readonly status: string; look(looked: Judged): Promise<void>; close(): Promise<void> }> {
  const rec = new JournalRecorder({ host, dirs, as: 'watchdog', ...c });
  await rec.start();
  const looks = new LookState(host);
  return {
    get status() {
      return rec.status;
    },
    async look(looked) {
      rec.record(await looks.of(looked, c.readOnly === true));
    },
    close: () => rec.close(),
  };
}
