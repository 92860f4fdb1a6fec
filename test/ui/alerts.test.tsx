// The alert timeline on screen: whole texts where there is room, a critical always in the main
// view (80x24 included, whatever tab is showing), cleared alerts listed with start and end, and an
// acknowledgement that goes through the action log so a second cockpit on the run shows it.
import './no-ci.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Alert, ClearedAlert } from '../../src/checks/types.js';
import { createActions } from '../../src/cockpit/actions.js';
import { Collector } from '../../src/cockpit/collector.js';
import type { CockpitState } from '../../src/cockpit/state.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { compose } from '../../src/ui/compose.js';
import type { PanelId } from '../../src/ui/layout.js';
import { lineWidth, plain } from '../../src/ui/text.js';
import { initialView, type ViewState } from '../../src/ui/view.js';
import { appOnTty, FIXTURES, fixtureState, recordingActions } from './helpers.js';

const STOPPED = 'rank 1 (pid 4242) is stopped (T): it cannot reach the next collective';
const STOPPED_DETAIL =
  'state T from /proc/4242/stat; every other rank will block in the next all-reduce until it resumes (kill -CONT 4242)';
const GATES = 'gate collapse: entropy 0.01 < 0.2 on 3 consecutive records (steps 60–62)';

async function withAlerts(): Promise<CockpitState> {
  const s = await fixtureState('ddp2-dumps-halt');
  const now = s.at;
  const alerts: Alert[] = [
    {
      id: 'stall:rank1',
      rule: 'stall',
      severity: 'critical',
      title: STOPPED,
      detail: STOPPED_DETAIL,
      since: now - 20_000,
      rank: 1,
    },
    {
      id: 'gates:collapse',
      rule: 'gate-collapse',
      severity: 'critical',
      title: GATES,
      detail:
        'watchdog rule: entropy < 0.2 or max > 0.9 (with entropy < 0.394) or collapse > 0.5 for 3 records (NSA_WATCH_GATE_*)',
      since: now - 5000,
    },
    {
      id: 'data:synthetic',
      rule: 'data',
      severity: 'warning',
      title: 'synthetic data: loss pinned near ln(256) past step 200',
      detail: 'loss 5.54 vs ln 256 = 5.545',
      since: now - 90_000,
    },
  ];
  const alertHistory: ClearedAlert[] = [
    {
      id: 'stall:run',
      rule: 'stall',
      severity: 'critical',
      title: 'step frozen at 12 for 3m20s (threshold 3m00s)',
      detail: 'all ranks silent',
      since: now - 600_000,
      cleared: now - 480_000,
    },
  ];
  return { ...s, alerts, alertHistory };
}

const text = (lines: ReturnType<typeof compose>['lines']) => lines.map(plain).join('\n');
/** the Alerts panel's inside as one string with the wrapping undone: a wrapped alert still reads in order */
function words(f: ReturnType<typeof compose>): string {
  const L = f.layout;
  if (L.kind !== 'ok') return '';
  const sl = L.slots.find((x) => x.active === 'alerts');
  if (!sl) return '';
  const rows = f.lines
    .slice(sl.y + 1, sl.y + sl.h - 1)
    .map((l) => [...plain(l)].slice(sl.x + 1, sl.x + sl.w - 1).join(''));
  return rows.join(' ').replace(/\s+/g, ' ');
}

test('alerts: a frame with alerts, history and a banner is exact at every size, focus and zoom', async () => {
  const s = await withAlerts();
  const views: Partial<ViewState>[] = [
    {},
    { focus: 'alerts' },
    { focus: 'log' },
    { focus: 'alerts', zoom: 'alerts' },
    { focus: 'log', zoom: 'log' },
  ];
  for (let cols = 80; cols <= 220; cols += 9) {
    for (let rows = 23; rows <= 70; rows += 6) {
      for (const v of views) {
        const f = compose(s, { ...initialView(), ...v }, cols, rows, s.at);
        assert.equal(f.lines.length, rows - 1, `height at ${cols}x${rows} ${JSON.stringify(v)}`);
        for (const [i, l] of f.lines.entries())
          assert.equal(lineWidth(l), cols, `line ${i} at ${cols}x${rows} ${JSON.stringify(v)}: ${plain(l)}`);
        // a critical is on screen in every one of them, not only as a tab label
        assert.match(
          text(f.lines),
          /CRIT rank 1 \(pid 4242\)/,
          `critical visible at ${cols}x${rows} ${JSON.stringify(v)}`,
        );
      }
    }
  }
});

test('alerts: at 80x24 and 80x23 a critical is in the main view whichever tab its slot shows', async () => {
  const s = await withAlerts();
  for (const rows of [24, 23]) {
    for (const focus of ['training', 'ranks', 'log', 'dumps', 'actions', 'gates'] as PanelId[]) {
      const f = compose(s, { ...initialView(), focus }, 80, rows, s.at);
      const scr = text(f.lines);
      assert.match(scr, /CRIT rank 1 \(pid 4242\) is stopped/, `80x${rows}, focus ${focus}`);
      if (focus === 'log') assert.match(scr, /\+1 more \(tab to Alerts\)/, 'the banner says there is another critical');
    }
    // on the Alerts tab both criticals' whole titles are readable
    const f = compose(s, initialView(), 80, rows, s.at);
    const w = words(f);
    assert.ok(w.includes(STOPPED.split(' ').slice(0, 6).join(' ')), w);
    assert.ok(w.includes('gate collapse: entropy 0.01 < 0.2'), w);
  }
});

test('alerts: where there is room the whole title and detail are shown; focus or zoom shows the selected one whole', async () => {
  const s = await withAlerts();
  for (const [cols, rows] of [
    [120, 40],
    [200, 60],
  ] as const) {
    const w = words(compose(s, initialView(), cols, rows, s.at));
    for (const part of [STOPPED, GATES]) assert.ok(w.includes(part), `"${part}" whole at ${cols}x${rows}`);
    if (cols === 200) assert.ok(w.includes(STOPPED_DETAIL), `detail whole at ${cols}x${rows}: ${w}`);
    // with the focus, the selected alert is whole, detail included
    const f = words(compose(s, { ...initialView(), focus: 'alerts' }, cols, rows, s.at));
    assert.ok(f.includes(`› CRIT ${STOPPED}`) && f.includes(STOPPED_DETAIL), f);
  }
  const z = words(compose(s, { ...initialView(), focus: 'alerts', zoom: 'alerts' }, 80, 24, s.at));
  assert.ok(z.includes(STOPPED) && z.includes(STOPPED_DETAIL), z);
  // the cleared one is listed with its start and end
  assert.match(z, /cleared \(1\)/);
  assert.match(z, /crit step frozen at 12 for 3m20s/);
  assert.match(z, /\d\d:\d\d:\d\d–\d\d:\d\d:\d\d \(2m00s\), cleared 8m00s ago/);
  // pick the cleared one: its text is whole too
  const sel = `stall:run@${s.alertHistory![0]!.since}>${s.alertHistory![0]!.cleared}`;
  const z2 = words(compose(s, { ...initialView(), focus: 'alerts', zoom: 'alerts', alertSel: sel }, 80, 24, s.at));
  assert.match(z2, /› crit step frozen at 12/);
  assert.match(z2, /all ranks silent/);
});

test('ack: written to actions.jsonl through the audited path, read back by a second cockpit and shown; read-only refuses and writes nothing', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-top-ack-'));
  try {
    cpSync(join(FIXTURES, 'ddp2-dumps-halt'), dir, { recursive: true });
    const host = new LocalHost();
    const s = await withAlerts();
    const alert = s.alerts[0]!;
    // read-only first: refused, nothing written
    const ro = createActions({ host, runDir: dir, readOnly: true, state: () => s });
    const r0 = await ro.ack({ id: alert.id, since: alert.since, severity: alert.severity, title: alert.title });
    assert.equal(r0.result, 'refused');
    assert.ok(!existsSync(join(dir, '.nsa-top')), 'read-only wrote nothing');
    // the operator acknowledges
    const a = createActions({ host, runDir: dir, readOnly: false, state: () => s });
    const r = await a.ack({ id: alert.id, since: alert.since, severity: alert.severity, title: alert.title });
    assert.equal(r.result, 'ok');
    const lines = readFileSync(join(dir, '.nsa-top', 'actions.jsonl'), 'utf8')
      .trim()
      .split('\n');
    assert.equal(lines.length, 1);
    const rec = JSON.parse(lines[0]!);
    assert.equal(rec.action, 'ack');
    assert.deepEqual([rec.target.alert, rec.target.since], [alert.id, alert.since]);
    assert.match(rec.detail, /acknowledged critical: rank 1 \(pid 4242\) is stopped/);
    // a second person's cockpit (read-only) reads it back from the action log and shows it
    const other = new Collector({ host, runDir: dir, readOnly: true });
    const st = await other.tick();
    assert.equal(st.actions.at(-1)?.action, 'ack');
    const shown = { ...st, alerts: s.alerts, alertHistory: s.alertHistory };
    const user = rec.who.user as string;
    const w = words(compose(shown, { ...initialView(), focus: 'alerts' }, 120, 40, s.at));
    assert.ok(w.includes(`ack ${user}`), `the ack is shown on the alert: ${w}`);
    // a cockpit started after the ack saw the condition first later (its own `since`): still acked;
    // the stall episode that cleared before the ack is not
    const later = { ...shown, alerts: shown.alerts.map((a) => ({ ...a, since: rec.ts + 30_000 })) };
    const wl = words(compose(later, { ...initialView(), focus: 'alerts', zoom: 'alerts' }, 120, 40, s.at));
    assert.equal(wl.split(`ack ${user}`).length - 1, 1, `one ack, on the stopped rank: ${wl}`);
    assert.match(wl, /rank 1 \(pid 4242\) is stopped.*ack /);
    // the acknowledged critical is no longer first in the banner: the unacknowledged one is
    const b = text(compose(shown, { ...initialView(), focus: 'log' }, 80, 24, s.at).lines);
    assert.match(b.split('\n')[3]!, /^CRIT gate collapse/);
    // and the action log panel lists it
    const al = text(compose(shown, { ...initialView(), focus: 'actions' }, 120, 40, s.at).lines);
    assert.match(al, / ack ok/);
    assert.deepEqual(readdirSync(join(dir, '.nsa-top')), ['actions.jsonl']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('keys: `a` acknowledges the first unacknowledged critical; on the Alerts panel ↓ then `a` the selected one; read-only refuses', async () => {
  const s = await withAlerts();
  const run = async (readOnly: boolean, keys: string[]) => {
    const actions = recordingActions(readOnly);
    const app = await appOnTty({ ...s, readOnly }, actions);
    try {
      await app.press(...keys);
      await app.until(() => actions.calls.length > 0 || /refused/.test(app.screen()));
      return { acked: actions.calls.map((c) => c.replace(/^ack /, '')), screen: app.screen() };
    } finally {
      app.unmount();
    }
  };
  assert.deepEqual((await run(false, ['a'])).acked, ['stall:rank1']);
  // tab to the Alerts panel (training → gates → gpus → ranks → alerts), one down, ack
  assert.deepEqual((await run(false, ['\t', '\t', '\t', '\t', 'j', 'a'])).acked, ['gates:collapse']);
  const ro = await run(true, ['a']);
  assert.deepEqual(ro.acked, []);
  assert.match(ro.screen, /ack: refused/);
});
