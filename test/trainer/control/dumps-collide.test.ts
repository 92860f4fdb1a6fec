// Dumps that never lie, against a stand-in for the real trainer's SIGUSR1 handler
// (standin/train_showcase.py: `stackdump_<second>.txt`, no rank, no pid; two ranks answering in
// one second share one file and the second write replaces the first). Two live stand-in ranks are
// dumped through the real dump action (dumpAll) again and again, each handler answering after a
// random delay (a loaded box): every rank's file must hold that rank's own write (each stand-in logs
// what it wrote), no file is claimed for two ranks, and "k/n ranks dumped" counts only ranks with a
// file of their own; a rank whose stack was lost is named so. DUMPS_N (default 15) sets how many
// dumps in a row; `DUMPS_N=50` is the figure, run by hand.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LocalHost } from '../../../src/remote/local/host.js';
import { readProc } from '../../../src/remote/procs.js';
import { currentActor, dumpAll, readActions, type RankTarget } from '../../../src/trainer/control/actions.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const STANDIN = join(HERE, 'standin', 'train_showcase.py');
const PY = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const HAVE_PY = spawnSync(PY, ['-c', 'pass']).status === 0;
const host = new LocalHost();
const kids: ChildProcess[] = [];
const dirs: string[] = [];
after(() => {
  for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Rank {
  target: RankTarget;
  child: ChildProcess;
}

/** A 2-rank "run": stand-ins whose CONFIG's train.out_dir is the run dir (how the real trainer is tied). */
async function startRun(tag: string, jitter: string[]): Promise<{ dir: string; side: string; ranks: Rank[] }> {
  // like a checkout of the trainer: the run dir under the cwd, CONFIG relative to it
  const work = mkdtempSync(join(tmpdir(), `nsa-top-${tag}-`));
  dirs.push(work);
  const dir = join(work, 'artifacts', 'run');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'train.log'), '');
  writeFileSync(join(work, 'config.yaml'), 'train:\n  out_dir: artifacts/run\n  steps: 100\n');
  const ranks: Rank[] = [];
  for (const [r, j] of jitter.entries()) {
    const child = spawn(PY, ['-u', STANDIN], {
      cwd: work,
      env: {
        ...process.env,
        CONFIG: 'config.yaml',
        RANK: String(r),
        LOCAL_RANK: String(r),
        WORLD_SIZE: String(jitter.length),
        STANDIN_JITTER_MS: j,
        STANDIN_SIDE_DIR: work,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    kids.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (code) => reject(new Error(`stand-in rank ${r} exited early (${code})`)));
    });
    const p = await readProc(host, child.pid!);
    assert.ok(p, 'stand-in visible in /proc');
    ranks.push({ target: { rank: r, pid: child.pid!, startTime: p.startTime }, child });
  }
  return { dir, side: work, ranks };
}

/** What rank r's stand-in says it wrote: "<name>\t<first line>" lines. */
function writesOf(side: string, r: number): Set<string> {
  const p = join(side, `standin_writes_rank${r}.log`);
  return new Set(existsSync(p) ? readFileSync(p, 'utf8').split('\n').filter(Boolean) : []);
}

/** Every claim holds: the claimed file's content is a write its rank made; no file twice; k/n honest. */
function checkSet(
  side: string,
  out: Awaited<ReturnType<typeof dumpAll>>,
  detail: string,
): { dumped: number; lost: number } {
  const files = out.perRank.filter((r) => r.file).map((r) => r.file!);
  assert.equal(new Set(files).size, files.length, `a file claimed for two ranks: ${files.join(', ')}`);
  for (const r of out.perRank) {
    if (r.status === 'dumped') {
      assert.ok(r.file, `rank ${r.rank} dumped without a file`);
      const name = r.file.split('/').pop()!;
      const head = readFileSync(r.file, 'utf8').split('\n')[0]!;
      assert.ok(
        writesOf(side, r.rank).has(`${name}\t${head}`),
        `rank ${r.rank} was given ${name} ("${head}"), which it did not write`,
      );
    } else {
      assert.equal(r.status, 'no-answer', `rank ${r.rank}: ${r.status} ${r.why}`);
      assert.match(r.why!, /^no stack written \(lost\)/);
      assert.match(detail, new RegExp(`rank ${r.rank}: no stack written \\(lost\\)`));
    }
  }
  const k = out.perRank.filter((r) => r.status === 'dumped').length;
  assert.match(detail, new RegExp(`^${k}/${out.perRank.length} ranks dumped`));
  return { dumped: k, lost: out.perRank.length - k };
}

test('dump of a live 2-rank stand-in of the real trainer, many times in a row: every stack its own or named lost', async (t) => {
  if (!HAVE_PY) return t.skip(`no working ${PY}: the real trainer's stand-in cannot run`);
  const n = Number(process.env.DUMPS_N ?? 15);
  // both ranks' handlers answer 0-900 ms late: in one second often enough to collide without care
  const { dir, side, ranks } = await startRun('dumps-collide', ['0-900', '0-900']);
  const who = await currentActor(host);
  const t0 = Date.now();
  let dumped = 0;
  let lost = 0;
  for (let i = 0; i < n; i++) {
    const out = await dumpAll(
      host,
      dir,
      ranks.map((r) => r.target),
      who,
      { waitMs: 4000 },
    );
    const [rec] = await readActions(host, dir, 1);
    const s = checkSet(side, out, rec!.detail);
    dumped += s.dumped;
    lost += s.lost;
    // the record says which file is whose, for the panel and `status`
    const per = rec!.target.perRank as { rank: number; file: string | null }[];
    for (const r of out.perRank) assert.equal(per.find((p) => p.rank === r.rank)?.file ?? undefined, r.file);
  }
  const s = (Date.now() - t0) / 1000;
  t.diagnostic(
    `${n} dumps of 2 ranks in ${s.toFixed(1)} s (${(s / n).toFixed(2)} s each): ${dumped} stacks, ${lost} lost`,
  );
  // nothing hangs here: a lost stack would be a wait given up too early
  assert.equal(lost, 0);
  // and no dump wrote over the one before it: a dump's first rank waits past the second the last
  // dump's file was named for, so every stack of every set is still on disk
  const files = readdirSync(dir).filter((f) => /^stackdump_\d+\.txt$/.test(f));
  assert.equal(files.length, 2 * n, `${files.length} stack files kept for ${n} dumps of 2 ranks`);
});

test('a rank that answers after the wait is named lost, and its late write is never given to another rank', async (t) => {
  if (!HAVE_PY) return t.skip(`no working ${PY}: the real trainer's stand-in cannot run`);
  // rank 0 answers 1.0-1.8 s late with a 1.2 s wait: given up on, its write lands near rank 1's
  // (same second or not, by chance): rank 1 keeps only a file it wrote, or is lost itself
  const { dir, side, ranks } = await startRun('dumps-late', ['1000-1800', '0-0']);
  const who = await currentActor(host);
  let lostSeen = 0;
  for (let i = 0; i < 5; i++) {
    const out = await dumpAll(
      host,
      dir,
      ranks.map((r) => r.target),
      who,
      { waitMs: 1200 },
    );
    const [rec] = await readActions(host, dir, 1);
    const s = checkSet(side, out, rec!.detail);
    lostSeen += s.lost;
    // let rank 0's late write land before the next round: its i+1-th (each dump signals it once)
    for (const end = Date.now() + 10_000; writesOf(side, 0).size < i + 1;) {
      assert.ok(Date.now() < end, `rank 0's late write of round ${i + 1} never landed`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  assert.ok(lostSeen > 0, 'rank 0 answers after the wait at least once');
});
