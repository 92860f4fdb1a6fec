// `nsa-top relaunch RUN_DIR [--remove-stale-halt] [--yes]` — start a supervised run again, resuming
// from its newest complete checkpoint. A .HALT in its out_dir is removed only after confirmation.
import { basename, join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { LocalHost } from '../remote/local.js';
import { currentActor } from '../trainer/control.js';
import { scanCheckpoints } from '../trainer/checkpoints.js';
import { resolveRunDirs } from '../trainer/supervisor/rundirs.js';
import { relaunch } from '../trainer/supervisor/launch.js';
import { CliError } from './errors.js';

const HELP = `usage: nsa-top relaunch RUN_DIR [--remove-stale-halt] [--yes]

Starts the run again under a new detached supervisor, resuming from the newest COMPLETE checkpoint
(half-written files are skipped and named). A .HALT left in the out_dir would stop the trainer at
step 1: it is shown, and removed only with --remove-stale-halt. On a terminal you confirm by typing
the run's name; scripts pass --yes. Every relaunch is logged in .nsa-top/actions.jsonl.
`;

export async function run(argv: string[]): Promise<number> {
  let dir: string | null = null;
  let removeStaleHalt = false;
  let yes = false;
  for (const a of argv) {
    if (a === '-h' || a === '--help') {
      process.stdout.write(HELP);
      return 0;
    } else if (a === '--remove-stale-halt') removeStaleHalt = true;
    else if (a === '--yes' || a === '-y') yes = true;
    else if (a.startsWith('-')) throw new CliError(`relaunch: unknown option ${a}`);
    else if (dir === null) dir = a;
    else throw new CliError(`relaunch: unexpected argument ${a}`);
  }
  if (!dir) throw new CliError('relaunch: RUN_DIR missing');
  const host = new LocalHost();
  dir = resolve(dir);
  if (!(await host.stat(dir))?.isDir) throw new CliError(`relaunch: ${dir}: no such run directory`);
  const { runDir, outDir } = await resolveRunDirs(host, dir);
  const haltPath = join(outDir, '.HALT');
  let halt: string | null = null;
  try {
    halt = (await host.readFile(haltPath, 4096)).toString('utf8').trim();
  } catch {
    halt = null;
  }
  // A .HALT without --remove-stale-halt: relaunch() refuses (and logs it) with the way forward.
  const willRun = halt === null || removeStaleHalt;
  if (willRun && !yes) {
    if (!process.stdin.isTTY) throw new CliError(`relaunch: confirm with --yes when not on a terminal${halt !== null ? ` (${haltPath} "${halt}" would be removed)` : ''}`);
    const name = basename(runDir);
    const scan = await scanCheckpoints(host, outDir);
    process.stderr.write(
      `relaunch ${runDir}\n  resume from ${scan.found ? `${scan.found.path} (step ${scan.found.step})` : 'nothing: no complete checkpoint, training starts from scratch'}\n` +
        scan.why.map((w) => `  skipped ${w}\n`).join('') +
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
  const rec = await relaunch(host, runDir, actor, { removeStaleHalt });
  const out = `relaunch ${rec.result}: ${rec.detail}\n`;
  if (rec.result === 'ok') {
    process.stdout.write(`${out}  supervisor pid ${String(rec.target.supervisorPid)}; watch: nsa-top attach ${runDir}\n`);
    return 0;
  }
  process.stderr.write(out);
  return rec.result === 'refused' ? 3 : 1;
}
