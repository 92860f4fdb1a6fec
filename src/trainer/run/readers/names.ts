// What each file name in a run dir is. Covers the main trainer, the FSDP variant (suffixed names),
// the prod_smoke `heartbeat.jsonl` variant and nsa-top's reference trainer.

/** nsa-top's own directory inside a run dir */
export const NSA_DIR = '.nsa-top';

export type FileKind =
  | { kind: 'heartbeat'; rank: number }
  | { kind: 'heartbeat-smoke' }
  | { kind: 'training-csv'; fsdp: boolean }
  | { kind: 'val-csv' }
  | { kind: 'k-stats'; fsdp: boolean }
  | { kind: 'fallback-counters'; fsdp: boolean }
  | { kind: 'env-json' }
  | { kind: 'metrics-json'; fsdp: boolean }
  | { kind: 'opt-state'; fsdp: boolean }
  | { kind: 'mem-dump' }
  | { kind: 'halt' }
  | { kind: 'anomaly' }
  | { kind: 'gate-collapse' }
  | { kind: 'checkpoint'; step: number; fsdp: boolean }
  | { kind: 'stackdump'; watchdog: boolean; fsdp: boolean; epoch: number; rank: number | null; pid: number | null }
  | { kind: 'config-yaml' }
  | { kind: 'log' }
  | { kind: 'other' };

const RE_HB = /^heartbeat_rank(\d+)\.jsonl$/;

/**
 * The most ranks nsa-top believes a run has. A world size or a rank beyond it (WORLD_SIZE=1000000000
 * in env.json, a heartbeat_rank999999999.jsonl) is a named parse warning, never an allocation: the
 * per-rank lists would otherwise be sized by whatever a file claims.
 */
export const MAX_RANKS = 65536;

/** A world size or rank count as a file claims it → the number, or null with why when implausible. */
export function plausibleWorldSize(raw: unknown): { ok: number } | { bad: string } | null {
  if (raw === undefined || raw === null || raw === '') return null;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0)
    return { bad: `WORLD_SIZE ${JSON.stringify(String(raw).slice(0, 40))} is not a positive integer: ignored` };
  if (n > MAX_RANKS) return { bad: `WORLD_SIZE ${n} is beyond ${MAX_RANKS} ranks: ignored` };
  return { ok: n };
}
const RE_CKPT = /^checkpoint_(fsdp_)?step(\d+)\.pt$/;
// stackdump_<epoch>.txt, stackdump_fsdp_<epoch>.txt, watchdog_stackdump[_fsdp]_<epoch>.txt,
// reference trainer: stackdump_<epoch>_rank<R>_<pid>.txt (any further suffix tolerated)
const RE_DUMP = /^(watchdog_)?stackdump_(fsdp_)?(\d+)(?:_rank(\d+)_(\d+))?(?:[_.-][^/]*)?\.txt$/;
const RE_MEM = /^mem_.+\.(txt|json)$/;

/** Log files we tail, best first (the runbooks' names: contract §1.21). */
export const LOG_NAMES = [
  'train.log',
  'training.log',
  'stdout.log',
  'training_combined.log',
  'training_phase2.log',
  'training_phase1.log',
  'production_single_gpu.log',
  'production.log',
  'live_training.log',
  'smoke.log',
];
// scripts/run_3090_next_smoke.sh: phase0_1step_<mode>.log, phase1_200step_<mode>.log
const RE_PHASE_LOG = /^phase\d+_\d+steps?(?:_[A-Za-z0-9.-]+)?\.log$/;

/** a log name we tail, or -1: its rank among the names (lower is better) */
export function logRank(name: string): number {
  const i = LOG_NAMES.indexOf(name);
  if (i >= 0) return i;
  return RE_PHASE_LOG.test(name) ? LOG_NAMES.length : -1;
}

/**
 * Which of the logs present to tail: the one written last (a runbook writes training_phase1.log,
 * then training_phase2.log, then training_combined.log; train_m7c_prime.sh smoke.log then
 * train.log); within 5 s of each other, the better name.
 */
export function pickLog<T extends { name: string; mtimeMs: number }>(entries: T[]): T | null {
  let best: T | null = null;
  for (const e of entries) {
    const r = logRank(e.name);
    if (r < 0) continue;
    if (!best) best = e;
    else if (e.mtimeMs > best.mtimeMs + 5000) best = e;
    else if (Math.abs(e.mtimeMs - best.mtimeMs) <= 5000 && r < logRank(best.name)) best = e;
  }
  return best;
}

/** The artifacts with a fixed name. */
const BY_NAME: Readonly<Record<string, FileKind>> = {
  'heartbeat.jsonl': { kind: 'heartbeat-smoke' },
  'training.csv': { kind: 'training-csv', fsdp: false },
  'training_fsdp.csv': { kind: 'training-csv', fsdp: true },
  'val.csv': { kind: 'val-csv' },
  'k_stats.csv': { kind: 'k-stats', fsdp: false },
  'k_stats_fsdp.csv': { kind: 'k-stats', fsdp: true },
  'fallback_counters.csv': { kind: 'fallback-counters', fsdp: false },
  'fallback_counters_fsdp.csv': { kind: 'fallback-counters', fsdp: true },
  'env.json': { kind: 'env-json' },
  'metrics.json': { kind: 'metrics-json', fsdp: false },
  'metrics_fsdp.json': { kind: 'metrics-json', fsdp: true },
  'opt_state_mb.txt': { kind: 'opt-state', fsdp: false },
  'opt_state_fsdp_mb.txt': { kind: 'opt-state', fsdp: true },
  '.HALT': { kind: 'halt' },
  '.anomaly_type': { kind: 'anomaly' },
  'gate_collapse_details.json': { kind: 'gate-collapse' },
  'config.yaml': { kind: 'config-yaml' },
  'config.yml': { kind: 'config-yaml' },
};

/** what classify said of a name: a run dir is listed every round, ~60 names a round, and its
 *  regexes were 4 % of the watchdog's CPU. Frozen: a kind is shared by every caller. */
const KINDS = new Map<string, FileKind>();

export function classify(name: string): FileKind {
  let k = KINDS.get(name);
  if (k === undefined) {
    if (KINDS.size >= 4096) KINDS.clear();
    KINDS.set(name, (k = Object.freeze(classifyOnce(name))));
  }
  return k;
}

function classifyOnce(name: string): FileKind {
  let m = RE_HB.exec(name);
  if (m) return { kind: 'heartbeat', rank: Number(m[1]) };
  if (Object.hasOwn(BY_NAME, name)) return { ...BY_NAME[name]! };
  m = RE_CKPT.exec(name);
  if (m) return { kind: 'checkpoint', step: Number(m[2]), fsdp: !!m[1] };
  m = RE_DUMP.exec(name);
  if (m)
    return {
      kind: 'stackdump',
      watchdog: !!m[1],
      fsdp: !!m[2],
      epoch: Number(m[3]),
      rank: m[4] !== undefined ? Number(m[4]) : null,
      pid: m[5] !== undefined ? Number(m[5]) : null,
    };
  if (RE_MEM.test(name)) return { kind: 'mem-dump' };
  if (logRank(name) >= 0) return { kind: 'log' };
  return { kind: 'other' };
}

/** Names that mark a directory as a run dir (for resolveRunDir). */
export function isRunMarker(name: string): boolean {
  return (
    RE_HB.test(name) ||
    name === 'training.csv' ||
    name === 'training_fsdp.csv' ||
    name === 'heartbeat.jsonl' ||
    name === 'tb'
  );
}
