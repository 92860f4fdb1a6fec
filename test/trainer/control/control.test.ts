import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import {
  currentActor,
  dumpAll,
  escalate,
  readActionLog,
  readActions,
  removeStaleHalt,
  requestHalt,
} from '../../../src/trainer/control/actions.js';
import { stepsAtRisk } from '../../../src/checks/control.js';
import { auditedEvent } from '../../../src/trainer/control/audit.js';
import type { RunSnapshot } from '../../../src/trainer/run/snapshot.js';
import { killKids, startKid, tempDir, type Kid } from './helpers.js';

const host = new LocalHost();

function nsaCheckpoint(payload: Buffer): Buffer {
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(payload) >>> 0);
  return Buffer.concat([payload, crc, Buffer.from('NSACKEND')]);
}

test('actor names the user and this process', async () => {
  const a = await currentActor(host);
  assert.ok(a.user.length > 0);
  assert.equal(a.pid, process.pid);
  assert.ok(a.host.length > 0);
});

test('inside tmux the actor names the tmux session and pane', async (t) => {
  if (spawnSync('tmux', ['-V']).status !== 0) return t.skip('tmux not installed');
  const dir = tempDir('actor-tmux');
  const script = join(dir, 'actor.mts');
  const out = join(dir, 'actor.json');
  const root = fileURLToPath(new URL('../../..', import.meta.url));
  writeFileSync(
    script,
    `import { writeFileSync } from 'node:fs';\nimport { LocalHost } from ${JSON.stringify(join(root, 'src/remote/local/host.ts'))};\n` +
      `import { currentActor } from ${JSON.stringify(join(root, 'src/trainer/control/actions.ts'))};\n` +
      `writeFileSync(${JSON.stringify(out)}, JSON.stringify(await currentActor(new LocalHost())));\n`,
  );
  const sock = `nsa-top-test-${process.pid}`; // a private tmux server, stopped below
  const cmd = `cd ${JSON.stringify(root)} && ${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(script)}`;
  assert.equal(spawnSync('tmux', ['-L', sock, 'new-session', '-d', '-s', 'drill', cmd]).status, 0);
  try {
    const end = Date.now() + 20000;
    while (!existsSync(out) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    const a = JSON.parse(readFileSync(out, 'utf8'));
    assert.match(a.tmux, /session drill:0\.0/);
    assert.match(a.tmux, /%\d+/);
  } finally {
    spawnSync('tmux', ['-L', sock, 'kill-server']);
  }
});

test('action log: append and read back, bad lines skipped and counted, limit keeps the newest', async () => {
  const dir = tempDir('actions');
  const who = await currentActor(host);
  for (let i = 0; i < 5; i++)
    await auditedEvent(host, dir, { actor: who, action: 'dump', target: { i } }, { result: 'ok', detail: `n${i}` });
  appendFileSync(join(dir, '.nsa-top', 'actions.jsonl'), 'not json\n{"ts":1}\n');
  await auditedEvent(host, dir, { actor: who, action: 'halt', target: {} }, { result: 'ok', detail: 'last' });
  const log = await readActionLog(host, dir);
  assert.equal(log.records.length, 6);
  assert.equal(log.badLines, 2);
  assert.equal(log.records.at(-1)!.detail, 'last');
  const two = await readActions(host, dir, 2);
  assert.deepEqual(
    two.map((r) => r.detail),
    ['n4', 'last'],
  );
  assert.deepEqual(await readActions(host, tempDir('empty')), []);
});

test('dumpAll: one dump per rank from real processes, staggered into distinct files, logged', async () => {
  const dir = tempDir('dump');
  const kids: Kid[] = [];
  try {
    kids.push(await startKid(host, dir), await startKid(host, dir));
    const who = await currentActor(host);
    const progress: string[] = [];
    const out = await dumpAll(
      host,
      dir,
      kids.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime })),
      who,
      { waitMs: 5000, onProgress: (m) => progress.push(m) },
    );
    assert.deepEqual(
      out.perRank.map((r) => r.status),
      ['dumped', 'dumped'],
    );
    const files = out.perRank.map((r) => r.file!);
    assert.notEqual(files[0], files[1], 'the two ranks must not share one dump file');
    for (const [i, f] of files.entries()) assert.match(readFileSync(f, 'utf8'), new RegExp(`pid ${kids[i]!.pid}`));
    assert.equal(readdirSync(dir).filter((n) => n.startsWith('stackdump_')).length, 2);
    assert.ok(progress.length >= 2);
    const log = await readActions(host, dir);
    assert.equal(log.length, 1);
    assert.equal(log[0]!.action, 'dump');
    assert.equal(log[0]!.result, 'ok');
    assert.equal(log[0]!.who.user, who.user);
  } finally {
    killKids(kids);
  }
});

test('dumpAll refuses a pid whose start time does not match, and names a stopped rank', async () => {
  const dir = tempDir('dump-refuse');
  const kids: Kid[] = [];
  try {
    kids.push(await startKid(host, dir), await startKid(host, dir));
    process.kill(kids[1]!.pid, 'SIGSTOP');
    const who = await currentActor(host);
    const out = await dumpAll(
      host,
      dir,
      [
        { rank: 0, pid: kids[0]!.pid, startTime: String(Number(kids[0]!.startTime) + 7) }, // a recycled pid
        { rank: 1, pid: kids[1]!.pid, startTime: kids[1]!.startTime },
      ],
      who,
      { waitMs: 1200 },
    );
    assert.equal(out.perRank[0]!.status, 'refused');
    assert.match(out.perRank[0]!.why!, /start time/);
    assert.equal(out.perRank[1]!.status, 'no-answer');
    assert.match(out.perRank[1]!.why!, /stopped/);
    assert.equal(typeof out.pySpy, 'boolean');
    // the refused process got no signal: no dump from it even after a while
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(readdirSync(dir).filter((n) => n.startsWith('stackdump_')).length, 0);
    const [rec] = await readActions(host, dir);
    assert.equal(rec!.result, 'failed');
    assert.match(rec!.detail, /rank 0 refused/);
    assert.match(rec!.detail, /rank 1: no stack written \(lost\)/);
  } finally {
    killKids(kids);
  }
});

test('dumpAll: a rank that answers late is still waited for (without holding up the others) and matched to its dump', async () => {
  const dir = tempDir('dump-late');
  const kids: Kid[] = [];
  try {
    // real-trainer names (no pid): the late rank is the last one signalled
    kids.push(await startKid(host, dir), await startKid(host, dir, undefined, { DUMP_DELAY_MS: '1500' }));
    const who = await currentActor(host);
    const out = await dumpAll(
      host,
      dir,
      kids.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime })),
      who,
      { answerMs: 400, waitMs: 5000 },
    );
    assert.deepEqual(
      out.perRank.map((r) => r.status),
      ['dumped', 'dumped'],
    );
    for (const [i, r] of out.perRank.entries())
      assert.match(readFileSync(r.file!, 'utf8'), new RegExp(`pid ${kids[i]!.pid}\\b`));
  } finally {
    killKids(kids);
  }
  // reference-trainer names carry rank and pid: a late middle rank is matched exactly
  const dir2 = tempDir('dump-late-pid');
  const kids2: Kid[] = [];
  try {
    kids2.push(
      await startKid(host, dir2, undefined, { DUMP_RANK: '0' }),
      await startKid(host, dir2, undefined, { DUMP_RANK: '1', DUMP_DELAY_MS: '1500' }),
      await startKid(host, dir2, undefined, { DUMP_RANK: '2' }),
    );
    const out = await dumpAll(
      host,
      dir2,
      kids2.map((k, i) => ({ rank: i, pid: k.pid, startTime: k.startTime })),
      await currentActor(host),
      { answerMs: 400, waitMs: 5000 },
    );
    assert.deepEqual(
      out.perRank.map((r) => r.status),
      ['dumped', 'dumped', 'dumped'],
    );
    for (const [i, r] of out.perRank.entries()) assert.match(r.file!, new RegExp(`_rank${i}_${kids2[i]!.pid}\\.txt$`));
  } finally {
    killKids(kids2);
  }
});

test('dumpAll never signals a launcher (torchrun does not forward SIGUSR1)', async () => {
  const dir = tempDir('dump-launcher');
  const kids: Kid[] = [];
  try {
    kids.push(await startKid(host, dir, 'torchrun'));
    const out = await dumpAll(
      host,
      dir,
      [{ rank: 0, pid: kids[0]!.pid, startTime: kids[0]!.startTime }],
      await currentActor(host),
      { waitMs: 500 },
    );
    assert.equal(out.perRank[0]!.status, 'refused');
    assert.match(out.perRank[0]!.why!, /launcher/);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(readdirSync(dir).filter((n) => n.startsWith('stackdump_')).length, 0);
  } finally {
    killKids(kids);
  }
});

test('halt now writes the documented content, keeps an existing reason, and is logged', async () => {
  const dir = tempDir('halt');
  const who = await currentActor(host);
  const r = await requestHalt(host, dir, 'now', who);
  assert.equal(r.result, 'ok');
  assert.equal(readFileSync(join(dir, '.HALT'), 'utf8'), `halt: manual_stop ${who.user}\n`);
  writeFileSync(join(dir, '.HALT'), 'halt: nan_loss\n');
  const again = await requestHalt(host, dir, 'now', who);
  assert.match(again.detail, /nan_loss/);
  assert.equal(readFileSync(join(dir, '.HALT'), 'utf8'), 'halt: nan_loss\n');
  assert.deepEqual(
    (await readActions(host, dir)).map((x) => x.action),
    ['halt', 'halt'],
  );
});

test('halt after the next checkpoint waits for a COMPLETE newer checkpoint, then writes .HALT', async () => {
  const dir = tempDir('halt-ckpt');
  writeFileSync(join(dir, 'checkpoint_step25.pt'), nsaCheckpoint(Buffer.alloc(1000, 1)));
  const who = await currentActor(host);
  const p = requestHalt(host, dir, 'after-checkpoint', who, { pollMs: 100 });
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(existsSync(join(dir, '.HALT')), false, 'no halt before the next checkpoint');
  writeFileSync(join(dir, 'checkpoint_step50.pt'), Buffer.alloc(500, 2)); // half-written: no trailer
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(existsSync(join(dir, '.HALT')), false, 'a half-written checkpoint does not count');
  writeFileSync(join(dir, 'checkpoint_step50.pt'), nsaCheckpoint(Buffer.alloc(1000, 2)));
  const rec = await p;
  assert.equal(rec.result, 'ok');
  assert.equal(rec.target.checkpointStep, 50);
  assert.ok(existsSync(join(dir, '.HALT')));
  const log = await readActions(host, dir);
  assert.deepEqual(
    log.map((x) => x.result),
    ['started', 'ok'],
  );
});

test('halt after checkpoint can be cancelled; nothing written', async () => {
  const dir = tempDir('halt-cancel');
  const who = await currentActor(host);
  const ac = new AbortController();
  const p = requestHalt(host, dir, 'after-checkpoint', who, { signal: ac.signal, pollMs: 100 });
  setTimeout(() => ac.abort(), 200);
  const rec = await p;
  assert.equal(rec.result, 'failed');
  assert.match(rec.detail, /cancelled/);
  assert.equal(existsSync(join(dir, '.HALT')), false);
});

test('read-only refuses every mutating action and writes nothing', async () => {
  const dir = tempDir('ro');
  const who = await currentActor(host);
  const kids: Kid[] = [];
  process.env.NSA_TOP_READ_ONLY = '1';
  try {
    kids.push(await startKid(host, dir));
    const t = [{ rank: 0, pid: kids[0]!.pid, startTime: kids[0]!.startTime }];
    assert.equal((await requestHalt(host, dir, 'now', who)).result, 'refused');
    assert.equal((await escalate(host, dir, t, 'SIGINT', who)).result, 'refused');
    writeFileSync(join(dir, '.HALT'), 'halt: manual_stop\n');
    assert.equal((await removeStaleHalt(host, dir, who)).result, 'refused');
    const d = await dumpAll(host, dir, t, who);
    assert.deepEqual(
      d.perRank.map((r) => r.status),
      ['refused'],
    );
    assert.ok(existsSync(join(dir, '.HALT')));
    assert.equal(existsSync(join(dir, '.nsa-top')), false);
    assert.equal(kids[0]!.child.exitCode, null);
  } finally {
    delete process.env.NSA_TOP_READ_ONLY;
    killKids(kids);
  }
  // the option alone is enough too
  assert.equal((await requestHalt(host, dir, 'now', who, { readOnly: true })).result, 'refused');
});

test('escalate signals verified ranks only', async () => {
  const dir = tempDir('esc');
  const who = await currentActor(host);
  const kids: Kid[] = [];
  try {
    kids.push(await startKid(host, dir), await startKid(host, dir));
    const rec = await escalate(
      host,
      dir,
      [
        { rank: 0, pid: kids[0]!.pid, startTime: kids[0]!.startTime },
        { rank: 1, pid: kids[1]!.pid, startTime: '1' },
      ],
      'SIGINT',
      who,
    );
    assert.equal(rec.result, 'partial');
    assert.deepEqual(rec.target.sentTo, [kids[0]!.pid]);
    assert.equal((await kids[0]!.exited).code, 130);
    assert.equal(kids[1]!.child.exitCode, null, 'the unverified pid was not signalled');
    const [logged] = await readActions(host, dir);
    assert.equal(logged!.action, 'escalate-sigint');
  } finally {
    killKids(kids);
  }
});

test('removing a stale .HALT logs its content; .anomaly_type is kept', async () => {
  const dir = tempDir('stale');
  writeFileSync(join(dir, '.HALT'), 'halt: heartbeat_stall\n');
  writeFileSync(join(dir, '.anomaly_type'), 'heartbeat_stall\n');
  const who = await currentActor(host);
  const rec = await removeStaleHalt(host, dir, who);
  assert.equal(rec.result, 'ok');
  assert.equal(existsSync(join(dir, '.HALT')), false);
  assert.ok(existsSync(join(dir, '.anomaly_type')));
  const [logged] = await readActions(host, dir);
  assert.equal(logged!.target.content, 'halt: heartbeat_stall');
});

test('steps at risk: since the last complete checkpoint; none for a trainer that saves on halt', () => {
  const snap = {
    step: 130,
    identity: { trainer: 'nsa-vibe' },
    segments: [{ index: 0, firstStep: 1, lastStep: 130, startTs: 0, pid: 1, cause: 'start' }],
    checkpoints: [
      { name: 'a', path: 'a', step: 100, size: 1, mtimeMs: 1, fsdp: false, complete: true },
      { name: 'b', path: 'b', step: 125, size: 1, mtimeMs: 2, fsdp: false, complete: false },
    ],
  } as unknown as RunSnapshot;
  assert.deepEqual(stepsAtRisk(snap), { lastCheckpointStep: 100, step: 130, lost: 30, savesOnHalt: false });
  const ref = { ...snap, identity: { trainer: 'nsa-top-reference' } } as unknown as RunSnapshot;
  assert.equal(stepsAtRisk(ref).lost, 0);
});
