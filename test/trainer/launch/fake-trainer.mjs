// A stand-in workload speaking the reference trainer's flags (--out --ranks --steps --save-every
// --log-every --resume --inject crash@step=K|hang@step=K|nan@step=K), for supervisor tests that must not
// depend on the model code. One process; writes heartbeat_rank0.jsonl progress lines, training.csv,
// checkpoint_step{N}.pt in the reference format's framing (…payload | u32 CRC | "NSACKEND"),
// honours .HALT (checkpoint, then exit 0) and SIGINT (exit 130). Step time: FAKE_STEP_MS (40).
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
// Like the real trainer when no --out is given: artifacts go to the CONFIG's train.out_dir.
let out = opt('--out');
if (!out) {
  if (!process.env.CONFIG) {
    console.log('[boot] loading config configs/train_showcase.yaml (CONFIG unset)');
    process.exit(2);
  }
  console.log(`[boot] loading config ${process.env.CONFIG}`);
  out = /out_dir:\s*(\S+)/.exec(readFileSync(process.env.CONFIG, 'utf8'))[1];
}
const steps = Number(opt('--steps', '100'));
const saveEvery = Number(opt('--save-every', '10'));
const resume = opt('--resume', null);
const injects = argv.flatMap((a, i) => (a === '--inject' ? [argv[i + 1]] : []));
const crashAt = injects.map((s) => /^crash@step=(\d+)/.exec(s)).find(Boolean)?.[1];
const hangAt = injects.map((s) => /^hang@step=(\d+)/.exec(s)).find(Boolean)?.[1];
const nanAt = injects.map((s) => /^nan@step=(\d+)/.exec(s)).find(Boolean)?.[1];
const stepMs = Number(process.env.FAKE_STEP_MS ?? '40');

mkdirSync(out, { recursive: true });
let step = 0;
if (resume) {
  const buf = readFileSync(resume);
  step = JSON.parse(buf.subarray(8, buf.length - 12).toString('utf8')).step;
  console.log(`[train] resumed from ${resume} at step ${step}`);
}
const hb = (msg, extra = {}) =>
  appendFileSync(
    join(out, 'heartbeat_rank0.jsonl'),
    JSON.stringify({ ts: Date.now() / 1000, pid: process.pid, rank: 0, step, msg, ...extra }) + '\n',
  );
hb('boot', { phase: 'start' });

function save() {
  const payload = Buffer.concat([Buffer.from('NSATOPCK'), Buffer.from(JSON.stringify({ step }))]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(payload) >>> 0);
  const tmp = join(out, `.checkpoint_step${step}.tmp`);
  writeFileSync(tmp, Buffer.concat([payload, crc, Buffer.from('NSACKEND')]));
  renameSync(tmp, join(out, `checkpoint_step${step}.pt`));
}

process.on('SIGINT', () => {
  console.log('[train] SIGINT');
  process.exit(130);
});
process.on('SIGUSR1', () => {
  writeFileSync(
    join(out, `stackdump_${Math.floor(Date.now() / 1000)}_rank0_${process.pid}.txt`),
    `Signal 10 at ${new Date().toISOString()}Z\nstep ${step}\n`,
  );
});

function tick() {
  if (existsSync(join(out, '.HALT'))) {
    console.log('[train] HALT file detected — stopping gracefully.');
    save();
    writeFileSync(join(out, 'metrics.json'), JSON.stringify({ steps: step }));
    process.exit(0);
  }
  if (step >= steps) {
    writeFileSync(join(out, 'metrics.json'), JSON.stringify({ steps: step }));
    console.log('[train] done');
    process.exit(0);
  }
  step++;
  if (crashAt && step === Number(crashAt)) {
    console.log(`[inject] crash at step ${step}`);
    process.exit(3);
  }
  if (nanAt && step === Number(nanAt)) {
    console.log('[train][FATAL] non-finite loss detected — aborting run.');
    writeFileSync(join(out, '.anomaly_type'), 'nan_loss\n');
    writeFileSync(join(out, '.HALT'), 'halt: nan_loss\n');
    process.exit(0);
  }
  if (hangAt && step === Number(hangAt)) {
    console.log(`[inject] hang at step ${step}`);
    const sab = new Int32Array(new SharedArrayBuffer(4));
    Atomics.wait(sab, 0, 0); // blocks the event loop: no handler runs, like a rank stuck in a collective
  }
  hb('progress', { loss: 5 - step / 100, toks_per_s: 1000 });
  appendFileSync(join(out, 'training.csv'), `${step},${5 - step / 100},0.001,1000\n`);
  console.log(
    `step ${String(step).padStart(4, '0')} | loss ${(5 - step / 100).toFixed(4)} | isatty ${process.stdout.isTTY ? 1 : 0}`,
  );
  if (saveEvery > 0 && step % saveEvery === 0) save();
  setTimeout(tick, stepMs);
}
setTimeout(tick, stepMs);
