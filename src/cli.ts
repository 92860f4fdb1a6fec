// nsa-top command line: parses the first word and hands the rest to one command module. Each
// module in src/commands exports `run(argv): Promise<number>` (the exit code) and `command`, its
// declared command line (src/commands/args.ts); without a command word it is the cockpit's.
import { existsSync } from 'node:fs';
import { defineCommand, helpText, parseCommand, type CommandSpec } from './commands/args.js';
import { cockpitArgs, COCKPIT_KEYS, COCKPIT_OPTIONS, RUN_DIR_ARG } from './commands/options.js';
import { sanitizeText } from './sanitize.js';
import { readerGone } from './stdout.js';
import { readOnlyEnv } from './trainer/control/ownfiles.js';

/** a command module: `run` gives the exit code; `command` declares its command line (all but train's) */
export type CommandModule = { run(argv: string[]): Promise<number>; command?: CommandSpec };
type Command = { summary: string; load: () => Promise<CommandModule> };

/** the command words: what each does (for nsa-top --help) and its module, loaded only when run */
export const COMMANDS: Record<string, Command> = {
  status: { summary: 'print the run snapshot (table or --json) and exit', load: () => import('./commands/status.js') },
  demo: {
    summary: 'start the reference trainer (2 ranks) in a fresh run dir and open the cockpit',
    load: () => import('./commands/demo.js'),
  },
  train: {
    summary: 'run the reference NSA trainer (writes the nsa-vibe contract)',
    load: () => import('./commands/train.js'),
  },
  watchdog: {
    summary: 'headless watchdog: rules, .anomaly_type, dumps, optional .HALT',
    load: () => import('./commands/watchdog.js'),
  },
  report: {
    summary: "grade a run against the runbooks' acceptance phases (Go/No-Go)",
    load: () => import('./commands/report.js'),
  },
  bundle: {
    summary: 'one tar.gz for an incident: report, status, dumps by rank, logs, records, README story; redacted',
    load: () => import('./commands/bundle.js'),
  },
  replay: {
    summary: "the cockpit on a run's history: --at a moment, a timeline of alerts, actions, dumps; read only",
    load: () => import('./commands/replay.js'),
  },
  preflight: {
    summary: 'check a machine before a launch (GPUs, disk, stale .HALT, port, env)',
    load: () => import('./commands/preflight.js'),
  },
  launch: {
    summary: 'launch a run from a profile under a detached supervisor',
    load: () => import('./commands/launch.js'),
  },
  relaunch: {
    summary: 'relaunch a supervised run, resuming from its newest complete checkpoint',
    load: () => import('./commands/relaunch.js'),
  },
  attach: { summary: 'open the cockpit on a supervised run', load: () => import('./commands/attach.js') },
  profiles: { summary: 'list and validate launch profiles', load: () => import('./commands/profiles.js') },
  halt: {
    summary: 'halt a run: now, or after its next complete checkpoint (--after-checkpoint; durable), --cancel',
    load: () => import('./commands/halt.js'),
  },
  stop: {
    summary: "stop a run: the supervisor's escalation (.HALT, then SIGINT, then SIGKILL)",
    load: () => import('./commands/stop.js'),
  },
  dump: {
    summary: 'stack dump of every rank (SIGUSR1, one rank at a time), for scripts',
    load: () => import('./commands/dump.js'),
  },
  supervise: { summary: '(internal) the detached supervisor process', load: () => import('./commands/supervise.js') },
  agent: {
    summary: '(internal) the detached process that carries durable control requests',
    load: () => import('./commands/agent.js'),
  },
  'ssh-keep': {
    summary: '(internal) the detached process that keeps a --host connection for the next command',
    load: () => import('./commands/ssh-keep.js'),
  },
};

export const VERSION = '0.1.0';

/** every exit code nsa-top gives (README "Exit codes" says the same) */
export const EXIT_CODES: [number, string][] = [
  [
    0,
    'done: healthy (status, watchdog --once), GO (report), no FAIL (preflight), an action done or under way, the cockpit quit (q, SIGTERM, SIGHUP: the run keeps going), the trainer finished or halted',
  ],
  [
    1,
    'an anomaly: a critical alert, a stalled or dead run (status, watchdog --once); NO-GO (report); a FAIL (preflight); an action that failed; a trainer rank that failed',
  ],
  [
    2,
    'bad input: unknown command or option, a bad value or --inject, a run dir that is missing or unreadable; report: cannot judge (yet)',
  ],
  [3, 'refused: the action is not allowed now (the reason is printed — the same words as the cockpit)'],
  [130, 'train: stopped by SIGINT after its checkpoint (128 + the signal: 143 for SIGTERM)'],
  [143, 'train: stopped by SIGTERM after its checkpoint'],
];

/** the command words a person types (internal ones left out), plus help and version */
function publicWords(): string[] {
  return [...Object.keys(COMMANDS).filter((n) => n !== 'supervise' && n !== 'agent'), 'help', 'version'];
}

/** Levenshtein distance, with a swap of two neighbours counted as one edit (stauts → status). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  return d[a.length]![b.length]!;
}

/**
 * A first word that is neither a command nor an existing path, and reads as a word (no `/`, no
 * leading `-` or `.`): an unknown command, said as one, with the nearest command when one is near.
 * null: the word is a run dir (or a path), for the cockpit to open.
 */
export function unknownCommand(word: string, exists: (p: string) => boolean): string | null {
  if (word === '' || word.startsWith('-') || word.startsWith('.') || word.includes('/') || exists(word)) return null;
  const near = publicWords()
    .map((w) => ({ w, d: editDistance(word.toLowerCase(), w) }))
    .filter((x) => x.d <= Math.max(1, Math.floor(x.w.length / 3)))
    .sort((x, y) => x.d - y.d)[0];
  return near
    ? `unknown command '${word}' — did you mean ${near.w}? (nsa-top --help lists the commands)`
    : `unknown command '${word}', and no run dir of that name here (nsa-top --help lists the commands)`;
}

/** commands that open the Ink cockpit */
const INTERACTIVE = new Set(['demo', 'attach', 'launch', 'replay']);

/** `nsa-top` without a command word: the cockpit, with the dispatcher's own --help and --version */
const ROOT = defineCommand({
  name: '',
  positional: RUN_DIR_ARG,
  options: { ...COCKPIT_OPTIONS, version: { type: 'boolean', short: 'V', help: 'print the version and exit' } },
  about: `Opens the cockpit on a run directory, or runs a command: nsa-top <command> [args].
${COCKPIT_KEYS}`,
  epilog: [
    'commands:',
    ...Object.entries(COMMANDS)
      .filter(([name]) => name !== 'supervise' && name !== 'agent')
      .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`),
    `  ${'version'.padEnd(10)} print the version and exit (also --version)`,
    '',
    '`nsa-top <command> --help` for details.',
    '',
    'exit codes:',
    ...EXIT_CODES.map(([c, what]) => `  ${String(c).padEnd(3)}  ${what}`),
  ].join('\n'),
});

/**
 * React (and its reconciler and scheduler) choose their development or production build from
 * NODE_ENV when first loaded. The development build checks and records far more on every render
 * (owner stacks, double bookkeeping); the cockpit redraws every second for days, so it loads the
 * production build unless NODE_ENV says otherwise. NODE_ENV is set only while the command's modules
 * load, so the trainers and supervisors nsa-top starts never inherit it.
 */
async function loadProduction<T>(load: () => Promise<T>): Promise<T> {
  if (process.env.NODE_ENV !== undefined) return load();
  process.env.NODE_ENV = 'production';
  try {
    return await load();
  } finally {
    delete process.env.NODE_ENV;
  }
}

export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  // `nsa-top status | head -3`: the reader has gone, not an error of the command's. The rest of
  // the output is dropped and the command ends as it would have (its own exit code: a pipeline
  // under pipefail still sees status's 1 for a critical run), instead of an unhandled EPIPE's stack
  // trace. A terminal hung up under the command (an SSH link dropped: EIO on every write) has gone
  // the same way, for stderr too (a cockpit quitting on the hangup still finishes its actions and
  // closes its journal); a command that outlives it on purpose (stop's escalation) goes on. A
  // watchdog whose log reader died keeps watching (its notifications and metrics do not go through
  // stdout). The reference trainer handles its own streams (src/trainer/reference/main.ts).
  // status prints through writeStdout (src/stdout.ts: the same quiet end, without process.stdout)
  if (first !== 'train' && first !== 'status')
    for (const out of [process.stdout, process.stderr]) out.on('error', quietWhenReaderGone);
  if (first === 'help') {
    process.stdout.write(helpText(ROOT));
    return 0;
  }
  if (first === 'version') {
    process.stdout.write(`nsa-top ${VERSION}\n`);
    return 0;
  }
  if (first !== undefined && !Object.hasOwn(COMMANDS, first)) {
    const unknown = unknownCommand(first, existsSync);
    if (unknown) {
      process.stderr.write(`nsa-top: ${sanitizeText(unknown)}\n`);
      return 2;
    }
  }
  // Ink reads CI / CONTINUOUS_INTEGRATION once, when it loads, and then draws only the last frame
  // at exit. A cockpit on a terminal is interactive whatever the shell exports: drop them before
  // the cockpit's chunk (which imports Ink) is loaded.
  if ((first === undefined || !Object.hasOwn(COMMANDS, first) || INTERACTIVE.has(first)) && process.stdout.isTTY) {
    delete process.env.CI;
    delete process.env.CONTINUOUS_INTEGRATION;
  }
  // --read-only is global: every command takes it (src/commands/args.ts), and it is
  // NSA_TOP_READ_ONLY=1 for every effect (src/trainer/control/ownfiles.ts refuses each write and
  // control.ts each signal), set here before the command loads (never for a word past a `--`).
  // A value of NSA_TOP_READ_ONLY that is neither on nor off is bad input, not silently off.
  const ro = readOnlyEnv();
  if (typeof ro === 'object') {
    process.stderr.write(`nsa-top: ${sanitizeText(ro.error)}\n`);
    return 2;
  }
  if (optionWords(argv).includes('--read-only')) process.env.NSA_TOP_READ_ONLY = '1';
  // --host: the SSH connection starts now, while the command's code loads (src/remote/early.ts)
  const early =
    first === undefined || !Object.hasOwn(COMMANDS, first) || EARLY_HOST.has(first) ? await earlyHost(argv) : null;
  try {
    if (first !== undefined && Object.hasOwn(COMMANDS, first)) {
      const mod = await loadProduction(COMMANDS[first]!.load);
      // the reference trainer takes the real trainer's flags only
      const own = rest.filter((x, i) => first !== 'train' || x !== '--read-only' || i >= optionWords(rest).length);
      return await mod.run(own);
    }
    // No command word: the cockpit, with RUN_DIR and options as given.
    const a = parseCommand(ROOT, argv);
    if (!a) return 0;
    if (a.values.version) {
      process.stdout.write(`nsa-top ${VERSION}\n`);
      return 0;
    }
    // over SSH, a frame before the cockpit's chunk (Ink, React) and the SSH stack load
    if (typeof a.values.host === 'string' && a.values.host !== 'local')
      (await import('./commands/progress.js')).progressLine(`connecting to ${a.values.host}…`);
    const mod = await loadProduction(() => import('./commands/cockpit.js'));
    return await mod.runCockpit(cockpitArgs(a.positional, a.values));
  } catch (err) {
    const e = err as Error & { exitCode?: number };
    process.stderr.write(`nsa-top: ${sanitizeText(e.message)}\n`);
    if (process.env.NSA_TOP_DEBUG) process.stderr.write(`${e.stack}\n`);
    return e.exitCode ?? 1;
  } finally {
    early?.abandonEarly();
  }
}

function quietWhenReaderGone(e: NodeJS.ErrnoException): void {
  if (!readerGone(e.code)) throw e;
}

/** commands whose --host connection is started before their code loads (cli.ts main) */
const EARLY_HOST = new Set(['status', 'dump', 'halt', 'stop', 'attach']);

async function earlyHost(argv: string[]): Promise<typeof import('./remote/early.js') | null> {
  const words = optionWords(argv);
  if (!words.some((w) => w === '--host' || w.startsWith('--host='))) return null;
  const e = await import('./remote/early.js');
  const spec = e.earlySpecOf(words);
  if (spec) e.startEarly(spec);
  return e;
}

/** the words before any `--` (those after it are not options) */
function optionWords(argv: string[]): string[] {
  const end = argv.indexOf('--');
  return end < 0 ? argv : argv.slice(0, end);
}
