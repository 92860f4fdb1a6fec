// The fuzz suite, process tier: the real CLI (`status`, `report`, `watchdog --once`, from dist/:
// build first) on a few hundred generated hostile run dirs, each run with a time limit. Properties:
// 0 crashes (every exit is 0, 1 or 2, no stack trace, no V8 abort), 0 hangs (each command ends
// within its limit), and no ESC or C0/C1 control on the terminal. Seeded: FUZZ_SEED=<seed> replays
// a run, FUZZ_DIRS=<n> sets how many dirs (default 40 in `npm test`; `npm run fuzz` runs 300 on a new seed). Over the loopback sshd a small sample runs
// too (FUZZ_SSH_DIRS, default 6).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { makeSpecial, Rng, seedFromEnv, writeRunDir } from './gen.js';

const BIN = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single', import.meta.url));
const SEED = seedFromEnv();
const DIRS = Number(process.env.FUZZ_DIRS || 40);
const SSH_DIRS = Number(process.env.FUZZ_SSH_DIRS || 6);
/** generous: a loaded 2-core box; a hang is a command still running at this limit */
const LIMIT_MS = 60_000;
const CONCURRENCY = 2;

const BAD = /[\x00-\x08\x0b-\x1f\x7f]|[\x80-\x9f]/u;
const STACK =
  /^\s+at .+(:\d+:\d+\)?|\(native\))$|FATAL ERROR|Allocation failed|RangeError|TypeError|ReferenceError|Maximum call stack/m;

interface Outcome {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  hung: boolean;
}

function runCli(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, NSA_TOP_TEST: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout.length < 4_000_000 ? (stdout += b.toString('utf8')) : null));
    child.stderr.on('data', (b: Buffer) => (stderr.length < 4_000_000 ? (stderr += b.toString('utf8')) : null));
    let hung = false;
    const timer = setTimeout(() => {
      hung = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, LIMIT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, hung });
    });
  });
}

async function pool<T>(items: T[], n: number, f: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await f(items[i++]!);
    }),
  );
}

function judge(o: Outcome, what: string, problems: string[], counts: Record<string, number>): void {
  counts.runs = (counts.runs ?? 0) + 1;
  counts[`exit${o.code}`] = (counts[`exit${o.code}`] ?? 0) + 1;
  if (o.hung) problems.push(`${what}: HUNG (killed after ${LIMIT_MS} ms)`);
  else if (o.code === null || ![0, 1, 2].includes(o.code))
    problems.push(`${what}: exit ${o.code ?? o.signal}\n${o.stderr.slice(-1500)}`);
  const st = STACK.exec(o.stderr);
  if (st)
    problems.push(
      `${what}: stack trace / crash on stderr: ${JSON.stringify(o.stderr.slice(Math.max(0, st.index - 300), st.index + 500))}`,
    );
  for (const [name, text] of [
    ['stdout', o.stdout],
    ['stderr', o.stderr],
  ] as const) {
    const m = BAD.exec(text);
    if (m)
      problems.push(
        `${what}: control 0x${m[0].charCodeAt(0).toString(16)} on ${name}: ${JSON.stringify(text.slice(Math.max(0, m.index - 60), m.index + 60))}`,
      );
  }
}

test(
  `the CLI on ${DIRS} generated hostile run dirs: 0 crashes, 0 hangs, no escapes (seed ${SEED})`,
  { timeout: 3_600_000 },
  async () => {
    const r = new Rng(SEED);
    const root = mkdtempSync(join(tmpdir(), 'nsa-fuzz-cli-'));
    const problems: string[] = [];
    const counts: Record<string, number> = {};
    try {
      const dirs: { dir: string; made: string[] }[] = [];
      for (let i = 0; i < DIRS; i++) {
        const dir = join(root, `r${i}`);
        dirs.push({ dir, made: writeRunDir(r, dir, { huge: true, maxLines: 80 }) });
      }
      await pool(dirs, CONCURRENCY, async ({ dir, made }) => {
        const cmds = [
          ['status', dir],
          ['report', dir],
          ['watchdog', '--once', dir],
        ];
        // the JSON form on every fourth dir: it must parse back, whatever the dir held
        if (dir.endsWith('0') || dir.endsWith('4')) cmds.push(['status', '--json', dir]);
        for (const args of cmds) {
          const o = await runCli(args);
          judge(o, `nsa-top ${args.join(' ')} [${made.join(', ')}]`, problems, counts);
          if (args[1] === '--json' && o.code === 0) {
            try {
              JSON.parse(o.stdout);
            } catch (e) {
              problems.push(`${dir}: status --json is not JSON: ${(e as Error).message}`);
            }
          }
        }
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    console.log(`fuzz CLI: seed ${SEED} dirs ${DIRS} ${JSON.stringify(counts)} problems ${problems.length}`);
    assert.deepEqual(problems.slice(0, 10), [], `FUZZ_SEED=${SEED}: ${problems.length} problems`);
  },
);

test(
  `over the loopback sshd: ${SSH_DIRS} generated dirs through status/report/watchdog --host (seed ${SEED})`,
  { timeout: 1_200_000 },
  async (t) => {
    let sshd: import('../helpers/sshd.js').TestSshd | null = null;
    try {
      const { startSshd } = await import('../helpers/sshd.js');
      sshd = await startSshd();
    } catch (e) {
      t.skip(`no sshd here: ${(e as Error).message}`);
      return;
    }
    const r = new Rng(SEED + 7);
    const root = mkdtempSync(join(tmpdir(), 'nsa-fuzz-ssh-'));
    const home = join(root, 'home');
    mkdirSync(join(home, '.ssh'), { recursive: true });
    writeFileSync(join(home, '.ssh', 'known_hosts'), sshd.knownHostsLine() + '\n');
    const hostArgs = ['--host', `${userInfo().username}@127.0.0.1:${sshd.port}`, '-i', sshd.userKey];
    const env = { HOME: home, SSH_AUTH_SOCK: '' };
    const problems: string[] = [];
    const counts: Record<string, number> = {};
    try {
      // a symlink loop and a FIFO in a real run: named, never the whole dir's failure (once "EIO")
      const fixture = join(root, 'fixture');
      cpSync(FIXTURE, fixture, { recursive: true });
      makeSpecial(fixture, 'val.csv', 'loop');
      makeSpecial(fixture, 'env.json', 'fifo');
      const st = await runCli(['status', fixture, ...hostArgs], env);
      assert.equal(st.code, 0, st.stderr);
      assert.match(st.stdout, /env\.json: .*not a regular file \(a FIFO\)/);
      assert.match(st.stdout, /step +40 \/ 40/);
      // the dirs made first (the seed's order), then looked at CONCURRENCY at a time, as above
      const dirs: { dir: string; made: string[] }[] = [];
      for (let i = 0; i < SSH_DIRS; i++) {
        const dir = join(root, `r${i}`);
        dirs.push({ dir, made: writeRunDir(r, dir, { maxLines: 40 }) });
      }
      await pool(dirs, CONCURRENCY, async ({ dir, made }) => {
        for (const args of [
          ['status', dir],
          ['report', dir],
          ['watchdog', '--once', dir],
        ]) {
          const o = await runCli([...args, ...hostArgs], env);
          judge(o, `nsa-top ${args.join(' ')} over ssh [${made.join(', ')}]`, problems, counts);
        }
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
      await sshd.stop();
    }
    console.log(`fuzz CLI over ssh: seed ${SEED} ${JSON.stringify(counts)} problems ${problems.length}`);
    assert.deepEqual(problems.slice(0, 10), [], `FUZZ_SEED=${SEED}: ${problems.length} problems`);
  },
);
