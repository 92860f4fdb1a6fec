// Tests start real trainers: stop every process a test started, by verified pid, never by name.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

function startTime(pid: number): string | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Pids of a run this test launched: its supervisor, the trainer launcher and the ranks (heartbeat pids). */
export function runPids(runDir: string): { pid: number; startTime: string | null }[] {
  const pids = new Set<number>();
  try {
    const st = JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')) as {
      supervisor?: { pid: number };
      child?: { pid: number };
    };
    if (st.supervisor?.pid) pids.add(st.supervisor.pid);
    if (st.child?.pid) pids.add(st.child.pid);
  } catch {
    /* unsupervised */
  }
  if (existsSync(runDir))
    for (const f of readdirSync(runDir)) {
      if (!/^heartbeat_rank\d+\.jsonl$/.test(f)) continue;
      for (const line of readFileSync(join(runDir, f), 'utf8').split('\n').slice(-5)) {
        try {
          const pid = (JSON.parse(line) as { pid?: number }).pid;
          if (pid) pids.add(pid);
        } catch {
          /* partial line */
        }
      }
    }
  return [...pids].map((pid) => ({ pid, startTime: startTime(pid) }));
}

/** pids as killRecorded wants them: each with its start time now (a pid gone already is left out) */
export function recordPids(pids: number[]): { pid: number; startTime: string | null }[] {
  return pids.map((pid) => ({ pid, startTime: startTime(pid) })).filter((r) => r.startTime !== null);
}

/** SIGKILL what is still alive of the pids recorded at start (same start time = same process). */
export function killRecorded(recorded: { pid: number; startTime: string | null }[]): void {
  for (const r of recorded) {
    if (!r.startTime || startTime(r.pid) !== r.startTime) continue;
    try {
      process.kill(r.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
