// What the main loop is doing right now, for SIGUSR1 stack dumps: a small stack of activities
// (phase + the JS call site captured when it was entered). A dump shows the innermost activity's
// call chain in Python's traceback layout, like the real trainer's stackdump_<ts>.txt, plus a line
// naming rank, pid, step and phase. Dump names carry rank and pid, so ranks never overwrite each other.
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { isoMicros, nowEpoch } from './writers.js';

export type Phase =
  | 'startup'
  | 'fetch'
  | 'forward'
  | 'backward'
  | 'allreduce-wait'
  | 'optimizer'
  | 'checkpoint'
  | 'eval'
  | 'injected-hang'
  | 'logging'
  | 'idle';

interface Activity {
  phase: Phase;
  /** constructed at enter(); V8 formats the frames lazily, only if a dump asks */
  site: Error;
}

export class ActivityStack {
  private stack: Activity[] = [];
  step = 0;

  enter(phase: Phase): void {
    this.stack.push({ phase, site: new Error(phase) });
  }
  exit(): void {
    this.stack.pop();
  }
  /** runs fn inside a phase (sync) */
  run<T>(phase: Phase, fn: () => T): T {
    this.enter(phase);
    try {
      return fn();
    } finally {
      this.exit();
    }
  }
  async runAsync<T>(phase: Phase, fn: () => Promise<T>): Promise<T> {
    this.enter(phase);
    try {
      return await fn();
    } finally {
      this.exit();
    }
  }
  get phase(): Phase {
    return this.stack.at(-1)?.phase ?? 'idle';
  }
  get innermost(): Error | null {
    return this.stack.at(-1)?.site ?? null;
  }
}

interface Frame {
  file: string;
  line: number;
  func: string;
}

/** Parses V8 "    at fn (file:line:col)" lines, innermost first. */
export function parseV8Stack(stack: string): Frame[] {
  const out: Frame[] = [];
  for (const raw of stack.split('\n').slice(1)) {
    const line = raw.trim();
    if (!line.startsWith('at ')) continue;
    let rest = line.slice(3);
    let func = '<module>';
    let loc = rest;
    const paren = /^(.*?) \((.*)\)$/.exec(rest);
    if (paren) {
      func = paren[1]!;
      loc = paren[2]!;
    }
    rest = loc.replace(/^async /, '').replace(/^file:\/\//, '');
    const m = /^(.*):(\d+):(\d+)$/.exec(rest);
    if (!m) continue;
    func = func.replace(/^async /, '').replace(/^new /, '');
    out.push({ file: m[1]!, line: Number(m[2]), func });
  }
  return out;
}

const sourceCache = new Map<string, string[] | null>();
function codeLine(file: string, line: number): string | null {
  let lines = sourceCache.get(file);
  if (lines === undefined) {
    try {
      lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : null;
    } catch {
      lines = null;
    }
    sourceCache.set(file, lines);
  }
  const l = lines?.[line - 1]?.trim();
  // bundled one-liners are useless as "code lines"
  return l && l.length <= 200 ? l : null;
}

export function formatFrames(site: Error | null): string {
  if (!site?.stack) return '  File "<unknown>", line 0, in <main loop>\n';
  const frames = parseV8Stack(site.stack)
    .filter((f) => !/^ActivityStack\./.test(f.func))
    .filter((f) => !f.file.startsWith('node:'))
    .reverse(); // Python prints the outermost call first
  let s = '';
  for (const f of frames) {
    s += `  File "${f.file}", line ${f.line}, in ${f.func}\n`;
    const code = codeLine(f.file, f.line);
    if (code) s += `    ${code}\n`;
  }
  return s;
}

/** Writes stackdump_<epoch>_rank<R>_<pid>[_n].txt; returns its path. Never overwrites. */
export function writeStackDump(
  dir: string,
  rank: number,
  activity: ActivityStack,
  signalNumber = 10,
  now = nowEpoch(),
): string {
  return writeDump(dir, 'stackdump', `Signal ${signalNumber} at ${isoMicros(now)}`, rank, activity, now);
}

/**
 * The in-process watchdog's dump, like the real trainer's watchdog_stackdump_<epoch>.txt (first line
 * `Watchdog at <iso>Z; last_heartbeat=<ts>`), named per rank and pid so ranks never collide.
 */
export function writeWatchdogDump(
  dir: string,
  rank: number,
  activity: ActivityStack,
  lastHeartbeat: number,
  now = nowEpoch(),
): string {
  return writeDump(
    dir,
    'watchdog_stackdump',
    `Watchdog at ${isoMicros(now)}; last_heartbeat=${lastHeartbeat}`,
    rank,
    activity,
    now,
  );
}

function writeDump(
  dir: string,
  prefix: string,
  firstLine: string,
  rank: number,
  activity: ActivityStack,
  now: number,
): string {
  const epoch = Math.floor(now);
  const body =
    `${firstLine}\n` +
    `# nsa-top-reference rank=${rank} pid=${process.pid} step=${activity.step} phase=${activity.phase}\n` +
    `\n--- Thread: MainThread (${process.pid}) ---\n` +
    formatFrames(activity.innermost);
  for (let n = 0; n < 1000; n++) {
    const name = `${prefix}_${epoch}_rank${rank}_${process.pid}${n === 0 ? '' : `_${n}`}.txt`;
    const path = join(dir, name);
    let fd: number;
    try {
      fd = openSync(path, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw err;
    }
    try {
      writeSync(fd, body);
    } finally {
      closeSync(fd);
    }
    return path;
  }
  throw new Error('could not find a free dump name');
}
