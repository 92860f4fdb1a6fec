// report judges the WHOLE run: every segment of the history, read from the first byte however big
// the files (the cockpit and status read huge files from the end). A crash that was resumed, a
// stall that cleared and a NaN deep in a 1M-line heartbeat file, a failed checkpoint save, a toy
// or synthetic run, unknown model dims: each is named with its steps and time, never passed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FIXTURES } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const tmp = mkdtempSync(join(tmpdir(), 'nsa-report-history-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function cli(cmd: string, args: string[]) {
  return spawnSync(process.execPath, [BIN, cmd, ...args], {
    encoding: 'utf8',
    timeout: 180_000,
    maxBuffer: 64 * 1024 * 1024,
  });
}
type Crit = { id: string; status: string; evidence: string };
function crit(rep: { phases: { criteria: Crit[] }[] }, phase: number, id: string): Crit {
  const c = rep.phases[phase]!.criteria.find((x) => x.id === id);
  assert.ok(c, `criterion ${id} in phase ${phase}`);
  return c;
}

const CRASH_RUN = join(FIXTURES, 'ddp2-crash-resume', 'artifacts', 'ddp2-crash-resume');

test('a real 2-rank run that crashed (rank 1 SIGKILLed at step 51) and was resumed: phase 1 NO-GO naming the crash', () => {
  const r = cli('report', [CRASH_RUN, '--phase', '1', '--json']);
  assert.equal(r.status, 1, r.stderr);
  const rep = JSON.parse(r.stdout);
  assert.equal(rep.verdict, 'NO-GO');
  const c = crit(rep, 1, 'no-crash');
  assert.equal(c.status, 'fail');
  assert.match(
    c.evidence,
    /segment #0 \(pid 10747\), steps 1–51 \(2026-11-24T05:12:12Z → 2026-11-24T05:12:42Z\), crashed/,
  );
  // torchrun's failure summary names the rank that died, not only its pid
  assert.match(c.evidence, /rank 1 \(pid 10748\) killed by SIGKILL/);
  assert.match(
    c.evidence,
    /restarted 32s later as segment #1 \(pid 12965\), step count from 1, weights from .*checkpoint_step40\.pt/,
  );
  assert.deepEqual(
    rep.history.segments.map((g: { end: string }) => g.end),
    ['crashed', 'current'],
  );
  // the run's own config, found through env.json's CONFIG relative to the repo root
  const real = crit(rep, 1, 'real-run');
  assert.equal(real.status, 'fail');
  assert.match(real.evidence, /synthetic data/);
  assert.match(real.evidence, /140k-parameter model \(dim 64 × 2 layers/);
  // graded by its length (100 steps: phase 0), the crash is still NO-GO, named in the verdict
  const def = cli('report', [CRASH_RUN]);
  assert.equal(def.status, 1, def.stdout);
  assert.match(
    def.stdout,
    /VERDICT\s+NO-GO for phase 0[^\n]*\n\s+no crash or restart: 1 crash\(es\): segment #0 \(pid 10747\), steps 1–51/,
  );
  const text = cli('report', [CRASH_RUN, '--phase', '1']);
  assert.match(text.stdout, /✘ no crash or restart\s+1 crash\(es\): segment #0 \(pid 10747\)/);
  assert.match(text.stdout, /^ {2}CRASH\s+segment #0/m);
});

test('a 1M-line heartbeat history: a 2001 s stall and a NaN at step 10000, far before the tail, are found', () => {
  const dir = join(tmp, 'huge');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'env.json'),
    JSON.stringify({ torch: '2.4', env: { CONFIG: 'configs/m7c_125m_2xa100_production.yaml', WORLD_SIZE: '1' } }),
  );
  writeFileSync(
    join(dir, 'config.yaml'),
    'model: {dim: 768, n_layers: 12, n_heads: 12, n_kv_groups: 2, d_k: 64, d_v: 64}\nnsa: {l: 32, d: 16, l_sel: 64, n_sel: 16, w: 512}\ntrain: {steps: 500000, seq_len: 2048, batch_size: 2, log_every: 1, save_every: 0, out_dir: x}\n',
  );
  const hb = join(dir, 'heartbeat_rank0.jsonl');
  const t0 = 1_790_000_000;
  writeFileSync(hb, `{"ts": ${t0}, "pid": 4242, "rank": 0, "step": 0, "msg": "boot"}\n`);
  let ts = t0 + 1;
  let lines = 1;
  for (let base = 1; base <= 500_000; base += 10_000) {
    let chunk = '';
    for (let step = base; step < base + 10_000; step++) {
      if (step === 10_000) ts += 2001; // the stall: nothing for 2001 s, then it went on
      const loss = step === 10_000 ? 'NaN' : (5 - step / 200_000).toFixed(4);
      chunk += `{"ts": ${ts}, "pid": 4242, "rank": 0, "step": ${step}, "msg": "progress", "loss": ${loss}, "toks_per_s": 9000.0}\n{"ts": ${ts + 0.01}, "pid": 4242, "rank": 0, "step": ${step}, "msg": "step_end"}\n`;
      ts += 1;
      lines += 2;
    }
    appendFileSync(hb, chunk);
  }
  assert.ok(lines >= 1_000_000);

  const r = cli('report', [dir, '--phase', '1', '--json']);
  assert.equal(r.status, 1, r.stderr);
  const rep = JSON.parse(r.stdout);
  const stall = crit(rep, 1, 'no-stall');
  assert.equal(stall.status, 'fail', stall.evidence);
  assert.match(stall.evidence, /1 stall\(s\) in the history/);
  // 2001 s added to the 1 s step, less the 0.01 s to step 9999's step_end: a 2001.99 s gap
  assert.match(stall.evidence, /no heartbeat for 33m22s after step 9999 \(2026-09-21T\d\d:\d\d:\d\dZ → /);
  assert.match(stall.evidence, /1,000,001 heartbeat records in 1 segment/);
  const nan = crit(rep, 1, 'loss-finite');
  assert.equal(nan.status, 'fail', nan.evidence);
  assert.match(nan.evidence, /loss NaN at step 10000 \(2026-09-21T/);

  // status answers from the tail: the old part of the history is left for --full
  const s = cli('status', [dir, '--json']);
  const snap = JSON.parse(s.stdout);
  assert.equal(snap.backfill.pending, true, 'status did not read the whole 1M-line file before answering');
  assert.equal(snap.step, 500_000);
  const full = JSON.parse(cli('status', [dir, '--json', '--full']).stdout);
  assert.equal(full.backfill.pending, false, '--full reads the whole history first');
  assert.ok(full.series.loss.nonFinite >= 1, 'and then sees the NaN at step 10000 too');
});

test('a failed checkpoint save anywhere fails phase 3 "checkpoints saved", so does one the real trainer swallowed', () => {
  const dir = join(tmp, 'ckpt-failed');
  cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
  appendFileSync(
    join(dir, 'train.log'),
    '[train] checkpoint at step 20 FAILED (periodic): ENOSPC: no space left on device, write\n',
  );
  const r = cli('report', [dir, '--phase', '3', '--json']);
  const c = crit(JSON.parse(r.stdout), 3, 'checkpoints');
  assert.equal(c.status, 'fail');
  assert.match(
    c.evidence,
    /1 failed save\(s\): segment #0 step 20: \[train\] checkpoint at step 20 FAILED \(periodic\): ENOSPC/,
  );

  // the real trainer logs nothing (TS:1489-1499: except Exception: pass): the missing file tells
  const quiet = join(tmp, 'ckpt-missing');
  cpSync(join(FIXTURES, 'single'), quiet, { recursive: true });
  rmSync(join(quiet, 'checkpoint_step20.pt'));
  const q = crit(JSON.parse(cli('report', [quiet, '--phase', '3', '--json']).stdout), 3, 'checkpoints');
  assert.equal(q.status, 'fail');
  assert.match(q.evidence, /save_every 20 but no checkpoint_step\{20\}\.pt from the current segment \(steps 1–40\)/);
});

test('model dims unknown is not a pass (phase 3); a toy on synthetic data cannot pass phase 1', () => {
  const dir = join(tmp, 'no-dims');
  cpSync(join(FIXTURES, 'single'), dir, { recursive: true });
  rmSync(join(dir, 'config.yaml')); // CONFIG configs/single.yaml names a file that is not there
  const rep = JSON.parse(cli('report', [dir, '--phase', '3', '--json']).stdout);
  const id = crit(rep, 3, 'identity');
  assert.notEqual(id.status, 'pass');
  assert.match(id.evidence, /model dims unknown/);
  assert.notEqual(rep.verdict, 'GO');

  const single = JSON.parse(cli('report', [join(FIXTURES, 'single'), '--phase', '1', '--json']).stdout);
  const real = crit(single, 1, 'real-run');
  assert.equal(real.status, 'fail');
  // the real trainer on synthetic data: its loss sits at ln(256) for the whole run, named too
  assert.match(
    real.evidence,
    /synthetic data \(train\.log: dataset=synthetic\); loss pinned at ln\(256\) = 5\.545[^;]*; a 140k-parameter model/,
  );
});

test('a run halted by .HALT and resumed is not a crash: the log shows the halt, the restart is named', () => {
  const dir = join(tmp, 'halt-resume');
  mkdirSync(dir, { recursive: true });
  const T0 = 1_790_000_000;
  const rec = (o: Record<string, unknown>) => JSON.stringify({ iso: 'x', rank: 0, ...o }) + '\n';
  let hb = rec({ ts: T0, pid: 11, step: 0, msg: 'boot' });
  for (let s = 1; s <= 30; s++) hb += rec({ ts: T0 + s, pid: 11, step: s, msg: 'progress', loss: 5, toks_per_s: 900 });
  hb += rec({ ts: T0 + 100, pid: 22, step: 0, msg: 'boot' });
  for (let s = 1; s <= 20; s++)
    hb += rec({ ts: T0 + 100 + s, pid: 22, step: s, msg: 'progress', loss: 5, toks_per_s: 900 });
  writeFileSync(join(dir, 'heartbeat_rank0.jsonl'), hb);
  // two ranks per launch: each prints its own boot line before anything trains
  const launch = (extra: string) =>
    '[boot] loading config configs/x.yaml\n[boot] loading config configs/x.yaml\n[ddp] process group ready | backend=gloo world_size=2 timeout_min=15\n[train] dataset=fineweb_edu tokenizer=gpt2\n' +
    extra;
  writeFileSync(
    join(dir, 'train.log'),
    launch('step 0030 | loss 5.0000\n[train] HALT file detected — stopping gracefully.\n') +
      launch('[train] resumed from artifacts/x/checkpoint_step20.pt\nstep 0020 | loss 5.0000\n'),
  );
  // the resumed segment that just stops (no metrics.json, no .HALT) ended unexplained: that is a crash
  const ended = crit(JSON.parse(cli('report', [dir, '--phase', '0', '--json']).stdout), 0, 'no-crash');
  assert.equal(ended.status, 'fail', ended.evidence);
  assert.match(ended.evidence, /the last segment \(pid 22\) ended at step 20 without finishing or a \.HALT/);
  // the resumed segment finishes: the first one's halt is not a crash
  writeFileSync(join(dir, 'metrics.json'), '{}\n');
  utimesSync(join(dir, 'metrics.json'), new Date((T0 + 200) * 1000), new Date((T0 + 200) * 1000));
  const rep = JSON.parse(cli('report', [dir, '--phase', '0', '--json']).stdout);
  const c = crit(rep, 0, 'no-crash');
  assert.equal(c.status, 'pass', c.evidence);
  assert.match(
    c.evidence,
    /2 segments, none crashed: segment #0 \(pid 11\) steps 1–30 halted: stopped by \.HALT .*restarted 1m10s later as segment #1 \(pid 22\), step count from 1, weights from artifacts\/x\/checkpoint_step20\.pt/,
  );
});

// Recorded live: the real trainer (2 ranks), rank 1 SIGSTOPped at step 45 under `watchdog --stall 10`,
// halted during the stall, then SIGCONT: it wrote step 46 and stopped on the .HALT. Its 38 s gap is
// short of the report's own 180 s floor, so only nsa-top's records of the run tell the stall.
const SIGSTOP_RUN = join(FIXTURES, 'ddp2-sigstop-watchdog');

test('a stall the watchdog called and a critical alert that cleared still fail the report, from its log or the journal', () => {
  const judge = (name: string, drop: string[]) => {
    const dir = join(tmp, name);
    cpSync(SIGSTOP_RUN, dir, { recursive: true });
    for (const f of drop) rmSync(join(dir, '.nsa-top', f));
    const r = cli('report', [dir, '--phase', '1', '--json']);
    return { code: r.status, rep: JSON.parse(r.stdout) };
  };
  for (const [name, drop] of [
    ['wd-log', ['journal.jsonl']],
    ['journal', ['watchdog.jsonl']],
  ] as const) {
    const { code, rep } = judge(name, [...drop]);
    assert.equal(code, 1, name);
    const stall = crit(rep, 1, 'no-stall');
    assert.equal(stall.status, 'fail', `${name}: ${stall.evidence}`);
    assert.match(
      stall.evidence,
      /no heartbeat for 38s after step 45 \(2026-11-27T20:37:13Z → 2026-11-27T20:37:51Z\), then it went on; watchdog: step frozen at 45/,
    );
    const c = crit(rep, 1, 'no-critical');
    assert.equal(c.status, 'fail', `${name}: ${c.evidence}`);
    assert.match(
      c.evidence,
      /rank 1 \(pid 11728\) is stopped \(T\); others 0:S \(raised 2026-11-27T20:37:15Z, cleared since\)/,
    );
    assert.equal(rep.history.events.filter((e: { kind: string }) => e.kind === 'stall').length, 1, name);
  }
  // without nsa-top's records the same files read as a clean 46 steps: those records are the evidence
  const { rep } = judge('none', ['journal.jsonl', 'watchdog.jsonl']);
  assert.equal(crit(rep, 1, 'no-stall').status, 'pass');
  assert.equal(crit(rep, 1, 'no-critical').status, 'pass');
});
