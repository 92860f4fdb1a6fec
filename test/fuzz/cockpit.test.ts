// The fuzz suite, the cockpit: the built binary (build first) in a real pty and in tmux, on hostile
// run dirs and with hostile nvidia-smi fakes first on PATH.
// - q quits with an nvidia-smi that ignores SIGTERM and sleeps, or spews without a newline, and no
//   child of the cockpit is left behind (the time it took is printed; tests assert no timings).
// - In tmux (its own server, `set-clipboard on` so that OSC 52 would land in a paste buffer), a run
//   dir full of escapes leaves no paste buffer and no pane title behind; a control pane that prints
//   the same bytes raw shows that the test would see them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN, Cockpit } from '../e2e/pty.js';
import { ESCAPES, makeSpecial, Rng, seedFromEnv, writeRunDir } from './gen.js';
import { procsUnder } from '../helpers/procs.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single', import.meta.url));
const SEED = seedFromEnv();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-fuzz-cockpit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function fakeSmi(name: string, body: string): string {
  const dir = join(tmp, name);
  cpSync(FIXTURE, join(dir, 'unused'), { recursive: true });
  const p = join(dir, 'nvidia-smi');
  writeFileSync(p, `#!/bin/sh\ntrap '' TERM\n${body}\n`);
  chmodSync(p, 0o755);
  return dir;
}

async function until(f: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

for (const [name, body] of [
  ['sleeps', 'sleep 3600'],
  ['spews', "yes 0123456789 | tr -d '\\n'"],
] as const) {
  test(
    `q quits the cockpit with an nvidia-smi that ignores SIGTERM and ${name}, and leaves no child`,
    { timeout: 120_000 },
    async () => {
      const smi = fakeSmi(`smi-${name}`, body);
      const run = join(tmp, `run-${name}`);
      cpSync(FIXTURE, run, { recursive: true });
      // a FIFO named like an artifact too: it must not freeze the keys
      makeSpecial(run, 'env.json', 'fifo');
      const c = new Cockpit([run], { cwd: tmp, env: { PATH: `${smi}:${process.env.PATH}` } });
      try {
        await c.waitFor(/Gates/, 60_000, 'the first frame');
        await until(() => procsUnder(smi).length > 0, 'the fake nvidia-smi to run');
        const t0 = Date.now();
        c.proc.write('q');
        const code = await Promise.race([c.exited, new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 30_000))]);
        assert.equal(code, 0, 'the cockpit ended on q');
        console.log(`# cockpit (nvidia-smi ${name}, ignoring SIGTERM): exited ${Date.now() - t0} ms after q`);
        await until(() => procsUnder(smi).length === 0, 'no fake nvidia-smi left');
      } finally {
        if (c.exitCode === null) c.proc.kill('SIGKILL');
        for (const pid of procsUnder(smi)) {
          try {
            process.kill(pid, 'SIGKILL'); // only the fake's own processes, by pid
          } catch {
            /* gone */
          }
        }
      }
    },
  );
}

const tmuxOk = spawnSync('tmux', ['-V'], { encoding: 'utf8', timeout: 5000 }).status === 0;

test(
  `the cockpit in tmux on hostile run dirs: no paste buffer, no title, q quits (seed ${SEED})`,
  { timeout: 300_000, skip: tmuxOk ? false : 'tmux is not installed' },
  async () => {
    const ENV: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env))
      if (v !== undefined && !['CI', 'NO_COLOR', 'TMUX', 'TMUX_PANE'].includes(k)) ENV[k] = v;
    ENV.TERM = 'xterm-256color';
    const sock = join(tmp, 'tmux.sock');
    const tmux = (...args: string[]) =>
      spawnSync('tmux', ['-S', sock, '-f', '/dev/null', ...args], { encoding: 'utf8', env: ENV, timeout: 10_000 });
    const r = new Rng(SEED + 3);
    try {
      tmux('new-session', '-d', '-s', 'ctl', '-x', '120', '-y', '40', 'sleep 600');
      tmux('set-option', '-g', 'set-clipboard', 'on');
      tmux('set-option', '-g', 'remain-on-exit', 'on');
      // control: the same bytes printed raw do reach tmux (so the checks below can fail). It runs on a
      // server of its own: buffers its pane sets late (under load) can never be blamed on the cockpit.
      const ctlSock = join(tmp, 'tmux-control.sock');
      const ctl = (...args: string[]) =>
        spawnSync('tmux', ['-S', ctlSock, '-f', '/dev/null', ...args], { encoding: 'utf8', env: ENV, timeout: 10_000 });
      const raw = join(tmp, 'raw.txt');
      writeFileSync(raw, ESCAPES.join('') + '\n');
      ctl('new-session', '-d', '-s', 'raw', '-x', '120', '-y', '40', 'sleep 600');
      ctl('set-option', '-g', 'set-clipboard', 'on');
      ctl('new-window', '-t', 'raw', '-n', 'raw', `cat ${raw}; sleep 600`);
      const controlReached = () =>
        ctl('list-buffers').stdout.trim() !== '' ||
        /pwned/.test(ctl('display', '-p', '-t', 'raw:raw', '#{pane_title}').stdout);
      await until(controlReached, 'the control pane to set a buffer or title', 10_000).catch(() => {});
      const controlSeen = controlReached();
      ctl('kill-server');
      for (let i = 0; i < 3; i++) {
        const dir = join(tmp, `hostile${i}`);
        writeRunDir(r, dir, { maxLines: 40 });
        // escapes everywhere the cockpit shows text from: CONFIG, dump names and frames, actions
        writeFileSync(
          join(dir, 'env.json'),
          JSON.stringify({
            env: { CONFIG: `configs/${ESCAPES.join('')}.yaml`, NSA_X: ESCAPES.join('') },
            gpu_name: ESCAPES.join(''),
          }),
        );
        writeFileSync(
          join(dir, `stackdump_179000000${i}_\x1b]2;pwned\x07.txt`),
          `Thread 0x1 (most recent call first):\n  File "${ESCAPES.join('')}", line 1 in x\n`,
        );
        writeFileSync(join(dir, 'train.log'), `[train] ${ESCAPES.join('')}\n`);
        const win = `w${i}`;
        // the exit code is written by a wrapping shell: tmux 3.3 leaves #{pane_dead_status} empty when it
        // sees the pty close before it reaps the child (seen here for a node that exits 0)
        const codeFile = join(tmp, `exit${i}`);
        tmux(
          'new-window',
          '-t',
          'ctl',
          '-n',
          win,
          `sh -c '"$0" "$1" "$2"; echo $? > "$3"' ${process.execPath} ${BIN} ${dir} ${codeFile}`,
        );
        await until(() => /┌/.test(tmux('capture-pane', '-p', '-t', `ctl:${win}`).stdout), `a frame in ${win}`, 60_000);
        await new Promise((res) => setTimeout(res, 2500)); // a few refreshes
        const buffers = tmux('list-buffers').stdout.trim();
        const title = tmux('display', '-p', '-t', `ctl:${win}`, '#{pane_title}').stdout.trim();
        assert.equal(buffers, '', `dir ${i}: a paste buffer appeared (FUZZ_SEED=${SEED})`);
        assert.doesNotMatch(title, /pwned|x\.yaml/, `dir ${i}: the pane title was set (FUZZ_SEED=${SEED})`);
        tmux('send-keys', '-t', `ctl:${win}`, 'q');
        await until(
          () => tmux('display', '-p', '-t', `ctl:${win}`, '#{pane_dead}').stdout.trim() === '1',
          `the cockpit in ${win} to quit`,
          30_000,
        );
        await until(() => existsSync(codeFile), `the exit code of ${win}`, 10_000);
        assert.equal(readFileSync(codeFile, 'utf8').trim(), '0', `dir ${i}: the cockpit's exit code`);
      }
      console.log(
        `# tmux: 3 hostile dirs, no buffer, no title; control pane ${controlSeen ? 'did' : 'did NOT'} reach tmux with the raw bytes`,
      );
    } finally {
      tmux('kill-server');
    }
  },
);
