// The watchdog: the cockpit without a screen. Each round it takes the one observation every surface
// takes (./observe.ts), judges it with the same Checker, and writes each decision as one JSON line on
// stdout and in <out_dir>/.nsa-top/watchdog.jsonl. Observe-only unless asked to act (--halt,
// --dump-on-stall); a looping watchdog (not --once) on the training box also takes over a halt
// request whose carrier died, as a live cockpit does. `nsa-top watchdog` (src/commands) parses and prints.
import { basename, join } from 'node:path';
import {
  alertFields,
  Checker,
  healthExit,
  stragglerFields,
  thresholdsFromEnv,
  unjudgeable,
  type Alert,
  type Evaluation,
} from '../checks/index.js';
import type { Host } from '../remote/host.js';
import type { RunProcesses } from '../remote/types.js';
import { jsonSafe, sanitize } from '../sanitize.js';
import { currentActor, dumpAll, rankTarget, saveSettled } from '../trainer/control/actions.js';
import { audited, type Outcome } from '../trainer/control/audit.js';
import { appendOwn, createOwn, OwnWriteError, ReadOnlyError } from '../trainer/control/ownfiles.js';
import type { Actor } from '../trainer/control/types.js';
import { NSA_DIR, type RunDirs } from '../trainer/run/rundirs.js';
import type { RunModel } from '../trainer/run/model.js';
import type { RunSnapshot } from '../trainer/run/snapshot.js';
import { Notifier, observedWhy, type NotifyOptions } from './notify.js';
import type { MetricsExporter } from './metrics-server.js';
import { Observer, type GpuSource, type Judged, type Observation } from './observe.js';
import { PeekedCadence } from './peekcadence.js';
import { provenChanged } from './rankpeek.js';
import { RankRefresher } from './rankrefresh.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import type { NodeHosts } from '../trainer/control/nodes.js';

const ENDED = new Set(['FINISHED', 'HALTED', 'EXITED']);

export interface WatchdogOptions {
  halt: boolean;
  dumpOnStall: boolean;
  thresholds: ReturnType<typeof thresholdsFromEnv>;
  /** GPU telemetry (started by the caller: a GpuMonitor, or every node's merged); null: none */
  gpu?: GpuSource | null;
  /** the run model to poll (openRunModel: a supervised run's log lives in its launcher dir) */
  model?: RunModel;
  /**
   * who takes over a halt request whose carrier died (a looping watchdog on the training box);
   * null or absent: never (--once, read-only)
   */
  takeOverAs?: Actor | null;
  readOnly?: boolean;
  /** alert delivery (--notify, --notify-cmd, --deadman; ./notify.ts): its run context and log are the watchdog's */
  notify?: Omit<NotifyOptions, 'ctx' | 'log' | 'warn'> | null;
  /** the Prometheus surface (--metrics-listen / --metrics-file): handed each round's look, started by the caller */
  exporter?: MetricsExporter | null;
  /** the run's journal (src/journal): handed each round's look; its status goes in the start line */
  journal?: { status: string; look(looked: Judged): Promise<void> } | null;
  /**
   * a multi-node run (--node): every node's ranks merged into the one observation (a node that does
   * not answer makes the run STALE "node B unreachable"), and each rank's dump signal sent on its own
   * node (`hosts`)
   */
  nodes?: { procs: NodeProcesses; hosts: NodeHosts } | null;
}

/** how long an exiting watchdog keeps delivering what is queued (its last "cleared" messages) */
const NOTIFY_FLUSH_MS = 10_000;
/** a scrape brings the next round forward when it is due within this share of an interval */
const SCRAPE_EARLY = 1 / 3;
/** how late past its interval a round may wait for the scrape expected to bring it (a tenth of an
 *  interval, 100 ms at most) */
const scrapeLate = (intervalMs: number) => Math.min(100, intervalMs / 10);
/**
 * Clears a timer that is not due yet without a wake at the time it was due: node keeps one system
 * timer, set for the earliest of its timers, and neither a clear nor a later timer moves it back,
 * so a cleared timer still woke the process when it would have fired (~1 ms of CPU, run cold). A
 * 1 ms timer set now is the earliest: it fires while the process is awake anyway, and node then
 * sets the system timer for the earliest timer left.
 */
function rearmAfterClear(timer: ReturnType<typeof setTimeout>): void {
  clearTimeout(timer);
  setTimeout(() => {}, 1);
}
/** the longest a scrape waits for the round it brought forward (a slow look over SSH): then the last */
const SCRAPE_WAIT_MS = 2000;

export class Watchdog {
  private readonly observer: Observer;
  private readonly checker: Checker;
  private readonly active = new Map<string, Alert>();
  private state: string | null = null;
  private firstAnomaly: string | null = null;
  private dumpedEpisode = false;
  /** ranks whose process ended after this watchdog's SIGUSR1: the run did not finish by itself */
  private endedByDump: string[] = [];

  /** The run's state as logged: a run whose rank ended after our own dump signal has not FINISHED
   * (nor HALTED) — it is said so, never blamed on the run. */
  private stateOf(ev: Evaluation): { state: string; why: string } {
    if (this.endedByDump.length > 0 && ENDED.has(ev.runState))
      return {
        state: 'EXITED',
        why: `${this.endedByDump.join('; ')} — after this watchdog's SIGUSR1 for a stack dump, not by itself (the run said ${ev.runState}: ${ev.runStateWhy})`,
      };
    return { state: ev.runState, why: ev.runStateWhy };
  }
  private haltWritten = false;
  private stopping = false;
  private logRefusedSaid = false;
  private sawAnomaly = false;
  private lastTakeOver: unknown = null;
  private readonly runDir: string;
  private readonly outDir: string;
  private readonly notifier: Notifier | null;

  constructor(
    private readonly host: Host,
    dirs: RunDirs,
    private readonly o: WatchdogOptions,
  ) {
    this.runDir = dirs.runDir;
    this.outDir = dirs.outDir;
    this.checker = new Checker(o.thresholds);
    this.observer = new Observer(host, {
      dirs,
      model: o.model,
      gpu: o.gpu ?? null,
      adoptAs: 'watchdog',
      takeOver: o.takeOverAs ? { actor: o.takeOverAs, readOnly: o.readOnly } : null,
      // the watchdog's judge: its hysteresis holds between rounds
      checker: this.checker,
      ...(o.nodes ? { nodes: o.nodes.procs } : {}),
    });
    this.notifier = o.notify
      ? new Notifier({
          ...o.notify,
          ctx: { run: basename(this.outDir), runDir: this.outDir, host: host.label },
          log: (event, fields) => this.log(event, fields),
          warn: (line) => process.stderr.write(`nsa-top watchdog: ${sanitize(line)}\n`),
        })
      : null;
    o.exporter?.scrapesWait(() => this.freshRound());
  }

  /** a round is under way (false: the loop sleeps, or has not started) */
  private inRound = false;
  /** when the sleep in progress ends (performance.now) */
  private dueAt = 0;
  /** scrapes waiting for the round under way to be rendered */
  private roundWaiters: (() => void)[] = [];
  /** when the last scrape came, and how long after the one before it (performance.now, ms) */
  private scrapeAt: number | null = null;
  private scrapeGap = Infinity;

  /**
   * A scrape of /metrics came. When the next round is due within a third of an interval (or one is
   * under way) it runs now and the scrape is answered with it: Prometheus's scrapes then wake the
   * process for the round too, instead of waking it a second time for the same judgement a few
   * hundred milliseconds old (a wake here costs ~1 ms of CPU before any work, run cold). Null: the
   * last round is recent; answer with it.
   */
  private freshRound(): Promise<void> | null {
    const now = performance.now();
    if (this.scrapeAt !== null) this.scrapeGap = now - this.scrapeAt;
    this.scrapeAt = now;
    if (this.stopping) return null;
    if (!this.inRound) {
      const intervalMs = this.o.thresholds.intervalS * 1000;
      if (!this.wake || this.dueAt - now > intervalMs * SCRAPE_EARLY) {
        // a scrape soon after a round, from a scraper that comes about once an interval: the next
        // round waits for the next scrape (a round at most two thirds of an interval late, once;
        // never past the moment a stall would be crossed), and from then on they come together
        if (this.scrapeGap <= intervalMs * 1.1) this.moveSleep?.(now + this.scrapeGap + scrapeLate(intervalMs));
        return null;
      }
      this.inRound = true;
      this.wake();
    }
    return new Promise<void>((resolve) => {
      const cap = setTimeout(done, SCRAPE_WAIT_MS);
      function done() {
        clearTimeout(cap);
        resolve();
      }
      this.roundWaiters.push(done);
    });
  }

  /** the round's rendering is in the exporter: the scrapes that waited for it are answered */
  private roundRendered(): void {
    this.inRound = false;
    if (this.roundWaiters.length === 0) return;
    const w = this.roundWaiters;
    this.roundWaiters = [];
    for (const done of w) done();
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

  private async observe(): Promise<Observation & { ev: Evaluation }> {
    // the process table every round while anything is in view, every 15 s while all is calm; each
    // proven rank looked at in its own stat every round (refreshed for the judge on this host), and
    // the table read at once when one stopped, died or runs again (./peekcadence.ts)
    const prev = this.lastEv;
    const look = this.ranks.look(this.host, this.lastProcs);
    const changed = look ? look.changed : await provenChanged(this.host, this.lastProcs);
    const refreshed = !!look && !look.changed;
    const looked = await this.observer.judged({
      procsDue: (run) => this.procsCadence.due(run, prev, changed, refreshed),
      ...(refreshed ? { refreshProcs: (p: RunProcesses) => look.apply(p) } : {}),
    });
    this.lastEv = looked.ev;
    this.lastProcs = looked.procs;
    return looked;
  }
  private readonly procsCadence = new PeekedCadence();
  private readonly ranks = new RankRefresher();
  private lastEv: Evaluation | null = null;
  private lastProcs: RunProcesses | null = null;

  async loop(once = false): Promise<number> {
    const onSig = () => {
      this.stopping = true;
      this.wake?.();
    };
    process.on('SIGINT', onSig);
    process.on('SIGTERM', onSig);
    const t = this.o.thresholds;
    await this.log('start', {
      runDir: this.runDir,
      outDir: this.outDir,
      host: this.host.label,
      ...(this.o.nodes ? { nodes: this.o.nodes.hosts.labels } : {}),
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
      launched: (await this.observer.ready()).launched ?? null,
      gpu: this.o.gpu ? (this.o.gpu.current()?.status ?? 'off') : 'off',
      takeOver: !once && !!this.o.takeOverAs,
      ...(this.notifier ? { notify: this.notifier.describe() } : {}),
      ...(this.o.exporter ? { metrics: this.o.exporter.describe() } : {}),
      ...(this.o.journal ? { journal: this.o.journal.status } : {}),
    });
    try {
      let errors = 0;
      for (;;) {
        let looked;
        const t0 = performance.now();
        this.inRound = true;
        try {
          looked = await this.observe();
          // delivery first (queued, never awaited on the network), then the actions (a dump takes seconds)
          await this.notifier?.pass(
            looked.ev,
            this.stateOf(looked.ev),
            observedWhy(looked, looked.ev, unjudgeable(looked.run, this.outDir)),
          );
          this.o.exporter?.round(looked, performance.now() - t0);
          this.roundRendered();
          await this.o.journal?.look(looked);
          await this.decide(looked.run, looked.procs, looked.ev);
          await this.reportTakeOver(looked);
          errors = 0;
        } catch (e) {
          // a transient failure (an SSH reconnect, a file vanishing mid-read) must not end the watch
          errors++;
          this.o.exporter?.failed((e as Error).message);
          this.roundRendered();
          await this.log('error', { message: (e as Error).message, consecutive: errors });
          await this.notifier?.blind(`the look failed: ${(e as Error).message}`);
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
          const shown = this.stateOf(ev);
          const code = this.sawAnomaly || shown.state === 'EXITED' ? 1 : 0;
          if (this.notifier) {
            this.notifier.runEnded(shown);
            await this.notifier.close(NOTIFY_FLUSH_MS);
          }
          await this.log('exit', {
            state: shown.state,
            why: shown.why,
            reason: 'run ended',
            firstAnomaly: this.firstAnomaly ?? run.control.anomaly?.type ?? null,
            code,
            ...(this.notifier ? { notify: this.notifier.summary() } : {}),
          });
          return code;
        }
        if (this.stopping) {
          await this.log('exit', { state: ev.runState, why: ev.runStateWhy, reason: 'signal', code: 0 });
          return 0;
        }
        // Wake at the interval, or right when the stall threshold would be crossed.
        const now = this.host.now();
        const intervalMs = t.intervalS * 1000;
        let wait = intervalMs;
        // the latest this round's sleep may end (a scrape may move it, never past this)
        let latest = Infinity;
        // scrapes that come about once an interval run the rounds (freshRound): the timer then
        // waits a little past the interval, so that the next scrape, not the timer, wakes the
        // process (a round at most a tenth of an interval late, if it never comes)
        if (
          this.scrapeGap <= intervalMs * 1.1 &&
          this.scrapeAt !== null &&
          performance.now() - this.scrapeAt < intervalMs
        )
          wait += scrapeLate(intervalMs);
        if (ev.stallDeadline !== null && ev.stallDeadline + 25 > now) {
          wait = Math.min(wait, ev.stallDeadline + 25 - now);
          latest = performance.now() + ev.stallDeadline + 25 - now;
        }
        // no deadline yet (no heartbeat, or nothing running): look again soon, or the first
        // deadline of a run that starts now would only be seen an interval later
        else if (ev.stallDeadline === null) {
          wait = Math.min(wait, 1000);
          latest = performance.now() + 1000 + scrapeLate(intervalMs);
        }
        await this.sleepInterruptible(Math.max(20, wait), latest);
        if (this.stopping) {
          await this.log('exit', { state: ev.runState, why: ev.runStateWhy, reason: 'signal', code: 0 });
          return 0;
        }
      }
    } finally {
      this.roundRendered();
      // a take-over in flight finishes (the agent it started carries the request on)
      await this.observer.settled();
      // what is still queued gets a short last chance (a signal ends the watch at once otherwise)
      await this.notifier?.close(this.stopping ? 2000 : 0);
      process.off('SIGINT', onSig);
      process.off('SIGTERM', onSig);
    }
  }

  /** ends the sleep in progress at once (a signal, or a scrape that brings the round forward) */
  private wake: (() => void) | null = null;
  /** moves the end of the sleep in progress (a performance.now time) */
  private moveSleep: ((until: number) => void) | null = null;

  /** One timer, ended early by SIGINT/SIGTERM (onSig): waking every 100 ms to look at a flag cost the
   * idle watchdog more CPU than its sleeping (bench/watchdog-metrics.bench.ts). A scrape may move it
   * (freshRound). */
  private sleepInterruptible(ms: number, latest = Infinity): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        if (timer !== undefined) rearmAfterClear(timer);
        timer = undefined;
        this.wake = null;
        this.moveSleep = null;
        resolve();
      };
      const until = (at: number) => {
        const old = timer;
        this.dueAt = Math.min(at, latest);
        timer = setTimeout(
          () => {
            timer = undefined;
            done();
          },
          Math.max(0, this.dueAt - performance.now()),
        );
        if (old !== undefined) rearmAfterClear(old);
      };
      until(performance.now() + ms);
      this.wake = done;
      this.moveSleep = until;
    });
  }

  private async decide(run: RunSnapshot, procs: RunProcesses | null, ev: Evaluation): Promise<void> {
    if (ev.runState !== this.state) {
      this.state = ev.runState;
      const shown = this.stateOf(ev);
      await this.log('state', { state: shown.state, why: shown.why, step: run.step });
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
    await this.logStraggler(ev);

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
      const ranks = (procs?.ranks ?? []).filter((r) => r.proc.state !== 'Z').map(rankTarget);
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
        const res = await dumpAll(this.host, this.runDir, ranks, actor, {
          staggerMs: 1100,
          waitMs: 5000,
          ...(this.o.nodes ? { nodes: this.o.nodes.hosts } : {}),
        });
        for (const r of res.perRank)
          if (r.endedAfterSignal) this.endedByDump.push(`rank ${r.rank} (pid ${r.pid}) ended`);
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
            // not during a checkpoint save: it would reach the saving rank a step after the others
            const save = await saveSettled(this.host, this.outDir);
            await createOwn(this.host, this.outDir, '.HALT', `halt: ${first.anomaly}\n`);
            const after = save ? ` (after ${save.name} was saved: waited ${(save.waitedMs / 1000).toFixed(1)}s)` : '';
            return {
              result: 'ok',
              detail: `.HALT written (halt: ${first.anomaly}) on ${first.id}: ${first.title}${after}`,
            };
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

  /** a halt request taken over from its dead carrier (by this watchdog's observer): said once */
  private async reportTakeOver(obs: Observation): Promise<void> {
    const rec = obs.takeOver;
    if (!rec || rec === this.lastTakeOver) return;
    this.lastTakeOver = rec;
    await this.log('takeover', { result: rec.result, detail: rec.detail, request: rec.target['request'] ?? null });
  }

  /** Waits for a take-over in flight (it starts an agent; the watch may end meanwhile). */
  settled(): Promise<void> {
    return this.observer.settled();
  }

  private lastVerdicts = '';
  private lastStraggler = '';

  /** the straggler view (Megatron's --log-straggler min/max): once it has a full window, then on every
   *  change of the rank it names */
  private async logStraggler(ev: Evaluation): Promise<void> {
    const v = ev.straggler;
    const key = v.looks >= v.looksNeeded ? `scored:${v.straggler?.rank ?? '-'}` : '';
    if (key === this.lastStraggler) return;
    this.lastStraggler = key;
    if (key) await this.log('straggler', stragglerFields(v));
  }
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
