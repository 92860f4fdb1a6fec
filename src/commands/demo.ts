// `nsa-top demo`: the README's first command. Starts the reference trainer (2 ranks, the `demo`
// profile) under a detached supervisor in a fresh run dir under ./artifacts/, opens the cockpit on
// it, and on quit asks whether to stop the run (default: halt it gracefully, keeping a checkpoint),
// then says where the artifacts are. It says the run is halted only once every process of it —
// supervisor, launcher, ranks — is gone, not when the supervisor writes its end state.
import { createInterface } from 'node:readline/promises';
import { LocalHost } from '../remote/local/host.js';
import { listProcesses, readProc } from '../remote/procs.js';
import { currentActor, describeActor, removeStaleHalt } from '../trainer/control/actions.js';
import { readStopFacts } from '../trainer/control/stopfacts.js';
import { launchRun, readSupervisorState, relaunch, stopRun } from '../trainer/launch/launch.js';
import { supervisorStopFn } from '../cockpit/actions.js';
import { openCockpit } from './cockpit.js';
import { defineCommand, parseCommand } from './args.js';
import { supervisorInCharge, supervisorRestarts } from '../checks/control.js';
import { judgeAdoption } from '../checks/preflight.js';
import { relaunchRequestFate } from '../checks/carry.js';
import { resolveRunDirsAt } from '../trainer/run/rundir.js';

/** the demo profile's length (src/trainer/launch/profiles-builtin.ts): `profiles` and `demo` say the same */
const DEMO_STEPS = 3000;

export const command = defineCommand({
  name: 'demo',
  options: {
    steps: {
      type: 'number',
      integer: true,
      min: 1,
      value: 'N',
      help: `steps to train (default: the demo profile's ${DEMO_STEPS}, a few minutes on a laptop — time to try the keys)`,
    },
    inject: {
      type: 'string',
      multiple: true,
      value: 'SPEC',
      help: 'rehearse a failure, e.g. hang@step=40,rank=1 (see nsa-top train --help)',
    },
    interval: {
      type: 'number',
      min: 0.2,
      max: 3600,
      default: 1,
      value: 'S',
      help: 'cockpit refresh period (default 1)',
    },
    'leave-running': { type: 'boolean', help: 'do not ask on quit; leave the run going' },
  },
  about: `Starts nsa-top's reference NSA trainer (2 ranks, ${DEMO_STEPS} steps, a checkpoint every 25 steps, the
newest 5 kept by the trainer's --keep-checkpoints) in a fresh run dir
under ./artifacts/train_runs/, and opens the cockpit on it. Try d (stack dump of every rank),
h (halt), r (relaunch from the checkpoint), ? (all keys). On quit you are asked whether to stop
the run (default: halt gracefully); the run dir is printed either way.`,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { steps, inject, interval: intervalS, 'leave-running': leave } = a.values;
  const host = new LocalHost();
  const extraArgs = inject.flatMap((s) => ['--inject', s]);
  // steps: the demo profile's unless given
  const { runDir } = await launchRun(host, {
    profile: 'demo',
    cwd: process.cwd(),
    steps,
    extraArgs,
    judgeRequest: relaunchRequestFate,
  });
  process.stderr.write(`nsa-top demo: reference trainer started (2 ranks) in ${runDir}\n`);
  const actor = await currentActor(host);
  const how = await openCockpit({
    host,
    runDir,
    // resolved at the edge like every cockpit's, so the demo's journal is recorded too
    dirs: await resolveRunDirsAt(host, runDir),
    readOnly: false,
    intervalMs: Math.round(intervalS * 1000),
    relaunch: async ({ removeStaleHalt, steps: to }) => {
      const r = await relaunch(host, runDir, actor, {
        removeStaleHalt,
        judgeAdoption,
        judgeRequest: relaunchRequestFate,
        steps: to,
      });
      return { ok: r.result === 'ok', result: r.result, detail: r.detail };
    },
    stop: supervisorStopFn(host, runDir, actor, false),
  });
  const st = await readSupervisorState(host, runDir);
  const live = st !== null && supervisorRestarts(st.state);
  if (live && !leave) {
    let stop = true;
    // after a hangup or a kill signal there is nobody to ask: the default (halt) applies
    if (how === 'quit' && process.stdin.isTTY && process.stdout.isTTY) {
      // Ink leaves stdin paused and unreferenced: take it back, or the process would just exit here.
      process.stdin.setRawMode?.(false);
      process.stdin.ref?.();
      process.stdin.resume();
      stop = await askStop();
    }
    if (stop) {
      // every process of the run, taken while they all still run: "halted" is said only once each is gone
      const procs = await runProcesses(host, runDir);
      const r = await stopRun(host, runDir, actor, { reason: 'demo ended' });
      process.stdout.write(`${r.detail}\n`);
      const until = Date.now() + 20_000;
      for (;;) {
        const s = await readSupervisorState(host, runDir);
        const over = !s || !supervisorInCharge(s.state);
        // the supervisor writes its end state before it exits, and a killed rank may outlive its launcher
        const left = over ? await stillAlive(host, procs) : procs;
        if (over && left.length === 0) {
          process.stdout.write(`demo run ${s?.state ?? 'stopped'}${s?.note ? `: ${s.note}` : ''}\n`);
          // the .HALT this quit wrote has done its work: removed (audited), so the next `r` on this
          // run relaunches from its checkpoint without a stale .HALT in the way
          if (s?.state === 'halted') {
            const rm = await removeStaleHalt(host, runDir, actor).catch((e: Error) => ({
              result: 'failed',
              detail: e.message,
            }));
            if (rm.result !== 'ok') process.stdout.write(`the demo's .HALT is still there: ${rm.detail}\n`);
          }
          // a hung demo does not answer .HALT: say how it really ended
          const f = await readStopFacts(host, runDir).catch(() => null);
          if (f?.stopEscalation)
            process.stdout.write(
              `not a graceful halt: .HALT went unanswered, the ranks were stopped by ${f.stopEscalation} (${f.escalationWhy ?? 'supervisor'}); see nsa-top report ${runDir}\n`,
            );
          break;
        }
        if (Date.now() > until) {
          process.stdout.write(
            over
              ? `demo run ${s?.state ?? 'stopped'}, but after 20 s ${left.length === 1 ? 'a process' : `${left.length} processes`} of it still ${left.length === 1 ? 'runs' : 'run'} (pid ${left.map((p) => p.pid).join(', ')})\n`
              : `still stopping after 20 s (state ${s!.state}); the supervisor escalates on its own\n`,
          );
          break;
        }
        await new Promise((res) => setTimeout(res, over ? 100 : 300));
      }
    } else
      process.stdout.write(`left running (stop it later: nsa-top ${runDir}, then h) — by ${describeActor(actor)}\n`);
  }
  process.stdout.write(`artifacts: ${runDir}\nreopen:    nsa-top ${runDir}\n`);
  return 0;
}

type Proc = { pid: number; startTime: string };

/** The run's processes now: its supervisor and every descendant of it (the trainer's launcher, the ranks). */
async function runProcesses(host: LocalHost, runDir: string): Promise<Proc[]> {
  const st = await readSupervisorState(host, runDir);
  const out: Proc[] = [];
  for (const p of [st?.supervisor, st?.child]) if (p?.startTime && !out.some((q) => q.pid === p.pid)) out.push(p);
  const procs = await listProcesses(host).catch(() => []);
  const kids = new Map<number, typeof procs>();
  for (const p of procs) kids.set(p.ppid, [...(kids.get(p.ppid) ?? []), p]);
  const walk = (pid: number, depth: number): void => {
    if (depth > 8) return;
    for (const k of kids.get(pid) ?? []) {
      if (!out.some((q) => q.pid === k.pid)) out.push({ pid: k.pid, startTime: k.startTime });
      walk(k.pid, depth + 1);
    }
  };
  for (const root of [...out]) walk(root.pid, 0);
  return out;
}

/** Those of `procs` still running (same pid and start time, and not a zombie waiting to be reaped). */
async function stillAlive(host: LocalHost, procs: Proc[]): Promise<Proc[]> {
  const left: Proc[] = [];
  for (const p of procs) {
    const info = await readProc(host, p.pid).catch(() => null);
    if (info && info.startTime === p.startTime && info.state !== 'Z' && info.state !== 'X') left.push(p);
  }
  return left;
}

/**
 * "Halt it? [Y/n]". Ctrl-C, Ctrl-D or a hangup at the question take the safe default (halt): the
 * operator who leaves the question must not leave a trainer running behind them.
 */
async function askStop(): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const ac = new AbortController();
  const leave = () => ac.abort();
  rl.on('SIGINT', leave);
  rl.on('close', leave);
  process.once('SIGHUP', leave);
  process.once('SIGTERM', leave);
  process.once('SIGINT', leave);
  try {
    const ans = (
      await rl.question('The demo run is still training. Halt it gracefully (checkpoint, then stop)? [Y/n] ', {
        signal: ac.signal,
      })
    )
      .trim()
      .toLowerCase();
    return !(ans === 'n' || ans === 'no');
  } catch {
    process.stdout.write('\n(no answer: halting — the default)\n');
    return true;
  } finally {
    process.off('SIGHUP', leave);
    process.off('SIGTERM', leave);
    process.off('SIGINT', leave);
    rl.off('close', leave);
    rl.close();
  }
}
