// `nsa-top launch --profile NAME [--profiles FILE] [--steps N] [--attach] [-- EXTRA TRAINER ARGS]`
import { LocalHost } from '../remote/local/host.js';
import { launchRun } from '../trainer/launch/launch.js';
import { CliError } from './errors.js';

const HELP = `usage: nsa-top launch --profile NAME [--profiles FILE] [--steps N] [--attach] [-- ARGS...]

Starts a run from a launch profile under a detached supervisor (its own session: quitting nsa-top or
losing SSH does not stop training). The run gets artifacts/train_runs/<profile>_<YYYYmmdd-HHMMSS>/
with run.info (profile, command, env, config, GPUs, git commit, out_dir) and train.log.

  --profile NAME     a profile from \`nsa-top profiles\` (built-ins: demo, cpu-smoke, m7c-...)
  --profiles FILE    YAML file of extra/overriding profiles
  --steps N          override the profile's step count
  --attach           open the cockpit on the run once it is up
  -- ARGS...         passed to the trainer as they are (e.g. -- --inject crash@step=40)
`;

export async function run(argv: string[]): Promise<number> {
  let profile: string | null = null;
  let profilesFile: string | undefined;
  let steps: number | undefined;
  let attach = false;
  const extra: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const eq = a.indexOf('=');
      if (eq > 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new CliError(`launch: ${a} needs a value`);
      return v;
    };
    if (a === '--') {
      extra.push(...argv.slice(i + 1));
      break;
    } else if (a === '-h' || a === '--help') {
      process.stdout.write(HELP);
      return 0;
    } else if (a === '--profile' || a.startsWith('--profile=')) profile = val();
    else if (a === '--profiles' || a.startsWith('--profiles=')) profilesFile = val();
    else if (a === '--steps' || a.startsWith('--steps=')) {
      const v = val();
      if (!/^\d+$/.test(v) || Number(v) < 1) throw new CliError(`launch: --steps needs a positive integer, got '${v}'`);
      steps = Number(v);
    } else if (a === '--attach') attach = true;
    else throw new CliError(`launch: unknown argument '${a}' (trainer arguments go after --)`);
  }
  if (!profile) throw new CliError('launch: --profile NAME is required (nsa-top profiles lists them)');
  const host = new LocalHost();
  const r = await launchRun(host, { profile, profilesFile, cwd: process.cwd(), steps, extraArgs: extra });
  process.stdout.write(
    `launched profile ${profile}\n  run dir     ${r.runDir}\n  out dir     ${r.outDir}\n  supervisor  pid ${r.supervisorPid} (detached)\n` +
      `  watch       nsa-top attach ${r.runDir}\n  log         ${r.runDir}/train.log\n`,
  );
  if (attach) {
    const cockpit = await import('./cockpit.js');
    return cockpit.run([r.runDir]);
  }
  return 0;
}
