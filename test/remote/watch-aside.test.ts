// Asks run aside in the watch loop (watch-script.ts `a`, `p`, `J`): a look, the host's resources and
// the process table run side by side in the loop's shell and are answered together, in the order
// asked, once J comes; an answer keeps its exit and last stderr line; the slot files go with the
// loop; where there is no scratch file (posix mode) the same asks run one after another, answered
// the same. Run by a real `sh`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WATCH_SCRIPT } from '../../src/remote/ssh/watch-script.js';

const NONCE = 'f00d';

/** runs the loop with `input` on its stdin (then end of input); its stdout and what is left in TMPDIR */
async function loop(
  mode: string,
  input: string,
  setup?: (dir: string) => void,
): Promise<{ out: string; left: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-watch-aside-'));
  try {
    setup?.(dir);
    const p = spawn('sh', ['-c', WATCH_SCRIPT, 'nsa-top-watch', mode, NONCE], {
      env: { ...process.env, TMPDIR: dir },
    });
    let out = '';
    p.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise((r) => p.once('exit', r));
    p.stdin.end(input);
    await exited;
    return { out, left: readdirSync(dir) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** an `a`/`x` ask: ID, the script, its args */
const ask = (kind: string, id: number, script: string, ...args: string[]) =>
  [`${kind} ${id} ${args.length + 1}`, `${script}|`, ...args.map((a) => `${a}|`)].join('\n') + '\n';

/** an answer as the loop frames it */
const answer = (id: number, stdout: string, rc: number, err = '') =>
  `Q ${id}\n${stdout}\n@@Q ${id} ${NONCE}@@\nq ${id} ${rc} ${err}\n`;

test('asks run aside run side by side and are answered at J, in the order asked, exit and stderr kept', async () => {
  const flag = join(tmpdir(), `nsa-watch-aside-flag-${process.pid}`);
  rmSync(flag, { force: true });
  try {
    // the first waits (up to 10 s) for a file only the second makes: one after another it would say "alone"
    const first =
      'i=0; while [ ! -f "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; [ -f "$1" ] && echo together || echo alone';
    const { out, left } = await loop(
      'auto',
      ask('a', 1, first, flag) +
        ask('a', 2, ': > "$1"; printf two; echo oops >&2; exit 3', flag) +
        'J\n' +
        // after J, a plain ask is answered in turn as before
        ask('x', 3, 'echo three'),
    );
    const body = out.slice(out.indexOf('\n', out.indexOf('H ')) + 1);
    assert.equal(body, answer(1, 'together\n', 0) + answer(2, 'two', 3, 'oops') + answer(3, 'three\n', 0));
    assert.deepEqual(left, [], "the loop's scratch and slot files went with it");
  } finally {
    rmSync(flag, { force: true });
  }
});

test('the process table aside (p) is answered as P is, at J; nothing aside and a J alone answer nothing', async () => {
  const table = (id: number, kind: string) => `${kind} ${id} - list - ${process.pid} |\n`;
  const { out } = await loop('auto', 'J\n' + table(1, 'p') + ask('a', 2, 'echo two') + 'J\n' + table(3, 'P'));
  const body = out.slice(out.indexOf('\n', out.indexOf('H ')) + 1);
  const p1 = body.indexOf('P 1\n');
  const end1 = body.indexOf(`\n@@P 1 ${NONCE}@@\n`);
  assert.ok(p1 === 0 && end1 > p1, `the table first, as asked:\n${body}`);
  assert.match(body.slice(p1, end1), new RegExp(`\\nS ${process.pid} \\(`), 'this process is in it');
  const rest = body.slice(end1 + `\n@@P 1 ${NONCE}@@\n`.length);
  assert.ok(rest.startsWith(answer(2, 'two\n', 0) + 'P 3\n'), `then the script, then the plain table:\n${rest}`);
});

test('without a scratch file (posix mode) asks aside run in turn and are answered the same', async () => {
  const { out, left } = await loop(
    'posix',
    ask('a', 1, 'echo one') + ask('a', 2, 'echo two >&2; exit 4') + 'J\n' + ask('x', 3, 'echo three'),
  );
  const body = out.slice(out.indexOf('\n', out.indexOf('H ')) + 1);
  assert.equal(body, answer(1, 'one\n', 0) + answer(2, '', 4, 'two') + answer(3, 'three\n', 0));
  assert.deepEqual(left, []);
});

test('an exec in the loop (`exec "$@"`, run by timeout itself) answers as through a shell: output, exit, 127 when missing', async () => {
  const exec = (id: number, ...argv: string[]) => ask('x', id, 'exec "$@"', ...argv);
  const { out } = await loop(
    'auto',
    exec(1, 'sh', '-c', 'echo "$0 $1"; echo bad >&2; exit 5', 'a b', 'c') +
      exec(2, 'nsa-top-no-such-command-here') +
      ask('a', 3, 'exec "$@"', 'printf', '%s|', 'x y') +
      'J\n',
  );
  const body = out.slice(out.indexOf('\n', out.indexOf('H ')) + 1);
  assert.equal(body.slice(0, body.indexOf('Q 2\n')), answer(1, 'a b c\n', 5, 'bad'));
  assert.match(body, /\nq 2 127 .*nsa-top-no-such-command-here/);
  assert.ok(body.endsWith(answer(3, 'x y|', 0)), body);
});

test("a loop, ending, sweeps the scratch files a SIGKILLed loop left: this user's, its pid gone, 10 minutes quiet", async () => {
  // a pid that was a process and is no more
  const gone = spawn('true');
  await new Promise((r) => gone.once('exit', r));
  const dead = gone.pid!;
  const old = Date.now() / 1000 - 20 * 60;
  const left = {
    // what a loop killed 20 minutes ago left: its scratch file, the bulk read's and an aside slot
    swept: [`nsa-top-watch.${dead}.aB3dE9`, `nsa-top-watch.${dead}.aB3dE9.c`, `nsa-top-watch.${dead}.aB3dE9.j1`],
    kept: [
      // the same dead pid, but written a moment ago (a loop of another PID namespace sharing /tmp)
      `nsa-top-watch.${dead}.fR3sh1`,
      // a live loop's (this process stands in for it), quiet for 20 minutes
      `nsa-top-watch.${process.pid}.qU1et2.fl`,
      // an older nsa-top's name, without a pid: whose it is cannot be told
      'nsa-top-watch.x7Yz9Q.c',
      'someone-elses-file',
    ],
  };
  const { left: after } = await loop('auto', 'J\n', (dir) => {
    for (const name of [...left.swept, ...left.kept]) {
      writeFileSync(join(dir, name), 'x');
      if (!name.includes('fR3sh1')) utimesSync(join(dir, name), old, old);
    }
  });
  assert.deepEqual(after.sort(), [...left.kept].sort(), "only the dead loop's quiet files were removed");
});
