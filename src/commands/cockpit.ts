// `nsa-top [RUN_DIR] [options]` (its command line: COCKPIT_OPTIONS in options.ts): the full-screen
// cockpit. Wires Host → Collector → Ink App; owns the terminal (alternate screen, cursor, resize)
// and the non-TTY fallback (one frame, then exit).
import { render } from 'ink';
import { createElement } from 'react';
import { createActions, supervisorStopFn, type RelaunchFn, type StopFn } from '../cockpit/actions.js';
import { Collector, type GpuSource } from '../cockpit/collector.js';
import { withLook, type Host } from '../remote/host.js';
import { GpuMonitor } from '../remote/gpu.js';
import { LocalHost } from '../remote/local/host.js';
import { currentActor } from '../trainer/control/actions.js';
import { sanitizeText } from '../sanitize.js';
import { actionsInFlight, settleActions } from '../trainer/control/audit.js';
import { relaunch } from '../trainer/launch/launch.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import type { Actor } from '../trainer/control/types.js';
import { LogBack } from '../trainer/run/logback.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { lookAheadOf } from '../trainer/run/lookahead.js';
import { resolve } from 'node:path';
import { App } from '../ui/App.js';
import { compose } from '../ui/compose.js';
import { MOUSE_OFF, MOUSE_ON } from '../ui/input.js';
import { FramePainter } from '../ui/paint.js';
import { noColor } from '../ui/palette.js';
import { plain } from '../ui/text.js';
import { initialView } from '../ui/view.js';
import { readOnlyMode } from '../trainer/control/ownfiles.js';
import type { CockpitArgs } from './options.js';
import { CliError } from './errors.js';
import { relaunchRequestFate } from '../checks/carry.js';
import { judgeAdoption } from '../checks/preflight.js';
import { makePager } from './pager.js';
import { progressLine } from './progress.js';
import { nodeGpus, nodeHosts, nodeListOf, openNodes } from './nodes.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { JournalRecorder, type RecordChoice } from '../journal/index.js';
import { ENDED_STATES } from '../checks/runstate.js';
import { VERSION } from '../cli.js';
import { watchHangUp } from '../stdout.js';

async function openHostFor(a: CockpitArgs): Promise<Host> {
  if (!a.host) return new LocalHost();
  try {
    // loaded only for --host: the SSH stack (ssh2) costs ~15 MB of RSS a local cockpit does not need
    const { openHost } = await import('../remote/index.js');
    return await openHost({ host: a.host, identity: a.identity, acceptNewHostKey: a.acceptNewHostKey });
  } catch (e) {
    throw new CliError(`--host ${a.host}: ${(e as Error).message}`, 2);
  }
}

function gpuSourceFor(host: Host, intervalMs: number): GpuMonitor {
  const m = new GpuMonitor(host, { intervalMs });
  // start() resolves at the first sample; the cockpit does not wait for it (current() never blocks)
  void m.start().catch(() => {});
  return m;
}

export interface CockpitSession {
  host: Host;
  runDir: string;
  readOnly: boolean;
  intervalMs: number;
  relaunch?: RelaunchFn;
  stop?: StopFn;
  /** the run resolved once at the edge */
  dirs?: RunDirs;
  /** who takes over a halt request whose carrier died, while the cockpit is open on a terminal */
  actor?: Actor | null;
  /** SGR mouse reporting while the cockpit is on screen (default on; --no-mouse) */
  mouse?: boolean;
  /** a multi-node run (--node): every node's ranks (the host above is the first node's) */
  nodes?: NodeProcesses | null;
  /** the GPUs to show (a multi-node run: every node's, merged); absent: the host's own */
  gpu?: GpuSource & { stop(): void };
  /** the run's journal (--no-record, --journal-max-mb); absent: recorded with the defaults */
  record?: RecordChoice;
}

const ALT_ON = '\x1b[?1049h\x1b[H\x1b[?25l';
const ALT_OFF = '\x1b[?25h\x1b[?1049l';

/** Runs the cockpit until the operator quits. Returns how it ended. */
export async function openCockpit(o: CockpitSession): Promise<'quit' | 'printed' | 'signal'> {
  /** its terminal's hangup (an SSH link dropped): a quit, then the dead terminal left alone (../stdout.ts) */
  let hangUp: ReturnType<typeof watchHangUp> | null = null;
  const gpu = o.gpu ?? gpuSourceFor(o.host, Math.max(2000, o.intervalMs));
  // the journal records what this cockpit shows (a one-frame print does not: it only looks)
  const journal =
    o.dirs && process.stdout.isTTY
      ? new JournalRecorder({
          host: o.host,
          dirs: o.dirs,
          as: 'cockpit',
          readOnly: o.readOnly,
          version: VERSION,
          ...o.record,
        })
      : null;
  const collector = new Collector({
    ...(journal ? { journal: () => journal.status } : {}),
    host: o.host,
    runDir: o.runDir,
    intervalMs: o.intervalMs,
    readOnly: o.readOnly,
    gpu,
    ...(o.dirs ? { dirs: o.dirs } : {}),
    ...(o.nodes ? { nodes: o.nodes } : {}),
    // a one-frame print (no terminal) only looks; an open cockpit carries an orphaned request on
    actor: process.stdout.isTTY ? (o.actor ?? null) : null,
  });
  const nc = noColor();
  const out = process.stdout;
  try {
    if (!out.isTTY) {
      // Piped: one frame, plain, and a pointer to the headless form.
      await collector.tick();
      const s = await collector.tick();
      const f = compose(s, initialView(), out.columns || 120, out.rows || 40, Date.now() + (s.clockOffsetMs ?? 0));
      out.write(f.lines.map((l) => plain(l).replace(/ +$/, '')).join('\n') + '\n');
      process.stderr.write(
        'nsa-top: stdout is not a terminal — printed one frame. `nsa-top status [--json]` is the headless form.\n',
      );
      return 'printed';
    }
    const interactive = process.stdin.isTTY === true;
    if (!interactive)
      process.stderr.write(
        'nsa-top: stdin is not a terminal: keys are off (watch only; Ctrl-C quits). `nsa-top status` is the headless form.\n',
      );
    if (journal) {
      // a journal records a run while it lives: a cockpit opened on a run that has ended (a finished
      // run looked at again, a recorded fixture) writes nothing until the run lives again (a relaunch)
      let started: Promise<unknown> | null = null;
      collector.subscribe((st) => {
        if (!started) {
          if (ENDED_STATES.has(st.runState)) {
            journal.status = 'not recording: the run has ended (a journal records a run while it lives)';
            return;
          }
          started = journal.start();
        }
        void started.then(() => journal.record(st));
      });
    }
    collector.start();
    const actions = createActions({
      host: o.host,
      runDir: o.runDir,
      ...(o.dirs ? { dirs: o.dirs } : {}),
      readOnly: o.readOnly,
      state: () => collector.get(),
      relaunch: o.relaunch,
      stop: o.stop,
      changed: () => collector.refreshSoon(),
      // a multi-node run: each rank's signal on its own node
      ...(o.nodes ? { nodes: nodeHosts(o.nodes) } : {}),
    });
    const renderMs = { current: null as number | null };
    // the mouse only where keys are read (a watch-only cockpit would leave the reports unread)
    const mouse = interactive && o.mouse !== false;
    out.write(ALT_ON + (mouse ? MOUSE_ON : ''));
    // NSA_TOP_RENDER=ink draws through Ink's own output (whole frame each time); the default paints
    // changed rows only (see src/ui/paint.ts)
    const painter = process.env.NSA_TOP_RENDER === 'ink' ? undefined : new FramePainter((s) => out.write(s), nc);
    // a full repaint now and then heals anything that wrote over the frame (a stray stderr line)
    const heal = setInterval(() => painter?.invalidate(), 30_000);
    heal.unref();
    const onResize = () => {
      if (painter) painter.invalidate();
      else out.write('\x1b[2J\x1b[H');
    };
    out.on('resize', onResize);
    // quit, a signal, a crash (the exit hook): the mouse goes back to the terminal with the screen.
    // Mouse off is written even with --no-mouse: it costs nothing and heals a terminal left on by a kill -9
    const restore = () => out.write(MOUSE_OFF + ALT_OFF);
    process.once('exit', restore);
    // `o`: the pager has the terminal meanwhile; a Ctrl-C typed in it is the pager's, not a quit
    let pagingUntil = 0;
    const pager = makePager(o.host, {
      suspend: () => {
        pagingUntil = Infinity;
        out.write(MOUSE_OFF + ALT_OFF);
        if (interactive) process.stdin.setRawMode(false);
      },
      resume: () => {
        if (interactive) process.stdin.setRawMode(true);
        out.write(ALT_ON + (mouse ? MOUSE_ON : ''));
        painter?.invalidate();
        pagingUntil = Date.now() + 500;
      },
    });
    const inst = render(
      createElement(App, {
        store: collector,
        actions,
        interactive,
        noColor: nc,
        renderMs,
        painter,
        logSource: new LogBack(o.host),
        pager,
      }),
      {
        maxFps: 4,
        exitOnCtrlC: !interactive,
        // with the painter, Ink's console patching would print at the cursor over the frame
        patchConsole: !painter,
        incrementalRendering: false,
        onRender: (m) => {
          if (!painter) renderMs.current = m.renderTime;
        },
      },
    );
    let bySignal = false;
    const onSig = () => {
      bySignal = true;
      inst.unmount();
    };
    const onInt = () => {
      if (Date.now() < pagingUntil) return process.once('SIGINT', onInt);
      onSig();
    };
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onSig);
    hangUp = watchHangUp([out], onSig);
    try {
      await inst.waitUntilExit();
    } finally {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onSig);
      hangUp.stopListening();
      out.off('resize', onResize);
      clearInterval(heal);
      process.off('exit', restore);
      try {
        restore();
      } catch {
        /* the terminal is gone (hangup) */
      }
    }
    return bySignal ? 'signal' : 'quit';
  } finally {
    await finishActions();
    collector.stop();
    gpu?.stop();
    await journal?.close();
    // its exit code, not an abort in node's exit (it restores the terminal it started on: ../stdout.ts)
    hangUp?.release();
  }
}

/** the longest a quit waits for an action under way (a dump of every rank takes ~10 s at most) */
const ACTIONS_SETTLE_MS = 15_000;

/**
 * After the screen closed: an action still under way (a dump signals one rank at a time, a relaunch
 * waits for its supervisor) finishes and keeps its record, and the operator is told so; Ctrl-C cuts
 * the wait, and what was cut is recorded as abandoned. A quit never leaves half an action unlogged.
 */
async function finishActions(): Promise<void> {
  const busy = actionsInFlight();
  if (!busy.length) return;
  const what = [...new Set(busy.map((b) => b.action))].join(', ');
  process.stderr.write(
    `nsa-top: waiting for the ${what} under way to finish (up to ${ACTIONS_SETTLE_MS / 1000} s; its record goes to the run's action log); Ctrl-C abandons it and records that\n`,
  );
  let onInt: (() => void) | undefined;
  const interrupted = new Promise<void>((r) => (onInt = r));
  process.once('SIGINT', onInt!);
  try {
    const { kept, abandoned } = await settleActions(
      ACTIONS_SETTLE_MS,
      'nsa-top quit while it was under way',
      interrupted,
    );
    for (const r of kept) process.stderr.write(`nsa-top: ${sanitizeText(`${r.action} ${r.result}: ${r.detail}`)}\n`);
    if (abandoned.length)
      process.stderr.write(
        `nsa-top: abandoned the ${[...new Set(abandoned)].join(', ')}: recorded so in the run's action log\n`,
      );
  } finally {
    process.off('SIGINT', onInt!);
  }
}

/** The cockpit on the run `a` names (the dispatcher and `attach` parse the command line). */
export async function runCockpit(args: CockpitArgs): Promise<number> {
  // read-only by the flag or by NSA_TOP_READ_ONLY=1: the keys say so, not only the refusals
  const a = { ...args, readOnly: args.readOnly || readOnlyMode() };
  const nodeList = await nodeListOf(args);
  if (nodeList.length > 0) return runNodesCockpit(a, nodeList);
  // over SSH a frame at once, before the SSH stack loads and the handshake (seconds on a slow link)
  const say = a.host && process.stdout.isTTY ? progressLine : null;
  say?.(`connecting to ${a.host}…`);
  let host: Host;
  try {
    host = await openHostFor(a);
  } catch (e) {
    say?.(null);
    throw e;
  }
  try {
    // finding the run is one look (Host.look): over SSH its stats, listing and pointers in one round trip
    const guess = a.runDir ? resolve(process.cwd(), a.runDir) : null;
    const ahead = guess ? lookAheadOf({ runDir: guess, outDir: guess }, 'resolve') : undefined;
    const { runDir, dirs } = await withLook(host, ahead, async (look) => {
      const runDir = await resolveRunDir(look, a.runDir, process.cwd());
      if (say) {
        const n = await look.list(runDir).then(
          (l) => l.length,
          () => null,
        );
        say(`reading ${n === null ? 'the run' : `${n} files`} of ${runDir} on ${host.label}…`);
      }
      return { runDir, dirs: await resolveRunDirsAt(look, runDir) };
    });
    const actor = await currentActor(host);
    await openCockpit({
      host,
      runDir,
      dirs,
      actor,
      readOnly: a.readOnly,
      intervalMs: Math.round(a.intervalS * 1000),
      mouse: a.mouse,
      record: { noRecord: a.noRecord, maxMb: a.journalMaxMb },
      relaunch: async ({ removeStaleHalt, steps }) => {
        const r = await relaunch(host, runDir, actor, {
          removeStaleHalt,
          readOnly: a.readOnly,
          judgeAdoption,
          judgeRequest: relaunchRequestFate,
          steps,
        });
        return { ok: r.result === 'ok', result: r.result, detail: r.detail };
      },
      stop: supervisorStopFn(host, runDir, actor, a.readOnly),
    });
    return 0;
  } catch (e) {
    // the error is printed on the normal screen
    say?.(null);
    throw e;
  } finally {
    // q quits within a second whatever a child or a mount does: anything still holding the event
    // loop this long after the cockpit closed (a command ignoring SIGTERM, a hung read) is cut short;
    // the exit hook of LocalHost SIGKILLs every command group still running
    setTimeout(() => process.exit(process.exitCode ?? 0), QUIT_DEADLINE_MS).unref();
    await host.close().catch(() => {});
  }
}

/** how long after the cockpit closes the process may take to end */
const QUIT_DEADLINE_MS = 300;

/**
 * The cockpit over a multi-node run (--node): the run dir read on the first node, every node's ranks
 * in the Ranks panel with their node. Its actions go through the same audited path as on one host:
 * a dump and an escalation check and signal each rank on the node its pid lives on (and name a node
 * that cannot be reached), a halt writes the one .HALT in the run dir on the first node, and the
 * action log is the run dir's there. Relaunch over several nodes is not built (refused, said why).
 */
async function runNodesCockpit(a: CockpitArgs, names: string[]): Promise<number> {
  if (a.host) throw new CliError("--host and --node: name the run dir's machine as the first --node", 2);
  const nodes = await openNodes(names, { identity: a.identity, acceptNewHostKey: a.acceptNewHostKey });
  const host = nodes.primary.host!;
  try {
    const runDir = await resolveRunDir(host, a.runDir, process.cwd());
    await openCockpit({
      host,
      runDir,
      dirs: await resolveRunDirsAt(host, runDir),
      // a halt request whose carrier died is carried on by a cockpit of one host only
      actor: null,
      readOnly: a.readOnly,
      intervalMs: Math.round(a.intervalS * 1000),
      mouse: a.mouse,
      nodes,
      // every node's GPUs (nvidia-smi on each node's connection), each device with its node
      gpu: nodeGpus(nodes, Math.max(2000, Math.round(a.intervalS * 1000))),
    });
    return 0;
  } finally {
    await nodes.set.close();
  }
}
