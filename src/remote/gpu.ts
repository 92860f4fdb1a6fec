// GPU telemetry through a Host, from nvidia-smi (no NVML binding: agentless over SSH).
//
// - Devices: one long-lived `nvidia-smi --query-gpu=… --format=csv,noheader,nounits -lms N`
//   stream (nvidia-smi stays resident, NVML initialised once). A sample is the burst of lines
//   one interval prints; it ends when the index sequence restarts or the stream goes quiet.
// - Compute apps: `-lms` prints nothing for an empty sample, so "no processes" could not be told
//   from "late"; they come from one long-lived POSIX sh loop that runs the query and prints a
//   marker after each answer.
// - MIG: `nvidia-smi -L` at start lists MIG devices; when there are some, `nvidia-smi -q` now and
//   then gives their GPU/compute instance ids and memory.
// - `[N/A]`, `[Not Supported]`, … become null (unknown), never 0.
// - nvidia-smi missing → {status:'no-nvidia-tools'} (not an error). nvidia-smi hanging (it does
//   when a GPU falls off the bus) → after `timeoutMs` {status:'not-answering', since}; the hung
//   stream is stopped and a new one is tried with backoff, never more than one at a time.
import type { Host, StreamHandle } from './host.js';
import type { GpuComputeApp, GpuDevice, GpuSample, GpuTelemetry } from './types.js';

export const GPU_FIELDS = [
  'index',
  'name',
  'uuid',
  'memory.used',
  'memory.total',
  'utilization.gpu',
  'power.draw',
  'power.limit',
  'temperature.gpu',
  'clocks.sm',
  'clocks.mem',
] as const;
export const APP_FIELDS = ['pid', 'gpu_uuid', 'used_memory'] as const;
const FORMAT = '--format=csv,noheader,nounits';
const APPS_MARK = '@@nsa-top-apps@@';

/** A value nvidia-smi prints when it does not know: null, never 0. */
export function smiValue(raw: string | undefined): number | null {
  if (raw === undefined) return null;
  const v = raw.trim();
  if (
    v === '' ||
    /^\[.*\]$/.test(v) ||
    /^(N\/A|Not Supported|Unknown Error|ERR!|Insufficient Permissions|GPU is lost)$/i.test(v)
  )
    return null;
  const n = Number(v.replace(/\s*(MiB|W|%|C|MHz)$/i, ''));
  return Number.isFinite(n) ? n : null;
}

/**
 * The range each value can physically take (generous: the largest GPUs and clocks of today times a
 * few). A value outside it is a broken driver or a fake nvidia-smi: it is kept null and named in
 * `invalid`, never shown as 99999 °C or 1e+308 W.
 */
export const GPU_RANGES = {
  memUsedMiB: { lo: 0, hi: 16 * 1024 * 1024, label: 'mem', unit: ' MiB' },
  memTotalMiB: { lo: 0, hi: 16 * 1024 * 1024, label: 'mem total', unit: ' MiB' },
  utilPct: { lo: 0, hi: 100, label: 'util', unit: '%' },
  powerW: { lo: 0, hi: 20000, label: 'power', unit: ' W' },
  powerLimitW: { lo: 0, hi: 20000, label: 'power limit', unit: ' W' },
  tempC: { lo: -40, hi: 200, label: 'temp', unit: ' °C' },
  smClockMHz: { lo: 0, hi: 20000, label: 'sm clock', unit: ' MHz' },
  memClockMHz: { lo: 0, hi: 50000, label: 'mem clock', unit: ' MHz' },
} as const;

/** the longest device name / uuid kept (nvidia-smi's are ~40 characters) */
const MAX_FIELD = 96;
/** indices beyond this are not a GPU (a node has at most a few dozen) */
const MAX_GPU_INDEX = 1023;

export function parseGpuLine(line: string): GpuDevice | null {
  const f = line.split(',').map((s) => s.trim());
  if (f.length < GPU_FIELDS.length) return null;
  if (!/^\d+$/.test(f[0]!)) return null;
  const index = Number(f[0]);
  if (!Number.isInteger(index) || index < 0 || index > MAX_GPU_INDEX) return null;
  const invalid: string[] = [];
  const v = (k: keyof typeof GPU_RANGES, raw: string | undefined): number | null => {
    const n = smiValue(raw);
    if (n === null) return null;
    const r = GPU_RANGES[k];
    if (n < r.lo || n > r.hi) {
      invalid.push(`${r.label} ${String(raw).trim().slice(0, 24)}${/[a-z%]$/i.test(String(raw).trim()) ? '' : r.unit}`);
      return null;
    }
    return n;
  };
  const d: GpuDevice = {
    index,
    name: f[1]!.slice(0, MAX_FIELD),
    uuid: f[2]!.slice(0, MAX_FIELD),
    mig: null,
    memUsedMiB: v('memUsedMiB', f[3]),
    memTotalMiB: v('memTotalMiB', f[4]),
    utilPct: v('utilPct', f[5]),
    powerW: v('powerW', f[6]),
    powerLimitW: v('powerLimitW', f[7]),
    tempC: v('tempC', f[8]),
    smClockMHz: v('smClockMHz', f[9]),
    memClockMHz: v('memClockMHz', f[10]),
  };
  if (invalid.length) d.invalid = invalid;
  return d;
}

export function parseAppLine(line: string): GpuComputeApp | null {
  const f = line.split(',').map((s) => s.trim());
  if (f.length < 3) return null;
  if (!/^\d+$/.test(f[0]!)) return null;
  const pid = Number(f[0]);
  // pid_max is at most 2^22 on Linux
  if (!Number.isInteger(pid) || pid <= 0 || pid > 4_194_304) return null;
  const mem = smiValue(f[2]);
  return {
    pid,
    gpuUuid: f[1]!.slice(0, MAX_FIELD),
    usedMemMiB: mem !== null && mem >= 0 && mem <= GPU_RANGES.memUsedMiB.hi ? mem : null,
  };
}

export interface MigListing {
  parentIndex: number;
  parentUuid: string;
  profile: string;
  device: number;
  uuid: string;
  /** from a legacy `MIG-GPU-<uuid>/<gi>/<ci>` UUID, else null until `-q` tells */
  gpuInstance: number | null;
  computeInstance: number | null;
}

/** `nvidia-smi -L`: GPUs and their MIG devices (both the current and the legacy UUID forms). */
export function parseListing(text: string): MigListing[] {
  const out: MigListing[] = [];
  let parent: { index: number; uuid: string } | null = null;
  for (const line of text.split('\n')) {
    const g = /^GPU (\d+): .*\(UUID: ([^)]+)\)/.exec(line);
    if (g) {
      parent = { index: Number(g[1]), uuid: g[2]!.trim() };
      continue;
    }
    const m = /^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)/.exec(line);
    if (m && parent) {
      const uuid = m[3]!.trim();
      const legacy = /^MIG-GPU-[^/]+\/(\d+)\/(\d+)$/.exec(uuid);
      out.push({
        parentIndex: parent.index,
        parentUuid: parent.uuid,
        profile: m[1]!,
        device: Number(m[2]),
        uuid,
        gpuInstance: legacy ? Number(legacy[1]) : null,
        computeInstance: legacy ? Number(legacy[2]) : null,
      });
    }
  }
  return out;
}

export interface MigQuery {
  gpuOrdinal: number;
  index: number;
  gpuInstance: number | null;
  computeInstance: number | null;
  memUsedMiB: number | null;
  memTotalMiB: number | null;
}

/** The MIG Device blocks of `nvidia-smi -q` (GPU sections in index order). */
export function parseMigQuery(text: string): MigQuery[] {
  const out: MigQuery[] = [];
  let gpu = -1;
  let cur: MigQuery | null = null;
  let inFb = false;
  for (const line of text.split('\n')) {
    if (/^GPU [0-9A-Fa-f]{4,}:/.test(line)) {
      gpu++;
      cur = null;
      continue;
    }
    if (/^\s+MIG Device\s*$/.test(line)) {
      cur = {
        gpuOrdinal: gpu,
        index: -1,
        gpuInstance: null,
        computeInstance: null,
        memUsedMiB: null,
        memTotalMiB: null,
      };
      out.push(cur);
      inFb = false;
      continue;
    }
    if (!cur) continue;
    const kv = /^(\s+)([^:]+?)\s*:\s*(.*)$/.exec(line);
    const section = /^(\s+)(\S.*\S)\s*$/.exec(line);
    if (!kv && section) {
      inFb = section[2] === 'FB Memory Usage';
      // a section at the MIG Device's own level or above ends the device block
      if (section[1]!.length <= 8) cur = null;
      continue;
    }
    if (!kv) continue;
    const [, indent, key, val] = kv;
    if (indent!.length <= 8) {
      cur = null;
      continue;
    }
    if (key === 'Index') cur.index = Number(val);
    else if (key === 'GPU Instance ID') cur.gpuInstance = smiValue(val);
    else if (key === 'Compute Instance ID') cur.computeInstance = smiValue(val);
    else if (inFb && key === 'Total') cur.memTotalMiB = smiValue(val);
    else if (inFb && key === 'Used') cur.memUsedMiB = smiValue(val);
  }
  return out.filter((q) => q.index >= 0);
}

export interface GpuMonitorOptions {
  /** sample period (default 2000 ms) */
  intervalMs?: number;
  /** no complete sample for this long → not-answering (default max(10 s, 3 intervals)) */
  timeoutMs?: number;
  /** extra environment for nvidia-smi (tests put a fake first on PATH this way over SSH) */
  env?: Record<string, string>;
  /** how often MIG devices are re-queried with -q (default every 10 intervals) */
  migEvery?: number;
}

/** Samples GPUs through a Host. current() never blocks; stop() ends every remote command. */
export class GpuMonitor {
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  private running = false;
  private gpuStream: StreamHandle | null = null;
  private appsStream: StreamHandle | null = null;
  private gpuStreamDone: Promise<unknown> | null = null;
  private block: GpuDevice[] = [];
  private blockTimer: NodeJS.Timeout | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private devices: GpuDevice[] | null = null;
  private apps: GpuComputeApp[] = [];
  private appsBlock: GpuComputeApp[] = [];
  private lastGoodAt: number | null = null;
  private lastGood: GpuSample | null = null;
  private startedAt = 0;
  private streamStartedAt = 0;
  private latencyMs = 0;
  private noTools = false;
  private fatal: string | null = null;
  private stderrTail = '';
  private mig: MigListing[] = [];
  private migQ: MigQuery[] = [];
  private migTimer: NodeJS.Timeout | null = null;
  private hungSince: number | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  private restartDelay = 0;
  private firstSample: (() => void) | null = null;
  /** the last line nvidia-smi printed that is not a sample (garbage is not "not answering") */
  private garbage: { at: number; sample: string } | null = null;

  constructor(
    private readonly host: Host,
    private readonly opts: GpuMonitorOptions = {},
  ) {
    this.intervalMs = Math.max(100, opts.intervalMs ?? 2000);
    this.timeoutMs = opts.timeoutMs ?? Math.max(10000, 3 * this.intervalMs);
  }

  /** Starts sampling; resolves at the first sample, or when nvidia-smi is found missing or silent. */
  start(): Promise<void> {
    if (this.running) return Promise.resolve();
    this.running = true;
    this.startedAt = Date.now();
    const first = new Promise<void>((r) => (this.firstSample = r));
    void this.boot();
    return first;
  }

  private settleFirst(): void {
    const f = this.firstSample;
    this.firstSample = null;
    f?.();
  }

  private async boot(): Promise<void> {
    const probe = await this.host.exec(['sh', '-c', 'command -v nvidia-smi'], {
      timeoutMs: this.timeoutMs,
      env: this.opts.env,
      quick: true,
    });
    if (!this.running) return;
    if (probe.code !== 0 && !probe.timedOut) {
      this.noTools = true;
      this.settleFirst();
      // drivers rarely appear mid-run; look again now and then
      this.restartTimer = setTimeout(() => {
        this.noTools = false;
        void this.boot();
      }, 300_000);
      this.restartTimer.unref?.();
      return;
    }
    this.noTools = false;
    this.armWatchdog();
    this.startGpuStream();
    this.startAppsStream();
    void this.refreshMig(true);
  }

  private armWatchdog(): void {
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = setInterval(() => this.checkHung(), Math.min(1000, this.intervalMs));
    this.watchdog.unref?.();
  }

  private checkHung(): void {
    if (!this.running || this.noTools) return;
    const ref = Math.max(this.lastGoodAt ?? 0, this.streamStartedAt);
    if (Date.now() - ref <= this.timeoutMs) return;
    if (this.hungSince === null) {
      this.hungSince = this.lastGoodAt ?? this.startedAt;
      this.settleFirst();
    }
    // stop the silent stream; a new one only once it has really ended (a hung nvidia-smi in D
    // state may never end: then we do not pile up more of them)
    if (this.gpuStream && !this.restartTimer) {
      const done = this.gpuStreamDone;
      this.gpuStream.stop();
      this.gpuStream = null;
      this.appsStream?.stop();
      this.appsStream = null;
      this.restartDelay = Math.min(Math.max(this.restartDelay * 2, this.intervalMs), 60_000);
      this.restartTimer = setTimeout(() => {
        void Promise.race([done, new Promise((r) => setTimeout(r, 5000))]).then(() => {
          this.restartTimer = null;
          if (!this.running) return;
          this.streamStartedAt = Date.now();
          this.startGpuStream();
          this.startAppsStream();
        });
      }, this.restartDelay);
      this.restartTimer.unref?.();
    }
  }

  private startGpuStream(): void {
    this.streamStartedAt = Date.now();
    this.block = [];
    const s = this.host.stream(
      ['nvidia-smi', `--query-gpu=${GPU_FIELDS.join(',')}`, FORMAT, '-lms', String(this.intervalMs)],
      {
        env: this.opts.env,
        onLine: (l) => this.onGpuLine(l),
        onStderr: (l) => (this.stderrTail = l.slice(0, 200)),
        onOverflow: (n) => (this.garbage = { at: Date.now(), sample: `a line longer than ${n} bytes` }),
      },
    );
    this.gpuStream = s;
    this.gpuStreamDone = s.done.then((r) => {
      if (this.gpuStream !== s) return;
      this.gpuStream = null;
      this.flushBlock();
      if (!this.running) return;
      if (r.code === 127) {
        this.noTools = true;
        this.settleFirst();
        return;
      }
      // nvidia-smi ended on its own (driver error, reset…): say why, try again with backoff — unless
      // the SSH connection went away under it, which current() reports from connState
      if (this.host.connState().state === 'connected' || this.host.connState().state === 'local') {
        this.fatal = this.stderrTail || `nvidia-smi exited (${r.code ?? r.signal})`;
        this.settleFirst();
      }
      if (!this.restartTimer) {
        this.restartDelay = Math.min(Math.max(this.restartDelay * 2, this.intervalMs), 60_000);
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          if (this.running && !this.gpuStream) {
            this.appsStream?.stop();
            this.startGpuStream();
            this.startAppsStream();
          }
        }, this.restartDelay);
        this.restartTimer.unref?.();
      }
    });
  }

  private startAppsStream(): void {
    const sec = (this.intervalMs / 1000).toFixed(3);
    const script = `while :; do nvidia-smi --query-compute-apps=${APP_FIELDS.join(',')} ${FORMAT} || exit $?; echo ${APPS_MARK}; sleep ${sec}; done`;
    this.appsBlock = [];
    this.appsStream = this.host.stream(['sh', '-c', script], {
      env: this.opts.env,
      onOverflow: () => (this.appsBlock = []),
      onLine: (l) => {
        if (l === APPS_MARK) {
          this.apps = this.appsBlock;
          this.appsBlock = [];
          return;
        }
        const a = parseAppLine(l);
        if (a) this.appsBlock.push(a);
      },
    });
  }

  private onGpuLine(line: string): void {
    const d = parseGpuLine(line);
    if (!d) {
      // nvidia-smi reports trouble on stdout ("NVIDIA-SMI has failed …", "Unable to determine …")
      if (line.trim()) {
        this.stderrTail = line.trim().slice(0, 200);
        this.garbage = { at: Date.now(), sample: line.trim().slice(0, 80) };
      }
      return;
    }
    if (this.block.length && d.index <= this.block[this.block.length - 1]!.index) this.flushBlock();
    this.block.push(d);
    if (this.blockTimer) clearTimeout(this.blockTimer);
    this.blockTimer = setTimeout(() => this.flushBlock(), Math.min(150, this.intervalMs / 2));
    this.blockTimer.unref?.();
  }

  private flushBlock(): void {
    if (this.blockTimer) clearTimeout(this.blockTimer);
    this.blockTimer = null;
    if (!this.block.length) return;
    const now = Date.now();
    this.latencyMs =
      this.lastGoodAt === null ? now - this.streamStartedAt : Math.max(0, now - this.lastGoodAt - this.intervalMs);
    this.devices = this.block;
    this.block = [];
    this.lastGoodAt = now;
    this.hungSince = null;
    this.fatal = null;
    this.restartDelay = 0;
    this.lastGood = this.sample(now);
    this.settleFirst();
  }

  private async refreshMig(first = false): Promise<void> {
    if (!this.running) return;
    if (first) {
      const r = await this.host.exec(['nvidia-smi', '-L'], { timeoutMs: this.timeoutMs, env: this.opts.env });
      if (r.code === 0) this.mig = parseListing(r.stdout);
    }
    if (this.mig.length) {
      const q = await this.host.exec(['nvidia-smi', '-q'], {
        timeoutMs: this.timeoutMs,
        env: this.opts.env,
        maxOutputBytes: 4 << 20,
      });
      if (q.code === 0) this.migQ = parseMigQuery(q.stdout);
      if (this.running) {
        this.migTimer = setTimeout(() => void this.refreshMig(), this.intervalMs * (this.opts.migEvery ?? 10));
        this.migTimer.unref?.();
      }
    }
  }

  private migDevices(): GpuDevice[] {
    return this.mig.map((m) => {
      const q = this.migQ.find((x) => x.gpuOrdinal === m.parentIndex && x.index === m.device);
      return {
        index: m.parentIndex,
        name: `MIG ${m.profile}`,
        uuid: m.uuid,
        mig: {
          gpuInstance: m.gpuInstance ?? q?.gpuInstance ?? -1,
          computeInstance: m.computeInstance ?? q?.computeInstance ?? -1,
          parentUuid: m.parentUuid,
        },
        memUsedMiB: q?.memUsedMiB ?? null,
        memTotalMiB: q?.memTotalMiB ?? null,
        utilPct: null,
        powerW: null,
        powerLimitW: null,
        tempC: null,
        smClockMHz: null,
        memClockMHz: null,
      };
    });
  }

  private sample(at: number): GpuSample {
    const devs = [...(this.devices ?? [])];
    // MIG devices listed right after their parent GPU
    const migs = this.migDevices();
    const out: GpuDevice[] = [];
    for (const d of devs) {
      out.push(d);
      for (const m of migs) if (m.mig!.parentUuid === d.uuid) out.push(m);
    }
    for (const m of migs) if (!devs.some((d) => d.uuid === m.mig!.parentUuid)) out.push(m);
    return { at, devices: out, apps: [...this.apps], latencyMs: this.latencyMs };
  }

  current(): GpuTelemetry {
    const at = Date.now();
    if (this.noTools) return { status: 'no-nvidia-tools', at };
    const cs = this.host.connState();
    if (cs.state === 'reconnecting')
      return {
        status: 'not-answering',
        since: Math.min(cs.since, this.lastGoodAt ?? cs.since),
        at,
        lastGood: this.lastGood,
      };
    // it answers, but with nothing that parses as a sample: say so (it is not silent)
    const g = this.garbage;
    if (
      g &&
      (this.lastGoodAt === null || this.hungSince !== null) &&
      g.at >= (this.lastGoodAt ?? 0) &&
      at - g.at <= this.timeoutMs * 2
    ) {
      return { status: 'error', message: `unparseable output from nvidia-smi: ${JSON.stringify(g.sample)}`, at };
    }
    if (this.hungSince !== null) return { status: 'not-answering', since: this.hungSince, at, lastGood: this.lastGood };
    if (this.lastGoodAt === null) {
      if (this.fatal) return { status: 'error', message: this.fatal, at };
      return { status: 'not-answering', since: this.startedAt, at, lastGood: null };
    }
    if (this.fatal) return { status: 'error', message: this.fatal, at };
    return { status: 'ok', ...this.sample(this.lastGoodAt) };
  }

  stop(): void {
    this.running = false;
    this.gpuStream?.stop();
    this.appsStream?.stop();
    this.gpuStream = null;
    this.appsStream = null;
    for (const t of [this.blockTimer, this.restartTimer, this.migTimer]) if (t) clearTimeout(t);
    if (this.watchdog) clearInterval(this.watchdog);
    this.blockTimer = this.restartTimer = this.migTimer = this.watchdog = null;
    this.settleFirst();
  }
}

/** One-shot sample (nsa-top status, preflight): start, wait for the first answer, stop. */
export async function sampleGpus(host: Host, opts: GpuMonitorOptions = {}): Promise<GpuTelemetry> {
  const m = new GpuMonitor(host, { intervalMs: 1000, ...opts });
  try {
    await m.start();
    return m.current();
  } finally {
    m.stop();
  }
}
