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
import { defineCommand, parseCommand } from './args.js';
import { PROFILES_OPTION } from './options.js';
import { CliError } from './errors.js';

export const command = defineCommand({
  name: 'profiles',
  options: {
    file: PROFILES_OPTION.profiles,
    profiles: { ...PROFILES_OPTION.profiles, help: 'the same as --file' },
    check: { type: 'boolean', help: 'validate only: exit 0 when valid, 2 with every error and its line otherwise' },
    show: {
      type: 'string',
      value: 'NAME',
      help: 'the command, env, config and out_dir NAME would get on this machine (dry run)',
    },
    json: { type: 'boolean', help: 'machine-readable listing' },
  },
  about: 'Lists the launch profiles (built-ins plus FILE, whose profiles of the same name win).',
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { check, show, json } = a.values;
  const file = a.values.file ?? a.values.profiles;
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
  if (show !== undefined) {
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
