// Adopting runs nsa-top did not start. While a hand- or runbook-launched run is alive, the cockpit,
// `status` and `watchdog` record what they verified about its launch — the launcher's argv
// (torchrun / python), working directory, CONFIG and the NSA_* / torchrun environment, read from
// /proc/PID/{cmdline,cwd,environ} of a process verified by pid + start time before and after the
// read — in <out_dir>/.nsa-top/launch.json (nsa-top's own file, never a training artifact). Later
// `nsa-top relaunch` starts the same command under the supervisor with --resume <newest complete
// checkpoint> (any earlier --resume replaced), after a preflight of what the record names.
import { readFile, readlink } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { Host } from '../../remote/host.js';
import { parseCmdline, readProc, verifyProcess } from '../../remote/procs.js';
import { listeningPorts } from '../../remote/ports.js';
import { isLauncher } from '../run/ranks.js';
import type { ProcInfo, RunProcesses } from '../../remote/types.js';
import { currentActor, readOnlyMode } from '../control/actions.js';
import { auditedEvent } from '../control/audit.js';
import type { GpuInventory, LaunchPlan } from './profiles.js';
import { NSA_DIR, runDirsOf, type RunRef } from '../run/rundirs.js';
import { writeOwnAtomic } from '../control/ownfiles.js';
import { readLaunchPlan } from '../run/launchstate.js';
import { currentUid, dirIdOf, forThisDir, readPointerFile, type DirId } from '../run/pointers.js';

export const ADOPT_FILE = 'launch.json';
/** what a secret on the recorded command line is replaced with */
export const REDACTED = '<redacted>';

export interface AdoptionRecord {
  kind: 'adopted';
  version: 1;
  outDir: string;
  /** ms epoch, and which nsa-top command saw the run */
  recordedAt: number;
  recordedBy: string;
  host: string;
  launcher: {
    pid: number;
    startTime: string;
    argv: string[];
    cwd: string;
    kind: 'torchrun' | 'python' | 'nsa-top' | 'other';
  };
  ranks: { rank: number; pid: number; startTime: string }[];
  /** the launcher's environment, only the variables that shape a run (allow-list, no secrets) */
  env: Record<string, string>;
  /** CONFIG as the trainer saw it (relative to `launcher.cwd` when not absolute) */
  config: string | null;
  procs: number;
  /** where the launcher's stdout went, when a regular file (the trainer's log, for cross-checks) */
  stdout: string | null;
  /** the out_dir's identity when recorded (pointers.ts): a copy's record is not followed */
  dirId?: DirId;
  /** the options whose values were redacted from `launcher.argv` (--hf-token, WANDB_API_KEY=, …) */
  redacted?: string[];
}

/** Variables copied from the launcher's environment: what shapes the run, never credentials. */
const ENV_KEEP =
  /^(CONFIG|PYTHONPATH|PYTHONUNBUFFERED|PATH|VIRTUAL_ENV|CONDA_PREFIX|CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|OMP_NUM_THREADS|MKL_NUM_THREADS|NSA_[A-Z0-9_]*|TORCH_[A-Z0-9_]*|TORCHELASTIC_[A-Z0-9_]*|PET_[A-Z0-9_]*|NCCL_[A-Z0-9_]*|GLOO_[A-Z0-9_]*|MASTER_ADDR|MASTER_PORT|LOGLEVEL|HF_HOME|HF_DATASETS_CACHE|HF_HUB_OFFLINE|TRANSFORMERS_CACHE|TOKENIZERS_PARALLELISM|PYTORCH_CUDA_ALLOC_CONF)$/;
const ENV_DROP = /(TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL)/i;

/** an option or variable name that holds a credential (a word of it: --tokenizer is not one) */
const SECRET_NAME = /(^|[-_.])(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH|KEY|APIKEY)($|[-_.])/i;

/**
 * The command line with its secrets replaced by <redacted>: `--hf-token=X`, `--token X`,
 * `WANDB_API_KEY=X`, `--password X`, `https://user:pass@host`. Returns the names redacted.
 */
export function redactArgv(argv: string[]): { argv: string[]; redacted: string[] } {
  const out: string[] = [];
  const redacted: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i]!;
    const kv = /^(-{0,2})([A-Za-z_][\w.-]*)=(.*)$/s.exec(a);
    if (kv && SECRET_NAME.test(kv[2]!) && kv[3] !== '') {
      out.push(`${kv[1]}${kv[2]}=${REDACTED}`);
      redacted.push(`${kv[1]}${kv[2]}`);
      continue;
    }
    const flag = /^--?([A-Za-z][\w.-]*)$/.exec(a);
    if (flag && SECRET_NAME.test(flag[1]!) && i + 1 < argv.length && !argv[i + 1]!.startsWith('-')) {
      out.push(a, REDACTED);
      redacted.push(a);
      i++;
      continue;
    }
    // credentials inside a URL
    if (/:\/\/[^/\s:@]+:[^/\s@]+@/.test(a)) {
      a = a.replace(/(:\/\/[^/\s:@]+:)[^/\s@]+@/g, `$1${REDACTED}@`);
      redacted.push('a URL password');
    }
    out.push(a);
  }
  return { argv: out, redacted };
}

export function keepEnv(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of raw.split('\0')) {
    const eq = kv.indexOf('=');
    if (eq <= 0) continue;
    const k = kv.slice(0, eq);
    if (ENV_KEEP.test(k) && !ENV_DROP.test(k) && !k.startsWith('NSA_TOP_')) out[k] = kv.slice(eq + 1);
  }
  return out;
}

function base(s: string | undefined): string {
  return s ? s.slice(s.lastIndexOf('/') + 1) : '';
}

function launcherKind(p: ProcInfo): AdoptionRecord['launcher']['kind'] {
  const a = p.argv;
  if (isLauncher(p) && a.some((x) => /torchrun$|^torch\.distributed\.(run|launch)$/.test(x))) return 'torchrun';
  if (a.some((x) => /^nsa-top(\.js|\.mjs)?$/.test(base(x)))) return 'nsa-top';
  if (/^python[0-9.]*$/.test(base(a[0]))) return 'python';
  return 'other';
}

/** `--resume X` / `--resume=X` removed (the relaunch names the checkpoint itself). */
export function withoutResume(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--resume') {
      i++;
      continue;
    }
    if (a.startsWith('--resume=')) continue;
    out.push(a);
  }
  return out;
}

/** torchrun's rendezvous port named on its command line or in its environment (default 29500). */
export function masterPortOf(argv: string[], env: Record<string, string>): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--master[_-]port(?:=(\d+))?$/.exec(a);
    if (m) return Number(m[1] ?? argv[i + 1]);
  }
  const e = env.MASTER_PORT ?? env.PET_MASTER_PORT;
  return e && /^\d+$/.test(e) ? Number(e) : 29500;
}

function nprocOf(argv: string[]): number | null {
  for (let i = 0; i < argv.length; i++) {
    const m = /^--nproc[_-]per[_-]node(?:=(\d+))?$/.exec(argv[i]!);
    if (m) {
      const v = Number(m[1] ?? argv[i + 1]);
      return Number.isInteger(v) && v > 0 ? v : null;
    }
  }
  return null;
}

export async function readAdoption(host: Host, outDir: string): Promise<AdoptionRecord | null> {
  return (await readAdoptionFile(host, outDir)).record;
}

/** Why `j` is not a whole adoption record (one line), or null. */
export function adoptionRecordProblem(j: Record<string, unknown>): string | null {
  const r = j as Partial<AdoptionRecord>;
  const L = r.launcher as Partial<AdoptionRecord['launcher']> | undefined;
  const isInt = (x: unknown, min: number) => typeof x === 'number' && Number.isInteger(x) && x >= min;
  if (r.version !== 1) return `version ${JSON.stringify(r.version)} (expected 1)`;
  if (typeof r.outDir !== 'string' || !isAbsolute(r.outDir)) return 'outDir is not an absolute path';
  if (
    typeof r.recordedAt !== 'number' ||
    !Number.isFinite(r.recordedAt) ||
    Number.isNaN(new Date(r.recordedAt).getTime())
  )
    return r.recordedAt === undefined
      ? 'recordedAt is missing'
      : `recordedAt ${JSON.stringify(r.recordedAt)} is not a time (ms since 1970)`;
  if (typeof r.recordedBy !== 'string') return 'recordedBy is missing';
  if (!L || typeof L !== 'object') return 'launcher is missing';
  if (!isInt(L.pid, 1)) return 'launcher.pid is not a pid';
  if (typeof L.startTime !== 'string' || !/^\d+$/.test(L.startTime)) return 'launcher.startTime is not a start time';
  if (!Array.isArray(L.argv) || L.argv.length === 0 || !L.argv.every((a) => typeof a === 'string'))
    return 'launcher.argv is not a command line';
  if (typeof L.cwd !== 'string' || !isAbsolute(L.cwd)) return 'launcher.cwd is not an absolute path';
  if (!['torchrun', 'python', 'nsa-top', 'other'].includes(L.kind as string)) return 'launcher.kind is unknown';
  if (
    !Array.isArray(r.ranks) ||
    !r.ranks.every((x) => x && isInt(x.rank, 0) && isInt(x.pid, 1) && /^\d+$/.test(String(x.startTime)))
  )
    return 'ranks is not a list of {rank, pid, startTime}';
  if (
    !r.env ||
    typeof r.env !== 'object' ||
    Array.isArray(r.env) ||
    !Object.values(r.env).every((v) => typeof v === 'string')
  )
    return 'env is not a map of strings';
  if (r.config !== null && typeof r.config !== 'string') return 'config is neither a path nor null';
  if (!isInt(r.procs, 1)) return 'procs is not a positive count';
  if (r.stdout !== null && r.stdout !== undefined && typeof r.stdout !== 'string') return 'stdout is not a path';
  return null;
}

/**
 * <out_dir>/.nsa-top/launch.json as an adoption record, when believed: nsa-top's own file
 * (pointers.ts), recorded for this out_dir, whole. `problem` says why a file that is there is not
 * (a plan there is no adoption record: null, null); `bad` marks a record that is broken, not foreign.
 */
export async function readAdoptionFile(
  host: Host,
  outDir: string,
): Promise<{ record: AdoptionRecord | null; problem: string | null; bad?: boolean }> {
  const r = await readPointerFile(host, outDir, ADOPT_FILE);
  if (!r.json) return { record: null, problem: r.problem };
  if (r.json.kind !== 'adopted') return { record: null, problem: null };
  const bad = adoptionRecordProblem(r.json);
  if (bad) return { record: null, problem: `${r.path}: a broken adoption record: ${bad}`, bad: true };
  const j = r.json as unknown as AdoptionRecord;
  const why = await forThisDir(
    host,
    outDir,
    `${NSA_DIR}/${ADOPT_FILE}`,
    j.outDir,
    j.dirId,
    'was recorded for another run',
  );
  if (why) return { record: null, problem: why };
  return { record: j, problem: null };
}

/** /proc/PID/FILE in full (procfs reports size 0, so not through a size-bounded read) */
async function readProcFile(host: Host, pid: number, file: 'environ' | 'cmdline' | 'status'): Promise<string> {
  if (host.kind === 'local') return (await readFile(`/proc/${pid}/${file}`)).toString('utf8');
  const r = await host.exec(['cat', `/proc/${pid}/${file}`], { timeoutMs: 10_000, quick: true });
  if (r.code !== 0) throw new Error(r.stderr.trim() || `exit ${r.code}`);
  return r.stdout;
}

/** what this process already recorded (the cockpit calls every 5 s: read /proc once per launcher) */
const seen = new Map<string, string>();

/**
 * Records the launch of a live run nsa-top did not start, once per launcher process. Returns what
 * was done, in words (null = nothing to do: supervised, no live launcher, already recorded).
 */
export async function recordAdoption(
  host: Host,
  run: RunRef,
  procs: RunProcesses | null,
  recordedBy: string,
): Promise<{ record: AdoptionRecord | null; note: string | null }> {
  if (!procs || readOnlyMode()) return { record: null, note: null };
  const outDir = typeof run === 'string' ? run : run.outDir;
  const launcher =
    procs.launcher ?? (procs.ranks.length === 1 && procs.unknown.length === 0 ? procs.ranks[0]!.proc : null);
  if (!launcher || launcher.state === 'Z') return { record: null, note: null };
  const key = `${host.label}|${outDir}|${launcher.pid}|${launcher.startTime}`;
  if (seen.has(key)) return { record: null, note: null };
  const dirs = await runDirsOf(host, run);
  // the plan of a supervised run whose launcher dir is its out_dir (reference trainer) has this name
  if (await readLaunchPlan(host, dirs.outDir)) {
    seen.set(key, 'supervised');
    return { record: null, note: null };
  }
  const prev = await readAdoption(host, dirs.outDir);
  if (prev && prev.launcher.pid === launcher.pid && prev.launcher.startTime === launcher.startTime) {
    seen.set(key, 'recorded earlier');
    return { record: prev, note: null };
  }
  const info = await readProc(host, launcher.pid).catch(() => null);
  if (!info || info.startTime !== launcher.startTime || info.argv.length === 0 || !info.cwd)
    return { record: null, note: null };
  // a process of another user is never adopted: its command would be run again as you
  const me = await currentUid(host);
  const uidLine = /^Uid:\s+(\d+)\s+(\d+)/m.exec(await readProcFile(host, launcher.pid, 'status').catch(() => ''));
  if (me !== null && (!uidLine || Number(uidLine[1]) !== me || Number(uidLine[2]) !== me)) {
    seen.set(key, 'another user');
    return {
      record: null,
      note: `launch not recorded: pid ${launcher.pid} ${uidLine ? `runs as uid ${uidLine[2]}, not as you (uid ${me})` : 'has no readable owner'}: nsa-top never relaunches another user's command`,
    };
  }
  let environ: string;
  let argv: string[];
  try {
    // asked together (over SSH one round trip in the watch loop, not two), once the owner is known to be us
    const [env, cmd] = await Promise.allSettled([
      readProcFile(host, launcher.pid, 'environ'),
      readProcFile(host, launcher.pid, 'cmdline'),
    ]);
    if (env.status === 'rejected') throw env.reason;
    if (cmd.status === 'rejected') throw cmd.reason;
    environ = env.value;
    argv = parseCmdline(cmd.value);
    if (argv.length === 0) throw new Error('empty command line');
  } catch (e) {
    seen.set(key, 'unreadable');
    return { record: null, note: `launch not recorded: /proc/${launcher.pid} unreadable (${(e as Error).message})` };
  }
  let stdout: string | null = null;
  if (host.kind === 'local') {
    const t = await readlink(`/proc/${launcher.pid}/fd/1`).catch(() => null);
    if (t && t.startsWith('/') && !t.startsWith('/dev/') && !/ \(deleted\)$/.test(t)) stdout = t;
  }
  // nsa-top's supervisor started it (every plan sets NSA_TOP_RUN_DIR): not a hand launch. A run
  // started by hand in an out_dir that an earlier supervised run used is recorded all the same.
  if (/(^|\0)NSA_TOP_RUN_DIR=/.test(environ)) {
    seen.set(key, 'started by nsa-top');
    return { record: null, note: null };
  }
  // the same process before and after the reads: a recycled pid records nothing
  if (!(await verifyProcess(host, launcher).catch(() => false))) return { record: null, note: null };
  const env = keepEnv(environ);
  const kind = launcherKind(info);
  // secrets on the command line are never written down (the file is 0600 all the same)
  const red = redactArgv(argv);
  argv = red.argv;
  const here = await dirIdOf(host, dirs.outDir);
  const rec: AdoptionRecord = {
    kind: 'adopted',
    version: 1,
    outDir: dirs.outDir,
    recordedAt: host.now(),
    recordedBy,
    host: host.label,
    launcher: { pid: launcher.pid, startTime: launcher.startTime, argv, cwd: info.cwd, kind },
    ranks: procs.ranks.map((r) => ({ rank: r.rank, pid: r.proc.pid, startTime: r.proc.startTime })),
    env,
    config: env.CONFIG ?? null,
    procs: nprocOf(argv) ?? Math.max(1, procs.ranks.length),
    stdout,
    ...(here ? { dirId: here } : {}),
    ...(red.redacted.length ? { redacted: red.redacted } : {}),
  };
  const path = join(dirs.outDir, NSA_DIR, ADOPT_FILE);
  await writeOwnAtomic(host, dirs.outDir, `${NSA_DIR}/${ADOPT_FILE}`, `${JSON.stringify(rec, null, 2)}\n`, {
    private: true,
  });
  seen.set(key, 'recorded');
  const actor = await currentActor(host);
  const what = `${kind} pid ${launcher.pid} in ${info.cwd}: ${argv.join(' ')}${rec.config ? ` (CONFIG=${rec.config})` : ''}`;
  await auditedEvent(
    host,
    dirs.outDir,
    {
      actor,
      action: 'adopt',
      target: { outDir: dirs.outDir, launcherPid: launcher.pid, startTime: launcher.startTime, file: path },
    },
    { result: 'ok', detail: `recorded the launch of a run nsa-top did not start: ${what}` },
  );
  return { record: rec, note: `recorded its launch for relaunch: ${path}` };
}

/** The supervisor's plan for an adopted run: the recorded command, environment and cwd. */
export function planFromAdoption(rec: AdoptionRecord, runDir: string, gpus: GpuInventory): LaunchPlan {
  const command = withoutResume(rec.launcher.argv);
  const env: Record<string, string> = { ...rec.env, NSA_TOP_RUN_DIR: rec.outDir };
  env.PYTHONUNBUFFERED ??= '1';
  return {
    version: 1,
    profile: 'adopted',
    trainer: rec.launcher.kind === 'nsa-top' ? 'reference' : 'nsa-vibe',
    runDir,
    outDir: rec.outDir,
    cwd: rec.launcher.cwd,
    command,
    resumeFlag: '--resume',
    env,
    config: rec.config,
    configWhy: `as the hand-launched run had it (recorded ${Number.isFinite(new Date(rec.recordedAt).getTime()) ? new Date(rec.recordedAt).toISOString() : '?'} by nsa-top ${rec.recordedBy})`,
    procs: rec.procs,
    gpus,
    smoke: null,
    restart: { max_restarts: 3, backoff_s: 10, backoff_factor: 2, backoff_max_s: 300 },
    stop: { halt_grace_s: 300, sigint_grace_s: 60 },
    gitCommit: null,
    warnings: [
      `adopted: started by hand (launcher pid ${rec.launcher.pid}); the restart/stop policy is nsa-top's default — launch with a profile to choose it`,
    ],
    adopted: {
      recordedAt: rec.recordedAt,
      recordedBy: rec.recordedBy,
      launcherPid: rec.launcher.pid,
      stdout: rec.stdout,
    },
  };
}

/**
 * What a relaunch of an adopted run must know before the recorded command runs again, gathered (not
 * judged): which recorded processes are alive, whether the working directory, program and CONFIG are
 * still there, whether torchrun's port is taken. src/checks/preflight.ts judgeAdoption turns these
 * into PASS/WARN/FAIL lines; a FAIL blocks the relaunch.
 */
export interface AdoptionFacts {
  /** pids of the recorded launcher and ranks that are still the same live processes */
  alive: number[];
  cwd: { path: string; isDir: boolean };
  /** the secrets that were redacted from the recorded command line (null: none), and what stands in for them */
  secrets: { names: string | null; placeholder: string } | null;
  /** an absolute program path, and whether it is a file (null: a bare name, looked up on PATH) */
  program: { path: string; found: boolean } | null;
  /** CONFIG as recorded, where it resolves, and whether it is a file (null: no CONFIG) */
  config: { recorded: string; path: string; found: boolean } | null;
  /** whether the launcher is nsa-top's own (its toy default config is no surprise) */
  ownLauncher: boolean;
  /** torchrun's rendezvous port with more than one process: the listening ports (null: unknown, and why) */
  port: { port: number; listening: Set<number> | null; error: string | null } | null;
}

/**
 * The facts once the recorded launcher, alone alive with every rank gone, has had `waitMs` to exit.
 * torch 1.x's launcher looks at its ranks every 5 s: after the ranks leave on .HALT it lives on for
 * up to 5 s while status already says HALTED (the run's ranks are gone). Seen live on the real
 * trainer: a relaunch in those seconds was refused, "the run is still running (pid N)"; it now
 * waits for the launcher instead. A live rank, or a launcher that outlives the wait, is a FAIL.
 */
export async function settledAdoptionFacts(host: Host, rec: AdoptionRecord, waitMs = 10_000): Promise<AdoptionFacts> {
  const until = Date.now() + waitMs;
  const f = await adoptionFacts(host, rec);
  if (f.alive.length !== 1 || f.alive[0] !== rec.launcher.pid) return f;
  // only the launcher is looked at meanwhile; once it is gone every fact is read again (its port)
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 250));
    if (!(await verifyProcess(host, rec.launcher).catch(() => false))) return adoptionFacts(host, rec);
  }
  return f;
}

export async function adoptionFacts(host: Host, rec: AdoptionRecord): Promise<AdoptionFacts> {
  const alive: number[] = [];
  for (const p of [rec.launcher, ...rec.ranks]) if (await verifyProcess(host, p).catch(() => false)) alive.push(p.pid);
  const cwdSt = await host.stat(rec.launcher.cwd).catch(() => null);
  const redacted = !!rec.redacted?.length || rec.launcher.argv.some((a) => a.includes(REDACTED));
  const prog = rec.launcher.argv[0]!;
  let program: AdoptionFacts['program'] = null;
  if (isAbsolute(prog)) program = { path: prog, found: !!(await host.stat(prog).catch(() => null))?.isFile };
  let config: AdoptionFacts['config'] = null;
  if (rec.config) {
    const p = isAbsolute(rec.config) ? rec.config : join(rec.launcher.cwd, rec.config);
    config = { recorded: rec.config, path: p, found: !!(await host.stat(p).catch(() => null))?.isFile };
  }
  let port: AdoptionFacts['port'] = null;
  if (rec.launcher.kind === 'torchrun' && rec.procs > 1) {
    const texts: string[] = [];
    for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
      const t = await host.readFile(f).catch(() => null); // procfs: size 0, read in full
      if (t) texts.push(t.toString('utf8'));
    }
    port = {
      port: masterPortOf(rec.launcher.argv, rec.env),
      listening: texts.length ? listeningPorts(texts.join('\n')) : null,
      error: texts.length ? null : 'no /proc/net/tcp',
    };
  }
  return {
    alive,
    cwd: { path: rec.launcher.cwd, isDir: !!cwdSt?.isDir },
    secrets: redacted ? { names: rec.redacted?.join(', ') ?? null, placeholder: REDACTED } : null,
    program,
    config,
    ownLauncher: rec.launcher.kind === 'nsa-top',
    port,
  };
}

/** One paragraph for a run with neither a launch plan nor an adoption record. */
export function notRecordedAdvice(outDir: string, resumePath: string | null): string {
  return (
    `${outDir} was not started by nsa-top, and nsa-top never saw it running, so its launch command is unknown ` +
    `(the cockpit, status and watchdog record it while a hand-launched run is alive: if it is running now, \`nsa-top status ${outDir}\` records it; halt it, then relaunch). Otherwise start it with a profile: ` +
    `nsa-top launch --profile NAME${resumePath ? ` -- --resume ${resumePath}` : ''} (nsa-top profiles lists them; set CONFIG with config: and torchrun's port with master_port:)`
  );
}
