// Running the built CLI as a process that file modes bind: root without the capabilities that bypass
// them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). Unlike `nobody`, it can still load a checkout that
// is private to root: a fresh clone under `mktemp -d` is mode 700, where `nobody` could not even
// start nsa-top (a test failed that way on such a clone, and another skipped without a word).
import { spawnSync, type SpawnSyncOptionsWithStringEncoding, type SpawnSyncReturns } from 'node:child_process';

const DROP = ['--bounding-set=-dac_override,-dac_read_search', '--inh-caps=-dac_override,-dac_read_search'];

/** false when it can run here; else why not (a skip reason) */
export const withoutDacSkip: string | false =
  process.getuid?.() !== 0
    ? 'needs root (to drop its file-permission capabilities)'
    : spawnSync('setpriv', ['--version']).status !== 0
      ? 'needs setpriv'
      : false;

export function spawnWithoutDac(argv: string[], opts: SpawnSyncOptionsWithStringEncoding): SpawnSyncReturns<string> {
  return spawnSync('setpriv', [...DROP, '--', ...argv], opts);
}

/** the argv that runs argv without those capabilities (for a process the test starts and keeps) */
export function withoutDacArgv(argv: string[]): string[] {
  return ['setpriv', ...DROP, '--', ...argv];
}
