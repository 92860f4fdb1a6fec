// Runs every test/**/*.test.ts(x) with node's own runner, naming each file explicitly
// (Node 20 does not expand globs, and a run with no files would pass silently).
// TEST_FILTER=substr narrows the list, for local work only.
// --unit (npm run test:unit): only the files in UNIT_TESTS, the fast tier: tests that start no
// process (no sshd, no tmux, no pty, no CLI). scripts/unit-guard.mjs, preloaded into each test file's
// process, makes starting one throw, so a file wrongly listed here fails loudly instead of slowly.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const unit = process.argv.includes('--unit');
for (const a of process.argv.slice(2)) if (a !== '--unit') throw new Error(`run-tests: unknown argument ${a}`);

// The unit tier, by explicit list: a file is in it only when it starts no process (the guard checks
// that at run time); everything else, and every file, runs in the full suite (`npm test`).
const UNIT_TESTS = [
  'test/bundle/redact.test.ts',
  'test/bundle/story.test.ts',
  'test/checks/boot-state.test.ts',
  'test/checks/cadence-memo.test.ts',
  'test/checks/carry.test.ts',
  'test/checks/exit-hang.test.ts',
  'test/checks/control.test.ts',
  'test/checks/divergence-memo.test.ts',
  'test/checks/fuzz.test.ts',
  'test/checks/healthy-demo.test.ts',
  'test/checks/hostres.test.ts',
  'test/checks/nodes-supervisor.test.ts',
  'test/checks/numbers.test.ts',
  'test/checks/preflight-rdzv.test.ts',
  'test/checks/rules.test.ts',
  'test/checks/state.test.ts',
  'test/checks/straggler.test.ts',
  'test/checks/supervisor.test.ts',
  'test/checks/view.test.ts',
  'test/cockpit/metrics.test.ts',
  'test/cockpit/notify.test.ts',
  'test/cockpit/peekcadence.test.ts',
  'test/cockpit/procsdue.test.ts',
  'test/cockpit/rankpeek.test.ts',
  'test/commands/args.test.ts',
  'test/docs/boundaries.test.ts',
  'test/docs/contract.test.ts',
  'test/docs/dependencies.test.ts',
  'test/docs/design.test.ts',
  'test/docs/readme-keys.test.ts',
  'test/format.test.ts',
  'test/fuzz/bounds.test.ts',
  'test/journal/at.test.ts',
  'test/journal/codec.test.ts',
  'test/lines-retain.test.ts',
  'test/remote/channels.test.ts',
  'test/remote/early.test.ts',
  'test/remote/frames.test.ts',
  'test/remote/hoststats-local.test.ts',
  'test/remote/nodegpus.test.ts',
  'test/remote/proctable-ahead.test.ts',
  'test/remote/ssh-keep-unit.test.ts',
  'test/replay/files.test.ts',
  'test/replay/timeline.test.ts',
  'test/trainer/control/checkpoints.test.ts',
  'test/trainer/control/textfile.test.ts',
  'test/trainer/launch/multinode.test.ts',
  'test/trainer/launch/rankwatch.test.ts',
  'test/trainer/reference/args.test.ts',
  'test/trainer/reference/model/gradcheck.test.ts',
  'test/trainer/reference/model/kernels.test.ts',
  'test/trainer/reference/model/learns.test.ts',
  'test/trainer/reference/model/nsa.test.ts',
  'test/trainer/reference/model/optim.test.ts',
  'test/trainer/reference/model/reference-forward.test.ts',
  'test/trainer/run/build.test.ts',
  'test/trainer/run/checkpoint-complete.test.ts',
  'test/trainer/run/fixtures.test.ts',
  'test/trainer/run/incremental.test.ts',
  'test/trainer/run/nodes.test.ts',
  'test/trainer/run/property.test.ts',
  'test/trainer/run/ranks.test.ts',
  'test/trainer/run/read-order.test.ts',
  'test/trainer/run/segments.test.ts',
  'test/trainer/run/series-oracle.test.ts',
  'test/trainer/run/settled-resume.test.ts',
  'test/trainer/run/steptime.test.ts',
  'test/trainer/run/tb.test.ts',
  'test/trainer/run/trainlog.test.ts',
  'test/trainer/run/unlaunched.test.ts',
  'test/trainer/run/validators.test.ts',
  'test/trainer/run/yaml-simple-oracle.test.ts',
  'test/ui/burst.test.tsx',
  'test/ui/chart.test.ts',
  'test/ui/dialog.test.ts',
  'test/ui/dumps.test.ts',
  'test/ui/evaluation.test.ts',
  'test/ui/host.test.ts',
  'test/ui/keys.test.tsx',
  'test/ui/logread.test.ts',
  'test/ui/memo.test.ts',
  'test/ui/pace.test.ts',
  'test/ui/plot.test.ts',
  'test/ui/relaunch-steps.test.tsx',
  'test/ui/screen.test.tsx',
  'test/ui/taborder.test.ts',
  'test/ui/text.test.ts',
  'test/ui/typeahead.test.tsx',
];
// The files that mostly wait on real time (CPU under ~45 % of wall in CI's time-per-file table):
// they run in lane B, beside the rest (see below). A file listed here that is not a test fails the run.
const WAITING_TESTS = [
  'test/checks/live-faults.test.ts',
  'test/checks/live-hang.test.ts',
  'test/checks/live-healthy.test.ts',
  'test/checks/live-signals.test.ts',
  'test/checks/live-stopped.test.ts',
  'test/cockpit/observe-ssh.test.ts',
  'test/cockpit/scrape-round.test.ts',
  'test/cockpit/takeover.test.ts',
  'test/commands/status-saves.test.ts',
  'test/e2e/hang.test.ts',
  'test/e2e/hangup.test.ts',
  'test/e2e/keys-tmux.test.ts',
  'test/e2e/logread.test.ts',
  'test/e2e/remote.test.ts',
  'test/e2e/replay-live.test.ts',
  'test/e2e/terminal.test.ts',
  'test/e2e/tmux.test.ts',
  'test/fuzz/cockpit.test.ts',
  'test/journal/record-live.test.ts',
  'test/multinode/launch.test.ts',
  'test/multinode/status.test.ts',
  'test/remote/channels.test.ts',
  'test/remote/hostkey-type.test.ts',
  'test/remote/logback-ssh.test.ts',
  'test/remote/ssh-bulk.test.ts',
  'test/remote/ssh-ownfiles.test.ts',
  'test/remote/ssh.test.ts',
  'test/trainer/control/checkpoints.test.ts',
  'test/trainer/control/control.test.ts',
  'test/trainer/control/dumps-collide.test.ts',
  'test/trainer/control/signals.test.ts',
  'test/trainer/launch/adopt.test.ts',
  'test/trainer/launch/moot-request.test.ts',
  'test/trainer/launch/relaunch-steps.test.ts',
  'test/trainer/launch/resume.test.ts',
  'test/trainer/launch/supervisor.test.ts',
  'test/trainer/launch/survive.test.ts',
];
function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === 'fixtures' || name === 'node_modules') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.test\.tsx?$/.test(name)) out.push(relative(root, p));
  }
  return out;
}
let files = walk(join(root, 'test')).sort();
if (unit) {
  const missing = UNIT_TESTS.filter((f) => !files.includes(f));
  if (missing.length) {
    console.error(
      `run-tests: UNIT_TESTS names files that are not tests (moved or renamed?):\n  ${missing.join('\n  ')}`,
    );
    process.exit(1);
  }
  files = files.filter((f) => UNIT_TESTS.includes(f));
}
const strayWaiting = unit ? [] : WAITING_TESTS.filter((f) => !files.includes(f));
if (strayWaiting.length) {
  console.error(
    `run-tests: WAITING_TESTS names files that are not tests (moved or renamed?):\n  ${strayWaiting.join('\n  ')}`,
  );
  process.exit(1);
}
const filter = process.env.TEST_FILTER;
if (filter) files = files.filter((f) => f.includes(filter));
if (files.length === 0) {
  console.error('run-tests: no test files found under test/ — refusing to report a green run with nothing tested');
  process.exit(1);
}
console.log(`run-tests: ${files.length} files\n  ${files.join('\n  ')}`);
const guard = unit ? ['--import', './scripts/unit-guard.mjs'] : [];
// Two lanes on the full suite: the files in WAITING_TESTS (mostly waiting on real time: restarts,
// stalls, SSH, second-boundaries) run in a second `node --test` beside the rest, so their waits
// overlap the CPU-bound files instead of adding to them (the suite's budget is ~20 min on 2 cores;
// one lane took ~22). Lane B's report is kept in a file and printed when both lanes are done, so the
// two reports never interleave. NSA_TOP_TEST_LANES=1 runs every file in one lane, one at a time.
const oneLane = unit || process.env.NSA_TOP_TEST_LANES === '1';
const laneB = oneLane ? [] : files.filter((f) => WAITING_TESTS.includes(f));
const laneA = files.filter((f) => !laneB.includes(f));
// Besides the spec report, scripts/file-times.mjs logs each file's wall time (to a temp file, read
// back below), so every run ends with the files sorted by time: where the suite's budget goes.
const timesDir = mkdtempSync(join(tmpdir(), 'nsa-top-test-times-'));
// A test file that never exits (a handle left open after a failed assertion) would hold CI until
// its 90-minute limit: give the whole run a bound well above its usual ~15 minutes on 2 idle cores
// (NSA_TOP_TEST_LIMIT_MIN raises it on a machine shared with other work).
const limitMin = Number(process.env.NSA_TOP_TEST_LIMIT_MIN || 40);
const lanes = [
  { name: 'A', files: laneA },
  { name: 'B', files: laneB },
].filter((l) => l.files.length > 0);
const started = Date.now();
const results = await Promise.all(lanes.map((l) => runLane(l, lanes.length > 1 && l.name === 'B')));
for (const [i, l] of lanes.entries()) {
  if (!results[i].report) continue;
  console.log(`\nrun-tests: lane ${l.name}'s report (${l.files.length} files, run beside lane A)`);
  process.stdout.write(readFileSync(results[i].report, 'utf8'));
}
printFileTimes(lanes.map((l) => l.times));
const timedOut = results.some((r) => r.timedOut);
if (timedOut) {
  console.error(
    `run-tests: the run exceeded ${limitMin} minutes and was stopped — a test file did not exit (an open handle?)`,
  );
}
const failed = lanes.filter((_, i) => results[i].code !== 0).map((l) => l.name);
if (lanes.length > 1) {
  console.log(
    `run-tests: ${((Date.now() - started) / 1000).toFixed(0)} s in all; ` +
      (failed.length ? `lane ${failed.join(' and ')} failed (see its report's failing tests)` : 'both lanes passed'),
  );
}
rmSync(timesDir, { recursive: true, force: true });
process.exit(timedOut || failed.length ? 1 : 0);

// Runs one lane's files with node's own runner (one file at a time within the lane); lane B's spec
// report goes to a file (returned as report), lane A's straight to stdout.
function runLane(lane, toFile) {
  lane.times = join(timesDir, `times-${lane.name}.tsv`);
  const report = toFile ? join(timesDir, `report-${lane.name}.txt`) : null;
  const reporters = ['--test-reporter=spec', `--test-reporter-destination=${report ?? 'stdout'}`];
  reporters.push('--test-reporter=./scripts/file-times.mjs', `--test-reporter-destination=${lane.times}`);
  const args = ['--import', 'tsx', ...guard, '--test', ...reporters, ...lane.files];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
      // no test leaves a kept SSH connection behind (src/remote/ssh/keep.ts) unless it asks for one
      env: { NSA_TOP_SSH_KEEP: '0', ...process.env, NSA_TOP_TEST: '1' },
    });
    let timedOut = false;
    const limit = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, limitMin * 60_000);
    child.on('exit', (code) => {
      clearTimeout(limit);
      resolve({ code: code ?? 1, timedOut, report });
    });
  });
}

function printFileTimes(timesFiles) {
  let lines = [];
  for (const f of timesFiles) {
    try {
      lines.push(...readFileSync(f, 'utf8').split('\n').filter(Boolean));
    } catch {
      // no file: the lane's runner died before any file ran; its own error says why
    }
  }
  const done = new Map();
  const started = new Set();
  for (const line of lines) {
    const f = line.split('\t');
    if (f[0] === 'start') started.add(relative(root, f[1]));
    else done.set(relative(root, f[3]), { ms: Number(f[0]), cpu: Number(f[1]), ok: f[2] === 'pass' });
  }
  if (done.size === 0 && started.size === 0) return;
  const rows = [...done].sort((x, y) => y[1].ms - x[1].ms);
  const sum = (k) => rows.reduce((t, [, v]) => t + Math.max(v[k], 0), 0);
  const s = (ms) => (ms < 0 ? '-' : (ms / 1000).toFixed(1)).padStart(7);
  // CPU: the file's process and those it waited for (scripts/file-times.mjs) — steadier than wall
  // time on a shared machine
  const out = [
    `run-tests: time per file, slowest first (${rows.length} files; wall ${s(sum('ms')).trim()} s, CPU ${s(sum('cpu')).trim()} s in all)`,
    '   wall s    CPU s',
  ];
  for (const [f, v] of rows) out.push(`${s(v.ms)}  ${s(v.cpu)}  ${v.ok ? '  ' : '✗ '}${f}`);
  for (const f of started) if (!done.has(f)) out.push(`  (unfinished)     ${f}`);
  console.log(out.join('\n'));
}
