// Helpers for the reference trainer's end-to-end tests: spawn the real binary (selfCommand()),
// tiny configs, waiting on files, reading the contract files back.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfCommand } from '../../../src/self.js';

export const TINY_YAML = `model: {dim: 32, n_layers: 1, n_heads: 2, n_kv_groups: 1, d_k: 16, d_v: 16}
nsa: {l: 8, d: 4, l_sel: 8, n_sel: 2, w: 16, phi: avg}
train: {steps: 12, seq_len: 32, batch_size: 4, lr: 3.0e-3, warmup_steps: 2, log_every: 1, eval_every: 0, save_every: 0, seed: 7}
`;

export interface Tmp {
  dir: string;
  cfg: string;
  out: string;
  cleanup(): void;
}

export function tmp(): Tmp {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-ref-'));
  const cfg = join(dir, 'tiny.yaml');
  writeFileSync(cfg, TINY_YAML);
  return { dir, cfg, out: join(dir, 'run'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Proc {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

export function train(args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const [cmd, ...pre] = selfCommand();
  const child = spawn(cmd!, [...pre, 'train', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  live.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (err += b));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exit };
}

export async function trainToEnd(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000) {
  const p = train(args, env);
  const t = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const r = await p.exit;
  clearTimeout(t);
  return { ...r, stdout: p.stdout(), stderr: p.stderr() };
}

export async function waitFor<T>(
  what: string,
  fn: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    // awaited: a condition that reads asynchronously (a Promise is always truthy)
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function readLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
}

export type Rec = Record<string, unknown> & { msg: string; step: number; rank: number; pid: number };
export function heartbeats(out: string, rank: number): Rec[] {
  return readLines(join(out, `heartbeat_rank${rank}.jsonl`)).map((l) => JSON.parse(l) as Rec);
}

export function csvRows(path: string): string[][] {
  return readLines(path).map((l) => l.split(','));
}
