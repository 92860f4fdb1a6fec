// Launch profiles: one YAML file of named profiles replaces the runbooks' shell launchers and the
// list of environment variables that must not be forgotten. Validated with zod; every error names
// the file, line and column. resolveLaunchPlan() turns a profile plus the machine's GPUs into the
// exact command, environment and directories the supervisor runs (all written to run.info).
import { yamlTooDeep } from '../run/readers/config.js';
import { isAbsolute, join } from 'node:path';
import { LineCounter, parseDocument, isMap, isScalar, type Document } from 'yaml';
import { z } from 'zod';
import type { Host } from '../../remote/host.js';
import { readTextFile } from '../../remote/textfile.js';
import { InputError } from '../../errors.js';
import { PACKAGE_ROOT, selfCommand } from '../../self.js';
import { BUILTIN_PROFILES_YAML, BUILTIN_SOURCE } from './profiles-builtin.js';
import { DEFAULT_HALT_GRACE_S } from '../control/types.js';
import { multiNodeIssues, torchrunNodeArgs, type NodeSlot } from './multinode.js';

// ---------------------------------------------------------------------------------------------
// schema

const EnvValue = z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v));
const EnvMap = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not a valid environment variable name'),
  EnvValue,
);
const Args = z.array(z.union([z.string(), z.number()]).transform((v) => String(v)));

const ConfigSel = z.union([
  z.string().min(1),
  z
    .object({
      by_gpu_memory: z
        .object({ '80g': z.string().min(1), '40g': z.string().min(1), '24g': z.string().min(1) })
        .strict(),
    })
    .strict(),
]);

const Restart = z
  .object({
    max_restarts: z.number().int().min(0).default(3),
    backoff_s: z.number().min(0).default(10),
    backoff_factor: z.number().min(1).default(2),
    backoff_max_s: z.number().min(0).default(300),
  })
  .strict();

const Stop = z
  .object({
    /** after .HALT: how long ranks get to reach a step boundary and exit */
    halt_grace_s: z.number().min(0).default(DEFAULT_HALT_GRACE_S),
    /** after SIGINT: how long before SIGKILL */
    sigint_grace_s: z.number().min(0).default(60),
  })
  .strict();

const Smoke = z
  .object({
    steps: z.number().int().min(1).default(50),
    config: z.string().min(1).optional(),
    args: Args.default([]),
    env: EnvMap.default({}),
    /** a failing smoke stops the launch (default); false: log it and start the real run anyway */
    required: z.boolean().default(true),
    timeout_s: z.number().min(1).default(1800),
  })
  .strict();

export const ProfileSchema = z
  .object({
    description: z.string().optional(),
    trainer: z.enum(['reference', 'nsa-vibe']),
    /** nsa-vibe: the trainer's repository (the working directory); default the launch directory */
    repo: z.string().min(1).optional(),
    python: z.string().min(1).default('python'),
    torchrun: z.string().min(1).default('torchrun'),
    script: z.string().min(1).default('scripts/train_showcase.py'),
    /** torchrun's --master_port (rendezvous) when procs > 1; default torchrun's own (29500) */
    master_port: z.number().int().min(1).max(65535).optional(),
    /** a multi-node run (nsa-vibe, under torchrun): how many nodes; `nsa-top launch --node …` names
     *  them (src/trainer/launch/multinode.ts) */
    nnodes: z.number().int().min(1).optional(),
    /** c10d rendezvous on HOST:PORT (node_rank 0's address: that node hosts it) */
    rdzv_endpoint: z
      .string()
      .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/, 'HOST:PORT, e.g. 10.0.0.1:29400')
      .optional(),
    /** or a static rendezvous: node_rank 0's address, with master_port */
    master_addr: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]+$/, 'a host name or address')
      .optional(),
    /** node_rank of each node, by its --node name (default: the --node order) */
    node_ranks: z.record(z.string().min(1), z.number().int().min(0)).optional(),
    /** replaces the program: reference → instead of 'nsa-top train' (any trainer with its flags);
     *  nsa-vibe → instead of 'python -u SCRIPT' for a single process */
    command: z.array(z.string().min(1)).min(1).optional(),
    args: Args.default([]),
    env: EnvMap.default({}),
    env_presets: z.array(z.string()).default([]),
    config: ConfigSel.optional(),
    /** overrides where the trainer writes (nsa-vibe: the config's train.out_dir decides; this only tells nsa-top) */
    out_dir: z.string().min(1).optional(),
    /** process count: 'gpus' = one per GPU (at least 1); a number = that many */
    procs: z.union([z.literal('gpus'), z.number().int().min(1)]).optional(),
    steps: z.number().int().min(1).optional(),
    save_every: z.number().int().min(0).optional(),
    log_every: z.number().int().min(1).optional(),
    smoke: Smoke.optional(),
    restart: Restart.default({ max_restarts: 3, backoff_s: 10, backoff_factor: 2, backoff_max_s: 300 }),
    stop: Stop.default({ halt_grace_s: DEFAULT_HALT_GRACE_S, sigint_grace_s: 60 }),
  })
  .strict()
  .superRefine((p, ctx) => {
    const flag = (names: string[]) => p.args.findIndex((a) => names.some((n) => a === n || a.startsWith(`${n}=`)));
    if (p.trainer === 'nsa-vibe') {
      const i = flag(['--config']);
      if (i >= 0)
        ctx.addIssue({
          code: 'custom',
          path: ['args', i],
          message:
            'the real trainer has no --config flag: it silently ignores it and trains the toy default config (one 50k run was lost this way); use `config:` (passed as CONFIG=)',
        });
      if (p.config !== undefined && 'CONFIG' in p.env)
        ctx.addIssue({ code: 'custom', path: ['env', 'CONFIG'], message: 'CONFIG is set twice: use `config:` only' });
      if (p.config === undefined && !('CONFIG' in p.env))
        ctx.addIssue({
          code: 'custom',
          path: ['config'],
          message:
            'no config: the real trainer would train the toy configs/train_showcase.yaml; name one with `config:`',
        });
      if (p.save_every !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['save_every'],
          message: 'the real trainer has no --save-every flag: set train.save_every in its config',
        });
      if (p.log_every !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['log_every'],
          message: 'the real trainer has no --log-every flag: set train.log_every in its config',
        });
      if (p.master_port !== undefined) {
        for (const k of ['MASTER_PORT', 'PET_MASTER_PORT'])
          if (k in p.env)
            ctx.addIssue({
              code: 'custom',
              path: ['env', k],
              message: `the port is set twice: use master_port: only (${k} in env would fight torchrun's --master_port)`,
            });
      }
      multiNodeIssues(p).forEach((i) => ctx.addIssue({ code: 'custom', ...i }));
      const r = flag(['--resume', '--resume-from']);
      if (r >= 0)
        ctx.addIssue({
          code: 'custom',
          path: ['args', r],
          message: "resume is the supervisor's job (newest complete checkpoint on restart); drop --resume",
        });
    } else {
      const i = flag(['--out', '--ranks', '--resume']);
      if (i >= 0)
        ctx.addIssue({
          code: 'custom',
          path: ['args', i],
          message: `${p.args[i]} is set by the supervisor (out_dir, procs, resume): remove it`,
        });
      if (p.repo !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['repo'],
          message: 'the reference trainer is part of nsa-top: `repo:` does not apply',
        });
      if (p.master_port !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['master_port'],
          message: 'the reference trainer has no torchrun rendezvous: master_port does not apply',
        });
      for (const k of ['nnodes', 'rdzv_endpoint', 'master_addr', 'node_ranks'] as const)
        if (p[k] !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: [k],
            message: `the reference trainer runs on one machine: ${k} does not apply (multi-node runs are nsa-vibe under torchrun)`,
          });
    }
  });

export type Profile = z.output<typeof ProfileSchema>;

const FileSchema = z
  .object({
    presets: z.record(z.string(), EnvMap).default({}),
    profiles: z
      .record(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'profile names: letters, digits, . _ -'), ProfileSchema)
      .default({}),
  })
  .strict();

export interface ProfilesFile {
  presets: Record<string, Record<string, string>>;
  profiles: Record<string, Profile>;
  /** where each profile and preset came from */
  sources: Record<string, string>;
}

export interface ProfileIssue {
  source: string;
  line: number | null;
  col: number | null;
  path: string;
  message: string;
}

export class ProfileError extends InputError {
  constructor(readonly issues: ProfileIssue[]) {
    super(issues.map(formatIssue).join('\n'), 2);
  }
}

export function formatIssue(i: ProfileIssue): string {
  const where = i.line !== null ? `${i.source}:${i.line}:${i.col ?? 1}` : i.source;
  return `${where}: ${i.path ? `${i.path}: ` : ''}${i.message}`;
}

// ---------------------------------------------------------------------------------------------
// parsing with line numbers

/** The node at `path`, or the nearest ancestor that exists (a missing key points at its map). */
function locate(doc: Document, path: (string | number)[], lc: LineCounter): { line: number; col: number } | null {
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    let range = node && typeof node === 'object' && 'range' in node ? node.range : undefined;
    if (!range && n === 0) range = (doc.contents as { range?: [number, number, number] } | null)?.range;
    if (range) {
      // point at the key itself (its value may be a whole block)
      if (n > 0) {
        const parent = doc.getIn(path.slice(0, n - 1), true);
        if (isMap(parent)) {
          const pair = parent.items.find((it) => isScalar(it.key) && String(it.key.value) === String(path[n - 1]));
          const kr = pair && isScalar(pair.key) ? pair.key.range : undefined;
          if (kr) range = kr;
        }
      }
      const p = lc.linePos(range[0]);
      return { line: p.line, col: p.col };
    }
  }
  return null;
}

function pathText(path: PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

export function parseProfilesText(
  text: string,
  source: string,
): { ok: true; file: ProfilesFile } | { ok: false; issues: ProfileIssue[] } {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      issues: doc.errors.map((e) => {
        const pos = e.linePos?.[0] ?? lc.linePos(e.pos[0]);
        return {
          source,
          line: pos.line,
          col: pos.col,
          path: '',
          message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''),
        };
      }),
    };
  }
  const raw = doc.toJS({ maxAliasCount: 100 }) ?? {};
  const parsed = FileSchema.safeParse(raw);
  const issues: ProfileIssue[] = [];
  if (!parsed.success) {
    for (const iss of parsed.error.issues) {
      const path = iss.path as (string | number)[];
      const pos = locate(doc, path, lc);
      let message = iss.message;
      if (iss.code === 'unrecognized_keys')
        message = `unknown key${iss.keys.length > 1 ? 's' : ''} ${iss.keys.map((k) => `'${k}'`).join(', ')}`;
      const keyPath = iss.code === 'unrecognized_keys' && iss.keys.length > 0 ? [...path, iss.keys[0]!] : path;
      const kpos = iss.code === 'unrecognized_keys' ? (locate(doc, keyPath, lc) ?? pos) : pos;
      issues.push({ source, line: kpos?.line ?? null, col: kpos?.col ?? null, path: pathText(keyPath), message });
    }
    return { ok: false, issues };
  }
  const sources: Record<string, string> = {};
  for (const k of Object.keys(parsed.data.profiles)) sources[`profile:${k}`] = source;
  for (const k of Object.keys(parsed.data.presets)) sources[`preset:${k}`] = source;
  return { ok: true, file: { presets: parsed.data.presets, profiles: parsed.data.profiles, sources } };
}

/** Cross-file checks: every env_presets name exists. */
function checkPresets(file: ProfilesFile, texts: Map<string, string>): ProfileIssue[] {
  const issues: ProfileIssue[] = [];
  for (const [name, p] of Object.entries(file.profiles)) {
    p.env_presets.forEach((pre, i) => {
      if (pre in file.presets) return;
      const source = file.sources[`profile:${name}`] ?? '?';
      const text = texts.get(source);
      let line: number | null = null;
      let col: number | null = null;
      if (text !== undefined) {
        const lc = new LineCounter();
        const doc = parseDocument(text, { lineCounter: lc });
        const pos = locate(doc, ['profiles', name, 'env_presets', i], lc);
        line = pos?.line ?? null;
        col = pos?.col ?? null;
      }
      issues.push({
        source,
        line,
        col,
        path: `profiles.${name}.env_presets[${i}]`,
        message: `unknown preset '${pre}' (known: ${Object.keys(file.presets).join(', ') || 'none'})`,
      });
    });
  }
  return issues;
}

export function builtinProfiles(): ProfilesFile {
  const r = parseProfilesText(BUILTIN_PROFILES_YAML, BUILTIN_SOURCE);
  if (!r.ok) throw new ProfileError(r.issues);
  return r.file;
}

/**
 * Built-in profiles, overlaid by `file` when given (same names replace). Throws ProfileError
 * naming the line of every problem.
 */
export async function loadProfiles(host: Host, file?: string): Promise<ProfilesFile> {
  const texts = new Map<string, string>([[BUILTIN_SOURCE, BUILTIN_PROFILES_YAML]]);
  const merged = builtinProfiles();
  if (file) {
    let text: string;
    try {
      text = (await host.readFile(file, 4 * 1024 * 1024)).toString('utf8');
    } catch (e) {
      throw new InputError(
        `profiles file ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : (e as Error).message}`,
      );
    }
    texts.set(file, text);
    const r = parseProfilesText(text, file);
    if (!r.ok) throw new ProfileError(r.issues);
    Object.assign(merged.presets, r.file.presets);
    Object.assign(merged.profiles, r.file.profiles);
    Object.assign(merged.sources, r.file.sources);
  }
  const issues = checkPresets(merged, texts);
  if (issues.length > 0) throw new ProfileError(issues);
  return merged;
}

// ---------------------------------------------------------------------------------------------
// GPUs

export interface GpuInventory {
  count: number;
  memTotalMiB: number[];
  maxMemMiB: number | null;
  /** 'nvidia-smi' | 'none' (no NVIDIA tools) | 'error' */
  source: 'nvidia-smi' | 'none' | 'error';
  error: string | null;
}

export async function queryGpus(host: Host): Promise<GpuInventory> {
  try {
    const r = await host.exec(['nvidia-smi', '--query-gpu=memory.total', '--format=csv,noheader,nounits'], {
      timeoutMs: 15000,
    });
    if (r.code === 127 || (/ENOENT|not found/i.test(r.stderr) && r.code !== 0))
      return { count: 0, memTotalMiB: [], maxMemMiB: null, source: 'none', error: null };
    if (r.timedOut)
      return {
        count: 0,
        memTotalMiB: [],
        maxMemMiB: null,
        source: 'error',
        error: 'nvidia-smi did not answer within 15 s',
      };
    if (r.code !== 0)
      return {
        count: 0,
        memTotalMiB: [],
        maxMemMiB: null,
        source: 'error',
        error: (r.stderr || r.stdout).trim().split('\n')[0] ?? `exit ${r.code}`,
      };
    const mem = r.stdout
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.length > 0)
      .map((l) => Number.parseFloat(l));
    const known = mem.filter((m) => Number.isFinite(m));
    return {
      count: mem.length,
      memTotalMiB: known,
      maxMemMiB: known.length ? Math.max(...known) : null,
      source: 'nvidia-smi',
      error: null,
    };
  } catch (e) {
    return { count: 0, memTotalMiB: [], maxMemMiB: null, source: 'error', error: (e as Error).message };
  }
}

/** The runbook's rule (train_m7c_prime.sh): >= 75000 MiB → 80g, >= 35000 → 40g, else 24g. */
export function memoryClass(maxMemMiB: number | null): '80g' | '40g' | '24g' {
  if (maxMemMiB !== null && maxMemMiB >= 75000) return '80g';
  if (maxMemMiB !== null && maxMemMiB >= 35000) return '40g';
  return '24g';
}

// ---------------------------------------------------------------------------------------------
// the launch plan

export interface PhasePlan {
  command: string[];
  env: Record<string, string>;
  cwd: string;
  log: string;
}

export interface LaunchPlan {
  version: 1;
  profile: string;
  trainer: 'reference' | 'nsa-vibe';
  runDir: string;
  outDir: string;
  cwd: string;
  /** the command of a fresh start; a restart appends resumeFlag + checkpoint path */
  command: string[];
  resumeFlag: string;
  /** only what the profile sets (the child also inherits the supervisor's environment) */
  env: Record<string, string>;
  config: string | null;
  configWhy: string | null;
  procs: number;
  /** torchrun's --master_port when the profile sets one (procs > 1) */
  masterPort?: number | null;
  gpus: GpuInventory;
  smoke: (PhasePlan & { timeoutS: number; required: boolean }) | null;
  restart: Profile['restart'];
  stop: Profile['stop'];
  gitCommit: string | null;
  warnings: string[];
  /** this node's place in a multi-node launch (absent: a one-machine run) */
  node?: NodeSlot;
  /** a run nsa-top did not start, relaunched from what was recorded while it ran (src/trainer/launch/adopt.ts) */
  adopted?: { recordedAt: number; recordedBy: string; launcherPid: number; stdout: string | null };
}

export interface PlanContext {
  profileName: string;
  profile: Profile;
  presets: Record<string, Record<string, string>>;
  gpus: GpuInventory;
  runDir: string;
  /** the launch directory (relative paths in the profile are against it) */
  cwd: string;
  /** nsa-vibe: train.out_dir from the config, already resolved by the caller (see readConfigOutDir) */
  configOutDir?: string | null;
  steps?: number;
  extraArgs?: string[];
  /** one node of a multi-node launch (src/trainer/launch/multinode.ts nodeSlots) */
  node?: NodeSlot;
}

function abs(p: string, base: string): string {
  return isAbsolute(p) ? p : join(base, p);
}

export function chooseConfig(p: Profile, gpus: GpuInventory): { config: string | null; why: string | null } {
  if (p.config === undefined) return { config: p.env.CONFIG ?? null, why: p.env.CONFIG ? 'env CONFIG' : null };
  if (typeof p.config === 'string') return { config: p.config, why: 'fixed by the profile' };
  const cls = memoryClass(gpus.maxMemMiB);
  const why =
    gpus.maxMemMiB === null
      ? `no GPU memory reading (${gpus.source === 'none' ? 'no nvidia-smi' : (gpus.error ?? 'unknown')}): ${cls} config`
      : `largest GPU ${gpus.maxMemMiB} MiB → ${cls} config (>= 75000 → 80g, >= 35000 → 40g, else 24g)`;
  return { config: p.config.by_gpu_memory[cls], why };
}

/** Repo dir of the real trainer (its working directory). */
export function trainerCwd(p: Profile, launchCwd: string): string {
  return p.trainer === 'nsa-vibe' && p.repo
    ? abs(p.repo.replace(/^~(?=\/|$)/, process.env.HOME ?? '~'), launchCwd)
    : launchCwd;
}

export function resolveLaunchPlan(ctx: PlanContext): LaunchPlan {
  const p = ctx.profile;
  const warnings: string[] = [];
  const cwd = trainerCwd(p, ctx.cwd);
  const env: Record<string, string> = {};
  for (const name of p.env_presets) Object.assign(env, ctx.presets[name] ?? {});
  Object.assign(env, p.env);
  const { config, why: configWhy } = chooseConfig(p, ctx.gpus);
  const procs =
    p.procs === undefined
      ? p.trainer === 'reference'
        ? 1
        : Math.max(1, ctx.gpus.count)
      : p.procs === 'gpus'
        ? Math.max(1, ctx.gpus.count)
        : p.procs;
  if (p.procs === 'gpus' && ctx.gpus.count === 0)
    warnings.push(`no GPUs seen (${ctx.gpus.error ?? ctx.gpus.source}): one process`);
  const steps = ctx.steps ?? p.steps;
  const extra = ctx.extraArgs ?? [];
  let command: string[];
  let outDir: string;
  const resumeFlag = '--resume'; // both trainers
  let smoke: LaunchPlan['smoke'] = null;
  if (p.trainer === 'reference') {
    outDir = ctx.runDir;
    if (p.out_dir) warnings.push('out_dir is ignored for the reference trainer: it writes into the run dir');
    const program = p.command ?? [...selfCommand(), 'train'];
    command = [...program, '--out', outDir, '--ranks', String(procs)];
    if (steps !== undefined) command.push('--steps', String(steps));
    if (p.save_every !== undefined) command.push('--save-every', String(p.save_every));
    if (p.log_every !== undefined) command.push('--log-every', String(p.log_every));
    if (config) command.push('--config', abs(config, cwd));
    command.push(...p.args, ...extra);
    env.NSA_TOP_RUN_DIR = outDir;
    if (p.smoke) {
      const sdir = join(ctx.runDir, 'smoke');
      smoke = {
        command: [
          ...program,
          '--out',
          sdir,
          '--ranks',
          '1',
          '--steps',
          String(p.smoke.steps),
          ...(p.smoke.config ? ['--config', abs(p.smoke.config, cwd)] : []),
          ...p.smoke.args,
        ],
        env: { ...env, ...p.smoke.env, NSA_TOP_RUN_DIR: sdir },
        cwd,
        log: join(ctx.runDir, 'smoke.log'),
        timeoutS: p.smoke.timeout_s,
        required: p.smoke.required,
      };
    }
  } else {
    if (config) env.CONFIG = config;
    const od = p.out_dir ?? ctx.configOutDir ?? null;
    if (!od)
      warnings.push(
        `out_dir unknown (config ${config ?? '?'} unreadable or without train.out_dir): nsa-top watches the run dir`,
      );
    outDir = od ? abs(od, cwd) : ctx.runDir;
    env.NSA_TOP_RUN_DIR = outDir;
    env.PYTHONUNBUFFERED ??= '1';
    const script = p.script;
    command = ctx.node
      ? [p.torchrun, ...torchrunNodeArgs(p, ctx.node), `--nproc_per_node=${procs}`, script]
      : procs > 1
        ? [
            p.torchrun,
            ...(p.master_port !== undefined ? [`--master_port=${p.master_port}`] : []),
            `--nproc_per_node=${procs}`,
            script,
          ]
        : [...(p.command ?? [p.python, '-u', script])];
    if (p.master_port !== undefined && procs === 1 && !ctx.node)
      warnings.push(`master_port ${p.master_port} unused: one process, no torchrun`);
    if (steps !== undefined) command.push('--steps', String(steps));
    command.push(...p.args, ...extra);
    // under torchrun, WORLD_SIZE makes the trainer's default --ddp -1 choose DDP (contract §3.8)
    if (p.smoke) {
      const senv: Record<string, string> = {
        ...env,
        ...p.smoke.env,
        CONFIG: p.smoke.config ?? 'configs/train_showcase.yaml',
      };
      delete senv.NSA_TOP_RUN_DIR;
      smoke = {
        command: [
          p.python,
          '-u',
          script,
          '--ddp',
          '0',
          '--save',
          join(ctx.runDir, 'smoke.pt'),
          '--steps',
          String(p.smoke.steps),
          ...p.smoke.args,
        ],
        env: senv,
        cwd,
        log: join(ctx.runDir, 'smoke.log'),
        timeoutS: p.smoke.timeout_s,
        required: p.smoke.required,
      };
    }
  }
  return {
    version: 1,
    profile: ctx.profileName,
    trainer: p.trainer,
    runDir: ctx.runDir,
    outDir,
    cwd,
    command,
    resumeFlag,
    env,
    config,
    configWhy,
    procs,
    masterPort: p.trainer === 'nsa-vibe' && (procs > 1 || ctx.node) ? (p.master_port ?? null) : null,
    ...(ctx.node ? { node: ctx.node } : {}),
    gpus: ctx.gpus,
    smoke,
    restart: p.restart,
    stop: p.stop,
    gitCommit: null,
    warnings,
  };
}

/** The TCP port torchrun's rendezvous will listen on for this plan (null: one process, no torchrun). */
export function rendezvousPort(
  plan: Pick<LaunchPlan, 'trainer' | 'procs' | 'env' | 'masterPort'>,
  shellEnv: Record<string, string | undefined> = {},
): number | null {
  if (plan.trainer !== 'nsa-vibe' || plan.procs <= 1) return null;
  const n = (v: string | undefined) => (v && /^\d+$/.test(v) ? Number(v) : null);
  return (
    plan.masterPort ??
    n(plan.env.MASTER_PORT) ??
    n(plan.env.PET_MASTER_PORT) ??
    n(shellEnv.MASTER_PORT) ??
    n(shellEnv.PET_MASTER_PORT) ??
    29500
  );
}

/** Where `nsa-top launch --profile` creates its run dirs: artifacts/train_runs/ in the trainer's cwd. */
export function runDirBase(p: Profile, launchCwd: string): string {
  return join(trainerCwd(p, launchCwd), 'artifacts', 'train_runs');
}

/** train.out_dir of a real-trainer config (relative to the trainer's cwd), or null with the reason. */
export async function readConfigOutDir(
  host: Host,
  cwd: string,
  config: string,
): Promise<{ outDir: string | null; error: string | null }> {
  const path = abs(config, cwd);
  const { text, error } = await readTextFile(host, path);
  if (error !== undefined) return { outDir: null, error };
  if (yamlTooDeep(text)) return { outDir: null, error: `${path}: YAML nested too deep: refused` };
  try {
    const doc = parseDocument(text).toJS() as { train?: { out_dir?: unknown } } | null;
    const od = doc?.train?.out_dir;
    if (typeof od === 'string' && od.length > 0) return { outDir: od, error: null };
    return { outDir: null, error: `${path}: no train.out_dir` };
  } catch (e) {
    return { outDir: null, error: `${path}: ${(e as Error).message}` };
  }
}

export async function gitCommitOf(host: Host, dir: string): Promise<string | null> {
  try {
    const r = await host.exec(['git', '-C', dir, 'rev-parse', 'HEAD'], { timeoutMs: 5000 });
    const s = r.stdout.trim();
    return r.code === 0 && /^[0-9a-f]{7,64}$/.test(s) ? s : null;
  } catch {
    return null;
  }
}

export function trainerRepo(plan: Pick<LaunchPlan, 'trainer' | 'cwd'>): string {
  return plan.trainer === 'reference' ? PACKAGE_ROOT : plan.cwd;
}

/** One line for a profile listing. */
export function describeProfile(name: string, p: Profile): string {
  const bits = [p.trainer === 'reference' ? 'nsa-top train' : `${p.script}`];
  bits.push(`procs ${p.procs ?? (p.trainer === 'reference' ? 1 : 'gpus')}`);
  if (p.config !== undefined) bits.push(typeof p.config === 'string' ? `CONFIG=${p.config}` : 'config by GPU memory');
  if (p.steps) bits.push(`${p.steps} steps`);
  if (p.env_presets.length) bits.push(`presets ${p.env_presets.join(',')}`);
  if (p.smoke) bits.push(`smoke ${p.smoke.steps} steps`);
  bits.push(`restarts ≤${p.restart.max_restarts}`);
  return `${name.padEnd(24)} ${p.description ?? ''}\n${' '.repeat(25)}${bits.join(' · ')}`;
}
