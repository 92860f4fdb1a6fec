// `nsa-top watchdog [RUN_DIR] [--halt] [--dump-on-stall] [--interval S] [--stall S] [--host …]`
// A headless daemon replacing the trainer's scripts/_watchdog.py with the same rules the cockpit
// shows (src/checks). Unlike the real one it: judges stalls against the run's own cadence; reads
// the last `progress` record, not the last line; keeps the FIRST anomaly in .anomaly_type (never
// overwrites nan_loss with heartbeat_stall); captures stack dumps of every rank at the moment of a
// stall, before anyone kills the evidence; and exits when the run has ended.
// Every decision is one JSON line on stdout and in <out_dir>/.nsa-top/watchdog.jsonl.
// Observe-only by default: without --halt (and with --once, always) it writes nothing into the run
// dir outside .nsa-top/ (like nvrx-watch's observe/act split).
import { jsonSafe, sanitize } from '../sanitize.js';
import { join } from 'node:path';
import { Checker, thresholdsFromEnv, type Alert, type Evaluation, type Launched } from '../checks/index.js';
import type { Host } from '../remote/host.js';
import { GpuMonitor } from '../remote/gpu.js';
import { openHost } from '../remote/index.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import type { GpuTelemetry, RunProcesses } from '../remote/types.js';
import { currentActor, dumpAll } from '../trainer/control/actions.js';
import { audited, type Outcome } from '../trainer/control/audit.js';
import { openRunModel, resolveRunDir } from '../trainer/run/rundir.js';
import { RunModel } from '../trainer/run/model.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import { NSA_DIR } from '../trainer/launch/rundirs.js';
import { appendOwn, createOwn, OwnWriteError, ReadOnlyError } from '../trainer/control/ownfiles.js';
import { CliError, orCliError } from './errors.js';
import { recordAdoption } from '../trainer/run/adopt.js';
import { alertFields, healthExit, judge, readLaunched, unjudgeable, whyNothingListed } from './judge.js';

export { launchedFromRunInfo } from '../checks/launched.js';
export { readLaunched, runProcesses } from './judge.js';

export const command = defineCommand({
  name: 'watchdog',
  positional: RUN_DIR_ARG,
  options: {
    halt: { type: 'boolean', help: 'act: .anomaly_type + .HALT on a critical anomaly (NSA_WATCH_HALT=1)' },
    'dump-on-stall': {
      type: 'boolean',
      help: `on a stall, SIGUSR1 every rank (verified pid + start time) for stack dumps
before anything else happens to them (the trainer writes stackdump_*.txt)`,
    },
    interval: {
      type: 'number',
      min: 0.05,
      value: 'S',
      help: `poll interval, s (NSA_WATCH_INTERVAL_S; default 30). A stall is still flagged
on time: the watchdog also wakes when the stall threshold would be crossed`,
    },
    stall: {
      type: 'number',
      min: 0.1,
      value: 'S',
      help: `stall floor, s (NSA_WATCH_HEARTBEAT_STALL_S; default 180); the threshold is
max(floor, 3 × the run's own heartbeat interval)`,
    },
    once: {
      type: 'boolean',
      help: `evaluate once, print the decisions, exit; observe-only (0: healthy, 1: a
critical alert, stalled or dead — the same verdict and code as \`status\`)`,
    },
    'no-gpu': { type: 'boolean', help: 'do not run nvidia-smi (GPU rules: utilisation/power hang verdicts, memory)' },
    ...HOST_OPTIONS,
  },
  about: `Watches a run with the cockpit's rules, headless (a replacement for the trainer's
scripts/_watchdog.py). Each decision is printed as one JSON line and appended to
<out_dir>/.nsa-top/watchdog.jsonl. Exits when the run has ended.

OBSERVE-ONLY BY DEFAULT: without --halt it writes nothing into the run dir outside .nsa-top/ —
anomalies are reported (stdout, .nsa-top/watchdog.jsonl), not recorded in the run. --once never
acts, whatever the other flags say.
With --halt it acts on the first critical anomaly: it writes <out_dir>/.anomaly_type (only if none
is there: the FIRST anomaly is kept; the real watchdog overwrites nan_loss with heartbeat_stall),
gate_collapse_details.json for a gate collapse, and .HALT ("halt: <anomaly>").`,
  epilog: `Decision lines (JSON, one per line; every line has ts (ms), iso and event):
  start    runDir, outDir, host, halt, dumpOnStall, thresholds, launched, gpu
  state    state (STARTING RUNNING STALLED HALTING HALTED EXITED FINISHED NO TRAINER), why, step
  alert    id, rule, severity (info|warning|critical), title, detail, since, step, rank, anomaly
  clear    id                       (the condition no longer holds)
  verdict  verdicts [{kind, rank?, text}]   (hang diagnosis while the step is frozen)
  unproven processes [{pid, rank, why}]  (named by a heartbeat or an argv, not proven ranks: never signalled)
  anomaly  type, alert, wrote (path | null), kept (the earlier anomaly left in place), why
  dump     perRank [{rank, pid, status, file?, why?}], refused [{pid, rank, why}] (named by a
           heartbeat or an argv but not proven ranks of this run: never signalled)
  halt     path, result, detail
  error    message, consecutive     (a failed look; the watch goes on)
  exit     state, why, reason, code

Thresholds: NSA_WATCH_FLATLINE_N (4), NSA_WATCH_GATE_ENTROPY_MIN (0.2),
NSA_WATCH_GATE_MAX_THRESHOLD (0.9), NSA_WATCH_GATE_COLLAPSE_N (3), NSA_WATCH_HALT_GRACE_S (60).
Exit: 0 the run ended with no anomaly; 1 an anomaly was seen or the run died; 2 bad input (a
missing, unreadable or empty run dir, a bad option or NSA_WATCH_* value).`,
});

const ENDED = new Set(['FINISHED', 'HALTED', 'EXITED']);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const a = { ...p.values, dir: p.positional, gpu: !p.values['no-gpu'] };
  const t = orCliError('watchdog', () => thresholdsFromEnv(process.env));
  if (a.stall !== undefined) t.stallFloorS = a.stall;
  if (a.interval !== undefined) t.intervalS = a.interval;
  // --once never acts: observe-only whatever the flags say
  const halt = !a.once && (a.halt || t.halt);
  const dumpOnStall = !a.once && a['dump-on-stall'];
  const host = await openHost(hostSpecOf(a));
  try {
    const dir = await resolveRunDir(host, a.dir, process.cwd());
    const dirs = await openRunModel(host, dir);
    let gpu: GpuMonitor | null = null;
    if (a.gpu) {
      gpu = new GpuMonitor(host, { intervalMs: Math.max(1000, Math.min(5000, t.intervalS * 1000)) });
      await gpu.start();
    }
    if (a.once) {
      // an unreadable or empty run is bad input for a one-shot look, as for status (exit 2)
      const snap = await dirs.model.poll();
      const bad = unjudgeable(snap, dirs.outDir);
      if (bad)
        throw new CliError(
          `watchdog: ${(Object.keys(snap.files).length === 0 && (await whyNothingListed(host, dirs.outDir))) || bad}`,
          2,
        );
    }
    if (dirs.outDirProblem) process.stderr.write(`nsa-top watchdog: ${sanitize(dirs.outDirProblem)}\n`); // run.info is input
    const wd = new Watchdog(host, dirs.runDir, dirs.outDir, {
      halt,
      dumpOnStall,
      launched: await readLaunched(host, dirs.runDir),
      thresholds: t,
      gpu,
      model: dirs.model,
    });
    try {
      return await wd.loop(a.once);
    } finally {
      gpu?.stop();
    }
  } finally {
    await host.close().catch(() => {});
  }
}

export interface WatchdogOptions {
  halt: boolean;
  dumpOnStall: boolean;
  launched?: Launched;
  thresholds: ReturnType<typeof thresholdsFromEnv>;
  /** GPU telemetry (started by the caller); null: none */
  gpu?: GpuMonitor | null;
  /** the run model to poll (openRunModel: a supervised run's log lives in its launcher dir) */
  model?: RunModel;
}

export class Watchdog {
  private readonly model: RunModel;
  private readonly checker: Checker;
  private readonly active = new Map<string, Alert>();
  private state: string | null = null;
  private firstAnomaly: string | null = null;
  private dumpedEpisode = false;
  private haltWritten = false;
  private stopping = false;
  private logRefusedSaid = false;
  private sawAnomaly = false;

  constructor(
    private readonly host: Host,
    private readonly runDir: string,
    private readonly outDir: string,
    private readonly o: WatchdogOptions,
  ) {
    this.model = o.model ?? new RunModel(host, outDir);
    this.checker = new Checker(o.thresholds);
  }

  /** one JSON line on stdout and in <out_dir>/.nsa-top/watchdog.jsonl */
  private async log(event: string, fields: Record<string, unknown>): Promise<void> {
    const ts = this.host.now();
    const line = jsonSafe(JSON.stringify({ ts, iso: new Date(ts).toISOString(), event, ...fields }));
    process.stdout.write(line + '\n');
    try {
      const done = await appendOwn(this.host, this.outDir, `${NSA_DIR}/watchdog.jsonl`, line + '\n');
      // a hard link at watchdog.jsonl (to a heartbeat, say): set aside, never written through
      if (done)
        process.stderr.write(
          `nsa-top watchdog: ${NSA_DIR}/watchdog.jsonl ${sanitize(done.why)}: ${done.setAside ? `set aside as ${sanitize(done.setAside)}; ` : ''}a fresh one started\n`,
        );
    } catch (e) {
      // read-only, or a refused path: said once, not on every line
      if (e instanceof ReadOnlyError || (e instanceof OwnWriteError && e.code !== 'ENOSPC' && e.code !== 'EIO')) {
        if (!this.logRefusedSaid)
          process.stderr.write(
            `nsa-top watchdog: not appending to ${NSA_DIR}/watchdog.jsonl: ${sanitize((e as Error).message)}\n`,
          );
        this.logRefusedSaid = true;
      } else
        process.stderr.write(
          `nsa-top watchdog: cannot append to ${NSA_DIR}/watchdog.jsonl: ${sanitize((e as Error).message)}\n`,
        );
    }
  }

  private async observe(): Promise<{
    run: RunSnapshot;
    procs: RunProcesses | null;
    gpu: GpuTelemetry | null;
    ev: Evaluation;
  }> {
    const gpu: GpuTelemetry | null = this.o.gpu ? this.o.gpu.current() : null;
    const j = await judge(this.host, this.outDir, this.model, await this.model.poll(), {
      checker: this.checker,
      gpu,
      launched: this.o.launched,
    });
    // a live run nsa-top did not start: record its launch once, for a later relaunch (src/trainer/run/adopt)
    await recordAdoption(this.host, this.outDir, j.procs, 'watchdog').catch(() => {});
    return { ...j, gpu };
  }

  async loop(once = false): Promise<number> {
    const onSig = () => {
      this.stopping = true;
    };
    process.on('SIGINT', onSig);
    process.on('SIGTERM', onSig);
    const t = this.o.thresholds;
    await this.log('start', {
      runDir: this.runDir,
      outDir: this.outDir,
      host: this.host.label,
      halt: this.o.halt,
      dumpOnStall: this.o.dumpOnStall,
      observeOnly: !this.o.halt,
      thresholds: {
        stallFloorS: t.stallFloorS,
        intervalS: t.intervalS,
        flatlineN: t.flatlineN,
        gateEntropyMin: t.gateEntropyMin,
        gateMaxThreshold: t.gateMaxThreshold,
        gateCollapseN: t.gateCollapseN,
      },
      launched: this.o.launched ?? null,
      gpu: this.o.gpu ? this.o.gpu.current().status : 'off',
    });
    try {
      let errors = 0;
      for (;;) {
        let looked;
        try {
          looked = await this.observe();
          await this.decide(looked.run, looked.procs, looked.ev);
          errors = 0;
        } catch (e) {
          // a transient failure (an SSH reconnect, a file vanishing mid-read) must not end the watch
          errors++;
          await this.log('error', { message: (e as Error).message, consecutive: errors });
          if (once) return 2;
          await this.sleepInterruptible(Math.min(t.intervalS * 1000, 1000 * errors));
          if (this.stopping) {
            await this.log('exit', { reason: 'signal', code: 0 });
            return 0;
          }
          continue;
        }
        const { run, ev } = looked;
        if (once) {
          const code = healthExit(ev);
          await this.log('exit', { state: ev.runState, why: ev.runStateWhy, reason: 'once', code });
          return code;
        }
        if (ENDED.has(ev.runState)) {
          const code = this.sawAnomaly || ev.runState === 'EXITED' ? 1 : 0;
          await this.log('exit', {
            state: ev.runState,
            why: ev.runStateWhy,
            reason: 'run ended',
            firstAnomaly: this.firstAnomaly ?? run.control.anomaly?.type ?? null,
            code,
          });
          return code;
        }
        if (this.stopping) {
          await this.log('exit', { state: ev.runState, why: ev.runStateWhy, reason: 'signal', code: 0 });
          return 0;
        }
        // Wake at the interval, or right when the stall threshold would be crossed.
        const now = this.host.now();
        let wait = t.intervalS * 1000;
        if (ev.stallDeadline !== null && ev.stallDeadline + 25 > now)
          wait = Math.min(wait, ev.stallDeadline + 25 - now);
        // no deadline yet (no heartbeat, or nothing running): look again soon, or the first
        // deadline of a run that starts now would only be seen an interval later
        else if (ev.stallDeadline === null) wait = Math.min(wait, 1000);
        await this.sleepInterruptible(Math.max(20, wait));
        if (this.stopping) {
          await this.log('exit', { state: ev.runState, why: ev.runStateWhy, reason: 'signal', code: 0 });
          return 0;
        }
      }
    } finally {
      process.off('SIGINT', onSig);
      process.off('SIGTERM', onSig);
    }
  }

  private async sleepInterruptible(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (!this.stopping && Date.now() < end) await sleep(Math.min(100, end - Date.now()));
  }

  private async decide(run: RunSnapshot, procs: RunProcesses | null, ev: Evaluation): Promise<void> {
    if (ev.runState !== this.state) {
      this.state = ev.runState;
      await this.log('state', { state: ev.runState, why: ev.runStateWhy, step: run.step });
    }
    // processes named as trainers (a heartbeat's pid, the run dir in argv) that are not proven ranks:
    // said once per change, so an operator sees why nothing was (or will be) signalled
    const unproven = (procs?.unproven ?? []).map((u) => ({ pid: u.pid, rank: u.rank, why: u.why }));
    const ukey = unproven.map((u) => `${u.pid}:${u.why}`).join('|');
    if (ukey !== this.lastUnproven) {
      this.lastUnproven = ukey;
      if (unproven.length) await this.log('unproven', { processes: unproven });
    }
    const seen = new Set<string>();
    for (const al of ev.alerts) {
      seen.add(al.id);
      const prev = this.active.get(al.id);
      if (!prev || prev.severity !== al.severity) {
        await this.log('alert', { ...alertFields(al), anomaly: al.anomaly ?? null });
      }
      this.active.set(al.id, al);
    }
    for (const id of [...this.active.keys()]) {
      if (!seen.has(id)) {
        this.active.delete(id);
        await this.log('clear', { id });
      }
    }
    if (ev.verdicts.length) {
      const key = ev.verdicts.map((v) => v.kind + (v.rank ?? '')).join(',');
      if (key !== this.lastVerdicts) await this.log('verdict', { verdicts: ev.verdicts });
      this.lastVerdicts = key;
    } else this.lastVerdicts = '';

    // act on our own rules' findings past the action threshold (a stall only past the stall floor,
    // NSA_WATCH_HEARTBEAT_STALL_S, though the state said STALLED sooner), and only on a condition that
    // holds now (not one held while it clears); an .anomaly_type someone else wrote is reported, not acted on
    const critical = ev.actOn;
    const stall = critical.find((x) => x.id === 'stall:run');
    if (!stall) this.dumpedEpisode = false;
    if (critical.length === 0) return;
    this.sawAnomaly = true;
    // 1. .anomaly_type: the first anomaly only, never overwritten (exclusive create); only when
    // acting (--halt): observe-only writes nothing into the run
    const first = critical[0]!;
    if (this.firstAnomaly === null && !this.o.halt) {
      this.firstAnomaly = first.anomaly!;
      await this.log('anomaly', {
        type: first.anomaly,
        alert: first.id,
        wrote: null,
        why: 'observe-only (no --halt): nothing written into the run',
      });
    } else if (this.firstAnomaly === null) {
      this.firstAnomaly = first.anomaly!;
      const path = join(this.outDir, '.anomaly_type');
      try {
        await createOwn(this.host, this.outDir, '.anomaly_type', `${first.anomaly}\n`);
        await this.log('anomaly', { type: first.anomaly, alert: first.id, wrote: path });
        if (first.anomaly === 'gate_collapse') await this.writeGateDetails(run);
      } catch (e) {
        const partial = e instanceof OwnWriteError && e.partial;
        const st = await this.host.stat(path).catch(() => null);
        const existing =
          e instanceof OwnWriteError && e.code !== 'EEXIST'
            ? null
            : st && !st.isFile
              ? `[not a regular file: ${st.isDir ? 'a directory' : 'a special file'}]`
              : await this.host
                  .readFile(path, 4096)
                  .then((b) => b.toString('utf8').trim())
                  .catch(() => null);
        await this.log('anomaly', {
          type: first.anomaly,
          alert: first.id,
          wrote: partial ? path : null,
          kept: existing,
          ...(partial ? { partial: true } : {}),
          why:
            existing !== null
              ? 'an earlier anomaly is recorded; it is kept'
              : partial
                ? `nsa-top's own write failed: ${(e as Error).message}`
                : (e as Error).message,
        });
      }
    }
    // 2. stack dumps of every rank at the moment of the stall, before a halt or a kill.
    if (stall && this.o.dumpOnStall && !this.dumpedEpisode) {
      this.dumpedEpisode = true;
      const ranks = (procs?.ranks ?? [])
        .filter((r) => r.proc.state !== 'Z')
        .map((r) => ({ rank: r.rank, pid: r.proc.pid, startTime: r.proc.startTime, state: r.proc.state }));
      const unproven = (procs?.unproven ?? []).map((u) => ({
        pid: u.pid,
        rank: u.rank,
        status: 'refused',
        why: u.why,
      }));
      if (ranks.length === 0)
        await this.log('dump', {
          ranks: [],
          why: 'no proven rank process of this run: nothing signalled',
          refused: unproven,
        });
      else {
        const actor = await currentActor(this.host);
        const res = await dumpAll(this.host, this.runDir, ranks, actor, { staggerMs: 1100, waitMs: 5000 });
        await this.log('dump', {
          perRank: res.perRank,
          pySpy: res.pySpy,
          ...(unproven.length ? { refused: unproven } : {}),
        });
      }
    }
    // 3. .HALT when asked.
    if (this.o.halt && !this.haltWritten) {
      this.haltWritten = true;
      const path = join(this.outDir, '.HALT');
      const actor = await currentActor(this.host);
      // the audited path: no .HALT when read-only; a log that cannot take the record does not block
      // this safety halt (failOpen): it is taken, and "NOT logged" goes to stderr and the watchdog's output
      const rec = await audited(
        this.host,
        this.runDir,
        { actor, action: 'watchdog-halt', target: { path }, requireLog: true, failOpen: true },
        async (): Promise<Outcome> => {
          try {
            await createOwn(this.host, this.outDir, '.HALT', `halt: ${first.anomaly}\n`);
            return { result: 'ok', detail: `.HALT written (halt: ${first.anomaly}) on ${first.id}: ${first.title}` };
          } catch (e) {
            const st = await this.host.stat(path).catch(() => null);
            // read only a regular file (a FIFO planted as .HALT would block the read)
            const existing =
              e instanceof OwnWriteError && e.code === 'EEXIST' && st?.isFile
                ? await this.host
                    .readFile(path, 4096)
                    .then((b) => b.toString('utf8').trim())
                    .catch(() => null)
                : null;
            if (e instanceof OwnWriteError && e.partial)
              return {
                result: 'partial',
                detail: `${e.message} — the empty .HALT is nsa-top's own (the watchdog's) and still stops the trainer at its next step`,
                target: { partial: true },
              };
            if (st && !st.isFile)
              return {
                result: 'ok',
                detail: `.HALT already present, and not a regular file (${st.isDir ? 'a directory' : 'a special file'}); left as it is`,
              };
            if (existing !== null)
              return { result: 'ok', detail: `.HALT already present (${existing}); left as it is` };
            return { result: 'failed', detail: `could not write .HALT: ${(e as Error).message}` };
          }
        },
      );
      if (rec.result === 'refused' || rec.result === 'failed' || rec.result === 'partial')
        process.stderr.write(`nsa-top watchdog: .HALT ${rec.result}: ${sanitize(rec.detail)}\n`);
      else if (rec.notLogged !== undefined)
        process.stderr.write(`nsa-top watchdog: .HALT ${rec.result}, NOT logged: ${sanitize(rec.notLogged)}\n`);
      await this.log('halt', {
        path,
        result: rec.result,
        detail: rec.detail,
        ...(rec.notLogged !== undefined ? { notLogged: rec.notLogged } : {}),
      });
    }
  }

  private lastVerdicts = '';
  private lastUnproven = '';

  /** gate_collapse_details.json, as the real watchdog writes it (WD:146-158); never overwritten */
  private async writeGateDetails(run: RunSnapshot): Promise<void> {
    const g = run.gates;
    if (!g) return;
    const details = {
      gate_entropy_mean: g.entropyMean,
      gate_max_gate: g.maxGate,
      gate_collapse_frac: g.collapseFrac,
      gate_branch_shares: g.branchShares,
      step: g.step,
    };
    try {
      await createOwn(this.host, this.outDir, 'gate_collapse_details.json', JSON.stringify(details, null, 2) + '\n');
    } catch (e) {
      if (!(e instanceof OwnWriteError && e.code === 'EEXIST'))
        await this.log('error', {
          message: `gate_collapse_details.json not written: ${(e as Error).message}`,
          consecutive: 0,
        });
    }
  }
}
