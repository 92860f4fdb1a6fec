// The command-definition helper (src/commands/args.ts): one declaration gives the parser and the
// --help text. What every command's user sees: `--x=v` is `--x v`, `--` ends the options, an
// unknown option or a missing or bad value is one line (exit 2) naming the option.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defineCommand, helpText, parseCommand } from '../../src/commands/args.js';
import { CliError } from '../../src/commands/errors.js';

const spec = defineCommand({
  name: 'demo-cmd',
  positional: { name: 'RUN_DIR', help: 'the run' },
  options: {
    json: { type: 'boolean', help: 'as JSON' },
    host: { type: 'string', value: 'H', help: 'another machine' },
    identity: { type: 'string', short: 'i', value: 'KEY', needs: 'a key file', help: 'a key\nover two lines' },
    interval: { type: 'number', min: 0.2, max: 3600, default: 1, value: 'S', help: 'refresh period' },
    steps: { type: 'number', integer: true, min: 1, value: 'N', help: 'steps' },
    inject: { type: 'string', multiple: true, value: 'SPEC', help: 'a failure to rehearse' },
    phase: { type: 'string', choices: ['0', '1', '2', '3'], help: 'the phase' },
  },
  about: 'Does a thing.',
  epilog: 'Exit: 0 fine.',
});

/** the CliError parseCommand throws for argv */
function error(argv: string[], s: Parameters<typeof parseCommand>[0] = spec): CliError {
  try {
    parseCommand(s, argv);
  } catch (e) {
    assert.ok(e instanceof CliError, String(e));
    return e;
  }
  assert.fail(`${argv.join(' ')} parsed`);
}

test('--x=v and --x v are the same; -i KEY and --identity=KEY too', () => {
  for (const [a, b] of [
    [['--host=box'], ['--host', 'box']],
    [['--interval=2.5'], ['--interval', '2.5']],
    [['-i', 'k'], ['--identity=k']],
    [
      ['--inject=a', '--inject=b'],
      ['--inject', 'a', '--inject', 'b'],
    ],
    [
      ['--phase=2', 'dir'],
      ['dir', '--phase', '2'],
    ],
  ]) {
    assert.deepEqual(parseCommand(spec, a!), parseCommand(spec, b!), `${a!.join(' ')} vs ${b!.join(' ')}`);
  }
  const p = parseCommand(spec, ['dir', '--host=user@box:22', '-i', 'k', '--inject', 'a', '--inject=b', '--steps=3']);
  assert.equal(p?.positional, 'dir');
  assert.equal(p?.values.host, 'user@box:22');
  assert.equal(p?.values.identity, 'k');
  assert.deepEqual(p?.values.inject, ['a', 'b']);
  assert.equal(p?.values.steps, 3);
});

test('defaults: booleans false, numbers their default, unset strings undefined, multiple []', () => {
  const p = parseCommand(spec, []);
  assert.deepEqual(p, {
    positional: undefined,
    rest: [],
    values: {
      json: false,
      host: undefined,
      identity: undefined,
      interval: 1,
      steps: undefined,
      inject: [],
      phase: undefined,
      'read-only': false,
      help: false,
    },
  });
});

test('`--` ends the options: what follows is positional, even when it starts with -', () => {
  assert.equal(parseCommand(spec, ['--json', '--', '--weird-dir'])?.positional, '--weird-dir');
  assert.equal(parseCommand(spec, ['--', '--json'])?.values.json, false);
  const launch = defineCommand({
    name: 'launch',
    options: { steps: { type: 'number', value: 'N', help: 'steps' } },
    passThrough: { name: 'TRAINER_ARGS', help: 'to the trainer' },
  });
  const p = parseCommand(launch, ['--steps', '3', '--', '--inject', 'crash@step=4', 'x']);
  assert.deepEqual(p?.rest, ['--inject', 'crash@step=4', 'x']);
  assert.equal(p?.values.steps, 3);
  assert.match(error(['stray'], launch).message, /^launch: unexpected argument 'stray' \(TRAINER_ARGS: after --\)$/);
});

test('an unknown option is a one-line exit-2 error that names it', () => {
  for (const [argv, name] of [
    [['--bogus'], '--bogus'],
    [['--bogus=3'], '--bogus'],
    [['dir', '-x'], '-x'],
  ] as const) {
    const e = error([...argv]);
    assert.equal(e.exitCode, 2);
    assert.equal(e.message, `demo-cmd: unknown option ${name} (see nsa-top demo-cmd --help)`);
  }
});

test('a missing or empty value, a value for a flag, a bad number or choice: one line, exit 2, the option named', () => {
  for (const [argv, re] of [
    [['--host'], /^demo-cmd: --host needs a value \(H\)$/],
    [['--host='], /^demo-cmd: --host needs a value \(H\)$/],
    [['-i'], /^demo-cmd: -i\/--identity needs a key file$/],
    [['--host', '-x'], /^demo-cmd: --host needs a value \(H\); one that starts with '-' is written --host=-…$/],
    [['--host', '--json'], /^demo-cmd: --host needs a value/],
    [['--json=yes'], /^demo-cmd: --json takes no value$/],
    [['--interval', 'abc'], /^demo-cmd: --interval needs a number between 0.2 and 3600, got 'abc'$/],
    [['--interval=0.1'], /^demo-cmd: --interval needs a number between 0.2 and 3600, got '0.1'$/],
    [['--steps', '1.5'], /^demo-cmd: --steps needs an integer >= 1, got '1.5'$/],
    [['--steps', ' '], /^demo-cmd: --steps needs an integer >= 1, got ' '$/],
    [['--phase', '4'], /^demo-cmd: --phase takes 0, 1, 2 or 3, got '4'$/],
    [['a', 'b'], /^demo-cmd: more than one RUN_DIR given: a, b$/],
  ] as const) {
    const e = error([...argv]);
    assert.equal(e.exitCode, 2);
    assert.match(e.message, re, argv.join(' '));
    assert.equal(e.message.split('\n').length, 1);
  }
  assert.equal(parseCommand(spec, ['--host=-x'])?.values.host, '-x', "a value starting with '-' after =");
});

test('required options and positionals are named when missing', () => {
  const s = defineCommand({
    name: 'r',
    positional: { name: 'RUN_DIR', required: true, help: 'a launched run' },
    options: { profile: { type: 'string', required: true, value: 'NAME', help: 'a profile' } },
  });
  assert.equal(error(['--profile', 'p'], s).message, 'r: RUN_DIR missing: a launched run');
  assert.equal(error(['dir'], s).message, 'r: --profile NAME is required: a profile (see nsa-top r --help)');
  assert.equal(parseCommand(s, ['dir', '--profile', 'p'])?.values.profile, 'p');
});

test('--help: the usage line, every option with its value name and help, the global ones, the prose', () => {
  const h = helpText(spec);
  assert.match(h, /^usage: nsa-top demo-cmd \[RUN_DIR\] \[--json\] \[--host H\] \[-i KEY\]/);
  assert.match(h, /\[--inject SPEC\]\.\.\./);
  assert.match(h, /\n {2}-i, --identity KEY +a key\n +over two lines\n/);
  assert.match(h, /\n {2}--phase 0\|1\|2\|3 +the phase\n/);
  assert.match(h, /\n {2}--read-only +refuse every dump/);
  assert.match(h, /\n {2}-h, --help +this help\n/);
  assert.match(h, /\n\nDoes a thing\.\n\n/);
  assert.match(h, /\n\nExit: 0 fine\.\n$/);
  assert.ok(
    h.split('\n').every((l) => l.length <= 120),
    'no line past 120 columns',
  );
});
