// node:child_process and node:tty on first use, not at import: they load node's net (and dgram) and
// stream modules (~10 ms), and a local `status` imports the modules that spawn (the local host, the
// control actions, the detached spawner, the Slurm node list) or watch a terminal (../stdout.ts)
// without ever starting a process or watching one.
import { createRequire } from 'node:module';

let loaded: typeof import('node:child_process') | null = null;

export function childProcess(): typeof import('node:child_process') {
  loaded ??= createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  return loaded;
}

let ttyLoaded: typeof import('node:tty') | null = null;

export function tty(): typeof import('node:tty') {
  ttyLoaded ??= createRequire(import.meta.url)('node:tty') as typeof import('node:tty');
  return ttyLoaded;
}
