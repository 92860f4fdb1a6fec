// Alert delivery's own logic (src/cockpit/notify.ts), with no process: what is sent when (cooldown,
// clear, escalation, the run's end), the message a webhook gets, the dead-man rule, URL redaction,
// and the delivery queue against an in-process HTTP server (a 4xx is not retried, the queue is
// bounded, an error names the target by scheme + host only). The live drill is notify-live.test.ts.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import type { Alert, Evaluation } from '../../src/checks/index.js';
import {
  alertMessage,
  AlertNotices,
  checkUrl,
  groupAlerts,
  messageOf,
  Notifier,
  observedWhy,
  QUEUE_MAX,
  redactUrl,
  Redactor,
} from '../../src/cockpit/notify.js';
import type { Observation } from '../../src/cockpit/observe.js';

const alert = (id: string, over: Partial<Alert> = {}): Alert => ({
  id,
  rule: id.split(':')[0]!,
  severity: 'critical',
  title: `${id} title`,
  detail: `${id} detail`,
  since: 1000,
  ...over,
});
const ctx = { run: 'run-a', runDir: '/runs/run-a', host: 'local' };

test('redactUrl shows scheme and host only; checkUrl never repeats the value', () => {
  const url = 'https://user:pw@hooks.slack.com:8443/services/T000/B000/XXXXSECRET?token=QSECRET#frag';
  assert.equal(redactUrl(url), 'https://hooks.slack.com:8443/…');
  assert.equal(redactUrl('not a url SECRET'), '[unparsable URL]');
  assert.equal(checkUrl('--notify', url), null);
  const bad = checkUrl('--notify', 'hooks.slack.com/services/SECRET')!;
  assert.match(bad, /--notify needs an http:\/\/ or https:\/\/ URL/);
  assert.doesNotMatch(bad, /SECRET/);
  assert.match(checkUrl('--deadman', 'ftp://host/SECRET')!, /got a ftp: URL/);
  assert.doesNotMatch(checkUrl('--deadman', 'ftp://host/SECRET')!, /SECRET/);
});

test('Redactor removes a URL whole, and its path, query and userinfo on their own', () => {
  const r = new Redactor(['https://u:pw0rd@hooks.example.com/services/T0/B0/XSECRET?token=QSECRET']);
  const out = r.scrub(
    'failed https://u:pw0rd@hooks.example.com/services/T0/B0/XSECRET?token=QSECRET; path /services/T0/B0/XSECRET; q ?token=QSECRET; pw pw0rd',
  );
  assert.doesNotMatch(out, /SECRET|pw0rd/);
  assert.match(out, /https:\/\/hooks\.example\.com\/…/);
});

test('AlertNotices: raised once, cleared once, held within the cooldown, raised again after it; a rise in severity is sent', () => {
  const n = new AlertNotices('warning', 60_000);
  const a = alert('stall:rank1', { rank: 1 });
  let r = n.pass([a, alert('data:synthetic', { severity: 'info' })], 0);
  assert.deepEqual(
    r.raise.map((x) => x.id),
    ['stall:rank1'],
    'info is below the level',
  );
  r = n.pass([a], 1000);
  assert.equal(r.raise.length + r.clear.length, 0, 'still in force: nothing new');
  // the judge's hysteresis: a clearing alert is still in force
  r = n.pass([{ ...a, clearing: 1500 }], 2000);
  assert.equal(r.raise.length + r.clear.length, 0);
  r = n.pass([], 2500, true);
  assert.equal(r.clear.length, 0, 'a blind pass clears nothing: gone from sight is not cleared');
  r = n.pass([], 3000);
  assert.deepEqual(
    r.clear.map((x) => x.id),
    ['stall:rank1'],
  );
  r = n.pass([], 4000);
  assert.equal(r.clear.length, 0, 'cleared once');
  // back within the cooldown of its raise: held (said once), not re-sent
  r = n.pass([a], 10_000);
  assert.deepEqual([r.raise.length, r.held.map((x) => x.id)], [0, ['stall:rank1']]);
  r = n.pass([a], 20_000);
  assert.deepEqual([r.raise.length, r.held.length], [0, 0], 'the hold is said once');
  // still in force past the cooldown: raised now
  r = n.pass([a], 61_000);
  assert.deepEqual(
    r.raise.map((x) => x.id),
    ['stall:rank1'],
  );
  // a warning that becomes critical is sent at once, cooldown or not
  const w = alert('loss:flat', { severity: 'warning' });
  n.pass([a, w], 62_000);
  r = n.pass([a, { ...w, severity: 'critical' }], 63_000);
  assert.deepEqual(
    r.raise.map((x) => `${x.id}:${x.severity}`),
    ['loss:flat:critical'],
  );
  // the run ends with both outstanding: both cleared, once; one raised by the pass that saw the end
  // (a crash) tells how it ended, and is not "cleared" as well
  n.pass([a, { ...w, severity: 'critical' }, alert('proc:exit1')], 64_000);
  assert.deepEqual(
    n
      .ended()
      .map((x) => x.id)
      .sort(),
    ['loss:flat', 'stall:rank1'],
  );
  assert.deepEqual(n.ended(), []);
  // a clearing alert never seen before is not raised
  assert.equal(new AlertNotices('info', 0).pass([{ ...a, clearing: 5 }], 10).raise.length, 0);
});

test('alertMessage: Slack text and Discord content, the structured fields, the culprit for an alert of no rank, control characters removed', () => {
  const m = alertMessage(
    'raised',
    alert('stall:run', { title: 'step frozen at 30 \x1b]2;pwned\x07for 3s', step: 30 }),
    { state: 'STALLED', why: 'all ranks silent' },
    ctx,
    Date.UTC(2026, 0, 1),
    { verdicts: ['all ranks silent'], culprit: { rank: 1, why: 'odd stack' } },
  );
  assert.equal(m.text, m.content);
  assert.match(m.text, /^\[nsa-top\] CRITICAL — step frozen at 30 for 3s/);
  assert.match(m.text, /run run-a on local: STALLED — all ranks silent/);
  assert.match(m.text, /culprit: rank 1 — odd stack/);
  assert.doesNotMatch(m.text, /\x1b|\x07/);
  assert.deepEqual(
    {
      event: m.event,
      run: m.run,
      state: m.state,
      level: m.level,
      alert: m.alert,
      rank: m.rank,
      culprit: m.culprit,
      host: m.host,
      time: m.time,
      step: m.step,
    },
    {
      event: 'raised',
      run: 'run-a',
      state: 'STALLED',
      level: 'critical',
      alert: 'stall:run',
      rank: null,
      culprit: { rank: 1, why: 'odd stack' },
      host: 'local',
      time: '2026-01-01T00:00:00.000Z',
      step: 30,
    },
  );
  const c = alertMessage('cleared', alert('stall:rank1', { rank: 1 }), { state: 'HALTED', why: 'x' }, ctx, 0, {
    clearedWhy: 'the run ended: HALTED',
  });
  assert.match(c.text, /^\[nsa-top\] cleared rank 1 — stall:rank1 title \(the run ended: HALTED\)/);
  assert.equal(c.culprit, null);
  const long = alertMessage('raised', alert('x', { detail: 'y'.repeat(5000) }), { state: 'RUNNING', why: '' }, ctx, 0);
  assert.ok(long.content.length <= 1900, 'within Discord content limit');
});

test('observedWhy: the dead-man rule (files read, and a rank proven, or the supervisor, or the run ended)', () => {
  const ev = (runState: string) => ({ runState }) as unknown as Evaluation;
  const live = { ranks: [{ rank: 0, proc: { state: 'S' } }] };
  const obs = (o: Partial<Observation>) =>
    ({ fresh: true, errors: [], procs: null, supervisor: null, ...o }) as unknown as Observation;
  assert.equal(observedWhy(obs({ procs: live as never }), ev('STALLED'), null), null, 'a stalled run is observed');
  assert.equal(observedWhy(obs({}), ev('HALTED'), null), null, 'a run known ended');
  assert.equal(
    observedWhy(obs({ supervisor: { state: 'backoff' } as never }), ev('RESTARTING'), null),
    null,
    'a restart under a live supervisor',
  );
  assert.equal(
    observedWhy(obs({ procs: { ranks: [], launcher: { state: 'S' } } as never }), ev('STARTING'), null),
    null,
    'a boot: the launcher is proven, no rank yet',
  );
  assert.match(observedWhy(obs({}), ev('NO TRAINER'), null)!, /no rank of the run proven/);
  assert.match(
    observedWhy(obs({ supervisor: { state: 'running', supervisorGone: true } as never }), ev('RUNNING'), null)!,
    /no rank/,
  );
  assert.match(
    observedWhy(obs({ procs: live as never }), ev('NO TRAINER'), 'cannot read run dir /r: EACCES')!,
    /EACCES/,
  );
  assert.match(
    observedWhy(obs({ fresh: false, errors: ['reading the run: EIO'], procs: live as never }), ev('RUNNING'), null)!,
    /EIO/,
  );
  assert.match(
    observedWhy(obs({ errors: ['process table: timed out'], procs: live as never }), ev('RUNNING'), null)!,
    /process table/,
  );
  assert.match(
    observedWhy(obs({ procs: { ranks: [{ rank: 0, proc: { state: 'Z' } }] } as never }), ev('RUNNING'), null)!,
    /no rank/,
  );
});

// --- delivery against an in-process receiver -------------------------------------------------

const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});
async function receiver(
  answer: (n: number) => number,
): Promise<{ url: string; got: { path: string; body: string; auth?: string }[] }> {
  const got: { path: string; body: string; auth?: string }[] = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (b) => (body += b));
    req.on('end', () => {
      got.push({ path: req.url!, body, auth: req.headers.authorization });
      res.statusCode = answer(got.length);
      res.end();
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, got };
}

function notifier(urls: string[], deadman: string | null = null) {
  const log: Record<string, unknown>[] = [];
  const warn: string[] = [];
  const n = new Notifier({
    urls,
    cmd: null,
    deadman,
    cooldownS: 600,
    level: 'critical',
    deadmanEveryS: 0,
    cmdTimeoutS: 5,
    ctx,
    log: (event, f) => void log.push({ event, ...f }),
    warn: (l) => void warn.push(l),
  });
  return { n, log, warn };
}
const evOf = (alerts: Alert[]) =>
  ({ alerts, verdicts: [], culprit: null, runState: 'STALLED', runStateWhy: 'w' }) as unknown as Evaluation;
const state = { state: 'STALLED', why: 'w' };

test('a webhook answering 4xx is not retried (rejected, said with scheme + host only); userinfo goes as Basic auth', async () => {
  const rx = await receiver(() => 404);
  const url = `${rx.url.replace('http://', 'http://hook:pw0rd@')}/services/T0/XSECRET?k=QSECRET`;
  const { n, log, warn } = notifier([url]);
  await n.pass(evOf([alert('stall:run')]), state, null);
  await n.close(5000);
  assert.equal(rx.got.length, 1, 'sent once, not retried');
  assert.equal(rx.got[0]!.auth, `Basic ${Buffer.from('hook:pw0rd').toString('base64')}`);
  const r = log.find((l) => l['event'] === 'notify')!;
  assert.deepEqual([r['result'], r['error'], r['dropped']], ['rejected', 'HTTP 404', 1]);
  const said = JSON.stringify(log) + warn.join('\n');
  assert.doesNotMatch(said, /SECRET|pw0rd/);
  assert.match(warn.join('\n'), /notify: 0 undelivered, 1 given up, last error http:\/\/127\.0\.0\.1:\d+\/…: HTTP 404/);
});

test('a dead webhook: the queue holds at most QUEUE_MAX messages (the oldest given up), errors name scheme + host only', async () => {
  const rx = await receiver(() => 200);
  const port = rx.url.split(':').pop();
  servers.pop()!.close(); // nothing listens there now: connection refused
  const { n, log } = notifier([`http://127.0.0.1:${port}/hook/XSECRET`]);
  const alerts = Array.from({ length: QUEUE_MAX + 5 }, (_, i) => alert(`a:${i}`));
  await n.pass(evOf(alerts), state, null);
  const dropped = log.filter((l) => l['result'] === 'dropped');
  assert.equal(dropped.length, 5);
  assert.deepEqual(
    dropped.map((l) => l['alert']),
    ['a:0', 'a:1', 'a:2', 'a:3', 'a:4'],
  );
  await n.close(300);
  const failed = log.find((l) => l['result'] === 'failed');
  assert.ok(failed, 'a failed attempt is said');
  assert.match(String(failed['error']), /ECONNREFUSED/);
  assert.doesNotMatch(JSON.stringify(log), /XSECRET/);
  assert.equal(n.summary()['undelivered'], QUEUE_MAX, 'what was not delivered is counted at exit');
});

test('the dead-man URL is pinged after an observing pass and never after a blind one', async () => {
  const rx = await receiver(() => 200);
  const { n, log } = notifier([], `${rx.url}/ping/DSECRET`);
  await n.pass(evOf([]), state, null, 1000);
  await n.close(2000);
  assert.equal(rx.got.length, 1);
  await n.pass(evOf([]), state, 'cannot read run dir /r: EACCES', 2000);
  await n.blind('the look failed', 3000);
  await n.close(500);
  assert.equal(rx.got.length, 1, 'no ping from a blind pass');
  assert.deepEqual(
    log.map((l) => `${l['event']}:${l['result']}`),
    ['deadman:pinging', 'deadman:withheld', 'deadman:withheld'],
  );
  assert.doesNotMatch(JSON.stringify(log), /DSECRET/);
});

test('three or more per-rank alerts of one rule in one pass are one message naming every rank; two stay two', () => {
  const ranks = Array.from({ length: 64 }, (_, r) =>
    alert(`stall:rank${r}`, { rule: 'heartbeat-stall', rank: r, title: `rank ${r} heartbeat silent 3s` }),
  );
  const groups = groupAlerts([alert('stall:run'), ...ranks, alert('proc:1', { rule: 'rank-state', rank: 1 })]);
  assert.deepEqual(
    groups.map((g) => g.length),
    [1, 64, 1],
  );
  const m = messageOf('raised', groups[1]!, { state: 'STALLED', why: 'w' }, ctx, 0, {
    culprit: { rank: 7, why: 'odd stack' },
  });
  assert.match(
    m.text,
    /^\[nsa-top\] CRITICAL 64 ranks \(0, 1, 2, 3, 4, 5, 6, 7, 8, 9 … 63\) — heartbeat-stall, e\.g\. rank 0/,
  );
  assert.equal(m.text, m.content);
  assert.deepEqual(
    m.ranks,
    ranks.map((a) => a.rank),
  );
  assert.equal(m.alerts!.length, 64);
  assert.equal(m.alert, 'heartbeat-stall:64 ranks');
  assert.equal(m.rank, null);
  assert.deepEqual(m.culprit, { rank: 7, why: 'odd stack' });
  const c = messageOf('cleared', groups[1]!.slice(0, 3), { state: 'HALTED', why: 'w' }, ctx, 0, {
    clearedWhy: 'the run ended: HALTED',
  });
  assert.match(
    c.text,
    /^\[nsa-top\] cleared 3 ranks \(0, 1, 2\) — heartbeat-stall, e\.g\. .*\(the run ended: HALTED\)/,
  );
  assert.deepEqual(
    groupAlerts(ranks.slice(0, 2)).map((g) => g.length),
    [1, 1],
  );
});
