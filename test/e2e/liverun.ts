// A live reference run for an end-to-end test: `nsa-top train` started by hand (no supervisor: one
// would escalate a stuck halt on its own), 2 ranks, a heartbeat every step, a hang injected on one
// rank — the run the hang, bundle and journal tests each drive through a stall, a dump and a halt.
// stop() SIGKILLs what is left of it by verified pid (cleanup.ts), never by name.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { killRecorded, runPids } from './cleanup.js';
import { BIN } from './pty.js';

export interface HungRunOptions {
  /** the trainer's working directory */
  cwd: string;
  /** the run dir (made here) */
  runDir: string;
  /** where the hang fires: `step=K,rank=R` */
  hang: string;
  logEvery: number;
  saveEvery: number;
  /** the trainer's environment (default: this process's) */
  env?: NodeJS.ProcessEnv;
}

export interface HungRun {
  trainer: ChildProcess;
  /** resolves once a rank has written its first heartbeat (the run dir is a run), fails after `ms` */
  firstBeat(ms?: number): Promise<void>;
  /**
   * resolves once every rank's heartbeat file has stood still for `stallMs` (the hang has fired and
   * the other rank waits on it: a stall floor that long has passed), fails after `ms`. Reading file
   * times costs nothing, where asking a CLI in a loop would start a process each time.
   */
  silent(stallMs: number, ms?: number): Promise<void>;
  /** SIGKILLs the ranks and the launcher that are still alive (recorded pid + start time) */
  stop(): void;
}

export function startHungRun(o: HungRunOptions): HungRun {
  mkdirSync(o.runDir, { recursive: true });
  const args = ['train', '--out', o.runDir, '--ranks', '2', '--steps', '400'];
  args.push('--log-every', String(o.logEvery), '--save-every', String(o.saveEvery), '--inject', `hang@${o.hang}`);
  const trainer = spawn(process.execPath, [BIN, ...args], {
    cwd: o.cwd,
    stdio: 'ignore',
    env: { ...(o.env ?? process.env), NSA_HEARTBEAT_EVERY: '1' },
  });
  return {
    trainer,
    async firstBeat(ms = 60_000) {
      const end = Date.now() + ms;
      while (!readdirSync(o.runDir).some((f) => /^heartbeat_rank\d+\.jsonl$/.test(f))) {
        if (trainer.exitCode !== null) throw new Error(`the trainer exited (${trainer.exitCode}) before a heartbeat`);
        if (Date.now() > end) throw new Error(`no heartbeat in ${o.runDir} after ${ms} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async silent(stallMs, ms = 90_000) {
      const end = Date.now() + ms;
      const quietFor = () => {
        const beats = readdirSync(o.runDir).filter((f) => /^heartbeat_rank\d+\.jsonl$/.test(f));
        if (beats.length < 2) return 0;
        return Date.now() - Math.max(...beats.map((f) => statSync(join(o.runDir, f)).mtimeMs));
      };
      while (quietFor() < stallMs) {
        if (trainer.exitCode !== null) throw new Error(`the trainer exited (${trainer.exitCode}) before the hang`);
        if (Date.now() > end) throw new Error(`the heartbeats in ${o.runDir} never stood still ${stallMs} ms`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    stop() {
      killRecorded(runPids(o.runDir));
      if (trainer.exitCode === null) trainer.kill('SIGKILL');
    },
  };
}
