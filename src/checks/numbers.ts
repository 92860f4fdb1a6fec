// The numbers an operator asks for on screen, judged once for every surface (cockpit header,
// `status`, the watchdog's metrics): MFU with its arithmetic and the peak it assumed — or "unknown
// peak", said, never guessed (a wrong peak table once printed 152 % MFU) —, the restart count and
// whether the restarts are a storm, and how long ago the newest complete checkpoint was written.
// Pure.
import type { Ctx } from './context.js';
import { configBasename, cpuPeak, flopsPerToken, gpuPeak, knownConfig } from './flops.js';
import { dur, sig } from '../format.js';
import { currentSegment, median } from './stats.js';
import { STORM_EXITS, STORM_WINDOW_MS } from './supervisor.js';
import type { Draft } from './rules/index.js';

export interface Mfu {
  /** fraction of the assumed peak (0.12 = 12 %); null when the peak is unknown */
  value: number | null;
  /** median tokens/s of the last 5 records, ≈FLOPs per token, achieved FLOP/s */
  toksPerS: number;
  flopsPerToken: number;
  achievedFlops: number;
  /** the peak assumed: devices × per-device dense peak at the run's precision (null: unknown) */
  peak: { devices: number; perDeviceFlops: number; label: string } | null;
  /** the whole arithmetic, one line ("… = 3.1 TFLOP/s vs 2 × A100 bf16 peak 312 TFLOP/s → MFU 0.5 %") */
  arithmetic: string;
  /** why no peak is assumed ("GPU 'NVIDIA B200' not in the peak table"); null when one is */
  unknownPeak: string | null;
  onCpu: boolean;
}

/** MFU from the run's own numbers; null when the model dims or three throughput records are missing. */
export function mfuOf(ctx: Ctx, vals?: number[]): Mfu | null {
  const id = ctx.run.identity;
  const known = knownConfig(id.config);
  const model = id.model ?? known?.model ?? null;
  const v =
    vals ??
    currentSegment(ctx.run.series.toksPerS)
      .slice(-5)
      .map((p) => p.value);
  if (!model || v.length < 3) return null;
  const seq = id.train?.seqLen ?? known?.seqLen ?? null;
  const tps = median(v.slice(-5))!;
  if (!(tps > 0)) return null;
  const fpt = flopsPerToken(model, id.nsa ?? known?.nsa ?? null, seq);
  const achieved = tps * fpt;
  const world = Math.max(1, id.worldSize ?? 1);
  const dev = (id.device ?? ctx.run.metrics?.['device'] ?? '') as string;
  let peak: { flops: number; label: string } | null = null;
  let n = world;
  let unknownPeak: string | null = null;
  let devicesNote = '';
  const gpuName = ctx.gpus[0]?.name ?? id.gpuName;
  const onCpu = /^cpu/i.test(dev) || (!gpuName && ctx.in.gpu?.status === 'no-nvidia-tools');
  if (onCpu) {
    if (ctx.in.hostCpus) {
      peak = cpuPeak(ctx.in.hostCpus);
      n = 1;
    } else unknownPeak = "the host's CPU count is not known";
  } else if (gpuName) {
    const p = gpuPeak(gpuName, id.dtype);
    if (p) {
      peak = p;
      const seen = id.cudaDeviceCount;
      if (ctx.gpus.length) n = Math.min(ctx.gpus.length, world) || world;
      // no telemetry: every rank of the run is on this host and each saw fewer CUDA devices than
      // there are ranks — the ranks share the GPUs (seen live: 2 ranks on one H200)
      else if (seen !== null && seen > 0 && seen < world && ctx.procsKnown && ctx.alive.length >= world) n = seen;
      else if (seen !== null && seen > 0 && seen < world)
        devicesNote = ` (one GPU per rank assumed: each rank saw ${seen} CUDA device${seen === 1 ? '' : 's'})`;
    } else unknownPeak = `GPU '${gpuName}' is not in the peak table`;
  } else unknownPeak = 'the device is not known (no GPU name in telemetry or env.json)';
  const dims = `dim ${model.dim} × ${model.nLayers} layers, S=${seq ?? '?'}${id.model ? '' : ` (dims from the config name ${configBasename(id.config)})`}`;
  const base = `${sig(tps)} tok/s × ≈${sig(fpt / 1e6)} MFLOP/token (${dims}) = ${sig(achieved / 1e12)} TFLOP/s`;
  const mfu = peak ? achieved / (peak.flops * n) : null;
  return {
    value: mfu,
    toksPerS: tps,
    flopsPerToken: fpt,
    achievedFlops: achieved,
    peak: peak ? { devices: n, perDeviceFlops: peak.flops, label: peak.label } : null,
    arithmetic: peak
      ? `${base} vs ${n} × ${peak.label} peak ${sig(peak.flops / 1e12)} TFLOP/s${devicesNote} → MFU ${sig(mfu! * 100)} %`
      : `${base}; unknown peak: ${unknownPeak}`,
    unknownPeak,
    onCpu,
  };
}

export interface OperatorNumbers {
  mfu: Mfu | null;
  /** trainer restarts: the supervisor's count (else the run's segments begun by a new process), and a storm */
  restarts: {
    count: number;
    max: number | null;
    /** failed exits within the storm window */
    recent: number;
    windowS: number;
    storm: boolean;
    source: 'supervisor' | 'heartbeat boots';
  } | null;
  /** the newest complete checkpoint and its age, s */
  lastCheckpoint: { name: string; step: number; ageS: number } | null;
}

export function operatorNumbers(ctx: Ctx): OperatorNumbers {
  const sup = ctx.in.supervisor ?? null;
  let restarts: OperatorNumbers['restarts'] = null;
  if (sup) {
    const recent = sup.exitCodes.filter(
      (e) => ctx.now - e.at <= STORM_WINDOW_MS && !(e.code === 0 && e.signal === null),
    ).length;
    restarts = {
      count: sup.restarts,
      max: sup.maxRestarts,
      recent,
      windowS: STORM_WINDOW_MS / 1000,
      storm: recent >= STORM_EXITS,
      source: 'supervisor',
    };
  } else {
    // no supervisor of nsa-top's (a hand relaunch loop, torchrun --max-restarts): the run's own
    // segments that began with a new process are its restarts
    const relaunches = ctx.run.segments.filter(
      (g) => g.index > 0 && (g.cause === 'boot' || g.cause === 'step-backwards'),
    );
    const at = (g: (typeof relaunches)[number]) => g.bootTs ?? g.startTs;
    const recent = relaunches.filter((g) => {
      const ts = at(g);
      return ts !== null && ts !== undefined && ctx.now - ts <= STORM_WINDOW_MS;
    }).length;
    if (ctx.run.segments.length > 0)
      restarts = {
        count: relaunches.length,
        max: null,
        recent,
        windowS: STORM_WINDOW_MS / 1000,
        storm: recent >= STORM_EXITS,
        source: 'heartbeat boots',
      };
  }
  const done = ctx.run.checkpoints.filter((c) => c.complete);
  const newest = done.reduce<(typeof done)[number] | null>((a, c) => (!a || c.mtimeMs > a.mtimeMs ? c : a), null);
  return {
    mfu: mfuOf(ctx),
    restarts,
    lastCheckpoint: newest
      ? { name: newest.name, step: newest.step, ageS: Math.max(0, (ctx.now - newest.mtimeMs) / 1000) }
      : null,
  };
}

/** one short line: "MFU 0.52 % · 2 restarts (storm) · ckpt 4m ago" */
export function numbersLine(n: OperatorNumbers): string[] {
  const out: string[] = [];
  if (n.mfu) out.push(n.mfu.value !== null ? `MFU ${sig(n.mfu.value * 100, 2)} %` : 'MFU ? (unknown peak)');
  if (n.restarts && n.restarts.count > 0)
    out.push(
      `${n.restarts.count}${n.restarts.max !== null ? `/${n.restarts.max}` : ''} restart${n.restarts.count === 1 ? '' : 's'}${n.restarts.storm ? ' (STORM)' : ''}`,
    );
  if (n.lastCheckpoint) out.push(`ckpt ${dur(n.lastCheckpoint.ageS)} ago`);
  return out;
}

/** A restart storm of a run nsa-top's supervisor does not drive (that one says `supervisor:storm`). */
export function ruleRestartStorm(ctx: Ctx, n: OperatorNumbers): Draft[] {
  const r = n.restarts;
  if (!r || r.source !== 'heartbeat boots' || !r.storm) return [];
  return [
    {
      id: 'restarts:storm',
      rule: 'restarts',
      severity: 'warning',
      title: `restart storm: the trainer started ${r.recent} times in ${dur(r.windowS)}`,
      detail: `${r.count} restart${r.count === 1 ? '' : 's'} in all, from the heartbeat's boots (no nsa-top supervisor); a run that keeps dying comes back only to die again: read the log of the last exit`,
    },
  ];
}
