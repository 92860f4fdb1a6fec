// `nsa-top watchdog [RUN_DIR] [--halt] [--dump-on-stall] [--interval S] [--stall S] [--host …]`
// A headless daemon replacing the trainer's scripts/_watchdog.py with the same rules the cockpit
// shows (src/checks). Unlike the real one it: judges stalls against the run's own cadence; reads
// the last `progress` record, not the last line; keeps the FIRST anomaly in .anomaly_type (never
// overwrites nan_loss with heartbeat_stall); captures stack dumps of every rank at the moment of a
// stall, before anyone kills the evidence; and exits when the run has ended.
// Every decision is one JSON line on stdout and in <out_dir>/.nsa-top/watchdog.jsonl.
// Observe-only by default: without --halt (and with --once, always) it writes nothing into the run
// dir outside .nsa-top/ (like nvrx-watch's observe/act split).
import { sanitize } from '../sanitize.js';
import { thresholdsFromEnv, unjudgeable } from '../checks/index.js';
import { GpuMonitor } from '../remote/gpu.js';
import { openHost } from '../remote/index.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RECORD_OPTIONS, RUN_DIR_ARG } from './options.js';
import { NODE_OPTIONS, nodeGpus, nodeHosts, nodeListOf, openNodes } from './nodes.js';
import type { NodeGpus } from '../remote/nodegpus.js';
import { watchJournal } from '../journal/index.js';
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import { openRunModelOf, resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { CliError, orCliError } from './errors.js';
import { whyNothingListed } from '../cockpit/observe.js';
import { Watchdog, type WatchdogOptions } from '../cockpit/watchdog.js';
import { checkUrl } from '../cockpit/notify.js';
import type { Severity } from '../checks/index.js';
import { MetricsExporter, parseListen } from '../cockpit/metrics-server.js';
import { textfileProblem } from '../trainer/control/ownfiles.js';
import { hostname as localHostname } from 'node:os';
import { basename, resolve } from 'node:path';
import { VERSION } from '../cli.js';

export { launchedFromRunInfo } from '../checks/launched.js';

export const command = defineCommand({
  name: 'watchdog',
  positional: RUN_DIR_ARG,
  options: {
    halt: { type: 'boolean', help: 'act: .anomaly_type + .HALT on a critical anomaly (NSA_WATCH_HALT=1)' },
    'dump-on-stall': {
      type: 'boolean',
      help: `on a stall, SIGUSR1 every rank (verified pid + start time) for stack dumps
before anything else happens to them (the trainer writes stackdump_*.txt)`,
    },
    interval: {
      type: 'number',
      min: 0.05,
      value: 'S',
      help: `poll interval, s (NSA_WATCH_INTERVAL_S; default 30). A stall is still flagged
on time: the watchdog also wakes when the stall threshold would be crossed`,
    },
    stall: {
      type: 'number',
      min: 0.1,
      value: 'S',
      help: `stall floor, s (NSA_WATCH_HEARTBEAT_STALL_S; default 180); the threshold is
max(floor, 3 × the run's own heartbeat interval)`,
    },
    once: {
      type: 'boolean',
      help: `evaluate once, print the decisions, exit; observe-only (0: healthy, 1: a
critical alert, stalled or dead — the same verdict and code as \`status\`)`,
    },
    notify: {
      type: 'string',
      multiple: true,
      value: 'URL',
      help: `POST each alert raised (and "cleared") as JSON to URL, repeatable; the body has
Slack's "text" and Discord's "content" and the fields run, state, why, level,
alert, message, rank, host, time. A secret: printed as scheme + host only.
env:NAME reads the URL from the variable NAME (kept out of ps)`,
    },
    'notify-cmd': {
      type: 'string',
      value: 'CMD',
      help: `run CMD (/bin/sh -c, as written) for each message, the message JSON on its stdin
(never in its command line); killed after --notify-cmd-timeout`,
    },
    'notify-cmd-timeout': { type: 'number', min: 0.1, value: 'S', default: 10, help: 'how long CMD may run, s (10)' },
    'notify-cooldown': {
      type: 'number',
      min: 0,
      value: 'S',
      default: 600,
      help: 'the same alert is not sent again within S seconds of its last message (600)',
    },
    'notify-level': {
      type: 'string',
      choices: ['info', 'warning', 'critical'],
      value: 'LEVEL',
      default: 'critical',
      help: 'the lowest severity sent: info, warning or critical (critical)',
    },
    deadman: {
      type: 'string',
      value: 'URL',
      help: `GET URL after a pass that could observe the run (its files read, and a rank
proven, or its launcher or supervisor, or the run known ended), at most every
--deadman-every; it stops on purpose when the watchdog goes blind, so a
dead-man monitor (healthchecks.io, Cronitor…) fires. env:NAME as --notify`,
    },
    'deadman-every': {
      type: 'number',
      min: 0.1,
      value: 'S',
      default: 60,
      help: 'the least time between pings, s (60)',
    },
    'metrics-listen': {
      type: 'string',
      value: 'HOST:PORT',
      needs: 'HOST:PORT',
      help: `serve Prometheus metrics at http://HOST:PORT/metrics while watching (text format
0.0.4; binds exactly HOST, e.g. 127.0.0.1:9464; port 0: any free port, said in the start line;
metric list: docs/prometheus.md)`,
    },
    'metrics-file': {
      type: 'string',
      value: 'PATH',
      needs: 'a path ending in .prom',
      help: `write the same metrics each round to PATH, a node_exporter textfile (*.prom, replaced
whole by rename; only a file nsa-top wrote is ever replaced)`,
    },
    'no-gpu': { type: 'boolean', help: 'do not run nvidia-smi (GPU rules: utilisation/power hang verdicts, memory)' },
    ...RECORD_OPTIONS,
    ...HOST_OPTIONS,
    ...NODE_OPTIONS,
  },
  about: `Watches a run with the cockpit's rules, headless (a replacement for the trainer's
scripts/_watchdog.py). Each decision is printed as one JSON line and appended to
<out_dir>/.nsa-top/watchdog.jsonl. Exits when the run has ended.

OBSERVE-ONLY BY DEFAULT: without --halt it writes nothing into the run dir outside .nsa-top/ —
anomalies are reported (stdout, .nsa-top/watchdog.jsonl), not recorded in the run. --once never
acts, whatever the other flags say.
With --halt it acts on the first critical anomaly: it writes <out_dir>/.anomaly_type (only if none
is there: the FIRST anomaly is kept; the real watchdog overwrites nan_loss with heartbeat_stall),
gate_collapse_details.json for a gate collapse, and .HALT ("halt: <anomaly>").
Its loop (not --once) on the training box also takes over a halt-after-checkpoint request whose
carrier (the supervisor or an agent) died: a new nsa-top agent carries it on (audited).`,
  epilog: `Decision lines (JSON, one per line; every line has ts (ms), iso and event):
  start    runDir, outDir, host, halt, dumpOnStall, thresholds, launched, gpu, takeOver,
           notify {targets, deadman, level, cooldownS} (with --notify, --notify-cmd or --deadman)
           metrics {listen (the bound HOST:PORT), file} (with --metrics-listen / --metrics-file)
  state    state (STARTING RESTARTING RUNNING STALLED HALTING HALTED EXITED FINISHED NO TRAINER), why, step
  alert    id, rule, severity (info|warning|critical), title, detail, since, step, rank, anomaly
  clear    id                       (the condition no longer holds)
  verdict  verdicts [{kind, rank?, text}]   (hang diagnosis while the step is frozen)
  unproven processes [{pid, rank, why}]  (named by a heartbeat or an argv, not proven ranks: never signalled)
  anomaly  type, alert, wrote (path | null), kept (the earlier anomaly left in place), why
  dump     perRank [{rank, pid, status, file?, why?}], refused [{pid, rank, why}] (named by a
           heartbeat or an argv but not proven ranks of this run: never signalled)
  halt     path, result, detail
  takeover result, detail, request  (a halt request whose carrier died, handed to a new agent)
  error    message, consecutive     (a failed look; the watch goes on)
  notify   target (scheme + host, or command 'prog'), alert, kind (raised|cleared), result
           (delivered|failed|rejected|dropped|held), attempt, error, retryInS, undelivered, dropped
  deadman  target, result (pinging|failed|withheld), why  (said when it changes)
  exit     state, why, reason, code, notify {delivered, undelivered, dropped, deadmanPings}
The start line's journal says whether this watchdog records the run's journal
(<out_dir>/.nsa-top/journal.jsonl, docs/journal.md): "recording to …", "recording by pid N
(cockpit)" (one writer per run), or "not recording: --no-record".

Alert delivery (--notify, --notify-cmd): one message per alert raised at --notify-level or above,
naming the run's state and why, and the rank; one "cleared" message when it clears, or when the run
ends with it outstanding ("the run ended: HALTED"). The same alert is not sent again within
--notify-cooldown of its last message; one that rises in severity is. A failed delivery is retried
with backoff (1 s doubling to 60 s, for up to an hour; an HTTP 4xx other than 408/429 is not
retried), in a bounded queue per target, never blocking the watch and never ending it; stderr says
"notify: N undelivered, last error …" when that changes.

Thresholds: NSA_WATCH_FLATLINE_N (4), NSA_WATCH_GATE_ENTROPY_MIN (0.2),
NSA_WATCH_GATE_MAX_THRESHOLD (0.9), NSA_WATCH_GATE_COLLAPSE_N (3), NSA_WATCH_HALT_GRACE_S
(300; a launched run's profile stop.halt_grace_s wins).
Exit: 0 the run ended with no anomaly; 1 an anomaly was seen or the run died; 2 bad input (a
missing, unreadable or empty run dir, a bad option or NSA_WATCH_* value).`,
});

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const a = { ...p.values, dir: p.positional, gpu: !p.values['no-gpu'] };
  const t = orCliError('watchdog', () => thresholdsFromEnv(process.env));
  if (a.stall !== undefined) t.stallFloorS = a.stall;
  if (a.interval !== undefined) t.intervalS = a.interval;
  // --once never acts: observe-only whatever the flags say
  const halt = !a.once && (a.halt || t.halt);
  const dumpOnStall = !a.once && a['dump-on-stall'];
  const notify = notifyOptionsOf(a);
  // the metrics flags are bad input before anything is opened
  const listenArg = a['metrics-listen'];
  const listen = listenArg === undefined ? null : parseListen(listenArg);
  if (typeof listen === 'string') throw new CliError(`watchdog: ${listen}`, 2);
  if (listen && a.once)
    throw new CliError('watchdog: --metrics-listen serves while the watchdog watches; --once looks once and exits', 2);
  const metricsFile = a['metrics-file'] === undefined ? null : resolve(a['metrics-file']);
  if (metricsFile) {
    const bad = await textfileProblem(metricsFile);
    if (bad) throw new CliError(`watchdog: --metrics-file ${sanitize(bad)}`, 2);
  }
  // a multi-node run (--node, --nodes, SLURM_JOB_NODELIST): the run dir on the first node, every
  // node's ranks and GPUs in the one observation (src/commands/nodes.ts)
  const nodeList = await nodeListOf(a);
  if (nodeList.length > 0 && a.host)
    throw new CliError("watchdog: --host and --node: name the run dir's machine as the first --node", 2);
  const nodes = nodeList.length > 0 ? await openNodes(nodeList, hostSpecOf(a)) : null;
  const host = nodes ? nodes.primary.host! : await openHost(hostSpecOf(a));
  let exporter: MetricsExporter | null = null;
  try {
    const dir = await resolveRunDir(host, a.dir, process.cwd());
    // the run is resolved once, here: the observation and the audited actions are handed it
    const dirs = await resolveRunDirsAt(host, dir);
    const model = await openRunModelOf(host, dirs);
    let gpu: GpuMonitor | NodeGpus | null = null;
    if (a.gpu) {
      const intervalMs = Math.max(1000, Math.min(5000, t.intervalS * 1000));
      gpu = nodes ? nodeGpus(nodes, intervalMs) : new GpuMonitor(host, { intervalMs });
      await gpu.start();
    }
    if (a.once) {
      // an unreadable or empty run is bad input for a one-shot look, as for status (exit 2)
      const snap = await model.poll();
      const bad = unjudgeable(snap, dirs.outDir);
      if (bad)
        throw new CliError(
          `watchdog: ${(Object.keys(snap.files).length === 0 && (await whyNothingListed(host, dirs.outDir))) || bad}`,
          2,
        );
    }
    if (dirs.outDirProblem) process.stderr.write(`nsa-top watchdog: ${sanitize(dirs.outDirProblem)}\n`); // run.info is input
    const readOnly = readOnlyMode();
    if (listen || metricsFile) {
      exporter = new MetricsExporter({
        version: VERSION,
        hostname: host.kind === 'local' ? localHostname() : hostLabelName(host.label),
        thresholds: t,
        runLabel: basename(dirs.outDir),
        listen,
        file: metricsFile,
        readOnly,
      });
      await exporter.start().catch((e: Error) => {
        throw new CliError(`watchdog: ${e.message}`, 2);
      });
    }
    // the journal (a looping watchdog records what it judged, as a cockpit does; --once only looks)
    const journal = a.once
      ? null
      : await watchJournal(host, dirs, {
          noRecord: a['no-record'],
          maxMb: a['journal-max-mb'],
          readOnly,
          version: VERSION,
        });
    const wd = new Watchdog(host, dirs, {
      halt,
      dumpOnStall,
      thresholds: t,
      gpu,
      model,
      // a looping watchdog on the training box carries on a halt request whose carrier died
      takeOverAs: a.once || readOnly || host.kind !== 'local' || nodes ? null : await currentActor(host),
      readOnly,
      notify,
      exporter,
      journal,
      nodes: nodes ? { procs: nodes, hosts: nodeHosts(nodes) } : null,
    });
    try {
      return await wd.loop(a.once);
    } finally {
      gpu?.stop();
      await journal?.close();
    }
  } finally {
    await exporter?.close();
    if (nodes) await nodes.set.close();
    else await host.close().catch(() => {});
  }
}

/** --notify/--notify-cmd/--deadman as the watchdog's options (null: none); a bad value exits 2 without repeating it */
function notifyOptionsOf(a: {
  notify: string[];
  'notify-cmd'?: string;
  'notify-cmd-timeout': number;
  'notify-cooldown': number;
  'notify-level': string;
  deadman?: string;
  'deadman-every': number;
  once: boolean;
}): WatchdogOptions['notify'] {
  const fromEnv = (flag: string, v: string): string => {
    const m = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(v);
    if (!m) return v;
    const got = process.env[m[1]!];
    if (!got) throw new CliError(`watchdog: ${flag} env:${m[1]}: the variable is not set`, 2);
    return got;
  };
  const urls = a.notify.map((u) => fromEnv('--notify', u));
  const deadman = a.deadman === undefined ? null : fromEnv('--deadman', a.deadman);
  const cmd = a['notify-cmd'] ?? null;
  if (urls.length === 0 && !deadman && cmd === null) return null;
  if (a.once) throw new CliError('watchdog: --notify, --notify-cmd and --deadman need the watch loop (not --once)', 2);
  for (const u of urls) {
    const bad = checkUrl('--notify', u);
    if (bad) throw new CliError(`watchdog: ${bad}`, 2);
  }
  const badDeadman = deadman === null ? null : checkUrl('--deadman', deadman);
  if (badDeadman) throw new CliError(`watchdog: ${badDeadman}`, 2);
  if (cmd !== null && cmd.trim() === '') throw new CliError('watchdog: --notify-cmd needs a command', 2);
  return {
    urls,
    cmd,
    deadman,
    cooldownS: a['notify-cooldown'],
    level: a['notify-level'] as Severity,
    deadmanEveryS: a['deadman-every'],
    cmdTimeoutS: a['notify-cmd-timeout'],
  };
}

/** the machine's name in an SSH target (user@box:port → box), for the metrics' `hostname` label */
function hostLabelName(label: string): string {
  return label.replace(/^[^@]*@/, '').replace(/:\d+$/, '');
}
