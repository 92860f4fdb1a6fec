// What several commands' command lines share (declared for src/commands/args.ts): the run dir, the
// options that choose the machine a command looks at (--host user@box[:port] or an ~/.ssh/config
// alias, -i KEY, --accept-new-host-key), the profiles file, and the cockpit's options (`nsa-top
// [RUN_DIR]` and `nsa-top attach RUN_DIR`; apart from cockpit.ts, which loads Ink, so that the
// dispatcher's --help loads nothing).
import type { OpenHostSpec } from '../remote/index.js';
import type { OptionSpec } from './args.js';

/** the positional word of the commands that look at one run */
export const RUN_DIR_ARG = {
  name: 'RUN_DIR',
  help: 'the run directory (default: the newest run under ./artifacts/)',
} as const;

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

/** --profiles FILE of launch and preflight */
export const PROFILES_OPTION = {
  profiles: { type: 'string', value: 'FILE', help: 'YAML file of extra/overriding profiles' },
} as const satisfies Record<string, OptionSpec>;

/** the nodes of a multi-node run (status, the cockpit): src/commands/nodes.ts */
export const NODE_OPTIONS = {
  node: {
    type: 'string',
    multiple: true,
    value: 'H',
    needs: 'local, user@box[:port] or an ~/.ssh/config alias',
    help: 'a node of a multi-node run (repeat for each; `local` is this machine); the first reads the run dir',
  },
  nodes: {
    type: 'string',
    value: 'H1,H2',
    needs: 'a comma-separated list of nodes',
    help: 'the nodes at once, comma-separated (default: SLURM_JOB_NODELIST, expanded by scontrol)',
  },
} as const satisfies Record<string, OptionSpec>;

/** the journal's options (cockpit and watchdog; docs/journal.md) */
export const RECORD_OPTIONS = {
  'no-record': {
    type: 'boolean',
    help: "do not record the run's journal (<out_dir>/.nsa-top/journal.jsonl; recorded by default)",
  },
  'journal-max-mb': {
    type: 'number',
    value: 'MB',
    min: 1,
    max: 100000,
    default: 32,
    help: "the journal's cap, all its 4 rotated parts together (default 32)",
  },
} as const satisfies Record<string, OptionSpec>;

export const COCKPIT_OPTIONS = {
  ...HOST_OPTIONS,
  ...NODE_OPTIONS,
  ...RECORD_OPTIONS,
  interval: {
    type: 'number',
    value: 'S',
    min: 0.2,
    max: 3600,
    default: 1,
    help: 'refresh period in seconds (default 1)',
  },
  'no-mouse': {
    type: 'boolean',
    help: 'leave the mouse to the terminal (select and copy text); by default a click focuses a panel or picks a rank and the wheel scrolls',
  },
} as const satisfies Record<string, OptionSpec>;

export const COCKPIT_KEYS = `Keys: ? in the cockpit. Without a terminal (stdout piped) one frame is printed; \`nsa-top status\`
is the headless form.`;

export interface CockpitArgs {
  runDir?: string;
  host?: string;
  identity?: string;
  acceptNewHostKey: boolean;
  readOnly: boolean;
  intervalS: number;
  /** mouse reporting in the cockpit (off with --no-mouse; absent: on) */
  mouse?: boolean;
  /** --node (in order) and --nodes: a multi-node run */
  node?: string[];
  nodes?: string;
  /** --no-record: the journal is not written */
  noRecord?: boolean;
  /** --journal-max-mb */
  journalMaxMb?: number;
}

/** the parsed options as the cockpit takes them */
export function cockpitArgs(
  runDir: string | undefined,
  v: {
    host?: string;
    identity?: string;
    'accept-new-host-key': boolean;
    interval: number;
    'read-only': boolean;
    'no-mouse': boolean;
    node?: string[];
    nodes?: string;
    'no-record'?: boolean;
    'journal-max-mb'?: number;
  },
): CockpitArgs {
  return {
    runDir,
    host: v.host,
    identity: v.identity,
    acceptNewHostKey: v['accept-new-host-key'],
    readOnly: v['read-only'],
    intervalS: v.interval,
    mouse: !v['no-mouse'],
    ...(v.node ? { node: v.node } : {}),
    ...(v.nodes ? { nodes: v.nodes } : {}),
    noRecord: v['no-record'] === true,
    journalMaxMb: v['journal-max-mb'],
  };
}
