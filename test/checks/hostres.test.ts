// The host's resources judged: RAM that runs out escalates warning → critical in one alert with a
// time-to-exhaustion estimate, the ranks' own RSS growth folded into it (one alert per cause); the
// run dir's disk filling; and the parsers of /proc and df that feed them. Pure: no process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Checker, type Alert } from '../../src/checks/index.js';
import { roughDur } from '../../src/checks/rules/hostres.js';
import {
  cpuPctBetween,
  hostStatsFrom,
  parseCpuLine,
  parseDfP,
  parseLoadavg,
  parseMeminfo,
  type HostStats,
} from '../../src/remote/hoststats.js';
import { liveRun, proc, procs } from './helpers.js';

const T0 = 1_700_000_000_000;

function stats(at: number, availMiB: number, o: Partial<HostStats> = {}): HostStats {
  return {
    at,
    memTotalMiB: 24 * 1024,
    memAvailMiB: availMiB,
    swapTotalMiB: 0,
    swapFreeMiB: 0,
    load: [1, 1, 1],
    cpuPct: 50,
    disks: [{ path: '/runs/x', role: 'run dir', mount: '/', totalMiB: 100_000, availMiB: 50_000 }],
    errors: [],
    ...o,
  };
}

const hostMem = (as: Alert[]) => as.filter((a) => a.rule === 'host-memory');

test('host RAM falling 20 MiB/s on a 24 GiB host: warning first, then critical with "runs out in ~Nm", one alert throughout', () => {
  const c = new Checker();
  const seen: { s: number; sev: string; title: string }[] = [];
  // 6.3 GiB left at the start, falling 20 MiB/s (two ranks leaking 10 MiB/s each): out in ~5m
  let avail = 6.3 * 1024 + 2 * 3600 * 20; // start far enough out that the warning comes first
  for (let s = 0; s <= 3 * 3600; s += 5) {
    const at = T0 + s * 1000;
    const rss = 400_000 + s * 10 * 1024;
    const ev = c.evaluate({
      now: at,
      run: liveRun({ step: s + 1, t: at }),
      procs: procs([proc(0, 'R', { rssKiB: rss }), proc(1, 'R', { rssKiB: rss })]),
      gpu: null,
      hostStats: stats(at, avail),
    });
    const hm = hostMem(ev.alerts);
    assert.ok(hm.length <= 1, `one host-memory alert at most (t=${s}s): ${hm.map((a) => a.title).join(' | ')}`);
    // one alert per cause: the ranks' RSS growth is named inside it, never alerted beside it
    if (hm.length)
      assert.ok(
        !ev.alerts.some((a) => a.rule === 'memory-growth' && a.id.includes('process RSS')),
        `rank RSS growth folded into host-mem at t=${s}s`,
      );
    if (hm[0]) seen.push({ s, sev: hm[0].severity, title: hm[0].title });
    avail -= 20 * 5;
    if (avail <= 0) break;
  }
  const firstWarn = seen.find((x) => x.sev === 'warning');
  const firstCrit = seen.find((x) => x.sev === 'critical');
  assert.ok(firstWarn, 'a warning came first');
  assert.ok(firstCrit, 'it became critical');
  assert.ok(firstWarn.s < firstCrit.s);
  // critical within the 15-minute default, while there is still memory left
  const leftAtCrit = 6.3 * 1024 + 2 * 3600 * 20 - firstCrit.s * 20;
  assert.ok(leftAtCrit > 0 && leftAtCrit / 20 <= 900 + 10, `critical ${leftAtCrit / 20}s before the end`);
  assert.match(firstCrit.title, /^host RAM runs out in ~1[45]m at \+20 MiB\/s \(/);
  const last = seen[seen.length - 1]!;
  assert.equal(last.sev, 'critical');
  assert.match(last.title, /runs out in ~\d+s|runs out in ~[1-9]m/);
});

test('the ranks growing are named in the host alert; GPU memory growth is another cause and stays', () => {
  const c = new Checker();
  let ev = null;
  for (let s = 0; s <= 60; s += 2) {
    const at = T0 + s * 1000;
    ev = c.evaluate({
      now: at,
      run: liveRun({ step: s + 1, t: at }),
      procs: procs([proc(0, 'R', { rssKiB: 400_000 + s * 50 * 1024 }), proc(1, 'R')]),
      gpu: null,
      hostStats: stats(at, 3000 - s * 40),
    });
  }
  const hm = hostMem(ev!.alerts);
  assert.equal(hm.length, 1);
  assert.equal(hm[0]!.severity, 'critical');
  assert.match(hm[0]!.detail, /growing: rank 0 memory growing/);
  assert.ok(!ev!.alerts.some((a) => a.rule === 'memory-growth'));
});

test('steady host memory is quiet; memory merely low is a warning, nearly gone a critical', () => {
  const quiet = new Checker();
  let ev = null;
  for (let s = 0; s < 60; s += 5)
    ev = quiet.evaluate({
      now: T0 + s * 1000,
      run: liveRun({ step: s + 1, t: T0 + s * 1000 }),
      procs: null,
      gpu: null,
      hostStats: stats(T0 + s * 1000, 12_000 + (s % 10)),
    });
  assert.deepEqual(hostMem(ev!.alerts), []);
  const low = new Checker().evaluate({
    now: T0,
    run: liveRun({ step: 1, t: T0 }),
    procs: null,
    gpu: null,
    hostStats: stats(T0, 2000),
  });
  assert.equal(hostMem(low.alerts)[0]?.severity, 'warning');
  assert.match(hostMem(low.alerts)[0]!.title, /^host RAM low: 2\.0 GiB of 24\.0 GiB available/);
  const gone = new Checker().evaluate({
    now: T0,
    run: liveRun({ step: 1, t: T0 }),
    procs: null,
    gpu: null,
    hostStats: stats(T0, 300),
  });
  assert.equal(hostMem(gone.alerts)[0]?.severity, 'critical');
});

test('the run dir disk: nearly full is alerted; filling gives a time-to-full', () => {
  const full = new Checker().evaluate({
    now: T0,
    run: liveRun({ step: 1, t: T0 }),
    procs: null,
    gpu: null,
    hostStats: stats(T0, 12_000, {
      disks: [{ path: '/r', role: 'run dir', mount: '/data', totalMiB: 100_000, availMiB: 3000 }],
    }),
  });
  const d = full.alerts.find((a) => a.id === 'host-disk:run dir');
  assert.equal(d?.severity, 'warning');
  assert.match(d!.title, /^run dir disk \(\/data\) 97 % full, 2\.9 GiB free$/);
  const c = new Checker();
  let ev = null;
  for (let s = 0; s <= 120; s += 10) {
    const at = T0 + s * 1000;
    ev = c.evaluate({
      now: at,
      run: liveRun({ step: s + 1, t: at }),
      procs: null,
      gpu: null,
      hostStats: stats(at, 12_000, {
        disks: [{ path: '/r', role: 'run dir', mount: '/', totalMiB: 100_000, availMiB: 20_000 - s * 20 }],
      }),
    });
  }
  const f = ev!.alerts.find((a) => a.id === 'host-disk:run dir');
  assert.equal(f?.severity, 'critical');
  assert.match(f!.title, /full in ~15m at \+20\.0 MiB\/s/);
});

test('the /proc and df parsers; CPU % is a rate between two readings', () => {
  const mi = parseMeminfo(
    'MemTotal:       24683520 kB\nMemFree:        20000000 kB\nMemAvailable:   23000000 kB\nSwapTotal:             0 kB\nHugePages_Total:       0\n',
  );
  assert.equal(Math.round(mi['MemTotal']!), 24105);
  assert.equal(mi['SwapTotal'], 0);
  assert.deepEqual(parseLoadavg('0.52 0.58 0.59 1/123 4567\n'), [0.52, 0.58, 0.59]);
  assert.equal(parseLoadavg('garbage'), null);
  const a = parseCpuLine('cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n');
  const b = parseCpuLine('cpu  200 0 200 1400 200 0 0 0 0 0\n');
  assert.deepEqual(a, { busy: 200, total: 1000 });
  assert.equal(cpuPctBetween(a, b), 20);
  assert.equal(cpuPctBetween(null, b), null);
  assert.deepEqual(
    parseDfP(
      'Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 1048576 524288 524288 50% /mnt/my data\n',
    ),
    [{ totalMiB: 1024, availMiB: 512, mount: '/mnt/my data' }],
  );
  // an old kernel without MemAvailable: free + cache
  const s = hostStatsFrom(
    { meminfo: 'MemTotal: 2048 kB\nMemFree: 512 kB\nCached: 512 kB\n', loadavg: null, cpu: null },
    null,
    [],
    T0,
    [],
  );
  assert.equal(s.memAvailMiB, 1);
  assert.equal(roughDur(240), '~4m');
  assert.equal(roughDur(45), '~45s');
});
