// Alert delivery, live: the reference trainer with hang@step=30,rank=1 under the real `nsa-top
// watchdog --stall 3` with two webhooks (one answers 500 once), a --notify-cmd and a --deadman URL,
// all received by HTTP servers in this test process on loopback. One run is shared by every
// assertion: the stall reaches both webhooks naming rank 1 (the flaky one after a retry), nothing is
// re-sent within the cooldown, the command gets the JSON on stdin (a run name with $(…) in it is
// never run), the dead-man pings stop while the run dir is unreadable to the watchdog and resume
// after, the halted run's alerts are sent "cleared", and no file or output holds the webhook secrets.
// Needs `npm run build` first (the binary is what runs).
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Evaluation } from '../../src/checks/index.js';
import { Notifier } from '../../src/cockpit/notify.js';
import { withoutDacArgv, withoutDacSkip } from '../helpers/unprivileged.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const TOKEN = `nsatopSECRET${process.pid}x${Date.now() % 100000}`;
const tmp = mkdtempSync(join(tmpdir(), 'nsa-notify-live-'));
// a run name that a shell would run, were the message ever put into a command line
const runDir = join(tmp, 'run-$(touch pwned)`touch pwned2`');
const children: ChildProcess[] = [];

interface Got {
  at: number;
  path: string;
  status: number;
  body: Record<string, unknown> | null;
}
const got: Got[] = [];
let flakyCalls = 0;
const server = createServer((req: IncomingMessage, res) => {
  let raw = '';
  req.on('data', (b) => (raw += b));
  req.on('end', () => {
    const path = req.url ?? '';
    const status = path.startsWith('/flaky/') && flakyCalls++ === 0 ? 500 : 200;
    let body = null;
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : null;
    } catch {
      /* a ping has no body */
    }
    got.push({ at: Date.now(), path, status, body });
    res.statusCode = status;
    res.end();
  });
});

function rankPids(): number[] {
  const pids = new Set<number>();
  if (!existsSync(runDir)) return [];
  for (const f of readdirSync(runDir).filter((n) => /^heartbeat_rank\d+\.jsonl$/.test(n)))
    for (const m of readFileSync(join(runDir, f), 'utf8').matchAll(/"pid": ?(\d+)/g)) pids.add(Number(m[1]));
  // only processes whose environment names this very run dir
  return [...pids].filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`NSA_TOP_RUN_DIR=${runDir}`);
    } catch {
      return false;
    }
  });
}

after(() => {
  server.close();
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  if (existsSync(runDir)) chmodSync(runDir, 0o755);
  for (const pid of rankPids())
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  rmSync(tmp, { recursive: true, force: true });
});

async function waitFor<T>(what: string, f: () => T | null | undefined | false, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function run(argv: string[], env: Record<string, string> = {}) {
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: tmp,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NSA_TOP_TEST: '1', ...env },
  });
  children.push(child);
  const io = { out: '', err: '' };
  child.stdout!.on('data', (b) => (io.out += b));
  child.stderr!.on('data', (b) => (io.err += b));
  const done = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, io, done };
}

const lines = (s: string) =>
  s
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const hooks = (prefix: string) => got.filter((g) => g.path.startsWith(prefix) && g.body);
const pings = () => got.filter((g) => g.path.startsWith('/dm/')).length;

const blindSkip = withoutDacSkip;
const r = {
  hangAt: 0,
  postAt: 0,
  code: null as number | null,
  out: '',
  err: '',
  pingsWhenBlind: 0,
  pingsAfterBlindWindow: 0,
  pingsResumed: 0,
  withheld: null as Record<string, unknown> | null,
  exitAt: 0,
};

before(async () => {
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const trainer = run([
    process.execPath,
    BIN,
    'train',
    '--out',
    runDir,
    '--steps',
    '400',
    '--ranks',
    '2',
    '--log-every',
    '5',
    '--heartbeat-every',
    '--save-every',
    '50',
    '--eval-every',
    '50',
    '--inject',
    'hang@step=30,rank=1',
  ]);
  // the watchdog of a run dir that is not there yet is bad input (exit 2): it starts once the
  // trainer has made it (started together, the watchdog won that race once in a fresh-clone run)
  await waitFor('the trainer to make its run dir', () => existsSync(runDir), 30_000);
  const wdArgv = [
    process.execPath,
    BIN,
    'watchdog',
    runDir,
    '--interval',
    '0.5',
    '--stall',
    '3',
    '--no-gpu',
    '--notify',
    `${base}/flaky/${TOKEN}A`,
    '--notify',
    'env:NSA_TEST_HOOK',
    '--notify-cmd',
    `cat >> ${join(tmp, 'cmd.jsonl')}`,
    '--deadman',
    `${base}/dm/${TOKEN}D?k=${TOKEN}K`,
    '--deadman-every',
    '0.3',
  ];
  // without the DAC capabilities a chmod 000 blinds the watchdog (the trainer, root, writes on)
  const wd = run(blindSkip ? wdArgv : withoutDacArgv(wdArgv), {
    NSA_TEST_HOOK: `${base}/ok/${TOKEN}B?sig=${TOKEN}Q`,
  });
  const wdLines = () => lines(wd.io.out);
  await waitFor('the injected hang', () => /\[inject\] hang@step=30: rank 1/.test(trainer.io.err), 30_000);
  r.hangAt = Date.now();
  const post = await waitFor(
    'a POST naming the stall of rank 1',
    () => hooks('/ok/').find((g) => g.body!['event'] === 'raised' && g.body!['alert'] === 'stall:rank1'),
    // a liveness bound, not the target: the latency is printed below (the 30 s target is measured
    // there and in the drills; a loaded CI box must not turn it into a flake)
    60_000,
  ).catch((e: Error) => {
    // what did arrive, and what the watchdog said: the why of a miss
    const got = hooks('/ok/').map(
      (g) => `${String(g.body!['event'])} ${String(g.body!['alert'])} rank=${String(g.body!['rank'])}`,
    );
    throw new Error(
      `${e.message}; POSTs: ${got.join(' | ') || 'none'}; watchdog: ${wd.io.out.slice(-1500)} ${wd.io.err.slice(-500)}`,
    );
  });
  r.postAt = post.at;
  await waitFor(
    'the flaky webhook to take it after its 500',
    () => hooks('/flaky/').some((g) => g.status === 200 && g.body!['alert'] === 'stall:rank1'),
    15_000,
  );
  await waitFor('dead-man pings', () => pings() >= 2, 10_000);
  if (!blindSkip) {
    chmodSync(runDir, 0o000);
    r.withheld = await waitFor(
      'the dead-man ping withheld',
      () =>
        wdLines().find(
          (l) => l['event'] === 'deadman' && l['result'] === 'withheld' && /EACCES|cannot read/.test(String(l['why'])),
        ),
      10_000,
    );
    r.pingsWhenBlind = pings();
    // blind for 2 s: at 0.5 s passes and --deadman-every 0.3 that is four pings that must not come
    await new Promise((res) => setTimeout(res, 2000));
    r.pingsAfterBlindWindow = pings();
    chmodSync(runDir, 0o755);
    await waitFor('the pings to resume', () => pings() > r.pingsAfterBlindWindow, 10_000);
    r.pingsResumed = pings();
  }
  trainer.child.kill('SIGINT'); // a hung step never sees .HALT: stop the drill
  const timer = setTimeout(() => wd.child.kill('SIGKILL'), 30_000);
  r.code = await wd.done;
  r.exitAt = Date.now();
  clearTimeout(timer);
  await Promise.race([trainer.done, new Promise((res) => setTimeout(res, 10_000))]);
  r.out = wd.io.out;
  r.err = wd.io.err;
});

test('a hang reaches both webhooks within 30 s as one message naming the stall and rank 1, Slack/Discord-shaped', () => {
  const ms = r.postAt - r.hangAt;
  process.stdout.write(`# hang → POST: ${ms} ms\n`);
  assert.ok(ms < 30_000, `${ms} ms`);
  const m = hooks('/ok/').find((g) => g.body!['alert'] === 'stall:rank1')!.body!;
  assert.equal(m['rank'], 1);
  assert.equal(m['level'], 'critical');
  assert.equal(m['state'], 'STALLED');
  assert.equal(m['run'], 'run-$(touch pwned)`touch pwned2`');
  assert.match(String(m['text']), /^\[nsa-top\] CRITICAL rank 1 — rank 1 heartbeat silent/);
  assert.match(String(m['text']), /STALLED — /, "the state's why");
  assert.equal(m['content'], m['text']);
  assert.ok(typeof m['time'] === 'string' && typeof m['host'] === 'string' && typeof m['message'] === 'string');
});

test('none re-sent within the cooldown: each alert raised once per webhook, then cleared once when the halted run ended', () => {
  for (const prefix of ['/ok/', '/flaky/']) {
    const delivered = hooks(prefix).filter((g) => g.status === 200);
    const raised = delivered.filter((g) => g.body!['event'] === 'raised').map((g) => String(g.body!['alert']));
    assert.deepEqual([...new Set(raised)].sort(), raised.sort(), `${prefix}: ${raised.join(', ')}`);
    assert.ok(raised.includes('stall:rank1') && raised.includes('stall:run'), raised.join(', '));
    const cleared = delivered.filter((g) => g.body!['event'] === 'cleared');
    assert.deepEqual(
      cleared.map((g) => String(g.body!['alert'])).sort(),
      raised.sort(),
      'every alert raised is cleared, once',
    );
    const c = cleared.find((g) => g.body!['alert'] === 'stall:rank1')!;
    assert.match(String(c.body!['text']), /^\[nsa-top\] cleared rank 1 — .*\(the run ended: HALTED\)/);
    assert.equal(c.body!['state'], 'HALTED');
    assert.ok(c.at <= r.exitAt, 'delivered before the watchdog exits');
  }
  assert.equal(r.code, 1, 'the watchdog saw an anomaly');
  const exit = lines(r.out).find((l) => l['event'] === 'exit')!;
  assert.equal((exit['notify'] as Record<string, number>)['undelivered'], 0);
});

test('a webhook answering 500 gets the message after a retry, and the failure is shown', () => {
  const flaky = hooks('/flaky/');
  assert.equal(flaky[0]!.status, 500);
  const again = flaky.find((g, i) => i > 0 && g.body!['alert'] === flaky[0]!.body!['alert'])!;
  assert.equal(again.status, 200);
  assert.ok(again.at - flaky[0]!.at >= 900, 'after the backoff');
  const ls = lines(r.out).filter((l) => l['event'] === 'notify' && String(l['target']).startsWith('http'));
  assert.ok(ls.some((l) => l['result'] === 'failed' && l['error'] === 'HTTP 500' && l['attempt'] === 1));
  assert.ok(ls.some((l) => l['result'] === 'delivered' && l['attempt'] === 2));
  assert.match(r.err, /notify: 1 undelivered, last error http:\/\/127\.0\.0\.1:\d+\/…: HTTP 500/);
  assert.match(r.err, /notify: all delivered/);
});

test('--notify-cmd gets each message as JSON on stdin; nothing of the alert is ever run by a shell', () => {
  const sent = readFileSync(join(tmp, 'cmd.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const m = sent.find((x) => x['alert'] === 'stall:rank1' && x['event'] === 'raised')!;
  assert.equal(m['rank'], 1);
  assert.ok(sent.some((x) => x['alert'] === 'stall:rank1' && x['event'] === 'cleared'));
  assert.ok(!existsSync(join(tmp, 'pwned')) && !existsSync(join(tmp, 'pwned2')), 'the run name was not run');
});

test(
  '--deadman: pinged while the watchdog observes, withheld while the run dir is unreadable to it, pinged again after',
  {
    skip: blindSkip || false,
  },
  () => {
    assert.ok(r.pingsWhenBlind >= 2);
    assert.ok(
      r.pingsAfterBlindWindow <= r.pingsWhenBlind,
      `${r.pingsAfterBlindWindow - r.pingsWhenBlind} pings while blind`,
    );
    assert.ok(r.pingsResumed > r.pingsAfterBlindWindow);
    assert.match(String(r.withheld!['why']), /the dead-man ping stops/);
    // gone from sight is not cleared: no "cleared" message while blind
    const blindFrom = Number(r.withheld!['ts']);
    assert.ok(
      !hooks('/ok/').some((g) => g.body!['event'] === 'cleared' && g.at >= blindFrom && g.at < blindFrom + 2000),
    );
  },
);

test('the webhook and dead-man secrets appear in no file the watchdog wrote and nowhere in its stdout or stderr', () => {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(tmp);
  assert.ok(files.some((f) => f.endsWith(join('.nsa-top', 'watchdog.jsonl'))));
  for (const f of files) assert.ok(!readFileSync(f).toString('latin1').includes(TOKEN), `${f} holds the secret`);
  assert.ok(!r.out.includes(TOKEN) && !r.err.includes(TOKEN));
  const start = lines(r.out).find((l) => l['event'] === 'start')!;
  const shown = `http://127.0.0.1:${(server.address() as AddressInfo).port}/…`;
  assert.deepEqual(start['notify'], {
    targets: [shown, shown, "command 'cat'"],
    deadman: shown,
    level: 'critical',
    cooldownS: 600,
  });
});

test('bad delivery flags: one line, exit 2, and the value (a secret) never repeated', () => {
  for (const [args, re] of [
    [['--notify', `hooks.example.com/${TOKEN}`], /--notify needs an http:\/\/ or https:\/\/ URL/],
    [['--deadman', `ftp://example.com/${TOKEN}`], /--deadman needs an http:\/\/ or https:\/\/ URL, got a ftp: URL/],
    [['--notify', 'env:NSA_TEST_UNSET_HOOK'], /--notify env:NSA_TEST_UNSET_HOOK: the variable is not set/],
    [['--notify', `https://example.com/${TOKEN}`, '--once'], /need the watch loop \(not --once\)/],
    [['--notify-cmd', ' '], /--notify-cmd needs a command/],
  ] as [string[], RegExp][]) {
    const p = spawnSync(process.execPath, [BIN, 'watchdog', tmp, ...args], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(p.status, 2, `${args.join(' ')}: ${p.stderr}`);
    assert.match(p.stderr, re);
    assert.equal(p.stderr.trim().split('\n').length, 1);
    assert.ok(!p.stderr.includes(TOKEN) && !p.stdout.includes(TOKEN));
  }
});

test('--notify-cmd: a command that fails is retried and said (its last stderr line); one that hangs is killed at its timeout, with what it started', async () => {
  const log: Record<string, unknown>[] = [];
  const mk = (cmd: string, timeoutS: number) =>
    new Notifier({
      urls: [],
      cmd,
      deadman: null,
      cooldownS: 600,
      level: 'critical',
      deadmanEveryS: 60,
      cmdTimeoutS: timeoutS,
      ctx: { run: 'r', runDir: '/r', host: 'local' },
      log: (event, f) => void log.push({ event, ...f }),
      warn: () => {},
    });
  const ev = {
    alerts: [{ id: 'stall:run', rule: 'stall', severity: 'critical', title: 't', detail: 'd', since: 0 }],
    verdicts: [],
    culprit: null,
  } as unknown as Evaluation;
  const st = { state: 'STALLED', why: 'w' };
  const failing = mk('PAGER_TOKEN=tok3n echo first >&2; echo "no route to pager" >&2; exit 3', 5);
  await failing.pass(ev, st, null);
  await waitFor('a failed attempt', () => log.find((l) => l['result'] === 'failed'), 10_000);
  await failing.close(0);
  assert.equal(log.find((l) => l['result'] === 'failed')!['error'], 'exit 3: no route to pager');
  assert.equal(log.find((l) => l['result'] === 'failed')!['target'], "command 'echo'");
  assert.doesNotMatch(JSON.stringify(log), /tok3n/, 'a leading VAR=value is never shown');
  const pidFile = join(tmp, 'grandchild.pid');
  const hanging = mk(`sleep 30 & echo $! > ${pidFile}; wait`, 0.5);
  const t0 = Date.now();
  await hanging.pass(ev, st, null);
  const f = await waitFor('the timeout', () => log.find((l) => l['error'] === 'no exit in 0.5s (killed)'), 10_000);
  assert.ok(Date.now() - t0 < 5000, 'killed near its timeout');
  assert.equal(f['target'], "command 'sleep'");
  await hanging.close(0);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  await waitFor(
    'the sleep it started to be gone',
    () => !existsSync(`/proc/${pid}`) || /\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')),
    5000,
  );
});
