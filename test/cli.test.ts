import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from '../src/cli.js';
import { helpText } from '../src/commands/args.js';
import { TRAIN_HELP, TRAIN_OPTIONS } from '../src/trainer/reference/args.js';
import { nsaTopAsync } from './helpers/cli.js';

// the built binary; the calls of a test run side by side
const cli = (args: string[]) => nsaTopAsync(args);

test('the built binary answers --help with every public command', async () => {
  const [r, help, version] = await Promise.all([cli(['--help']), cli(['help']), cli(['--version'])]);
  assert.equal(r.status, 0, r.stderr);
  for (const c of ['status', 'demo', 'train', 'watchdog', 'report', 'preflight', 'launch', 'relaunch', 'attach']) {
    assert.match(r.stdout, new RegExp(`\\b${c}\\b`));
  }
  // the cockpit's own options are in it too
  for (const o of ['--host H', '-i, --identity KEY', '--accept-new-host-key', '--interval S', '--read-only'])
    assert.ok(r.stdout.includes(o), o);
  assert.equal(help.stdout, r.stdout);
  assert.equal(version.stdout, 'nsa-top 0.1.0\n');
});

// Every command of the table, as its user sees it: --help lists each declared option with its help,
// and an unknown option is one line, exit 2, naming it. A new command or option is covered by this
// test without being added to it.
for (const [name, entry] of Object.entries(COMMANDS)) {
  test(`nsa-top ${name}: --help lists every option it takes; an unknown option is one line, exit 2`, async () => {
    const [mod, h, u] = await Promise.all([entry.load(), cli([name, '--help']), cli([name, '--no-such-option'])]);
    assert.equal(h.status, 0, h.stderr);
    if (name === 'train') {
      // the reference trainer parses its own flags (it imports nothing outside itself)
      assert.equal(h.stdout, TRAIN_HELP);
      for (const o of Object.keys(TRAIN_OPTIONS).filter((o) => o !== 'rank-worker'))
        assert.match(TRAIN_HELP, new RegExp(`--${o}\\b`), `train --help lacks --${o}`);
    } else {
      const spec = mod.command;
      assert.ok(spec, `src/commands/${name}.ts exports no \`command\` declaration`);
      assert.equal(spec.name, name);
      assert.equal(h.stdout, helpText(spec));
      for (const [o, d] of [...Object.entries(spec.options), ['read-only', { help: 'refuse' }] as const]) {
        const line = h.stdout.split('\n').find((l) => new RegExp(`^ {2}(-\\w, )?--${o}\\b`).test(l));
        assert.ok(line, `${name} --help has no line for --${o}`);
        assert.ok(d.help.trim().length > 0 && line.includes(d.help.split('\n')[0]!), `${name} --${o}: its help`);
      }
    }
    assert.equal(u.status, 2, u.stderr);
    assert.equal(u.stderr.trim().split('\n').length, 1, u.stderr);
    assert.match(u.stderr, /unknown option '?--no-such-option/);
  });
}

test('--x=v and --x v are the same on a real command; a bad number is one line naming the option', async () => {
  const [w1, w2, a, b, c] = await Promise.all([
    cli(['watchdog', '--interval', 'abc']),
    cli(['watchdog', '--interval=abc']),
    cli(['status', '/nonexistent/nsa-top-x', '--host', 'local']),
    cli(['status', '/nonexistent/nsa-top-x', '--host=local']),
    // `--` ends the options: a run dir may start with '-'
    cli(['status', '--', '--json']),
  ]);
  for (const r of [w1, w2]) {
    assert.equal(r.status, 2);
    assert.equal(r.stderr, "nsa-top: watchdog: --interval needs a number >= 0.05, got 'abc'\n");
  }
  assert.equal(a.status, 2);
  assert.deepEqual([b.status, b.stderr], [a.status, a.stderr]);
  assert.equal(c.status, 2);
  assert.match(c.stderr, /run dir not found: .*--json/);
});

// `nsa-top profiles | head -1`: the reader went away before the command wrote. The command ends as
// it would have (its own exit code), with nothing on stderr — before, an unhandled EPIPE's stack trace.
test('a reader that has gone (closed pipe) ends a printing command quietly, with its own exit code', async () => {
  const { spawn } = await import('node:child_process');
  const { BIN } = await import('./helpers/cli.js');
  const run = (args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const c = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      c.stdout.destroy(); // closed before the child has even started: its every write fails
      let stderr = '';
      c.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      c.on('error', reject);
      c.on('close', (code) => resolve({ code, stderr }));
    });
  const fixture = fileURLToPath(new URL('./fixtures/nsa-vibe/single/', import.meta.url));
  // status prints through fd 1 itself (src/stdout.ts), not process.stdout: the same quiet end
  const [profiles, unknown, status, help] = await Promise.all([
    run(['profiles']),
    run(['status', '--no-such-option']),
    run(['status', fixture, '--json']),
    run(['status', '--help']),
  ]);
  assert.deepEqual(profiles, { code: 0, stderr: '' });
  assert.deepEqual(status, { code: 0, stderr: '' });
  assert.deepEqual(help, { code: 0, stderr: '' });
  assert.equal(unknown.code, 2);
  assert.doesNotMatch(unknown.stderr, /EPIPE|at /);
});

/**
 * `nsa-top ARGS…` started as installed (through bin/nsa-top.js's shebang: its node flags), with
 * `preload` (CommonJS source) required first through NODE_OPTIONS; `body` gets the runner, which
 * resolves with the process's stderr, or rejects when it exits non-zero and `ok` says it must not.
 */
async function asInstalled(
  preload: string,
  body: (run: (args: string[], ok?: boolean) => Promise<string>) => Promise<void>,
): Promise<void> {
  const { execFile } = await import('node:child_process');
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { BIN } = await import('./helpers/cli.js');
  const dir = mkdtempSync(join(tmpdir(), 'nsa-installed-'));
  try {
    const hook = join(dir, 'hook.cjs');
    writeFileSync(hook, preload);
    await body(
      (args, ok = false) =>
        new Promise<string>((resolve, reject) =>
          execFile(BIN, args, { env: { ...process.env, NODE_OPTIONS: `--require ${hook}` } }, (e, _o, err) =>
            e && ok ? reject(e) : resolve(err),
          ),
        ),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// bin/nsa-top.js's sh launcher picks node's flags by command (its comment says why): a one-shot
// status without TurboFan, unless it reads a whole history (--full) or the journal (--at).
test('started as installed, status runs node without its optimising compiler unless --full or --at', async () => {
  const none = '/nonexistent/nsa-top-no-such-run';
  await asInstalled(
    "process.on('exit', () => process.stderr.write(`execArgv ${process.execArgv.join(' ')}\\n`));\n",
    async (run) => {
      const flags = async (args: string[]) => {
        const err = await run(args);
        return /execArgv (.*)/.exec(err)?.[1] ?? `no execArgv in: ${err}`;
      };
      const [plain, json, full, fullEq, at, report, version] = await Promise.all([
        flags(['status', none]),
        flags(['status', none, '--json']),
        flags(['status', none, '--full']),
        flags(['status', '--full=true', none]),
        flags(['status', none, '--at', 'step=5']),
        flags(['report', none]),
        flags(['--version']),
      ]);
      assert.equal(plain, '--no-opt');
      assert.equal(json, '--no-opt');
      for (const [what, f] of Object.entries({ full, fullEq, at, report })) assert.equal(f, '', what);
      assert.match(version, /--predictable/);
      assert.doesNotMatch(version, /--no-opt/);
    },
  );
});

// bin/nsa-top.js runs node with --predictable (its comment says why), which seeds Math.random the
// same in every process; nsa-top draws from the OS instead, so two processes never draw alike.
test('two nsa-top processes, started as installed (shebang flags), draw different random numbers', async () => {
  // what the process draws after nsa-top has set itself up, written as it exits
  await asInstalled(
    "process.on('exit', () => process.stderr.write(`draw ${Math.random()} ${Math.random()}\\n`));\n",
    async (run) => {
      const draw = async () => {
        const err = await run(['--version'], true);
        return /draw (\S+) (\S+)/.exec(err)?.slice(1).join(' ') ?? `no draw in: ${err}`;
      };
      const [a, b] = await Promise.all([draw(), draw()]);
      assert.match(a, /^0\.\d+ 0\.\d+$/);
      assert.notEqual(a, b);
      for (const x of [...a.split(' '), ...b.split(' ')]) assert.ok(Number(x) >= 0 && Number(x) < 1);
    },
  );
});
