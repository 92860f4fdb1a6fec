// Shared builders for the checks tests: real fixture snapshots (read by the real RunModel), and
// small pieces of process/GPU data. Not a test file itself.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../src/remote/local/host.js';
import type { GpuDevice, GpuTelemetry, ProcState, RankProc, RunProcesses } from '../../src/remote/types.js';
import { RunModel } from '../../src/trainer/run/model.js';
import type { RunSnapshot, Series } from '../../src/trainer/run/snapshot.js';
import { emptySnapshot } from '../../src/trainer/run/snapshot.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'nsa-vibe');

const cache = new Map<string, RunSnapshot>();

/** A fixture run as the real RunModel reads it (a fresh deep copy each call, to mutate freely). */
export async function fixture(name: 'single' | 'ddp2-dumps-halt'): Promise<RunSnapshot> {
  if (!cache.has(name)) {
    const m = new RunModel(new LocalHost(), join(FIXTURES, name));
    await m.poll();
    cache.set(name, await m.poll());
  }
  return structuredClone(cache.get(name)!);
}

/** The fixture as if it were still running: no metrics.json, `now` just after its last heartbeat. */
export async function liveFixture(name: 'single' | 'ddp2-dumps-halt'): Promise<{ run: RunSnapshot; lastTs: number }> {
  const run = await fixture(name);
  run.ended = false;
  run.metrics = null;
  run.control.halt = { present: false, content: null, mtimeMs: null };
  run.log.haltSeen = false; // the ddp2 log ends with "[train] HALT file detected"
  const lastTs = Math.max(...run.ranks.map((r) => r.lastTs ?? 0));
  return { run, lastTs };
}

export function series(
  values: number[],
  o: { step0?: number; every?: number; t0?: number; dtMs?: number; segment?: number } = {},
): Series {
  const step0 = o.step0 ?? 1,
    every = o.every ?? 1,
    t0 = o.t0 ?? 1_700_000_000_000,
    dt = o.dtMs ?? 1000;
  return {
    recent: values.map((value, i) => ({ step: step0 + i * every, t: t0 + i * dt, value, segment: o.segment ?? 0 })),
    history: [],
    total: values.length,
    nonFinite: 0,
  };
}

/** A minimal live run: rank 0 heartbeat, step `step`, written at `t`. */
export function liveRun(o: {
  step: number;
  t: number;
  total?: number;
  logEvery?: number;
  stepTimeS?: number;
}): RunSnapshot {
  const run = emptySnapshot('/tmp/run', 'local');
  run.exists = true;
  run.step = o.step;
  run.totalSteps = o.total ?? 1000;
  run.stepAdvancedTs = o.t;
  run.stepTimeS = o.stepTimeS ?? 0.5;
  run.identity.trainer = 'nsa-vibe';
  run.identity.config = 'configs/x.yaml';
  run.identity.train = {
    steps: o.total ?? 1000,
    seqLen: 256,
    batchSize: 2,
    accum: 1,
    lr: 3e-4,
    warmupSteps: 5,
    logEvery: o.logEvery ?? 1,
    evalEvery: 0,
    saveEvery: 0,
    outDir: null,
  };
  run.ranks = [
    {
      rank: 0,
      pid: 100,
      file: 'heartbeat_rank0.jsonl',
      bootTs: o.t - 60_000,
      lastTs: o.t,
      lastMsg: 'step_end',
      lastStep: o.step,
      stepAdvancedTs: o.t,
      records: 10,
      watchdogDumps: 0,
      memAllocMiB: null,
      memReservedMiB: null,
      loaderEvents: [],
      events: { boot: 1 },
    },
  ];
  return run;
}

export function proc(
  rank: number,
  state: ProcState = 'S',
  o: { pid?: number; cpuPct?: number; rssKiB?: number; gpuUuid?: string } = {},
): RankProc {
  return {
    rank,
    localRank: rank,
    proc: {
      pid: o.pid ?? 1000 + rank,
      ppid: 999,
      startTime: String(5000 + rank),
      state,
      cpuPct: o.cpuPct ?? 50,
      rssKiB: o.rssKiB ?? 500_000,
      wchan: null,
      argv: ['python', 'train.py'],
      env: { RANK: String(rank) },
    },
    gpuMemMiB: null,
    gpuUuid: o.gpuUuid ?? null,
    source: 'environ',
  };
}

export function procs(ranks: RankProc[]): RunProcesses {
  return { at: 0, launcher: null, ranks, unknown: [] };
}

export function gpu(devs: Partial<GpuDevice>[], at = 0): GpuTelemetry {
  return {
    status: 'ok',
    at,
    latencyMs: 5,
    apps: [],
    devices: devs.map((d, i) => ({
      index: i,
      name: 'NVIDIA A100-SXM4-80GB',
      uuid: `GPU-${i}`,
      mig: null,
      memUsedMiB: 20000,
      memTotalMiB: 81920,
      utilPct: 60,
      powerW: 250,
      powerLimitW: 400,
      tempC: 50,
      smClockMHz: 1400,
      memClockMHz: 1593,
      ...d,
    })),
  };
}
