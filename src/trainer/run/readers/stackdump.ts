// Stack dump files: signal dumps (`stackdump_<epoch>.txt`, custom handler on SIGUSR1/SIGTERM) and
// the in-process watchdog's `watchdog_stackdump_<epoch>.txt`, FSDP `_fsdp_` variants, and the
// reference trainer's `stackdump_<epoch>_rank<R>_<pid>.txt` with a second line
// `# nsa-top-reference rank=<R> pid=<P> step=<S> phase=<phase>`. Parsed into threads and frames
// (the traceback.format_stack layout: `  File "<f>", line <n>, in <func>` + an indented code line).
import type { StackDump, StackFrame, StackThread } from '../snapshot.js';

const RE_SIGNAL = /^Signal (\d+) at (\S+)/;
const RE_WATCHDOG = /^Watchdog at (\S+?);?\s*(?:last_heartbeat=(\S+))?/;
const RE_REF = /^# nsa-top-reference\b(.*)$/;
const RE_THREAD = /^--- Thread: (.*) \(([^()]*)\) ---\s*$/;
const RE_SECTION = /^--- (.*) ---\s*$/;
const RE_FRAME = /^\s*File "(.*)", line (\d+), in (.*)$/;

export interface ParsedDump {
  header: string;
  signal: number | null;
  kind: 'signal' | 'watchdog' | null;
  rank: number | null;
  pid: number | null;
  step: number | null;
  phase: string | null;
  lastHeartbeat: number | null;
  threads: StackThread[];
  /** extra sections (GRAD TRACE, MODULE BWD TRACE): name → line count */
  sections: Record<string, number>;
  parseErrors: number;
}

const MAX_THREADS = 256;
const MAX_FRAMES = 512;

export function parseStackDump(text: string): ParsedDump {
  const lines = text.split(/\r?\n/);
  const out: ParsedDump = {
    header: '',
    signal: null,
    kind: null,
    rank: null,
    pid: null,
    step: null,
    phase: null,
    lastHeartbeat: null,
    threads: [],
    sections: {},
    parseErrors: 0,
  };
  let i = 0;
  while (i < lines.length && lines[i]!.trim() === '') i++;
  const first = lines[i] ?? '';
  out.header = first.slice(0, 300);
  let m: RegExpExecArray | null;
  if ((m = RE_SIGNAL.exec(first))) {
    out.kind = 'signal';
    out.signal = Number(m[1]);
  } else if ((m = RE_WATCHDOG.exec(first))) {
    out.kind = 'watchdog';
    const lh = m[2] !== undefined ? Number(m[2]) : NaN;
    out.lastHeartbeat = Number.isFinite(lh) ? lh : null;
  } else if (first !== '' && !RE_THREAD.test(first)) out.parseErrors++;
  if (!RE_THREAD.test(first)) i++;

  let thread: StackThread | null = null;
  let section: string | null = null;
  let lastFrame: StackFrame | null = null;
  for (; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') {
      lastFrame = null;
      continue;
    }
    if ((m = RE_REF.exec(line))) {
      for (const kv of m[1]!.trim().split(/\s+/)) {
        const eq = kv.indexOf('=');
        if (eq < 0) continue;
        const k = kv.slice(0, eq);
        const v = kv.slice(eq + 1);
        if (k === 'rank' || k === 'pid' || k === 'step') {
          const n = Number(v);
          if (Number.isInteger(n)) out[k] = n;
        } else if (k === 'phase') out.phase = v.slice(0, 100);
      }
      continue;
    }
    if ((m = RE_THREAD.exec(line))) {
      section = null;
      lastFrame = null;
      thread = { name: m[1]!, ident: m[2] || null, frames: [] };
      if (out.threads.length < MAX_THREADS) out.threads.push(thread);
      continue;
    }
    if ((m = RE_SECTION.exec(line))) {
      thread = null;
      lastFrame = null;
      section = m[1]!.slice(0, 100);
      out.sections[section] = 0;
      continue;
    }
    if (section !== null) {
      out.sections[section] = (out.sections[section] ?? 0) + 1;
      continue;
    }
    if (thread && (m = RE_FRAME.exec(line))) {
      lastFrame = { file: m[1]!, line: Number(m[2]), func: m[3]!.trim(), code: null };
      if (thread.frames.length < MAX_FRAMES) thread.frames.push(lastFrame);
      continue;
    }
    if (thread && lastFrame && lastFrame.code === null && /^\s{2,}\S/.test(line)) {
      lastFrame.code = line.trim().slice(0, 300);
      continue;
    }
    if (thread && lastFrame && /^\s{2,}\S/.test(line)) continue; // multi-line code excerpt
    out.parseErrors++;
  }
  return out;
}

export function toStackDump(
  name: string,
  path: string,
  meta: { watchdog: boolean; fsdp: boolean; epoch: number; rank: number | null; pid: number | null },
  mtimeMs: number,
  text: string,
): StackDump {
  const p = parseStackDump(text);
  return {
    name,
    path,
    kind: p.kind ?? (meta.watchdog ? 'watchdog' : 'signal'),
    fsdp: meta.fsdp,
    epoch: meta.epoch,
    mtimeMs,
    header: p.header,
    signal: p.signal,
    rank: p.rank ?? meta.rank,
    pid: p.pid ?? meta.pid,
    step: p.step,
    phase: p.phase,
    threads: p.threads,
    parseErrors: p.parseErrors,
  };
}
