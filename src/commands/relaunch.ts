// `nsa-top relaunch RUN_DIR [--steps N] [--remove-stale-halt] [--yes]` — start a supervised run again, resuming
// from its newest complete checkpoint. A .HALT in its out_dir is removed only after confirmation.
import { basename, join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { LocalHost } from '../remote/local/host.js';
import { currentActor, readOnlyMode } from '../trainer/control/actions.js';
import type { ActionRecord } from '../trainer/control/types.js';
import { sanitize } from '../sanitize.js';
import { describePick, describeReadopt, prepareRelaunch, relaunch } from '../trainer/launch/launch.js';
import { defineCommand, parseCommand } from './args.js';
import { CliError } from './errors.js';
import { refusedByState } from './fit.js';
import { judgeAdoption } from '../checks/preflight.js';
import { relaunchRequestFate } from '../checks/carry.js';
import { HOST_OPTIONS, NODE_OPTIONS } from './options.js';
import { relaunchOnNodes } from './launch-nodes.js';

export const command = defineCommand({
  name: 'relaunch',
  positional: { name: 'RUN_DIR', required: true, help: 'the run to start again (its launcher dir or out_dir)' },
  options: {
    'remove-stale-halt': { type: 'boolean', help: 'remove a .HALT left in the out_dir (else the relaunch is refused)' },
    steps: {
      type: 'number',
      integer: true,
      min: 1,
      value: 'N',
      help: 'train to N steps (a FINISHED run is relaunched only with N past the steps it trained)',
    },
    'carry-requests': {
      type: 'boolean',
      help: "carry the old run's pending halt-after-checkpoint into the relaunch (else a moot one is ended)",
    },
    yes: { type: 'boolean', short: 'y', help: "no question: for scripts (on a terminal you type the run's name)" },
    'allow-command': {
      type: 'string',
      multiple: true,
      value: 'NAME',
      help: 'run a command that is not a known trainer, named by its program (e.g. node); shown first all the same',
    },
    ...NODE_OPTIONS,
    identity: HOST_OPTIONS.identity,
    'accept-new-host-key': HOST_OPTIONS['accept-new-host-key'],
  },
  about: `Starts the run again under a new detached supervisor, resuming from the checkpoint holding the
newest weights (by the run's segments, then mtime, then step: the real trainer restarts its step
count at 1 on --resume) that is COMPLETE (half-written files are skipped and named). A run started
by hand is relaunched with the command nsa-top recorded while it ran (status, cockpit, watchdog).
A .HALT left in the out_dir would stop the trainer at step 1: it is shown, and removed only with
--remove-stale-halt. On a terminal you confirm by typing the run's name; scripts pass --yes.
The exact command, working directory and every environment variable it sets are printed first
(with --yes too). Its files are believed only when nsa-top wrote them for this very directory (a
copy's or a planted .nsa-top/launch.json is named and refused); a loader variable (LD_*,
PYTHONSTARTUP, NODE_OPTIONS, BASH_ENV, …) is refused, and so is a command that is not a known
trainer (python/torchrun … train_showcase.py, nsa-top train) unless named with --allow-command.
A FINISHED run is relaunched only with --steps N past the steps it trained (it would stop at once);
--steps N changes the recorded command, so later restarts train to N too.
A pending halt after checkpoint of the old run is moot once nothing of it runs: the relaunch ends it
(logged) so that it cannot halt the new run, unless --carry-requests carries it into the relaunch;
the output says what happened to each.
With --node (a run started by launch --node, the same nodes): every node's supervisor is started
again over its node's connection, all resuming from the ONE newest complete checkpoint picked on the
first node; refused while anything of the run still runs on any node; needs --yes.
Every relaunch is logged in .nsa-top/actions.jsonl.`,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { 'remove-stale-halt': removeStaleHalt, yes, steps, 'carry-requests': carryRequests } = a.values;
  const allowCommand = (a.values['allow-command'] ?? []) as string[];
  for (const n of allowCommand)
    if (!/^[\w.+-]+$/.test(n))
      throw new CliError(`relaunch: --allow-command ${n}: name a program by its basename (e.g. node)`);
  if (a.values.node?.length || a.values.nodes) return relaunchOnNodes(a.positional, a.values, allowCommand);
  const host = new LocalHost();
  const dir = resolve(a.positional);
  if (!(await host.stat(dir))?.isDir) throw new CliError(`relaunch: ${dir}: no such run directory`);
  // read-only: refused by the audited path itself, in the words every command and the cockpit use
  if (readOnlyMode())
    return printOutcome(
      await relaunch(host, dir, await currentActor(host), {
        removeStaleHalt,
        allowCommand,
        judgeAdoption,
        judgeRequest: relaunchRequestFate,
        steps,
        carryRequests,
      }),
      dir,
    );
  // what the cockpit's r refuses (a live run, a supervisor that restarts it itself), in its words
  const no = await refusedByState(host, dir, 'relaunch', { relaunchSteps: steps ?? null });
  if (no) {
    process.stderr.write(`relaunch refused: ${no.why}\n`);
    return 3;
  }
  // what can and cannot work is said before anything is asked
  // with --steps N what it shows is what will run: the recorded command trains to N
  const prep = await prepareRelaunch(host, dir, {
    allowCommand,
    judgeAdoption,
    ...(steps !== undefined ? { steps } : {}),
  });
  const { runDir, outDir } = prep;
  // a broken record is bad input: one line, exit 2
  if (prep.badRecord) throw new CliError(`relaunch: ${sanitize(prep.badRecord)}`);
  // what it would run is shown even when it is refused (the refusal says which part)
  if (prep.willRun) process.stderr.write(`${prep.willRun.lines.map((l) => `  ${sanitize(l)}`).join('\n')}\n`);
  if (prep.refusal) {
    process.stderr.write(`relaunch refused: ${sanitize(prep.refusal)}\n`);
    return 3;
  }
  const haltPath = join(outDir, '.HALT');
  let halt: string | null = null;
  try {
    halt = (await host.readFile(haltPath, 4096)).toString('utf8').trim();
  } catch {
    halt = null;
  }
  const summary =
    `relaunch ${runDir}\n` +
    (prep.adopted
      ? `  adopted: started by hand (launcher pid ${prep.adopted.launcher.pid}); runs the recorded command\n`
      : '') +
    prep.notFollowed.map((n) => `  not followed: ${sanitize(n)}\n`).join('') +
    prep.preflight
      .filter((l) => l.status !== 'PASS')
      .map((l) => `  preflight ${l.status} ${l.check}: ${l.text}\n`)
      .join('') +
    `  ${prep.readopt ? describeReadopt(prep.readopt) : describePick(prep.pick)}\n` +
    (steps !== undefined ? `  train to step ${steps}\n` : '') +
    (prep.pick?.skipped ?? []).map((w) => `  skipped ${w}\n`).join('') +
    (prep.pick?.warnings ?? []).map((w) => `  warning: ${w}\n`).join('');
  // A .HALT without --remove-stale-halt: relaunch() refuses (and logs it) with the way forward.
  const willRun = halt === null || removeStaleHalt;
  if (yes) process.stderr.write(summary);
  if (willRun && !yes) {
    if (!process.stdin.isTTY)
      throw new CliError(
        `relaunch: confirm with --yes when not on a terminal${halt !== null ? ` (${haltPath} "${halt}" would be removed)` : ''}`,
      );
    const name = basename(runDir);
    process.stderr.write(
      summary +
        (halt !== null ? `  remove ${haltPath}: "${halt}" — make sure no rank of this run is still stopping\n` : ''),
    );
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const typed = (await rl.question(`Type the run name (${name}) to relaunch: `)).trim();
    rl.close();
    if (typed !== name) {
      process.stderr.write('not confirmed: nothing changed\n');
      return 3;
    }
  }
  const actor = await currentActor(host);
  return printOutcome(
    await relaunch(host, dir, actor, {
      removeStaleHalt,
      allowCommand,
      judgeAdoption,
      judgeRequest: relaunchRequestFate,
      steps,
      carryRequests,
    }),
    runDir,
  );
}

function printOutcome(rec: ActionRecord, runDir: string): number {
  const out = `relaunch ${rec.result}: ${rec.detail}\n`;
  if (rec.result === 'ok') {
    process.stdout.write(
      `${out}  supervisor pid ${String(rec.target.supervisorPid)}; watch: nsa-top attach ${String(rec.target.runDir ?? runDir)}\n`,
    );
    return 0;
  }
  process.stderr.write(out);
  return rec.result === 'refused' ? 3 : 1;
}
