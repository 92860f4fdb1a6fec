// `nsa-top replay [RUN_DIR] [--at TIME|STEP] [--speed X] [--host H]`: the cockpit on a run's history
// instead of the run now. The same App, panels and CockpitState, driven by a replay player
// (src/replay/player.ts) over the source openReplaySource picks (nsa-top's journal, else the
// trainer's files); the header says REPLAY and the moment, the footer is the timeline, every action
// is refused with the reason. Piped: one frame of the moment asked for, and what the source cannot show.
import { render } from 'ink';
import { createElement } from 'react';
import type { CockpitActions } from '../cockpit/actions.js';
import type { Host } from '../remote/host.js';
import { openHost } from '../remote/index.js';
import { momentOfStep, Player } from '../replay/player.js';
import { openReplaySource } from '../replay/open.js';
import { parseAt, spanText } from '../replay/timeline.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { App } from '../ui/App.js';
import { compose } from '../ui/compose.js';
import { FramePainter } from '../ui/paint.js';
import { noColor } from '../ui/palette.js';
import { replayRefusal } from '../ui/replaykeys.js';
import { plain } from '../ui/text.js';
import { initialView } from '../ui/view.js';
import { defineCommand, parseCommand } from './args.js';
import { CliError } from './errors.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { progressLine } from './progress.js';
import { watchHangUp } from '../stdout.js';

export const command = defineCommand({
  name: 'replay',
  positional: RUN_DIR_ARG,
  options: {
    at: {
      type: 'string',
      value: 'TIME|STEP',
      help: 'open at this moment: ISO time, HH:MM[:SS] (local time, as the screen shows), or step=N (default: the end)',
    },
    speed: {
      type: 'number',
      value: 'X',
      min: 0.01,
      max: 100000,
      help: 'play at X recorded seconds per second (default 1; + and - change it)',
    },
    ...HOST_OPTIONS,
  },
  about: `Replays a run in the cockpit: every panel as it stood at a moment of the run's history, judged
by the same checks. The history is nsa-top's journal of the run when there is one, else the
trainer's own files read as they stood then (heartbeats, training.csv and the log by step, stack
dumps, checkpoints, .HALT, nsa-top's records); what they cannot show (processes, GPUs, the host) is
said. The header says REPLAY and the moment; the footer is the timeline with its markers (! alert,
+ cleared, A action, D dump, S state change, C checkpoint, R restart). Keys: space play/pause,
, and . step, [ and ] the previous/next marker, - and + speed, < and > the start and the end;
the cockpit's other keys as usual. Every action (d, h, r, a) is refused: a recording is only read.
Piped, it prints the frame of the moment asked for, and the recording's span and gaps.`,
  epilog: 'Exit: 0 the replay closed (or the frame printed); 2 bad input (no run, a bad --at or --speed).',
});

/** The actions of a replay: each refused with the reason (the keymap refuses them first). */
function refusingActions(player: Player): CockpitActions {
  const no = () => {
    const s = player.get();
    const detail = s?.replay ? replayRefusal(s.replay).why : 'replay: a recording is only read';
    return Promise.resolve({ ok: false, result: 'refused' as const, detail });
  };
  return {
    readOnly: true,
    dump: () => Promise.resolve({ results: [], pySpy: false }),
    halt: no,
    cancelHalt: no,
    escalate: no,
    relaunch: no,
    ack: no,
    prepareRelaunch: async () => ({
      refusal: (await no()).detail,
      resume: null,
      fresh: false,
      warnings: [],
      skipped: [],
      adopted: null,
    }),
  };
}

const ALT_ON = '\x1b[?1049h\x1b[H\x1b[?25l';
const ALT_OFF = '\x1b[?25h\x1b[?1049l';

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const v = p.values;
  const say = process.stdout.isTTY ? progressLine : null;
  let host: Host;
  try {
    host = await openHost(hostSpecOf(v));
  } catch (e) {
    throw new CliError(`--host ${v.host}: ${(e as Error).message}`, 2);
  }
  try {
    const runDir = await resolveRunDir(host, p.positional, process.cwd());
    say?.(`reading the history of ${runDir}…`);
    const dirs = await resolveRunDirsAt(host, runDir);
    const { source } = await openReplaySource(host, dirs);
    let at = source.span.end;
    if (v.at !== undefined) {
      let spec;
      try {
        spec = parseAt(v.at, source.span);
      } catch (e) {
        throw new CliError((e as Error).message, 2);
      }
      if ('step' in spec) {
        const m = await momentOfStep(source, spec.step);
        if (m === null) throw new CliError(`--at step=${spec.step}: the recording never reaches that step`, 2);
        at = m;
      } else {
        if (spec.at < source.span.start - 1000 || spec.at > source.span.end + 1000)
          throw new CliError(`--at ${v.at}: outside the recording (${spanText(source.span)})`, 2);
        at = spec.at;
      }
    }
    const player = new Player(source, { at, speed: v.speed ?? 1, run: runDir });
    const first = await player.open();
    say?.(null);
    const out = process.stdout;
    if (!out.isTTY) {
      const f = compose(first, initialView(), out.columns || 120, out.rows || 40, first.at);
      out.write(f.lines.map((l) => plain(l).replace(/ +$/, '')).join('\n') + '\n');
      out.write(`replay: ${source.origin}; ${spanText(source.span)}; ${source.markers.length} markers\n`);
      for (const m of source.missing) out.write(`replay: cannot show: ${m}\n`);
      return 0;
    }
    return await openReplayCockpit(player);
  } finally {
    say?.(null);
    setTimeout(() => process.exit(process.exitCode ?? 0), 300).unref();
    await host.close().catch(() => {});
  }
}

async function openReplayCockpit(player: Player): Promise<number> {
  const out = process.stdout;
  const interactive = process.stdin.isTTY === true;
  const nc = noColor();
  const painter = process.env.NSA_TOP_RENDER === 'ink' ? undefined : new FramePainter((s) => out.write(s), nc);
  const renderMs = { current: null as number | null };
  out.write(ALT_ON);
  const restore = () => out.write(ALT_OFF);
  process.once('exit', restore);
  const onResize = () => painter?.invalidate();
  out.on('resize', onResize);
  player.start();
  const inst = render(
    createElement(App, {
      store: player,
      actions: refusingActions(player),
      interactive,
      noColor: nc,
      renderMs,
      painter,
      replay: player,
    }),
    { maxFps: 4, exitOnCtrlC: !interactive, patchConsole: !painter, incrementalRendering: false },
  );
  const onSig = () => inst.unmount();
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);
  // its terminal's hangup (an SSH link dropped): a quit, as the cockpit's (../stdout.ts); a paused
  // replay writes nothing, so it also looks every 2 s whether its terminal is still one
  const hangUp = watchHangUp([out], onSig, { probeMs: 2000 });
  try {
    await inst.waitUntilExit();
  } finally {
    player.stop();
    process.off('SIGINT', onSig);
    process.off('SIGTERM', onSig);
    hangUp.stopListening();
    out.off('resize', onResize);
    process.off('exit', restore);
    try {
      restore();
    } catch {
      /* the terminal is gone */
    }
    hangUp.release();
  }
  return 0;
}
