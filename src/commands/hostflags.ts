// The options that choose the machine a command looks at, shared by every command that takes them:
// --host user@box[:port] (or an ~/.ssh/config alias), -i KEY, --accept-new-host-key.
import type { OpenHostSpec } from '../remote/index.js';
import type { OptionSpec } from './args.js';

export const HOST_OPTIONS = {
  host: {
    type: 'string',
    value: 'H',
    needs: 'user@box[:port] or an ~/.ssh/config alias',
    help: 'the run is on another machine: user@box[:port] or an ~/.ssh/config alias',
  },
  identity: {
    type: 'string',
    short: 'i',
    value: 'KEY',
    needs: 'a key file',
    help: 'private key for --host (else ~/.ssh/config, then ssh-agent)',
  },
  'accept-new-host-key': {
    type: 'boolean',
    help: 'trust an unknown host key once and record it (a changed key is always refused)',
  },
} as const satisfies Record<string, OptionSpec>;

/** what the parsed host options ask openHost for */
export function hostSpecOf(v: { host?: string; identity?: string; 'accept-new-host-key': boolean }): OpenHostSpec {
  return { host: v.host, identity: v.identity, acceptNewHostKey: v['accept-new-host-key'] };
}
