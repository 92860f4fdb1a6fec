// Preflight judgements: pure functions over facts the command gathers (GPU telemetry, python/torch
// versions, the config YAML, free disk, listening ports, .HALT, the launch plan's environment).
// Each line is PASS / WARN / FAIL / INFO, says what was found, and the fix.
import type { GpuTelemetry } from '../remote/types.js';
import { estimateParams, isToyModel } from './flops.js';
import { dur, sig } from '../format.js';
import type { AdoptionFacts, AdoptionRecord } from '../trainer/launch/adopt.js';

export type PreflightStatus = 'PASS' | 'WARN' | 'FAIL' | 'INFO';

export interface PreflightLine {
  check: string;
  status: PreflightStatus;
  text: string;
  /** what to do about it (absent on PASS) */
  fix?: string;
}

const L = (check: string, status: PreflightStatus, text: string, fix?: string): PreflightLine =>
  fix ? { check, status, text, fix } : { check, status, text };

/** GPUs visible and memory clear (no foreign compute apps). `needGpu`: the chosen trainer needs CUDA. */
export function judgeGpus(g: GpuTelemetry, needGpu: boolean, expectGpus: number | null): PreflightLine[] {
  if (g.status === 'no-nvidia-tools') {
    return [
      L(
        'gpus',
        needGpu ? 'FAIL' : 'INFO',
        'no GPU on this machine: nvidia-smi is not installed (no NVIDIA driver tools)',
        needGpu
          ? 'run on a GPU box (--host user@box), or use a CPU profile (demo, cpu-smoke: the reference trainer)'
          : undefined,
      ),
    ];
  }
  if (g.status === 'not-answering') {
    return [
      L(
        'gpus',
        'FAIL',
        `nvidia-smi not answering for ${dur((g.at - g.since) / 1000, 'precise')}: a GPU may have fallen off the bus`,
        'check `dmesg | grep -i xid`; reset the GPU (nvidia-smi -r) or reboot before launching',
      ),
    ];
  }
  if (g.status === 'error')
    return [
      L('gpus', 'FAIL', `nvidia-smi failed: ${g.message}`, 'check the driver install: `nvidia-smi` must list the GPUs'),
    ];
  const out: PreflightLine[] = [];
  const devs = g.devices;
  if (devs.length === 0) {
    out.push(
      L(
        'gpus',
        needGpu ? 'FAIL' : 'WARN',
        'nvidia-smi lists no GPU',
        'check the driver and CUDA_VISIBLE_DEVICES / container GPU flags',
      ),
    );
    return out;
  }
  const names = [...new Set(devs.map((d) => d.name))].join(', ');
  if (expectGpus !== null && devs.length < expectGpus) {
    out.push(
      L(
        'gpus',
        'FAIL',
        `${devs.length} GPU(s) visible (${names}), the profile wants ${expectGpus}`,
        'check CUDA_VISIBLE_DEVICES and that no GPU is lost',
      ),
    );
  } else out.push(L('gpus', 'PASS', `${devs.length} GPU(s) visible: ${names}`));
  if (g.apps.length) {
    const by = g.apps
      .map(
        (a) =>
          `pid ${a.pid} (${a.usedMemMiB ?? '?'} MiB on ${devs.find((d) => d.uuid === a.gpuUuid)?.index ?? a.gpuUuid})`,
      )
      .join(', ');
    out.push(
      L(
        'gpu-memory',
        'FAIL',
        `foreign compute apps hold GPU memory: ${by}`,
        'stop them first (a previous run still alive? `nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`); two jobs on one GPU OOM or crawl',
      ),
    );
  } else {
    const busy = devs.filter(
      (d) => d.memUsedMiB !== null && d.memTotalMiB !== null && d.memUsedMiB > Math.max(1024, 0.05 * d.memTotalMiB),
    );
    if (busy.length) {
      out.push(
        L(
          'gpu-memory',
          'WARN',
          `memory in use with no compute app listed: ${busy.map((d) => `GPU ${d.index} ${d.memUsedMiB}/${d.memTotalMiB} MiB`).join(', ')}`,
          'another container or a zombie context may hold it; check `nvidia-smi` from the host',
        ),
      );
    } else
      out.push(
        L(
          'gpu-memory',
          'PASS',
          `memory clear on every GPU (${devs.map((d) => `${d.index}: ${d.memUsedMiB ?? '?'} MiB used`).join(', ')}); no compute apps`,
        ),
      );
  }
  return out;
}

export interface PythonFacts {
  python: string;
  found: boolean;
  version: string | null;
  torch: string | null;
  torchCuda: string | null;
  cudaAvailable: boolean | null;
  deviceCount: number | null;
  error: string | null;
}

export function judgePython(p: PythonFacts | null, driver: string | null, needTorch: boolean): PreflightLine[] {
  const out: PreflightLine[] = [];
  if (driver) out.push(L('driver', 'INFO', `NVIDIA driver ${driver}`));
  if (!p || !p.found) {
    out.push(
      L(
        'python',
        needTorch ? 'FAIL' : 'INFO',
        `${p?.python ?? 'python'} not found${needTorch ? '' : ": only nsa-top's reference trainer can run here"}`,
        needTorch
          ? 'install Python with torch (the real trainer needs it), or set `python:` in the profile'
          : undefined,
      ),
    );
    return out;
  }
  if (!p.torch) {
    out.push(
      L(
        'torch',
        needTorch ? 'FAIL' : 'INFO',
        `${p.python} ${p.version ?? ''} has no torch${p.error ? ` (${p.error})` : ''}`.trim(),
        needTorch ? "install torch in this environment (activate the trainer's venv first)" : undefined,
      ),
    );
    return out;
  }
  const cuda = p.torchCuda ? `CUDA ${p.torchCuda}` : 'CPU-only build';
  const avail =
    p.cudaAvailable === null
      ? ''
      : p.cudaAvailable
        ? `, cuda available (${p.deviceCount ?? '?'} devices)`
        : ', cuda NOT available';
  const bad = needTorch && p.cudaAvailable === false;
  out.push(
    L(
      'torch',
      bad ? 'FAIL' : 'PASS',
      `${p.python} ${p.version ?? ''}: torch ${p.torch} (${cuda})${avail}`,
      bad
        ? 'torch cannot see a GPU: a CPU-only wheel, a driver/CUDA mismatch, or CUDA_VISIBLE_DEVICES is empty'
        : undefined,
    ),
  );
  return out;
}

/** The real trainer's config (contract §4.1): required keys, divisibility, the toy tell. */
export function judgeConfig(
  path: string | null,
  doc: unknown,
  parseError: string | null,
  real: boolean,
): PreflightLine[] {
  if (!path)
    return [
      L(
        'config',
        real ? 'FAIL' : 'INFO',
        real
          ? 'no config named: the real trainer would train its toy default configs/train_showcase.yaml'
          : 'no config: the reference trainer uses its defaults',
        real ? 'name one with `config:` in the profile (passed as CONFIG=)' : undefined,
      ),
    ];
  if (parseError)
    return [L('config', 'FAIL', `${path}: ${parseError}`, 'fix the file (the trainer reads it only from CONFIG=)')];
  const d = (doc ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const missing: string[] = [];
  const need: Record<string, string[]> = {
    model: ['dim', 'n_heads', 'n_kv_groups', 'd_k', 'd_v'],
    nsa: ['l', 'd', 'l_sel', 'n_sel', 'w'],
    train: real ? ['steps', 'seq_len', 'batch_size', 'lr', 'seed', 'log_every', 'out_dir'] : [],
  };
  for (const [sec, keys] of Object.entries(need))
    for (const k of keys) if (d[sec]?.[k] === undefined) missing.push(`${sec}.${k}`);
  if (missing.length)
    return [
      L(
        'config',
        'FAIL',
        `${path}: missing ${missing.join(', ')}`,
        'add them (contract §4.1 lists what the trainer requires)',
      ),
    ];
  const m = d.model!,
    n = d.nsa!,
    t = d.train ?? {};
  const num = (v: unknown) => (typeof v === 'number' ? v : Number(v));
  const probs: string[] = [];
  if (num(m.n_heads) % num(m.n_kv_groups) !== 0)
    probs.push(`n_heads ${m.n_heads} is not a multiple of n_kv_groups ${m.n_kv_groups}`);
  if (num(n.l) % num(n.d) !== 0) probs.push(`nsa.d ${n.d} does not divide nsa.l ${n.l}`);
  if (num(n.l_sel) % num(n.d) !== 0) probs.push(`nsa.d ${n.d} does not divide nsa.l_sel ${n.l_sel}`);
  if (num(m.d_k) % 2 !== 0) probs.push(`d_k ${m.d_k} is odd (RoPE needs it even)`);
  if (probs.length)
    return [L('config', 'FAIL', `${path}: ${probs.join('; ')}`, 'the trainer asserts on these at model build')];
  const out: PreflightLine[] = [];
  const model = {
    dim: num(m.dim),
    nLayers: num(m.n_layers ?? 1),
    nHeads: num(m.n_heads),
    nKvGroups: num(m.n_kv_groups),
    dK: num(m.d_k),
    dV: num(m.d_v),
    vocab: d.data?.tokenizer === 'gpt2' ? 50257 : 256,
  };
  const seq = t.seq_len === undefined ? null : num(t.seq_len);
  const params = estimateParams(model).total;
  out.push(
    L(
      'config',
      'PASS',
      `${path}: dim ${model.dim} × ${model.nLayers} layers, ${model.nHeads} heads, S=${seq ?? '?'}, ≈${sig(params / 1e6)}M params${t.steps !== undefined ? `, ${t.steps} steps` : ''}${t.save_every !== undefined ? `, save_every ${t.save_every}` : ''}`,
    ),
  );
  if (real && isToyModel(model, seq))
    out.push(
      L(
        'config',
        'WARN',
        `${path} is the toy model (dim ${model.dim}, ${model.nLayers} layer): a 50k run once trained this for 24 h by mistake`,
        'name the production config (e.g. configs/m7c_125m_2xa100_production.yaml) if this is meant to be the real run',
      ),
    );
  if (real && num(t.save_every ?? 0) === 0)
    out.push(
      L(
        'checkpoints',
        'WARN',
        `${path}: save_every is 0 — no checkpoint will ever be written (a HALT writes none either)`,
        'set train.save_every (e.g. 1000)',
      ),
    );
  return out;
}

/** Checkpoint footprint: params × bytes per param (state_dict only in the real trainer) × how many are kept. */
export function checkpointNeed(
  params: number | null,
  bytesPerParam: number,
  steps: number | null,
  saveEvery: number | null,
): { bytes: number | null; count: number | null; each: number | null } {
  if (params === null || !saveEvery || !steps)
    return { bytes: null, count: null, each: params === null ? null : params * bytesPerParam };
  const each = params * bytesPerParam * 1.05;
  const count = Math.floor(steps / saveEvery);
  return { bytes: each * count, count, each };
}

export function judgeDisk(
  dir: string,
  freeBytes: number | null,
  need: { bytes: number | null; count: number | null; each: number | null },
  error: string | null,
): PreflightLine[] {
  const gib = (b: number) => `${sig(b / 2 ** 30)} GiB`;
  if (freeBytes === null)
    return [L('disk', 'WARN', `free space under ${dir} unknown${error ? ` (${error})` : ''}`, 'check with `df -h`')];
  if (need.bytes !== null) {
    const margin = need.bytes + 2 ** 30;
    if (freeBytes < margin) {
      return [
        L(
          'disk',
          'FAIL',
          `${gib(freeBytes)} free under ${dir}; ${need.count} checkpoints of ≈${gib(need.each!)} need ≈${gib(need.bytes)} (the trainer never deletes old ones)`,
          'free space, point out_dir at a bigger disk, or raise save_every',
        ),
      ];
    }
    if (freeBytes < 2 * margin)
      return [
        L(
          'disk',
          'WARN',
          `${gib(freeBytes)} free under ${dir}: little headroom over the ≈${gib(need.bytes)} of checkpoints`,
          'free some space before a long run',
        ),
      ];
    return [
      L(
        'disk',
        'PASS',
        `${gib(freeBytes)} free under ${dir} (checkpoints need ≈${gib(need.bytes)}: ${need.count} × ${gib(need.each!)})`,
      ),
    ];
  }
  if (freeBytes < 10 * 2 ** 30)
    return [
      L(
        'disk',
        'WARN',
        `${gib(freeBytes)} free under ${dir}`,
        'a long run with checkpoints needs more; free space first',
      ),
    ];
  return [L('disk', 'PASS', `${gib(freeBytes)} free under ${dir}`)];
}

export function judgeHalt(
  dir: string | null,
  halt: { present: boolean; content: string | null },
  anomaly: string | null,
): PreflightLine[] {
  if (!dir) return [L('halt', 'INFO', 'no run dir given (--run-dir): stale .HALT not checked')];
  const out: PreflightLine[] = [];
  if (halt.present) {
    out.push(
      L(
        'halt',
        'FAIL',
        `stale ${dir}/.HALT${halt.content?.trim() ? ` ("${halt.content.trim()}")` : ''}: the trainer would stop at step 1`,
        `rm ${dir}/.HALT${anomaly !== null ? ` ${dir}/.anomaly_type` : ''} (the trainer never deletes it)`,
      ),
    );
  } else out.push(L('halt', 'PASS', `no .HALT in ${dir}`));
  if (anomaly !== null)
    out.push(
      L(
        'anomaly',
        'WARN',
        `${dir}/.anomaly_type says "${anomaly}" from an earlier run`,
        `read it, then rm ${dir}/.anomaly_type so the next anomaly is not confused with it`,
      ),
    );
  return out;
}

/** Listening TCP ports from /proc/net/tcp{,6} text (state 0A = LISTEN). */
export function judgePort(
  port: number,
  listening: Set<number> | null,
  needed: boolean,
  error: string | null,
): PreflightLine[] {
  if (listening === null)
    return [
      L(
        'port',
        'WARN',
        `could not tell whether port ${port} is free${error ? ` (${error})` : ''}`,
        `check with \`ss -ltnp 'sport = :${port}'\``,
      ),
    ];
  if (listening.has(port)) {
    return [
      L(
        'port',
        needed ? 'FAIL' : 'WARN',
        `port ${port} (torchrun's rendezvous) is already in use: a previous torchrun may still be alive`,
        `find it with \`ss -ltnp 'sport = :${port}'\`, stop it, or set master_port: <free port> in the profile (preflight --port N checks another)`,
      ),
    ];
  }
  return [L('port', 'PASS', `port ${port} is free${needed ? '' : ' (not needed: one process)'}`)];
}

/** Variables that silently change what trains (contract §8.8, §8.9). */
const RISKY: Record<string, string> = {
  NSA_STOPGRAD_GATES: 'freezes the gates: they stay uniform and learn nothing (contract §8.8)',
  NSA_FORCE_UNIFORM_GATE: 'forces uniform gates (contract §8.8)',
  NSA_FORCE_BRANCH: 'forces one branch: looks like gate collapse to the watchdog',
  NSA_GATE_COMPILE: 'gate stats go stale on the fused path',
  NSA_DETECT_ANOMALY: 'crashes the trainer at startup (UnboundLocalError, contract §8.9)',
};

export function judgeEnv(
  profile: string | null,
  presets: string[],
  planEnv: Record<string, string>,
  shellEnv: Record<string, string | undefined>,
  missingPresets: string[],
): PreflightLine[] {
  const out: PreflightLine[] = [];
  if (!profile) out.push(L('env', 'INFO', 'no profile chosen (--profile NAME): launch environment not checked'));
  else if (missingPresets.length)
    out.push(
      L(
        'env',
        'FAIL',
        `profile ${profile} names unknown preset(s): ${missingPresets.join(', ')}`,
        'define them under `presets:` in the profiles file',
      ),
    );
  else {
    const keys = Object.keys(planEnv)
      .filter((k) => k !== 'NSA_TOP_RUN_DIR')
      .sort();
    out.push(
      L(
        'env',
        'PASS',
        `profile ${profile}${presets.length ? ` (presets ${presets.join(', ')})` : ''} sets ${keys.length ? keys.map((k) => `${k}=${planEnv[k]}`).join(' ') : 'nothing'}`,
      ),
    );
    const overridden = keys.filter((k) => shellEnv[k] !== undefined && shellEnv[k] !== planEnv[k]);
    if (overridden.length)
      out.push(
        L(
          'env',
          'INFO',
          `the profile overrides this shell's ${overridden.map((k) => `${k}=${shellEnv[k]}`).join(' ')}`,
        ),
      );
  }
  for (const [k, why] of Object.entries(RISKY)) {
    const v = planEnv[k] ?? shellEnv[k];
    if (v !== undefined && v !== '' && v !== '0') {
      out.push(
        L(
          'env',
          k === 'NSA_DETECT_ANOMALY' ? 'FAIL' : 'WARN',
          `${k}=${v} ${planEnv[k] !== undefined ? 'in the profile' : 'exported in this shell'}: ${why}`,
          `unset ${k} unless this is deliberate`,
        ),
      );
    }
  }
  return out;
}

export function preflightExit(lines: PreflightLine[]): 0 | 1 {
  return lines.some((l) => l.status === 'FAIL') ? 1 : 0;
}

/**
 * What must hold before an adopted run's recorded command runs again: none of its processes alive,
 * the program, working directory and CONFIG still there, torchrun's port free. FAIL lines block the
 * relaunch (src/trainer/launch/launch.ts prepareRelaunch is handed this verdict by its caller).
 */
export function judgeAdoption(_rec: AdoptionRecord, f: AdoptionFacts): PreflightLine[] {
  const out: PreflightLine[] = [];
  out.push(
    f.alive.length
      ? L(
          'processes',
          'FAIL',
          `the run is still running (pid ${f.alive.join(', ')})`,
          'halt it first (h in the cockpit, or touch .HALT) and wait for it to exit',
        )
      : L('processes', 'PASS', 'none of the recorded processes is alive'),
  );
  out.push(
    f.cwd.isDir
      ? L('cwd', 'PASS', f.cwd.path)
      : L(
          'cwd',
          'FAIL',
          `${f.cwd.path}: no such directory`,
          'start the run with a profile (nsa-top launch --profile NAME)',
        ),
  );
  if (f.secrets)
    out.push(
      L(
        'secrets',
        'FAIL',
        `the recorded command had secrets on its command line (${f.secrets.names ?? 'redacted'}): they were not recorded, and a relaunch would pass ${f.secrets.placeholder}`,
        'pass them in the environment instead (HF_TOKEN, …: the relaunch inherits yours), or start the run with a profile',
      ),
    );
  if (f.program)
    out.push(
      f.program.found
        ? L('program', 'PASS', f.program.path)
        : L('program', 'FAIL', `${f.program.path}: not found`, 'reinstall it, or start the run with a profile'),
    );
  if (f.config)
    out.push(
      f.config.found
        ? L('config', 'PASS', `CONFIG=${f.config.recorded} (${f.config.path})`)
        : L(
            'config',
            'FAIL',
            `CONFIG=${f.config.recorded}: ${f.config.path} not found`,
            'restore the config, or start the run with a profile',
          ),
    );
  else if (!f.ownLauncher)
    out.push(
      L('config', 'WARN', "no CONFIG in the launcher's environment: the real trainer trains its toy default config"),
    );
  if (f.port) out.push(...judgePort(f.port.port, f.port.listening, true, f.port.error));
  return out;
}
