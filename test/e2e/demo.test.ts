// End to end: `nsa-top demo` in a real pty against the reference trainer (2 ranks). The screen
// shows the live step; d dumps every rank; `hn` typed in one write opens the halt question without
// answering it; h halts with a checkpoint; r relaunches and the steps
// continue; a second, --read-only cockpit on the same run refuses all three and sees the first
// one's actions in its action log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalHost } from '../../src/remote/local/host.js';
import { verifyProcess } from '../../src/remote/procs.js';
import { alive, killRecorded, runPids } from './cleanup.js';
import { Cockpit, ENTER, ESC } from './pty.js';

test(
  'demo: live step, d dumps each rank, h halts with a checkpoint, r relaunches and steps continue; --read-only refuses',
  { timeout: 240_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-demo-'));
    const main = new Cockpit(['demo', '--steps', '2000'], { cwd });
    let runDir = '';
    let ro: Cockpit | null = null;
    const recorded: { pid: number; startTime: string | null }[] = [];
    try {
      runDir = (await main.waitRaw(/started \(2 ranks\) in (\S+)/, 60_000))[1]!;
      // the live step, advancing
      const first = Number((await main.waitFor(/step (\d+)\/2000/, 60_000))[1]);
      await main.waitFor(/RUNNING/);
      const m = await main.waitFor(new RegExp(`step (\\d+)/2000`), 30_000);
      let later = Number(m[1]);
      for (let i = 0; i < 100 && later <= first; i++) {
        await new Promise((r) => setTimeout(r, 200));
        later = Number(main.screen().match(/step (\d+)\/2000/)?.[1] ?? 0);
      }
      assert.ok(later > first, `the step advances on screen (${first} → ${later})`);
      await main.waitFor(
        /Ranks[\s\S]*\n.*\b0 \d+\s+R?\S*[\s\S]*\n.*\b1 \d+/,
        30_000,
        'both ranks with their processes',
      );
      recorded.push(...runPids(runDir));

      // a second operator, read-only, on the same run
      ro = new Cockpit([runDir, '--read-only'], { cwd, cols: 100, rows: 30 });
      await ro.waitFor(/READ-ONLY/, 30_000);
      await ro.waitFor(/step \d+\/2000/);
      for (const k of ['d', 'h', 'r']) {
        await ro.send(k);
        await ro.waitFor(/refused[\s\S]*--read-only/, 10_000, `read-only refuses ${k}`);
        await ro.send(ESC, 300);
      }
      assert.equal(
        readdirSync(runDir).filter((f) => f.startsWith('stackdump_')).length,
        0,
        'read-only wrote no stack dump',
      );
      assert.ok(!existsSync(join(runDir, '.HALT')), 'read-only wrote no .HALT');
      const actionsPath = join(runDir, '.nsa-top', 'actions.jsonl');
      const actionsBefore = existsSync(actionsPath) ? readFileSync(actionsPath, 'utf8') : '';
      assert.doesNotMatch(actionsBefore, /"action":"(dump|halt|relaunch)"/);

      // d: one dump per rank, shown
      await main.send('d');
      await main.waitFor(/rank 0 pid \d+ dumped/, 40_000);
      await main.waitFor(/rank 1 pid \d+ dumped/, 40_000);
      const dumps = readdirSync(runDir).filter((f) => /^stackdump_.*\.txt$/.test(f));
      assert.equal(dumps.filter((f) => /_rank0_/.test(f)).length, 1, `one dump of rank 0: ${dumps}`);
      assert.equal(dumps.filter((f) => /_rank1_/.test(f)).length, 1, `one dump of rank 1: ${dumps}`);
      await main.send(ESC, 300);
      await main.send('\t');
      await main.waitFor(/2\/2 ranks: r0 r1|dumps: r0 r1|2 dumps/, 15_000, 'the Dumps panel shows the set');
      // the read-only operator sees the dump in the shared action log
      await ro.send('z', 300);
      for (let i = 0; i < 8 && !/┌ Actions/.test(ro.screen()); i++) await ro.send('\t', 400);
      await ro.waitFor(/dump\s+ok/, 20_000, 'the read-only cockpit shows the dump in its action log');

      // type-ahead: h and n in one write (a fast typist, a laggy link) open the question but do not
      // answer it — n came before the question was on screen: dropped, and said so; nothing halted
      await main.send('hn');
      await main.waitFor(/ignored 1 key typed before the dialog opened/, 10_000, 'the dropped n is named');
      assert.ok(!existsSync(join(runDir, '.HALT')), 'no .HALT from type-ahead');
      assert.doesNotMatch(readFileSync(actionsPath, 'utf8'), /"action":"(halt|stop)"/, 'no halt from type-ahead');
      assert.match(main.screen(), /Halt the run\?/, 'the question stays open');
      // h: halt now (pressed once the question is on screen); every rank stops at one step, with a checkpoint
      await main.waitFor(/n halt now \(\.HALT\) {3}c/, 10_000);
      await main.send('n');
      const stopped = Number((await main.waitFor(/rank 1 stopped at step (\d+)/, 60_000))[1]);
      await main.waitFor(/rank 0 stopped at step \d+/, 10_000);
      await main.waitFor(/all ranks stopped/, 30_000);
      assert.ok(
        existsSync(join(runDir, `checkpoint_step${stopped}.pt`)),
        `a checkpoint at the halt step ${stopped}: ${readdirSync(runDir).filter((f) => f.startsWith('checkpoint'))}`,
      );
      await main.send(ESC, 300);
      await main.waitFor(/HALTED/, 30_000);
      // HALTED comes when the last rank is gone; the supervisor records its own end a moment later,
      // and r while it is still stopping is refused (rightly: "its supervisor is stopping"). On a
      // loaded box that moment was long enough to press r in: the operator here waits for it, and
      // for the cockpit's next round to have seen it.
      const supState = () => {
        try {
          return (JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')) as { state: string })
            .state;
        } catch {
          return null;
        }
      };
      for (const end = Date.now() + 30_000; supState() === 'stopping' && Date.now() < end;)
        await new Promise((r) => setTimeout(r, 100));
      assert.notEqual(supState(), 'stopping', "the supervisor recorded its end within 30 s of the ranks'");
      await new Promise((r) => setTimeout(r, 1500));

      // r: relaunch (type the run name; the .HALT left by the halt needs its own confirmation)
      const name = runDir.split('/').pop()!;
      await main.send('r');
      await main.waitFor(/type the run name/, 10_000);
      await main.type(name);
      await main.send(ENTER, 300);
      await main.waitFor(/remove the stale \.HALT\?/, 10_000);
      await main.type('remove');
      await main.send(ENTER, 300);
      await main.waitFor(/resuming from/, 60_000);
      assert.match(main.screen(), /checkpoint_step\d+\.pt/, 'the relaunch names the checkpoint it resumes from');
      await main.send(ESC, 300);
      await main.waitFor(/RUNNING/, 60_000);
      let after = 0;
      for (let i = 0; i < 300 && after <= stopped; i++) {
        await new Promise((r) => setTimeout(r, 200));
        after = Number(main.screen().match(/step (\d+)\/2000/)?.[1] ?? 0);
      }
      assert.ok(after > stopped, `steps continue after the relaunch (${stopped} → ${after})`);
      recorded.push(...runPids(runDir));

      // quit: the demo asks, and the default halts the run gracefully
      await ro.send('q');
      assert.equal(await ro.exited, 0);
      await main.send('q', 500);
      await main.waitRaw(/Halt it gracefully/, 15_000);
      await main.send(ENTER);
      assert.equal(await main.exited, 0);
      assert.match(main.raw, new RegExp(`artifacts: ${runDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      const st = JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')) as { state: string };
      assert.match(st.state, /halted|stopping|exited/);
      const log = readFileSync(actionsPath, 'utf8');
      for (const a of ['dump', 'halt', 'remove-stale-halt', 'relaunch'])
        assert.match(log, new RegExp(`"action":"${a}"`), `${a} is in actions.jsonl`);
    } finally {
      await ro?.close(5000);
      await main.close();
      if (runDir) {
        // the graceful halt is under way: its processes get up to 3 s to end on their own, then the
        // rest are ended (it is over in about a second, which a fixed 3 s wait spent idle)
        const end = Date.now() + 3000;
        while (Date.now() < end && [...recorded, ...runPids(runDir)].some((p) => alive(p.pid)))
          await new Promise((r) => setTimeout(r, 100));
        killRecorded([...recorded, ...runPids(runDir)]);
      }
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);

test(
  'demo: Ctrl-C at the quit question takes the safe default — the trainer is halted, not left running',
  { timeout: 180_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-demo-ctrlc-'));
    const main = new Cockpit(['demo', '--steps', '3000'], { cwd });
    let runDir = '';
    const recorded: { pid: number; startTime: string | null }[] = [];
    try {
      runDir = (await main.waitRaw(/started \(2 ranks\) in (\S+)/, 60_000))[1]!;
      await main.waitFor(/RUNNING/, 60_000);
      recorded.push(...runPids(runDir));
      await main.send('q', 500);
      await main.waitRaw(/Halt it gracefully/, 15_000);
      await main.send('\x03');
      assert.equal(await main.exited, 0);
      assert.match(main.raw, /no answer: halting/);
      const st = JSON.parse(readFileSync(join(runDir, '.nsa-top', 'supervisor.json'), 'utf8')) as { state: string };
      assert.match(st.state, /halted|stopping/, 'the demo run is being stopped, not left training');
      // the graceful halt was asked of the trainer: its .HALT is there, or — the run halted — the demo
      // removed its own .HALT (audited) so the next r just works
      const acts = readFileSync(join(runDir, '.nsa-top', 'actions.jsonl'), 'utf8');
      assert.ok(
        existsSync(join(runDir, '.HALT')) || (st.state === 'halted' && /"action":"remove-stale-halt"/.test(acts)),
        'the graceful halt was asked of the trainer',
      );
    } finally {
      await main.close();
      if (runDir) {
        // the graceful halt is under way: its processes get up to 3 s to end on their own, then the
        // rest are ended (it is over in about a second, which a fixed 3 s wait spent idle)
        const end = Date.now() + 3000;
        while (Date.now() < end && [...recorded, ...runPids(runDir)].some((p) => alive(p.pid)))
          await new Promise((r) => setTimeout(r, 100));
        killRecorded([...recorded, ...runPids(runDir)]);
      }
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);

test(
  "demo: quitting a hung demo with the default answer leaves no trainer behind (the supervisor escalates within the demo's grace)",
  { timeout: 180_000 },
  async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'nsa-top-e2e-demo-hung-'));
    const main = new Cockpit(['demo', '--steps', '3000', '--inject', 'hang@step=20,rank=1'], { cwd });
    let runDir = '';
    const recorded: { pid: number; startTime: string | null }[] = [];
    const host = new LocalHost();
    try {
      runDir = (await main.waitRaw(/started \(2 ranks\) in (\S+)/, 60_000))[1]!;
      await main.waitFor(/STALLED/, 90_000);
      recorded.push(...runPids(runDir));
      assert.ok(recorded.length >= 3, `supervisor, trainer and ranks recorded: ${JSON.stringify(recorded)}`);
      await main.send('q', 500);
      await main.waitRaw(/Halt it gracefully/, 15_000);
      await main.send(ENTER);
      assert.equal(await main.exited, 0);
      // a .HALT cannot reach a hung rank: the supervisor's SIGINT/SIGKILL does, within the demo's wait
      assert.match(main.raw, /demo run halted/);
      // and it says the halt was not graceful: the hung rank needed the signal
      assert.match(main.raw, /not a graceful halt: \.HALT went unanswered, the ranks were stopped by SIG(INT|KILL)/);
      const alive = [];
      for (const p of recorded)
        if (p.startTime && (await verifyProcess(host, { pid: p.pid, startTime: p.startTime }).catch(() => false)))
          alive.push(p.pid);
      assert.deepEqual(alive, [], 'no process of the demo run is left');
    } finally {
      await main.close();
      if (runDir) killRecorded([...recorded, ...runPids(runDir)]);
      rmSync(cwd, { recursive: true, force: true });
    }
  },
);
