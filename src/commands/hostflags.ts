// The flags that choose the machine a command looks at, shared by every command that takes them:
// --host user@box[:port] (or an ~/.ssh/config alias), -i KEY, --accept-new-host-key.
import type { OpenHostSpec } from '../remote/index.js';
import { CliError } from './errors.js';

export const HOST_FLAGS_HELP = `  --host H               the run is on another machine: user@box[:port] or an ~/.ssh/config alias
  -i KEY                 private key for --host (else ~/.ssh/config, then ssh-agent)
  --accept-new-host-key  trust an unknown host key once and record it (a changed key is always refused)`;

/** Takes the host flags out of argv; the rest is left, in order, for the command's own parser. */
export function splitHostFlags(cmd: string, argv: string[]): { spec: OpenHostSpec; rest: string[] } {
  const spec: OpenHostSpec = {};
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]!;
    const eq = x.startsWith('--') ? x.indexOf('=') : -1;
    const flag = eq > 0 ? x.slice(0, eq) : x;
    if (flag === '--accept-new-host-key' && eq < 0) {
      spec.acceptNewHostKey = true;
    } else if (flag === '--host' || flag === '-i') {
      const v = eq > 0 ? x.slice(eq + 1) : argv[++i];
      if (!v || (eq < 0 && v.startsWith('-')))
        throw new CliError(`${cmd}: ${flag} needs ${flag === '--host' ? 'user@box[:port]' : 'a key file'}`, 2);
      if (flag === '--host') spec.host = v;
      else spec.identity = v;
    } else rest.push(x);
  }
  return { spec, rest };
}
