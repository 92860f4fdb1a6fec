// Alert delivery from the headless watchdog: webhooks (--notify URL, a JSON POST that Slack and
// Discord take as it is), a command of the operator's (--notify-cmd, the alert as JSON on stdin) and
// a dead-man ping (--deadman URL). Another surface of the one judgement: the watchdog hands every
// pass's Evaluation (src/checks) and Observation (./observe.ts) here; nothing here judges the run.
//
// - One message per alert raised at or above the level (default: critical), naming the state's why
//   and the rank; one "cleared" message when it clears, or when the run ends with it outstanding.
//   GROUP_MIN or more per-rank alerts of one rule in one pass are one message (64 ranks, one page).
//   The same alert is not raised again within the cooldown (default 10 min); one that rises in
//   severity is.
// - Delivery never blocks the watch loop and never ends it: each target has its own bounded queue
//   (oldest dropped past QUEUE_MAX), a failed send is retried with backoff (1 s, doubling, capped at
//   60 s) until it is delivered or an hour old; an HTTP 4xx other than 408/429 is not retried. Every
//   outcome is one `notify` decision line; stderr gets "notify: N undelivered, last error …" on change.
// - The dead-man URL is pinged only after a pass that could observe the run (observedWhy): it stops,
//   on purpose, when the watchdog goes blind, so the operator's monitor fires (nvrx-watch's rule).
// - A webhook URL is a secret: only its scheme and host are ever printed (redactUrl); error text is
//   scrubbed of it (Redactor). A command is named by its program only.
import { spawn } from 'node:child_process';
import { basename } from 'node:path';
import type { Alert, Culprit, Evaluation, Severity } from '../checks/index.js';
import { sanitize } from '../sanitize.js';
import type { Observation } from './observe.js';

const LEVELS: Record<Severity, number> = { info: 0, warning: 1, critical: 2 };
const ENDED = new Set(['FINISHED', 'HALTED', 'EXITED']);
/** messages held per target; past it the oldest is dropped (and counted) */
export const QUEUE_MAX = 50;
const BACKOFF_FIRST_MS = 1000;
const BACKOFF_MAX_MS = 60_000;
/** a message not delivered within this long is given up (counted as dropped) */
const GIVE_UP_MS = 3_600_000;
const HTTP_TIMEOUT_MS = 10_000;
const TEXT_MAX = 1900; // Discord's content limit is 2000

// ---------------------------------------------------------------------------------------------
// secrets

/** scheme + host of a URL (a webhook's path, query and userinfo are its secret); a bad URL: a placeholder */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/…`;
  } catch {
    return '[unparsable URL]';
  }
}

/** a --notify or --deadman value: an http(s) URL, or why not — in words that never repeat the value */
export function checkUrl(flag: string, url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${flag} needs an http:// or https:// URL (the value given does not parse as a URL; not shown, a webhook URL is a secret)`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return `${flag} needs an http:// or https:// URL, got a ${u.protocol.replace(/:$/, '')}: URL`;
  return null;
}

/** Removes every secret URL (whole, and its path/query/userinfo on their own) from a text. */
export class Redactor {
  private readonly pieces: [string, string][] = [];
  constructor(urls: string[]) {
    for (const url of urls) {
      const shown = redactUrl(url);
      const add = (s: string) => {
        if (s.length >= 4) this.pieces.push([s, shown]);
      };
      add(url);
      try {
        const u = new URL(url);
        add(u.href);
        add(u.pathname + u.search);
        if (u.pathname.length > 1) add(u.pathname);
        add(u.search);
        add(u.username);
        add(u.password);
        add(decodeURIComponent(u.pathname));
      } catch {
        /* the whole string was added */
      }
    }
    // longest first, so a URL is replaced whole before its path is
    this.pieces.sort((a, b) => b[0].length - a[0].length);
  }
  scrub(s: string): string {
    let out = s;
    for (const [secret, shown] of this.pieces) out = out.split(secret).join(shown);
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// what is sent

export interface AlertMessage {
  /** Slack's field */
  text: string;
  /** Discord's field */
  content: string;
  source: 'nsa-top';
  event: 'raised' | 'cleared';
  run: string;
  runDir: string;
  state: string;
  why: string;
  level: Severity;
  alert: string;
  rule: string;
  message: string;
  detail: string;
  rank: number | null;
  /** a message for GROUP_MIN or more per-rank alerts of one rule raised (or cleared) in one pass: their ranks and ids */
  ranks?: number[];
  alerts?: string[];
  /** the rank the evidence names while the run does not advance (the judge's culprit), for an alert of no rank */
  culprit: { rank: number; why: string } | null;
  step: number | null;
  host: string;
  /** ISO time of this message; `since`: when the condition was first seen */
  time: string;
  since: string;
}

export interface RunContext {
  run: string;
  runDir: string;
  host: string;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The message for one alert raised or cleared, from the judge's own words (alert title and detail, the state's why). */
export function alertMessage(
  kind: 'raised' | 'cleared',
  al: Alert,
  state: { state: string; why: string },
  ctx: RunContext,
  now: number,
  more: { verdicts?: string[]; culprit?: Culprit | null; clearedWhy?: string } = {},
): AlertMessage {
  const { verdicts = [], clearedWhy } = more;
  const rank = al.rank ?? null;
  const culprit = rank === null && more.culprit ? { rank: more.culprit.rank, why: more.culprit.why } : null;
  const who = rank !== null ? ` rank ${rank}` : '';
  const head =
    kind === 'raised'
      ? `[nsa-top] ${al.severity.toUpperCase()}${who} — ${al.title}`
      : `[nsa-top] cleared${who} — ${al.title}${clearedWhy ? ` (${clearedWhy})` : ''}`;
  const lines = [
    head,
    `run ${ctx.run} on ${ctx.host}: ${state.state} — ${state.why}`,
    ...(kind === 'raised'
      ? [
          al.detail,
          ...(culprit ? [`culprit: rank ${culprit.rank} — ${culprit.why}`] : []),
          ...verdicts.map((v) => `verdict: ${v}`),
        ]
      : []),
    `alert ${al.id}${al.step !== undefined ? ` · step ${al.step}` : ''}`,
  ];
  const text = clip(lines.map(sanitize).join('\n'), TEXT_MAX);
  return {
    text,
    content: text,
    source: 'nsa-top',
    event: kind,
    run: ctx.run,
    runDir: ctx.runDir,
    state: state.state,
    why: state.why,
    level: al.severity,
    alert: al.id,
    rule: al.rule,
    message: al.title,
    detail: al.detail,
    rank,
    culprit,
    step: al.step ?? null,
    host: ctx.host,
    time: new Date(now).toISOString(),
    since: new Date(al.since).toISOString(),
  };
}

/** this many per-rank alerts of one rule and severity in one pass go out as one message (64 ranks stalled: one, not 64) */
export const GROUP_MIN = 3;

/** The pass's alerts as messages: one each, except GROUP_MIN or more per-rank alerts of one rule and severity, together. */
export function groupAlerts(alerts: Alert[]): Alert[][] {
  const groups = new Map<string, Alert[]>();
  const out: Alert[][] = [];
  for (const al of alerts) {
    if (al.rank === undefined) {
      out.push([al]);
      continue;
    }
    const key = `${al.rule}\0${al.severity}`;
    const g = groups.get(key);
    if (g) g.push(al);
    else {
      const ng = [al];
      groups.set(key, ng);
      out.push(ng);
    }
  }
  return out.flatMap((g) => (g.length >= GROUP_MIN || g.length === 1 ? [g] : g.map((a) => [a])));
}

const rankList = (ranks: number[]) =>
  ranks.length <= 12 ? ranks.join(', ') : `${ranks.slice(0, 10).join(', ')} … ${ranks[ranks.length - 1]}`;

/** One message for alerts (one, or a group from groupAlerts). */
export function messageOf(
  kind: 'raised' | 'cleared',
  group: Alert[],
  state: { state: string; why: string },
  ctx: RunContext,
  now: number,
  more: { verdicts?: string[]; culprit?: Culprit | null; clearedWhy?: string } = {},
): AlertMessage {
  const first = group[0]!;
  if (group.length === 1) return alertMessage(kind, first, state, ctx, now, more);
  const ranks = group.map((a) => a.rank!).sort((a, b) => a - b);
  const m = alertMessage(kind, { ...first, rank: undefined }, state, ctx, now, more);
  const who = `${ranks.length} ranks (${rankList(ranks)})`;
  const head =
    kind === 'raised'
      ? `[nsa-top] ${first.severity.toUpperCase()} ${who} — ${first.rule}, e.g. ${first.title}`
      : `[nsa-top] cleared ${who} — ${first.rule}, e.g. ${first.title}${more.clearedWhy ? ` (${more.clearedWhy})` : ''}`;
  const lines = m.text.split('\n');
  lines[0] = sanitize(head);
  lines[lines.length - 1] = sanitize(`alerts ${group.map((a) => a.id).join(', ')}`);
  const text = clip(lines.join('\n'), TEXT_MAX);
  return {
    ...m,
    text,
    content: text,
    alert: `${first.rule}:${ranks.length} ranks`,
    ranks,
    alerts: group.map((a) => a.id),
    culprit: more.culprit && kind === 'raised' ? { rank: more.culprit.rank, why: more.culprit.why } : null,
    since: new Date(Math.min(...group.map((a) => a.since))).toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// when to send: pure

interface Sent {
  kind: 'raised' | 'cleared';
  level: Severity;
  raisedAt: number;
  /** the pass that raised it */
  pass: number;
  alert: Alert;
  /** a raise held by the cooldown was said (once per hold) */
  heldSaid?: boolean;
}

/**
 * Which alerts to raise and clear this pass, with the cooldown: level-triggered, so an alert that
 * comes back within the cooldown of its last raise is raised once the cooldown is over if it still
 * holds; one that rises in severity is raised at once.
 */
export class AlertNotices {
  private readonly sent = new Map<string, Sent>();
  private passes = 0;
  constructor(
    private readonly level: Severity,
    private readonly cooldownMs: number,
  ) {}

  /** `blind`: the pass could not observe the run — an alert gone from it is not known to have cleared */
  pass(alerts: Alert[], now: number, blind = false): { raise: Alert[]; clear: Alert[]; held: Alert[] } {
    const pass = ++this.passes;
    const raise: Alert[] = [];
    const clear: Alert[] = [];
    const held: Alert[] = [];
    const seen = new Set<string>();
    for (const al of alerts) {
      if (LEVELS[al.severity] < LEVELS[this.level]) continue;
      seen.add(al.id);
      const prev = this.sent.get(al.id);
      if (prev?.kind === 'raised') {
        if (LEVELS[al.severity] > LEVELS[prev.level] && al.clearing === undefined) {
          raise.push(al);
          this.sent.set(al.id, { kind: 'raised', level: al.severity, raisedAt: now, pass, alert: al });
        } else prev.alert = al;
        continue;
      }
      // a condition already clearing (the judge's hysteresis) is not raised anew
      if (al.clearing !== undefined) continue;
      if (prev && now - prev.raisedAt < this.cooldownMs) {
        if (!prev.heldSaid) held.push(al);
        prev.heldSaid = true;
        continue;
      }
      raise.push(al);
      this.sent.set(al.id, { kind: 'raised', level: al.severity, raisedAt: now, pass, alert: al });
    }
    for (const [id, s] of this.sent)
      if (s.kind === 'raised' && !seen.has(id) && !blind) {
        s.kind = 'cleared';
        clear.push(s.alert);
      }
    return { raise, clear, held };
  }

  /**
   * The run ended: the alerts raised in an earlier pass and not cleared are cleared now. One raised
   * by the very pass that saw the end (a crash, say) tells how it ended: it is not "cleared" too.
   */
  ended(): Alert[] {
    const out: Alert[] = [];
    for (const s of this.sent.values())
      if (s.kind === 'raised') {
        s.kind = 'cleared';
        if (s.pass < this.passes) out.push(s.alert);
      }
    return out;
  }
}

/**
 * Whether a pass could observe the run (null), or why not — the dead-man rule: the run's files were
 * read this pass, and a rank of the run was proven (pid + start time), or its launcher, or its
 * supervisor proven alive, or the run is known to have ended. A pass that read nothing, or could not read the
 * process table, or proved no process, is blind: no ping.
 */
export function observedWhy(obs: Observation, ev: Evaluation, unjudgeable: string | null): string | null {
  if (!obs.fresh) return obs.errors[0] ?? 'the run could not be read this pass';
  if (unjudgeable) return unjudgeable;
  const table = obs.errors.find((e) => e.startsWith('process table'));
  if (table) return table;
  if (ENDED.has(ev.runState)) return null;
  const live = (st: string) => st !== 'Z' && st !== 'X';
  if (obs.procs?.ranks.some((r) => live(r.proc.state))) return null;
  // a booting or stopping run: its launcher (torchrun, the reference launcher) is a process of the run too
  if (obs.procs?.launcher && live(obs.procs.launcher.state)) return null;
  const sup = obs.supervisor;
  if (sup && !sup.supervisorGone && ['starting', 'running', 'backoff', 'stopping'].includes(sup.state)) return null;
  return `no rank of the run proven alive and the run not known to have ended (${ev.runState})`;
}

// ---------------------------------------------------------------------------------------------
// delivery

class DeliveryError extends Error {
  constructor(
    message: string,
    readonly retry: boolean,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }
}

interface Target {
  /** what may be printed: scheme + host, or `command 'prog'` */
  label: string;
  send(body: string): Promise<void>;
}

/** fetch takes no userinfo in a URL: it goes as Basic authorization instead */
function splitCredentials(url: string): { url: string; headers: Record<string, string> } {
  const u = new URL(url);
  if (!u.username && !u.password) return { url, headers: {} };
  const auth = Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64');
  u.username = '';
  u.password = '';
  return { url: u.href, headers: { authorization: `Basic ${auth}` } };
}

function webhookTarget(raw: string): Target {
  const { url, headers } = splitCredentials(raw);
  return {
    label: redactUrl(raw),
    async send(body) {
      let res: Response;
      try {
        res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'nsa-top', ...headers },
          body,
          signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
          redirect: 'error',
        });
      } catch (e) {
        const err = e as Error & { cause?: { code?: string; message?: string } };
        const why =
          err.name === 'TimeoutError'
            ? `no answer in ${HTTP_TIMEOUT_MS / 1000}s`
            : (err.cause?.code ?? err.cause?.message ?? err.message);
        throw new DeliveryError(why, true);
      }
      await res.arrayBuffer().catch(() => null);
      if (res.ok) return;
      const retry = res.status >= 500 || res.status === 408 || res.status === 429;
      const ra = Number(res.headers.get('retry-after'));
      throw new DeliveryError(`HTTP ${res.status}`, retry, Number.isFinite(ra) && ra > 0 ? ra * 1000 : null);
    },
  };
}

/** CMD runs under /bin/sh -c as the operator wrote it; the alert is only ever on stdin, never in argv or the command line */
function commandTarget(cmd: string, timeoutMs: number): Target {
  // named by its program: never by a leading VAR=value (a token, say) nor its arguments
  const prog = basename(
    cmd
      .trim()
      .split(/\s+/)
      .find((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w)) ?? 'sh',
  );
  return {
    label: `command '${sanitize(prog)}'`,
    send(body) {
      return new Promise<void>((resolve, reject) => {
        const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'ignore', 'pipe'], detached: true });
        let err = '';
        let done = false;
        const finish = (e: DeliveryError | null) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          if (e) reject(e);
          else resolve();
        };
        const timer = setTimeout(() => {
          // its own process group: the command and anything it started
          try {
            if (child.pid) process.kill(-child.pid, 'SIGKILL');
          } catch {
            /* gone */
          }
          finish(new DeliveryError(`no exit in ${timeoutMs / 1000}s (killed)`, true));
        }, timeoutMs);
        child.stderr!.on('data', (b: Buffer) => {
          if (err.length < 2000) err += b.toString('utf8');
        });
        child.on('error', (e) => finish(new DeliveryError(e.message, true)));
        child.on('close', (code, signal) => {
          if (code === 0) finish(null);
          else {
            const last = clip(err.trim().split('\n').pop() ?? '', 200);
            finish(
              new DeliveryError(`${signal ? `signal ${signal}` : `exit ${code}`}${last ? `: ${last}` : ''}`, true),
            );
          }
        });
        child.stdin!.on('error', () => {}); // a command that does not read its stdin
        child.stdin!.end(body + '\n');
      });
    },
  };
}

interface Queued {
  msg: AlertMessage;
  body: string;
  attempts: number;
  nextAt: number;
  queuedAt: number;
  lastError: string | null;
}

export interface NotifyLog {
  /** one decision line (the watchdog's log: stdout and .nsa-top/watchdog.jsonl) */
  (event: string, fields: Record<string, unknown>): Promise<void> | void;
}

class Outbox {
  private readonly q: Queued[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private closed = false;
  dropped = 0;
  delivered = 0;
  lastError: string | null = null;

  constructor(
    readonly target: Target,
    private readonly n: Notifier,
  ) {}

  /** messages whose last attempt failed, waiting for their retry */
  get undelivered(): number {
    return this.q.filter((m) => m.lastError !== null).length;
  }
  get pending(): number {
    return this.q.length;
  }

  push(msg: AlertMessage): void {
    if (this.q.length >= QUEUE_MAX) {
      const old = this.q.shift()!;
      this.dropped++;
      this.n.record(this, old, 'dropped', `queue full (${QUEUE_MAX}): the oldest message was given up`).catch(() => {});
    }
    const now = Date.now();
    this.q.push({ msg, body: JSON.stringify(msg), attempts: 0, nextAt: now, queuedAt: now, lastError: null });
    this.kick();
  }

  private kick(): void {
    if (this.sending || this.closed || this.q.length === 0) return;
    if (this.timer) clearTimeout(this.timer);
    const wait = Math.max(0, this.q[0]!.nextAt - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      // never a rejection out of here: delivery must not end the watch
      this.sending = this.sendHead()
        .catch(() => {})
        .finally(() => {
          this.sending = null;
          this.kick();
        });
    }, wait);
  }

  private async sendHead(): Promise<void> {
    const m = this.q[0];
    if (!m) return;
    m.attempts++;
    try {
      await this.target.send(m.body);
      this.q.shift();
      this.delivered++;
      await this.n.record(this, m, 'delivered', null);
    } catch (e) {
      const d = e instanceof DeliveryError ? e : new DeliveryError((e as Error).message, true);
      const why = this.n.scrub(sanitize(d.message));
      m.lastError = why;
      this.lastError = `${this.target.label}: ${why}`;
      if (!d.retry || Date.now() - m.queuedAt > GIVE_UP_MS) {
        this.q.shift();
        this.dropped++;
        await this.n.record(this, m, d.retry ? 'dropped' : 'rejected', why);
        return;
      }
      const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (m.attempts - 1));
      m.nextAt = Date.now() + Math.max(backoff, Math.min(BACKOFF_MAX_MS * 5, d.retryAfterMs ?? 0));
      await this.n.record(this, m, 'failed', why, m.nextAt - Date.now());
    }
  }

  /** sends what is due until the deadline, then stops (the watchdog is exiting) */
  async close(deadline: number): Promise<void> {
    while (this.q.length > 0 && Date.now() < deadline) {
      if (this.sending) await this.sending;
      else if (this.q[0]!.nextAt <= Date.now()) {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.sending = this.sendHead()
          .catch(() => {})
          .finally(() => {
            this.sending = null;
          });
      } else await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now()))));
    }
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

export interface NotifyOptions {
  urls: string[];
  cmd: string | null;
  deadman: string | null;
  /** the same alert is not raised again within this many seconds */
  cooldownS: number;
  /** the lowest severity that is sent */
  level: Severity;
  /** the dead-man URL is pinged at most this often (s) */
  deadmanEveryS: number;
  cmdTimeoutS: number;
  ctx: RunContext;
  log: NotifyLog;
  /** one human line (stderr) */
  warn: (line: string) => void;
}

export class Notifier {
  private readonly notices: AlertNotices;
  private readonly boxes: Outbox[];
  private readonly redactor: Redactor;
  private statusLine = '';
  private lastPing = 0;
  private pinging: Promise<void> | null = null;
  private deadmanState: string | null = null;
  pings = 0;

  constructor(private readonly o: NotifyOptions) {
    this.notices = new AlertNotices(o.level, o.cooldownS * 1000);
    this.redactor = new Redactor([...o.urls, ...(o.deadman ? [o.deadman] : [])]);
    this.boxes = [
      ...o.urls.map((u) => new Outbox(webhookTarget(u), this)),
      ...(o.cmd ? [new Outbox(commandTarget(o.cmd, o.cmdTimeoutS * 1000), this)] : []),
    ];
  }

  get sending(): boolean {
    return this.boxes.length > 0;
  }

  /** what the watchdog's start line says about delivery (no secret) */
  describe(): Record<string, unknown> {
    return {
      targets: this.boxes.map((b) => b.target.label),
      deadman: this.o.deadman ? redactUrl(this.o.deadman) : null,
      level: this.o.level,
      cooldownS: this.o.cooldownS,
    };
  }

  scrub(s: string): string {
    return this.redactor.scrub(s);
  }

  /** One pass of the watchdog: the alerts to send, and the dead-man ping when the pass observed the run. */
  async pass(
    ev: Evaluation,
    state: { state: string; why: string },
    blind: string | null,
    now = Date.now(),
  ): Promise<void> {
    if (this.boxes.length > 0) {
      const { raise, clear, held } = this.notices.pass(ev.alerts, now, blind !== null);
      const more = { verdicts: ev.verdicts.map((v) => v.text), culprit: ev.culprit };
      for (const g of groupAlerts(raise)) this.enqueue(messageOf('raised', g, state, this.o.ctx, now, more));
      for (const g of groupAlerts(clear)) this.enqueue(messageOf('cleared', g, state, this.o.ctx, now));
      for (const al of held)
        await this.o.log('notify', {
          alert: al.id,
          kind: 'raised',
          result: 'held',
          why: `raised again within the cooldown (${this.o.cooldownS}s) of its last message: not re-sent`,
        });
    }
    await this.deadmanPass(blind, now);
  }

  /** a pass that failed before judging (the look threw): blind, for the dead-man rule */
  async blind(why: string, now = Date.now()): Promise<void> {
    await this.deadmanPass(why, now);
  }

  /** the run ended: every alert raised and not cleared gets its "cleared" message, naming the end */
  runEnded(state: { state: string; why: string }, now = Date.now()): void {
    if (this.boxes.length === 0) return;
    for (const g of groupAlerts(this.notices.ended()))
      this.enqueue(messageOf('cleared', g, state, this.o.ctx, now, { clearedWhy: `the run ended: ${state.state}` }));
  }

  private enqueue(msg: AlertMessage): void {
    for (const b of this.boxes) b.push(msg);
  }

  /** called by an Outbox on each outcome: one decision line, and the status line on stderr when it changes */
  async record(
    box: Outbox,
    m: Queued,
    result: 'delivered' | 'failed' | 'dropped' | 'rejected',
    why: string | null,
    retryInMs?: number,
  ): Promise<void> {
    const undelivered = this.boxes.reduce((n, b) => n + b.undelivered, 0);
    const dropped = this.boxes.reduce((n, b) => n + b.dropped, 0);
    await this.o.log('notify', {
      target: box.target.label,
      alert: m.msg.alert,
      kind: m.msg.event,
      result,
      attempt: m.attempts,
      ...(why !== null ? { error: why } : {}),
      ...(retryInMs !== undefined ? { retryInS: Math.round(retryInMs / 100) / 10 } : {}),
      undelivered,
      dropped,
    });
    const lastError =
      this.boxes.map((b) => (b.undelivered > 0 || b.dropped > 0 ? b.lastError : null)).find((e) => e !== null) ?? null;
    const line =
      undelivered + dropped === 0
        ? this.statusLine
          ? 'notify: all delivered'
          : ''
        : `notify: ${undelivered} undelivered${dropped ? `, ${dropped} given up` : ''}${lastError ? `, last error ${lastError}` : ''}`;
    if (line && line !== this.statusLine) {
      this.statusLine = line;
      this.o.warn(line);
    }
  }

  /** the numbers for the watchdog's exit line */
  summary(): Record<string, unknown> {
    return {
      delivered: this.boxes.reduce((n, b) => n + b.delivered, 0),
      undelivered: this.boxes.reduce((n, b) => n + b.pending, 0),
      dropped: this.boxes.reduce((n, b) => n + b.dropped, 0),
      deadmanPings: this.pings,
    };
  }

  private async deadmanPass(blind: string | null, now: number): Promise<void> {
    const url = this.o.deadman;
    if (!url) return;
    if (blind !== null) {
      const key = `withheld:${blind}`;
      if (this.deadmanState !== key) {
        this.deadmanState = key;
        await this.o.log('deadman', {
          target: redactUrl(url),
          result: 'withheld',
          why: `${blind} — the watchdog could not observe the run this pass, so the dead-man ping stops`,
        });
      }
      return;
    }
    if (this.pinging || now - this.lastPing < this.o.deadmanEveryS * 1000) return;
    this.lastPing = now;
    this.pinging = (async () => {
      let result = 'ok';
      try {
        const target = splitCredentials(url);
        const res = await fetch(target.url, {
          method: 'GET',
          headers: { 'user-agent': 'nsa-top', ...target.headers },
          signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
          redirect: 'error',
        });
        await res.arrayBuffer().catch(() => null);
        if (!res.ok) result = `HTTP ${res.status}`;
        else this.pings++;
      } catch (e) {
        const err = e as Error & { cause?: { code?: string } };
        result = this.scrub(sanitize(err.name === 'TimeoutError' ? 'no answer' : (err.cause?.code ?? err.message)));
      }
      const key = result === 'ok' ? 'ok' : `failed:${result}`;
      if (key !== this.deadmanState) {
        this.deadmanState = key;
        await this.o.log('deadman', {
          target: redactUrl(url),
          result: result === 'ok' ? 'pinging' : 'failed',
          ...(result === 'ok' ? {} : { error: result }),
        });
        if (result !== 'ok') this.o.warn(`deadman: ping failed, ${redactUrl(url)}: ${result}`);
      }
    })()
      .catch(() => {})
      .finally(() => {
        this.pinging = null;
      });
  }

  /** The watchdog is exiting: send what is queued for up to `ms`, then stop. */
  async close(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    await Promise.all(this.boxes.map((b) => b.close(deadline)));
    if (this.pinging) await this.pinging;
  }
}
