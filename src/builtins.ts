// node:child_process on first use, not at import: it loads node's net, dgram and stream modules
// (~10 ms), and a local `status` imports the modules that spawn (the local host, the control
// actions, the detached spawner, the Slurm node list) without ever starting a process.
import { createRequire } from 'node:module';

let loaded: typeof import('node:child_process') | null = null;

export function childProcess(): typeof import('node:child_process') {
  loaded ??= createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  return loaded;
}
