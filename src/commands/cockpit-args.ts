// The cockpit's command line, shared by `nsa-top [RUN_DIR]` (the dispatcher, src/cli.ts) and
// `nsa-top attach RUN_DIR`. Apart from cockpit.ts, which loads Ink: `nsa-top --help` loads nothing.
import type { OptionSpec } from './args.js';
import { HOST_OPTIONS } from './hostflags.js';

export const COCKPIT_OPTIONS = {
  ...HOST_OPTIONS,
  interval: {
    type: 'number',
    value: 'S',
    min: 0.2,
    max: 3600,
    default: 1,
    help: 'refresh period in seconds (default 1)',
  },
} as const satisfies Record<string, OptionSpec>;

export const COCKPIT_KEYS = `Keys: ? in the cockpit. Without a terminal (stdout piped) one frame is printed; \`nsa-top status\`
is the headless form.`;

export interface CockpitArgs {
  runDir?: string;
  host?: string;
  identity?: string;
  port?: number;
  acceptNewHostKey: boolean;
  readOnly: boolean;
  intervalS: number;
}

/** the parsed options as the cockpit takes them */
export function cockpitArgs(
  runDir: string | undefined,
  v: { host?: string; identity?: string; 'accept-new-host-key': boolean; interval: number; 'read-only': boolean },
): CockpitArgs {
  return {
    runDir,
    host: v.host,
    identity: v.identity,
    acceptNewHostKey: v['accept-new-host-key'],
    readOnly: v['read-only'],
    intervalS: v.interval,
  };
}
