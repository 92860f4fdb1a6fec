// What a relaunch will run, said before anyone confirms it — pure (no I/O), so the CLI, the
// cockpit's relaunch dialog and the supervisor judge a plan the same way. A plan (launch.json) or an
// adoption record is input: it names a command, a working directory and environment variables that
// the supervisor will run as the operator. Two things are refused outright, whoever wrote the file:
//  - loader variables, which make any program run other code first (LOADER_ENV below);
//  - a command that is not a known trainer (python … train_showcase.py, torchrun … train_showcase.py,
//    nsa-top train), unless the operator names its program: --allow-command <basename>.
// PYTHONPATH is allowed (the nsa-vibe runbook sets PYTHONPATH=.) and, like every variable, shown.

/** a program's name: the last path component */
export function baseName(p: string): string {
  return p.slice(p.lastIndexOf('/') + 1);
}

/**
 * Variables that load code into whatever program runs (the dynamic loader, Python's and Node's
 * startup hooks, shells' startup files): never set by a relaunch.
 */
const LOADER_ENV_EXACT = new Set([
  'PYTHONSTARTUP',
  'PYTHONINSPECT',
  'PYTHONHOME',
  'PYTHONUSERBASE',
  'PYTHONEXECUTABLE',
  'NODE_OPTIONS',
  'NODE_PATH',
  'BASH_ENV',
  'ENV',
  'PERL5OPT',
  'PERL5LIB',
  'RUBYOPT',
  'GCONV_PATH',
]);

/** Why `name` may not be set by a relaunch, or null. */
export function loaderVariable(name: string): string | null {
  if (/^LD_/.test(name)) return `${name} (the dynamic loader would load other code into the trainer)`;
  if (/^DYLD_/.test(name)) return `${name} (the dynamic loader would load other code into the trainer)`;
  if (LOADER_ENV_EXACT.has(name)) return `${name} (runs other code at the program's start)`;
  return null;
}

const PY_RE = /^python[0-9.]*$/;
const TRAINER_SCRIPT = 'train_showcase.py';
/** python options that take a value as the next argument */
const PY_VALUE_OPTS = new Set(['-X', '-W', '--check-hash-based-pycs']);

/** The script python runs, or why this is not `python [options] script.py`. */
function pythonScript(args: string[]): { script: string; rest: string[] } | string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-c' || a.startsWith('-c')) return 'python -c runs inline code';
    if (a === '-m') {
      const mod = args[i + 1] ?? '';
      if (mod === 'torch.distributed.run' || mod === 'torch.distributed.launch')
        return torchrunScript(args.slice(i + 2));
      return `python -m ${mod} is not the trainer`;
    }
    if (a === '-' || a === '--') return 'python reading its program from stdin';
    if (PY_VALUE_OPTS.has(a)) {
      i++;
      continue;
    }
    if (a.startsWith('-')) continue;
    return { script: a, rest: args.slice(i + 1) };
  }
  return 'python without a script';
}

/** torchrun options that take a value as the next argument (the others are flags or --opt=value) */
const TORCHRUN_FLAGS = new Set([
  '--standalone',
  '--no-python',
  '--no_python',
  '-m',
  '--module',
  '--run-path',
  '--run_path',
]);

function torchrunScript(args: string[]): { script: string; rest: string[] } | string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--no-python' || a === '--no_python') return 'torchrun --no-python runs any program';
    if (a === '-m' || a === '--module') return 'torchrun -m runs a module, not the trainer script';
    if (a.startsWith('-')) {
      if (!a.includes('=') && !TORCHRUN_FLAGS.has(a)) i++; // its value
      continue;
    }
    return { script: a, rest: args.slice(i + 1) };
  }
  return 'torchrun without a script';
}

/**
 * Null when `argv` is a known trainer command; else why not. Known: python[X.Y] [options]
 * …/train_showcase.py, torchrun [options] …/train_showcase.py (or python -m torch.distributed.run),
 * and nsa-top's reference trainer (`nsa-top train`, or node …/bin/nsa-top.js train).
 */
export function unknownTrainer(argv: string[]): string | null {
  if (argv.length === 0) return 'an empty command';
  const prog = baseName(argv[0]!);
  let got: { script: string; rest: string[] } | string;
  if (PY_RE.test(prog)) got = pythonScript(argv.slice(1));
  else if (prog === 'torchrun') got = torchrunScript(argv.slice(1));
  else if (/^nsa-top(\.js|\.mjs)?$/.test(prog))
    return argv[1] === 'train' ? null : `nsa-top ${argv[1] ?? ''} is not the trainer`;
  else if (/^node(js)?[0-9.]*$/.test(prog)) {
    const i = argv.findIndex((a, k) => k > 0 && !a.startsWith('-'));
    if (i > 0 && /^nsa-top(\.js|\.mjs)?$/.test(baseName(argv[i]!)) && argv[i + 1] === 'train') {
      // node options before the script could load code: only plain flags like --enable-source-maps
      const opts = argv.slice(1, i);
      if (opts.every((o) => /^--(enable-source-maps|no-warnings|max-old-space-size=\d+)$/.test(o))) return null;
      return `node ${opts.join(' ')}: options that are not nsa-top's`;
    }
    return `${prog} running ${i > 0 ? baseName(argv[i]!) : 'no script'} is not a known trainer`;
  } else return `${prog} is not a known trainer`;
  if (typeof got === 'string') return got;
  if (baseName(got.script) !== TRAINER_SCRIPT)
    return `${baseName(got.script)} is not the trainer script (${TRAINER_SCRIPT})`;
  return null;
}

export interface RunSpec {
  command: string[];
  cwd: string;
  env: Record<string, string>;
}

export interface WillRun {
  /** what runs, in the order it runs (a smoke phase first, then the trainer) */
  phases: (RunSpec & { what: string })[];
  /** the lines to show before confirming: cwd, command, every variable set */
  lines: string[];
  /** why it must not run (null: it may) */
  refusal: string | null;
  /** the program names that need --allow-command (empty: all are known trainers) */
  needsAllow: string[];
}

function q(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * What will run and whether it may: `phases` as the supervisor starts them (`resume` appended to
 * the trainer's command as the supervisor does), `allow` the program names the operator confirmed.
 */
export function describeWillRun(
  phases: (RunSpec & { what: string })[],
  opts: { allow?: readonly string[]; resume?: { flag: string; path: string } | null } = {},
): WillRun {
  const allow = new Set(opts.allow ?? []);
  const lines: string[] = [];
  const refusals: string[] = [];
  const needsAllow: string[] = [];
  const shown = phases.map((p, i) =>
    i === phases.length - 1 && opts.resume ? { ...p, command: [...p.command, opts.resume.flag, opts.resume.path] } : p,
  );
  for (const p of shown) {
    lines.push(`${p.what}: in ${p.cwd}`);
    lines.push(`  runs: ${p.command.map(q).join(' ')}`);
    const keys = Object.keys(p.env).sort();
    lines.push(
      keys.length
        ? `  sets: ${keys.length} environment variable${keys.length === 1 ? '' : 's'}`
        : '  sets: no environment variable',
    );
    for (const k of keys) lines.push(`    ${k}=${q(p.env[k]!)}`);
    for (const k of keys) {
      const why = loaderVariable(k);
      if (why) refusals.push(`${p.what} sets ${why}`);
    }
    const unknown = unknownTrainer(p.command);
    if (unknown) {
      const name = baseName(p.command[0] ?? '');
      if (!allow.has(name)) {
        needsAllow.push(name);
        refusals.push(`${p.what}: ${unknown} — run it only if you know it: --allow-command ${name}`);
      } else lines.push(`  (not a known trainer: allowed by --allow-command ${name})`);
    }
  }
  return { phases: shown, lines, refusal: refusals.length ? refusals.join('; ') : null, needsAllow };
}

/** The phases a plan runs: its smoke command (first start only) and the trainer. */
export function planPhases(plan: {
  command: string[];
  cwd: string;
  env: Record<string, string>;
  smoke?: { command: string[]; cwd: string; env: Record<string, string> } | null;
}): (RunSpec & { what: string })[] {
  const out: (RunSpec & { what: string })[] = [];
  if (plan.smoke)
    out.push({
      what: 'smoke run (first start only)',
      command: plan.smoke.command,
      cwd: plan.smoke.cwd,
      env: plan.smoke.env,
    });
  out.push({ what: 'trainer', command: plan.command, cwd: plan.cwd, env: plan.env });
  return out;
}

/** how relaunch tells the supervisor it starts which programs the operator confirmed by name */
export const ALLOW_ENV = 'NSA_TOP_RELAUNCH_ALLOW';
