// Runs nsa-top did not launch (every runbook run): the model, NSA dims and total steps come from the
// YAML env.json's CONFIG names — relative to the trainer's cwd, which only the live process tells —
// and the log tailed is the runbook's own (training_phase1.log, then training_phase2.log, …).
import assert from 'node:assert/strict';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalHost } from '../../../src/remote/local/host.js';
import { RunModel } from '../../../src/trainer/run/model.js';
import { tempDir } from './helpers.js';

const YAML = (out: string) =>
  `model: {dim: 768, n_layers: 12, n_heads: 12, n_kv_groups: 2, d_k: 64, d_v: 64}\nnsa: {l: 32, d: 16, l_sel: 64, n_sel: 16, w: 512}\ntrain: {steps: 50000, seq_len: 2048, batch_size: 2, log_every: 1, save_every: 5000, out_dir: "${out}"}\n`;
const hb = (step: number, ts: number) =>
  JSON.stringify({ ts, iso: 'x', pid: 7, rank: 0, step, msg: 'progress', loss: 5, toks_per_s: 9000 }) +
  '\n' +
  JSON.stringify({ ts: ts + 0.01, iso: 'x', pid: 7, rank: 0, step, msg: 'step_end' }) +
  '\n';

test('CONFIG relative to the trainer cwd: unknown until the cwd is told, then model, dims, total steps and ETA', async () => {
  const t = tempDir();
  try {
    // the trainer ran from <repo> with CONFIG=configs/m7c.yaml and an absolute out_dir elsewhere:
    // no convention finds the file, only the process's cwd does
    const repo = join(t.dir, 'repo');
    const out = join(t.dir, 'scratch', 'out');
    mkdirSync(join(repo, 'configs'), { recursive: true });
    mkdirSync(out, { recursive: true });
    writeFileSync(join(repo, 'configs', 'm7c.yaml'), YAML(out));
    writeFileSync(join(out, 'env.json'), JSON.stringify({ env: { CONFIG: 'configs/m7c.yaml', WORLD_SIZE: '1' } }));
    const now = Date.now() / 1000;
    writeFileSync(join(out, 'heartbeat_rank0.jsonl'), hb(62, now - 2) + hb(63, now - 1));
    const m = new RunModel(new LocalHost(), out);
    let s = await m.poll();
    assert.equal(s.step, 63);
    assert.equal(s.totalSteps, null, 'nothing tells where configs/m7c.yaml is yet');
    assert.equal(s.identity.model, null);
    assert.equal(m.setTrainerCwd(repo), true);
    s = await m.poll();
    assert.equal(s.totalSteps, 50000);
    assert.equal(s.identity.model?.dim, 768);
    assert.equal(s.identity.nsa?.w, 512);
    assert.equal(s.identity.configFile, join(repo, 'configs', 'm7c.yaml'));
    assert.ok(s.etaS !== null && s.etaS > 0, 'an ETA once the total is known');
  } finally {
    t.done();
  }
});

test('after the trainer exits: the runbook layout (repo/artifacts/<name>) finds CONFIG from the out dir', async () => {
  const t = tempDir();
  try {
    const repo = join(t.dir, 'nsa-vibe');
    const out = join(repo, 'artifacts', 'm7c_125m_2xa100_prod');
    mkdirSync(join(repo, 'configs'), { recursive: true });
    mkdirSync(out, { recursive: true });
    // a decoy with the same relative name elsewhere up the tree whose out_dir is another run
    mkdirSync(join(repo, 'artifacts', 'configs'), { recursive: true });
    writeFileSync(
      join(repo, 'artifacts', 'configs', 'phase1.yaml'),
      YAML('artifacts/other').replace('steps: 50000', 'steps: 7'),
    );
    writeFileSync(
      join(repo, 'configs', 'phase1.yaml'),
      YAML('artifacts/m7c_125m_2xa100_prod').replace('steps: 50000', 'steps: 300'),
    );
    writeFileSync(join(out, 'env.json'), JSON.stringify({ env: { CONFIG: 'configs/phase1.yaml' } }));
    writeFileSync(join(out, 'heartbeat_rank0.jsonl'), hb(1, 1_790_000_000));
    // the runbook's logs: phase 1 first, phase 2 written later
    writeFileSync(join(out, 'training_phase1.log'), '[train] dataset=fineweb_edu tokenizer=gpt2\nphase one\n');
    writeFileSync(join(out, 'training_phase2.log'), '[train] dataset=fineweb_edu tokenizer=gpt2\nphase two\n');
    const old = new Date(Date.now() - 3600_000);
    utimesSync(join(out, 'training_phase1.log'), old, old);
    const s = await new RunModel(new LocalHost(), out).poll();
    assert.equal(s.totalSteps, 300, 'the file whose out_dir is this run, not the nearer decoy');
    assert.equal(s.identity.configFile, join(repo, 'configs', 'phase1.yaml'));
    assert.equal(s.log.file, 'training_phase2.log');
    assert.equal(s.identity.dataset, 'fineweb_edu');
    assert.ok(s.log.lines.includes('phase two'));
  } finally {
    t.done();
  }
});
