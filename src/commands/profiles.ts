// `nsa-top profiles [--file F] [--check] [--show NAME] [--json]` — list, validate, and show what a
// profile would run on this machine.
import { join } from 'node:path';
import { LocalHost } from '../remote/local/host.js';
import {
  chooseConfig,
  describeProfile,
  loadProfiles,
  ProfileError,
  queryGpus,
  readConfigOutDir,
  resolveLaunchPlan,
  runDirBase,
  trainerCwd,
} from '../trainer/launch/profiles.js';
import { runInfoText } from '../trainer/launch/launch.js';
import { CliError } from './errors.js';

const HELP = `usage: nsa-top profiles [--file FILE] [--check] [--show NAME] [--json]

Lists the launch profiles (built-ins plus FILE, whose profiles of the same name win).
  --check       validate only: exit 0 when valid, 2 with every error and its line otherwise
  --show NAME   the command, env, config and out_dir NAME would get on this machine (dry run)
  --json        machine-readable listing
`;

export async function run(argv: string[]): Promise<number> {
  let file: string | undefined;
  let check = false;
  let show: string | null = null;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const eq = a.indexOf('=');
      if (eq > 0) return a.slice(eq + 1);
      const v = argv[++i];
      if (v === undefined) throw new CliError(`profiles: ${a} needs a value`);
      return v;
    };
    if (a === '-h' || a === '--help') {
      process.stdout.write(HELP);
      return 0;
    } else if (a === '--file' || a.startsWith('--file=') || a === '--profiles' || a.startsWith('--profiles='))
      file = val();
    else if (a === '--check') check = true;
    else if (a === '--show' || a.startsWith('--show=')) show = val();
    else if (a === '--json') json = true;
    else throw new CliError(`profiles: unknown argument '${a}'`);
  }
  const host = new LocalHost();
  let loaded;
  try {
    loaded = await loadProfiles(host, file);
  } catch (e) {
    if (e instanceof ProfileError) {
      process.stderr.write(`${e.message}\n`);
      process.stderr.write(`nsa-top: ${e.issues.length} problem${e.issues.length === 1 ? '' : 's'} in the profiles\n`);
      return 2;
    }
    throw e;
  }
  const names = Object.keys(loaded.profiles);
  if (check) {
    process.stdout.write(`ok: ${names.length} profiles valid (${names.join(', ')})\n`);
    return 0;
  }
  if (show !== null) {
    const p = loaded.profiles[show];
    if (!p) throw new CliError(`profiles: unknown profile '${show}' (known: ${names.join(', ')})`);
    const gpus = await queryGpus(host);
    let configOutDir: string | null = null;
    const { config } = chooseConfig(p, gpus);
    if (p.trainer === 'nsa-vibe' && config && !p.out_dir) {
      const r = await readConfigOutDir(host, trainerCwd(p, process.cwd()), config);
      if (r.error) process.stderr.write(`warning: ${r.error}\n`);
      configOutDir = r.outDir;
    }
    // the run dir launch creates: artifacts/train_runs/ in the trainer's cwd (the profile's repo:)
    const plan = resolveLaunchPlan({
      profileName: show,
      profile: p,
      presets: loaded.presets,
      gpus,
      runDir: join(runDirBase(p, process.cwd()), `${show}_<YYYYmmdd-HHMMSS>`),
      cwd: process.cwd(),
      configOutDir,
    });
    process.stdout.write(json ? `${JSON.stringify(plan, null, 2)}\n` : runInfoText(plan, new Date()));
    return 0;
  }
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ presets: loaded.presets, profiles: loaded.profiles, sources: loaded.sources }, null, 2)}\n`,
    );
    return 0;
  }
  for (const n of names)
    process.stdout.write(`${describeProfile(n, loaded.profiles[n]!)}\n  (${loaded.sources[`profile:${n}`]})\n`);
  process.stdout.write(`\npresets: ${Object.keys(loaded.presets).join(', ')}\n`);
  return 0;
}
