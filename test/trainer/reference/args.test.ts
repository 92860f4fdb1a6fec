// The reference trainer's command line (src/trainer/reference/args.ts): util.parseArgs, loosely, as
// the real trainer's argparse reads it — a value may start with '-', --resume's value is optional —
// and every flag that is not one of them is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTrainArgs, UsageError } from '../../../src/trainer/reference/args.js';

test('--x=v and --x v are the same; a value may start with - (argparse reads --seed -5)', () => {
  assert.deepEqual(parseTrainArgs(['--steps=5', '--out=o']), parseTrainArgs(['--steps', '5', '--out', 'o']));
  const a = parseTrainArgs(['--seed', '-5', '--lr', '3e-4', '--inject', 'hang@step=3', '--inject=nan@step=4']);
  assert.equal(a.seed, -5);
  assert.equal(a.lr, 3e-4);
  assert.deepEqual(
    a.injections.map((i) => i.kind),
    ['hang', 'nan'],
  );
  assert.equal(parseTrainArgs(['--ranks', '3', '--save-every', '0']).saveEvery, 0);
});

test('--resume: bare, =CKPT, CKPT, or followed by a flag', () => {
  assert.equal(parseTrainArgs(['--resume']).resume, 'auto');
  assert.equal(parseTrainArgs(['--resume=']).resume, 'auto');
  assert.equal(parseTrainArgs(['--resume=a.pt']).resume, 'a.pt');
  assert.equal(parseTrainArgs(['--resume', 'a.pt', '--steps', '4']).resume, 'a.pt');
  const b = parseTrainArgs(['--resume', '--steps', '4']);
  assert.deepEqual([b.resume, b.steps], ['auto', 4]);
  assert.equal(parseTrainArgs([]).resume, null);
});

test('--heartbeat-every, --rank-worker and -h are switches', () => {
  assert.equal(parseTrainArgs(['--heartbeat-every']).heartbeatEvery, true);
  assert.equal(parseTrainArgs(['--heartbeat-every=on']).heartbeatEvery, true);
  assert.equal(parseTrainArgs(['--heartbeat-every=0']).heartbeatEvery, false);
  assert.equal(parseTrainArgs(['--rank-worker']).rankWorker, true);
  assert.equal(parseTrainArgs(['-h']).help, true);
  assert.equal(parseTrainArgs(['--help']).help, true);
});

test('what argparse would refuse is refused, naming the flag', () => {
  for (const [argv, re] of [
    [['--bogus'], /^unknown option '--bogus'/],
    [['--bogus=3'], /^unknown option '--bogus'/],
    [['-x'], /^unknown option '-x'/],
    [['--'], /^unknown option '--'/],
    [['stray'], /^unexpected argument 'stray'/],
    [['--out'], /^--out needs a value$/],
    [['--out', '--steps', '3'], /^--out needs a value$/],
    [['--steps', 'ten'], /^--steps needs an integer, got 'ten'$/],
    [['--seq-len', '4'], /^--seq-len must be >= 8, got 4$/],
    [['--ranks', '17'], /^--ranks 17: at most 16/],
    [['--lr', '-1'], /^--lr needs a positive number, got '-1'$/],
    [['--kernels', 'cuda'], /^--kernels must be wasm, js or auto/],
  ] as const) {
    assert.throws(
      () => parseTrainArgs([...argv]),
      (e: Error) => e instanceof UsageError && re.test(e.message),
      argv.join(' '),
    );
  }
});
