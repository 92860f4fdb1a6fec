// Real child processes for control tests: they answer SIGUSR1 with a stack dump named like the
// real trainer's (stackdump_<epoch>.txt, no rank), exit 130 on SIGINT, and say when they are ready.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { Host } from '../../../src/remote/host.js';
import { readProc } from '../../../src/remote/procs.js';

const CHILD = `
const fs = require('fs');
const dir = process.env.DUMP_DIR;
const delay = Number(process.env.DUMP_DELAY_MS || 0);
process.on('SIGUSR1', () => setTimeout(() => {
  const tag = process.env.DUMP_RANK ? '_rank' + process.env.DUMP_RANK + '_' + process.pid : '';
  const name = dir + '/stackdump_' + Math.floor(Date.now() / 1000) + tag + '.txt';
  fs.writeFileSync(name, 'Signal 10 at ' + new Date().toISOString().replace('Z', '') + 'Z\\n--- Thread: MainThread (1) ---\\n  pid ' + process.pid + '\\n');
}, delay));
process.on('SIGINT', () => process.exit(130));
setInterval(() => {}, 1000);
// like the real trainer: its boot heartbeat, written once its handlers are installed, names its pid
if (process.env.HB_RANK)
  fs.appendFileSync(dir + '/heartbeat_rank' + process.env.HB_RANK + '.jsonl', JSON.stringify({ ts: Date.now() / 1000, pid: process.pid, rank: Number(process.env.HB_RANK), step: 0, msg: 'boot', phase: 'start' }) + '\\n');
process.stdout.write('ready\\n');
`;

/**
 * A temp dir that is a run dir as far as nsa-top's writes go (src/trainer/control/ownfiles.ts writes only
 * into a directory that holds a run): it carries an (empty) train.log.
 */
export function tempDir(tag: string): string {
  const d = made(mkdtempSync(join(tmpdir(), `nsa-top-${tag}-`)));
  writeFileSync(join(d, 'train.log'), '');
  return d;
}

// The temp dirs these helpers made go when the test file's process ends (a full run left ~60 behind).
const dirs: string[] = [];
function made(d: string): string {
  if (dirs.length === 0)
    process.on('exit', () => {
      for (const x of dirs) rmSync(x, { recursive: true, force: true });
    });
  dirs.push(d);
  return d;
}

export interface Kid {
  child: ChildProcess;
  pid: number;
  startTime: string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

// The kids are shaped like nsa-top's reference ranks (`node …/nsa-top.js train --rank-worker` with
// RANK and NSA_TOP_RUN_DIR in their environment): control only signals processes that prove they
// are ranks of the run.
let kidScript: string | null = null;
function kidScriptPath(): string {
  if (!kidScript) {
    const d = made(mkdtempSync(join(tmpdir(), 'nsa-top-kid-')));
    kidScript = join(d, 'nsa-top.js');
    writeFileSync(kidScript, CHILD);
  }
  return kidScript;
}

const kidsPerDir = new Map<string, number>();

/**
 * A reference-shaped rank of the run in `dir`: it writes its boot record into
 * heartbeat_rank{N}.jsonl (N: DUMP_RANK, else one file per kid of the dir) — the record that
 * proves it a rank of the run — unless `env.HB_RANK` is '' (no record: its environment only).
 */
export async function startKid(
  host: Host,
  dir: string,
  argv0?: string,
  env: Record<string, string> = {},
): Promise<Kid> {
  const n = kidsPerDir.get(dir) ?? 0;
  kidsPerDir.set(dir, n + 1);
  const hb = env.HB_RANK ?? env.DUMP_RANK ?? String(n);
  const { HB_RANK: _omit, ...rest } = { ...process.env, HB_RANK: undefined } as Record<string, string | undefined>;
  void _omit;
  const child = spawn(process.execPath, [kidScriptPath(), 'train', '--rank-worker'], {
    argv0,
    env: {
      ...rest,
      DUMP_DIR: dir,
      RANK: env.DUMP_RANK ?? '0',
      NSA_TOP_RUN_DIR: dir,
      ...env,
      ...(hb === '' ? {} : { HB_RANK: hb }),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on('exit', (code, signal) => r({ code, signal })),
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', () => reject(new Error('child exited early')));
  });
  const info = await readProc(host, child.pid!);
  if (!info) throw new Error('child not visible in /proc');
  return { child, pid: child.pid!, startTime: info.startTime, exited };
}

export function killKids(kids: Kid[]): void {
  for (const k of kids) {
    try {
      process.kill(k.pid, 'SIGCONT');
    } catch {
      /* gone */
    }
    if (k.child.exitCode === null && k.child.signalCode === null) k.child.kill('SIGKILL');
  }
}

/** A checkpoint in the reference format's framing: payload | u32 CRC | "NSACKEND". */
export function nsaCheckpoint(payload: Buffer): Buffer {
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(payload) >>> 0);
  return Buffer.concat([payload, crc, Buffer.from('NSACKEND')]);
}
