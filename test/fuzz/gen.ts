// Generators of hostile run dirs and artifact lines for the fuzz suite. Seeded and reproducible:
// the same seed gives the same bytes (FUZZ_SEED=… reruns a failure). What they produce follows the
// trainer's contract (/work/shared/contract.md) and then breaks it: truncations, garbage, NaN/Inf,
// huge lines, deep JSON, headers mid-file, steps backwards, FIFOs, directories and devices named
// like artifacts, symlink loops, unreadable files, absurd world sizes and ranks, terminal escapes.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** mulberry32: small, fast, good enough to drive a fuzzer */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)]!;
  }
}

/** A fixed seed unless FUZZ_SEED says otherwise, so `npm test` is deterministic (a fuzz failure in CI is
 *  a bug that reproduces, never a flake); `FUZZ_SEED=random` (as `npm run fuzz` does) explores new inputs. */
export function seedFromEnv(): number {
  if (process.env.FUZZ_SEED === 'random') return (Date.now() % 2_000_000_000) + 1;
  const s = Number(process.env.FUZZ_SEED);
  return Number.isInteger(s) && s > 0 ? s : 20261124;
}

/** terminal escapes seen in the wild plus C0/C1 controls */
export const ESCAPES = [
  '\x1b]2;pwned\x07',
  '\x1b]52;c;cHduZWQ=\x07',
  '\x1b[2J',
  '\x1b[31m',
  '\x9b2J',
  '\x9d0;x\x9c',
  '\x1bP+q544e\x1b\\',
  '\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\',
  '\x07',
  '\x08\x08\x08',
  '\r',
  '\x00',
  '\x1b',
  '\x1b[?1049l',
  '\x1b]2;unterminated',
];

export function escapeText(r: Rng): string {
  let s = '';
  const n = r.int(1, 4);
  for (let i = 0; i < n; i++) s += r.pick(['x', 'step', 'ü', '日本', ' ', '']) + r.pick(ESCAPES);
  return s;
}

const WEIRD_NUMS = [
  'NaN',
  'Infinity',
  '-Infinity',
  '1e308',
  '-1e308',
  '1e999',
  '-0',
  '0',
  '123456789012345678901234567890',
  '5e-324',
  '"nan"',
  '"inf"',
  'null',
  'true',
  '"12"',
  '[]',
  '{}',
];

function num(r: Rng, lo = 0, hi = 10): string {
  return r.chance(0.1) ? r.pick(WEIRD_NUMS) : String(lo + r.next() * (hi - lo));
}

export function deepJson(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

/** One heartbeat line: mostly plausible records, then every way of breaking them. */
export function heartbeatLine(r: Rng, step: number, ts: number, rank: number): string {
  const k = r.next();
  if (k < 0.55) {
    const msg = r.pick(['progress', 'progress', 'beat', 'step_end']);
    return `{"ts": ${ts.toFixed(3)}, "iso": "x", "pid": ${r.int(1, 99999)}, "rank": ${rank}, "step": ${step}, "msg": "${msg}", "loss": ${num(r, 1, 9)}, "toks_per_s": ${num(r, 100, 9000)}, "gate_entropy_mean": ${num(r, 0, 1.1)}, "gate_max_gate": ${num(r)}, "gate_collapse_frac": ${num(r, 0, 1)}, "dt_fetch_s": ${num(r, 0, 2)}, "gpu_mem_reserved": ${num(r, 0, 80000)}, "gate_branch_shares": [${num(r)}, ${num(r)}, ${num(r)}]}`;
  }
  if (k < 0.6)
    return `{"ts": ${ts}, "msg": "boot", "pid": ${r.pick([r.int(1, 99999), -1, 0, 1e18])}, "rank": ${rank}, "step": 0}`;
  if (k < 0.63)
    return `{"ts": ${ts}, "msg": ${JSON.stringify(escapeText(r))}, "step": ${step}, "note": ${JSON.stringify(escapeText(r))}}`;
  if (k < 0.66) return `{"ts": ${ts}, "msg": "fineweb_loader_error", "error": ${JSON.stringify(escapeText(r))}}`;
  if (k < 0.7)
    return `{"ts": ${ts}, "msg": "progress", "step": ${step}, "x": ${deepJson(r.int(50, r.chance(0.2) ? 20000 : 500))}}`;
  if (k < 0.74) return heartbeatLine(r, step, ts, rank).slice(0, r.int(0, 80)); // truncated
  if (k < 0.78)
    return `{"ts": ${r.pick(WEIRD_NUMS)}, "msg": ${r.pick(['"progress"', '1', 'null', '"boot"'])}, "step": ${r.pick(['-1', '1.5', '1e300', '9007199254740993', String(step)])}, "rank": ${r.pick(['999999999', '-3', '0'])}}`;
  if (k < 0.82)
    return r.pick([
      '',
      'null',
      '[]',
      '"str"',
      '{',
      '}',
      '{"ts":1}',
      'garbage line',
      '\ufeff{"ts": 1, "msg": "boot"}',
      '{"ts": 1, "msg": "progress", "step": 1, "loss": NaN}',
    ]);
  if (k < 0.85) return `{"ts": ${ts}, "msg": "progress", "step": ${Math.max(0, step - r.int(1, step + 5))}, "loss": 1}`; // steps backwards
  if (k < 0.9) return Array.from({ length: r.int(1, 40) }, () => String.fromCharCode(r.int(0, 255))).join('');
  return `{"ts": ${ts}, "msg": "beat", "step": ${step}, "rank": ${rank}}`;
}

export function csvLine(r: Rng, step: number): string {
  const k = r.next();
  if (k < 0.7) return `${step},${num(r, 1, 9)},${num(r, 0, 0.001)},${num(r, 100, 9000)}`;
  if (k < 0.75) return 'step,loss,lr,toks_per_s';
  if (k < 0.8) return `${step},nan,inf,-inf`;
  if (k < 0.85) return `${r.pick(['-1', '0x10', '1e400', 'abc', '', '1.5', escapeText(r)])},1,2,3`;
  if (k < 0.9) return `${step},${num(r)}`.slice(0, r.int(0, 10));
  if (k < 0.95) return `${Math.max(0, step - r.int(1, 50))},1,2,3`;
  return Array.from({ length: r.int(1, 60) }, () => String.fromCharCode(r.int(0, 255))).join('');
}

export function envJson(r: Rng): string {
  const k = r.next();
  const env: Record<string, unknown> = {
    CONFIG: r.chance(0.3) ? `configs/${escapeText(r)}.yaml` : 'configs/train_showcase.yaml',
    NSA_PREFILL_BATCHED: r.chance(0.2) ? escapeText(r) : '1',
  };
  if (r.chance(0.4))
    env.WORLD_SIZE = r.pick(['1', '2', '8', '1000000000', '-1', '0', '1e9', 'x', 99999999999, 1e308, '65537', '65536']);
  const o: Record<string, unknown> = {
    time: 'x',
    torch: r.chance(0.2) ? null : '2.4',
    gpu_name: r.chance(0.3) ? escapeText(r) : 'NVIDIA H100',
    env,
  };
  const text = JSON.stringify(o);
  if (k < 0.7) return text;
  if (k < 0.8) return text.slice(0, r.int(0, text.length));
  if (k < 0.9) return `{"env": ${deepJson(r.int(60, 50000))}}`;
  return r.pick([
    '',
    'null',
    '[]',
    '{',
    'NaN',
    '{"env": {"WORLD_SIZE": NaN}}',
    '{"env": "x"}',
    '{"cuda_device_count": 1e308}',
  ]);
}

export function dumpText(r: Rng): string {
  const lines = ['Thread 0x00007f (most recent call first):'];
  for (let i = 0; i < r.int(0, 20); i++) {
    lines.push(
      r.chance(0.2)
        ? `  File "${escapeText(r)}", line ${r.int(-5, 99999)} in ${escapeText(r)}`
        : `  File "/x/train_showcase.py", line ${r.int(1, 900)} in ${r.pick(['main', 'step', 'all_reduce'])}`,
    );
    if (r.chance(0.1))
      lines.push(Array.from({ length: r.int(1, 200) }, () => String.fromCharCode(r.int(0, 255))).join(''));
  }
  return lines.join('\n') + (r.chance(0.8) ? '\n' : '');
}

export function logText(r: Rng): string {
  const pats = [
    () => `[train] step ${r.int(0, 1e6)} | loss ${num(r)} | lr ${num(r)} | toks/s ${num(r)}`,
    () =>
      `[ddp] process group ready | backend=nccl world_size=${r.pick(['2', '1000000000', '99999999999999999999', '0'])}`,
    () => `[train] checkpoint at step ${r.int(0, 999)} FAILED: ${escapeText(r)}`,
    () => `Traceback (most recent call last): ${escapeText(r)}`,
    () => escapeText(r),
    () => 'x'.repeat(r.int(0, 5000)),
  ];
  return Array.from({ length: r.int(0, 30) }, () => r.pick(pats)()).join('\n') + '\n';
}

export function configYaml(r: Rng): string {
  const k = r.next();
  if (k < 0.5)
    return `model:\n  dim: ${num(r, 1, 4096)}\n  n_layers: ${num(r, 1, 64)}\n  n_heads: ${num(r, 1, 64)}\ntrain:\n  steps: ${r.pick(['200', '-1', '1e308', 'x', '99999999999999'])}\n  seq_len: ${num(r, 1, 8192)}\n  batch_size: ${num(r, 1, 64)}\n`;
  if (k < 0.7) return '- '.repeat(r.int(10, 3000)) + 'x\n';
  if (k < 0.8) return `${'['.repeat(r.int(10, 5000))}`;
  if (k < 0.9) return `a: &a [*a]\nb: *a\n${escapeText(r)}: 1\n`;
  return Array.from({ length: r.int(0, 300) }, () => String.fromCharCode(r.int(0, 255))).join('');
}

export type Special = 'fifo' | 'dir' | 'loop' | 'dangling' | 'devzero' | 'unreadable';

export interface GenOptions {
  /** allow lines over 1 MiB (costly; the process tier uses them now and then) */
  huge?: boolean;
  /** lines per line file at most */
  maxLines?: number;
}

/** Writes one hostile run dir at `dir`; returns what it holds (for failure messages). */
export function writeRunDir(r: Rng, dir: string, o: GenOptions = {}): string[] {
  mkdirSync(dir, { recursive: true });
  const made: string[] = [];
  const maxLines = o.maxLines ?? 60;
  const put = (name: string, content: string | Buffer) => {
    writeFileSync(join(dir, name), content);
    made.push(name);
  };
  const ranks = r.chance(0.7) ? r.int(1, 3) : r.int(1, 8);
  const t0 = 1_790_000_000 + r.int(0, 5_000_000);
  for (let rank = 0; rank < ranks; rank++) {
    if (r.chance(0.15) && rank > 0) continue;
    let step = 0;
    const lines: string[] = [];
    for (let i = 0; i < r.int(0, maxLines); i++) {
      if (r.chance(0.8)) step++;
      lines.push(heartbeatLine(r, step, t0 + i * r.pick([0.5, 1, 2, 2001, -3]), rank));
    }
    let text = lines.join('\n') + (r.chance(0.8) ? '\n' : '');
    if (o.huge && r.chance(0.05)) text += `{"ts": ${t0}, "msg": "progress", "x": "${'y'.repeat(1_100_000)}"}\n`;
    put(`heartbeat_rank${rank}.jsonl`, text);
  }
  if (r.chance(0.1))
    put(
      `heartbeat_rank${r.pick([999999999, 65536, 4294967296, 123456789012])}.jsonl`,
      `{"ts": ${t0}, "msg": "boot", "rank": 999999999}\n`,
    );
  if (r.chance(0.1)) put('heartbeat.jsonl', heartbeatLine(r, 1, t0, 0) + '\n');
  if (r.chance(0.8)) {
    let step = 0;
    const rows: string[] = [];
    for (let i = 0; i < r.int(0, maxLines); i++) rows.push(csvLine(r, r.chance(0.9) ? ++step : step));
    put(r.chance(0.9) ? 'training.csv' : 'training_fsdp.csv', rows.join('\n') + (r.chance(0.8) ? '\n' : ''));
  }
  if (r.chance(0.3))
    put(
      'val.csv',
      Array.from({ length: r.int(0, 10) }, (_, i) =>
        r.chance(0.8) ? `${i * 10},${num(r)},${num(r)}` : csvLine(r, i),
      ).join('\n') + '\n',
    );
  if (r.chance(0.3)) put('k_stats.csv', `step,k_mean,k_max,rows,pct_at_max\n${csvLine(r, 1)},1\n`);
  if (r.chance(0.3)) put('fallback_counters.csv', `${r.chance(0.5) ? 'step,total_fallbacks\n' : ''}${csvLine(r, 1)}\n`);
  if (r.chance(0.8)) put('env.json', envJson(r));
  if (r.chance(0.4))
    put(
      'metrics.json',
      r.chance(0.7)
        ? JSON.stringify({
            device: r.chance(0.3) ? escapeText(r) : 'cuda',
            dtype: 'bf16',
            steps: r.pick([200, -1, 1e308, 'x']),
            loss_first: r.pick([5.5, 'NaN', null]),
            loss_last: 2,
          })
        : envJson(r),
    );
  if (r.chance(0.2)) put('opt_state_mb.txt', r.pick(['1.5', 'nan', 'inf', '', 'x', '1e308', escapeText(r)]));
  if (r.chance(0.2)) put('gate_collapse_details.json', r.chance(0.5) ? '{"layer0": 1}' : envJson(r));
  if (r.chance(0.2)) put('.HALT', r.chance(0.5) ? `halt: ${escapeText(r)}` : '');
  if (r.chance(0.2)) put('.anomaly_type', r.chance(0.5) ? escapeText(r) : 'nan_loss\n');
  if (r.chance(0.5)) put('config.yaml', configYaml(r));
  if (r.chance(0.6)) put(r.pick(['train.log', 'training.log', 'stdout.log']), logText(r));
  for (let i = 0; i < (r.chance(0.4) ? r.int(1, 4) : 0); i++) {
    const epoch = r.pick([t0 + i, 0, 99999999999, -1]);
    const name = r.pick([
      `stackdump_${epoch}.txt`,
      `watchdog_stackdump_${epoch}.txt`,
      `stackdump_${epoch}_rank${r.pick([0, 1, 999999999, 65535])}_${r.int(1, 99999)}.txt`,
      `stackdump_${epoch}_\x1b]2;x\x07.txt`,
      `stackdump_${epoch}_${escapeText(r).replace(/[/\x00]/g, '')}.txt`,
    ]);
    try {
      put(name, dumpText(r));
    } catch {
      /* a name the file system refuses */
    }
  }
  if (r.chance(0.3))
    put(
      r.pick(['checkpoint_step20.pt', 'checkpoint_step99999999999999999999.pt', 'checkpoint_fsdp_step1.pt']),
      Buffer.alloc(r.int(0, 100)),
    );
  if (r.chance(0.1))
    put('run.info', r.pick([`out_dir: ${escapeText(r)}\n`, 'out_dir: ../../../../\n', 'garbage', deepJson(1000)]));
  if (r.chance(0.1)) {
    mkdirSync(join(dir, '.nsa-top'), { recursive: true });
    put(
      '.nsa-top/actions.jsonl',
      `{"ts": 1, "action": ${JSON.stringify(escapeText(r))}, "detail": ${JSON.stringify(escapeText(r))}}\n${deepJson(200)}\ngarbage\n`,
    );
  }
  // special files named like artifacts
  const specials: Special[] = ['fifo', 'dir', 'loop', 'dangling', 'devzero', 'unreadable'];
  for (let i = 0; i < (r.chance(0.35) ? r.int(1, 3) : 0); i++) {
    const name = r.pick([
      'training.csv',
      'env.json',
      'run.info',
      '.HALT',
      'heartbeat_rank0.jsonl',
      'heartbeat_rank1.jsonl',
      'stackdump_1790000000.txt',
      'train.log',
      'metrics.json',
      '.anomaly_type',
      'config.yaml',
      'val.csv',
      'opt_state_mb.txt',
      'tb',
    ]);
    const kind = r.pick(specials);
    makeSpecial(dir, name, kind);
    made.push(`${name} (${kind})`);
  }
  return made;
}

export function makeSpecial(dir: string, name: string, kind: Special): void {
  const p = join(dir, name);
  // in process, not `rm -rf` (a process per special file, hundreds a run); a link is removed, not followed
  rmSync(p, { recursive: true, force: true });
  switch (kind) {
    case 'fifo':
      execFileSync('mkfifo', [p]);
      break;
    case 'dir':
      mkdirSync(p);
      break;
    case 'loop':
      symlinkSync(`${name}.loop`, p);
      symlinkSync(name, `${p}.loop`);
      break;
    case 'dangling':
      symlinkSync('/nonexistent/nsa-top-fuzz', p);
      break;
    case 'devzero':
      symlinkSync('/dev/zero', p);
      break;
    case 'unreadable':
      writeFileSync(p, '{"ts": 1, "msg": "boot"}\n');
      chmodSync(p, 0);
      break;
  }
}
