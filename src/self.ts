// How nsa-top re-invokes itself (trainer ranks, the detached supervisor, the demo's trainer):
// always through bin/nsa-top.js, so children start from the bundled dist like users do.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root: this module sits one level below it both as src/self.ts and as dist/cli.js. */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export function selfCommand(): string[] {
  return [process.execPath, join(PACKAGE_ROOT, 'bin', 'nsa-top.js')];
}
