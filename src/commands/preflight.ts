// `nsa-top preflight [--profile NAME] [--profiles FILE] [--run-dir DIR] [--config FILE] [--host …]`:
// check a machine before a launch. Gathers facts here (through the Host, so it works over SSH) and
// judges them with src/checks/preflight. Each line PASS / WARN / FAIL / INFO with the fix.
import { dirname, isAbsolute, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  checkpointNeed,
  judgeConfig,
  judgeDisk,
  judgeEnv,
  judgeGpus,
  judgeHalt,
  judgePort,
  judgePython,
  preflightExit,
  type PreflightLine,
  type PythonFacts,
} from '../checks/preflight.js';
import { estimateParams } from '../checks/flops.js';
import type { Host } from '../remote/host.js';
import { sampleGpus } from '../remote/gpu.js';
import { listeningPorts } from '../remote/ports.js';
import { openHost } from '../remote/index.js';
import type { GpuTelemetry } from '../remote/types.js';
import {
  loadProfiles,
  readConfigOutDir,
  rendezvousPort,
  resolveLaunchPlan,
  runDirBase,
  trainerCwd,
  type GpuInventory,
  type LaunchPlan,
  type Profile,
  type ProfilesFile,
} from '../trainer/launch/profiles.js';
import { defineCommand, parseCommand, type Values } from './args.js';
import { CliError } from './errors.js';
import { InputError } from '../errors.js';
import { HOST_OPTIONS, hostSpecOf, NODE_OPTIONS, PROFILES_OPTION } from './options.js';
import { preflightNodes } from './preflight-nodes.js';

export const command = defineCommand({
  name: 'preflight',
  options: {
    profile: { type: 'string', value: 'NAME', help: 'the launch profile to check for (nsa-top profiles lists them)' },
    ...PROFILES_OPTION,
    'run-dir': {
      type: 'string',
      value: 'DIR',
      help: "the out_dir to check (disk, a stale .HALT); default: the profile's",
    },
    config: { type: 'string', value: 'FILE', help: "the trainer config to validate; default: the profile's" },
    port: {
      type: 'number',
      integer: true,
      min: 1,
      max: 65535,
      value: 'N',
      help: "torchrun's port; default: the profile's master_port, else 29500",
    },
    ...HOST_OPTIONS,
    ...NODE_OPTIONS,
    json: { type: 'boolean', help: 'the lines as JSON' },
  },
  about: `Checks a machine before a launch, each line PASS / WARN / FAIL with the fix:
  GPUs visible, memory clear (no foreign compute apps); NVIDIA driver, python + torch + CUDA;
  the config validates (the real trainer's required keys; the toy-config tell); disk space for
  checkpoints; a stale .HALT (the trainer would stop at step 1); torchrun's port (the profile's
  master_port, else 29500) free; the environment the profile's presets set, and risky NSA_*
  variables in this shell.`,
  epilog: `With --node (repeatable; local is this machine) the checks run on every node, each over its own
connection, and print per node; a node that cannot be reached is a FAIL of that node. With a
multi-node --profile, the rendezvous too: its port free on the node_rank 0 node, and reached from
every other node (a test listener there, up to 10 s, dialled from each).
Exit 0: no FAIL; 1: at least one FAIL (on any node); 2: bad input (unknown profile, unreadable profiles file).`,
});

export type Args = Values<typeof command>;

const PY_PROBE = [
  'import json, sys',
  'r = {"version": sys.version.split()[0]}',
  'try:',
  '    import torch',
  '    r["torch"] = torch.__version__',
  '    r["cuda"] = torch.version.cuda',
  '    r["avail"] = bool(torch.cuda.is_available())',
  '    r["count"] = torch.cuda.device_count()',
  'except Exception as e:',
  '    r["error"] = type(e).__name__ + ": " + str(e)',
  'print(json.dumps(r))',
].join('\n');

async function probePython(host: Host, python: string, cwd: string | undefined): Promise<PythonFacts> {
  const f: PythonFacts = {
    python,
    found: false,
    version: null,
    torch: null,
    torchCuda: null,
    cudaAvailable: null,
    deviceCount: null,
    error: null,
  };
  const r = await host
    .exec([python, '-c', PY_PROBE], { timeoutMs: 60_000, cwd })
    .catch((e: Error) => ({ code: 127, stdout: '', stderr: e.message, timedOut: false }));
  if (r.code === 127) return f;
  f.found = true;
  if (r.timedOut) {
    f.error = 'python did not answer within 60 s';
    return f;
  }
  try {
    const j = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as {
      version?: string;
      torch?: string;
      cuda?: string | null;
      avail?: boolean;
      count?: number;
      error?: string;
    };
    f.version = j.version ?? null;
    f.torch = j.torch ?? null;
    f.torchCuda = j.cuda ?? null;
    f.cudaAvailable = j.avail ?? null;
    f.deviceCount = j.count ?? null;
    f.error = j.error ?? null;
  } catch {
    f.error = (r.stderr || r.stdout).trim().split('\n').pop() ?? `exit ${r.code}`;
    if (/No such file|not found/i.test(f.error)) f.found = false;
  }
  return f;
}

function inventory(g: GpuTelemetry): GpuInventory {
  if (g.status === 'ok') {
    const mem = g.devices.map((d) => d.memTotalMiB).filter((m): m is number => m !== null);
    return {
      count: g.devices.length,
      memTotalMiB: mem,
      maxMemMiB: mem.length ? Math.max(...mem) : null,
      source: 'nvidia-smi',
      error: null,
    };
  }
  if (g.status === 'no-nvidia-tools')
    return { count: 0, memTotalMiB: [], maxMemMiB: null, source: 'none', error: null };
  return {
    count: 0,
    memTotalMiB: [],
    maxMemMiB: null,
    source: 'error',
    error: g.status === 'error' ? g.message : 'nvidia-smi not answering',
  };
}

async function freeBytes(host: Host, dir: string): Promise<{ free: number | null; dir: string; error: string | null }> {
  // the out_dir may not exist yet: measure its nearest existing parent
  let d = dir;
  for (let i = 0; i < 20; i++) {
    const st = await host.stat(d).catch(() => null);
    if (st?.isDir) break;
    const up = dirname(d);
    if (up === d) break;
    d = up;
  }
  const r = await host
    .exec(['df', '-Pk', d], { timeoutMs: 15_000 })
    .catch((e: Error) => ({ code: 1, stdout: '', stderr: e.message, timedOut: false }));
  if (r.code !== 0) return { free: null, dir: d, error: (r.stderr || 'df failed').trim().split('\n')[0] ?? null };
  const row = r.stdout.trim().split('\n').pop()?.trim().split(/\s+/);
  const kb = row && row.length >= 4 ? Number(row[3]) : NaN;
  return Number.isFinite(kb)
    ? { free: kb * 1024, dir: d, error: null }
    : { free: null, dir: d, error: 'unreadable df output' };
}

async function readSmall(host: Host, path: string): Promise<string | null> {
  try {
    return (await host.readFile(path, 64 * 1024)).toString('utf8');
  } catch {
    return null;
  }
}

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const a = p.values;
  if (a.node?.length || a.nodes) return preflightNodes(a);
  const host = await openHost(hostSpecOf(a));
  try {
    const lines = await preflight(host, a);
    if (a.json)
      process.stdout.write(JSON.stringify({ host: host.label, lines, exitCode: preflightExit(lines) }, null, 2) + '\n');
    else process.stdout.write(formatLines(host.label, a.profile ?? null, lines));
    return preflightExit(lines);
  } finally {
    await host.close().catch(() => {});
  }
}

export function formatLines(hostLabel: string, profile: string | null, lines: PreflightLine[]): string {
  const out = [`nsa-top preflight on ${hostLabel}${profile ? `, profile ${profile}` : ''}`];
  for (const l of lines) {
    out.push(`${l.status.padEnd(5)} ${l.check.padEnd(12)} ${l.text}`);
    if (l.fix) out.push(`${' '.repeat(19)}fix: ${l.fix}`);
  }
  const n = (s: string) => lines.filter((l) => l.status === s).length;
  out.push(
    '',
    `${n('FAIL')} FAIL, ${n('WARN')} WARN, ${n('PASS')} PASS${n('FAIL') ? ' — not ready to launch' : ' — ready to launch'}`,
  );
  return out.join('\n') + '\n';
}

type ConfigDoc = Record<string, Record<string, unknown> | undefined>;

export async function preflight(host: Host, a: Args): Promise<PreflightLine[]> {
  const lines: PreflightLine[] = [];
  const cwd = process.cwd();
  // ---- the profile and its launch plan
  let profiles: ProfilesFile | null = null;
  let profile: Profile | null = null;
  try {
    profiles = await loadProfiles(host, a.profiles ?? undefined);
  } catch (e) {
    if (a.profile || a.profiles)
      throw e instanceof InputError ? e : new CliError(`preflight: ${(e as Error).message}`, 2);
  }
  if (a.profile) {
    profile = profiles?.profiles[a.profile] ?? null;
    if (!profile)
      throw new CliError(
        `preflight: unknown profile '${a.profile}' (known: ${Object.keys(profiles?.profiles ?? {})
          .sort()
          .join(', ')})`,
        2,
      );
  }
  const real = profile?.trainer === 'nsa-vibe';
  const gpu = await sampleGpus(host, { timeoutMs: 10_000 });
  let plan: LaunchPlan | null = null;
  const missingPresets = profile ? profile.env_presets.filter((p) => !profiles!.presets[p]) : [];
  if (profile) {
    const tcwd = trainerCwd(profile, cwd);
    let configOutDir: string | null = null;
    const cfgName = typeof profile.config === 'string' ? profile.config : null;
    if (real && cfgName) configOutDir = (await readConfigOutDir(host, tcwd, cfgName)).outDir;
    plan = resolveLaunchPlan({
      profileName: a.profile!,
      profile,
      presets: profiles!.presets,
      gpus: inventory(gpu),
      runDir: a['run-dir'] ?? join(runDirBase(profile, cwd), `${a.profile}_preflight`),
      cwd,
      configOutDir,
    });
  }
  // ---- GPUs, driver, python/torch
  lines.push(...judgeGpus(gpu, real, real && plan ? plan.procs : null));
  let driver: string | null = null;
  if (gpu.status === 'ok') {
    const r = await host
      .exec(['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'], { timeoutMs: 10_000 })
      .catch(() => null);
    if (r && r.code === 0) driver = r.stdout.trim().split('\n')[0] ?? null;
  }
  const python = profile?.python ?? 'python3';
  lines.push(...judgePython(await probePython(host, python, plan?.cwd), driver, real));
  // ---- config
  const cfgPath = a.config ?? plan?.config ?? null;
  let cfgDoc: ConfigDoc | null = null;
  if (cfgPath) {
    const full = isAbsolute(cfgPath) ? cfgPath : join(plan?.cwd ?? cwd, cfgPath);
    const text = await readSmall(host, full);
    let err: string | null = text === null ? 'not found or unreadable' : null;
    if (text !== null) {
      try {
        cfgDoc = (parseYaml(text) ?? {}) as ConfigDoc;
      } catch (e) {
        err = `not valid YAML: ${(e as Error).message.split('\n')[0]}`;
      }
    }
    lines.push(...judgeConfig(cfgPath, cfgDoc, err, real || (!profile && !!a.config)));
  } else lines.push(...judgeConfig(null, null, null, real));
  if (plan?.configWhy) lines.push({ check: 'config', status: 'INFO', text: `chosen: ${plan.configWhy}` });
  // ---- disk for checkpoints
  {
    const dir = a['run-dir'] ?? plan?.outDir ?? cwd;
    const m = cfgDoc?.model;
    let params: number | null = null;
    if (m && m.dim !== undefined) {
      params = estimateParams({
        dim: Number(m.dim),
        nLayers: Number(m.n_layers ?? 1),
        nHeads: Number(m.n_heads),
        nKvGroups: Number(m.n_kv_groups),
        dK: Number(m.d_k),
        dV: Number(m.d_v),
        vocab: cfgDoc?.data?.tokenizer === 'gpt2' ? 50257 : 256,
      }).total;
    }
    const prec = String(cfgDoc?.runtime?.precision ?? 'fp32');
    const bpp = /bf16|fp16/.test(prec) ? 2 : 4;
    const steps = profile?.steps ?? (cfgDoc?.train?.steps !== undefined ? Number(cfgDoc.train.steps) : null);
    const saveEvery =
      profile?.save_every ?? (cfgDoc?.train?.save_every !== undefined ? Number(cfgDoc.train.save_every) : null);
    const f = await freeBytes(host, dir);
    lines.push(...judgeDisk(f.dir, f.free, checkpointNeed(params, bpp, steps, saveEvery), f.error));
  }
  // ---- stale .HALT
  {
    const dir = a['run-dir'] ?? plan?.outDir ?? null;
    if (dir) {
      const h = await host.stat(join(dir, '.HALT')).catch(() => null);
      const content = h ? await readSmall(host, join(dir, '.HALT')) : null;
      const an = await readSmall(host, join(dir, '.anomaly_type'));
      lines.push(...judgeHalt(dir, { present: !!h, content }, an === null ? null : an.trim()));
    } else lines.push(...judgeHalt(null, { present: false, content: null }, null));
  }
  // ---- torchrun's port
  {
    // the port the launch will use: --port, else the profile's master_port (or its env), else torchrun's 29500
    const port =
      a.port ?? (plan ? rendezvousPort(plan, process.env) : null) ?? Number(process.env.MASTER_PORT ?? 29500);
    // procfs reports size 0: read in full, not through a size-bounded read (which sees an empty file)
    const texts = await Promise.all(
      ['/proc/net/tcp', '/proc/net/tcp6'].map((p) =>
        host
          .readFile(p)
          .then((b) => b.toString('utf8'))
          .catch(() => null),
      ),
    );
    const known = texts.filter((t): t is string => t !== null);
    const needed = real && (plan?.procs ?? 1) > 1;
    lines.push(
      ...judgePort(
        port,
        known.length ? listeningPorts(known.join('\n')) : null,
        needed,
        known.length ? null : 'no /proc/net/tcp on this host',
      ),
    );
  }
  // ---- environment of the profile
  lines.push(
    ...judgeEnv(
      a.profile ?? null,
      profile?.env_presets ?? [],
      plan?.env ?? {},
      host.kind === 'local' ? process.env : {},
      missingPresets,
    ),
  );
  for (const w of plan?.warnings ?? []) lines.push({ check: 'plan', status: 'WARN', text: w });
  return lines;
}
